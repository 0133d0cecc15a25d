"""hold in the daemon plans each job's work to the job's own start-by slot, not to D from its
submission: long deadlines are deferred further than short ones, and r_t comes from the real queue."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slot_simulation import simulate_slots

from autoscaler.core.controller import ControllerConfig, job_units
from autoscaler.core.edf import start_by_slot
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.policies.hold import HoldState, hold_step

SLOT_S = 300.0


def job(job_id: str, submit_s: float, deadline_s: float, length_s: float = 60.0) -> Job:
    return Job(job_id=job_id, name=job_id, tenant="t", submit_s=submit_s, deadline_s=deadline_s, length_s=length_s, step=StepSpec(args=("true",)))


def test_a_jobs_units_wait_to_its_start_by_slot_and_a_traces_job_gets_d_exactly():
    config = ControllerConfig(policy="hold", deadline_slots=2, max_nodes=10)
    # Submitted in slot 1 with 12 h of slack: start-by slot 1 + 144 - 1 (its 60 s must fit before the deadline).
    long_job = job("long", 400.0, 400.0 + 12 * 3600)
    assert job_units(long_job, config, 1) == (1, 2, start_by_slot(long_job, config) - 1)
    assert start_by_slot(long_job, config) - 1 == 144
    # A trace's job: deadline = submit + length + D slots -> deadline index D, as the replay plans it.
    trace_job = job("trace", 400.0, 400.0 + 60.0 + 2 * SLOT_S)
    assert job_units(trace_job, config, 1)[2] == 2
    # Past max_deadline_slots (288), the deadline is planned as max_deadline_slots.
    assert job_units(job("week", 0.0, 7 * 86400.0), config, 0)[2] == config.max_deadline_slots == config.nu


def test_hold_step_with_all_work_at_d_decides_as_with_the_scalar_load():
    config = ControllerConfig(policy="hold", deadline_slots=3)
    rng = np.random.default_rng(3)
    narrow = HoldState.empty(3, config.cost)
    wide = HoldState.empty(3, config.cost, queue_slots=20)
    for load in rng.exponential(4.0, 60) * (rng.random(60) < 0.6):
        arrivals = np.zeros(21)
        arrivals[3] = load
        m1, x1, narrow = hold_step(narrow, float(load), 3, config.cost)
        m2, x2, wide = hold_step(wide, arrivals, 3, config.cost)
        assert (m2, x2) == pytest.approx((m1, x1), abs=1e-12)


def test_mixed_deadlines_defer_the_long_jobs_further_and_ask_for_fewer_nodes():
    config = ControllerConfig(policy="hold", deadline_slots=2, max_nodes=100)
    short = [job(f"s{i}", 10.0, 10.0 + 1800.0) for i in range(12)]  # 30 min
    long = [job(f"l{i}", 10.0, 10.0 + 12 * 3600.0) for i in range(12)]  # 12 h
    run = simulate_slots(short + long, config, 160)
    released = run.released_in
    assert len(released) == 24
    assert max(released[j.job_id] for j in short) <= start_by_slot(short[0], config)
    assert all(released[j.job_id] <= start_by_slot(j, config) for j in short + long)
    # The long jobs wait longer than the short ones, on average.
    assert np.mean([released[j.job_id] for j in long]) > np.mean([released[j.job_id] for j in short]) + 5
    # r_t from the real queue: 12 units due within 6 slots (and 12 more within 144) need 12/6 = 2, not
    # the 24/3 = 8 that planning every unit to D = 2 would ask for.
    assert run.decisions[0].capacity == pytest.approx(2.0, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(
    specs=st.lists(
        st.tuples(st.floats(0, 3000), st.sampled_from([600.0, 1800.0, 7200.0, 43200.0]), st.floats(1, 900)), min_size=1, max_size=25
    ),
    deadline_slots=st.integers(1, 4),
)
def test_no_job_is_released_after_its_own_start_by_slot_when_the_cap_allows(specs, deadline_slots):
    config = ControllerConfig(policy="hold", deadline_slots=deadline_slots, max_nodes=1000, release_margin_slots=0)
    jobs = [job(f"j{i}", submit, submit + slack + length, length) for i, (submit, slack, length) in enumerate(specs)]
    horizon = max(start_by_slot(j, config) for j in jobs) + 2
    run = simulate_slots(jobs, config, horizon)
    for j in jobs:
        assert run.released_in[j.job_id] <= max(start_by_slot(j, config), math.floor(j.submit_s / SLOT_S)), j


def test_the_reason_names_the_job_whose_deadline_binds():
    config = ControllerConfig(policy="hold", deadline_slots=2, max_nodes=100)
    short = [job(f"s{i}", 10.0, 10.0 + 1800.0) for i in range(12)]
    long = [job(f"l{i}", 10.0, 10.0 + 12 * 3600.0) for i in range(12)]
    first = simulate_slots(short + long, config, 1).decisions[0]
    # 12 units due by the short jobs' start-by slot 5 set r_t = 12/6: the last of them in EDF order binds.
    assert first.reason == "deadlines"
    last_short = max(short, key=lambda j: (j.deadline_s, j.submit_s, j.job_id)).job_id
    assert f"the deadline that binds: job {last_short!r}, start-by slot 5" in first.why
