"""The risk figures of carbon deferral against follow, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.core.carbon_risk import daily_kg, joined_to_follow_days, risk_against_follow
from autoscaler.core.errors import ConfigError


def test_ten_days_one_of_them_above_follow():
    # Follow 100 kg every day; the run 90 on eight days, 80 on one, 104 on one.
    risk = risk_against_follow([90] * 8 + [80, 104], [100] * 10)
    assert risk.days == 10
    assert risk.expected_cut == pytest.approx((8 * 0.10 + 0.20 - 0.04) / 10)  # 0.096
    assert risk.worst_day_regret == pytest.approx(0.04)
    assert risk.days_above_follow == 1 and risk.share_above_follow == pytest.approx(0.1)
    assert risk.worst_tenth_cut == pytest.approx(-0.04)  # ceil(10 x 10 %) = 1 day: the worst


def test_the_worst_tenth_of_twenty_five_days_is_three_days_and_a_run_always_below_has_a_negative_regret():
    follow = np.full(25, 50.0)
    kg = np.full(25, 45.0)
    kg[[3, 7, 11]] = [49.0, 48.0, 47.0]  # cuts 2 %, 4 %, 6 %: the three worst
    risk = risk_against_follow(kg, follow)
    assert risk.worst_tenth_cut == pytest.approx(0.04)
    assert risk.worst_day_regret == pytest.approx(-0.02) and risk.days_above_follow == 0


def test_bad_input_is_refused():
    with pytest.raises(ConfigError, match="one length"):
        risk_against_follow([1.0, 2.0], [1.0])
    with pytest.raises(ConfigError, match="one length"):
        risk_against_follow([], [])
    with pytest.raises(ConfigError, match="finite"):
        risk_against_follow([float("nan")], [1.0])
    with pytest.raises(ConfigError, match="day 2"):
        risk_against_follow([1.0, 1.0], [1.0, 0.0])


def test_daily_kg_from_cumulative_slots_with_a_partial_last_day():
    # 3 slots a day, 1 kg a slot, then 2 kg a slot: days of 3, 3 + 2 + 2... as summed by hand.
    cumulative = np.cumsum([1, 1, 1, 1, 2, 2, 2])
    assert daily_kg(cumulative, 3).tolist() == [3.0, 5.0, 2.0]
    assert daily_kg([], 3).size == 0
    with pytest.raises(ConfigError):
        daily_kg([1.0], 0)


def test_days_follow_emitted_nothing_on_join_the_day_before_it():
    # Follow: nothing on day 0 (no load yet), 10 on day 1, nothing on days 2-3 (after its last job), 5 on day 4.
    follow = np.array([0.0, 10.0, 0.0, 0.0, 5.0])
    runs = {"hold": np.array([1.0, 8.0, 2.0, 0.5, 4.0])}
    joined, follow_joined = joined_to_follow_days(runs, follow)
    assert follow_joined.tolist() == [10.0, 5.0]
    assert joined["hold"].tolist() == [1.0 + 8.0 + 2.0 + 0.5, 4.0]
    joined, follow_joined = joined_to_follow_days(runs, np.zeros(5))
    assert follow_joined.tolist() == [0.0] and joined["hold"].tolist() == [15.5]
