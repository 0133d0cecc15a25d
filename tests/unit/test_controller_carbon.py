"""hold+carbon in the slot controller: the window handed to tick, its state, its words, its fallback."""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest
from slot_simulation import simulate_slots

from autoscaler.core.controller import (
    CarbonWindow,
    ControllerConfig,
    Decision,
    PolicyState,
    SignalUnavailable,
    explain,
    rebuild_cause,
    start_by_slot,
    tick,
)
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import CostParams, Job, StepSpec
from autoscaler.core.policies.carbon import CarbonState, window_slots

TAU = 300.0


def job(job_id: str, submit_s: float, length_s: float, deadline_s: float) -> Job:
    return Job(job_id, job_id, "t", submit_s, deadline_s, length_s, StepSpec(args=("true",)))


def window_of(values, unit="gCO2eq/kWh", reference=None) -> CarbonWindow:
    values = np.asarray(values, dtype=float)
    return CarbonWindow(values, float(values.mean()) if reference is None else reference, unit, float(values[0]))


def simulate(jobs: list[Job], config: ControllerConfig, slots: int, windows=None):
    """Feed jobs in at their submit slot, tick every slot (``windows(t)``: the carbon window of slot t),
    run released jobs for their length. Returns the decisions, each job's release slot and the last state."""
    run = simulate_slots(jobs, config, slots, windows=windows)
    return run.decisions, run.released_in, run.state


def random_jobs(seed: int, n: int, slots: int, deadline_slots: int) -> list[Job]:
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        submit_s = rng.uniform(0, slots * TAU * 0.7)
        length_s = rng.choice([60.0, 300.0, 700.0, 1500.0])
        jobs.append(job(f"j{i:03d}", submit_s, length_s, submit_s + length_s + deadline_slots * TAU))
    return jobs


@pytest.mark.parametrize(("seed", "deadline_slots"), [(7, 3), (11, 1), (5, 6)])
def test_a_constant_window_decides_as_hold_does_slot_for_slot(seed, deadline_slots):
    jobs = random_jobs(seed, 60, 40, deadline_slots)
    blind = ControllerConfig(policy="hold", deadline_slots=deadline_slots, slot_s=TAU)
    aware = dataclasses.replace(blind, carbon=True)
    flat = window_of([412.0] * window_slots(deadline_slots))
    hold, hold_released, _ = simulate(jobs, blind, 40)
    carbon, carbon_released, state = simulate(jobs, aware, 40, lambda t: flat)
    assert [(d.capacity, d.assigned, d.nodes, d.release) for d in carbon] == [(d.capacity, d.assigned, d.nodes, d.release) for d in hold]
    assert max(d.capacity for d in hold) > 1  # the comparison is not between two idle clusters
    assert carbon_released == hold_released
    assert {d.carbon_mode for d in carbon} == {"flat"}
    assert all(d.reason == h.reason for d, h in zip(carbon, hold))
    assert state.carbon is not None and state.hold is None
    assert state.carbon.modes == (0, 40, 0, 0, 0)


def test_a_window_whose_gains_are_inside_its_band_decides_as_hold_and_says_why():
    # The window shows a clean slot 20 % below now, but the forecast's band is 10 % of the value:
    # three bands (30 %) swallow the gain, so every slot is hold's decision, in mode "hedged".
    deadline_slots = 3
    jobs = random_jobs(9, 50, 30, deadline_slots)
    blind = ControllerConfig(policy="hold", deadline_slots=deadline_slots, slot_s=TAU)
    aware = dataclasses.replace(blind, carbon=True)
    n = window_slots(deadline_slots)
    values = np.full(n, 400.0)
    values[2] = 320.0
    band = np.full(n, 40.0)
    band[0] = 0.0
    hedged = CarbonWindow(values, 400.0, "gCO2eq/kWh", 400.0, "grid.csv", 0, n - 1, band)
    hold, hold_released, _ = simulate(jobs, blind, 30)
    carbon, carbon_released, state = simulate(jobs, aware, 30, lambda t: hedged)
    assert [(d.capacity, d.assigned, d.nodes) for d in carbon] == [(d.capacity, d.assigned, d.nodes) for d in hold]
    assert carbon_released == hold_released and max(d.capacity for d in hold) > 1
    assert {d.carbon_mode for d in carbon} == {"hedged"}
    assert "by more than 3 of the forecast's recent errors" in explain(carbon[5])
    # Without the band the same window moves work: the clean slot is believed.
    unhedged = dataclasses.replace(hedged, band=None)
    believed, _, _ = simulate(jobs, aware, 30, lambda t: unhedged)
    assert "carbon" in {d.carbon_mode for d in believed}


def test_no_signal_decides_as_hold_and_says_why():
    deadline_slots = 2
    jobs = random_jobs(3, 30, 20, deadline_slots)
    blind = ControllerConfig(policy="hold", deadline_slots=deadline_slots, slot_s=TAU)
    aware = dataclasses.replace(blind, carbon=True)
    missing = SignalUnavailable("stale", "the last good read of carbon.csv is 2 h 5 min old, more than max_staleness_s = 2 h")
    hold, _, _ = simulate(jobs, blind, 20)
    carbon, _, _ = simulate(jobs, aware, 20, lambda t: missing)
    assert [(d.capacity, d.assigned, d.nodes, d.release) for d in carbon] == [(d.capacity, d.assigned, d.nodes, d.release) for d in hold]
    assert {d.carbon_mode for d in carbon} == {"no_signal"}
    assert {d.carbon_fallback for d in carbon} == {"stale"}
    assert all(d.carbon_value is None for d in carbon)
    policy_bound = [d for d in carbon if d.reason == "no_signal"]
    assert policy_bound and all("no signal for this slot (stale: the last good read of carbon.csv is 2 h 5 min old" in d.why for d in policy_bound)
    # A slot a node rule bound still says the signal was missing.
    assert all("no signal for this slot (stale" in d.why for d in carbon if d.nodes or d.capacity)
    # No window at all (None) is a fallback too, named as such.
    decision, _ = tick(0.0, [], PolicyState(), aware)
    assert (decision.carbon_mode, decision.carbon_fallback) == ("no_signal", "not_given")


def test_a_dirty_slot_with_a_clean_one_ahead_defers_and_no_job_is_late():
    # D = 4: four 1-slot jobs at slot 0, due to start by slot 4. hold runs them at r_0 = 4/5 = 0.8
    # (the flat rate over the 5 slots); hold+carbon sees 500 g now and 100 g in slot 3 and waits.
    deadline_slots = 4
    jobs = [job(f"j{i}", 10.0 * i, 300.0, 10.0 * i + 300.0 + deadline_slots * TAU) for i in range(4)]
    signal = [500.0, 500.0, 500.0, 100.0] + [500.0] * 20

    def windows(t):
        return window_of(signal[t : t + window_slots(deadline_slots)], reference=float(np.mean(signal)))

    # beta = 0.1 server-slots: a restart is cheap next to a slot at 5x the clean one's cost.
    blind = ControllerConfig(policy="hold", deadline_slots=deadline_slots, slot_s=TAU, release_margin_slots=0, cost=CostParams(e0=1.0, beta=0.1))
    aware = dataclasses.replace(blind, carbon=True)
    hold, _, _ = simulate(jobs, blind, 4)
    carbon, released_in, _ = simulate(jobs, aware, 4, windows)
    assert hold[0].capacity == pytest.approx(0.8)
    assert carbon[0].capacity < hold[0].capacity - 0.5
    assert carbon[0].reason == "carbon" and carbon[0].carbon_mode == "carbon"
    assert carbon[0].carbon_cheapest_in_slots == 3
    assert carbon[0].carbon_weight_now == pytest.approx(500.0 / np.mean(signal))
    assert carbon[0].carbon_weight_min == pytest.approx(100.0 / np.mean(signal))
    assert carbon[0].carbon_value == 500.0 and carbon[0].carbon_unit == "gCO2eq/kWh"
    assert "500 gCO2eq/kWh now" in carbon[0].why
    assert "the cleanest slot in the next 1 h 5 min is in 15 min" in carbon[0].why
    # The clean slot runs the work; every job goes out by its start-by slot (C1), none late.
    assert carbon[3].capacity >= 3.9
    assert sorted(released_in) == [j.job_id for j in jobs]
    assert all(released_in[j.job_id] <= start_by_slot(j, aware) for j in jobs)
    assert all(d.late == () and d.missed == () for d in carbon)
    # Every unit of work that arrived ran (a job submitted past the boundary counts two slots' units).
    assert sum(d.assigned for d in carbon) == pytest.approx(sum(d.load for d in carbon))


def test_the_cleanest_slot_being_now_is_said_so():
    config = ControllerConfig(policy="hold", deadline_slots=1, slot_s=TAU, carbon=True)
    decision, _ = tick(0.0, [job("a", 0.0, 300.0, 900.0)], PolicyState(), config, window_of([100.0, 300.0, 300.0, 300.0]))
    assert decision.reason in ("carbon", "due_jobs")
    assert decision.carbon_cheapest_in_slots == 0
    assert "this slot is the cleanest in the next 20 min" in decision.why
    price, _ = tick(0.0, [job("a", 0.0, 300.0, 900.0)], PolicyState(), config, window_of([0.1, 0.3, 0.3, 0.3], unit="$/kWh"))
    assert "this slot is the cheapest" in price.why


def test_state_and_decision_read_back_and_old_ones_still_load():
    config = ControllerConfig(policy="hold", deadline_slots=2, slot_s=TAU, carbon=True)
    jobs = [job("a", 0.0, 600.0, 1800.0), job("b", 5.0, 300.0, 1500.0)]
    decision, state = tick(0.0, jobs, PolicyState(), config, window_of([400.0, 300.0, 200.0, 300.0, 400.0, 400.0, 400.0]))
    document = json.loads(json.dumps(state.to_json()))
    assert PolicyState.from_json(document) == state
    assert isinstance(PolicyState.from_json(document).carbon, CarbonState)
    old = {k: v for k, v in document.items() if k != "carbon"}
    assert PolicyState.from_json(old).carbon is None
    line = json.loads(json.dumps(decision.to_json(), allow_nan=False))
    assert Decision.from_json(line) == decision
    assert line["carbon_mode"] == "carbon" and line["carbon_unit"] == "gCO2eq/kWh"
    old_line = {k: v for k, v in line.items() if not k.startswith("carbon_")}
    read = Decision.from_json(old_line)
    assert (read.carbon_mode, read.carbon_value, read.carbon_cheapest_in_slots) == ("", None, None)
    assert "hold+carbon (carbon): signal 400 gCO2eq/kWh now" in explain(decision)


def test_toggling_carbon_rebuilds_and_a_gap_restarts_the_carbon_state():
    blind = ControllerConfig(policy="hold", deadline_slots=2, slot_s=TAU)
    aware = dataclasses.replace(blind, carbon=True)
    assert blind.policy_key != aware.policy_key and aware.policy_key.endswith("/carbon")
    jobs = [job("a", 0.0, 3000.0, 4000.0)]
    _, state = tick(0.0, jobs, PolicyState(), blind)
    assert rebuild_cause(state, 1, aware) == "policy"
    decision, state = tick(TAU, jobs, state, aware, window_of([300.0] * 7))
    assert "the policy changed" in decision.why and state.carbon is not None
    before = state.carbon
    decision, after = tick(5 * TAU, jobs, state, aware, window_of([300.0] * 7))
    assert "3 slots went undecided" in decision.why
    # Restarted, as hold is across a gap: the queue rebuilt from the active job, what hold learned kept.
    restarted = before.restarted()
    assert restarted.previous == 0.0 and not restarted.queue.any()
    assert after.carbon.modes == (0, before.modes[1] + 1, 0, 0, 0)
    assert after.carbon.hold.recent_load.shape == before.hold.recent_load.shape


def test_only_hold_has_a_carbon_aware_variant():
    with pytest.raises(ConfigError, match="only policy 'hold' has a carbon-aware variant"):
        ControllerConfig(policy="gcp", carbon=True)
    with pytest.raises(ConfigError, match="must be 7 finite values"):
        tick(0.0, [], PolicyState(), ControllerConfig(policy="hold", deadline_slots=2, carbon=True), window_of([1.0, 2.0, 3.0]))
