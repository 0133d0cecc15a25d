"""hold+carbon's hedge: a later slot's forecast gain counts only beyond its error band, so that under a
forecast that has been wrong hold+carbon does what carbon-blind hold does."""

from __future__ import annotations

import dataclasses
import json

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
    assert after.modes == (0, 0, 0, 1, 0)
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


# -- the short deferral and the regret cap ------------------------------------------------------------


def test_the_short_deferral_is_two_hours_or_holds_break_even_within_the_deadline():
    energy = CostParams(e0=5.025, e1=2.7975, beta=2.76375)  # W = ceil(1.1) = 2 slots
    assert carbon.short_deadline_slots(144, energy, 300.0, 7200.0) == 24  # 2 h of 300-s slots
    assert carbon.short_deadline_slots(12, energy, 300.0, 7200.0) == 12  # never past D
    assert carbon.short_deadline_slots(144, energy, 300.0, 0.0) == 2  # W
    assert carbon.short_deadline_slots(144, energy, 60.0, 7200.0) == 120
    paper = CostParams(e0=1.0, e1=0.0, beta=12.0, max_servers=None)  # W = 24 slots
    assert carbon.short_deadline_slots(144, paper, 300.0, 3600.0) == 24  # at least W
    assert carbon.short_deadline_slots(144, CostParams(e0=0.0, e1=1.0, beta=12.0)) == 144  # an idle server is free: D


def test_a_hedged_slot_at_a_long_deadline_plays_hold_at_the_short_one():
    params = CostParams(e0=1.0, e1=0.0, beta=12.0)
    d = 144
    state = carbon.CarbonState.empty(d, params)
    n = carbon.window_slots(d)
    window = np.full(n, 100.0)
    window[200] = 95.0  # 5 % cleaner, inside a band of 10
    decision, after = carbon.carbon_step(state, 4.0, d, params, window, 100.0, band=np.full(n, 10.0))
    short_m, short_x, _ = hold.hold_step(hold.HoldState.empty(24, params), 4.0, 24, params)
    assert decision.mode == "hedged" and decision.short_deadline_slots == 24
    assert (decision.capacity, decision.assigned) == (max(4.0 / (d + 1), short_m), short_x)
    assert after.modes == (0, 0, 0, 1, 0)


def test_over_the_regret_cap_the_slot_is_the_short_deferral_and_the_books_are_by_hand():
    params = CostParams(e0=1.0, e1=0.5, beta=12.0)
    d = 3
    n = carbon.window_slots(d)
    window = np.array([100.0] + [10.0] * (n - 1))  # far cleaner later: the LP would defer
    state = carbon.CarbonState.empty(d, params)
    # Over the last 3D+1 slots the run cost 2 above follow's 100: 2 %.
    over = dataclasses.replace(state, regret=np.full(n, 2.0 / n), follow_cost=np.full(n, 100.0 / n))
    assert over.regret_share() == pytest.approx(0.02)
    decision, after = carbon.carbon_step(over, 4.0, d, params, window, 100.0, max_regret=0.01)
    assert decision.mode == "capped" and decision.regret_share == pytest.approx(0.02) and after.modes[4] == 1
    free, _ = carbon.carbon_step(over, 4.0, d, params, window, 100.0, max_regret=0.05)
    assert free.mode == "carbon" and free.assigned < decision.assigned  # under a looser cap it defers
    # The books: the newest slot's cost under the signal now (100), the decision's less follow's (m = x = L = 4, from 0).
    ours = 100.0 * (1.0 * decision.capacity + 0.5 * decision.assigned + 12.0 * decision.capacity)
    follows = 100.0 * (1.5 * 4.0 + 12.0 * 4.0)
    assert after.regret[-1] == pytest.approx(ours - follows) and after.follow_cost[-1] == pytest.approx(follows)
    assert after.regret[:-1].tolist() == over.regret[1:].tolist() and after.previous_load == 4.0


def test_the_state_with_its_books_round_trips_through_json_and_an_older_one_still_loads():
    params = CostParams(e0=1.0, e1=0.0, beta=12.0)
    d = 3
    n = carbon.window_slots(d)
    state = carbon.CarbonState.empty(d, params)
    for load in (2.0, 0.0, 3.0):
        _, state = carbon.carbon_step(state, load, d, params, np.linspace(100.0, 50.0, n), 100.0)
    assert carbon.CarbonState.from_json(json.loads(json.dumps(state.to_json()))) == state
    older = {key: value for key, value in state.to_json().items() if key in ("hold", "queue", "previous", "modes")}
    older["modes"] = older["modes"][:4]
    loaded = carbon.CarbonState.from_json(older)
    assert loaded.short is None and loaded.regret is None and loaded.regret_share() == 0.0 and loaded.modes[4] == 0


def test_the_reason_names_the_short_deferral_and_why():
    from autoscaler.core.carbon_window import CarbonWindow
    from autoscaler.core.policies.slot import SlotInput, hold_carbon_slot

    params = CostParams(e0=1.0, e1=0.0, beta=12.0)  # W = 24 slots of 300 s: 2 h
    d = 144
    n = carbon.window_slots(d)
    values = np.full(n, 400.0)
    values[30] = 320.0  # 20 % cleaner; a band of 40 is 2 bands, inside 3
    band = np.full(n, 40.0)
    band[0] = 0.0
    slot = SlotInput(np.array([4.0]), "hold", d, 0, 300.0, params, CarbonWindow(values, 400.0, "gCO2eq/kWh", 400.0, "grid.csv", n - 1, 0, band))
    step = hold_carbon_slot(None, slot)
    assert step.carbon.mode == "hedged"
    assert "forecast cleaner (the best gain 20.0%, 2.0 bands) than now (400 gCO2eq/kWh now) by more than 3" in step.why
    assert "short deferral, hold at D = 2 h" in step.why
    # Over the cap: the same words say so.
    state = carbon.CarbonState.empty(d, params)
    over = dataclasses.replace(state, regret=np.full(n, 3.0 / n), follow_cost=np.full(n, 100.0 / n))
    step = hold_carbon_slot(over, dataclasses.replace(slot, window=dataclasses.replace(slot.window, band=None), max_regret=0.01))
    assert step.carbon.mode == "capped"
    assert "the run emitted 3.0% more than follow (no deferral) would have, beyond the cap of 1.0%: short deferral, hold at D = 2 h" in step.why
