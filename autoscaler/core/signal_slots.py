"""A cost signal on slots: the one pure place where a signal (:class:`energy.signal.Signal`) becomes
the per-slot values a decision is made by, for each route that carries one to a decision.

* the daemon: :func:`slot_window`, hold+carbon's window of the slot being decided (the feed,
  :mod:`autoscaler.adapters.carbon_feed`, reads the source and hands the signal here);
* the replay (and sweep, and ``report --replay``): :func:`place_signal`, the signal on a replay's
  slots with a day of history and an optional forecast (:class:`ReplaySignal`);
* the report of measured slots: :func:`covered_means`, the signal's mean over each slot, NaN where it
  does not cover one (``energy.accounting.slot_signal``).

A carbon intensity is decided by in gCO2eq/kWh (:func:`energy.signal.in_grams`). Nothing here does I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from autoscaler.core.controller import CarbonWindow
from autoscaler.core.errors import ConfigError, TraceError
from autoscaler.core.policies import carbon
from autoscaler.core.policies.carbon import window_slots
from energy.signal import Signal, in_grams, plausibility_notes, resample, utc_text

if TYPE_CHECKING:
    from energy.accounting import ScheduleEnergy

DAY_S = 86_400.0

CARBON_UNIT = "gCO2eq/kWh"
"""The unit every carbon intensity is converted to (lbs/MWh by :func:`energy.signal.in_grams`)."""

PRICE_UNITS = ("$/kWh", "$/node-hour")


@dataclass(frozen=True, eq=False)
class ReplaySignal:
    """A cost signal placed on a replay's slots (:func:`place_signal` builds one).

    ``slots``: the per-slot values the policies read (slot 0 is the trace's first slot; history
    before it, a forecast if any). ``unit``: of those values, gCO2eq/kWh (a carbon intensity, also
    when the source was in lbs/MWh), $/kWh or $/node-hour. ``source_unit``: the source's own unit.
    ``start_s``: Unix seconds of slot 0. ``forecast_kind``: "persistence", "perfect" or the forecast's
    source. ``notes``: what a reader of the result should know about how it was placed.
    """

    slots: carbon.SlotSignal
    unit: str
    source: str
    source_unit: str
    start_s: float
    slot_s: float
    forecast_kind: str = "persistence"
    notes: tuple[str, ...] = ()

    @property
    def is_carbon(self) -> bool:
        """True for a carbon intensity (grams of CO2eq), False for a price (dollars)."""
        return self.unit == CARBON_UNIT

    @property
    def total_key(self) -> str:
        """The JSON key of a schedule's total under this signal: ``co2_g`` or ``cost_usd``."""
        return "co2_g" if self.is_carbon else "cost_usd"

    @property
    def saving_key(self) -> str:
        """``co2_saving_pct`` or ``cost_saving_pct``."""
        return "co2_saving_pct" if self.is_carbon else "cost_saving_pct"

    def actual(self, n_slots: int) -> np.ndarray:
        """The signal over slots 0..n_slots-1, shape (n_slots,), in ``unit`` (past the covered end: the last day repeated)."""
        return self.slots.actual(n_slots)

    def priced(self, energy: ScheduleEnergy) -> float:
        """What ``energy``'s schedule costs under the signal: grams of CO2eq (sum of slot_energy_wh/1000 *
        s_t g/kWh), dollars for $/kWh (kWh * price) or for $/node-hour (whole nodes * slot hours * price)."""
        s = self.actual(energy.slot_energy_wh.shape[0])
        if self.unit == "$/node-hour":
            return float(np.sum(energy.nodes * (self.slot_s / 3600.0) * s))
        return float(np.sum(energy.slot_energy_wh / 1000.0 * s))


def place_signal(
    signal: Signal,
    slot_s: float,
    required_slots: int,
    wanted_slots: int,
    start_s: float | None = None,
    forecast: str | Signal = "persistence",
) -> ReplaySignal:
    """Place ``signal`` on a replay's slots: slot k is [start_s + k*slot_s, start_s + (k+1)*slot_s).

    ``required_slots``: the slots the signal must cover (the window plus D: every slot a uniform-deadline
    policy schedules); TraceError from :func:`energy.signal.resample` names the source and the first UTC
    time missing otherwise, or a gap. ``wanted_slots`` (>= required): the slots read if covered (a
    longer horizon, the look-ahead of the last slot); past what is covered the policies and the costing
    use persistence, the last day repeated. History: the whole slots covered before ``start_s``, at most
    one day (persistence looks back a day at most). ``start_s`` None: one day after the signal's first
    time when the signal covers that day plus ``wanted_slots``, else its first time (a note says that
    persistence has no yesterday for the first day). ``forecast``: "persistence" (none), "perfect" (the
    actual values) or a second Signal, used in the slots it covers (NaN, persistence, elsewhere), of the
    same kind (carbon or the same price unit). A day is round(86400 / slot_s) slots.
    Raises ConfigError for a forecast of another kind, TraceError as above.
    """
    source_unit = signal.unit
    values_signal = in_grams(signal)
    slots_per_day = max(1, round(DAY_S / slot_s))
    first_s = float(signal.times_s[0])
    end_s = float(signal.times_s[-1]) + signal.median_interval_s
    notes: list[str] = list(plausibility_notes(signal))
    plausibility = len(notes)
    if start_s is None:
        if end_s >= first_s + DAY_S + wanted_slots * slot_s:
            start_s = first_s + DAY_S
        else:
            start_s = first_s
            notes.append(
                f"{signal.source}: the trace starts at the signal's first time {utc_text(start_s)}: the signal does not cover a day "
                f"before it plus the replay's {wanted_slots:,} slots, so persistence has no yesterday for the first day "
                "(give --start to place the trace elsewhere)"
            )
    start_s = float(start_s)
    covered = math.floor((end_s - start_s) / slot_s + 1e-9)
    n_values = max(required_slots, min(wanted_slots, covered))
    values = resample(values_signal, start_s, slot_s, n_values)
    before = math.floor((start_s - first_s) / slot_s + 1e-9)
    history_slots = min(slots_per_day, max(0, before))
    history = resample(values_signal, start_s - history_slots * slot_s, slot_s, history_slots) if history_slots else np.zeros(0)
    if 0 < history_slots < slots_per_day and len(notes) == plausibility:
        notes.append(
            f"{signal.source}: only {history_slots:,} of a day's {slots_per_day:,} slots are covered before the start "
            f"{utc_text(start_s)}: persistence falls back to the current value where it has no yesterday"
        )
    elif history_slots == 0 and len(notes) == plausibility:
        notes.append(f"{signal.source}: nothing is covered before the start {utc_text(start_s)}: persistence has no yesterday for the first day")
    if n_values < wanted_slots:
        notes.append(
            f"{signal.source}: covers {n_values:,} of the {wanted_slots:,} slots the policies may read (to {utc_text(start_s + n_values * slot_s)}); "
            "after that the last day is repeated"
        )
    all_values = np.concatenate([history, values])
    forecast_values = None
    if isinstance(forecast, Signal):
        forecast_kind = forecast.source
        notes.extend(plausibility_notes(forecast))
        forecast_values = _placed_forecast(forecast, values_signal.unit, start_s - history_slots * slot_s, slot_s, all_values.size)
        if np.isnan(forecast_values).all():
            notes.append(f"{forecast.source}: the forecast covers none of the replay's slots: persistence everywhere")
    elif forecast == "perfect":
        forecast_kind = "perfect"
        forecast_values = np.concatenate([np.full(history_slots, np.nan), values])
    elif forecast == "persistence":
        forecast_kind = "persistence"
    else:
        raise ConfigError(f"forecast: expected 'persistence', 'perfect' or a signal, got {forecast!r}")
    slots = carbon.SlotSignal(all_values, history_slots, slots_per_day, forecast_values)
    return ReplaySignal(slots, values_signal.unit, signal.source, source_unit, start_s, float(slot_s), forecast_kind, tuple(notes))


def _placed_forecast(forecast: Signal, unit: str, first_slot_s: float, slot_s: float, n_slots: int) -> np.ndarray:
    """The forecast's mean per slot over the slots it covers whole, NaN elsewhere; shape (n_slots,)."""
    if unit == CARBON_UNIT:
        if forecast.unit not in (CARBON_UNIT, "lbs/MWh"):
            raise ConfigError(f"--forecast {forecast.source}: {forecast.unit} is a price; the signal is a carbon intensity")
        forecast = in_grams(forecast)
    elif forecast.unit != unit:
        raise ConfigError(f"--forecast {forecast.source}: its unit is {forecast.unit}, the signal's is {unit}")
    first = max(0, math.ceil((float(forecast.times_s[0]) - first_slot_s) / slot_s - 1e-9))
    end_s = float(forecast.times_s[-1]) + forecast.median_interval_s
    last = min(n_slots, math.floor((end_s - first_slot_s) / slot_s + 1e-9))
    out = np.full(n_slots, np.nan)
    if last > first:
        out[first:last] = resample(forecast, first_slot_s + first * slot_s, slot_s, last - first)
    return out



def covered_means(signal: Signal, start_s: float, slot_s: float, n_slots: int) -> np.ndarray:
    """The signal's mean over each slot [start_s + k*slot_s, start_s + (k+1)*slot_s), shape (n_slots,),
    NaN for a slot the signal does not cover (before its first point, after its last step, or across
    a gap: :func:`energy.signal.resample`'s rules). Halves the range where it is not covered, so a
    series with one hole costs O(log n_slots) resamples."""
    try:
        return resample(signal, start_s, slot_s, n_slots)
    except TraceError:
        if n_slots == 1:
            return np.array([math.nan])
    half = n_slots // 2
    return np.concatenate([covered_means(signal, start_s, slot_s, half), covered_means(signal, start_s + half * slot_s, slot_s, n_slots - half)])


def slot_window(actual: Signal, forecast: Signal | None, slot_start_s: float, slot_s: float, deadline_slots: int) -> CarbonWindow:
    """hold+carbon's window for the slot starting at ``slot_start_s`` (Unix s): pure.

    With P = round(86,400 / slot_s) slots a day and k = 0 .. 3D the slots from now: values[0] is
    the actual signal's mean over this slot; values[k] is the actual mean where ``actual`` covers
    slot k, else the forecast's where ``forecast`` covers it, else persistence: the actual value of
    slot k - P*ceil(k/P) (the same slot one day earlier, or a whole number of days for k > P), else
    (not known either) values[0]. ``reference``: the mean of the actual values known over the last
    day (slots -(P-1) .. 0). Both signals in one unit (the caller converts lbs/MWh to g/kWh).

    Returns a CarbonWindow of shape (3D+1,). Raises TraceError naming the source and the slot's UTC
    times when ``actual`` does not cover the slot itself; ConfigError when the two units differ.
    """
    if forecast is not None and forecast.unit != actual.unit:
        raise ConfigError(f"{forecast.source}: the forecast is in {forecast.unit}, the signal ({actual.source}) in {actual.unit}")
    per_day = max(1, round(DAY_S / slot_s))
    n = window_slots(deadline_slots)
    known = covered_means(actual, slot_start_s - (per_day - 1) * slot_s, slot_s, per_day - 1 + n)
    past, ahead = known[: per_day - 1], known[per_day - 1 :]
    now = float(ahead[0])
    if math.isnan(now):
        raise TraceError(
            actual.source,
            None,
            f"does not cover the slot decided, {utc_text(slot_start_s)} to {utc_text(slot_start_s + slot_s)} "
            f"(the series runs from {utc_text(float(actual.times_s[0]))} to {utc_text(float(actual.times_s[-1]))})",
        )
    predicted = covered_means(forecast, slot_start_s, slot_s, n) if forecast is not None else np.full(n, math.nan)
    values = np.empty(n)
    values[0] = now
    forecast_slots = persisted_slots = 0
    for k in range(1, n):
        if not math.isnan(ahead[k]):
            values[k] = ahead[k]
        elif not math.isnan(predicted[k]):
            values[k] = predicted[k]
            forecast_slots += 1
        else:
            back = k - per_day * math.ceil(k / per_day)  # in (-P, 0]
            earlier = now if back == 0 else float(past[per_day - 1 + back])
            values[k] = now if math.isnan(earlier) else earlier
            persisted_slots += 1
    day = np.append(past, now)
    reference = float(np.mean(day[~np.isnan(day)]))
    return CarbonWindow(values, reference, actual.unit, now, actual.source, forecast_slots, persisted_slots)
