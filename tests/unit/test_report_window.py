"""The report's window of whole slots (``reporting.report_window``), worked out by hand."""

from __future__ import annotations

import pytest

from autoscaler.app.reporting import report_window
from autoscaler.core.errors import ConfigError

NOW_S = 1_800_000_000.0 + 3_000.0  # 2027-01-15T08:50Z, 3,000 s after a slot boundary of 60 s


def test_since_an_hour_until_now_takes_the_whole_minutes_of_the_last_hour():
    first, end = report_window("1h", "0m", NOW_S, 60.0)
    assert (first, end) == ((NOW_S - 3600) // 60, NOW_S // 60)


def test_since_without_until_says_until_is_the_start_of_today_and_how_to_say_now():
    # An hour ago is after the start of today (08:50Z - 1 h), so no slot lies between them.
    with pytest.raises(ConfigError, match=r"no whole slot of 1 min .*\(--until, not given, is the start of today, UTC; --until 0m is now\)"):
        report_window("1h", None, NOW_S, 60.0)
    with pytest.raises(ConfigError) as given:
        report_window("1h", "2h", NOW_S, 60.0)
    assert "not given" not in str(given.value)
