"""The work model "node-seconds" (issue 22): a job is the node time it runs in each slot, and a slot
releases jobs while their node time fits in the nodes', so short jobs share a node.

Under "job-slots" (the paper's model) a 30 s job counted one server for its whole slot and took a
node of its own: on the cluster twin every policy paid 20-30 % more node-hours than EMR managed
scaling. The figures here are by hand: slot_s = 300 s, a tick is 5 s (1/60 slot).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slot_simulation import simulate_slots

from autoscaler.core.controller import ControllerConfig, PolicyState, dispatch, tick
from autoscaler.core.edf import start_by_slot
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.release import running_need_s
from autoscaler.core.slot_work import flow_at, job_ticks, rebuild_future

TAU = 300.0
NODE_S = "node-seconds"


def job(job_id: str, submit_s: float, length_s: float, deadline_s: float, **fields) -> Job:
    return Job(job_id, job_id, "t", submit_s, deadline_s, length_s, StepSpec(args=("true",)), **fields)


def config(policy: str = "follow", work_model: str = NODE_S, **fields) -> ControllerConfig:
    fields = {"deadline_slots": 2, "slot_s": TAU, "max_nodes": 50, **fields}
    return ControllerConfig(policy=policy, work_model=work_model, **fields)


def test_an_unknown_work_model_is_refused_by_name():
    with pytest.raises(ConfigError, match="work_model: expected one of job-slots, node-seconds, got 'jobs'"):
        config(work_model="jobs")


def test_the_policy_key_says_the_work_model_only_when_it_is_not_the_papers():
    assert "work=" not in config(work_model="job-slots").policy_key
    assert config().policy_key.endswith("/work=node-seconds")


def test_a_job_counts_the_ticks_it_runs_in_each_slot():
    # 30 s = 0.1 slot = 6 ticks; 700 s from a slot start: 300 + 300 + 100 s = 60, 60, 20 ticks.
    assert job_ticks(job("a", 0.0, 30.0, 9 * TAU), config(), 0)[3] == {0: 6}
    start, end, _, ticks = job_ticks(job("b", 0.0, 700.0, 9 * TAU), config(), 0)
    assert (start, end, ticks) == (0, 3, {0: 60, 1: 60, 2: 20})
    # Submitted 100 s into slot 0 and counted there: 200 s, 300 s, 200 s; a share rounds up (31 s: 7 ticks).
    assert job_ticks(job("c", 100.0, 700.0, 9 * TAU), config(), 0)[3] == {0: 40, 1: 60, 2: 40}
    assert job_ticks(job("d", 0.0, 31.0, 9 * TAU), config(), 0)[3] == {0: 7}
    assert job_ticks(job("e", 0.0, 0.0, 9 * TAU), config(), 0)[3] == {0: 1}  # no length: still one tick


def test_the_flow_of_a_700_s_job_is_1_1_one_third_and_then_nothing():
    cfg = config()
    flow, ends = (), {}
    loads = []
    for slot in range(5):
        units, ends = flow_at(flow, ends, [job("b", 0.0, 700.0, 9 * TAU)] if slot == 0 else [], slot, cfg)
        flow = tuple(units)
        loads.append(units.sum() / cfg.ticks_per_unit)
    assert loads == pytest.approx([1.0, 1.0, 1 / 3, 0.0, 0.0])
    assert not ends  # every entry taken away: the flow is back to exactly nothing


def test_the_policy_is_handed_server_slots_of_node_time():
    # follow runs what arrives: three 100 s jobs in slot 0 are one server-slot (not three servers).
    jobs = [job(f"j{i}", 0.0, 100.0, 20 * TAU) for i in range(3)]
    decision, _ = tick(0.0, jobs, PolicyState(), config())
    assert decision.load == pytest.approx(1.0) and decision.capacity == pytest.approx(1.0)
    paper, _ = tick(0.0, jobs, PolicyState(), config(work_model="job-slots"))
    assert paper.load == pytest.approx(3.0)


def test_three_100_s_jobs_share_one_node():
    jobs = [job(f"j{i}", 0.0, 100.0, 20 * TAU) for i in range(3)]
    shared = dispatch(0, 1.0, jobs, config(), work_model=NODE_S)
    assert shared.release == ("j0", "j1", "j2") and shared.nodes == 1 and shared.policy_nodes == 1
    assert shared.node_s_released == pytest.approx(300.0) and shared.beyond == ()
    # The paper's model: one job per node, the others wait (none is due).
    one_each = dispatch(0, 1.0, jobs, config(work_model="job-slots"))
    assert one_each.release == ("j0",) and one_each.nodes == 1


def test_a_fourth_100_s_job_waits_unless_it_is_due():
    jobs = [job(f"j{i}", 0.0, 100.0, 20 * TAU) for i in range(4)]
    assert dispatch(0, 1.0, jobs, config(), work_model=NODE_S).release == ("j0", "j1", "j2")
    # Due (deadline - length in slot 0): first in EDF order; the node then holds two of the others.
    jobs[3] = job("j3", 0.0, 100.0, 200.0)
    due = dispatch(0, 1.0, jobs, config(), work_model=NODE_S)
    assert due.release == ("j3", "j0", "j1") and due.nodes == 1 and due.beyond == ()
    # With m_t = 0 only the due job goes out, onto a node raised for it, said in ``beyond``.
    alone = dispatch(0, 0.0, jobs, config(), work_model=NODE_S)
    assert alone.release == ("j3",) and alone.nodes == 1 and alone.policy_nodes == 0 and alone.beyond == ("j3",)


def test_a_700_s_job_holds_its_node_for_its_length():
    cfg = config()
    long = job("long", 0.0, 700.0, 30 * TAU, state="running", released_s=0.0)
    short = job("short", 0.0, 100.0, 30 * TAU)
    # Slot 1: the long job needs the node's whole slot: the short one waits (not due).
    assert running_need_s(long, TAU, TAU) == pytest.approx(300.0)
    assert dispatch(1, 1.0, [long, short], cfg, work_model=NODE_S).release == ()
    # Slot 2: 100 s of it are left, so the short job fits in the 200 s beside it.
    later = dispatch(2, 1.0, [long, short], cfg, work_model=NODE_S)
    assert later.release == ("short",) and later.nodes == 1
    # A queued job longer than a slot needs a whole node: beside 100 s of running work, one node is too little.
    big = job("big", 0.0, 700.0, 30 * TAU)
    assert dispatch(2, 1.0, [long, big], cfg, work_model=NODE_S).release == ()
    assert dispatch(2, 2.0, [long, big], cfg, work_model=NODE_S).release == ("big",)


def test_a_job_running_past_its_estimate_needs_its_length_again():
    # Released at 0 for 30 s and still running at 300 s (it waited for a node): it needs 30 s more.
    late = job("late", 0.0, 30.0, 30 * TAU, state="running", released_s=0.0)
    assert running_need_s(late, TAU, TAU) == pytest.approx(30.0)


def test_a_rebuild_hands_over_the_queued_jobs_node_time():
    # Two 30 s jobs queued since slot 0, rebuilt in slot 1 under follow: 0.2 server-slots in all.
    jobs = [job(f"q{i}", 0.0, 30.0, 20 * TAU) for i in range(2)]
    future = rebuild_future(jobs, 1, config())
    assert sum(sum(units) for units in future.values()) == pytest.approx(0.2)
    paper = rebuild_future(jobs, 1, config(work_model="job-slots"))
    assert sum(sum(units) for units in paper.values()) == pytest.approx(2.0)


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 25))
    jobs = []
    for i in range(n):
        submit_slot = draw(st.integers(0, 6))
        length_s = draw(st.sampled_from([0.0, 5.0, 30.0, 100.0, 299.0, 300.0, 301.0, 700.0, 1500.0]))
        slack_slots = draw(st.integers(0, 8))
        submit_s = submit_slot * TAU
        jobs.append(job(f"j{i:02d}", submit_s, length_s, submit_s + length_s + slack_slots * TAU))
    return jobs


@settings(max_examples=60, deadline=None)
@given(jobs=workloads(), policy=st.sampled_from(["hold", "gcp-u", "vfw", "follow", "gcp"]), margin=st.integers(0, 1))
def test_no_job_is_late_and_released_node_time_fits_the_whole_nodes(jobs, policy, margin):
    # The cap allows every job at once (no overload): no job goes out after its start-by slot, and
    # the node time released in a slot never exceeds the nodes' (the policy's, but for due jobs).
    cfg = config(policy, deadline_slots=4, max_nodes=len(jobs) + 1, release_margin_slots=margin)
    run = simulate_slots(jobs, cfg, 40)
    by_id = {j.job_id: j for j in jobs}
    assert set(run.released_in) == set(by_id)
    for job_id, slot in run.released_in.items():
        assert slot <= start_by_slot(by_id[job_id], cfg), job_id
    for decision in run.decisions:
        assert not decision.late and not decision.missed and not decision.overloaded
        assert isinstance(decision.nodes, int) and decision.nodes == math.ceil(decision.nodes)
    # The node time, slot by slot, from dispatch's own figures recomputed on the same queue.
    live: dict[str, Job] = {}
    for t in range(40):
        now_s = t * TAU
        for j in jobs:
            if cfg.slot_of(j.submit_s) == t:
                live[j.job_id] = j
        for j in list(live.values()):
            if j.state == "running" and j.released_s + j.length_s <= now_s:
                del live[j.job_id]
        decision = run.decisions[t]
        held = run.decisions[t - 1].nodes if t else None  # the nodes the last decision asked for
        d = dispatch(t, decision.capacity, list(live.values()), cfg, work_model=NODE_S, holding_nodes=held)
        assert d.release == decision.release and d.nodes == decision.nodes
        assert d.node_s_running + d.node_s_released <= d.nodes * TAU + 1e-6
        beyond_s = sum(min(by_id[i].length_s, TAU) for i in d.beyond)
        assert d.node_s_running + d.node_s_released - beyond_s <= max(d.policy_nodes * TAU, d.node_s_running) + 1e-6
        # Under node-seconds a job is due at least one slot ahead (ControllerConfig.due_margin_slots).
        assert all(start_by_slot(by_id[i], cfg) <= t + max(margin, 1) for i in d.beyond)
        for job_id in decision.release:
            live[job_id] = job(job_id, by_id[job_id].submit_s, by_id[job_id].length_s, by_id[job_id].deadline_s, state="running", released_s=now_s)


@settings(max_examples=40, deadline=None)
@given(jobs=workloads())
def test_follow_plans_exactly_the_ticks_of_each_job(jobs):
    # The independent count: each job's node time from its release-free run start (its submit slot),
    # ticks rounded up per slot, against the loads follow was handed (every slot decided).
    cfg = config("follow", deadline_slots=4, max_nodes=len(jobs) + 1)
    run = simulate_slots(jobs, cfg, 40)
    expected = 0
    for j in jobs:
        whole, rest = divmod(j.length_s, TAU)
        expected += int(whole) * 60 + (math.ceil(rest / TAU * 60 - 1e-9) if rest else 0) or 1
    assert sum(d.load for d in run.decisions) == pytest.approx(expected / 60)


def test_a_node_running_a_job_is_never_asked_to_go():
    # Two jobs with 10 s left each need 20 s of node time, but each holds a node: a resize to one
    # would drain a busy node (and kill a long job at YARN's timeout), so both nodes stay.
    running = [job(f"r{i}", 0.0, 310.0, 30 * TAU, state="running", released_s=0.0) for i in range(2)]
    kept = dispatch(1, 0.0, running, config(), work_model=NODE_S)
    assert kept.node_s_running == pytest.approx(20.0) and kept.nodes == 2


@settings(max_examples=30, deadline=None)
@given(jobs=workloads())
def test_the_node_seconds_curve_is_what_the_controller_hands_the_policy(jobs):
    # run --replay compares the daemon's m_t with the policy planned on this curve: it must be the
    # loads the slots were handed, slot by slot.
    from autoscaler.core.slot_work import node_seconds_active

    cfg = config("follow", deadline_slots=4, max_nodes=len(jobs) + 1)
    run = simulate_slots(jobs, cfg, 20)
    assert [d.load for d in run.decisions] == pytest.approx(list(node_seconds_active(jobs, cfg, 20)))
