"""The daemon's clock: Unix seconds that follow the monotonic clock, so a step of the wall clock
(an operator's ``date -s``, a VM resumed, NTP stepping) neither stops nor repeats slots; the step
is logged."""

from __future__ import annotations

import structlog

from autoscaler.adapters.clock import WallClock


class Dial:
    """A time source a test sets by hand."""

    def __init__(self, value_s: float) -> None:
        self.value_s = value_s

    def __call__(self) -> float:
        return self.value_s


def test_the_clock_follows_monotonic_time_through_a_backward_wall_step_and_says_so():
    wall, monotonic = Dial(1_700_000_000.0), Dial(50.0)
    clock = WallClock(wall_s=wall, monotonic_s=monotonic)
    assert clock.now_s() == 1_700_000_000.0
    wall.value_s += 30.0
    monotonic.value_s += 30.0
    with structlog.testing.capture_logs() as logged:
        assert clock.wall_jump_s() is None  # both moved on together: nothing to say
    assert logged == []
    wall.value_s += 5.0 - 600.0  # 5 s on, and the wall clock is stepped back 10 minutes
    monotonic.value_s += 5.0
    assert clock.now_s() == 1_700_000_035.0  # 35 s after the start, whatever the wall says
    with structlog.testing.capture_logs() as logged:
        assert clock.wall_jump_s() == -600.0
        assert clock.wall_jump_s() is None  # said once per step
    (event,) = logged
    assert event["event"] == "wall_clock_jumped" and event["jump_s"] == -600.0 and event["wall_minus_clock_s"] == -600.0
