"""Between slot boundaries the daemon releases the jobs submitted since the slot was decided that are
already due (``SlotRunner.release_between_slots``): such a job would otherwise wait up to a slot for
its step, where EMR managed scaling sees the step the moment it is added. Jobs not due wait for the
next slot. Every time here is worked out by hand (slots of 300 s from 0, no boot time)."""

from __future__ import annotations

import contextlib
import threading

import pytest
from pydantic import ValidationError
from structlog.testing import capture_logs

from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
from autoscaler.adapters.health import Telemetry
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.compare import CompareInputs, policy_on_twin, polls_between_slots
from autoscaler.app.config import ClusterSettings, Settings
from autoscaler.app.daemon import SlotRunner, run_slots
from autoscaler.core.controller import ControllerConfig
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.twin import TwinConfig


def job(job_id: str, submit_s: float, length_s: float, slack_s: float) -> Job:
    return Job(job_id, "etl", "ads", submit_s, submit_s + length_s + slack_s, length_s, StepSpec(args=("true",)))


def runner_after_slot_0(store, clock, cluster, telemetry=None) -> SlotRunner:
    config = ControllerConfig(policy="hold", deadline_slots=12, slot_s=300.0, max_nodes=10)
    runner = SlotRunner(config=config, store=store, cluster=cluster, clock=clock, telemetry=telemetry)
    runner.run_slot()  # slot 0 decided on an empty store: no nodes
    return runner


@contextlib.contextmanager
def slot_0_decided(tmp_path):
    """(clock, cluster, store, runner): an empty cluster and store, slot 0 decided at 0 s."""
    clock = SimulatedClock(0.0)
    cluster = FakeCluster(clock)
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        yield clock, cluster, store, runner_after_slot_0(store, clock, cluster)


def test_a_job_due_on_arrival_is_released_at_once_and_one_that_can_wait_is_left_for_the_next_slot(tmp_path):
    # "urgent" at 60 s: 200 s long, deadline 60 + 200 + 100 = 360 s, so it must start by 160 s
    # (slot 0, already decided). "later": deadline an hour on, start-by slot 12.
    clock = SimulatedClock(0.0)
    cluster = FakeCluster(clock)
    telemetry = Telemetry(300.0, clock=clock.now_s)
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        runner = runner_after_slot_0(store, clock, cluster, telemetry)
        clock.time_s = 60.0
        store.submit_many([job("urgent", 60.0, 200.0, 100.0), job("later", 60.0, 200.0, 3600.0)])
        with capture_logs() as logs:
            released = runner.release_between_slots()
        stored = {j.job_id: j for j in store.all_jobs()}
        intent = store.pending_intent()
        counted = telemetry.registry.get_sample_value("autoscaler_jobs_released_total")
        clock.time_s = 300.0
        runner.run_slot()  # the next slot finds the step, and adds it no second time
        steps = cluster.steps()

    assert released == ["urgent"]
    assert (stored["urgent"].state, stored["urgent"].released_s) == ("released", 60.0)
    assert stored["urgent"].step_id == steps[0].step_id
    assert stored["later"].state == "queued" and stored["later"].step_id is None
    assert intent is None  # written before the step was added, settled with the record
    assert cluster.resizes[0] == 1  # by slot 1's decision, not between slots
    assert [step.job_id for step in steps].count("urgent") == 1
    line = next(entry for entry in logs if entry["event"] == "released_between_slots")
    assert (line["jobs_released"], line["job_ids"], line["late"]) == (1, ["urgent"], 0)
    assert counted == 1.0


def test_the_task_group_is_left_to_the_next_slot(tmp_path):
    # No node is up: the step waits in EMR's queue; the group is not resized between slots.
    with slot_0_decided(tmp_path) as (clock, cluster, store, runner):
        clock.time_s = 60.0
        store.submit_many([job("urgent", 60.0, 200.0, 100.0)])
        assert runner.release_between_slots() == ["urgent"]
    assert cluster.resizes == [] and cluster.requested == 0


def test_nothing_is_released_before_the_slot_of_now_is_decided(tmp_path):
    # At 310 s slot 1 has not run: its own decision will see the job.
    with slot_0_decided(tmp_path) as (clock, cluster, store, runner):
        clock.time_s = 310.0
        store.submit_many([job("urgent", 310.0, 200.0, 100.0)])
        assert runner.release_between_slots() == []
        assert cluster.steps() == []
        runner.run_slot()
        assert [step.job_id for step in cluster.steps()] == ["urgent"]


def test_a_job_released_after_its_start_by_slot_is_counted_late(tmp_path):
    # Submitted at 700 s (slot 2), 200 s long, deadline 750 s: start-by 550 s, slot 1, already past.
    with slot_0_decided(tmp_path) as (clock, cluster, store, runner):
        clock.time_s = 600.0
        runner.run_slot()
        clock.time_s = 700.0
        store.submit_many([Job("late", "etl", "ads", 700.0, 750.0, 200.0, StepSpec(args=("true",)))])
        with capture_logs() as logs:
            assert runner.release_between_slots() == ["late"]
    assert next(entry for entry in logs if entry["event"] == "released_between_slots")["late"] == 1


def test_on_the_twin_a_job_due_on_arrival_meets_its_deadline_only_when_released_between_slots():
    # 301 s: one second into slot 1. 600 s long, 240 s of slack: deadline 1,141 s, start-by 541 s
    # (slot 1). At the next boundary (600 s) it would end at 1,200 s, 59 s late; released at the
    # poll at 330 s, on the one node min_nodes keeps up, it ends at 930 s.
    jobs = (job("j1", 301.0, 600.0, 240.0),)
    ended = {}
    for poll_s in (30.0, 0.0):
        settings = Settings(deadline_slots=2, release_poll_s=poll_s, cluster=ClusterSettings(min_nodes=1))
        twin = policy_on_twin(CompareInputs(jobs, 12, settings, TwinConfig(provision_s=0.0), 1, 10), "hold", 0)
        (step,) = twin.steps.values()
        ended[poll_s] = (step.added_s, step.end_s)
    assert ended[30.0] == (330.0, 930.0)
    assert ended[0.0] == (600.0, 1200.0)


def test_the_loop_polls_between_boundaries():
    # A simulated clock that each wait moves on: a slot of 300 s and polls every 100 s give, from 0,
    # polls at 100 and 200, the slot at 300, polls at 400 and 500, the slot at 600.
    clock = SimulatedClock(0.0)
    events: list[tuple[str, float]] = []

    class Waiting(threading.Event):
        def wait(self, timeout=None):
            clock.time_s += timeout
            return self.is_set()

    stop = Waiting()

    def slot() -> None:
        events.append(("slot", clock.time_s))
        if clock.time_s >= 600.0:
            stop.set()

    run_slots(slot, clock, 300.0, 0.0, 5.0, stop, lambda: events.append(("poll", clock.time_s)), 100.0)
    assert events == [("slot", 0.0), ("poll", 100.0), ("poll", 200.0), ("slot", 300.0), ("poll", 400.0), ("poll", 500.0), ("slot", 600.0)]


def test_a_poll_that_does_not_divide_the_submit_time_still_takes_the_job():
    # ceil(63 / 0.7) x 0.7 is 62.99999999999999, below the submit time: the poll after it takes the job.
    clock = SimulatedClock(0.0)
    calls = []

    class Store:
        def submit_many(self, jobs):
            calls.append([j.job_id for j in jobs])

    class Runner:
        def release_between_slots(self):
            calls.append(clock.time_s)

    assert polls_between_slots(Runner(), Store(), clock, [job("j1", 63.0, 10.0, 0.0)], 0, 300.0, 0.7) == 1
    assert calls[0] == ["j1"] and 63.0 <= calls[1] < 63.7


def test_a_poll_under_a_second_is_refused():
    with pytest.raises(ValidationError, match="release_poll_s: must be 0 \\(off\\) or at least 1 s, got 0.7"):
        Settings(release_poll_s=0.7)
    assert Settings(release_poll_s=0).release_poll_s == 0
