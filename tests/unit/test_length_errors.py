"""A job's start margin for its length's error: the nearest-rank quantile of finished runs' run time /
planned length, (r - 1) x length when r > 1, in two pools (learned lengths, lengths as submitted); and
its work factor, the mean of the same ratios (at least 1), which the nodes are planned with.
Every figure worked by hand."""

from __future__ import annotations

import dataclasses
import math

import pytest

from autoscaler.core.edf import need_s, start_by_slot
from autoscaler.core.errors import ConfigError
from autoscaler.core.learned import LengthErrors
from autoscaler.core.model import Job, StepSpec


class Grid:
    slot_s = 300.0
    epoch_s = 0.0


def job(length_s: float = 50.0, prior_length_s: float | None = None, deadline_s: float = 3600.0) -> Job:
    return Job("j", "etl", "t", 0.0, deadline_s, length_s, StepSpec(args=("true",)), prior_length_s=prior_length_s)


def test_the_margin_is_the_quantile_of_the_ratios_less_one_times_the_length():
    errors = LengthErrors(quantile=0.9, runs=100, min_runs=20)
    for i in range(1, 21):  # ratios 1, 2, ..., 20
        errors.record(100.0, 100.0 * i)
    assert errors.ratio() == 18.0  # ceil(0.9 x 20) = 18th smallest
    assert errors.margin_s(job(50.0)) == pytest.approx(17 * 50.0)
    assert errors.with_margin(job(50.0), 300.0).start_margin_s == pytest.approx(850.0)


def test_no_margin_below_the_runs_needed_or_when_lengths_run_short():
    errors = LengthErrors(quantile=0.9, runs=100, min_runs=3)
    errors.record(100.0, 300.0)
    errors.record(100.0, 300.0)
    assert errors.ratio() is None and errors.margin_s(job()) == 0.0
    short = LengthErrors(quantile=1.0, runs=100, min_runs=1)
    short.record(100.0, 80.0)  # ran 0.8 x its length: no room needed, none taken away
    assert short.ratio() == 0.8 and short.margin_s(job()) == 0.0
    rounding = LengthErrors(quantile=1.0, runs=100, min_runs=1)
    rounding.record(300.0, (1e9 + 300.0) - 1e9)  # a run's end - start in float: 300 to rounding
    assert rounding.margin_s(job(1e5)) == 0.0


def test_a_quantile_of_0_plans_no_margin():
    errors = LengthErrors(quantile=0, runs=10, min_runs=1)
    errors.record(100.0, 900.0)
    assert errors.ratio() is None and errors.margin_s(job()) == 0.0


def test_the_window_keeps_the_newest_runs():
    errors = LengthErrors(quantile=1.0, runs=2, min_runs=1)
    for ratio in (9.0, 2.0, 3.0):
        errors.record(10.0, 10.0 * ratio)
    assert errors.ratio() == 3.0  # the 9 x run fell out of the two newest


def test_learned_and_submitted_lengths_are_pools_of_their_own():
    errors = LengthErrors(quantile=1.0, runs=10, min_runs=1)
    errors.record(100.0, 400.0, learned=False)
    errors.record(100.0, 150.0, learned=True)
    assert errors.margin_s(job(100.0)) == pytest.approx(300.0)
    assert errors.margin_s(job(100.0, prior_length_s=80.0)) == pytest.approx(50.0)


@pytest.mark.parametrize("length_s, run_s", [(0.0, 10.0), (0.5, 10.0), (-5.0, 10.0), (10.0, math.nan), (math.inf, 10.0), (10.0, -1.0)])
def test_a_run_that_says_nothing_of_the_error_is_skipped(length_s, run_s):
    errors = LengthErrors(quantile=1.0, runs=10, min_runs=1)
    errors.record(length_s, run_s)
    assert errors.ratio() is None


@pytest.mark.parametrize("fields", [{"quantile": -0.1}, {"quantile": False}, {"quantile": 1.5}, {"runs": 0}, {"min_runs": 2.5}, {"runs": True}])
def test_bad_settings_are_refused(fields):
    with pytest.raises(ConfigError):
        LengthErrors(**fields)


def test_the_margin_moves_the_start_by_slot_earlier_and_nothing_else():
    # deadline 3600, length 600: start-by at 3000 s, slot 10; 1,200 s of margin: 1800 s, slot 6.
    plain = job(600.0)
    margined = LengthErrors(quantile=1.0, runs=10, min_runs=1)
    margined.record(600.0, 1800.0)  # ratio 3: margin 2 x 600
    held = margined.with_margin(plain, 300.0)
    assert (start_by_slot(plain, Grid), start_by_slot(held, Grid)) == (10, 6)
    assert (held.deadline_s, held.length_s) == (plain.deadline_s, plain.length_s)
    assert held.work_length_s == 600.0  # two slots: a job of a slot or more is planned at its length


def test_the_work_factor_is_the_mean_of_the_ratios():
    errors = LengthErrors(quantile=0.9, runs=100, min_runs=20)
    for i in range(1, 21):  # ratios 1, 2, ..., 20, of runs of different lengths: each counts once
        errors.record(10.0 * i, 10.0 * i * i)
    assert errors.work_factor() == pytest.approx(10.5)
    # A job of 1 s at 300-s slots: no ratio reaches 300, so its factor is the plain mean.
    planned = errors.with_margin(job(1.0), 300.0)
    assert planned.work_factor == pytest.approx(10.5) and planned.work_length_s == pytest.approx(10.5)
    assert planned.length_s == 1.0  # the plan stays; only the node time planned for it grows


@pytest.mark.parametrize(
    ("length_s", "factor"),
    [
        (50.0, (1 + 2 + 3 + 4 + 5 + 6 * 15) / 20),  # min(r, 300 / 50 = 6) over r = 1..20: 5.25
        (20.0, (sum(range(1, 15)) + 15 * 6) / 20),  # min(r, 15): 9.75
        (299.0, (1 + 19 * 300 / 299) / 20),  # min(r, 1.0033): every ratio but the first is capped
        (300.0, 1.0),  # a job of a slot or more keeps its length
        (900.0, 1.0),
        (0.0, 1.0),
    ],
)
def test_a_job_is_planned_at_its_expected_node_time_in_its_slot(length_s, factor):
    # The mean of min(r, slot / length) over the pool's ratios 1, 2, ..., 20, by hand.
    errors = LengthErrors(quantile=0.9, runs=100, min_runs=20)
    for i in range(1, 21):
        errors.record(10.0, 10.0 * i)
    assert errors.job_work_factor(job(length_s), 300.0) == pytest.approx(factor)


def test_runs_shorter_than_planned_never_plan_a_job_below_its_length():
    errors = LengthErrors(quantile=1.0, runs=10, min_runs=1)
    errors.record(100.0, 50.0)
    assert errors.job_work_factor(job(50.0), 300.0) == 1.0


def test_the_work_factor_is_1_below_the_runs_needed_when_off_or_when_runs_are_short():
    few = LengthErrors(quantile=0.9, runs=100, min_runs=3)
    few.record(100.0, 300.0)
    few.record(100.0, 300.0)
    assert few.work_factor() == 1.0
    off = LengthErrors(quantile=0, runs=10, min_runs=1)
    off.record(100.0, 900.0)
    assert off.work_factor() == 1.0 and off.with_margin(job(), 300.0).work_length_s == 50.0
    short = LengthErrors(quantile=1.0, runs=10, min_runs=1)
    short.record(100.0, 50.0)  # ran half its plan: the nodes are never planned below the plan
    assert short.work_factor() == 1.0
    rounding = LengthErrors(quantile=1.0, runs=10, min_runs=1)
    rounding.record(300.0, (1e9 + 300.0) - 1e9)
    assert rounding.work_factor() == 1.0


def test_the_work_factor_keeps_the_newest_runs_and_its_pool():
    errors = LengthErrors(quantile=1.0, runs=3, min_runs=1)
    for ratio in (9.0, 9.0, 9.0, 9.0, 1.0, 2.0, 3.0):  # past the window twice: the running sum stays the newest three's
        errors.record(10.0, 10.0 * ratio)
    errors.record(10.0, 40.0, learned=True)
    assert errors.work_factor() == pytest.approx(2.0)
    assert errors.work_factor(learned=True) == pytest.approx(4.0)
    assert errors.with_margin(job(10.0, prior_length_s=8.0), 300.0).work_factor == pytest.approx(4.0)


def test_a_slot_packs_jobs_by_their_planned_length_whatever_their_work_factor():
    # need_s: min(length, slot); the factor plans m_t, not how many jobs a node-slot is handed.
    assert need_s(dataclasses.replace(job(100.0), work_factor=2.0), 300.0) == pytest.approx(100.0)
    assert need_s(dataclasses.replace(job(400.0), work_factor=2.0), 300.0) == pytest.approx(300.0)
    assert dataclasses.replace(job(100.0), work_factor=2.0).work_length_s == pytest.approx(200.0)


def test_a_step_released_or_running_is_counted_for_its_expected_node_time():
    # running_need_s: what is left of length x factor after the slot's start, at most a slot. Released at
    # 0 (PENDING in EMR), factor 2, planned 100 s: 200 s in the slot from 0, none from 300; started at
    # 250 and seen RUNNING: 150 s left at 300. Past its expected end it is counted again, 200 s.
    from autoscaler.core.model import JobState
    from autoscaler.core.release import running_need_s

    pending = dataclasses.replace(job(100.0), work_factor=2.0, state=JobState.RELEASED, released_s=0.0)
    assert running_need_s(pending, 0.0, 300.0) == pytest.approx(200.0)
    running = dataclasses.replace(pending, state=JobState.RUNNING, run_start_s=250.0)
    assert running_need_s(running, 300.0, 300.0) == pytest.approx(150.0)
    assert running_need_s(running, 600.0, 300.0) == pytest.approx(200.0)
