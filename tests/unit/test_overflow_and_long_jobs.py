"""Numbers too large for float64 are refused where they enter, JSON never carries NaN or
Infinity, and a job estimated to run longer than the window is named."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autoscaler.app.cli import main
from autoscaler.app.render import json_text
from autoscaler.core.errors import ConfigError, ReportError, TraceError
from autoscaler.core.model import CostParams, Trace, TraceJob
from autoscaler.core.replay import replay
from autoscaler.core.workload import read_load_curve, workload_from_curve, workload_from_trace


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


def _job(job_id: str, submit_s: float, shuffle_bytes: float) -> TraceJob:
    return TraceJob(job_id, submit_s, 0.0, 2**30, shuffle_bytes, 2**20)


def test_a_job_longer_than_the_window_is_named_with_its_estimate():
    # 1 GiB in (X = 8 mappers), 1 MiB out (Y = 1 reducer), 10 TiB = 10,485,760 MB of shuffle (§V-A):
    # T_m = 1024/800 + 0.8 * 128 + 10,485,760/800 = 13,210.88 s; T_s = 10,485,760/(8 * 1 * 10) = 131,072 s;
    # T_r = 0.9 * 10,485,760 + 1/100 = 9,437,184.01 s; T_m < 8 T_s, so
    # T_J = T_m + X T_s + T_r = 10,498,970.89 s = 2,916.4 h.
    jobs = [_job(f"small{i}", 60.0 * i, 2**20) for i in range(10)] + [_job("huge", 30.0, 10 * 2**40)]
    workload = workload_from_trace(Trace("t.tsv", tuple(jobs)))
    (note,) = workload.notes
    assert note.startswith("1 job has an estimated length longer than the window (24 h) and is clipped at its end: huge 2,916.4 h")
    assert "(8 mappers, 1 reducer for 1.024e+04 GiB of shuffle)" in note
    assert "small" not in note
    assert workload_from_trace(Trace("t.tsv", tuple(jobs[:10]))).notes == ()


def test_the_warning_goes_to_stderr_and_into_the_json(capsys):
    assert main(["replay", "--policy", "gcp-u", "--format", "json"]) == 0
    captured = capsys.readouterr()
    (note,) = json.loads(captured.out)["workload"]["notes"]
    # Workload A: nine jobs estimated longer than its day, the longest job1712 at 2,337 h.
    assert note.startswith("9 jobs have an estimated length longer than the window (24 h)")
    assert "job1712 2,337.1 h (7,302 mappers, 1 reducer for 8,216 GiB of shuffle)" in note and "and 4 more" in note
    assert f"warning: {note}" in captured.err
