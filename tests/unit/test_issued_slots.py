"""Forecasts read as issued: no slot reads a forecast issued after its start (worked by hand), and
IssuedSlots.known against a brute force that resamples each issue slot by slot."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.energy.forecast_archive import ForecastArchive, IssuedForecast
from autoscaler.core.energy.signal import Signal, resample
from autoscaler.core.errors import TraceError
from autoscaler.core.issued import IssuedSlots
from autoscaler.core.signal_slots import place_signal

HOUR_S = 3600.0
T0 = datetime(2026, 6, 1, tzinfo=timezone.utc).timestamp()


def hourly(start_s: float, values, source: str) -> Signal:
    return Signal(start_s + HOUR_S * np.arange(len(values)), np.array(values, dtype=float), "gCO2eq/kWh", source)


def two_issues() -> ForecastArchive:
    """Issue A at T0 forecasts 100 for two days; issue B at T0 + 5 h forecasts 999 (a value no other
    source has) from T0 + 5 h for a day."""
    a = IssuedForecast(T0, hourly(T0, [100.0] * 48, "a"))
    b = IssuedForecast(T0 + 5 * HOUR_S, hourly(T0 + 5 * HOUR_S, [999.0] * 24, "b"))
    return ForecastArchive.of("archive", [b, a])


def test_a_forecast_issued_later_is_not_read_before_it_is_issued():
    # Hourly slots from T0, a day of actual values at 300 before T0 (history) and three days after.
    actual = hourly(T0 - 24 * HOUR_S, [300.0] * 96, "actual")
    placed = place_signal(actual, HOUR_S, 30, 40, start_s=T0, forecast=two_issues())
    assert placed.forecast_kind == "as issued: archive"
    for slot in range(5):
        window = placed.slots.window(slot, 10)
        assert 999.0 not in window, (slot, window)
        assert window[1:].tolist() == [100.0] * 9  # issue A, the only one issued by then
    for slot in (5, 6, 12):
        window = placed.slots.window(slot, 10)
        assert window[0] == 300.0  # the actual value now
        assert window[1:].tolist() == [999.0] * 9  # issue B, newer, covers these slots
    # Past B's end (T0 + 29 h) A still covers slots up to T0 + 48 h: slot 25 reads B for 26-28, A after.
    assert placed.slots.window(25, 6)[1:].tolist() == [999.0, 999.0, 999.0, 100.0, 100.0]


def test_a_plain_forecast_says_it_is_read_with_look_ahead():
    actual = hourly(T0 - 24 * HOUR_S, [300.0] * 96, "actual")
    placed = place_signal(actual, HOUR_S, 30, 40, start_s=T0, forecast=hourly(T0, [50.0] * 48, "plain.csv"))
    assert placed.forecast_kind == "plain.csv"
    assert any("plain.csv: the forecast has no issue times" in note and "look-ahead" in note for note in placed.notes)
    assert placed.slots.window(0, 3).tolist() == [300.0, 50.0, 50.0]


def test_an_archive_issued_after_the_start_says_persistence_decides_before_it():
    actual = hourly(T0 - 24 * HOUR_S, [300.0] * 96, "actual")
    late = ForecastArchive.of("late", [IssuedForecast(T0 + 3 * HOUR_S, hourly(T0, [10.0] * 48, "l"))])
    placed = place_signal(actual, HOUR_S, 30, 40, start_s=T0, forecast=late)
    assert any("issued at 2026-06-01T03:00:00Z, after the trace's start" in note for note in placed.notes)
    assert placed.slots.window(2, 3).tolist() == [300.0, 300.0, 300.0]  # persistence: yesterday was 300
    assert placed.slots.window(3, 3).tolist() == [300.0, 10.0, 10.0]


def test_an_issue_at_a_slot_start_is_known_in_that_slot_and_not_in_the_one_before():
    archive = ForecastArchive.of("x", [IssuedForecast(T0 + 2 * HOUR_S, hourly(T0, [7.0] * 10, "x"))])
    issued = IssuedSlots.from_archive(archive, T0, HOUR_S, 10)
    assert np.isnan(issued.known(1, 3)).all()
    assert issued.known(2, 3).tolist() == [7.0, 7.0, 7.0]
    # Outside the slots placed: NaN, not an error.
    assert np.isnan(issued.known(9, 3)[1:]).all() and issued.known(9, 3)[0] == 7.0


# -- against a brute force -------------------------------------------------------------------------

SLOT_S = 1800.0
GRID_S = 900.0
"""Issue times and points fall on a 15-minute grid: on, between and inside 30-minute slots."""


def brute_force(archive: ForecastArchive, start_s: float, n_slots: int, slot: int, n: int) -> np.ndarray:
    """For each slot s of slot..slot+n-1: among the issues issued at or before slot's start, newest
    first, the first whose one-slot resample of s succeeds; NaN if none, or s outside the slots."""
    decided_s = start_s + slot * SLOT_S
    known = sorted((issue for issue in archive.issues if issue.issued_s <= decided_s), key=lambda issue: -issue.issued_s)
    out = []
    for s in range(slot, slot + n):
        value = math.nan
        if 0 <= s < n_slots:
            for issue in known:
                try:
                    value = float(resample(issue.signal, start_s + s * SLOT_S, SLOT_S, 1)[0])
                    break
                except TraceError:
                    continue
        out.append(value)
    return np.array(out)


@st.composite
def archives(draw):
    n_slots = draw(st.integers(1, 24))
    n_issues = draw(st.integers(1, 5))
    issue_steps = draw(st.lists(st.integers(-8, 2 * n_slots + 4), min_size=n_issues, max_size=n_issues, unique=True))
    issues = []
    for k, issue_step in enumerate(issue_steps):
        step_s = draw(st.sampled_from([GRID_S, SLOT_S, 2 * SLOT_S]))
        first_step = draw(st.integers(-8, 2 * n_slots + 4))
        values = draw(st.lists(st.integers(0, 500), min_size=2, max_size=20))
        times_s = T0 + first_step * GRID_S + step_s * np.arange(len(values))
        if draw(st.booleans()) and len(values) > 3:
            times_s[len(values) // 2 :] += 3 * step_s  # a gap: more than twice the median interval
        issues.append(IssuedForecast(T0 + issue_step * GRID_S, Signal(times_s, np.array(values, dtype=float), "gCO2eq/kWh", f"issue {k}")))
    return ForecastArchive.of("random", issues), n_slots


@settings(max_examples=200, deadline=None)
@given(case=archives(), data=st.data())
def test_known_equals_a_brute_force_over_random_archives(case, data):
    archive, n_slots = case
    issued = IssuedSlots.from_archive(archive, T0, SLOT_S, n_slots)
    slot = data.draw(st.integers(0, n_slots - 1))
    n = data.draw(st.integers(1, 12))
    np.testing.assert_allclose(issued.known(slot, n), brute_force(archive, T0, n_slots, slot, n), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("n_slots", [1, 6])
def test_known_on_one_issue_is_its_resample_after_it_is_issued(n_slots):
    archive = ForecastArchive.of("one", [IssuedForecast(T0, hourly(T0, [10.0, 20.0, 30.0, 40.0, 50.0, 60.0], "one"))])
    issued = IssuedSlots.from_archive(archive, T0, HOUR_S, n_slots)
    assert issued.known(0, n_slots).tolist() == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0][:n_slots]


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(st.integers(0, 900), min_size=30, max_size=60),
    forecast=st.lists(st.integers(0, 900), min_size=60, max_size=60),
    slot=st.integers(0, 20),
    n=st.integers(1, 15),
)
def test_one_issue_known_from_the_start_reads_as_the_same_plain_forecast(values, forecast, slot, n):
    # Independent of IssuedSlots: SlotSignal's own forecast array, the path a plain series takes.
    from autoscaler.core.slot_signal import SlotSignal

    history = 6
    slot = min(slot, len(values) - history - 1)
    forecast_values = np.array(forecast[: len(values)], dtype=float)
    plain = SlotSignal(np.array(values, dtype=float), history, 24, forecast_values)
    first_s = T0 - history * HOUR_S
    archive = ForecastArchive.of("one", [IssuedForecast(first_s, hourly(first_s, forecast_values, "one"))])
    issued = SlotSignal(np.array(values, dtype=float), history, 24, issued=IssuedSlots.from_archive(archive, first_s, HOUR_S, len(values)))
    np.testing.assert_allclose(issued.window(slot, n), plain.window(slot, n), rtol=1e-12)


def test_an_issued_forecasts_band_is_each_leads_own_error():
    # Every hour an issue forecasts 100 + 2L for the slot L hours ahead; the actual is 100 throughout.
    # So the error L slots ahead is 2L exactly, and the band at a scored lead L is 2L. With n = 13 the
    # scored leads are 1, 2, 3, 6 and 12, and leads 4 .. 12 take the nearest on a log scale
    # (4 -> 3; 5, 6, 7, 8 -> 6; 9 .. 12 -> 12). Scored one slot ahead, every lead's band was 2.
    from autoscaler.core.forecast import scored_leads
    from autoscaler.core.slot_signal import SlotSignal

    history, n_slots, n = 96, 96 + 48, 13
    first_s = T0 - history * HOUR_S
    issues = [
        IssuedForecast(first_s + h * HOUR_S, hourly(first_s + (h + 1) * HOUR_S, [100.0 + 2 * lead for lead in range(1, 32)], f"issue {h}"))
        for h in range(n_slots)
    ]
    archive = ForecastArchive.of("growing", issues)
    signal = SlotSignal(np.full(n_slots, 100.0), history, 24, issued=IssuedSlots.from_archive(archive, first_s, HOUR_S, n_slots))
    assert list(scored_leads(n, 24)) == [1, 2, 3, 6, 12]
    made = signal.forecast_at(10, n)
    np.testing.assert_allclose(made.values, [100.0] + [100.0 + 2 * k for k in range(1, n)])
    np.testing.assert_allclose(made.band, [0, 2, 4, 6, 6, 12, 12, 12, 12, 24, 24, 24, 24])


def test_the_daemons_window_scores_an_archive_by_lead_as_a_replay_does():
    # The same archive as above, read by the daemon's slot_window (a signal file and an archive, no
    # replay): its band at each lead is each lead's own error, as SlotSignal's.
    from autoscaler.core.signal_slots import slot_window

    history, n_slots = 96, 96 + 48
    first_s = T0 - history * HOUR_S
    issues = [
        IssuedForecast(first_s + h * HOUR_S, hourly(first_s + (h + 1) * HOUR_S, [100.0 + 2 * lead for lead in range(1, 32)], f"issue {h}"))
        for h in range(n_slots)
    ]
    archive = ForecastArchive.of("growing", issues)
    actual = hourly(first_s - 24 * 11 * HOUR_S, [100.0] * (24 * 11 + history + 11), "actual")  # known up to the slot decided
    window = slot_window(actual, archive, T0 + 10 * HOUR_S, HOUR_S, deadline_slots=4)
    np.testing.assert_allclose(window.values, [100.0] + [100.0 + 2 * k for k in range(1, 13)])
    np.testing.assert_allclose(window.band, [0, 2, 4, 6, 6, 12, 12, 12, 12, 24, 24, 24, 24])
