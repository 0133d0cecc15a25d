"""The slot controller on its own: pure, driven by a loop that plays the cluster."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.controller import ControllerConfig, PolicyState, start_by_slot, tick
from autoscaler.errors import ConfigError
from autoscaler.model import CostParams, Job, StepSpec
from autoscaler.policies import plan
from autoscaler.workload import workload_from_trace
from autoscaler.model import Trace, TraceJob

TAU = 300.0


def job(job_id: str, submit_s: float, length_s: float, deadline_s: float) -> Job:
    return Job(job_id, job_id, "t", submit_s, deadline_s, length_s, StepSpec(args=("true",)))


def simulate(jobs: list[Job], config: ControllerConfig, slots: int):
    """Feed jobs in at their submit slot, tick every slot, run released jobs for their length."""
    live: dict[str, Job] = {}
    state = PolicyState()
    decisions = []
    pending = sorted(jobs, key=lambda j: j.submit_s)
    for t in range(slots):
        while pending and config.slot_of(pending[0].submit_s) <= t:
            j = pending.pop(0)
            live[j.job_id] = j
        for j in list(live.values()):
            if j.state == "running" and j.released_s + j.length_s <= t * TAU:
                del live[j.job_id]
        decision, state = tick(t * TAU, list(live.values()), state, config)
        decisions.append(decision)
        for job_id in decision.release:
            live[job_id] = dataclasses.replace(live[job_id], state="running", released_s=t * TAU)
    return decisions, live


def test_two_short_jobs_are_spread_over_the_deadline():
    # Two 1-slot jobs at slot 0 with D = 1: GCP-U spreads 2 units over slots 0 and 1
    # (m = 1, 1), so one job starts now and the other, due by slot 1, starts next slot.
    config = ControllerConfig(policy="gcp-u", deadline_slots=1, slot_s=TAU)
    jobs = [job("a", 0, 60, 2 * TAU), job("b", 10, 60, 2 * TAU)]
    decisions, _ = simulate(jobs, config, 3)
    assert [d.capacity for d in decisions] == [1.0, 1.0, 0.0]
    assert [d.release for d in decisions] == [("a",), ("b",), ()]
    assert [d.nodes for d in decisions] == [1, 1, 0]


def test_due_job_is_released_even_beyond_the_policy_nodes():
    # follow gives m_0 = 2 for two jobs at slot 0, but the third job's start-by slot is 0 too:
    # it is released anyway and the nodes raised to 3.
    config = ControllerConfig(policy="follow", slot_s=TAU)
    jobs = [job("a", 0, 60, TAU), job("b", 0, 60, TAU), job("c", 0, 60, 0.5 * TAU)]
    decision, _ = tick(0.0, jobs[:2], PolicyState(), config)
    assert decision.nodes == 2
    decision, _ = tick(0.0, jobs, PolicyState(), config)
    assert set(decision.release) == {"a", "b", "c"} and decision.release[0] == "c"
    assert decision.nodes == 3


def test_a_slot_is_decided_once():
    config = ControllerConfig(slot_s=TAU)
    _, state = tick(0.0, [], PolicyState(), config)
    with pytest.raises(ConfigError, match="already decided"):
        tick(10.0, [], state, config)
    assert PolicyState.from_json(state.to_json()) == state


def test_unknown_policy_and_bad_nodes_are_refused():
    with pytest.raises(ConfigError, match="policy"):
        ControllerConfig(policy="lifo")
    with pytest.raises(ConfigError, match="0 < delta < deadline_slots"):
        ControllerConfig(policy="vfw", deadline_slots=1)
    with pytest.raises(ConfigError, match="min_nodes <= max_nodes"):
        ControllerConfig(min_nodes=5, max_nodes=2)


jobs_strategy = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=20 * TAU, allow_nan=False),  # submit
        st.floats(min_value=1, max_value=4 * TAU, allow_nan=False),  # length
        st.integers(min_value=0, max_value=6),  # slack in slots beyond the length
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(spec=jobs_strategy, policy=st.sampled_from(["gcp-u", "gcp", "vfw", "follow"]), deadline_slots=st.integers(0, 4))
def test_every_job_starts_by_its_start_by_slot_and_none_is_lost(spec, policy, deadline_slots):
    if policy == "vfw":
        deadline_slots = max(2, deadline_slots)
    jobs = []
    for i, (submit, length, slack) in enumerate(spec):
        # Deadline at least one slot past the job's end, so its start-by slot is not before its submit slot.
        deadline = (np.floor(submit / TAU) + np.ceil(length / TAU) + slack + 1) * TAU
        jobs.append(job(f"j{i}", submit, length, deadline))
    config = ControllerConfig(policy=policy, deadline_slots=deadline_slots, slot_s=TAU, max_nodes=10_000, max_deadline_slots=12)
    decisions, live = simulate(jobs, config, 40)
    released = [job_id for d in decisions for job_id in d.release]
    assert sorted(released) == sorted(j.job_id for j in jobs)  # every job once
    assert not any(d.late for d in decisions)
    by_id = {j.job_id: j for j in jobs}
    for d in decisions:
        # Within a slot, release follows earliest start-by first.
        order = [start_by_slot(by_id[i], config) for i in d.release]
        assert order == sorted(order)
        for job_id in d.release:
            assert start_by_slot(by_id[job_id], config) >= d.slot


def test_replaying_workload_a_through_the_controller_gives_replays_capacity():
    from autoscaler.cli import load_workload
    from autoscaler.model import LengthModel
    from autoscaler.workload import estimate_length_s, read_swim
    from importlib import resources

    with resources.as_file(resources.files("autoscaler") / "data" / "FB-2009_samples_24_times_1hr_0.tsv") as path:
        trace = read_swim(path)
    sizes = np.array([(j.map_input_bytes, j.shuffle_bytes, j.reduce_output_bytes) for j in trace.jobs])
    lengths = estimate_length_s(sizes[:, 0], sizes[:, 1], sizes[:, 2])
    deadline_slots = 2
    jobs = [
        job(j.job_id, j.submit_s, float(length), j.submit_s + float(length) + deadline_slots * TAU)
        for j, length in zip(trace.jobs, lengths)
        if j.submit_s < 86400
    ]
    config = ControllerConfig(policy="gcp-u", deadline_slots=deadline_slots, slot_s=TAU, max_nodes=10**6)
    decisions, _ = simulate(jobs, config, 288 + deadline_slots)
    workload = workload_from_trace(trace)
    expected = plan("gcp-u", workload.active, deadline_slots, CostParams()).capacity
    np.testing.assert_allclose([d.capacity for d in decisions], expected, atol=1e-9)
    assert not any(d.late for d in decisions)
