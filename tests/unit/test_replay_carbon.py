"""Replay under a carbon or price signal: deadlines as durations, placing a signal on the slots,
and the schedules priced by hand-worked figures."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.app.cli import deadline_slots, parse_deadlines
from autoscaler.app.cli.arguments import _compact_duration
from autoscaler.core.energy.signal import Signal, parse_time_s
from autoscaler.core.errors import ConfigError, TraceError
from autoscaler.core.intake import parse_duration_s
from autoscaler.core.model import CostParams
from autoscaler.core.policies import plan
from autoscaler.core.replay import replay
from autoscaler.core.signal_slots import place_signal
from autoscaler.core.workload import workload_from_curve

T0 = parse_time_s("2020-06-01T00:00:00Z")
HOUR_S = 3600.0
DAY_S = 86400.0


def hourly(values: list[float], unit: str = "gCO2eq/kWh", first_s: float = T0, source: str = "hourly.csv") -> Signal:
    return Signal(first_s + HOUR_S * np.arange(len(values)), np.array(values, dtype=float), unit, source)


# --- deadlines as durations -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, slot_s, slots",
    [("6h", 300, 72), ("12", 300, 12), ("0", 300, 0), ("1h30m", 300, 18), ("1d", 300, 288), ("90m", 600, 9), ("600s", 300, 2), ("2h", 3600, 2)],
)
def test_a_deadline_is_slots_or_a_duration_of_whole_slots(text, slot_s, slots):
    assert deadline_slots(text, slot_s) == slots


def test_a_duration_that_is_not_whole_slots_is_refused_naming_both():
    with pytest.raises(ConfigError) as caught:
        deadline_slots("7m", 300)
    assert str(caught.value) == "--deadline 7m is 1.4 slots of 300 s; give a multiple of 5m or a number of slots"
    with pytest.raises(ConfigError, match=r"--deadline 1h is 0\.6667 slots of 5400 s; give a multiple of 1h30m"):
        deadline_slots("1h", 5400)


@pytest.mark.parametrize("text", ["x", "-1", "1.5", "6 hours", "h", ""])
def test_a_deadline_that_is_neither_is_refused(text):
    with pytest.raises(ConfigError, match="--deadline: expected a whole number of slots"):
        deadline_slots(text, 300)


def test_the_duration_grammar_is_submits_own():
    # A bare number is seconds for submit (and stays so); replay's bare number is slots.
    assert parse_duration_s("600") == 600.0
    assert parse_duration_s("1h30m") == 5400.0
    assert parse_duration_s("1d2h") == 93600.0
    assert parse_duration_s("soon") is None
    assert _compact_duration(300) == "5m"
    assert _compact_duration(5400) == "1h30m"
    assert _compact_duration(90) == "1m30s"
    assert _compact_duration(0.5) == "0.5s"


def test_sweep_deadlines_take_durations_and_keep_the_slot_range():
    assert parse_deadlines("1h,2h,6h,12h") == [12, 24, 72, 144]
    assert parse_deadlines("1h,2h", slot_s=600) == [6, 12]
    assert parse_deadlines("2,1h") == [2, 12]
    assert parse_deadlines("1-3") == [1, 2, 3]
    with pytest.raises(ConfigError, match="--deadlines 7m is 1.4 slots of 300 s"):
        parse_deadlines("1h,7m")
    with pytest.raises(ConfigError, match="more than once"):
        parse_deadlines("1h,12")
    with pytest.raises(ConfigError, match="--deadlines: expected"):
        parse_deadlines("1h-2h")


# --- placing a signal on the slots -----------------------------------------------------------


def test_a_signal_starts_a_day_after_its_first_time_when_it_covers_that_day_and_the_replay():
    values = [100.0 + h for h in range(48)]  # two days, hourly
    placed = place_signal(hourly(values), HOUR_S, required_slots=10, wanted_slots=20)
    assert placed.start_s == T0 + DAY_S
    assert placed.slots.history_slots == 24
    assert placed.slots.slots_per_day == 24
    # Slot k is hour 24 + k; the 20 wanted slots are all covered.
    assert placed.actual(20).tolist() == values[24:44]
    assert placed.slots.values.tolist() == values[:44]
    # One day of history, of the 11 the blend scores with: a note says so; persistence needs only the one.
    assert len(placed.notes) == 1 and "1 day is covered before the start" in placed.notes[0] and "of the 11 the blend" in placed.notes[0]
    assert place_signal(hourly(values), HOUR_S, required_slots=10, wanted_slots=20, forecast="persistence").notes == ()


def test_a_signal_of_eleven_days_and_the_replay_starts_where_the_blend_has_all_its_history():
    values = [100.0 + (h % 24) for h in range(24 * 12)]  # twelve days, hourly
    placed = place_signal(hourly(values), HOUR_S, required_slots=10, wanted_slots=20)
    assert placed.start_s == T0 + 11 * DAY_S
    assert placed.slots.history_slots == 11 * 24
    assert placed.notes == ()
    one_short = place_signal(hourly(values[:-5]), HOUR_S, required_slots=10, wanted_slots=20)
    assert one_short.start_s == T0 + DAY_S  # 11 days plus 20 slots are not covered: a day after the first time


def test_a_short_signal_starts_at_its_first_time_and_says_the_forecast_has_no_yesterday():
    values = [100.0 + h for h in range(30)]
    placed = place_signal(hourly(values), HOUR_S, required_slots=10, wanted_slots=20)
    assert placed.start_s == T0
    assert placed.slots.history_slots == 0
    assert len(placed.notes) == 1 and "the blend has no yesterday for the first day" in placed.notes[0]
    persistence = place_signal(hourly(values), HOUR_S, required_slots=10, wanted_slots=20, forecast="persistence")
    assert len(persistence.notes) == 1 and "persistence has no yesterday for the first day" in persistence.notes[0]


def test_slots_shorter_than_the_signal_take_its_value_and_history_is_what_is_covered_before_the_start():
    values = [float(h % 24) for h in range(72)]  # three days
    placed = place_signal(hourly(values), 1800.0, required_slots=4, wanted_slots=6, start_s=T0 + 2 * DAY_S + HOUR_S)
    assert placed.actual(6).tolist() == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    # Two days and an hour of half-hours are covered before the start, less than the blend's 11 days: all of them.
    assert placed.slots.history_slots == 98
    eleven_days = place_signal(hourly([float(h % 24) for h in range(24 * 14)]), 1800.0, required_slots=4, wanted_slots=6, start_s=T0 + 13 * DAY_S)
    assert eleven_days.slots.history_slots == 11 * 48
    # The history starts at the signal's first half-hours (00:00 and 00:30 of the first day: 0, 0) and
    # holds, a day before the start, the same half-hours as slots 0 and 1 (01:00, 01:30: 1, 1).
    assert placed.slots.values[:2].tolist() == [0.0, 0.0]
    assert placed.slots.values[98 - 48 : 98 - 46].tolist() == [1.0, 1.0]


def test_a_start_the_signal_does_not_cover_names_the_source_and_time():
    with pytest.raises(TraceError) as caught:
        place_signal(hourly([100.0] * 24, source="grid.csv"), HOUR_S, required_slots=10, wanted_slots=10, start_s=T0 + 20 * HOUR_S)
    text = str(caught.value)
    assert "grid.csv" in text and "2020-06-02T00:00:00Z" in text  # the end of the last hour's step
    with pytest.raises(TraceError, match=r"grid\.csv.*2020-05-31T23:00:00Z"):
        place_signal(hourly([100.0] * 24, source="grid.csv"), HOUR_S, required_slots=2, wanted_slots=2, start_s=T0 - HOUR_S)


def test_lbs_per_mwh_becomes_grams_per_kwh():
    placed = place_signal(hourly([1000.0] * 4, unit="lbs/MWh"), HOUR_S, required_slots=3, wanted_slots=3, start_s=T0)
    assert placed.unit == "gCO2eq/kWh" and placed.source_unit == "lbs/MWh"
    assert placed.actual(3) == pytest.approx([453.59237] * 3)  # 1000 lb * 453.59237 g/lb / 1000 kWh


def test_forecasts_perfect_and_from_a_second_signal_where_it_covers():
    values = [float(h) for h in range(10)]
    perfect = place_signal(hourly(values), HOUR_S, 4, 6, start_s=T0 + 2 * HOUR_S, forecast="perfect")
    assert perfect.forecast_kind == "perfect"
    assert np.isnan(perfect.slots.forecast[:2]).all()  # the two hours of history
    assert perfect.slots.forecast[2:].tolist() == values[2:8]
    second = hourly([50.0, 60.0, 70.0], first_s=T0 + 4 * HOUR_S, source="forecast.csv")
    placed = place_signal(hourly(values), HOUR_S, 4, 6, start_s=T0 + 2 * HOUR_S, forecast=second)
    assert placed.forecast_kind == "forecast.csv"
    forecast = placed.slots.forecast
    assert np.isnan(forecast[:4]).all() and forecast[4:7].tolist() == [50.0, 60.0, 70.0] and np.isnan(forecast[7])
    with pytest.raises(ConfigError, match="is a price"):
        place_signal(hourly(values), HOUR_S, 4, 6, forecast=hourly([1.0] * 10, unit="$/kWh"))


# --- priced schedules, worked by hand -----------------------------------------------------------


def test_a_price_per_node_hour_moves_the_work_into_the_cheap_hour():
    # L = [2, 0] with D = 1 and beta = 0: follow runs 2 nodes in hour 0 at $1.00, the carbon-aware
    # LP runs them in hour 1 at $0.25: $2.00 against $0.50, a 75 % cut. Blind, the LP may run the work
    # in either hour; either way it costs what follow does or less.
    workload = workload_from_curve(np.array([2.0, 0.0]), slot_s=HOUR_S)
    signal = place_signal(hourly([1.0, 0.25, 0.5, 1.0], unit="$/node-hour"), HOUR_S, 3, 5, start_s=T0)
    result = replay(workload, ["offline"], 1, CostParams(beta=0.0), signal=signal)
    follow, offline = result.policies["follow"], result.policies["offline"]
    assert follow.signal_total == pytest.approx(2.0)
    assert offline.schedule.capacity == pytest.approx([0.0, 2.0, 0.0], abs=1e-6)
    assert offline.signal_total == pytest.approx(0.5)
    assert offline.signal_saving_pct == pytest.approx(75.0)
    assert follow.signal_saving_pct == 0.0
    assert offline.carbon_aware and not follow.carbon_aware
    assert offline.blind_signal_total <= 2.0 + 1e-9


def test_grams_are_the_slot_energy_times_the_intensity():
    workload = workload_from_curve(np.array([3.0, 1.0, 0.0, 2.0]), slot_s=HOUR_S)
    intensity = [400.0, 100.0, 300.0, 200.0, 500.0, 250.0]
    signal = place_signal(hourly(intensity), HOUR_S, 5, 7, start_s=T0)
    result = replay(workload, ["gcp-u", "hold"], 1, CostParams(), signal=signal)
    for name, r in result.policies.items():
        wh = r.energy.slot_energy_wh
        assert r.signal_total == pytest.approx(float(np.dot(wh, intensity[: wh.shape[0]])) / 1000.0), name
        assert r.energy.energy_wh == pytest.approx(wh.sum())
    assert result.policies["hold"].schedule.policy == "hold+carbon"
    assert "no carbon-aware variant" in result.policies["gcp-u"].note
    assert result.policies["hold"].note == "carbon-aware: hold+carbon"


def test_under_a_constant_signal_hold_is_hold():
    workload = workload_from_curve(np.array([3.0, 1.0, 0.0, 2.0, 5.0, 0.0, 1.0, 4.0]), slot_s=HOUR_S)
    params = CostParams()
    signal = place_signal(hourly([250.0] * 48), HOUR_S, 10, 14)
    aware = replay(workload, ["hold"], 2, params, signal=signal).policies["hold"].schedule
    blind = plan("hold", workload.active, 2, params)
    assert aware.policy == "hold+carbon"
    np.testing.assert_allclose(aware.capacity, blind.capacity, rtol=0, atol=1e-12)
    np.testing.assert_allclose(aware.assigned, blind.assigned, rtol=0, atol=1e-12)


def test_without_a_signal_the_schedules_and_costs_are_the_policies_own():
    workload = workload_from_curve(np.array([3.0, 1.0, 0.0, 2.0, 5.0, 0.0]), slot_s=300.0)
    params = CostParams()
    result = replay(workload, ["hold", "offline", "gcp-u", "vfw"], 2, params)
    assert result.signal is None
    for name, r in result.policies.items():
        schedule = plan(name, workload.active, 2, params)
        np.testing.assert_array_equal(r.schedule.capacity, schedule.capacity)
        assert r.signal_total is None and r.signal_saving_pct is None and not r.carbon_aware
        assert r.energy is not None
    assert result.policies["follow"].energy_saving_pct == 0.0


def test_a_price_per_kwh_is_the_slot_energy_times_the_price():
    workload = workload_from_curve(np.array([3.0, 1.0, 0.0, 2.0]), slot_s=HOUR_S)
    price = [0.30, 0.10, 0.20, 0.25, 0.40, 0.15]
    signal = place_signal(hourly(price, unit="$/kWh"), HOUR_S, 5, 7, start_s=T0)
    result = replay(workload, ["gcp-u"], 1, CostParams(), signal=signal)
    for r in result.policies.values():
        wh = r.energy.slot_energy_wh
        assert r.signal_total == pytest.approx(float(np.dot(wh / 1000.0, price[: wh.shape[0]])))
    follow = result.policies["follow"]
    # follow: 3, 1, 0, 2 whole nodes, busy; Table III: 60.30 W idle + 33.57 W busy per node; 300 s of idle power per node started.
    by_hand = np.array([3, 1, 0, 2, 0]) * (60.30 + 33.57) + np.array([3, 0, 0, 2, 0]) * 60.30 * 300 / 3600
    np.testing.assert_allclose(follow.energy.slot_energy_wh, by_hand, rtol=1e-12)
    assert follow.signal_total == pytest.approx(float(np.dot(by_hand / 1000, price[:5])))


# --- values implausible for their unit (issue 20, finding 6) ---------------------------------------


def test_a_price_given_as_grams_is_warned_of_in_the_placed_signals_notes():
    # Half-hourly prices of 0.02-0.22 $/kWh read as gCO2eq/kWh: no grid emits that little.
    prices = [0.02 + 0.2 * (h % 24) / 23 for h in range(72)]
    placed = place_signal(hourly(prices), 3600.0, 24, 24)
    warned = [note for note in placed.notes if "implausible" in note]
    assert len(warned) == 1
    assert "0.02 to 0.22 gCO2eq/kWh" in warned[0] and "$/kWh" in warned[0]


def test_an_all_zero_signal_is_warned_of():
    placed = place_signal(hourly([0.0] * 72, unit="$/kWh"), 3600.0, 24, 24)
    assert any("every value is 0 $/kWh" in note for note in placed.notes)


def test_a_price_per_mwh_given_per_kwh_is_warned_of_and_real_values_are_not():
    # 30-90 $/MWh read as $/kWh: above any price paid for electricity (100 $/kWh and more is refused).
    per_mwh = [30.0 + 60.0 * (h % 24) / 23 for h in range(72)]
    warned = [note for note in place_signal(hourly(per_mwh, unit="$/kWh"), 3600.0, 24, 24).notes if "implausible" in note]
    assert len(warned) == 1 and "30 to 90 $/kWh" in warned[0] and "per MWh" in warned[0]
    grams = [150.0 + 300.0 * (h % 24) / 23 for h in range(72)]
    for unit, values in (("gCO2eq/kWh", grams), ("$/kWh", [0.02 + 0.2 * (h % 24) / 23 for h in range(72)]), ("lbs/MWh", [900.0] * 72)):
        assert not [note for note in place_signal(hourly(values, unit=unit), 3600.0, 24, 24).notes if "implausible" in note or "every value is 0" in note]
