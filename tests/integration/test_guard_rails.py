"""A policy that costs more than follow the workload says so: replay's JSON and stderr, the daemon's decisions."""

from __future__ import annotations

import json

import pytest

from autoscaler.app.cli import main
from autoscaler.core.controller import FollowWatch
from autoscaler.core.model import CostParams


def test_replay_flags_a_policy_that_costs_more_than_follow(tmp_path, capsys):
    # The paper's costs. L = [2, 2, 0, 0] with D = 4: follow costs 4 + 12*(2 on + 2 off) = 52; VFW's schedule costs 53.92.
    curve = tmp_path / "curve.csv"
    curve.write_text("slot,released\n0,2\n1,2\n2,0\n3,0\n")
    assert main(["replay", "--trace", str(curve), "--deadline", "4", "--policy", "vfw,hold,gcp-u", "--objective", "paper", "--format", "json"]) == 0
    captured = capsys.readouterr()
    policies = json.loads(captured.out)["policies"]
    assert policies["follow"]["cost"] == pytest.approx(52.0)
    assert policies["vfw"]["cost"] > 52.0 and policies["vfw"]["worse_than_follow"] is True
    assert "warning: vfw costs more than follow" in captured.err
    for name in ("follow", "hold", "gcp-u"):
        assert policies[name]["worse_than_follow"] is (policies[name]["cost"] > 52.0 + 1e-6), name
        assert f"warning: {name} " not in captured.err or policies[name]["worse_than_follow"]


def test_the_controllers_running_comparison_with_follow_by_hand():
    # Follow on L = [2, 2, 0, 0]; a schedule m = [3, 1, 0, 0], x = [2, 2, 0, 0] (e0 = 1, beta = 12).
    # After slot 0, as if all were switched off then: the schedule 3 + 12*3 + 12*3 = 75, follow 2 + 24 + 24 = 50.
    # After slot 3: the schedule 4 + 12*(3 + 2 + 1) = 76, follow 4 + 12*(2 + 2) = 52.
    params = CostParams()
    watch = FollowWatch()
    flags = []
    for m, x, load in [(3, 2, 2), (1, 2, 2), (0, 0, 0), (0, 0, 0)]:
        watch = watch.step(m, x, load, params)
        flags.append(watch.worse)
    assert flags == [True] * 4
    assert watch.policy_cost == pytest.approx(76.0) and watch.follow_cost == pytest.approx(52.0)
    spread = FollowWatch()
    for m, load in [(1, 2), (1, 2), (1, 0), (1, 0)]:  # m = [1]*4 runs the same 4 units: 4 + 24 = 28
        spread = spread.step(m, m, load, params)
    assert not spread.worse and spread.policy_cost + params.beta * spread.last_capacity == pytest.approx(28.0)
