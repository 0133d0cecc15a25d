"""The cost signal as ``tick`` sees it in one slot (hold+carbon), or why it has none.

Pure: the daemon's carbon feed and the replay build these from a signal; the controller reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autoscaler.core.errors import ConfigError

SIGNAL_FALLBACKS = ("unreadable", "stale", "not_covering", "not_given")
"""Why a slot of hold+carbon had no signal (``SignalUnavailable.reason``): the source could not be
read (and never was); the last good read is older than ``max_staleness_s``; the signal does not
cover the slot decided; no signal was handed to ``tick`` at all."""


@dataclass(frozen=True, eq=False)
class CarbonWindow:
    """The cost signal as known in one slot, for hold+carbon (``tick``'s ``carbon_window``).

    ``values``: shape (3D+1,), the signal's mean over slots t..t+3D (the actual value, then the
    forecast, else persistence), in ``unit``; ``reference``: its mean over the last day, the level
    of weight 1 (:func:`autoscaler.core.policies.carbon.carbon_step`). ``value_now``: values[0].
    ``source``: the file or URL it came from; ``forecast_slots`` and ``persisted_slots``: how many
    of values[1:] came from the forecast source and from the blend (:mod:`autoscaler.core.forecast`;
    the rest are actual values). ``band``: shape (3D+1,), the forecast's error band per slot, in
    ``unit`` (0 for actual values; None: none).
    """

    values: np.ndarray
    reference: float
    unit: str
    value_now: float
    source: str = ""
    forecast_slots: int = 0
    persisted_slots: int = 0
    band: np.ndarray | None = None


@dataclass(frozen=True)
class SignalUnavailable:
    """Why hold+carbon has no signal for a slot: ``reason`` one of :data:`SIGNAL_FALLBACKS`;
    ``detail`` in words (the read error, the signal's age, the slot not covered)."""

    reason: str
    detail: str

    def __post_init__(self) -> None:
        if self.reason not in SIGNAL_FALLBACKS:
            raise ConfigError(f"signal fallback reason: expected one of {', '.join(SIGNAL_FALLBACKS)}, got {self.reason!r}")

