"""A job's start margin for its length's error: the nearest-rank quantile of finished runs' run time /
planned length, (r - 1) x length when r > 1, in two pools (learned lengths, lengths as submitted).
Every figure worked by hand."""

from __future__ import annotations

import math

import pytest

from autoscaler.core.edf import start_by_slot
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
    assert errors.with_margin(job(50.0)).start_margin_s == pytest.approx(850.0)


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
    held = margined.with_margin(plain)
    assert (start_by_slot(plain, Grid), start_by_slot(held, Grid)) == (10, 6)
    assert (held.deadline_s, held.length_s) == (plain.deadline_s, plain.length_s)
