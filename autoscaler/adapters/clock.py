"""The daemon's clock, behind the Clock port: Unix seconds that follow the monotonic clock.

Slots are scheduled and numbered on this clock. It reads the wall clock once, at the start, and
from then on moves with ``time.monotonic``, so a step of the wall clock (``date -s``, a VM resumed,
NTP stepping) neither stops the slots (a step back) nor skips them (a step forward). A step is
noticed by ``wall_jump_s`` and logged as ``wall_clock_jumped``; a restart takes the new wall time.

Jobs are stamped on the same clock. The daemon leaves its clock's frame (the boot it runs in and its
start's wall time less monotonic time) in its store's lock file; ``submit_time`` reads it there and
stamps a job with the daemon's now, where the wall clock would put a job submitted after a step an
hour into the daemon's future (not seen for an hour) or past (counted late). Linux's monotonic clock
is one for every process of a boot, so the stamp is the daemon's own reading of now.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from autoscaler.adapters.lock import held_note

WALL_JUMP_TOLERANCE_S = 1.0
"""How far the wall clock may drift from this clock (seconds) before it counts as a step and is logged."""


BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def boot_id(path: str = BOOT_ID_PATH) -> str | None:
    """This boot's id (Linux), within which monotonic time is one clock for every process; None where
    it cannot be read, and then no process trusts another's monotonic reading."""
    try:
        with open(path, encoding="ascii") as file:
            return file.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class ClockFrame:
    """Where a :class:`WallClock` stands: its reading is ``wall_minus_monotonic_s + time.monotonic()``
    (seconds) for any process of the boot ``boot_id``."""

    boot_id: str
    wall_minus_monotonic_s: float

    def note(self) -> bytes:
        """The frame as the lock file's note (JSON)."""
        return json.dumps({"boot_id": self.boot_id, "wall_minus_monotonic_s": self.wall_minus_monotonic_s}).encode()

    @classmethod
    def from_note(cls, note: bytes | None) -> ClockFrame | None:
        """The frame in a lock file's note; None for no note or one that is not a frame."""
        try:
            document = json.loads(note) if note else None
            return cls(str(document["boot_id"]), float(document["wall_minus_monotonic_s"]))
        except (ValueError, TypeError, KeyError):
            return None


@dataclass(frozen=True)
class SubmitTime:
    """Now for a job being submitted: ``now_s`` on the daemon's clock (Unix seconds) and
    ``wall_minus_now_s``, what the wall clock reads beyond it (0 unless the wall clock stepped since
    the daemon started); an absolute deadline, read on the wall clock, is moved by it."""

    now_s: float
    wall_minus_now_s: float = 0.0


def submit_time(
    store_path: str | os.PathLike,
    wall_s: Callable[[], float] = time.time,
    monotonic_s: Callable[[], float] = time.monotonic,
    this_boot: str | None = None,
) -> SubmitTime:
    """Now, for a job submitted to the store at ``store_path``, on the clock of the daemon that holds
    its lock (its frame read from the lock file); the wall time when no daemon holds it, when the frame
    is of another boot or cannot be read, or when the two agree within ``WALL_JUMP_TOLERANCE_S``.
    ``this_boot`` defaults to :func:`boot_id`."""
    wall = wall_s()
    frame = ClockFrame.from_note(held_note(store_path))
    if frame is None or frame.boot_id != (this_boot if this_boot is not None else boot_id()):
        return SubmitTime(wall)
    daemon_now_s = frame.wall_minus_monotonic_s + monotonic_s()
    if abs(wall - daemon_now_s) <= WALL_JUMP_TOLERANCE_S:
        return SubmitTime(wall)
    return SubmitTime(daemon_now_s, wall - daemon_now_s)


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

    def frame(self, this_boot: str | None = None) -> ClockFrame | None:
        """This clock's frame, for ``submit_time`` in other processes of this boot (``this_boot``,
        default :func:`boot_id`); None when the boot cannot be known."""
        boot = this_boot if this_boot is not None else boot_id()
        return None if boot is None else ClockFrame(boot, self._start_wall_s - self._start_monotonic_s)

    def wall_jump_s(self) -> float | None:
        """The step the wall clock took since it was last noted (seconds, negative: back), or None
        within ``WALL_JUMP_TOLERANCE_S``. A step is logged (``wall_clock_jumped``) and noted, so
        it is said once."""
        wall_minus_clock_s = self._wall_s() - self.now_s()
        jump_s = wall_minus_clock_s - self._wall_minus_clock_s
        if abs(jump_s) <= WALL_JUMP_TOLERANCE_S:
            return None
        self._wall_minus_clock_s = wall_minus_clock_s
        import structlog  # here: submit reads this module, and needs no logging library to stamp a job

        structlog.get_logger("autoscaler").warning(
            "wall_clock_jumped",
            jump_s=round(jump_s, 3),
            wall_minus_clock_s=round(wall_minus_clock_s, 3),
            detail="slots follow the monotonic clock from the start and go on as scheduled; a restart takes the new wall time",
        )
        return jump_s
