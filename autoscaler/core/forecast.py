"""A forecast of the cost signal that knows how wrong it is: simple forecasts of the grid's carbon
intensity (or a price), blended by their recent errors on the signal itself, with an error band.

hold+carbon (:mod:`autoscaler.core.policies.carbon`) decides each slot t by the signal over the next
3D+1 slots. When no forecast source is given, those slots' values are forecast here from the actual
values up to slot t only (nothing later is read). Four forecasts of the value k slots ahead:

* **latest**: s_t (the grid an hour from now is most like the grid now);
* **yesterday**: the value one day before the target (P*ceil(k/P) slots earlier, P slots a day);
* **last week**: the value one week before the target (a weekday is more like the same weekday);
* **day mean**: the mean of the last day's values.

Which is right depends on the lead k and on the grid: on the French grid of 2020 "latest" wins up to
a few hours ahead, "yesterday" and "last week" beyond, and none is right on a day the weather
changes. So each is scored, at a few leads, by its mean squared error over the issue times of the
last EVALUATION_DAYS days whose targets are already known (t - j with j >= k), and they are blended
with weights in inverse proportion to those errors (the forecast-combination rule of Bates and Granger,
1969, with the errors taken independent). The **band** at lead k is the root mean square of the
blend's own errors at that lead over the same issue times: how far off the blend has been, lately,
that far ahead. A forecast that would have been wrong lately gets a wide band, and hold+carbon's
hedge (:func:`autoscaler.core.policies.carbon.hedged_weights`) then moves no work for it.

Scores at the leads of :func:`scored_leads` (1, 2, 3, 6, 12, ... slots) stand for the leads around
them (the nearest scored lead on a log scale). A forecast that cannot be scored (no history that far
back) takes no part; with none scored the forecast is s_t, band 0 (nothing known: a flat window, so
hold+carbon plays hold's decision).

:func:`band_of` gives the band of any other forecast (a provider's, ``perfect``) from its own errors
over the same days. Pure: numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from autoscaler.core.errors import ConfigError

KINDS = ("blend", "persistence")
"""The forecasts made here: the error-weighted blend (the default), or yesterday's values alone
(persistence, the rule before the blend; its band is its own recent error)."""

CANDIDATES = ("latest", "yesterday", "last week", "day mean", "yesterday + offset", "last week + offset")

EVALUATION_DAYS = 3
"""Days of past issue times each forecast is scored over: recent enough to follow a change of season
or of the grid's mix, long enough (864 five-minute slots) that one odd day does not decide alone."""

WEEK_DAYS = 7

MIN_SCORED = 12
"""Issue times with a known target needed before a forecast is scored at a lead (an hour of 5-minute slots)."""


def history_needed(slots_per_day: int) -> int:
    """Slots of actual values before slot t that every forecast can be scored with: a week back from
    the oldest issue time scored, plus the scoring days: (WEEK_DAYS + EVALUATION_DAYS + 1) * P."""
    return (WEEK_DAYS + EVALUATION_DAYS + 1) * int(slots_per_day)


def scored_leads(n: int, slots_per_day: int = 0) -> np.ndarray:
    """The leads k scored for a window of ``n`` slots (k = 1 .. n-1): 1, 2, 3, then doubling from 6,
    and n-1; shape (j,), increasing, empty for n <= 1. A lead of a whole number of days
    (``slots_per_day`` > 0) is scored one slot earlier: a day ahead, the value now *is* yesterday's
    for the target, so its score there says nothing of the leads around it."""
    if n <= 1:
        return np.zeros(0, dtype=int)
    leads = [1, 2, 3]
    k = 6
    while k < n - 1:
        leads.append(k)
        k *= 2
    leads.append(n - 1)
    if slots_per_day > 1:
        leads = [lead - 1 if lead % slots_per_day == 0 else lead for lead in leads]
    return np.array(sorted({lead for lead in leads if 1 <= lead <= n - 1}), dtype=int)


def nearest_scored(n: int, leads: np.ndarray) -> np.ndarray:
    """For each k = 1 .. n-1, the index in ``leads`` of the nearest scored lead on a log scale; shape (n-1,)."""
    k = np.arange(1, n, dtype=float)
    distance = np.abs(np.log(k)[:, None] - np.log(leads.astype(float))[None, :])
    return np.argmin(distance, axis=1)


@dataclass(frozen=True)
class Forecast:
    """The signal over slots t .. t+n-1 as forecast in slot t.

    ``values``: shape (n,), values[0] = s_t (known); ``band``: shape (n,), >= 0, the root mean square
    error the forecast has had lately at each lead (band[0] = 0), in the signal's unit; ``weights``:
    the blend's weight of each of :data:`CANDIDATES` at each scored lead, shape (len(CANDIDATES), j)
    (zeros where a forecast took no part; empty for a forecast not blended here)."""

    values: np.ndarray
    band: np.ndarray
    weights: np.ndarray


def _candidates(past: np.ndarray, issue: np.ndarray, lead: int, slots_per_day: int, day_mean: np.ndarray) -> np.ndarray:
    """Each candidate's forecast, issued at positions ``issue`` of ``past`` for ``lead`` slots later;
    shape (len(CANDIDATES), len(issue)), NaN where it needs a value before ``past``'s first."""
    size = past.shape[0]
    target = issue + lead

    def at(positions: np.ndarray) -> np.ndarray:
        out = np.full(positions.shape, math.nan)
        inside = (positions >= 0) & (positions < size)
        out[inside] = past[positions[inside]]
        return out

    day_back = slots_per_day * math.ceil(lead / slots_per_day)
    week = WEEK_DAYS * slots_per_day
    week_back = week * math.ceil(lead / week)
    now, yesterday, last_week = at(issue), at(target - day_back), at(target - week_back)
    offset_day = now - at(issue - day_back)
    offset_week = now - at(issue - week_back)
    return np.vstack([now, yesterday, last_week, day_mean[np.clip(issue, 0, size - 1)], yesterday + offset_day, last_week + offset_week])


def _forecasts_now(past: np.ndarray, n: int, slots_per_day: int, day_mean: np.ndarray) -> np.ndarray:
    """Each candidate's forecast of slots t+1 .. t+n-1 issued now (at past[-1]); shape
    (len(CANDIDATES), n-1), NaN where it needs a value before ``past``'s first."""
    size = past.shape[0]
    lead = np.arange(1, n)
    target = size - 1 + lead
    week = WEEK_DAYS * slots_per_day

    def at(positions: np.ndarray) -> np.ndarray:
        out = np.full(positions.shape, math.nan)
        inside = (positions >= 0) & (positions < size)
        out[inside] = past[positions[inside]]
        return out

    day_back = slots_per_day * np.ceil(lead / slots_per_day).astype(int)
    week_back = week * np.ceil(lead / week).astype(int)
    now = np.full(n - 1, past[-1])
    yesterday, last_week = at(target - day_back), at(target - week_back)
    offset_day, offset_week = now - at(size - 1 - day_back), now - at(size - 1 - week_back)
    return np.vstack([now, yesterday, last_week, np.full(n - 1, day_mean[-1]), yesterday + offset_day, last_week + offset_week])


def _trailing_day_mean(past: np.ndarray, slots_per_day: int) -> np.ndarray:
    """The mean of the P values up to and including each position, NaN where fewer than P are known; shape (size,)."""
    size = past.shape[0]
    known = np.where(np.isnan(past), 0.0, past)
    count = np.cumsum(~np.isnan(past))
    total = np.cumsum(known)
    out = np.full(size, math.nan)
    if size >= slots_per_day:
        window_total = total[slots_per_day - 1 :] - np.concatenate([[0.0], total[:-slots_per_day]])
        window_count = count[slots_per_day - 1 :] - np.concatenate([[0], count[:-slots_per_day]])
        with np.errstate(invalid="ignore", divide="ignore"):
            out[slots_per_day - 1 :] = np.where(window_count == slots_per_day, window_total / np.maximum(window_count, 1), math.nan)
    return out


def blend(past: np.ndarray, n: int, slots_per_day: int, kind: str = "blend") -> Forecast:
    """The forecast of slots t .. t+n-1 made in slot t from ``past``: the actual values of the slots up
    to and including t (past[-1] = s_t), shape (h,), h >= 1, NaN where unknown. ``kind``: "blend" (the
    module's rule) or "persistence" (yesterday's values, the band its own recent error).

    Returns a :class:`Forecast` of n values. Raises ConfigError for an empty ``past``, an s_t that is
    not finite and >= 0, n < 1, slots_per_day < 1 or an unknown kind.
    """
    past = np.asarray(past, dtype=float)
    if kind not in KINDS:
        raise ConfigError(f"forecast: expected one of {', '.join(KINDS)}, got {kind!r}")
    if past.ndim != 1 or past.size < 1 or not (math.isfinite(past[-1]) and past[-1] >= 0):
        raise ConfigError("forecast: expected the past values as shape (h,), h >= 1, with a finite s_t >= 0 last")
    if int(n) != n or n < 1 or int(slots_per_day) != slots_per_day or slots_per_day < 1:
        raise ConfigError(f"forecast: n and slots_per_day must be whole numbers >= 1, got {n!r} and {slots_per_day!r}")
    n, per_day = int(n), int(slots_per_day)
    now = float(past[-1])
    values = np.full(n, now)
    band = np.zeros(n)
    leads = scored_leads(n, per_day)
    weights = np.zeros((len(CANDIDATES), leads.size))
    if n == 1:
        return Forecast(values, band, weights)
    size = past.shape[0]
    day_mean = _trailing_day_mean(past, per_day)
    evaluation = EVALUATION_DAYS * per_day
    lead_bands = np.zeros(leads.size)
    for j, lead in enumerate(leads):
        issue = np.arange(size - 1 - lead - evaluation + 1, size - lead)  # issue times whose target is known
        issue = issue[issue >= 0]
        if issue.size < MIN_SCORED:
            continue
        forecasts = _candidates(past, issue, int(lead), per_day, day_mean)
        errors = past[issue + lead][None, :] - forecasts
        usable = np.sum(np.isfinite(errors), axis=1) >= MIN_SCORED
        if kind == "persistence":
            usable &= np.arange(len(CANDIDATES)) == CANDIDATES.index("yesterday")
        if not usable.any():
            continue
        mse = np.array([np.nanmean(row**2) if ok else math.inf for row, ok in zip(errors, usable)])
        inverse = np.where(usable, 1.0 / np.maximum(mse, 1e-12 * max(now, 1.0) ** 2), 0.0)
        weights[:, j] = inverse / inverse.sum()
        rows = np.all(np.isfinite(errors[usable]), axis=0)
        combined = weights[usable, j] @ errors[usable][:, rows]
        lead_bands[j] = float(np.sqrt(np.mean(combined**2))) if combined.size else 0.0
    scored = weights.sum(axis=0) > 0
    if not scored.any():
        return Forecast(values, band, weights)
    usable_leads = np.flatnonzero(scored)
    nearest = usable_leads[nearest_scored(n, leads[usable_leads])]  # (n-1,)
    per_lead = _forecasts_now(past, n, per_day, day_mean)  # (len(CANDIDATES), n-1)
    w = weights[:, nearest]  # (len(CANDIDATES), n-1)
    known = np.isfinite(per_lead) & (w > 0)
    norm = np.where(known, w, 0.0).sum(axis=0)
    mixed = np.where(known, w * np.where(known, per_lead, 0.0), 0.0).sum(axis=0)
    values[1:] = np.where(norm > 0, mixed / np.maximum(norm, 1e-300), now)
    band[1:] = lead_bands[nearest]
    return Forecast(np.maximum(values, 0.0), band, weights)


def band_by_lead(n: int, leads: np.ndarray, errors: list[np.ndarray]) -> np.ndarray:
    """A forecast's band at each lead k = 0 .. n-1 from its errors at the scored ``leads`` (``errors[j]``:
    forecast - actual at lead ``leads[j]`` over the slots scored, NaN where either is unknown): the
    root mean square at each lead with MIN_SCORED errors or more, and for each k the nearest such lead's
    (on a log scale, as the blend's band); shape (n,), band[0] = 0; all 0 when no lead has enough."""
    band = np.zeros(int(n))
    lead_bands = np.full(len(leads), math.nan)
    for j, error in enumerate(errors):
        error = np.asarray(error, dtype=float)
        error = error[np.isfinite(error)]
        if error.size >= MIN_SCORED:
            lead_bands[j] = float(np.sqrt(np.mean(error**2)))
    scored = np.flatnonzero(np.isfinite(lead_bands))
    if scored.size:
        band[1:] = lead_bands[scored[nearest_scored(n, np.asarray(leads)[scored])]]
    return band


def band_of(forecast: np.ndarray, actual: np.ndarray, n: int, slots_per_day: int) -> np.ndarray:
    """The band of a forecast given from outside (a provider's series, or ``perfect``): the root mean
    square of (forecast - actual) over the last EVALUATION_DAYS days where both are known, the same
    at every lead (a series without issue times says nothing of its lead); shape (n,), band[0] = 0.
    ``forecast`` and ``actual``: shape (h,), the slots up to and including t, NaN where unknown."""
    evaluation = EVALUATION_DAYS * int(slots_per_day)
    error = np.asarray(forecast, dtype=float)[-evaluation:] - np.asarray(actual, dtype=float)[-evaluation:]
    error = error[np.isfinite(error)]
    band = np.full(int(n), float(np.sqrt(np.mean(error**2))) if error.size >= MIN_SCORED else 0.0)
    band[0] = 0.0
    return band
