"""hold+carbon: hold with a per-slot cost signal (autoscaler.core.policies.carbon)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.cost import check_schedule, deadline_curve, pad_to_horizon
from autoscaler.core.errors import ConfigError, InfeasibleError
from autoscaler.core.model import CostParams
from autoscaler.core.policies import carbon, hold

loads = st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=24).map(lambda v: np.array(v, float))
deadlines = st.integers(min_value=0, max_value=6)
costs = st.builds(
    CostParams,
    e0=st.sampled_from([0.5, 1.0]),
    e1=st.sampled_from([0.0, 0.5]),
    beta=st.sampled_from([0.0, 1.0, 12.0]),
)


def signal_of(values, history_slots: int = 0, slots_per_day: int = 4, forecast=None, kind: str = "persistence") -> carbon.SlotSignal:
    return carbon.SlotSignal(np.asarray(values, float), history_slots, slots_per_day, forecast, kind=kind)


def check(schedule, load, deadline_slots, params) -> None:
    released = pad_to_horizon(load, deadline_slots)
    check_schedule(schedule, released, deadline_curve(released, deadline_slots), params.max_servers)


@settings(max_examples=60, deadline=None)
@given(load=loads, deadline_slots=deadlines, params=costs, level=st.sampled_from([0.0, 1.0, 437.5]))
def test_a_constant_signal_gives_holds_schedule_number_for_number(load, deadline_slots, params, level):
    horizon = load.shape[0] + deadline_slots
    aware = carbon.plan(load, deadline_slots, params, signal_of(np.full(horizon, level)))
    blind = hold.plan(load, deadline_slots, params)
    assert np.array_equal(aware.capacity, blind.capacity)
    assert np.array_equal(aware.assigned, blind.assigned)
    assert aware.notes["slots_by_mode"]["carbon"] == 0


@st.composite
def varying_cases(draw):
    load, deadline_slots, params = draw(loads), draw(deadlines), draw(costs)
    day = draw(st.integers(min_value=1, max_value=8))
    history = draw(st.integers(min_value=0, max_value=day))
    n = history + load.shape[0] + deadline_slots
    values = np.array(draw(st.lists(st.integers(min_value=0, max_value=9), min_size=n, max_size=n)), float) * 50.0
    return load, deadline_slots, params, signal_of(values, history, day)


@settings(max_examples=60, deadline=None)
@given(case=varying_cases())
def test_every_schedule_meets_every_deadline_under_any_signal(case):
    load, deadline_slots, params, signal = case
    schedule = carbon.plan(load, deadline_slots, params, signal)
    check(schedule, load, deadline_slots, params)
    assert schedule.policy == carbon.NAME


@settings(max_examples=40, deadline=None)
@given(case=varying_cases(), slack=st.sampled_from([1.0, 1.5]))
def test_a_cap_that_hold_meets_is_met_too(case, slack):
    load, deadline_slots, params, signal = case
    from autoscaler.core.policies.offline import smallest_max_servers

    cap = max(1.0, float(load.max()), smallest_max_servers(load, deadline_slots)) * slack
    capped = CostParams(e0=params.e0, e1=params.e1, beta=params.beta, max_servers=cap)
    schedule = carbon.plan(load, deadline_slots, capped, signal)
    check(schedule, load, deadline_slots, capped)


def test_work_waits_for_the_clean_slot_its_deadline_reaches():
    # One unit in slot 0 with D = 2; the signal (known exactly: a perfect forecast) is 4, 4, 1.
    # Running it in slot 2 costs w = 1 against 4: the window LP defers it there.
    values = np.array([4.0, 4.0, 1.0, 4.0, 4.0])
    signal = signal_of(values, forecast=values)
    schedule = carbon.plan(np.array([1.0]), 2, CostParams(e0=1.0, e1=0.0, beta=0.0), signal)
    assert schedule.assigned.tolist() == pytest.approx([0.0, 0.0, 1.0])
    assert schedule.capacity.tolist() == pytest.approx([0.0, 0.0, 1.0])


def test_work_due_now_runs_now_however_dirty_the_slot():
    values = np.array([9.0, 1.0, 1.0])
    schedule = carbon.plan(np.array([2.0]), 0, CostParams(beta=0.0), signal_of(values, forecast=values))
    assert schedule.assigned.tolist() == pytest.approx([2.0])


def test_persistence_reads_the_same_slot_a_day_earlier():
    # A day of 4 slots; history: slots -4..-1 are 10, 20, 30, 40; slots 0..1 are 11, 21.
    signal = signal_of([10, 20, 30, 40, 11, 21], history_slots=4, slots_per_day=4)
    # In slot 1: s_1 = 21 now, then slots 2, 3 from yesterday (30, 40), slot 4 from slot 0 (11), slot 5 from slot 1 (21).
    assert signal.window(1, 5).tolist() == [21, 30, 40, 11, 21]
    # No yesterday for slot 2 of a signal without history: the value now stands in.
    assert signal_of([5, 6, 7, 8]).window(1, 3).tolist() == [6, 6, 6]
    assert signal.reference(1) == pytest.approx(np.mean([30, 40, 11, 21]))


def test_a_forecast_wins_over_persistence_where_it_has_a_value():
    forecast = np.array([np.nan, np.nan, np.nan, np.nan, np.nan, 99.0])
    signal = signal_of([10, 20, 30, 40, 11, 21], history_slots=4, slots_per_day=4, forecast=forecast)
    assert signal.window(0, 3).tolist() == [11, 99, 30]


def test_no_signal_for_a_slot_plays_holds_decision():
    params = CostParams()
    load = np.array([3.0, 0.0, 5.0, 1.0])
    state = carbon.CarbonState.empty(2, params)
    blind = hold.plan(load, 2, params)
    for t, value in enumerate(pad_to_horizon(load, 2)):
        decision, state = carbon.carbon_step(state, value, 2, params, None)
        assert decision.mode == "no_signal"
        assert (decision.capacity, decision.assigned) == (blind.capacity[t], blind.assigned[t])
    assert state.modes == (0, 0, 6, 0, 0)


def test_state_round_trips_through_json():
    params = CostParams()
    state = carbon.CarbonState.empty(3, params)
    window = np.array([5.0, 1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 5.0, 4.0, 3.0])
    for value in (4.0, 2.0, 7.0):
        _, state = carbon.carbon_step(state, value, 3, params, window)
    assert carbon.CarbonState.from_json(state.to_json()) == state


@pytest.mark.parametrize(
    "window, expected",
    [(np.ones(3), "7 finite values"), (np.array([1.0, np.nan, 1.0, 1.0, 1.0, 1.0, 1.0]), "finite"), (-np.ones(7), ">= 0")],
)
def test_a_bad_window_is_refused(window, expected):
    with pytest.raises(ConfigError, match=expected):
        carbon.carbon_step(carbon.CarbonState.empty(2, CostParams()), 1.0, 2, CostParams(), window)


def test_a_cap_below_the_due_work_is_infeasible():
    with pytest.raises(InfeasibleError):
        carbon.plan(np.array([5.0]), 0, CostParams(max_servers=2.0), signal_of([1.0, 2.0]))


@pytest.mark.parametrize(
    "values, history, day, expected",
    [([1.0], 1, 1, "n >= 1"), ([1.0, np.inf], 0, 1, "finite"), ([1.0, 2.0], 0, 0, "slots_per_day")],
)
def test_a_bad_signal_is_refused(values, history, day, expected):
    with pytest.raises(ConfigError, match=expected):
        signal_of(values, history, day)


def test_a_cap_above_what_the_queue_needs_is_not_filled_for_forecast_work():
    # Workload A, D = 6 h, a daily cycle: near the trace's end the forecast arrivals (which never come)
    # once made the capped plan run at M in dirty slots. Uncapped, the peak is about 73 servers.
    from autoscaler.app.cli import load_workload
    from autoscaler.core.model import LengthModel

    load = load_workload(None, slot_s=300.0, window_slots=None, skip_bad_lines=False, length_model=LengthModel())[0].active
    deadline_slots, day = 72, 288
    slots = np.arange(-day, load.shape[0] + 4 * deadline_slots)
    signal = signal_of(350.0 + 150.0 * np.sin(2.0 * np.pi * (slots - 144) / day), history_slots=day, slots_per_day=day)
    uncapped = carbon.plan(load, deadline_slots, CostParams(), signal)
    capped = carbon.plan(load, deadline_slots, CostParams(max_servers=90.0), signal)
    check(capped, load, deadline_slots, CostParams(max_servers=90.0))
    assert uncapped.capacity.max() < 90.0
    assert capped.capacity.max() < 90.0 * (1 - 1e-6)


@settings(max_examples=60, deadline=None)
@given(case=varying_cases())
def test_idle_servers_never_exceed_holds_own_in_the_same_slot(case):
    # hold keeps servers idle by its ski-rental rule; hold+carbon, whose queue differs once it defers,
    # keeps no more idle than hold does, in the window LP's slots and in hold's own alike.
    load, deadline_slots, params, signal = case
    aware = carbon.plan(load, deadline_slots, params, signal)
    blind = hold.plan(load, deadline_slots, params)
    aware_idle = aware.capacity - aware.assigned
    blind_idle = blind.capacity - blind.assigned
    assert (aware_idle <= blind_idle + 1e-9 * max(1.0, float(load.max()))).all()
