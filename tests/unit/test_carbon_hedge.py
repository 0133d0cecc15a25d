"""hold+carbon's hedge: a later slot's forecast gain counts only beyond its error band, so that under a
forecast that has been wrong hold+carbon does what carbon-blind hold does."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.core.errors import ConfigError
from autoscaler.core.model import CostParams
from autoscaler.core.policies import carbon, hold
from autoscaler.core.slot_signal import SlotSignal

P = 24  # hourly slots
D = 3


def test_the_hedge_keeps_a_later_value_beyond_its_bands_whole_and_takes_the_rest_as_now():
    window = np.array([100.0, 80.0, 130.0, 95.0, 160.0])
    band = np.array([0.0, 5.0, 10.0, 10.0, 10.0])
    # z = 3: 80 is 20 below now, beyond its 15: kept; 130 is 30 above, not beyond 30: 100;
    # 95 is 5 below, inside: 100; 160 is 60 above, beyond 30: kept.
    assert carbon.hedged_window(window, band, 3.0).tolist() == [100.0, 80.0, 100.0, 100.0, 160.0]
    # The order of the values that pass is the forecast's: a far slot with a wider band is not
    # made to look dirtier than a near one it is forecast cleaner than.
    near_far = np.array([100.0, 70.0, 60.0])
    hedged = carbon.hedged_window(near_far, np.array([0.0, 2.0, 10.0]), 3.0)
    assert hedged[2] < hedged[1] and hedged.tolist() == near_far.tolist()
    assert carbon.hedged_window(window, None).tolist() == window.tolist()
    assert carbon.hedged_window(window, np.zeros(5), 3.0).tolist() == window.tolist()
    with pytest.raises(ConfigError, match="band"):
        carbon.hedged_window(window, np.array([0.0, -1.0, 0.0, 0.0, 0.0]), 3.0)


def test_a_gain_inside_the_band_plays_holds_decision_and_says_so():
    params = CostParams()
    state = carbon.CarbonState.empty(D, params)
    window = np.array([100.0, 90.0, 95.0, 100.0, 105.0, 110.0, 100.0, 95.0, 90.0, 100.0])
    decision, after = carbon.carbon_step(state, 4.0, D, params, window, 100.0, band=np.full(window.shape, 10.0))
    blind_m, blind_x, _ = hold.hold_step(state.hold, 4.0, D, params)
    assert decision.mode == "hedged" and (decision.capacity, decision.assigned) == (blind_m, blind_x)
    assert after.modes == (0, 0, 0, 1)
    unhedged, _ = carbon.carbon_step(state, 4.0, D, params, window, 100.0)
    assert unhedged.mode == "carbon"


def daily(n_slots: int, phase: float = 0.0) -> np.ndarray:
    hours = np.arange(n_slots)
    return 300.0 + 200.0 * np.sin(2 * np.pi * (hours - phase) / P)


def test_a_forecast_wrong_by_construction_falls_back_to_carbon_blind_hold(monkeypatch):
    # The grid runs a daily cycle; the forecast given says the opposite (half a day out of phase),
    # and has said so for the eleven days before: it has always been wrong by up to 400 g/kWh.
    history = 11 * P
    deadline = 8  # hours: work can be moved from the clean half of the day into the dirty one
    load = np.tile([2.0, 6.0, 9.0, 4.0, 1.0, 0.0, 3.0, 8.0], 6)  # two days of hourly L_t
    n = load.shape[0] + deadline + carbon.window_slots(deadline)
    actual = daily(history + n)
    wrong = daily(history + n, phase=P / 2)
    signal = SlotSignal(actual, history, P, forecast=wrong)
    params = CostParams()
    blind = hold.plan(load, deadline, params)
    hedged = carbon.plan(load, deadline, params, signal)
    assert hedged.capacity.tolist() == blind.capacity.tolist() and hedged.assigned.tolist() == blind.assigned.tolist()
    assert hedged.notes["slots_by_mode"]["carbon"] == 0
    # Without the hedge hold+carbon believes the wrong forecast and decides by it: not hold's schedule.
    monkeypatch.setattr(carbon, "HEDGE_BANDS", 0.0)
    believed = carbon.plan(load, deadline, params, signal)
    assert believed.notes["slots_by_mode"]["carbon"] > 0
    assert believed.capacity.tolist() != blind.capacity.tolist()


def test_noise_that_no_forecast_can_follow_is_decided_as_carbon_blind_hold():
    # Independent draws each hour: yesterday, last week and the value now are all as wrong as the
    # spread of the draws, and no difference the window shows is beyond three of its errors.
    rng = np.random.default_rng(11)
    history = 11 * P
    load = rng.integers(0, 10, 48).astype(float)
    n = load.shape[0] + D + carbon.window_slots(D)
    signal = SlotSignal(rng.uniform(100.0, 300.0, history + n), history, P)
    params = CostParams()
    blind = hold.plan(load, D, params)
    hedged = carbon.plan(load, D, params, signal)
    assert hedged.capacity.tolist() == blind.capacity.tolist() and hedged.assigned.tolist() == blind.assigned.tolist()
