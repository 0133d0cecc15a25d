"""A per-slot cost signal as a replay knows it (:class:`SlotSignal`): the values, the history before
slot 0, and what is known in each slot of the slots after it (a forecast, else persistence)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from autoscaler.core.errors import ConfigError

if TYPE_CHECKING:
    from autoscaler.core.issued import IssuedSlots


@dataclass(frozen=True, eq=False)
class SlotSignal:
    """A per-slot cost signal s as a replay knows it: actual values, and an optional forecast.

    ``values``: shape (history_slots + n,), finite, >= 0: the mean signal in slots -history_slots .. n-1
    of the replay (slot 0 is its first). ``forecast``: None, or the same shape with NaN where there is
    no forecast: the value forecast for each slot. ``slots_per_day``: the persistence period P, slots.
    ``issued``: None, or forecasts as issued on the same slots (its slot 0 is slot -history_slots):
    in slot t only what was issued by t's start is read (:meth:`window`).
    Slots after the last value take persistence as well (the last day repeated).
    Raises ConfigError for shapes that do not fit or values that are not finite and >= 0.
    """

    values: np.ndarray
    history_slots: int
    slots_per_day: int
    forecast: np.ndarray | None = None
    issued: IssuedSlots | None = None

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=float)
        if values.ndim != 1 or values.size <= self.history_slots or self.history_slots < 0:
            raise ConfigError(
                f"signal: expected values of shape (history_slots + n,) with n >= 1 and history_slots >= 0, "
                f"got shape {values.shape} with history_slots = {self.history_slots}"
            )
        if not (np.isfinite(values).all() and (values >= 0).all()):
            raise ConfigError("signal: every slot's value must be finite and >= 0")
        if int(self.slots_per_day) != self.slots_per_day or self.slots_per_day < 1:
            raise ConfigError(f"signal: slots_per_day must be a whole number >= 1, got {self.slots_per_day!r}")
        if self.forecast is not None:
            forecast = np.asarray(self.forecast, dtype=float)
            if forecast.shape != values.shape:
                raise ConfigError(f"signal: the forecast has shape {forecast.shape}, not the values' {values.shape}")
            known = forecast[~np.isnan(forecast)]
            if not (np.isfinite(known).all() and (known >= 0).all()):
                raise ConfigError("signal: every forecast value must be finite and >= 0 (NaN for none)")
        if self.issued is not None and self.issued.n_slots != values.size:
            raise ConfigError(f"signal: the issued forecasts are on {self.issued.n_slots} slots, the values on {values.size}")

    @property
    def n_slots(self) -> int:
        """Slots 0..n-1 of the replay the values cover."""
        return int(np.asarray(self.values).size - self.history_slots)

    def actual(self, n_slots: int) -> np.ndarray:
        """s over slots 0..n_slots-1, shape (n_slots,); slots past the values repeat the last day."""
        return np.array([self._known(t) for t in range(n_slots)])

    def _known(self, slot: int) -> float:
        """The actual value of ``slot`` (past the end: persistence from the last covered day)."""
        values = np.asarray(self.values, dtype=float)
        last = self.n_slots - 1
        if slot > last:
            slot -= self.slots_per_day * math.ceil((slot - last) / self.slots_per_day)
            slot = max(slot, -self.history_slots)
        return float(values[self.history_slots + slot])

    def reference(self, slot: int) -> float:
        """The mean actual value over the day up to ``slot`` (as much of it as is known), the level of w = 1."""
        first = max(slot - self.slots_per_day + 1, -self.history_slots)
        return float(np.mean([self._known(t) for t in range(first, slot + 1)]))

    def window(self, slot: int, n: int) -> np.ndarray:
        """s_slot .. s_{slot+n-1} as known in ``slot``, shape (n,): the actual s_slot, then for each
        later slot its forecast if given (``issued``: the newest issued by ``slot``'s start that covers
        it; else ``forecast``), else persistence, the known value P*ceil(k/P) slots earlier, else (no
        value that far back) s_slot."""
        values = np.asarray(self.values, dtype=float)
        out = np.empty(n)
        now = self._known(slot)
        out[0] = now
        issued = self.issued.known(self.history_slots + slot, n) if self.issued is not None else None
        for k in range(1, n):
            target = slot + k
            index = self.history_slots + target
            if issued is not None and not math.isnan(issued[k]):
                out[k] = float(issued[k])
                continue
            if self.forecast is not None and index < values.size and not math.isnan(self.forecast[index]):
                out[k] = float(self.forecast[index])
                continue
            back = target - self.slots_per_day * math.ceil(k / self.slots_per_day)
            out[k] = self._known(back) if back >= -self.history_slots else now
        return out
