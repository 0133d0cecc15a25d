"""The risk of carbon deferral against no deferral (``follow``), day by day: what an operator weighs
before trusting a forecast with the work (issue: bounded regret against no deferral).

A deferral that moves work into slots forecast to be clean can land it in slots that turn out dirty,
so a run's day can emit more than follow's. Over the days replayed, per day d with kg_d the run's
emissions and f_d follow's (both kg CO2eq, over the same slots):

* cut_d = 1 - kg_d / f_d (a negative cut: the day emitted more than follow);
* the expected cut: the mean of cut_d;
* the worst-day regret: max_d (kg_d / f_d - 1), the most a day emitted above follow (negative when
  every day was below it);
* the days above follow: how many d have kg_d > f_d, and their share;
* the cut on the worst 10 % of days: the mean of cut_d over the ceil(n / 10) days of lowest cut (the
  conditional value at risk at 10 %; with fewer than ten days, the worst day).

Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autoscaler.core.errors import ConfigError

__all__ = ["WORST_SHARE", "Risk", "daily_kg", "joined_to_follow_days", "risk_against_follow", "risks_by_day"]

WORST_SHARE = 0.10
"""The share of days, the worst by cut, whose mean cut is reported (at least one day)."""


@dataclass(frozen=True)
class Risk:
    """A run's emissions against follow's over ``days`` days (see the module docstring). Shares are
    fractions (0.05 = 5 %)."""

    days: int
    expected_cut: float
    worst_day_regret: float
    days_above_follow: int
    worst_tenth_cut: float

    @property
    def share_above_follow(self) -> float:
        return self.days_above_follow / self.days


def risk_against_follow(kg: Sequence[float], follow_kg: Sequence[float]) -> Risk:
    """The :class:`Risk` of a run whose day d emitted ``kg[d]`` where follow emitted ``follow_kg[d]``
    (kg CO2eq; shapes (n,), n >= 1). Raises ConfigError for shapes that differ, no day, a value that
    is not finite or is negative, or a follow day of 0 kg (no cut is defined against nothing)."""
    kg_days, follow_days = np.asarray(kg, dtype=float), np.asarray(follow_kg, dtype=float)
    if kg_days.ndim != 1 or kg_days.shape != follow_days.shape or kg_days.size == 0:
        raise ConfigError(f"carbon risk: expected two series of one length >= 1 of kg per day, got shapes {kg_days.shape} and {follow_days.shape}")
    if not (np.isfinite(kg_days).all() and np.isfinite(follow_days).all() and (kg_days >= 0).all() and (follow_days >= 0).all()):
        raise ConfigError("carbon risk: kg per day must be finite and >= 0")
    if (follow_days <= 0).any():
        day = int(np.flatnonzero(follow_days <= 0)[0])
        raise ConfigError(f"carbon risk: follow emitted nothing on day {day + 1}: no cut against it is defined")
    ratio = kg_days / follow_days
    cut = 1.0 - ratio
    worst = max(1, math.ceil(WORST_SHARE * cut.size - 1e-9))
    return Risk(
        days=int(cut.size),
        expected_cut=float(cut.mean()),
        worst_day_regret=float((ratio - 1.0).max()),
        days_above_follow=int((kg_days > follow_days).sum()),
        worst_tenth_cut=float(np.sort(cut)[:worst].mean()),
    )


def daily_kg(cumulative_kg: Sequence[float], slots_per_day: int) -> np.ndarray:
    """kg per day from kg used up to the end of each slot (shape (n,), nondecreasing): the last day
    may be partial. Raises ConfigError for slots_per_day < 1."""
    if int(slots_per_day) != slots_per_day or slots_per_day < 1:
        raise ConfigError(f"carbon risk: slots_per_day must be a whole number >= 1, got {slots_per_day!r}")
    totals = np.asarray(cumulative_kg, dtype=float)
    if totals.size == 0:
        return np.zeros(0)
    ends = np.append(np.arange(int(slots_per_day), totals.size, int(slots_per_day)) - 1, totals.size - 1)
    at_ends = totals[ends]
    return np.diff(np.append(0.0, at_ends))


def joined_to_follow_days(days_kg: dict[str, np.ndarray], follow_days: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each day follow emitted nothing on (after its last job, or a day without load) joined to the
    day before it that it did emit on (to the first such day, for days before it), in every run's
    kg per day and follow's: a run's deferred work that lands there counts against that day. Shapes
    (n,) in, (m,) out, m the days follow emitted on; with none, every series summed into one day."""
    follow_days = np.asarray(follow_days, dtype=float)
    emitted = np.flatnonzero(follow_days > 0)
    if emitted.size == 0:
        return {name: np.array([float(np.sum(kg))]) for name, kg in days_kg.items()}, np.array([float(follow_days.sum())])
    # Day i goes to the last emitting day at or before it (the first emitting day for those before it).
    group = np.maximum(np.searchsorted(emitted, np.arange(follow_days.size), side="right") - 1, 0)

    def joined(kg: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=np.asarray(kg, dtype=float), minlength=emitted.size)

    return {name: joined(kg) for name, kg in days_kg.items()}, joined(follow_days)


def risks_by_day(cumulative_kg: dict[str, np.ndarray], follow: str, slots_per_day: int, window_slots: int) -> dict[str, Risk]:
    """Each run's :class:`Risk` against the run named ``follow``, from what each used up to the end of
    every slot (``cumulative_kg``: {name: shape (n,)}, lengths may differ: a run that ended sooner
    uses nothing more). Days are those of the trace's window (``window_slots``, days of
    ``slots_per_day`` slots from its start; the last may be partial); what runs after the window
    (deferred work, the drain) counts in its last day; a day follow used nothing on is joined to the
    day before (:func:`joined_to_follow_days`). {} without ``follow``, or when it used nothing at all."""
    if follow not in cumulative_kg:
        return {}
    slots = max(c.size for c in cumulative_kg.values())
    window_days = max(1, math.ceil(window_slots / slots_per_day))

    def days(cumulative: np.ndarray) -> np.ndarray:
        by_day = daily_kg(np.pad(cumulative, (0, slots - cumulative.size), mode="edge"), slots_per_day)
        # What runs after the window's days belongs to its last day (a day of a drain is not a day of the load).
        return np.append(by_day[: window_days - 1], by_day[window_days - 1 :].sum()) if by_day.size > window_days else by_day

    others = {name: days(c) for name, c in cumulative_kg.items() if name != follow}
    by_run, follow_days = joined_to_follow_days(others, days(cumulative_kg[follow]))
    if follow_days[0] <= 0:
        return {}
    return {name: risk_against_follow(kg, follow_days) for name, kg in by_run.items()}
