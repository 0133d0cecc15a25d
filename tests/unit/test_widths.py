"""Jobs of w nodes in the pure core (issue 24): EDF release worked by hand, hypothesis properties that
no release starts a job on fewer than its w nodes, and the work curves counted by brute force."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autoscaler.core.baselines import run_baseline, smallest_fixed_nodes
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import MIB, Job, StepSpec, Trace, TraceJob
from autoscaler.core.release import dispatch
from autoscaler.core.slot_config import ControllerConfig
from autoscaler.core.slot_work import arrived_units, node_seconds_active
from autoscaler.core.twin import TwinConfig
from autoscaler.core.twin_bound import twin_load
from autoscaler.core.workload import job_nodes, workload_from_trace

TAU = 300.0


@dataclass(frozen=True)
class Limits:
    slot_s: float = TAU
    epoch_s: float = 0.0
    min_nodes: int = 0
    max_nodes: int = 20
    due_margin_slots: int = 0


def job(job_id: str, nodes: int, start_by: int, length_s: float = 100.0, state: str = "queued", tenant: str = "t", released_s: float | None = None) -> Job:
    """A job submitted at 0 whose start-by slot is ``start_by`` (deadline = its start + length)."""
    return Job(
        job_id=job_id, name=job_id, tenant=tenant, submit_s=0.0, deadline_s=start_by * TAU + 1.0 + length_s, length_s=length_s,
        step=StepSpec(), state=state, nodes=nodes, released_s=released_s,
    )  # fmt: skip


# -- EDF release, by hand ------------------------------------------------------------------------


def test_a_wide_job_not_due_waits_for_its_nodes_and_a_narrower_one_behind_it_takes_them():
    # m_t = 6: six nodes. A (w = 8) does not fit and is not due; B (w = 2) behind it does.
    d = dispatch(0, 6.0, [job("A", 8, start_by=5), job("B", 2, start_by=6)], Limits())
    assert d.release == ("B",) and d.nodes == 6
    assert d.waits == (("A", 8, 6),)


def test_a_wide_job_due_gets_extra_nodes_up_to_max_nodes_on_top_of_the_running_jobs_nodes():
    running = job("R", 4, start_by=0, state="running", released_s=0.0)
    d = dispatch(1, 5.0, [running, job("A", 8, start_by=1), job("B", 2, start_by=9)], Limits())
    # R holds 4 of the policy's 5 nodes; A is due: 4 + 8 = 12 nodes; B (not due) finds none free.
    assert d.release == ("A",) and d.nodes == 12 and d.running_nodes == 4
    assert d.nodes_by_tenant == {"t": 12}


def test_under_overload_a_tenant_whose_next_job_does_not_fit_the_free_nodes_waits_and_another_tenant_goes():
    jobs = [job("A", 8, start_by=0, tenant="a"), job("B", 3, start_by=0, tenant="b"), job("C", 2, start_by=0, tenant="b")]
    d = dispatch(0, 0.0, jobs, Limits(max_nodes=6), dominant_shares={"a": 0.5, "b": 0.5})
    assert d.overloaded  # 13 nodes due, 6 at most
    assert d.release == ("B", "C") and d.nodes == 5
    assert d.waits == (("A", 8, 6),)


def test_under_node_seconds_a_wide_job_takes_its_nodes_whole_for_the_slot():
    # Ten 30-s one-node jobs share a node's slot; a 30-s job of w = 3 takes three whole nodes.
    narrow = [job(f"n{i}", 1, start_by=0, length_s=30.0) for i in range(10)]
    d = dispatch(0, 0.0, [*narrow, job("W", 3, start_by=0, length_s=30.0)], Limits(), work_model="node-seconds")
    assert set(d.release) == {*(j.job_id for j in narrow), "W"}
    assert d.node_s_released == pytest.approx(10 * 30.0 + 3 * TAU)
    assert d.nodes == 4


# -- properties: never fewer than w nodes ----------------------------------------------------------

jobs_strategy = st.lists(
    st.tuples(st.integers(1, 6), st.integers(-2, 6), st.floats(1.0, 900.0), st.sampled_from(["a", "b"])), min_size=1, max_size=12
)
running_strategy = st.lists(st.tuples(st.integers(1, 4), st.floats(1.0, 900.0)), max_size=3)


@settings(max_examples=200, deadline=None)
@given(jobs_strategy, running_strategy, st.floats(0.0, 30.0), st.integers(6, 24), st.sampled_from(["job-slots", "node-seconds"]))
def test_no_release_starts_a_job_on_fewer_nodes_than_its_w(queued, running, capacity, max_nodes, work_model):
    limits = Limits(max_nodes=max_nodes)
    assume(sum(w for w, _ in running) <= max_nodes)  # the running jobs were started within the cap
    active = [job(f"q{i}", w, s, length_s=length, tenant=tenant) for i, (w, s, length, tenant) in enumerate(queued)]
    active += [job(f"r{i}", w, 0, length_s=length, state="running", released_s=0.0) for i, (w, length) in enumerate(running)]
    d = dispatch(2, capacity, active, limits, dominant_shares={"a": 0.5, "b": 0.5}, work_model=work_model)
    by_id = {j.job_id: j for j in active}
    running_nodes = sum(w for w, _ in running)
    released_nodes = sum(by_id[i].nodes for i in d.release)
    assert isinstance(d.nodes, int) and 0 <= d.nodes <= max_nodes
    if work_model == "job-slots":
        # every released job has its w nodes beside the running jobs' (none shared)
        assert running_nodes + released_nodes <= d.nodes
    else:
        # a wide job takes w whole nodes of its own, beside those the running jobs hold (to max_nodes)
        wide_nodes = sum(by_id[i].nodes for i in d.release if by_id[i].nodes > 1)
        assert wide_nodes <= d.nodes
        assert min(max_nodes, running_nodes + wide_nodes) <= d.nodes
    for job_id, w, free in d.waits:
        assert job_id not in d.release and w == by_id[job_id].nodes > free


# -- the work curves count w -----------------------------------------------------------------------


def config(**options) -> ControllerConfig:
    return ControllerConfig(slot_s=TAU, policy="hold", deadline_slots=2, max_nodes=64, **options)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 3000.0), st.floats(0.0, 2000.0), st.integers(1, 5)), min_size=1, max_size=8))
def test_a_job_of_w_nodes_is_w_times_the_work_of_one_node_in_every_curve(specs):
    cfg = config(work_model="node-seconds")
    wide = [
        Job(f"j{i}", "n", "t", submit_s=s, deadline_s=s + length + 600.0, length_s=length, step=StepSpec(), nodes=w)
        for i, (s, length, w) in enumerate(specs)
    ]
    one = [replace(j, nodes=1) for j in wide]
    n_slots = 30
    expected = sum(j.nodes * node_seconds_active([o], cfg, n_slots) for j, o in zip(wide, one))
    np.testing.assert_allclose(node_seconds_active(wide, cfg, n_slots), expected, atol=1e-9)
    for slot in (0, 3, 12):
        for j, o in zip(wide, one):
            assert arrived_units(j, slot, cfg) == pytest.approx(j.nodes * arrived_units(o, slot, cfg))
            assert arrived_units(j, slot, config()) == j.nodes * arrived_units(o, slot, config())
    twin = TwinConfig()
    load = twin_load(wide, twin, TAU, 0.0, n_slots)
    np.testing.assert_allclose(load, sum(j.nodes * twin_load([o], twin, TAU, 0.0, n_slots) for j, o in zip(wide, one)), atol=1e-9)


def test_trace_widths_are_mappers_or_reducers_over_the_containers_a_node_holds():
    block = 128 * MIB
    # 10 blocks in, 3 out: 10 containers at once; 4 a node: 3 nodes. 1 byte in, 20 blocks out: 20 reducers: 5.
    assert job_nodes(np.array([10 * block, 1.0]), np.array([3 * block, 20 * block]), 4).tolist() == [3, 5]
    assert job_nodes(np.array([10 * block, 1.0]), np.array([3 * block, 20 * block]), None).tolist() == [1, 1]
    with pytest.raises(ConfigError, match="^containers_per_node: expected a whole number >= 1"):
        job_nodes(np.array([block]), np.array([block]), 0)


def test_the_active_curve_of_a_trace_counts_w_in_each_slot_a_job_is_active():
    block = 128 * MIB
    sizes = [(0.0, 6 * block), (100.0, 2 * block), (700.0, 1 * block), (710.0, 9 * block)]
    trace = Trace("t", tuple(TraceJob(f"j{i}", s, 0.0, size, MIB, MIB) for i, (s, size) in enumerate(sizes)))
    plain = workload_from_trace(trace, slot_s=TAU, window_slots=12)
    wide = workload_from_trace(trace, slot_s=TAU, window_slots=12, containers_per_node=3)
    widths = [2, 1, 1, 3]  # ceil(6/3), ceil(2/3), ceil(1/3), ceil(9/3)
    # brute force: each job alone, times its w
    alone = [workload_from_trace(Trace("t", (t,)), slot_s=TAU, window_slots=12).active for t in trace.jobs]
    np.testing.assert_array_equal(wide.active, sum(w * a for w, a in zip(widths, alone)))
    np.testing.assert_array_equal(wide.released, plain.released)  # jobs submitted, not nodes
    assert math.isclose(plain.active.sum(), sum(a.sum() for a in alone))


def test_the_smallest_fixed_cluster_for_wide_jobs_is_at_least_the_widest_and_meets_every_deadline_on_the_twin():
    twin = TwinConfig(provision_s=0.0)
    jobs = [
        Job(f"j{i}", "n", "t", submit_s=i * 100.0, deadline_s=i * 100.0 + 700.0, length_s=300.0, step=StepSpec(), nodes=w)
        for i, w in enumerate([4, 1, 3, 2, 4])
    ]
    nodes, met = smallest_fixed_nodes(jobs, twin, max_nodes=16, start_s=0.0)
    assert met and nodes >= 4
    played = run_baseline("fixed", jobs, twin, min_nodes=0, max_nodes=16, start_s=0.0, fixed_nodes=nodes)
    assert all(played.steps[f"s-{j.job_id}"].end_s <= j.deadline_s + 1e-6 for j in jobs)
    if nodes > 4:
        fewer = run_baseline("fixed", jobs, twin, min_nodes=0, max_nodes=16, start_s=0.0, fixed_nodes=nodes - 1)
        assert any(fewer.steps[f"s-{j.job_id}"].end_s > j.deadline_s + 1e-6 for j in jobs)


@pytest.mark.parametrize("name", ["managed", "managed-dampened", "custom-rules"])
def test_the_scaling_baselines_grow_to_a_wide_jobs_w_nodes_and_run_every_job(name):
    twin = TwinConfig(provision_s=60.0)
    jobs = [
        Job(f"j{i}", "n", "t", submit_s=i * 50.0, deadline_s=i * 50.0 + 7200.0, length_s=200.0, step=StepSpec(), nodes=w)
        for i, w in enumerate([6, 1, 2])
    ]
    played = run_baseline(name, jobs, twin, min_nodes=1, max_nodes=8, start_s=0.0)
    for j in jobs:
        step = played.steps[f"s-{j.job_id}"]
        assert step.end_s == pytest.approx(step.start_s + 200.0)
        assert len({r[1] for r in played.runs if r[0] == step.step_id}) == j.nodes
    assert 6 <= played.peak_nodes <= 8
