"""The offline LP with a per-slot cost multiplier s_t (a carbon intensity or a price)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.cost import check_schedule, deadline_curve, pad_to_horizon, schedule_cost, weighted_operating_cost
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import CostParams, Schedule
from autoscaler.core.policies.offline import plan


def weighted_total(schedule: Schedule, params: CostParams, slot_cost: np.ndarray) -> float:
    """The objective the weighted LP minimises: weighted operating cost plus (unweighted) switching."""
    switching = schedule_cost(schedule.capacity, schedule.assigned, params).switching
    return weighted_operating_cost(schedule.capacity, schedule.assigned, params, slot_cost) + switching


def abstract_total(schedule: Schedule, params: CostParams) -> float:
    return schedule_cost(schedule.capacity, schedule.assigned, params).total


loads = st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=20).map(lambda v: np.array(v, float))
deadlines = st.integers(min_value=0, max_value=5)
costs = st.builds(
    CostParams,
    e0=st.sampled_from([0.5, 1.0, 2.0]),
    e1=st.sampled_from([0.0, 1.0]),
    # beta > 0: a slot with s_t = 0 and beta = 0 would leave m_t undetermined (free above x_t).
    beta=st.sampled_from([1.0, 12.0, 40.0]),
)


@st.composite
def cases(draw):
    load, deadline_slots, params = draw(loads), draw(deadlines), draw(costs)
    horizon = load.shape[0] + deadline_slots
    signal = draw(st.lists(st.integers(min_value=0, max_value=10), min_size=horizon, max_size=horizon))
    return load, deadline_slots, params, np.array(signal, float) * draw(st.sampled_from([1.0, 50.0]))


def tolerance(value: float) -> float:
    return 1e-6 * max(1.0, abs(value))


@settings(max_examples=40, deadline=None)
@given(case=cases())
def test_signal_aware_optimum_is_cheaper_under_the_signal_and_dearer_without_it(case):
    load, deadline_slots, params, signal = case
    aware = plan(load, deadline_slots, params, slot_cost=signal)
    blind = plan(load, deadline_slots, params)
    # Each is optimal for its own objective, so neither can beat the other on that objective.
    aware_weighted, blind_weighted = weighted_total(aware, params, signal), weighted_total(blind, params, signal)
    assert aware_weighted <= blind_weighted + tolerance(blind_weighted)
    aware_abstract, blind_abstract = abstract_total(aware, params), abstract_total(blind, params)
    assert aware_abstract >= blind_abstract - tolerance(blind_abstract)
    released = pad_to_horizon(load, deadline_slots)
    check_schedule(aware, released, deadline_curve(released, deadline_slots))


@settings(max_examples=30, deadline=None)
@given(load=loads, deadline_slots=deadlines, params=costs, level=st.sampled_from([1.0, 3.0, 250.0]))
def test_a_constant_signal_gives_the_blind_optimum(load, deadline_slots, params, level):
    # s_t = c scales the operating cost by c: the optimum of e0*c*m + e1*c*x + beta*|dm| is the blind
    # LP with e0, e1 multiplied by c. The optimum need not be unique, so costs are compared.
    horizon = load.shape[0] + deadline_slots
    aware = plan(load, deadline_slots, params, slot_cost=np.full(horizon, level))
    scaled = CostParams(e0=params.e0 * level, e1=params.e1 * level, beta=params.beta)
    blind = plan(load, deadline_slots, scaled)
    assert abstract_total(aware, scaled) == pytest.approx(abstract_total(blind, scaled), rel=1e-6, abs=1e-5)
    # With c = 1 the weighted problem is the blind problem itself.
    ones = plan(load, deadline_slots, params, slot_cost=np.ones(horizon))
    same = plan(load, deadline_slots, params)
    assert abstract_total(ones, params) == pytest.approx(abstract_total(same, params), rel=1e-6, abs=1e-5)


@pytest.mark.parametrize(("signal", "expected"), [([10.0, 1.0], [0.0, 1.0]), ([1.0, 10.0], [1.0, 0.0])])
def test_one_unit_runs_in_the_cheaper_of_its_two_slots(signal, expected):
    # One unit released in slot 0, D = 1, so it may run in slot 0 or 1; e0 = 1, beta = 0.
    # Running it in slot t costs s_t, so the cheaper slot wins: 1 against 10.
    params = CostParams(e0=1.0, e1=0.0, beta=0.0)
    schedule = plan(np.array([1.0]), 1, params, slot_cost=np.array(signal))
    np.testing.assert_allclose(schedule.capacity, expected, atol=1e-6)
    np.testing.assert_allclose(schedule.assigned, expected, atol=1e-6)
    assert weighted_operating_cost(schedule.capacity, schedule.assigned, params, np.array(signal)) == pytest.approx(1.0, abs=1e-6)


def test_switching_cost_is_not_weighted():
    # L = [2, 0], D = 1, beta = 12, s = [1, 1000]: cheap slot 0 takes both units (2 + 12*4 = 50)
    # rather than spreading them (1 + 1000 + 12*2 = 1025) or deferring them (2000 + 48).
    params = CostParams(e0=1.0, e1=0.0, beta=12.0)
    signal = np.array([1.0, 1000.0, 1000.0])
    schedule = plan(np.array([2.0, 0.0]), 1, params, slot_cost=signal)
    np.testing.assert_allclose(schedule.capacity, [2.0, 0.0, 0.0], atol=1e-6)
    assert weighted_total(schedule, params, signal) == pytest.approx(50.0, abs=1e-5)


@pytest.mark.parametrize(
    ("slot_cost", "expected"),
    [
        (np.ones(3), r"shape \(2,\)"),
        (np.ones((2, 1)), r"shape \(2,\)"),
        (np.array([1.0, -0.5]), r"-0\.5 at slot 1"),
        (np.array([np.nan, 1.0]), r"nan at slot 0"),
        (np.array([1.0, np.inf]), r"inf at slot 1"),
        (["a", "b"], "array of numbers"),
    ],
)
def test_bad_slot_cost_is_refused_by_name(slot_cost, expected):
    with pytest.raises(ConfigError, match="slot_cost") as raised:
        plan(np.array([1.0]), 1, CostParams(), slot_cost=slot_cost)
    assert raised.match(expected)


@pytest.fixture(scope="module")
def workload_a_and_cycle():
    """Workload A's L_t and deploy/carbon-daily.csv resampled onto its slots from 2026-06-01T00:00Z."""
    from pathlib import Path

    from autoscaler.app.cli import load_workload
    from autoscaler.core.energy.signal import parse_time_s, read_signal, resample
    from autoscaler.core.model import LengthModel

    workload, _ = load_workload(None, slot_s=300.0, window_slots=None, skip_bad_lines=False, length_model=LengthModel())
    path = Path(__file__).resolve().parents[2] / "deploy" / "carbon-daily.csv"
    signal = read_signal(path.read_text(), str(path), "gCO2eq/kWh")
    return workload.active, resample(signal, parse_time_s("2026-06-01T00:00:00Z"), 300.0, workload.active.shape[0] + 144)


@pytest.mark.parametrize("deadline_slots", [12, 24, 72, 144])
def test_on_workload_a_the_aware_optimum_is_never_dearer_under_the_cycle_at_1_2_6_and_12_hours(workload_a_and_cycle, deadline_slots):
    load, intensity = workload_a_and_cycle
    intensity = intensity[: load.shape[0] + deadline_slots]
    weights = intensity / intensity.mean()
    for params in (CostParams(beta=12.0), CostParams(beta=0.0)):
        aware = plan(load, deadline_slots, params, slot_cost=weights)
        blind = plan(load, deadline_slots, params)
        aware_total, blind_total = weighted_total(aware, params, weights), weighted_total(blind, params, weights)
        assert aware_total <= blind_total + tolerance(blind_total)
    # With beta = 0 the objective is the emissions themselves (e0 in server-slots at s_t): aware <= blind.
    emissions = {name: weighted_operating_cost(s.capacity, s.assigned, params, intensity) for name, s in (("aware", aware), ("blind", blind))}
    assert emissions["aware"] <= emissions["blind"] * (1 + 1e-6)
