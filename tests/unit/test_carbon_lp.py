"""hold+carbon's window LP on its grid (autoscaler.core.policies.carbon_lp) against the slot LP written
independently: in m and x with cumulative deadline and release constraints, solved by cvxpy's Clarabel
(an interior-point method, where carbon_lp runs HiGHS's dual simplex)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.errors import InfeasibleError
from autoscaler.core.model import CostParams
from autoscaler.core.policies import carbon, carbon_lp


def released_and_due(queue: np.ndarray, arrivals: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The window's work as the module docstring of carbon defines it, written out again here."""
    d = queue.shape[0] - 1
    released = np.concatenate([[queue.sum()], np.full(2 * d, arrivals), np.zeros(n - 2 * d - 1)])
    due = np.concatenate([queue, np.full(n - d - 1, arrivals)])
    return released, due


def plan_cost(capacity, assigned, previous, weights, params) -> float:
    """sum_k w_k*(e0*m_k + e1*x_k) + beta*sum_k |m_k - m_{k-1}|, m_{-1} = previous, slot by slot."""
    return float(weights @ (params.e0 * capacity + params.e1 * assigned) + params.beta * np.abs(np.diff(capacity, prepend=previous)).sum())


def slot_optimum(queue, arrivals, previous, weights, params) -> float | None:
    """The slot LP's optimal cost, or None when no plan meets every deadline under M."""
    n = weights.shape[0]
    released, due = released_and_due(queue, arrivals, n)
    m, x = cp.Variable(n), cp.Variable(n)
    switching = cp.abs(m[0] - previous) + cp.sum(cp.abs(cp.diff(m)))
    constraints = [x >= 0, x <= m, cp.cumsum(x) >= np.cumsum(due), cp.cumsum(x) <= np.cumsum(released)]
    if params.max_servers is not None:
        constraints.append(m <= params.max_servers)
    problem = cp.Problem(cp.Minimize(weights @ (params.e0 * m + params.e1 * x) + params.beta * switching), constraints)
    problem.solve(solver=cp.CLARABEL)
    if problem.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        return None
    assert problem.status == cp.OPTIMAL, problem.status
    return float(problem.value)


def check_slot_plan(capacity, assigned, queue, arrivals, params) -> None:
    """The plan spread over the slots meets every deadline and release, 0 <= x <= m <= M."""
    released, due = released_and_due(queue, arrivals, capacity.shape[0])
    slack = 1e-7 * max(1.0, float(released.max()))
    done = np.cumsum(assigned)
    assert (assigned >= -slack).all() and (assigned <= capacity + slack).all()
    assert (done >= np.cumsum(due) - slack * np.arange(1, done.shape[0] + 1)).all()
    assert (done <= np.cumsum(released) + slack * np.arange(1, done.shape[0] + 1)).all()
    if params.max_servers is not None:
        assert (capacity <= params.max_servers + slack).all()


costs = st.builds(
    CostParams,
    e0=st.sampled_from([0.5, 1.0]),
    e1=st.sampled_from([0.0, 0.5]),
    beta=st.sampled_from([0.0, 1.0, 12.0]),
)


@st.composite
def windows(draw, deadlines):
    d = draw(deadlines)
    n = carbon.window_slots(d)
    queue = np.array(draw(st.lists(st.integers(0, 30), min_size=d + 1, max_size=d + 1)), float)
    arrivals = float(draw(st.integers(0, 20)))
    previous = float(draw(st.integers(0, 40)))
    run_slots = draw(st.sampled_from([1, 6, 12]))  # a signal of 5-minute, 30-minute or hourly values
    levels = np.array(draw(st.lists(st.integers(1, 20), min_size=-(-n // run_slots), max_size=-(-n // run_slots))), float)
    weights = np.repeat(levels / 10.0, run_slots)[:n]
    return queue, arrivals, previous, weights


def capped(params: CostParams, cap: float | None) -> CostParams:
    return CostParams(e0=params.e0, e1=params.e1, beta=params.beta, max_servers=cap)


@settings(max_examples=80, deadline=None)
@given(window=windows(st.integers(1, 8)), params=costs, cap=st.sampled_from([None, 8.0, 20.0, 45.0]))
def test_a_small_window_is_solved_slot_by_slot_to_the_slot_optimum(window, params, cap):
    queue, arrivals, previous, weights = window
    params = capped(params, cap)
    d = queue.shape[0] - 1
    assert carbon_lp.window_groups(weights, d).tolist() == [1] * weights.shape[0]
    optimum = slot_optimum(queue, arrivals, previous, weights, params)
    if optimum is None:
        with pytest.raises(InfeasibleError):
            carbon_lp.solve_window(queue, arrivals, previous, weights, params)
        with pytest.raises(InfeasibleError):
            carbon_lp.solve_window_exact(queue, arrivals, previous, weights, params)
        return
    capacity, assigned = carbon_lp.window_plan(queue, arrivals, previous, weights, params)
    check_slot_plan(capacity, assigned, queue, arrivals, params)
    assert plan_cost(capacity, assigned, previous, weights, params) == pytest.approx(optimum, rel=1e-6, abs=1e-6)
    m0, x0 = carbon_lp.solve_window(queue, arrivals, previous, weights, params)
    assert (m0, x0) == (capacity[0], assigned[0])
    assert x0 >= queue[0] - 1e-7 * max(1.0, queue.sum(), previous)
    # The same LP as the slot LP's, passed to HiGHS the same way: the same decision.
    assert (m0, x0) == pytest.approx(carbon_lp.solve_window_exact(queue, arrivals, previous, weights, params), rel=1e-12, abs=1e-12)


@settings(max_examples=12, deadline=None)
@given(window=windows(st.sampled_from([36, 72, 144])), params=costs, cap=st.sampled_from([None, 30.0, 60.0]))
def test_a_large_window_plans_on_its_grid_never_below_the_slot_optimum_and_at_it_when_every_change_is_cut(window, params, cap):
    queue, arrivals, previous, weights = window
    params = capped(params, cap)
    d = queue.shape[0] - 1
    assert carbon_lp.window_groups(weights, d).shape[0] < weights.shape[0]
    optimum = slot_optimum(queue, arrivals, previous, weights, params)
    if optimum is None:
        # Averaging any slot plan over each block (m: its largest) is a plan of the grid, so the grid
        # LP is infeasible exactly when the slot LP is.
        with pytest.raises(InfeasibleError):
            carbon_lp.solve_window(queue, arrivals, previous, weights, params)
        return
    capacity, assigned = carbon_lp.window_plan(queue, arrivals, previous, weights, params)
    check_slot_plan(capacity, assigned, queue, arrivals, params)
    cost = plan_cost(capacity, assigned, previous, weights, params)
    assert cost >= optimum * (1 - 1e-6) - 1e-6
    # With a cut at every change of w past D, each block has one w and one rate of release and due
    # work; averaging a slot plan over a block keeps its operating cost and does not add to its
    # switching (|m_k - m_{k-1}| summed is no larger for the block means), so the grid's optimum is
    # the slot optimum. With more changes than SIGNAL_CUTS_MAX it is an approximation, measured by
    # benchmarks/bench_carbon_lp.py (hypothesis found 3.3 % on a signal changing every slot).
    past_d = weights[d + 1 :]
    if np.count_nonzero(np.diff(past_d)) <= carbon_lp.SIGNAL_CUTS_MAX - 1:
        assert cost == pytest.approx(optimum, rel=1e-6, abs=1e-6)
    m0, x0 = carbon_lp.solve_window(queue, arrivals, previous, weights, params)
    assert x0 >= queue[0] - 1e-7 * max(1.0, queue.sum(), previous)
    assert x0 <= m0 + 1e-9 * max(1.0, m0)


def test_a_piecewise_constant_signal_is_cut_where_it_changes():
    # D = 144: slots 0..144 one by one; 145..288 and 289..432 (144 slots each) in blocks of at most
    # ceil(288/24) = 12 slots, ending where w changes. w changes every 6 slots from slot 0 on
    # (30-minute values): at 150, 156, ..., 288 and 294, ..., 432, 24 + 24 = 48 changes (all kept,
    # SIGNAL_CUTS_MAX = 48), so every block is one 6-slot value but 145..149 and 289..293 (from a
    # stretch's start) and 288 and 432 (up to its end).
    d = 144
    weights = np.repeat(np.arange(73.0), 6)[: carbon.window_slots(d)]
    lengths = carbon_lp.window_groups(weights, d)
    assert lengths[: d + 1].tolist() == [1] * (d + 1)
    assert lengths[d + 1 :].tolist() == [5] + [6] * 23 + [1] + [5] + [6] * 23 + [1]
    assert lengths.sum() == weights.shape[0]


def test_a_slot_by_slot_signal_keeps_blocks_within_their_stretch_and_length():
    d = 72
    n = carbon.window_slots(d)
    weights = np.random.default_rng(7).uniform(0.5, 2.0, n)
    lengths = carbon_lp.window_groups(weights, d)
    ends = np.cumsum(lengths)
    assert lengths.sum() == n and lengths[: d + 1].tolist() == [1] * (d + 1)
    assert lengths.max() <= -(-2 * d // carbon_lp.FAR_BLOCKS_MAX)
    assert {d + 1, 2 * d + 1} <= set((ends - lengths).tolist())  # no block straddles a stretch's start
    # 73 slots one by one, at most 48 cuts at the signal's changes and 24 at the longest block.
    assert lengths.shape[0] <= d + 1 + carbon_lp.SIGNAL_CUTS_MAX + carbon_lp.FAR_BLOCKS_MAX + 2


@pytest.mark.parametrize("deadline_slots", [3, 144])
def test_work_due_now_above_the_cap_is_infeasible(deadline_slots):
    n = carbon.window_slots(deadline_slots)
    queue = np.zeros(deadline_slots + 1)
    queue[0] = 5.0
    weights = np.linspace(2.0, 1.0, n)
    with pytest.raises(InfeasibleError):
        carbon_lp.solve_window(queue, 1.0, 0.0, weights, CostParams(max_servers=4.0))


def test_forecast_arrivals_above_the_cap_are_infeasible_on_the_grid_as_slot_by_slot():
    d = 144
    n = carbon.window_slots(d)
    queue = np.ones(d + 1)
    weights = np.tile([1.0, 2.0], n)[:n]
    params = CostParams(max_servers=10.0)
    for solve in (carbon_lp.solve_window, carbon_lp.solve_window_exact):
        with pytest.raises(InfeasibleError):
            solve(queue, 20.0, 0.0, weights, params)


def test_dirty_now_clean_later_defers_on_the_grid_as_slot_by_slot():
    # Hand-checkable: D = 144, 10 units due at the deadline, no arrivals, w = 3 for the first 100
    # slots then 1: the work runs at w = 1 in slots 100..144, m = 10/45 there, nothing before.
    d = 144
    n = carbon.window_slots(d)
    queue = np.zeros(d + 1)
    queue[d] = 10.0
    weights = np.where(np.arange(n) < 100, 3.0, 1.0)
    params = CostParams(e0=1.0, e1=0.0, beta=0.0)
    capacity, assigned = carbon_lp.window_plan(queue, 0.0, 0.0, weights, params)
    assert plan_cost(capacity, assigned, 0.0, weights, params) == pytest.approx(10.0)
    assert assigned[:100].sum() == pytest.approx(0.0, abs=1e-9)
    assert carbon_lp.solve_window(queue, 0.0, 0.0, weights, params) == pytest.approx((0.0, 0.0), abs=1e-9)
