"""The daemon's slot schedule: once at start, then at every slot boundary epoch + k * slot_s.

Scheduled run times are computed by APScheduler from the trigger, so they are checked exactly; wall
times of the runs depend on the machine and are not asserted.
"""

from __future__ import annotations

import datetime
import threading
from dataclasses import dataclass, field

from apscheduler.events import EVENT_JOB_EXECUTED

from autoscaler.app.daemon import slot_scheduler
from autoscaler.core.controller import ControllerConfig

UTC = datetime.timezone.utc


@dataclass
class CountingRunner:
    """Stands in for SlotRunner: what the schedule needs of it is ``run_slot`` and ``config``."""

    config: ControllerConfig
    runs: int = 0
    enough: threading.Event = field(default_factory=threading.Event)
    wanted: int = 4

    def run_slot(self) -> None:
        self.runs += 1
        if self.runs >= self.wanted:
            self.enough.set()


def at(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, UTC)


def test_slots_fire_at_the_boundaries_whatever_the_start_time():
    runner = CountingRunner(ControllerConfig(slot_s=300.0, epoch_s=0.0))
    scheduler = slot_scheduler(runner, 300.0, 60.0)
    jobs = {job.id: job for job in scheduler.get_jobs()}
    assert set(jobs) == {"first_slot", "slot"}
    trigger = jobs["slot"].trigger
    started = at(1_700_000_123.4)  # 123.4 s into slot 5,666,667 of 300 s
    first = trigger.get_next_fire_time(None, started)
    assert first == at(1_700_000_400.0)
    second = trigger.get_next_fire_time(first, first)
    assert second == at(1_700_000_700.0)
    # A start exactly on a boundary fires on it; the first run (a date trigger) runs at once anyway.
    assert trigger.get_next_fire_time(None, at(1_700_000_100.0)) == at(1_700_000_100.0)
    assert jobs["slot"].misfire_grace_time == 60 and jobs["slot"].coalesce and jobs["slot"].max_instances == 1
    # Another epoch moves the boundaries with it.
    shifted = slot_scheduler(CountingRunner(ControllerConfig(slot_s=300.0, epoch_s=7.0)), 300.0, 60.0)
    assert shifted.get_job("slot").trigger.get_next_fire_time(None, started) == at(1_700_000_407.0)


def test_a_run_starts_at_once_then_one_per_boundary():
    runner = CountingRunner(ControllerConfig(slot_s=1.0))
    scheduler = slot_scheduler(runner, 1.0, 5.0)
    scheduled: list[tuple[str, datetime.datetime]] = []
    scheduler.add_listener(lambda event: scheduled.append((event.job_id, event.scheduled_run_time)), EVENT_JOB_EXECUTED)

    def stop_when_enough() -> None:
        runner.enough.wait(timeout=120)  # a generous deadline; the assertions below say if it was not met
        scheduler.shutdown(wait=False)

    watcher = threading.Thread(target=stop_when_enough, daemon=True)
    watcher.start()
    started = datetime.datetime.now(UTC)
    scheduler.start()  # blocks until the watcher shuts it down
    watcher.join()
    assert runner.runs >= runner.wanted
    assert scheduled[0][0] == "first_slot" and scheduled[0][1] <= started  # due before the start: runs at once
    boundaries = [when for job_id, when in scheduled if job_id == "slot"]
    assert len(boundaries) >= runner.wanted - 1
    assert all(when.microsecond == 0 for when in boundaries)  # whole seconds: boundaries of 1-s slots
    assert all(later > earlier for earlier, later in zip(boundaries, boundaries[1:]))
