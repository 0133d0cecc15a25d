"""Numbers too large for float64 are refused where they enter, and JSON never carries NaN or Infinity."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autoscaler.cli import main
from autoscaler.errors import ConfigError, ReportError, TraceError
from autoscaler.model import CostParams
from autoscaler.render import json_text
from autoscaler.replay import replay
from autoscaler.workload import read_load_curve, workload_from_curve


def test_a_load_curve_whose_total_overflows_is_refused_at_its_line(tmp_path):
    curve = tmp_path / "huge.csv"
    curve.write_text("slot,released\n0,3\n1,1e308\n2,5\n")
    with pytest.raises(TraceError) as caught:
        read_load_curve(curve)
    assert caught.value.line == 3
    assert "the total load reaches 1e+308 server-slots here, more than 1e+300" in str(caught.value)
    with pytest.raises(ConfigError, match="passes 1e\\+300 server-slots at slot 1"):
        workload_from_curve(np.array([3.0, 1e308, 1e308]))


def test_the_cli_refuses_it_instead_of_printing_nan(tmp_path, capsys):
    curve = tmp_path / "huge.csv"
    curve.write_text("slot,released\n0,1e308\n1,1e308\n2,5\n")
    assert main(["replay", "--trace", str(curve), "--format", "json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{curve}:2: column 2 (released)" in captured.err and "vfw" not in captured.err


def test_costs_that_overflow_are_refused_naming_the_policy_and_coefficients():
    workload = workload_from_curve(np.array([1e290, 3.0, 5.0]))
    with pytest.raises(ConfigError, match=r"follow: its cost overflows float64 .* beta = 1e\+20"):
        replay(workload, ["gcp-u"], 2, CostParams(beta=1e20))


def test_json_never_holds_nan_or_infinity():
    assert json.loads(json_text({"a": [1.0, 2.5]})) == {"a": [1.0, 2.5]}
    with pytest.raises(ReportError, match=r"not finite at \$\.policies\.follow\.m\[2\]; nothing was written"):
        json_text({"policies": {"follow": {"cost": 1.0, "m": [0.0, 1.0, float("inf")]}}})
    with pytest.raises(ReportError, match=r"at \$\.saving"):
        json_text({"saving": float("nan")})
