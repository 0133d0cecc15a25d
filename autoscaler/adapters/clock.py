"""The daemon's clock, behind the Clock port: Unix seconds that follow the monotonic clock.

Slots are scheduled and numbered on this clock. It reads the wall clock once, at the start, and
from then on moves with ``time.monotonic``, so a step of the wall clock (``date -s``, a VM resumed,
NTP stepping) neither stops the slots (a step back) nor skips them (a step forward). A step is
noticed by ``wall_jump_s`` and logged as ``wall_clock_jumped``; a restart takes the new wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

WALL_JUMP_TOLERANCE_S = 1.0
"""How far the wall clock may drift from this clock (seconds) before it counts as a step and is logged."""

log = structlog.get_logger("autoscaler")


class WallClock:
    """Unix seconds: the wall time at the start, then on by the monotonic clock.

    ``wall_s`` and ``monotonic_s`` are the time sources (seconds; defaults ``time.time`` and
    ``time.monotonic``), given by tests to step one without the other.
    """

    def __init__(self, wall_s: Callable[[], float] = time.time, monotonic_s: Callable[[], float] = time.monotonic) -> None:
        self._wall_s = wall_s
        self._monotonic_s = monotonic_s
        self._start_wall_s = wall_s()
        self._start_monotonic_s = monotonic_s()
        self._wall_minus_clock_s = 0.0  # as last noted

    def now_s(self) -> float:
        return self._start_wall_s + (self._monotonic_s() - self._start_monotonic_s)

    def wall_jump_s(self) -> float | None:
        """The step the wall clock took since it was last noted (seconds, negative: back), or None
        within ``WALL_JUMP_TOLERANCE_S``. A step is logged (``wall_clock_jumped``) and noted, so
        it is said once."""
        wall_minus_clock_s = self._wall_s() - self.now_s()
        jump_s = wall_minus_clock_s - self._wall_minus_clock_s
        if abs(jump_s) <= WALL_JUMP_TOLERANCE_S:
            return None
        self._wall_minus_clock_s = wall_minus_clock_s
        log.warning(
            "wall_clock_jumped",
            jump_s=round(jump_s, 3),
            wall_minus_clock_s=round(wall_minus_clock_s, 3),
            detail="slots follow the monotonic clock from the start and go on as scheduled; a restart takes the new wall time",
        )
        return jump_s
