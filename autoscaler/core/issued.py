"""Forecasts as issued, placed on a replay's slots (:class:`IssuedSlots`): what was known of each slot
at the start of an earlier one, from the newest forecast issued by then. Pure; no look-ahead: a
forecast issued after a slot's start is never read in that slot."""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from autoscaler.core.energy.forecast_archive import ForecastArchive
from autoscaler.core.energy.signal import covered_means
from autoscaler.core.errors import ConfigError


@dataclass(frozen=True, eq=False)
class IssuedSlots:
    """The issues of a forecast archive on slots: slot j is [start_s + j*slot_s, start_s + (j+1)*slot_s),
    j = 0 .. n_slots-1 (a replay's history slots first). Built by :meth:`from_archive`.

    ``issue_slots``: shape (n_issues,), nondecreasing: the first slot whose start is at or after each
    issue's time (the slot from which it is known). ``first_slots``: shape (n_issues,), the first slot
    each issue's values cover; ``values``: per issue, its mean per slot (NaN where it does not cover a
    slot whole) from its first slot on, clipped to slots 0 .. n_slots-1; ``ends``: first slot after them.
    ``reach``: shape (n_issues,), the largest ``ends`` of issues 0..i (no issue up to i covers a slot
    at or after it), so that :meth:`known` stops early.
    """

    start_s: float
    slot_s: float
    n_slots: int
    issue_slots: tuple[int, ...]
    first_slots: tuple[int, ...]
    values: tuple[np.ndarray, ...]
    reach: tuple[int, ...]

    @classmethod
    def from_archive(cls, archive: ForecastArchive, start_s: float, slot_s: float, n_slots: int) -> IssuedSlots:
        """Place every issue of ``archive`` on ``n_slots`` slots of ``slot_s`` seconds from ``start_s``
        (Unix s): per issue its per-slot mean (:func:`autoscaler.core.energy.signal.covered_means`, the time-weighted
        mean of :func:`autoscaler.core.energy.signal.resample`) over the slots it covers. Values are in the archive's
        unit (the caller converts). Raises ConfigError for slot_s <= 0 or n_slots < 1."""
        if not (math.isfinite(slot_s) and slot_s > 0) or int(n_slots) != n_slots or n_slots < 1:
            raise ConfigError(f"issued forecast slots: expected slot_s > 0 and n_slots >= 1, got slot_s = {slot_s!r}, n_slots = {n_slots!r}")
        start_s, slot_s, n_slots = float(start_s), float(slot_s), int(n_slots)
        issue_slots, first_slots, values, reach = [], [], [], []
        furthest = 0
        for issue in archive.issues:
            issue_slots.append(_first_slot_at_or_after(issue.issued_s, start_s, slot_s))
            times_s = issue.signal.times_s
            first = max(0, _first_slot_at_or_after(float(times_s[0]), start_s, slot_s))
            end = min(n_slots, math.floor((issue.end_s - start_s) / slot_s + 1e-9))
            if end > first and times_s.size > 1:
                means = covered_means(issue.signal, start_s + first * slot_s, slot_s, end - first)
            else:
                first, means = 0, np.zeros(0)
            first_slots.append(first)
            values.append(means)
            furthest = max(furthest, first + means.size)
            reach.append(furthest)
        return cls(start_s, slot_s, n_slots, tuple(issue_slots), tuple(first_slots), tuple(values), tuple(reach))

    def known(self, slot: int, n: int) -> np.ndarray:
        """Shape (n,): for each slot ``slot`` .. ``slot + n - 1``, the value of the newest issue issued at
        or before the start of ``slot`` that covers it, NaN where none does (also outside 0 .. n_slots-1).
        Costs a bisection and one array slice per issue read, newest first, until every slot is
        filled or no older issue reaches the slots left."""
        out = np.full(n, math.nan)
        newest = bisect_right(self.issue_slots, slot) - 1
        left = n
        for i in range(newest, -1, -1):
            if left == 0:
                break
            unfilled = np.flatnonzero(np.isnan(out))
            if slot + int(unfilled[0]) >= self.reach[i]:
                break  # issues 0..i cover nothing from here on
            first, means = self.first_slots[i], self.values[i]
            lo, hi = max(slot, first), min(slot + n, first + means.size)
            if hi <= lo:
                continue
            part = out[lo - slot : hi - slot]
            fill = np.isnan(part) & ~np.isnan(means[lo - first : hi - first])
            part[fill] = means[lo - first : hi - first][fill]
            left -= int(fill.sum())
        return out


def _first_slot_at_or_after(time_s: float, start_s: float, slot_s: float) -> int:
    """The smallest j with start_s + j*slot_s >= time_s, computed with the same floating-point sum a
    slot's start is, so that an issue at a slot's start is known in that slot and not before it."""
    j = math.ceil((time_s - start_s) / slot_s)
    while start_s + (j - 1) * slot_s >= time_s:
        j -= 1
    while start_s + j * slot_s < time_s:
        j += 1
    return j
