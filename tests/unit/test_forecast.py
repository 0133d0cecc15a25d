"""The blended forecast of the signal and its error band (autoscaler.core.forecast), and how the
replay's slot signal reads it: only values up to the slot decided."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from autoscaler.core.errors import ConfigError
from autoscaler.core.forecast import CANDIDATES, EVALUATION_DAYS, band_of, blend, history_needed, scored_leads
from autoscaler.core.slot_signal import SlotSignal

P = 24  # hourly slots in these cases


def test_a_signal_that_repeats_every_day_is_forecast_as_yesterday_with_no_band():
    day = 100.0 + 50.0 * np.sin(2 * np.pi * np.arange(P) / P)
    past = np.tile(day, 10)  # ten days, the last value is slot t
    made = blend(past, 2 * P, P)
    expected = np.array([day[(P - 1 + k) % P] for k in range(2 * P)])  # slot t is hour 23; t + k the hour k later
    assert made.values == pytest.approx(expected, rel=1e-6)
    assert made.band == pytest.approx(np.zeros(2 * P), abs=1e-4)
    latest = CANDIDATES.index("latest")
    assert made.weights[latest].max() < 1e-6  # the value now has been wrong, yesterday never


def test_a_random_walk_is_forecast_by_its_latest_value():
    # A random walk: the best forecast of any later value is the value now; yesterday's is worse.
    rng = np.random.default_rng(3)
    past = 500.0 + np.cumsum(rng.normal(0.0, 1.0, 10 * P))
    made = blend(past, P, P)
    latest = CANDIDATES.index("latest")
    assert made.weights[:, 0].argmax() == latest  # one slot ahead the latest value weighs most
    assert abs(made.values[1] - past[-1]) < abs(past[-P] - past[-1])


def test_the_band_is_the_root_mean_square_of_the_blends_own_past_errors():
    # Yesterday alone (persistence): its errors at lead 1 are s(u) - s(u - P); by hand over the last
    # EVALUATION_DAYS days of issue times whose target is known.
    rng = np.random.default_rng(5)
    past = rng.uniform(100.0, 200.0, 10 * P)
    made = blend(past, 2, P, kind="persistence")
    size = past.size
    issues = np.arange(size - 1 - 1 - EVALUATION_DAYS * P + 1, size - 1)
    errors = past[issues + 1] - past[issues + 1 - P]
    assert made.band[1] == pytest.approx(math.sqrt(np.mean(errors**2)))
    assert made.values[1] == pytest.approx(past[size - P])  # the value a day before slot t+1


def test_with_nothing_to_score_the_forecast_is_the_value_now_with_no_band():
    made = blend(np.array([42.0, 40.0]), 5, P)
    assert made.values.tolist() == [40.0] * 5 and made.band.tolist() == [0.0] * 5


def test_bad_input_is_refused_naming_what_was_expected():
    with pytest.raises(ConfigError, match="past values"):
        blend(np.array([]), 3, P)
    with pytest.raises(ConfigError, match="past values"):
        blend(np.array([1.0, math.nan]), 3, P)
    with pytest.raises(ConfigError, match="whole numbers"):
        blend(np.array([1.0]), 0, P)
    with pytest.raises(ConfigError, match="blend, persistence"):
        blend(np.array([1.0]), 3, P, kind="tomorrow")


def test_scored_leads_cover_the_window():
    assert scored_leads(1).tolist() == []
    assert scored_leads(2).tolist() == [1]
    assert scored_leads(433).tolist() == [1, 2, 3, 6, 12, 24, 48, 96, 192, 384, 432]
    assert history_needed(288) == 11 * 288


def test_a_given_forecasts_band_is_its_own_past_error():
    actual = np.array([10.0] * 20)
    forecast = actual + np.where(np.arange(20) % 2 == 0, 2.0, -2.0)
    assert band_of(forecast, actual, 4, P).tolist() == [0.0, 2.0, 2.0, 2.0]
    assert band_of(actual, actual, 4, P).tolist() == [0.0] * 4  # a perfect forecast has no band


@settings(max_examples=40, deadline=None)
@given(
    values=arrays(float, st.integers(3 * P, 14 * P), elements=st.floats(0.0, 900.0)),
    slot=st.integers(0, 2 * P),
    kind=st.sampled_from(["blend", "persistence"]),
    data=st.data(),
)
def test_the_window_at_slot_t_never_reads_a_value_after_t(values, slot, kind, data):
    # Change every value after slot t: what is known in slot t must not change. (A forecast that read
    # a later value, even through its error band, would fail here.)
    history = values.size - 2 * P - 1
    signal = SlotSignal(values, history, P, kind=kind)
    later = data.draw(arrays(float, values.size - (history + slot + 1), elements=st.floats(0.0, 900.0)))
    changed = SlotSignal(np.concatenate([values[: history + slot + 1], later]), history, P, kind=kind)
    n = 2 * P
    before, after = signal.forecast_at(slot, n), changed.forecast_at(slot, n)
    assert np.array_equal(before.values, after.values) and np.array_equal(before.band, after.band)
