"""The daemon's slot schedule: once at start, then at every slot boundary epoch + k * slot_s, on the
daemon's clock (monotonic: a wall-clock step does not move the boundaries).

The boundaries are computed, so they are checked exactly; wall times of the runs depend on the
machine and are not asserted. (These tests used to pin APScheduler's interval trigger, which waits
on the wall clock: after a backward step of 600 s it ran no slot for 600 s, issue 20 finding 15.)
"""

from __future__ import annotations

import threading
import time

import pytest
import structlog

from autoscaler.adapters.clock import WallClock
from autoscaler.app.daemon import next_boundary_s, run_slots


def test_boundaries_are_epoch_plus_whole_slots_whatever_the_start_time():
    started = 1_700_000_123.4  # 123.4 s into slot 5,666,667 of 300 s
    assert next_boundary_s(started, 300.0, 0.0) == 1_700_000_400.0
    assert next_boundary_s(1_700_000_400.0, 300.0, 0.0) == 1_700_000_700.0  # on a boundary: the next one
    assert next_boundary_s(started, 300.0, 7.0) == 1_700_000_407.0  # another epoch moves them with it


class CountingSlots:
    """Stands in for SlotRunner.run_slot: counts runs and the clock's time of each, and stops the
    loop once it has run ``wanted`` times."""

    def __init__(self, clock, stop: threading.Event, wanted: int, after_first=None) -> None:
        self.clock, self.stop, self.wanted, self.after_first = clock, stop, wanted, after_first
        self.times_s: list[float] = []

    def __call__(self) -> None:
        self.times_s.append(self.clock.now_s())
        if len(self.times_s) == 1 and self.after_first is not None:
            self.after_first()
        if len(self.times_s) >= self.wanted:
            self.stop.set()


def run_until_stopped(slots: CountingSlots, clock, slot_s: float) -> None:
    loop = threading.Thread(target=run_slots, args=(slots, clock, slot_s, 0.0, 5.0, slots.stop), daemon=True)
    loop.start()
    loop.join(timeout=120)  # a generous deadline; the assertions say if it was not met
    slots.stop.set()
    loop.join(timeout=30)


def test_a_run_starts_at_once_then_one_per_boundary():
    stop = threading.Event()
    clock = WallClock()
    slots = CountingSlots(clock, stop, wanted=4)
    run_until_stopped(slots, clock, 1.0)
    assert len(slots.times_s) == 4
    # One run in each of four slots in a row: the first at once, the rest on their boundaries or after.
    numbers = [int(t // 1.0) for t in slots.times_s]
    assert numbers == list(range(numbers[0], numbers[0] + 4))
    assert all(t >= n for t, n in zip(slots.times_s[1:], numbers[1:]))


def test_slots_go_on_at_their_boundaries_when_the_wall_clock_is_stepped_back():
    """Issue 20, finding 15: stepped back 600 s, the wall clock would hold the next slot 600 s; the
    loop keeps its boundaries and logs the step."""
    stop = threading.Event()
    offset_s = [0.0]
    clock = WallClock(wall_s=lambda: time.time() + offset_s[0])

    def step_back() -> None:
        offset_s[0] = -600.0

    slots = CountingSlots(clock, stop, wanted=4, after_first=step_back)
    with structlog.testing.capture_logs() as logged:
        run_until_stopped(slots, clock, 1.0)
    assert len(slots.times_s) == 4
    numbers = [int(t // 1.0) for t in slots.times_s]
    assert numbers == list(range(numbers[0], numbers[0] + 4))
    jumps = [event for event in logged if event["event"] == "wall_clock_jumped"]
    assert len(jumps) == 1 and jumps[0]["jump_s"] == pytest.approx(-600.0, abs=0.5)

