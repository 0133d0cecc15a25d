"""The twin's lower bound (autoscaler.core.twin_bound): hand-worked cases, schedules priced by hand
that it never beats, and runs of the cluster twin itself whose bill is never below it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.cost import schedule_cost
from autoscaler.core.errors import ConfigError, InfeasibleError
from autoscaler.core.model import CostParams, Job, StepSpec
from autoscaler.core.policies.offline import plan
from autoscaler.core.twin import ClusterTwin, TwinConfig
from autoscaler.core.twin_bound import TwinBound, twin_load, twin_lower_bound

SLOT_S = 300.0
IDLE_W, BUSY_W = 60.30, 93.87  # TwinConfig's defaults: Table III idle, and at u = 1
REL = 1e-6  # the interior-point solver's last digits


def job(job_id: str, submit_s: float, length_s: float) -> Job:
    return Job(job_id=job_id, name=job_id, tenant="t", submit_s=submit_s, deadline_s=submit_s + length_s, length_s=length_s, step=StepSpec())


def starts(capacity: np.ndarray) -> float:
    """Nodes started by a schedule: the sum of its rises, from 0 before the first slot."""
    return float(np.clip(np.diff(np.asarray(capacity, dtype=float), prepend=0.0), 0.0, None).sum())


def hand_node_hours(capacity: np.ndarray, config: TwinConfig) -> float:
    """A schedule's bill on the twin without the 60 s minimum: node time plus a boot per node started."""
    return (float(np.sum(capacity)) * SLOT_S + starts(capacity) * config.provision_s) / 3600.0


def hand_energy_kwh(capacity: np.ndarray, assigned: np.ndarray, config: TwinConfig) -> float:
    """Idle power over all node time, booting included, plus busy's extra over the work."""
    node_s = float(np.sum(capacity)) * SLOT_S + starts(capacity) * config.provision_s
    busy_s = float(np.sum(assigned)) * SLOT_S
    return (config.idle_power_w * node_s + (config.busy_power_w - config.idle_power_w) * busy_s) / 3600.0 / 1000.0


# -- twin_load ------------------------------------------------------------------------------------


def test_a_job_is_spread_over_the_slots_its_run_covers_by_the_part_in_each():
    config = TwinConfig()
    assert twin_load([job("a", 0.0, 600.0)], config, SLOT_S, 0.0, 3).tolist() == [1.0, 1.0, 0.0]
    assert twin_load([job("a", 150.0, 300.0)], config, SLOT_S, 0.0, 3).tolist() == [0.5, 0.5, 0.0]
    assert twin_load([job("a", 100.0, 100.0)], config, SLOT_S, 0.0, 2) == pytest.approx([1 / 3, 0.0])
    # 1,000 s from 150 s: 150 s, 300 s, 300 s, 250 s in slots 0..3
    assert twin_load([job("a", 150.0, 1000.0)], config, SLOT_S, 0.0, 5) == pytest.approx([0.5, 1.0, 1.0, 250 / 300, 0.0])


def test_slots_count_from_start_s_and_loads_add_up():
    config = TwinConfig()
    jobs = [job("a", 1000.0, 300.0), job("b", 1300.0, 150.0), job("c", 1000.0, 0.0)]
    assert twin_load(jobs, config, SLOT_S, 1000.0, 2).tolist() == [1.0, 0.5]


def test_work_past_the_window_is_clipped_and_jobs_after_it_left_out():
    config = TwinConfig()
    # 500 s to 1,500 s in a 900 s window: 100 s in slot 1, 300 s in slot 2, 600 s past the end
    assert twin_load([job("a", 500.0, 1000.0)], config, SLOT_S, 0.0, 3) == pytest.approx([0.0, 1 / 3, 1.0])
    assert twin_load([job("a", 900.0, 100.0), job("b", 5000.0, 100.0)], config, SLOT_S, 0.0, 3).tolist() == [0.0, 0.0, 0.0]


def test_with_sigma_a_job_does_its_true_length_not_its_estimate():
    config = TwinConfig(length_error_sigma=0.5, seed=3)
    true_s = config.true_length_s("a", 600.0)
    assert true_s != pytest.approx(600.0)
    load = twin_load([job("a", 0.0, 600.0)], config, SLOT_S, 0.0, 100)
    assert load.sum() == pytest.approx(true_s / SLOT_S)
    assert np.flatnonzero(load).tolist() == list(range(math.ceil(true_s / SLOT_S)))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 5000), st.one_of(st.just(0.0), st.floats(1e-3, 3000))), max_size=12),
    st.sampled_from([0.0, 0.3, 1.5]),
    st.integers(0, 5),
    st.floats(1.0, 1000.0),
)
def test_without_clipping_the_load_sums_to_the_true_lengths_in_slots(runs, sigma, seed, slot_s):
    config = TwinConfig(length_error_sigma=sigma, seed=seed)
    jobs = [job(f"j{i}", submit, length) for i, (submit, length) in enumerate(runs)]
    true_s = [config.true_length_s(j.job_id, j.length_s) for j in jobs]
    n_slots = math.ceil(max([j.submit_s + t for j, t in zip(jobs, true_s)], default=0.0) / slot_s) + 1
    load = twin_load(jobs, config, slot_s, 0.0, n_slots)
    assert load.shape == (n_slots,) and (load >= 0).all() and (load <= len(jobs) + 1e-9).all()
    assert load.sum() == pytest.approx(sum(true_s) / slot_s, rel=1e-9, abs=1e-9)
    working = [j.submit_s for j, t in zip(jobs, true_s) if t > 0]
    if working:  # no work before the first submission's slot
        assert np.flatnonzero(load > 0)[0] == math.floor(min(working) / slot_s)


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ({"jobs": [job("early", 10.0, 60.0)], "start_s": 20.0}, "'early'"),
        ({"slot_s": 0.0}, "slot_s"),
        ({"slot_s": math.nan}, "slot_s"),
        ({"n_slots": 0}, "n_slots"),
        ({"n_slots": 2.0}, "n_slots"),
        ({"start_s": math.inf}, "start_s"),
        ({"jobs": [job("nan", 0.0, math.nan)]}, "'nan'"),
    ],
)
def test_twin_load_refuses_bad_input_naming_it(arguments, shown):
    given_arguments = {"jobs": [job("a", 0.0, 60.0)], "config": TwinConfig(), "slot_s": SLOT_S, "start_s": 0.0, "n_slots": 4} | arguments
    with pytest.raises(ConfigError, match=shown):
        twin_load(**given_arguments)


# -- twin_lower_bound: by hand ----------------------------------------------------------------------


def test_one_job_of_two_slots_with_no_deferral_is_two_node_slots_and_one_boot():
    config = TwinConfig()  # provision_s 330, $0.240 per node-hour
    bound = twin_lower_bound(np.array([1.0, 1.0]), 0, SLOT_S, config)
    node_hours = (600.0 + 330.0) / 3600.0  # 0.2583 h
    assert bound.node_hours == pytest.approx(node_hours, rel=REL)
    assert bound.cost_usd == pytest.approx(node_hours * 0.240, rel=REL)  # $0.062
    assert bound.energy_kwh == pytest.approx((IDLE_W * 930.0 + (BUSY_W - IDLE_W) * 600.0) / 3600.0 / 1000.0, rel=REL)  # 21.17 Wh
    assert bound.busy_node_hours == pytest.approx(600.0 / 3600.0)
    assert bound.co2_kg is None and bound.deadline_slots == 0


def test_across_a_one_slot_gap_a_node_stays_on_when_a_boot_costs_more_than_a_slot():
    load = np.array([1.0, 0.0, 1.0])
    kept_on = twin_lower_bound(load, 0, SLOT_S, TwinConfig(provision_s=330.0))
    assert kept_on.node_hours == pytest.approx((3 * 300.0 + 330.0) / 3600.0, rel=REL)  # 3 slots + 1 boot < 2 slots + 2 boots
    restarted = twin_lower_bound(load, 0, SLOT_S, TwinConfig(provision_s=100.0))
    assert restarted.node_hours == pytest.approx((2 * 300.0 + 2 * 100.0) / 3600.0, rel=REL)  # 2 slots + 2 boots < 3 slots + 1 boot
    assert restarted.energy_kwh == pytest.approx((IDLE_W * 800.0 + (BUSY_W - IDLE_W) * 600.0) / 3.6e6, rel=REL)


def test_with_a_slot_of_deferral_half_a_node_runs_four_slots_on_half_a_boot():
    # L = (1, 0, 1), D = 1: x = m = 1/2 in slots 0..3 meets C1 and C2; any schedule doing 2 slots of
    # work over 4 slots has some m_t >= 1/2, so it starts at least half a node: the LP's fraction.
    bound = twin_lower_bound(np.array([1.0, 0.0, 1.0]), 1, SLOT_S, TwinConfig())
    assert bound.node_hours == pytest.approx((2 * 300.0 + 0.5 * 330.0) / 3600.0, rel=REL)


def test_a_cap_below_the_deadlines_need_is_infeasible_and_one_at_it_binds_the_bound():
    # L = (0, 0, 0, 0, 10), D = 0: the last slot needs 10 nodes, whatever came before.
    load = np.array([0.0, 0.0, 0.0, 0.0, 10.0])
    with pytest.raises(InfeasibleError):
        twin_lower_bound(load, 0, SLOT_S, TwinConfig(), max_nodes=9.5)
    assert twin_lower_bound(load, 0, SLOT_S, TwinConfig(), max_nodes=10).node_hours == pytest.approx((10 * 300.0 + 10 * 330.0) / 3600.0, rel=REL)


def test_a_cap_under_the_uncapped_optimum_raises_the_bound_by_what_it_forbids():
    # L = (1, 0, 1), D = 1: uncapped, half a node over four slots (above). Capped at 1/4 the work
    # (2 node-slots) cannot be done within 4 slots: infeasible. Capped at 1/2, the same schedule.
    load = np.array([1.0, 0.0, 1.0])
    with pytest.raises(InfeasibleError):
        twin_lower_bound(load, 1, SLOT_S, TwinConfig(), max_nodes=0.25)
    capped = twin_lower_bound(load, 1, SLOT_S, TwinConfig(), max_nodes=0.5)
    assert capped.node_hours == pytest.approx((2 * 300.0 + 0.5 * 330.0) / 3600.0, rel=REL)
    # D = 0 and a cap of 1: the gap slot is kept on or not exactly as uncapped (m never passes 1).
    assert twin_lower_bound(load, 0, SLOT_S, TwinConfig(), max_nodes=1).node_hours == pytest.approx(
        twin_lower_bound(load, 0, SLOT_S, TwinConfig()).node_hours, rel=REL
    )


@settings(max_examples=30, deadline=None)
@given(
    load=st.lists(st.floats(0.0, 8.0), min_size=1, max_size=12).filter(lambda values: sum(values) > 0),
    deadline_slots=st.integers(0, 3),
    extra=st.floats(0.0, 4.0),
)
def test_a_cap_never_lowers_the_bound_and_the_smallest_feasible_cap_is_the_offline_one(load, deadline_slots, extra):
    from autoscaler.core.policies.offline import smallest_max_servers

    load = np.array(load)
    needed = smallest_max_servers(load, deadline_slots)
    free = twin_lower_bound(load, deadline_slots, SLOT_S, TwinConfig())
    capped = twin_lower_bound(load, deadline_slots, SLOT_S, TwinConfig(), max_nodes=needed * (1 + 1e-6) + extra)
    assert capped.node_hours >= free.node_hours * (1 - REL) - 1e-9
    assert capped.energy_kwh >= free.energy_kwh * (1 - REL) - 1e-9
    if needed > 1e-3:
        with pytest.raises(InfeasibleError):
            twin_lower_bound(load, deadline_slots, SLOT_S, TwinConfig(), max_nodes=needed * 0.99)


def test_co2_weights_each_slot_and_prices_a_boot_at_the_lowest_signal():
    config = TwinConfig()
    busy_slot_wh = BUSY_W * SLOT_S / 3600.0  # a node busy for a slot: 7.82 Wh
    boot_wh = IDLE_W * 330.0 / 3600.0  # 5.53 Wh
    bound = twin_lower_bound(np.array([1.0, 1.0]), 0, SLOT_S, config, g_per_kwh=np.array([100.0, 300.0]))
    assert bound.co2_kg == pytest.approx((busy_slot_wh * (100.0 + 300.0) + boot_wh * 100.0) / 1e6, rel=REL)
    # One slot of deferral: the work moves to the cleaner second slot
    deferred = twin_lower_bound(np.array([1.0, 0.0]), 1, SLOT_S, config, g_per_kwh=np.array([300.0, 100.0, 200.0]))
    assert deferred.co2_kg == pytest.approx((busy_slot_wh * 100.0 + boot_wh * 100.0) / 1e6, rel=REL)
    # A signal over the window only: the D slots after it count no CO2, as TwinBill.carbon_kg counts none uncovered
    window_only = twin_lower_bound(np.array([0.0, 1.0]), 1, SLOT_S, config, g_per_kwh=np.array([300.0, 100.0]))
    assert window_only.co2_kg == pytest.approx(0.0, abs=1e-9)


def test_no_work_costs_nothing():
    assert twin_lower_bound(np.zeros(5), 2, SLOT_S, TwinConfig(), g_per_kwh=np.ones(7)) == TwinBound(2, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_the_energy_bound_is_the_energy_lp_solved_on_its_own():
    # twin_lower_bound solves the node-hour LP once for both figures (their beta/e0 agree): the
    # energy LP solved separately must reach the same minimum.
    config = TwinConfig(provision_s=500.0, idle_power_w=40.0, busy_power_w=200.0)
    load = np.array([3.0, 0.0, 0.5, 4.0, 0.0, 0.0, 1.0])
    energy = CostParams(e0=40.0 * SLOT_S / 3600, e1=160.0 * SLOT_S / 3600, beta=40.0 * 500.0 / 7200)
    alone = plan(load, 2, energy)
    assert twin_lower_bound(load, 2, SLOT_S, config).energy_kwh == pytest.approx(schedule_cost(alone.capacity, alone.assigned, energy).total / 1000, rel=REL)


@pytest.mark.parametrize(
    ("arguments", "error", "shown"),
    [
        ({"g_per_kwh": np.array([100.0, math.nan, 100.0, 100.0])}, ConfigError, "g_per_kwh.*nan.*slot 1"),
        ({"g_per_kwh": np.array([100.0, -1.0, 100.0])}, ConfigError, "g_per_kwh.*slot 1"),
        ({"g_per_kwh": np.ones(5)}, ConfigError, r"g_per_kwh must have shape \(4,\).*\(3,\)"),
        ({"deadline_slots": -1}, ConfigError, "deadline_slots"),
        ({"deadline_slots": 1.5}, ConfigError, "deadline_slots"),
        ({"load": np.array([1.0, math.nan, 0.0])}, ConfigError, "slot 1"),
        ({"load": np.array([[1.0]])}, ConfigError, "n_slots"),
        ({"slot_s": -300.0}, ConfigError, "slot_s"),
    ],
)
def test_twin_lower_bound_refuses_bad_input_naming_it(arguments, error, shown):
    given_arguments = {"load": np.array([1.0, 0.0, 2.0]), "deadline_slots": 1, "slot_s": SLOT_S, "config": TwinConfig()} | arguments
    with pytest.raises(error, match=shown):
        twin_lower_bound(**given_arguments)


# -- twin_lower_bound: never above a schedule priced by hand ---------------------------------------

loads = st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0, 3.0, 1.7]), min_size=1, max_size=10).map(np.array)
configs = st.builds(TwinConfig, provision_s=st.sampled_from([0.0, 30.0, 330.0, 900.0]), idle_power_w=st.sampled_from([0.0, 60.3]), busy_power_w=st.sampled_from([93.87, 300.0]))


@settings(max_examples=40, deadline=None)
@given(loads, st.integers(0, 3), configs)
def test_no_hand_schedule_is_billed_less_than_the_bound(load, deadline_slots, config):
    bound = twin_lower_bound(load, deadline_slots, SLOT_S, config)
    padded = np.concatenate([load, np.zeros(deadline_slots)])
    follow = padded  # x = m = L: meets every deadline with no deferral
    whole = np.ceil(padded)  # whole nodes, x = L
    peak = np.full(load.shape, load.max())  # always at the peak over the window, x = L
    for capacity in (follow, whole, peak):
        assert bound.node_hours <= hand_node_hours(capacity, config) * (1 + REL) + 1e-12
        assigned = padded[: capacity.shape[0]]
        assert bound.energy_kwh <= hand_energy_kwh(capacity, assigned, config) * (1 + REL) + 1e-12
    busy_h = load.sum() * SLOT_S / 3600.0
    assert bound.busy_node_hours == pytest.approx(busy_h)
    assert bound.node_hours >= busy_h * (1 - REL)
    assert bound.energy_kwh >= config.busy_power_w * busy_h / 1000.0 * (1 - REL)
    assert bound.cost_usd == pytest.approx(bound.node_hours * config.price_per_node_hour)
    if deadline_slots:  # more time to do the work never costs more
        assert bound.node_hours <= twin_lower_bound(load, deadline_slots - 1, SLOT_S, config).node_hours * (1 + REL) + 1e-12


# -- twin_lower_bound: never above a run of the cluster twin --------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1500), st.floats(1, 900)), min_size=1, max_size=6),
    st.lists(st.one_of(st.integers(0, 4), st.none()), min_size=1, max_size=8),  # None: a node per step not ended
    st.sampled_from([0.0, 120.0, 330.0]),
    st.sampled_from([0.0, 200.0, 3600.0]),
    st.sampled_from([0.0, 0.5]),
    st.lists(st.floats(50, 500), min_size=40, max_size=40),
)
def test_no_run_of_the_twin_is_billed_less_than_the_bound_at_its_own_delay(runs, nodes_per_tick, provision_s, timeout_s, sigma, signal):
    """Any run meets the deadline of its worst start delay (in slots, rounded up): the bound at that
    D is below its bill in node-hours, kWh and kgCO2, the 60 s minimum and kills included."""
    config = TwinConfig(provision_s=provision_s, decommission_timeout_s=timeout_s, length_error_sigma=sigma)
    jobs = [job(f"j{i}", submit, length) for i, (submit, length) in enumerate(sorted(runs))]
    twin = ClusterTwin(config)
    added = 0
    for tick, nodes in enumerate(nodes_per_tick + [0] * 6):  # the daemon's slot loop: steps and a size at each tick
        now_s = tick * SLOT_S
        while added < len(jobs) and jobs[added].submit_s <= now_s:
            j = jobs[added]
            twin.add_step(now_s, f"s-{j.job_id}", j.job_id, j.length_s, j.submit_s, j.deadline_s)
            added += 1
        twin.resize(now_s, sum(step.end_s is None for step in twin.steps.values()) if nodes is None else nodes)
    end_s = twin.finish(twin.now_s)
    bill = twin.bill()
    steps = list(twin.steps.values())
    # a completed run starts at end - true length; killed runs before it are extra busy time
    delay_slots = math.ceil(max(step.end_s - step.true_s - step.submit_s for step in steps) / SLOT_S - 1e-9)
    n_slots = math.ceil(max(step.submit_s + step.true_s for step in steps) / SLOT_S) + 1
    load = twin_load(jobs, config, SLOT_S, 0.0, n_slots)
    horizon = n_slots + delay_slots
    g_per_kwh = np.resize(np.array(signal), max(horizon, math.ceil(end_s / SLOT_S) + 1))
    bound = twin_lower_bound(load, delay_slots, SLOT_S, config, g_per_kwh=g_per_kwh[:horizon])
    assert bound.busy_node_hours == pytest.approx(bill.work_node_s / 3600.0)
    assert bound.node_hours <= bill.billed_node_s / 3600.0 * (1 + REL)
    assert bound.energy_kwh <= bill.energy_wh / 1000.0 * (1 + REL)
    twin_kg, uncovered = bill.carbon_kg(0.0, SLOT_S, g_per_kwh)
    assert uncovered == 0 and bound.co2_kg <= twin_kg * (1 + REL)
