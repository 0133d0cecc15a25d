"""The controller plans all of every job's work, however long the job (issue 20, finding 5).

A job counted one unit in each slot it runs only up to 10 x max_deadline_slots + 1 slots: with
slot_s = 7, `run --replay A --policy gcp-u` planned 23 % less work than `replay`, though
max_deadline_slots is a setting of gcp alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from slot_simulation import simulate_slots, workload_a_jobs

from autoscaler.core.controller import ControllerConfig, PolicyState, tick
from autoscaler.core.model import CostParams, Job, StepSpec
from autoscaler.core.policies import plan
from autoscaler.core.workload import workload_from_trace

TAU = 300.0


def job(job_id: str, submit_s: float, length_s: float, deadline_s: float) -> Job:
    return Job(job_id, job_id, "t", submit_s, deadline_s, length_s, StepSpec(args=("true",)))


@pytest.mark.parametrize("policy", ["gcp-u", "hold", "vfw", "follow", "gcp"])
def test_a_30_slot_job_counts_30_units_whatever_max_deadline_slots_says(policy):
    # One job of 30 slots (just under 30 x 300 s) at slot 0: one unit in each of slots 0..29, by hand.
    # With max_deadline_slots = 1 the work stopped after 10 x 1 + 1 = 11 units.
    config = ControllerConfig(policy=policy, deadline_slots=2, slot_s=TAU, max_deadline_slots=1, max_nodes=10**6)
    run = simulate_slots([job("long", 0.0, 30 * TAU - 1.0, 40 * TAU)], config, 40)
    loads = [d.load for d in run.decisions]
    assert sum(loads) == pytest.approx(30.0)
    assert loads[:30] == [1.0] * 30 and not any(loads[30:])


def test_the_work_of_a_long_job_survives_a_restart_of_the_controller():
    # The state saved after slot 4 (to JSON and back, as the store keeps it) still holds the 25 units to come.
    config = ControllerConfig(policy="gcp-u", deadline_slots=2, slot_s=TAU, max_deadline_slots=1, max_nodes=10**6)
    queue = [job("long", 0.0, 30 * TAU - 1.0, 40 * TAU)]
    state = PolicyState()
    loads = []
    for t in range(40):
        decision, state = tick(t * TAU, queue, state, config)
        state = PolicyState.from_json(state.to_json())
        loads.append(decision.load)
        if decision.release:
            queue = [dataclasses.replace(queue[0], state="running", released_s=t * TAU)]
    assert sum(loads) == pytest.approx(30.0)


def test_workload_a_through_the_controller_plans_the_replays_work_with_a_small_max_deadline_slots():
    # The independent method: autoscaler replay's active curve L_t (a difference array over the
    # trace, cut only at the window's end) and gcp-u's plan of it. max_deadline_slots = 1 cut every
    # job at 11 slots (55 minutes), a part of Workload A's work.
    deadline_slots = 2
    trace, jobs = workload_a_jobs(deadline_slots, TAU)
    config = ControllerConfig(policy="gcp-u", deadline_slots=deadline_slots, slot_s=TAU, max_deadline_slots=1, max_nodes=10**6)
    run = simulate_slots(jobs, config, 288 + deadline_slots)
    workload = workload_from_trace(trace)
    np.testing.assert_allclose([d.load for d in run.decisions][:288], workload.active, atol=1e-9)
    expected = plan("gcp-u", workload.active, deadline_slots, CostParams())
    np.testing.assert_allclose([d.capacity for d in run.decisions], expected.capacity, atol=1e-9)
