"""Held back, a job whose length runs longer than planned still makes its deadline when finished runs
have shown how far lengths run over: the slot loop gives each new job a start margin of (r - 1) x
its length, r the error's p99.9 (``autoscaler.core.learned.LengthErrors``), widened for the jobs
still held when later runs raise r. On the twin each job here runs exactly three times its planned
length, so every time is worked by hand."""

from __future__ import annotations

from autoscaler.app.compare import CompareInputs, policy_on_twin
from autoscaler.app.config import Settings
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.twin import TwinConfig


def job(i: int, submit_s: float, planned_s: float, true_s: float, slack_s: float) -> Job:
    # The twin runs a job for its submitted length (prior_length_s) x the error (none here): true_s.
    return Job(f"j{i:03d}", f"j{i:03d}", "t", submit_s, submit_s + planned_s + slack_s, planned_s, StepSpec(args=("true",)), prior_length_s=true_s)


def burst_after_warm_up(warm_up_true_s: float) -> list:
    """24 jobs planned at 100 s at 0, due at once, that run ``warm_up_true_s``; then at 1 h 200 jobs
    planned at 300 s that run 900 s, with 2 h of slack (deadline 3600 + 300 + 7200 = 11,100 s).
    Returns the burst's steps after hold ran them on the twin."""
    jobs = [job(i, 0.0, 100.0, warm_up_true_s, 0.0) for i in range(24)]
    jobs += [job(100 + i, 3600.0, 300.0, 900.0, 7200.0) for i in range(200)]
    inputs = CompareInputs(tuple(jobs), 72, Settings(deadline_slots=24), TwinConfig(provision_s=0.0), 0, 500)
    twin = policy_on_twin(inputs, "hold", 0)
    return [step for step in twin.steps.values() if step.job_id >= "j100"]


def test_runs_seen_three_times_their_length_give_the_burst_room_to_run_three_times_its_own():
    # 24 runs of ratio 3: r = 3, margin 2 x 300 = 600 s, start-by 11,100 - 300 - 600 = 10,200 s
    # (slot 34): every job starts by 10,200 and runs 900 s, ending by 11,100.
    burst = burst_after_warm_up(300.0)
    assert max(step.added_s for step in burst) <= 10_200.0
    assert all(step.end_s <= step.deadline_s for step in burst)


def test_runs_seen_on_time_give_no_room_until_the_bursts_own_runs_widen_the_margin_of_those_still_held():
    # The same burst after runs of ratio 1: no margin at joining, start-by 10,800 s (slot 36). The first
    # burst jobs hold releases start at 3,600 s and end at 4,500 (900 s, ratio 3): r = 3 from then, and
    # the jobs still held get (3 - 1) x 300 = 600 s of margin, start-by 10,200 s, as in the test above.
    # Held to 10,800 instead, they would end at 11,700, past their deadline of 11,100.
    burst = burst_after_warm_up(100.0)
    assert min(step.end_s for step in burst) == 4500.0
    assert max(step.added_s for step in burst) <= 10_200.0
    assert all(step.end_s <= step.deadline_s for step in burst)


def nodes_up_at(twin, time_s: float) -> int:
    return sum(1 for node in twin.nodes.values() if node.usable_s <= time_s and (node.removed_s is None or node.removed_s > time_s))


def burst_of_short_jobs():
    """24 warm-up jobs planned at 100 s that run 300 s (ratio 3: margin 2 x length, work factor 3), then
    at 1 h 600 jobs planned at 30 s that run 90 s, with 2 h of slack. Returns (the twin, the burst's steps)."""
    jobs = [job(i, 0.0, 100.0, 300.0, 0.0) for i in range(24)]
    jobs += [job(100 + i, 3600.0, 30.0, 90.0, 7200.0) for i in range(600)]
    inputs = CompareInputs(tuple(jobs), 72, Settings(deadline_slots=24), TwinConfig(provision_s=0.0), 0, 500)
    twin = policy_on_twin(inputs, "hold", 0)
    return twin, [step for step in twin.steps.values() if step.job_id >= "j100"]


def test_the_nodes_are_planned_for_the_work_the_runs_say_jobs_take_not_the_lengths_planned():
    # The warm-up's runs ran 3 x their plan, so each burst job is planned at 3 x 30 = 90 s of node time:
    # 600 x 90 s = 180 node-slots of 300 s. Each is due by its start-by, deadline 10,830 - 30 - 60 of
    # margin = 10,740 s, slot 35; from the burst's slot 12 its deadline index is 35 - 12 - 1 (the slot
    # the nodes are asked for ahead) = 22, so hold's flat rate is 180 / (22 + 1) = 7.83: 8 nodes
    # through the burst, and every job ends by its deadline.
    twin, burst = burst_of_short_jobs()
    assert nodes_up_at(twin, 6000.0) == 8
    assert all(step.end_s <= step.deadline_s for step in burst)


def test_planned_for_the_lengths_alone_the_same_burst_overruns(monkeypatch):
    # The contrast: with the work factor held at 1, hold plans 600 x 30 s = 60 node-slots, 60 / 23 = 2.6:
    # 3 nodes, a third of what the jobs take, and the jobs still queued at their start-by slots overrun.
    from autoscaler.core.learned import LengthErrors

    monkeypatch.setattr(LengthErrors, "job_work_factor", lambda self, job, slot_s: 1.0)
    twin, burst = burst_of_short_jobs()
    assert nodes_up_at(twin, 6000.0) == 3
    assert sum(step.end_s > step.deadline_s for step in burst) > 0
