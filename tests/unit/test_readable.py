"""Numbers, durations and times as people write them."""

from __future__ import annotations

import pytest

from autoscaler.core.readable import duration_text, number_text, utc_text


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0.5, "0.5 s"), (45, "45 s"), (59.4, "59 s"), (59.6, "1 min"), (300, "5 min"), (330, "5 min 30 s"),
        (3600, "1 h"), (15_000, "4 h 10 min"), (21_300, "5 h 55 min"), (87_000, "24 h 10 min"),
        (3 * 86400 + 4 * 3600, "3 days 4 h"), (2.18273e8, "6.9 years"), (-5400, "-1 h 30 min"),
    ],
)  # fmt: skip
def test_durations_read_as_written(seconds, text):
    assert duration_text(seconds) == text


@pytest.mark.parametrize(
    "value, text",
    [(0, "0"), (10_000_000, "10,000,000"), (1e6, "1,000,000"), (86400.0, "86,400"), (0.5, "0.5"), (1234.5678, "1,234.57"),
     (2.18273e8 + 0.5, "218,273,000")],
)  # fmt: skip
def test_numbers_have_no_exponent(value, text):
    assert number_text(value) == text


def test_utc_text_to_the_minute_and_out_of_range():
    assert utc_text(1_795_910_400.0) == "2026-11-29T00:00Z"
    assert utc_text(1e20) == "1e+20 s (Unix time, past year 9999)"


def test_one_utc_formatter_writes_iso_and_the_reports_layout_and_never_raises():
    moment = 1_764_583_200.0  # 2025-12-01T10:00:00Z
    assert utc_text(moment) == "2025-12-01T10:00Z"
    assert utc_text(moment + 5, precision="second") == "2025-12-01T10:00:05Z"
    assert utc_text(moment, layout="text") == "2025-12-01 10:00 UTC"
    assert utc_text(253_402_300_800.0, layout="text") == "2.53402e+11 s (Unix time, past year 9999)"


def test_a_duration_of_a_million_years_or_more_is_written_with_an_exponent_not_300_digits():
    assert duration_text(1e308) == "3.17e+300 years"
    assert duration_text(1e6 * 365.25 * 86400 * 0.999) == "999,000 years"
