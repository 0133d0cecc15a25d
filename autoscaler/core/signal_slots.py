"""A cost signal on slots: the one pure place where a signal (:class:`autoscaler.core.energy.signal.Signal`) becomes
the per-slot values a decision is made by, for each route that carries one to a decision.

* the daemon: :func:`slot_window`, hold+carbon's window of the slot being decided (the feed,
  :mod:`autoscaler.adapters.carbon_feed`, reads the source and hands the signal here);
* the replay (and sweep, and ``report --replay``): :func:`place_signal`, the signal on a replay's
  slots with a day of history and an optional forecast (:class:`ReplaySignal`);
* the report of measured slots: :func:`covered_means` (:func:`autoscaler.core.energy.signal.covered_means`, kept
  here where its callers find it), the signal's mean over each slot, NaN where it does not cover one
  (``autoscaler.core.energy.accounting.slot_signal``).

A carbon intensity is decided by in gCO2eq/kWh (:func:`autoscaler.core.energy.signal.in_grams`). Nothing here does I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from autoscaler.core.controller import CarbonWindow
from autoscaler.core.energy.forecast_archive import ForecastArchive, archive_in_grams
from autoscaler.core.energy.signal import Signal, covered_means, in_grams, plausibility_notes, resample, utc_text
from autoscaler.core.errors import ConfigError, TraceError
from autoscaler.core.forecast import EVALUATION_DAYS, KINDS, band_by_lead, blend, history_needed, scored_leads
from autoscaler.core.issued import IssuedSlots
from autoscaler.core.policies import carbon
from autoscaler.core.policies.carbon import window_slots

if TYPE_CHECKING:
    from autoscaler.core.energy.accounting import ScheduleEnergy

DAY_S = 86_400.0

CARBON_UNIT = "gCO2eq/kWh"
"""The unit every carbon intensity is converted to (lbs/MWh by :func:`autoscaler.core.energy.signal.in_grams`)."""

PRICE_UNITS = ("$/kWh", "$/node-hour")


@dataclass(frozen=True, eq=False)
class ReplaySignal:
    """A cost signal placed on a replay's slots (:func:`place_signal` builds one).

    ``slots``: the per-slot values the policies read (slot 0 is the trace's first slot; history
    before it, a forecast if any). ``unit``: of those values, gCO2eq/kWh (a carbon intensity, also
    when the source was in lbs/MWh), $/kWh or $/node-hour. ``source_unit``: the source's own unit.
    ``start_s``: Unix seconds of slot 0. ``forecast_kind``: "persistence", "perfect", the forecast's
    source, or "as issued: " and the archive's source. ``notes``: what a reader of the result should know about how it was placed
    (a parameter to change is marked, `start_s`, and the command line names it by its flag).
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
        return float(np.sum(self.priced_slots(energy)))

    def priced_slots(self, energy: ScheduleEnergy) -> np.ndarray:
        """:meth:`priced` slot by slot, shape (n_slots,) of ``energy``."""
        s = self.actual(energy.slot_energy_wh.shape[0])
        if self.unit == "$/node-hour":
            return energy.nodes * (self.slot_s / 3600.0) * s
        return energy.slot_energy_wh / 1000.0 * s


def place_signal(
    signal: Signal,
    slot_s: float,
    required_slots: int,
    wanted_slots: int,
    start_s: float | None = None,
    forecast: str | Signal | ForecastArchive = "blend",
) -> ReplaySignal:
    """Place ``signal`` on a replay's slots: slot k is [start_s + k*slot_s, start_s + (k+1)*slot_s).

    ``required_slots``: the slots the signal must cover (the window plus D: every slot a uniform-deadline
    policy schedules); TraceError from :func:`autoscaler.core.energy.signal.resample` names the source and the first UTC
    time missing otherwise, or a gap. ``wanted_slots`` (>= required): the slots read if covered (a
    longer horizon, the look-ahead of the last slot); past what is covered the policies and the costing
    use persistence, the last day repeated. History: the whole slots covered before ``start_s``, at most
    :func:`autoscaler.core.forecast.history_needed` (11 days: the blend scores its forecasts over the
    last 3 days, one of them a week back). ``start_s`` None: 11 days (``history_needed``) after the signal's
    first time when the signal covers them plus ``wanted_slots``, else one day after it when it covers
    that, else its first time (a note says the forecast has no yesterday for the first day; another,
    under the blend, that it has fewer than the 11 days it scores with). ``forecast``: "blend" (the error-weighted blend of
    :mod:`autoscaler.core.forecast`, the default), "persistence" (yesterday's values), "perfect" (the
    actual values), a :class:`~autoscaler.core.energy.forecast_archive.ForecastArchive` (forecasts as issued: in slot t
    the newest issued by t's start that covers a slot, :class:`~autoscaler.core.issued.IssuedSlots`;
    ``forecast_kind`` "as issued: SOURCE") or a second Signal with no issue times, used in every slot
    it covers as if known from the start (look-ahead, and a note says so); NaN, persistence,
    elsewhere. Of the same kind as the signal (carbon or the same price unit). A day is
    round(86400 / slot_s) slots.
    Raises ConfigError for a forecast of another kind (starting with the field, `forecast`), TraceError as above.
    """
    source_unit = signal.unit
    values_signal = in_grams(signal)
    slots_per_day = max(1, round(DAY_S / slot_s))
    first_s = float(signal.times_s[0])
    end_s = float(signal.times_s[-1]) + signal.median_interval_s
    notes: list[str] = list(plausibility_notes(signal))
    plausibility = len(notes)
    fallback = "persistence" if forecast == "persistence" else "the blend"
    full_history_s = history_needed(slots_per_day) * slot_s
    if start_s is None:
        if end_s >= first_s + full_history_s + wanted_slots * slot_s:
            start_s = first_s + full_history_s
        elif end_s >= first_s + DAY_S + wanted_slots * slot_s:
            start_s = first_s + DAY_S
        else:
            start_s = first_s
            notes.append(
                f"{signal.source}: the trace starts at the signal's first time {utc_text(start_s)}: the signal does not cover a day "
                f"before it plus the replay's {wanted_slots:,} slots, so {fallback} has no yesterday for the first day "
                "(give `start_s` to place the trace elsewhere)"
            )
    start_s = float(start_s)
    covered = math.floor((end_s - start_s) / slot_s + 1e-9)
    n_values = max(required_slots, min(wanted_slots, covered))
    values = resample(values_signal, start_s, slot_s, n_values)
    before = math.floor((start_s - first_s) / slot_s + 1e-9)
    history_slots = min(history_needed(slots_per_day), max(0, before))
    history = resample(values_signal, start_s - history_slots * slot_s, slot_s, history_slots) if history_slots else np.zeros(0)
    if 0 < history_slots < slots_per_day and len(notes) == plausibility:
        notes.append(
            f"{signal.source}: only {history_slots:,} of a day's {slots_per_day:,} slots are covered before the start "
            f"{utc_text(start_s)}: {fallback} falls back to the current value where it has no yesterday"
        )
    elif history_slots == 0 and len(notes) == plausibility:
        notes.append(f"{signal.source}: nothing is covered before the start {utc_text(start_s)}: {fallback} has no yesterday for the first day")
    elif slots_per_day <= history_slots < history_needed(slots_per_day) and fallback == "the blend" and len(notes) == plausibility:
        notes.append(
            f"{signal.source}: {_days_text(history_slots / slots_per_day)} covered before the start {utc_text(start_s)}, of the "
            f"{history_needed(slots_per_day) // slots_per_day} the blend scores its forecasts over (3 days, one of them a week back): "
            "it weighs the forecasts it can score (give a longer signal, or a later `start_s`, for all of them)"
        )
    if n_values < wanted_slots:
        notes.append(
            f"{signal.source}: covers {n_values:,} of the {wanted_slots:,} slots the policies may read (to {utc_text(start_s + n_values * slot_s)}); "
            "after that the last day is repeated"
        )
    all_values = np.concatenate([history, values])
    forecast_values = None
    issued = None
    if isinstance(forecast, ForecastArchive):
        forecast_kind = f"as issued: {forecast.source}"
        issued, issued_notes = _placed_archive(forecast, values_signal.unit, start_s, history_slots, slot_s, all_values.size)
        notes.extend(issued_notes)
    elif isinstance(forecast, Signal):
        forecast_kind = forecast.source
        notes.extend(plausibility_notes(forecast))
        notes.append(
            f"{forecast.source}: the forecast has no issue times, so it is used as if known from the start (look-ahead: a slot reads "
            "values that may have been issued after it); an archive of forecasts as issued (JSON lines, a folder of documents, or CSV "
            "issued,time,value) is read without look-ahead"
        )
        forecast_values = _placed_forecast(forecast, values_signal.unit, start_s - history_slots * slot_s, slot_s, all_values.size)
        if np.isnan(forecast_values).all():
            notes.append(f"{forecast.source}: the forecast covers none of the replay's slots: the blend everywhere")
    elif forecast == "perfect":
        forecast_kind = "perfect"
        forecast_values = np.concatenate([np.full(history_slots, np.nan), values])
    elif forecast in KINDS:
        forecast_kind = forecast
    else:
        raise ConfigError(f"forecast: expected {', '.join(KINDS)}, 'perfect', a signal or a forecast archive, got {forecast!r}")
    kind = forecast if forecast in KINDS else "blend"
    slots = carbon.SlotSignal(all_values, history_slots, slots_per_day, forecast_values, kind=kind, issued=issued)
    return ReplaySignal(slots, values_signal.unit, signal.source, source_unit, start_s, float(slot_s), forecast_kind, tuple(notes))


def _same_kind(source: str, forecast_unit: str, unit: str) -> None:
    """Refuse a forecast of another kind than the signal (a price for a carbon intensity, another price unit)."""
    if unit == CARBON_UNIT:
        if forecast_unit not in (CARBON_UNIT, "lbs/MWh"):
            raise ConfigError(f"`forecast` {source}: {forecast_unit} is a price; the signal is a carbon intensity")
    elif forecast_unit != unit:
        raise ConfigError(f"`forecast` {source}: its unit is {forecast_unit}, the signal's is {unit}")


def _placed_archive(
    archive: ForecastArchive, unit: str, start_s: float, history_slots: int, slot_s: float, n_slots: int
) -> tuple[IssuedSlots, list[str]]:
    """The archive's issues on the replay's slots (history first) and the notes on them. Raises
    ConfigError for an archive of another kind than the signal."""
    _same_kind(archive.source, archive.unit, unit)
    archive = archive_in_grams(archive)
    issued = IssuedSlots.from_archive(archive, start_s - history_slots * slot_s, slot_s, n_slots)
    notes = list(archive.notes)
    every_value = np.concatenate([issue.signal.values for issue in archive.issues])
    notes.extend(plausibility_notes(Signal(np.arange(every_value.size, dtype=float), every_value, archive.unit, archive.source)))
    first_s = archive.issues[0].issued_s
    if all(np.isnan(values).all() for values in issued.values):
        notes.append(f"{archive.source}: no forecast in the archive covers a slot of the replay: the blend everywhere")
    elif first_s > start_s:
        notes.append(
            f"{archive.source}: the first forecast was issued at {utc_text(first_s)}, after the trace's start {utc_text(start_s)}: "
            "slots before it are decided by the blend"
        )
    return issued, notes


def _placed_forecast(forecast: Signal, unit: str, first_slot_s: float, slot_s: float, n_slots: int) -> np.ndarray:
    """The forecast's mean per slot over the slots it covers whole, NaN elsewhere; shape (n_slots,)."""
    _same_kind(forecast.source, forecast.unit, unit)
    forecast = in_grams(forecast)
    first = max(0, math.ceil((float(forecast.times_s[0]) - first_slot_s) / slot_s - 1e-9))
    end_s = float(forecast.times_s[-1]) + forecast.median_interval_s
    last = min(n_slots, math.floor((end_s - first_slot_s) / slot_s + 1e-9))
    out = np.full(n_slots, np.nan)
    if last > first:
        out[first:last] = resample(forecast, first_slot_s + first * slot_s, slot_s, last - first)
    return out



def slot_window(actual: Signal, forecast: Signal | ForecastArchive | None, slot_start_s: float, slot_s: float, deadline_slots: int) -> CarbonWindow:
    """hold+carbon's window for the slot starting at ``slot_start_s`` (Unix s): pure.

    With P = round(86,400 / slot_s) slots a day and k = 0 .. 3D the slots from now: values[0] is
    the actual signal's mean over this slot; values[k] is the actual mean where ``actual`` covers
    slot k, else the forecast's where ``forecast`` covers it (an archive: the newest issue issued at
    or before ``slot_start_s`` that covers slot k, :func:`issued_means`), else the blend of
    :func:`autoscaler.core.forecast.blend` from the actual values of the last 11 days up to this slot;
    ``band``: the error band (0 for actual values): an archive's own error at each lead
    (:func:`archive_band`), else the blend's. ``reference``: the mean of the actual
    values known over the last day (slots -(P-1) .. 0). Both signals in one unit (the caller converts lbs/MWh to g/kWh).

    Returns a CarbonWindow of shape (3D+1,). Raises TraceError naming the source and the slot's UTC
    times when ``actual`` does not cover the slot itself; ConfigError when the two units differ.
    """
    if forecast is not None and forecast.unit != actual.unit:
        raise ConfigError(f"{forecast.source}: the forecast is in {forecast.unit}, the signal ({actual.source}) in {actual.unit}")
    per_day = max(1, round(DAY_S / slot_s))
    n = window_slots(deadline_slots)
    history = history_needed(per_day)
    known = covered_means(actual, slot_start_s - (history - 1) * slot_s, slot_s, history - 1 + n)
    past, ahead = known[: history - 1], known[history - 1 :]
    now = float(ahead[0])
    if math.isnan(now):
        raise TraceError(
            actual.source,
            None,
            f"does not cover the slot decided, {utc_text(slot_start_s)} to {utc_text(slot_start_s + slot_s)} "
            f"(the series runs from {utc_text(float(actual.times_s[0]))} to {utc_text(float(actual.times_s[-1]))})",
        )
    if isinstance(forecast, ForecastArchive):
        predicted = issued_means(forecast, slot_start_s, slot_s, n)
    elif forecast is not None:
        predicted = covered_means(forecast, slot_start_s, slot_s, n)
    else:
        predicted = np.full(n, math.nan)
    made = blend(np.append(past, now), n, per_day)
    values, band = made.values.copy(), made.band.copy()
    values[0], band[0] = now, 0.0
    is_actual = ~np.isnan(ahead)
    is_forecast = ~is_actual & ~np.isnan(predicted)
    is_actual[0] = is_forecast[0] = False
    values[is_actual], band[is_actual] = ahead[is_actual], 0.0
    values[is_forecast] = predicted[is_forecast]
    if isinstance(forecast, ForecastArchive) and is_forecast.any():
        # An archive's own error at each lead, scored on its past issues (a plain series has no issue
        # times to score a lead by: the blend's band at the same lead stands for it).
        band[is_forecast] = archive_band(forecast, known[:history], slot_start_s, slot_s, n, per_day)[is_forecast]
    forecast_slots = int(is_forecast.sum())
    persisted_slots = n - 1 - forecast_slots - int(is_actual.sum())
    day = np.append(past[-(per_day - 1) :] if per_day > 1 else past[:0], now)
    reference = float(np.mean(day[~np.isnan(day)]))
    return CarbonWindow(values, reference, actual.unit, now, actual.source, forecast_slots, persisted_slots, band)


def archive_band(archive: ForecastArchive, past: np.ndarray, slot_start_s: float, slot_s: float, n: int, slots_per_day: int) -> np.ndarray:
    """The error band of ``archive`` at each lead k = 0 .. n-1 for the slot starting at ``slot_start_s``,
    shape (n,), band[0] = 0: at each scored lead L (:func:`autoscaler.core.forecast.scored_leads`), what
    the issues read L slots before each slot of the last EVALUATION_DAYS days forecast for it, against
    its actual value (``past``: the actual values of the slots up to and including this one, shape (h,),
    NaN where unknown), as :func:`autoscaler.core.forecast.band_by_lead` scores them. The same band
    as :meth:`SlotSignal.issued_band` gives a replay. Only issues issued by ``slot_start_s`` are read."""
    past = np.asarray(past, dtype=float)
    leads = scored_leads(n, slots_per_day)
    scored = min(past.size, EVALUATION_DAYS * slots_per_day)
    if leads.size == 0 or scored == 0:
        return np.zeros(int(n))
    first = past.size - scored - int(leads[-1])  # the earliest slot an issue is read in, relative to past[0]
    first_s = slot_start_s - (past.size - 1 - first) * slot_s
    issues = tuple(issue for issue in archive.issues if issue.issued_s <= slot_start_s and issue.signal.times_s.size > 1 and issue.end_s > first_s)
    if not issues:
        return np.zeros(int(n))
    issued = IssuedSlots.from_archive(ForecastArchive(archive.source, archive.unit, issues), first_s, slot_s, past.size - first)
    targets = np.arange(past.size - scored, past.size)  # indices into past
    errors = []
    for lead in leads:
        lead = int(lead)
        ahead = np.array([issued.known(int(t) - lead - first, lead + 1)[lead] if t - lead - first >= 0 else math.nan for t in targets])
        errors.append(ahead - past[targets])
    return band_by_lead(n, leads, errors)


def issued_means(archive: ForecastArchive, slot_start_s: float, slot_s: float, n_slots: int) -> np.ndarray:
    """What ``archive`` forecast at ``slot_start_s`` (Unix s) for the slots [slot_start_s + k*slot_s,
    slot_start_s + (k+1)*slot_s), k = 0 .. n_slots-1: for each, the mean of the newest issue issued at
    or before ``slot_start_s`` that covers it, NaN where none does; shape (n_slots,), in the archive's
    unit. Issues issued later, and those ending before the slot after this one, are not read."""
    after_s = slot_start_s + slot_s
    known = [issue for issue in archive.issues if issue.issued_s <= slot_start_s and issue.signal.times_s.size > 1 and issue.end_s > after_s]
    if not known:
        return np.full(n_slots, math.nan)
    window = ForecastArchive(archive.source, archive.unit, tuple(known))
    return IssuedSlots.from_archive(window, slot_start_s, slot_s, n_slots).known(0, n_slots)


def _days_text(days: float) -> str:
    return "1 day is" if days == 1 else f"{days:.3g} days are"
