"""repeat_days: a day-long trace as a multi-day load of recurring job names, checked by hand."""

from __future__ import annotations

import pytest

from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Trace, TraceJob
from autoscaler.core.recurring import repeat_days


def trace() -> Trace:
    return Trace("t.tsv", (TraceJob("a", 10.0, 10.0, 1.0, 2.0, 3.0), TraceJob("b", 50.0, 40.0, 4.0, 5.0, 6.0), TraceJob("late", 100.0, 50.0, 0, 0, 0)))


def test_each_day_repeats_the_days_jobs_under_their_name():
    tiled, names = repeat_days(trace(), 3, 100.0)
    assert [(j.job_id, j.submit_s) for j in tiled.jobs] == [
        ("a-day1", 10.0), ("b-day1", 50.0), ("a-day2", 110.0), ("b-day2", 150.0), ("a-day3", 210.0), ("b-day3", 250.0),
    ]  # "late" is submitted at the day's end: not in its day
    assert names == {"a-day1": "a", "b-day1": "b", "a-day2": "a", "b-day2": "b", "a-day3": "a", "b-day3": "b"}
    assert tiled.jobs[3].map_input_bytes == 4.0 and tiled.path == "t.tsv"


def test_one_day_is_the_trace_as_it_is():
    assert repeat_days(trace(), 1, 100.0) == (trace(), {})


@pytest.mark.parametrize("days", [0, 367, 2.5, True])
def test_days_out_of_range_are_refused(days):
    with pytest.raises(ConfigError, match=r"^`days`: expected a whole number of days in 1..366"):
        repeat_days(trace(), days, 100.0)
