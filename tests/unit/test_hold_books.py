"""The daemon under "node-seconds": hold's books follow the work the cluster ran, hold keeps the
servers that have queued work and no idle ones, a release fills the node time a long job leaves
(first fit), and a job waiting for a node does not ask for one of its own.

The daemon releases whole jobs onto whole nodes, ceil(m_t) of them, so the cluster runs work ahead of
hold's fractional x_t. Before the books followed it, that work stayed in hold's queue after the
jobs had run: with the real queue empty, hold kept m_t up to run it by its deadlines (on Workload A at
2 h, 38 nodes held for 8 slots after the last job went out; on a 12 h deadline one node kept on for
128 slots with nothing queued or running).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from slot_simulation import simulate_slots

from autoscaler.core.controller import ControllerConfig
from autoscaler.core.model import CostParams, Job, StepSpec
from autoscaler.core.policies.hold import HoldState, hold_step
from autoscaler.core.release import dispatch

TAU = 300.0


def job(job_id: str, submit_s: float, length_s: float, deadline_s: float, **fields) -> Job:
    return Job(job_id, job_id, "t", submit_s, deadline_s, length_s, StepSpec(args=("true",)), **fields)


def test_work_done_comes_off_the_earliest_deadlines_of_the_policys_row_only():
    state = HoldState.empty(4, CostParams(e0=1.0, beta=2.0))
    queue = np.arange(1.0, 1.0 + state.queue.size).reshape(state.queue.shape)
    state = HoldState(queue=queue, previous=state.previous, cost=state.cost, recent_load=state.recent_load, recent_smoothed=state.recent_smoothed)
    done = state.with_work_done(2.5)
    # By hand: the policy's row [a, b, ...] loses 2.5 from its front, earliest deadline first.
    row = queue[-1].copy()
    expected, left = row.copy(), 2.5
    for i, units in enumerate(row):
        taken = min(units, left)
        expected[i], left = units - taken, left - taken
    np.testing.assert_allclose(done.queue[-1], expected)
    np.testing.assert_array_equal(done.queue[:-1], queue[:-1])  # the rules' and the mixture's shadows
    assert not state.with_work_done(math.inf).queue[-1].any()
    assert state.with_work_done(0.0) is state


ENERGY = CostParams(e0=5.025, e1=2.7975, beta=2.76375)
"""objective energy's costs with the default 330 s boot: break-even 2*beta/e0 = 1.1, so W = 2 slots."""


@pytest.mark.parametrize("slack_slots", [24, 144])
def test_once_every_job_has_run_hold_keeps_no_node_on(slack_slots):
    # One 120-s job every 2 slots for 2 hours, each with slack_slots of slack: hold runs them early on
    # its node's free time. Once the last has run nothing is queued or running: the deadlines force
    # nothing (r_t = 0), and after hold's valley hold (at most W = 2 slots here) no node is kept.
    jobs = [job(f"j{i}", i * 2 * TAU + 37.0, 120.0, i * 2 * TAU + 37.0 + 120.0 + slack_slots * TAU) for i in range(12)]
    config = ControllerConfig(policy="hold", deadline_slots=2, slot_s=TAU, max_nodes=50, work_model="node-seconds", cost=ENERGY)
    slots = 24 + slack_slots + 4
    run = simulate_slots(jobs, config, slots)
    last_release = max(run.released_in.values())
    assert last_release < slots - 8
    after = [d for d in run.decisions if d.slot > last_release + 1]
    assert all(d.reason in ("held", "idle") and "r_t = 0 " in d.why or d.reason == "idle" for d in after), [(d.slot, d.why) for d in after[:3]]
    # The valley hold ends within a few slots (its rules hold up to a few times W), and the whole run
    # keeps far fewer node-slots on than the 24 + slack the old books kept: 12 x 120 s is 4.8 node-slots.
    assert all(d.nodes == 0 for d in after if d.slot > last_release + 6), [(d.slot, d.nodes, d.why) for d in after if d.nodes]
    assert sum(d.nodes for d in run.decisions) < 40
    # Under the paper's job-slots the books are replay's (the daemon plans as `autoscaler replay`
    # does), and the work of jobs run early is still counted to its deadline: nodes stay on.
    paper = simulate_slots(jobs, ControllerConfig(policy="hold", deadline_slots=2, slot_s=TAU, max_nodes=50, cost=ENERGY), slots)
    paper_last = max(paper.released_in.values())
    assert any(d.nodes and d.reason == "deadlines" for d in paper.decisions if d.slot > paper_last + 3)


def test_jobs_waiting_for_a_node_do_not_ask_for_nodes_of_their_own():
    # Twelve 20-s steps released last slot onto 2 nodes, still in the store as running (some PENDING
    # on the cluster): under node-seconds they need 12 x 20 s = 240 s, one node's slot, so the nodes
    # stay at the 2 the last decision asked for, not 12.
    limits = ControllerConfig(policy="follow", deadline_slots=2, slot_s=TAU, max_nodes=50, work_model="node-seconds")
    running = [job(f"r{i}", 0.0, 20.0, 2000.0, state="running", released_s=TAU - 1.0) for i in range(12)]
    held = dispatch(1, 0.0, running, limits, work_model="node-seconds", holding_nodes=2)
    assert held.nodes == 2
    # Not knowing the last decision's nodes (after downtime), every running job keeps one.
    assert dispatch(1, 0.0, running, limits, work_model="node-seconds").nodes == 12


def test_keep_busy_keeps_the_servers_that_have_queued_work_and_no_more():
    # By hand, one slot of hold from m_{t-1} = 3 with the paper's costs; the queue (by slots to its
    # deadline, D = 4) holds 5 units due in 4 slots: r_t = 5/5 = 1.
    params = CostParams(e0=1.0, beta=12.0)
    state = HoldState.empty(4, params)
    previous = state.previous.copy()
    previous[:] = 3.0
    queue = state.queue.copy()
    queue[:, 4] = 5.0  # carried: after the shift it is due in 3 slots (Y_3 = 5, r_t = 5/4)
    state = HoldState(queue=queue, previous=previous, cost=state.cost, recent_load=state.recent_load, recent_smoothed=state.recent_smoothed)
    m_t, x_t, _ = hold_step(state, 0.0, 4, params, keep_busy=True)
    assert (m_t, x_t) == (3.0, 3.0)  # 5 units queued: all 3 servers have work, none is switched off
    # 2 units queued: 2 servers kept busy (above r_t = 2/4), the third switched off, none kept idle.
    queue[:, 4] = 2.0
    state = HoldState(queue=queue, previous=previous, cost=state.cost, recent_load=state.recent_load, recent_smoothed=state.recent_smoothed)
    m_t, x_t, _ = hold_step(state, 0.0, 4, params, keep_busy=True)
    assert (m_t, x_t) == (2.0, 2.0)
    # Never switched on for it: from m_{t-1} = 1 with 5 units queued it runs r_t = 5/4, no more.
    previous[:] = 1.0
    queue[:, 4] = 5.0
    state = HoldState(queue=queue, previous=previous, cost=state.cost, recent_load=state.recent_load, recent_smoothed=state.recent_smoothed)
    m_t, _, _ = hold_step(state, 0.0, 4, params, keep_busy=True)
    assert m_t == pytest.approx(5 / 4)


def test_node_time_a_long_job_leaves_is_filled_by_the_short_jobs_behind_it():
    # 1 node (300 s of node time); in EDF order a 200-s job (start-by slot 20), a 900-s job (it needs
    # the node's whole slot, 300 s; start-by slot 21), then 100-s jobs (start-by slots 22..). By hand:
    # the 200-s job takes 200 s; the long one does not fit the 100 s left and is not due (20 slots to
    # go), so it waits; the first 100-s job fits and takes the rest. Without first fit the node would
    # idle for 100 s.
    limits = ControllerConfig(policy="follow", deadline_slots=2, slot_s=TAU, max_nodes=50, work_model="node-seconds", release_margin_slots=1)
    jobs = [job("a", 0.0, 200.0, 200.0 + 20 * TAU), job("b", 0.0, 900.0, 900.0 + 21 * TAU)]
    jobs += [job(f"s{i}", 0.0, 100.0, 100.0 + (22 + i) * TAU) for i in range(3)]
    d = dispatch(0, 1.0, jobs, limits, work_model="node-seconds")
    assert d.release == ("a", "s0") and d.nodes == 1
    assert d.node_s_released == pytest.approx(300.0)


def test_a_boot_of_a_second_overflows_no_exponential_in_holds_rules():
    import warnings

    from autoscaler.core.policies.hold import experts

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rules = experts(1, 2 * 0.5 * 60.30 * 1 / 3600 / (60.30 * 300 / 3600))  # a 1 s boot: break-even 0.0033 slots
    assert np.all(np.isfinite(rules.survival)) and np.all(rules.survival[:-1, 0] == 1.0)  # the last: no hold


def test_due_jobs_get_whole_nodes_for_whole_jobs():
    # 200 jobs of 140 s, all due now: 28,000 s of node time is 93.3 nodes' slots, but a node's 300 s
    # holds two whole 140-s jobs, so every one of them can start in the slot only on 100 nodes.
    limits = ControllerConfig(policy="follow", deadline_slots=2, slot_s=TAU, max_nodes=500, work_model="node-seconds")
    jobs = [job(f"j{i:03d}", 0.0, 140.0, 140.0 + TAU) for i in range(200)]
    d = dispatch(0, 0.0, jobs, limits, work_model="node-seconds")
    assert len(d.release) == 200 and d.nodes == 100
    # By hand, best fit decreasing: 250 + 50 share a node, 200 + 100 another, 150 + 140 a third.
    from autoscaler.core.release import _nodes_packed

    assert _nodes_packed([250.0, 200.0, 150.0, 140.0, 100.0, 50.0], TAU) == 3
    assert _nodes_packed([], TAU) == 0 and _nodes_packed([300.0, 300.0], TAU) == 2
