"""hold on hand-worked valleys, and its guarantees on random workloads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.controller import ControllerConfig, PolicyState, tick
from autoscaler.core.cost import check_schedule, deadline_curve, pad_to_horizon, schedule_cost
from autoscaler.core.errors import InfeasibleError, ScheduleError
from autoscaler.core.model import CostParams, Schedule
from autoscaler.core.policies import plan
from autoscaler.core.policies.hold import HoldState, break_even_slots, experts, hold_step

PAPER = CostParams(e0=1.0, e1=0.0, beta=12.0)


def run(load: list[float], deadline_slots: int, params: CostParams = PAPER):
    """hold slot by slot over the horizon; returns (m, x, final state)."""
    released = pad_to_horizon(np.array(load, dtype=float), deadline_slots)
    state = HoldState.empty(deadline_slots, params)
    m, x = [], []
    for value in released:
        m_t, x_t, state = hold_step(state, value, deadline_slots, params)
        m.append(m_t)
        x.append(x_t)
    return np.array(m), np.array(x), state


def rule_cost(state: HoldState, label: str) -> float:
    """What one of hold's rules has cost (eq. 2), its servers switched off after the last slot."""
    k = experts(break_even_slots(PAPER), 24.0).labels.index(label)
    return float(state.cost[k])


def total(m: np.ndarray, x: np.ndarray, params: CostParams = PAPER) -> float:
    return schedule_cost(m, x, params).total


def test_holding_through_three_slot_valleys_beats_switching_off_once_a_rule_has_shown_it():
    # D = 0, e0 = 1, beta = 12: two servers' load, a 3-slot valley, the load again.
    # Switching off (follow, = GCP-U at D = 0): m = L = [2,2,0,0,0,2,2]:
    #   operating 8, switching 12 * (2 on + 2 off + 2 on + 2 off) = 96, total 104.
    # Holding through: m = [2]*7: operating 14, switching 12 * (2 on + 2 off) = 48, total 62,
    # cheaper because the valley (3 slots) is shorter than 2*beta/e0 = 24 slots: 3*2*e0 = 6 < 2*2*beta = 48.
    load = [2, 2, 0, 0, 0, 2, 2]
    m, x, state = run(load, 0)
    assert rule_cost(state, "L, hold 24 slots") == pytest.approx(62.0)
    assert rule_cost(state, "no hold (GCP-U)") == pytest.approx(104.0)
    assert total(plan("follow", np.array(load, float), 0, PAPER).capacity, np.array(load, float)) == pytest.approx(104.0)
    np.testing.assert_allclose(x, load)  # D = 0: all work runs in its slot
    # Nothing is at stake in the first valley: GCP-U saves nothing over follow at D = 0 and no rule has
    # yet been seen to earn anything, so hold risks nothing and switches off, as follow does.
    np.testing.assert_allclose(m, load)
    # Twelve such valleys: from the second on, the rules that held the first are 104 - 62 = 42 ahead,
    # and hold keeps most of both servers on through every later valley.
    load = [2, 2, 0, 0, 0] * 12 + [2, 2]
    m, x, _ = run(load, 0)
    assert np.all(m[7:10] >= 1.9) and np.all(m[57:60] >= 1.9)
    # follow: 13 bursts of 2 servers for 2 slots, operating 13 * 4 = 52, each burst's 2 on and 2 off at
    # beta = 12: 13 * 48 = 624, total 676.
    assert total(plan("follow", np.array(load, float), 0, PAPER).capacity, np.array(load, float)) == pytest.approx(676.0)
    assert total(m, x) < 676.0 / 2


def test_switching_off_through_a_valley_longer_than_the_break_even():
    # The same load with a 30-slot valley: holding through costs 34*2 + 48 = 116, switching off
    # 8 + 96 = 104, so switching off is right. The rule holding 24 slots (the deterministic
    # ski rental, 2-competitive) pays 26*2 + 2*2 = 56 operating and 96 switching: 152 < 2 * 104.
    load = [2, 2] + [0] * 30 + [2, 2]
    m, x, state = run(load, 0)
    assert rule_cost(state, "no hold (GCP-U)") == pytest.approx(104.0)
    assert rule_cost(state, "L, hold 24 slots") == pytest.approx(152.0)
    # With nothing earned to risk, hold never holds: it costs what switching off costs.
    assert np.all(m[2:32] == 0.0)
    assert total(m, x) == pytest.approx(104.0)


def test_held_servers_run_queued_work_early():
    # D = 2: two units in slot 0, then a unit a slot. GCP-U defers (m_0 = 2/3); after the burst
    # hold keeps what it has on and runs the queue early: x_t <= m_t, never later than EDF allows.
    m, x, _ = run([2, 0, 0, 1, 1], 2)
    released = pad_to_horizon(np.array([2, 0, 0, 1, 1.0]), 2)
    check_schedule(Schedule("hold", m, x), released, deadline_curve(released, 2))
    assert m[0] == pytest.approx(2 / 3)
    assert x.sum() == pytest.approx(4.0)


def test_a_server_cap_below_the_deadlines_need_is_infeasible():
    with pytest.raises(InfeasibleError):
        plan("hold", np.array([3.0, 0.0]), 1, CostParams(max_servers=1.0))


def test_a_state_for_another_deadline_is_refused():
    state = HoldState.empty(2, PAPER)
    with pytest.raises(ScheduleError, match="D = 3"):
        hold_step(state, 1.0, 3, PAPER)


def test_idle_servers_that_cost_nothing_are_never_switched_off_and_free_restarts_are_always_taken():
    load = np.array([2.0, 0.0, 0.0, 3.0, 0.0])
    free_idle = plan("hold", load, 0, CostParams(e0=0.0, e1=1.0, beta=12.0))
    np.testing.assert_allclose(free_idle.capacity, [2, 2, 2, 3, 3])
    free_switch = plan("hold", load, 0, CostParams(e0=1.0, e1=0.0, beta=0.0))
    np.testing.assert_allclose(free_switch.capacity, load)


def test_state_round_trips_through_the_controllers_json():
    config = ControllerConfig(policy="hold", deadline_slots=2, slot_s=300.0)
    _, state = tick(0.0, [], PolicyState(), config)
    assert state.hold is not None
    assert PolicyState.from_json(state.to_json()) == state


def _forced_capacity(released: np.ndarray, assigned: np.ndarray, deadline_slots: int) -> np.ndarray:
    """r_t rebuilt independently from the schedule: with one deadline EDF is FIFO, so the queued work
    due within j+1 slots is what was released by slot t+j-D, less what ran before t."""
    horizon = released.shape[0]
    arrived = np.concatenate([[0.0], np.cumsum(released)])  # arrived[s] = work released in slots < s
    done_before = np.concatenate([[0.0], np.cumsum(assigned)])
    forced = np.zeros(horizon)
    for t in range(horizon):
        due = [max(0.0, arrived[max(0, min(t + j - deadline_slots, t) + 1)] - done_before[t]) for j in range(deadline_slots + 1)]
        forced[t] = max(d / (j + 1) for j, d in enumerate(due))
    return forced


loads = st.lists(st.floats(min_value=0, max_value=50, allow_nan=False), min_size=1, max_size=40).map(lambda v: np.array(v))
costs = st.builds(
    CostParams,
    e0=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    e1=st.sampled_from([0.0, 1.0]),
    beta=st.sampled_from([0.0, 1.0, 3.0, 12.0, 40.0]),
)


@settings(max_examples=150, deadline=None)
@given(load=loads, deadline_slots=st.integers(min_value=0, max_value=8), params=costs)
def test_every_hold_schedule_meets_every_deadline_and_never_scales_out_unforced(load, deadline_slots, params):
    # plan() raises ScheduleError unless C1, C2, 0 <= x_t <= m_t and all work done hold.
    schedule = plan("hold", load, deadline_slots, params)
    released = pad_to_horizon(load, deadline_slots)
    assert schedule.assigned.sum() == pytest.approx(load.sum(), abs=1e-6 * max(1.0, load.sum()))
    forced = _forced_capacity(released, schedule.assigned, deadline_slots)
    previous = np.concatenate([[0.0], schedule.capacity[:-1]])
    tol = 1e-7 * max(1.0, float(load.max(initial=0.0)))
    # m_t >= r_t (the deadlines), and m_t <= max(r_t, m_{t-1}): no server is switched on unless forced.
    assert np.all(schedule.capacity >= forced - tol)
    assert np.all(schedule.capacity <= np.maximum(forced, previous) + tol)
    # Held servers are worked before any idles: x_t = min(m_t, work queued).
    queued = np.concatenate([[0.0], np.cumsum(released)])[1:] - np.concatenate([[0.0], np.cumsum(schedule.assigned)])[:-1]
    np.testing.assert_allclose(schedule.assigned, np.minimum(schedule.capacity, queued), atol=tol)


@settings(max_examples=100, deadline=None)
@given(
    load=loads,
    deadline_slots=st.integers(min_value=0, max_value=8),
    params=costs,
    slack=st.floats(min_value=0.0, max_value=0.5),
)
def test_hold_respects_a_server_cap_whenever_gcp_u_does(load, deadline_slots, params, slack):
    peak = float(plan("gcp-u", load, deadline_slots, params).capacity.max(initial=0.0))
    if peak <= 0:
        return
    capped = CostParams(e0=params.e0, e1=params.e1, beta=params.beta, max_servers=peak * (1 + slack))
    plan("gcp-u", load, deadline_slots, capped)  # GCP-U is feasible under M ...
    schedule = plan("hold", load, deadline_slots, capped)  # ... so hold is, and plan() checked m_t <= M
    assert schedule.capacity.max() <= capped.max_servers * (1 + 1e-9)


def test_an_enormous_break_even_is_cut_to_a_week_of_slots():
    from autoscaler.core.policies.hold import MAX_BREAK_EVEN_SLOTS

    params = CostParams(e0=1e-300, e1=0.0, beta=1e300)
    assert break_even_slots(params) == MAX_BREAK_EVEN_SLOTS
    schedule = plan("hold", np.array([3.0, 0.0, 0.0, 2.0]), 2, params)
    # Idle servers cost next to nothing: none is switched off before the end.
    np.testing.assert_allclose(schedule.capacity, [1, 1, 1, 1, 1, 1])


def _cost(name: str, load: np.ndarray, deadline_slots: int, params: CostParams) -> float:
    schedule = plan(name, load, deadline_slots, params)
    return schedule_cost(schedule.capacity, schedule.assigned, params).total


def regret_bound(load: np.ndarray, params: CostParams) -> float:
    """What hold may cost more than GCP-U (see policies/hold.py, "Guarantees"): one restart, 2*beta, of the peak load."""
    return 2 * params.beta * float(load.max(initial=0.0))


@pytest.mark.parametrize("beta", [3.0, 12.0, 40.0])
@pytest.mark.parametrize("deadline_slots", [0, 1, 2, 4, 8])
def test_valleys_at_the_break_even_cost_no_more_than_follow_or_gcp_u(deadline_slots, beta):
    # The ski-rental worst case: busy stretches of 30 servers, valleys down to 5 exactly W = 2*beta/e0
    # slots long, where holding through and switching off cost the same and any shorter hold costs
    # both. Follow's and GCP-U's costs come from their own plans, not from hold's shadows.
    params = CostParams(e0=1.0, e1=0.0, beta=beta)
    window = break_even_slots(params)
    load = np.where((np.arange(8 * window) // window) % 2 == 0, 30.0, 5.0)
    hold, follow, gcp_u = (_cost(name, load, deadline_slots, params) for name in ("hold", "follow", "gcp-u"))
    assert hold <= follow * (1 + 1e-9)
    assert hold <= gcp_u + regret_bound(load, params) + 1e-9 * follow


@settings(max_examples=150, deadline=None)
@given(load=loads, deadline_slots=st.integers(min_value=0, max_value=8), params=costs)
def test_hold_costs_at_most_one_restart_of_the_peak_more_than_gcp_u(load, deadline_slots, params):
    hold, gcp_u = _cost("hold", load, deadline_slots, params), _cost("gcp-u", load, deadline_slots, params)
    assert hold <= gcp_u + regret_bound(load, params) + 1e-7 * max(1.0, gcp_u)
