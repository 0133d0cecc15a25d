"""When not every job can be on time, the jobs that still can go first and the overdue after them.

After a day down the queue holds jobs already past their start-by slot (overdue: late whatever
happens now) beside jobs that can still make their deadlines. Under overload EDF alone gave the
capped nodes to the overdue jobs, the earliest start-by slots, and so made the others late too.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.controller import ControllerConfig, PolicyState, start_by_slot, tick
from autoscaler.core.model import Job, StepSpec

TAU = 300.0


def job(job_id: str, start_by: int, tenant: str = "t", submit_slot: int = 0, length_slots: int = 1) -> Job:
    """A job submitted at the start of ``submit_slot`` whose start-by slot is ``start_by``."""
    length_s = length_slots * TAU - 60.0
    return Job(
        job_id, job_id, tenant, submit_slot * TAU, start_by * TAU + 1.0 + length_s, length_s, StepSpec(args=("true",))
    )


def test_a_cap_of_two_goes_to_the_jobs_due_now_not_to_the_three_overdue():
    # Slot 10, 2 nodes, nothing running: o1-o3 passed their start-by slots (5, 6, 7) while the daemon
    # was down, n1 and n2 must start now (start-by slot 10) and later1 by slot 12. Plain EDF gave the
    # two nodes to o1 and o2: 5 late jobs. The two due now go first: 3 late (the overdue, late anyway).
    jobs = [job("o1", 5), job("o2", 6), job("o3", 7), job("n1", 10), job("n2", 10), job("later1", 12)]
    config = ControllerConfig(policy="follow", slot_s=TAU, max_nodes=2, release_margin_slots=0)
    decision, _ = tick(10 * TAU, jobs, PolicyState(), config)
    assert decision.overloaded
    assert decision.release == ("n1", "n2")
    assert decision.late == ()
    assert "o1" in decision.missed and "n1" not in decision.missed
    assert "can still meet their deadlines went first (2 released), then the overdue (0 of 3 released)" in decision.why


def test_free_nodes_left_after_the_jobs_that_can_be_on_time_go_to_the_overdue_in_edf_order():
    # Four nodes: n1, n2 and later1 (all can be on time), then the earliest overdue, o1.
    jobs = [job("o1", 5), job("o2", 6), job("o3", 7), job("n1", 10), job("n2", 10), job("later1", 12)]
    config = ControllerConfig(policy="follow", slot_s=TAU, max_nodes=4, release_margin_slots=0)
    decision, _ = tick(10 * TAU, jobs, PolicyState(), config)
    assert decision.overloaded
    assert decision.release == ("n1", "n2", "later1", "o1")
    assert decision.late == ("o1",)
    assert "then the overdue (1 of 3 released)" in decision.why


def test_tenants_share_the_jobs_that_can_be_on_time_first_then_the_overdue():
    # Two tenants of equal share, 3 nodes: A has two overdue jobs and one due now, B two due now.
    # The three that can be on time take the three nodes (A's one, B's two): the overdue wait.
    jobs = [
        job("A-o1", 4, "A"), job("A-o2", 5, "A"), job("A-n1", 10, "A"),
        job("B-n1", 10, "B"), job("B-n2", 11, "B"),
    ]  # fmt: skip
    config = ControllerConfig(policy="follow", slot_s=TAU, max_nodes=3, release_margin_slots=0, tenants_n=2)
    decision, _ = tick(10 * TAU, jobs, PolicyState(), config)
    assert decision.overloaded
    assert sorted(decision.release) == ["A-n1", "B-n1", "B-n2"]
    assert decision.late == ()


@settings(max_examples=80, deadline=None)
@given(
    spec=st.lists(
        st.tuples(
            st.integers(0, 12),  # submit slot
            st.integers(0, 4),  # slack: start-by slot = submit slot + slack
            st.integers(1, 3),  # length in slots
            st.sampled_from("PQ"),  # tenant
        ),
        min_size=1,
        max_size=40,
    ),
    max_nodes=st.integers(1, 4),
    margin=st.integers(0, 1),
    skipped=st.sets(st.integers(1, 10), max_size=4),
    tenants_n=st.integers(1, 2),
)
def test_no_job_that_can_still_be_on_time_is_displaced_by_an_overdue_one(spec, max_nodes, margin, skipped, tenants_n):
    """Slot by slot, with slots skipped (the daemon down) so that jobs go overdue: whenever an overdue
    job (start-by slot before the slot) is released, every job queued that could still be on time
    (start-by slot at or after the slot) is released too, or, without overload, can still wait (its
    start-by slot is later than this one)."""
    jobs = [job(f"j{i}", submit + slack, tenant, submit, length) for i, (submit, slack, length, tenant) in enumerate(spec)]
    config = ControllerConfig(policy="gcp-u", deadline_slots=1, slot_s=TAU, max_nodes=max_nodes, release_margin_slots=margin, tenants_n=tenants_n)
    live: dict[str, Job] = {}
    pending = sorted(jobs, key=lambda j: j.submit_s)
    state = PolicyState()
    for t in range(24):
        while pending and config.slot_of(pending[0].submit_s) <= t:
            j = pending.pop(0)
            live[j.job_id] = j
        for j in list(live.values()):
            if j.state == "running" and j.released_s + j.length_s <= t * TAU:
                del live[j.job_id]
        if t in skipped:
            continue
        queued = [j for j in live.values() if j.state == "queued"]
        decision, state = tick(t * TAU, list(live.values()), state, config)
        released = set(decision.release)
        overdue_released = [j for j in queued if j.job_id in released and start_by_slot(j, config) < t]
        if overdue_released:
            for j in queued:
                if j.job_id in released or start_by_slot(j, config) < t:
                    continue
                assert not decision.overloaded and start_by_slot(j, config) > t, (t, j.job_id, decision.release)
        for job_id in decision.release:
            live[job_id] = dataclasses.replace(live[job_id], state="running", released_s=t * TAU)
