"""Jobs submitted after the wall clock was stepped are stamped on the daemon's clock.

The daemon's slots follow the monotonic clock from its start (``WallClock``), and it leaves that
clock's frame in its store's lock file. ``submit`` stamps a job with the daemon's now read from it
(``submit_time``): stamped on the stepped wall clock, a job submitted after a step of +1 h lay an
hour in the daemon's future, unseen by its slots for an hour, and one submitted after a step back
was counted late. Every time here is worked out by hand (slots of 300 s)."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time

import pytest

from autoscaler.adapters.clock import ClockFrame, SubmitTime, WallClock, boot_id, submit_time
from autoscaler.adapters.fakes import FakeCluster
from autoscaler.adapters.lock import StoreLock, held_note
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.daemon import SlotRunner
from autoscaler.core.controller import ControllerConfig
from autoscaler.core.intake import build_job
from autoscaler.core.lateness import slots_late

START_S = 1_800_000_000.0  # a slot boundary: 6,000,000 slots of 300 s
BOOT = "boot-a"


class Dial:
    """A time source a test sets by hand."""

    def __init__(self, value_s: float) -> None:
        self.value_s = value_s

    def __call__(self) -> float:
        return self.value_s


def submitted(store_path, wall, monotonic, job_id: str, deadline: str, length_s: float):
    """A job as ``submit`` builds it, stamped by ``submit_time`` on these time sources."""
    stamp = submit_time(store_path, wall_s=wall, monotonic_s=monotonic, this_boot=BOOT)
    job = build_job(
        job_id=job_id, name="etl", tenant="ads", now_s=stamp.now_s, deadline=deadline, length_s=length_s,
        sizes=None, jar=None, args=[], command=["true"], wall_minus_now_s=stamp.wall_minus_now_s,
    )  # fmt: skip
    return stamp, job


@pytest.mark.parametrize("step_s", [3600.0, -3600.0])
def test_a_job_submitted_after_a_wall_clock_step_is_stamped_on_the_daemons_clock_and_released_on_time(tmp_path, step_s):
    path = tmp_path / "jobs.db"
    wall, monotonic = Dial(START_S), Dial(50.0)
    clock = WallClock(wall_s=wall, monotonic_s=monotonic)
    config = ControllerConfig(policy="hold", deadline_slots=12, slot_s=300.0, max_nodes=10)
    with StoreLock(path, note=clock.frame(BOOT).note()), SqliteJobStore(path) as store:
        runner = SlotRunner(config=config, store=store, cluster=FakeCluster(clock), clock=clock)
        runner.run_slot()  # slot 6,000,000
        wall.value_s += 60.0 + step_s  # 60 s on, and the wall clock is stepped by step_s
        monotonic.value_s += 60.0
        # 600 s long, due in 30 min: on the daemon's clock submitted at START_S + 60, deadline
        # START_S + 1,860, so it must start by START_S + 1,260 (slot 6,000,004).
        stamp, job = submitted(path, wall, monotonic, "j1", "30m", 600.0)
        wall_at_submit_s = wall()
        store.submit(job)
        released_at = None
        for slot in range(1, 7):
            wall.value_s += 300.0 - (60.0 if slot == 1 else 0.0)
            monotonic.value_s += 300.0 - (60.0 if slot == 1 else 0.0)
            runner.run_slot()
            (stored,) = store.all_jobs()
            if stored.released_s is not None and released_at is None:
                released_at = config.slot_of(stored.released_s) - 6_000_000

    assert stamp == SubmitTime(START_S + 60.0, step_s)
    assert (job.submit_s, job.deadline_s) == (START_S + 60.0, START_S + 1860.0)
    # Stamped on the wall clock it would lie 12 slots from now, ahead or behind.
    assert abs(config.slot_of(wall_at_submit_s) - config.slot_of(job.submit_s)) == 12
    assert released_at is not None and released_at <= 4  # by its start-by slot
    assert slots_late(stored, config, clock.now_s()) == 0


def test_an_absolute_deadline_is_read_on_the_wall_clock_and_moved_onto_the_daemons(tmp_path):
    # The wall clock stepped +1 h: 19:00 on the wall is 18:00 on the daemon's clock, the same moment.
    path = tmp_path / "jobs.db"
    wall, monotonic = Dial(START_S), Dial(50.0)
    clock = WallClock(wall_s=wall, monotonic_s=monotonic)
    with StoreLock(path, note=clock.frame(BOOT).note()):
        wall.value_s += 3600.0
        deadline = datetime.datetime.fromtimestamp(wall() + 7200.0, datetime.timezone.utc).isoformat()
        stamp, job = submitted(path, wall, monotonic, "j1", deadline, 600.0)
    assert stamp.wall_minus_now_s == 3600.0
    assert job.deadline_s - job.submit_s == 7200.0  # the two hours the caller gave
    assert job.deadline_s == clock.now_s() + 7200.0


def test_without_a_daemon_holding_the_lock_a_job_is_stamped_on_the_wall_clock(tmp_path):
    # A stopped daemon's frame is stale: the next one starts on the wall clock, so jobs go on it.
    path = tmp_path / "jobs.db"
    wall, monotonic = Dial(START_S), Dial(50.0)
    clock = WallClock(wall_s=wall, monotonic_s=monotonic)
    with StoreLock(path, note=clock.frame(BOOT).note()):
        pass
    wall.value_s += 3600.0
    assert json.loads((tmp_path / "jobs.db.lock").read_bytes())["boot_id"] == BOOT  # the note is left
    assert held_note(path) is None
    assert submit_time(path, wall_s=wall, monotonic_s=monotonic, this_boot=BOOT) == SubmitTime(START_S + 3600.0)


def test_a_frame_of_another_boot_or_within_the_tolerance_leaves_the_wall_clock(tmp_path):
    path = tmp_path / "jobs.db"
    wall, monotonic = Dial(START_S), Dial(50.0)
    clock = WallClock(wall_s=wall, monotonic_s=monotonic)
    with StoreLock(path, note=clock.frame(BOOT).note()):
        wall.value_s += 0.5  # within WALL_JUMP_TOLERANCE_S
        assert submit_time(path, wall_s=wall, monotonic_s=monotonic, this_boot=BOOT) == SubmitTime(START_S + 0.5)
        wall.value_s += 3600.0  # after a reboot the monotonic clock is another clock
        assert submit_time(path, wall_s=wall, monotonic_s=monotonic, this_boot="boot-b") == SubmitTime(START_S + 3600.5)


def test_a_lock_held_with_no_frame_in_it_leaves_the_wall_clock(tmp_path):
    # A restore holds the lock and writes no note; neither does a note that is not a frame count.
    path = tmp_path / "jobs.db"
    wall, monotonic = Dial(START_S), Dial(50.0)
    for note in (None, b"{not json", b'{"boot_id": "boot-a"}'):
        with StoreLock(path, note=note):
            assert submit_time(path, wall_s=wall, monotonic_s=monotonic, this_boot=BOOT) == SubmitTime(START_S)


def test_a_daemon_starting_while_submit_looks_at_the_lock_waits_it_out(tmp_path, monkeypatch):
    # held_note holds the lock shared for a moment; StoreLock tries for TAKE_WAIT_S before refusing
    # (made long here, so the verdict does not hang on how soon the timer's thread runs).
    import fcntl

    from autoscaler.adapters import lock
    from autoscaler.adapters.lock import lock_path

    monkeypatch.setattr(lock, "TAKE_WAIT_S", 60.0)
    path = tmp_path / "jobs.db"
    lock_path(path).touch()
    fd = os.open(lock_path(path), os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    released = False
    try:
        import threading

        def release() -> None:
            nonlocal released
            released = True
            fcntl.flock(fd, fcntl.LOCK_UN)

        threading.Timer(0.05, release).start()
        with StoreLock(path):
            assert released
    finally:
        os.close(fd)


def test_submit_on_the_command_line_stamps_the_job_on_a_running_daemons_clock(tmp_path):
    # The lock is held with the frame of a daemon whose clock is an hour behind the wall clock (the
    # wall clock was stepped +1 h after it started), on this boot's real monotonic clock.
    this_boot = boot_id()
    if this_boot is None:
        pytest.skip("this system does not say its boot id")
    path = tmp_path / "jobs.db"
    SqliteJobStore(path).close()
    frame = ClockFrame(this_boot, time.time() - time.monotonic() - 3600.0)
    with StoreLock(path, note=frame.note()):
        before_s = time.time()
        done = subprocess.run(
            [sys.executable, "-m", "autoscaler", "submit", "--store", str(path), "--id", "j1", "--name", "etl",
             "--tenant", "ads", "--deadline", "2h", "--length-s", "600", "--command", "true"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        after_s = time.time()
    assert done.returncode == 0, done.stderr
    assert "the wall clock is 1 h ahead of the daemon's" in done.stderr
    with SqliteJobStore(path, read_only=True) as store:
        (job,) = store.all_jobs()
    assert before_s - 3600.0 - 1.0 <= job.submit_s <= after_s - 3600.0 + 1.0
    assert job.deadline_s == job.submit_s + 7200.0


def test_a_job_stamped_ahead_of_the_daemons_clock_is_logged_when_read(tmp_path):
    # Stamped on another clock an hour ahead (slot 6,000,012): the slots see it only then, so it is said.
    from structlog.testing import capture_logs

    from autoscaler.core.model import Job, StepSpec

    wall, monotonic = Dial(START_S), Dial(50.0)
    clock = WallClock(wall_s=wall, monotonic_s=monotonic)
    config = ControllerConfig(policy="hold", deadline_slots=12, slot_s=300.0, max_nodes=10)
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        runner = SlotRunner(config=config, store=store, cluster=FakeCluster(clock), clock=clock)
        runner.run_slot()
        store.submit(Job("ahead", "etl", "ads", START_S + 3600.0, START_S + 7200.0, 600.0, StepSpec(args=("true",))))
        store.submit(Job("now", "etl", "ads", START_S + 10.0, START_S + 7200.0, 600.0, StepSpec(args=("true",))))
        wall.value_s += 300.0
        monotonic.value_s += 300.0
        with capture_logs() as logs:
            runner.run_slot()
    (line,) = [entry for entry in logs if entry["event"] == "jobs_submitted_ahead"]
    assert (line["jobs"], line["job_ids"], line["most_ahead_s"]) == (1, ["ahead"], 3300.0)
