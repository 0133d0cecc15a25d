"""Learned lengths: the nearest-rank quantile of a name's past runs, never a run that ended later than
the time the job is planned at. Checked against hand-worked cases and a brute force over the runs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.errors import ConfigError
from autoscaler.core.learned import nearest_rank, planned, runs_ended_by
from autoscaler.core.model import Job, StepSpec


def job(length_s: float = 600.0) -> Job:
    return Job("j1", "nightly", "analytics", 0.0, 7200.0, length_s, StepSpec(args=("true",)))


def test_nearest_rank_by_hand():
    six = [120.0, 60.0, 300.0, 240.0, 180.0, 90.0]  # sorted: 60 90 120 180 240 300
    assert nearest_rank(six, 0.9) == 300.0  # ceil(5.4) = 6th
    assert nearest_rank(six, 0.5) == 120.0  # ceil(3.0) = 3rd
    assert nearest_rank(six, 0.1) == 60.0  # ceil(0.6) = 1st
    assert nearest_rank([10.0 * i for i in range(1, 11)], 0.9) == 90.0  # ceil(9.0) = 9th, not 10th
    assert nearest_rank([42.0], 0.9) == 42.0


def test_planned_keeps_the_prior_and_says_where_the_length_came_from():
    learned = planned(job(600.0), [700.0, 650.0, 1300.0], 0.9, prior_source="given")
    assert (learned.length_s, learned.prior_length_s, learned.length_source) == (1300.0, 600.0, "p90 of 3 runs")
    assert learned.submitted_length_s == 600.0
    one = planned(job(600.0), [650.0], 0.5)
    assert (one.length_s, one.length_source) == (650.0, "p50 of 1 run")
    unseen = planned(job(600.0), [], 0.9, prior_source="size model")
    assert (unseen.length_s, unseen.prior_length_s, unseen.length_source) == (600.0, None, "size model")
    # Planned again (a resubmission), the prior stays the length it was submitted with.
    again = planned(learned, [700.0], 0.9)
    assert (again.length_s, again.prior_length_s) == (700.0, 600.0)


@pytest.mark.parametrize("quantile", [0.0, -0.1, 1.5, math.nan, True])
def test_a_quantile_outside_0_1_is_refused(quantile):
    with pytest.raises(ConfigError, match=r"length_quantile: expected a quantile in \(0, 1\]"):
        planned(job(), [1.0], quantile)


def test_a_run_time_that_is_not_a_length_is_refused():
    with pytest.raises(ConfigError, match=r"job 'j1': run times must be finite numbers of seconds >= 0, got \[-1.0\]"):
        planned(job(), [5.0, -1.0], 0.9)


runs_strategy = st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 3_000)).map(lambda pair: (float(pair[0]), float(pair[0] + pair[1]))),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(runs=runs_strategy, plan_at=st.integers(-10, 14_000).map(float), quantile=st.sampled_from([0.5, 0.9, 0.95, 1.0]), limit=st.integers(1, 60))
def test_the_learned_length_never_uses_a_run_that_ended_after_it_is_planned(runs, plan_at, quantile, limit):
    eligible = [(end - start, end) for start, end in runs if end <= plan_at]
    # Brute force: the newest `limit` eligible runs; the quantile by counting, not by indexing a sort.
    eligible.sort(key=lambda run: run[1])
    kept = [length for length, _ in eligible[-limit:]]
    lengths = runs_ended_by(runs, plan_at, limit)
    assert sorted(lengths) == sorted(kept)
    result = planned(job(600.0), lengths, quantile)
    if not kept:
        assert result.length_s == 600.0 and result.prior_length_s is None
        return
    # The nearest-rank quantile is the least run time with at least q n of the runs at or below it.
    wanted = min(v for v in kept if sum(1 for w in kept if w <= v) >= quantile * len(kept) - 1e-9)
    assert result.length_s == wanted
    assert any(length == result.length_s for start, end in runs if end <= plan_at for length in [end - start])
