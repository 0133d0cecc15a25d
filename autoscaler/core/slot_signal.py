"""A per-slot cost signal as a replay knows it (:class:`SlotSignal`): the values, the history before
slot 0, and what is known in each slot of the slots after it (a forecast, else persistence)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from autoscaler.core.errors import ConfigError
from autoscaler.core.forecast import (
    EVALUATION_DAYS,
    KINDS,
    Forecast,
    band_by_lead,
    band_of,
    blend,
    history_needed,
    scored_leads,
)

if TYPE_CHECKING:
    from autoscaler.core.issued import IssuedSlots


@dataclass(frozen=True, eq=False)
class SlotSignal:
    """A per-slot cost signal s as a replay knows it: actual values, and an optional forecast.

    ``values``: shape (history_slots + n,), finite, >= 0: the mean signal in slots -history_slots .. n-1
    of the replay (slot 0 is its first). ``forecast``: None, or the same shape with NaN where there is
    no forecast: the value forecast for each slot. ``slots_per_day``: the persistence period P, slots.
    ``kind``: how slots without a given forecast are forecast (:data:`autoscaler.core.forecast.KINDS`).
    ``issued``: None, or forecasts as issued on the same slots (its slot 0 is slot -history_slots):
    in slot t only what was issued by t's start is read (:meth:`forecast_at`).
    Slots after the last value take persistence as well (the last day repeated).
    Raises ConfigError for shapes that do not fit or values that are not finite and >= 0.
    """

    values: np.ndarray
    history_slots: int
    slots_per_day: int
    forecast: np.ndarray | None = None
    kind: str = "blend"
    issued: IssuedSlots | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"signal: the forecast kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
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

    def _known_range(self, first: int, last: int) -> np.ndarray:
        """The actual values of slots first..last (inclusive), shape (last - first + 1,): NaN before the
        history, persistence past the covered end (as :meth:`_known`)."""
        slots = np.arange(first, last + 1)
        covered_last = self.n_slots - 1
        beyond = slots > covered_last
        slots = slots.copy()
        slots[beyond] -= self.slots_per_day * np.ceil((slots[beyond] - covered_last) / self.slots_per_day).astype(int)
        slots[beyond] = np.maximum(slots[beyond], -self.history_slots)
        out = np.full(slots.shape, math.nan)
        inside = slots >= -self.history_slots
        out[inside] = np.asarray(self.values, dtype=float)[self.history_slots + slots[inside]]
        return out

    def forecast_at(self, slot: int, n: int) -> Forecast:
        """The signal over slots slot .. slot+n-1 as known in ``slot``, with its error band (shapes (n,)):
        the actual s_slot, then for each later slot the given forecast where there is one (its band:
        :func:`autoscaler.core.forecast.band_of`, its own recent error; ``issued``'s newest issue by the
        start of ``slot`` first, its band the issues' own recent error one slot ahead), else ``kind``'s:
        "blend", the error-weighted blend of :func:`autoscaler.core.forecast.blend`; "persistence", the
        known value P*ceil(k/P) slots earlier, else (no value that far back) s_slot, its band
        persistence's recent error. Only values up to ``slot`` are read, and the forecast's values for
        later slots."""
        past = self._known_range(slot - history_needed(self.slots_per_day) + 1, slot)
        made = blend(past, n, self.slots_per_day, self.kind)
        values, band = made.values.copy(), made.band.copy()
        if self.kind == "persistence":
            now = float(past[-1])
            for k in range(1, n):
                back = slot + k - self.slots_per_day * math.ceil(k / self.slots_per_day)
                values[k] = self._known(back) if back >= -self.history_slots else now
        if self.forecast is not None:
            forecast = np.asarray(self.forecast, dtype=float)
            first = self.history_slots + slot + 1
            given = np.full(n - 1, math.nan)
            inside = forecast[first : first + n - 1]
            given[: inside.size] = inside
            has = ~np.isnan(given)
            if has.any():
                start = max(0, self.history_slots + slot - past.size + 1)
                own = forecast[start : self.history_slots + slot + 1]
                own_band = band_of(own, past[past.size - own.size :], n, self.slots_per_day)
                values[1:][has] = given[has]
                band[1:][has] = own_band[1:][has]
        if self.issued is not None:
            # Newest first: an issued value stands over a plain forecast's. Its band: the issues' own
            # error at each lead over the last days (issued_band).
            issued = self.issued.known(self.history_slots + slot, n)
            has = ~np.isnan(issued[1:])
            if has.any():
                values[1:][has] = issued[1:][has]
                band[1:][has] = self.issued_band(slot, n)[1:][has]
        return Forecast(values, band, made.weights)

    def issued_band(self, slot: int, n: int) -> np.ndarray:
        """The error band of ``issued`` at each lead k = 0 .. n-1 as known in ``slot``, shape (n,), band[0] = 0:
        for each scored lead L (:func:`autoscaler.core.forecast.scored_leads`), the root mean square of
        (what was issued L slots before a slot - its actual value) over the slots of the last
        EVALUATION_DAYS days up to ``slot``, from MIN_SCORED of them; each k takes the nearest scored
        lead's (on a log scale, as the blend's band). A provider's forecast a day ahead is worse than an
        hour ahead, and a band scored one slot ahead would let a far slot's gain through on a near
        slot's error. No lead scored: 0 (nothing known of its error). Only issues issued by the start of
        each target slot's issue time, and actual values up to ``slot``, are read."""
        leads = scored_leads(n, self.slots_per_day)
        if self.issued is None or leads.size == 0:
            return np.zeros(int(n))
        hi = self.history_slots + slot + 1
        lo = max(0, hi - EVALUATION_DAYS * self.slots_per_day)
        actual = np.asarray(self.values, dtype=float)[lo:hi]
        return band_by_lead(n, leads, [self._issued_ahead(int(lead), lo, hi) - actual for lead in leads])

    def _issued_ahead(self, lead: int, lo: int, hi: int) -> np.ndarray:
        """For slots lo .. hi-1 of ``values``, what ``issued`` forecast for each ``lead`` slots before it
        (NaN: nothing), shape (hi - lo,); computed once per slot and lead, as slots are decided."""
        size = np.asarray(self.values).size
        ahead, done = self._ahead_cache.setdefault(lead, (np.full(size, math.nan), np.zeros(size, dtype=bool)))
        for index in np.flatnonzero(~done[lo:hi]) + lo:
            if index - lead >= 0:
                ahead[index] = self.issued.known(int(index) - lead, lead + 1)[lead]
            done[index] = True
        return ahead[lo:hi]

    @functools.cached_property
    def _ahead_cache(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        return {}

    def window(self, slot: int, n: int) -> np.ndarray:
        """s_slot .. s_{slot+n-1} as known in ``slot``, shape (n,): :meth:`forecast_at`'s values."""
        return self.forecast_at(slot, n).values
