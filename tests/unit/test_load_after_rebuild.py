"""L_t as a decision records it after the policy's work is rebuilt (a daemon's first slot after jobs
waited, a restart after undecided slots): the active jobs' own work in the slot, what follow would
run now, not the backlog the rebuild hands the policy at once. The arrival forecast and the report's
follow read it: taken for a rate, the backlog made the cap look bound and follow look far dearer."""

from __future__ import annotations

from autoscaler.core.controller import ControllerConfig, PolicyState, tick
from autoscaler.core.model import Job, StepSpec

CONFIG = ControllerConfig(policy="hold", deadline_slots=2, slot_s=60.0, max_nodes=10)


def job(job_id: str, length_s: float, slack_s: float, submit_s: float = 10.0) -> Job:
    return Job(job_id, "etl", "ads", submit_s, submit_s + length_s + slack_s, length_s, StepSpec(args=("true",)))


def test_the_first_slot_after_jobs_waited_shows_each_active_jobs_slot_of_work():
    # Three one-node jobs queued in slot 0; the daemon's first slot is slot 2. Each would run a whole
    # minute of it if run now: L_t = 3 server-slots. (The rebuild hands hold 380 now: the 6-hour job
    # is 360 of them, and its deadline leaves no flatter rate.)
    jobs = [job("a", 600.0, 1200.0), job("b", 600.0, 1200.0), job("nightly", 21_600.0, 7_200.0)]
    decision, state = tick(120.0, jobs, PolicyState(), CONFIG)
    assert decision.load == 3.0
    assert state.recent_arrivals[0] == 3.0
    assert not decision.overloaded
