"""`autoscaler replay` end to end: the embedded trace, output formats, files and bad input."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from autoscaler.app.cli import main


def test_json_on_stdout_is_the_only_output_and_is_complete():
    proc = subprocess.run(
        [sys.executable, "-m", "autoscaler", "replay", "--format", "json", "--policy", "all", "--objective", "paper"],
        capture_output=True,
        text=True,
        check=True,
    )
    document = json.loads(proc.stdout)
    assert document["slot_s"] == 300.0
    assert document["params"] == {"e0": 1.0, "e1": 0.0, "beta": 12.0, "deadline": 2, "max_servers": None}
    assert len(document["workload"]["active"]) == 288
    assert sum(document["workload"]["released"]) == document["workload"]["n_jobs"]
    assert set(document["policies"]) == {"follow", "hold", "offline", "gcp-u", "vfw", "gcp"}
    assert len(document["classes"]) == 10
    follow = document["policies"]["follow"]
    assert follow["saving_pct"] == 0.0
    assert follow["m"][:288] == document["workload"]["active"]
    for name, policy in document["policies"].items():
        # gcp's horizon is the window plus its largest class deadline.
        assert len(policy["m"]) == len(policy["x"]) >= 288 + 2, name
        if name != "gcp":
            assert len(policy["m"]) == 288 + 2, name
        # The cost is recomputable from the reported schedule (eq. 2, final switch-off charged).
        m = np.array(policy["m"])
        switching = 12.0 * np.abs(np.diff(m, prepend=0.0, append=0.0)).sum()
        assert policy["cost"] == pytest.approx(m.sum() + switching, rel=1e-6), name
    assert document["policies"]["offline"]["cost"] <= document["policies"]["gcp-u"]["cost"]


def test_csv_summary_and_output_folder(tmp_path, capsys):
    assert main(["replay", "--policy", "gcp-u", "--deadline", "3", "--format", "csv", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["policy"] for r in rows] == ["follow", "gcp-u"]
    assert {p.name for p in tmp_path.iterdir()} == {"replay.png", "replay.json", "slots.csv", "summary.csv"}
    assert (tmp_path / "replay.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    slots = list(csv.DictReader((tmp_path / "slots.csv").open()))
    assert len(slots) == 288 + 3
    assert sum(float(r["x_gcp-u"]) for r in slots) == pytest.approx(sum(float(r["load"]) for r in slots), rel=1e-9)


def test_load_curve_csv_input(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("slot,released\n0,2\n1,0\n")
    assert main(["replay", "--trace", str(curve), "--deadline", "1", "--objective", "paper", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    # The hand-worked case of tests/unit/test_policies.py (the paper's costs): follow 50, spread over two slots 26.
    assert document["policies"]["follow"]["cost"] == pytest.approx(50.0)
    assert document["policies"]["offline"]["cost"] == pytest.approx(26.0, abs=1e-5)
    assert document["policies"]["gcp-u"]["cost"] == pytest.approx(26.0)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--policy", "fifo"], "unknown policy 'fifo'"),
        (["--trace", "/nonexistent/trace.tsv"], "/nonexistent/trace.tsv"),
        (["--max-servers", "5"], "M = 5"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(argv, message, capsys):
    assert main(["replay", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_malformed_trace_line_is_named_and_skippable(tmp_path, capsys):
    trace = tmp_path / "bad.tsv"
    trace.write_text("job0\t10\t10\t100\t0\t100\njob1\t20\t10\tlots\t0\t100\n")
    assert main(["replay", "--trace", str(trace)]) == 2
    assert f"{trace}:2" in capsys.readouterr().err
    assert main(["replay", "--trace", str(trace), "--skip-bad-lines", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["workload"]["skipped_lines"] == 1
    assert "1 bad line skipped" in captured.err


@pytest.mark.parametrize("flag, value", [("--deadline", "-1"), ("--slot-s", "0"), ("--beta", "nan"), ("--window", "x")])
def test_out_of_range_flags_are_refused_by_the_parser(flag, value, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["replay", flag, value])
    assert caught.value.code == 2
    assert flag in capsys.readouterr().err


def test_sweep_writes_figures_and_agrees_with_replay(tmp_path, capsys):
    assert main(["sweep", "--deadlines", "1-3", "--delta-deadline", "4", "--format", "json", "--out", str(tmp_path)]) == 0
    document = json.loads(capsys.readouterr().out)
    trace = "Workload A (embedded)"
    assert sorted(document["by_deadline"][trace]["vfw"]) == ["2", "3"]  # no delta fits D = 1
    assert sorted(document["vfw_by_delta"][trace]) == ["1", "2", "3"]
    assert (tmp_path / "fig9.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "fig11.png").read_bytes()[:4] == b"\x89PNG"
    # The same figure through replay, an independent path through the CLI.
    assert main(["replay", "--policy", "gcp-u", "--deadline", "3", "--format", "json"]) == 0
    replayed = json.loads(capsys.readouterr().out)["policies"]["gcp-u"]["saving_pct"]
    assert document["by_deadline"][trace]["gcp-u"]["3"] == pytest.approx(replayed)


@pytest.mark.parametrize("argv, message", [(["--deadlines", "x"], "--deadlines"), (["--policy", "gcp"], "--policy")])
def test_sweep_bad_input(argv, message, capsys):
    assert main(["sweep", *argv]) == 2
    assert message in capsys.readouterr().err


def test_cap_below_follow_peak_keeps_follow_uncapped_as_baseline(capsys):
    # Workload A peaks at 104 active jobs; the offline LP needs at most ~71 servers at D = 2.
    assert main(["replay", "--policy", "offline", "--max-servers", "80", "--format", "json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert "baseline is follow without the cap" in captured.err
    assert "exceeds M = 80" in document["policies"]["follow"]["note"]
    assert max(document["policies"]["offline"]["m"]) <= 80 + 1e-9
    assert max(document["policies"]["follow"]["m"]) == 104


@pytest.mark.parametrize(
    "lines, argv, message",
    [
        ("job0\t1e300\t23\t5\t0\t1\n", [], "no job is submitted inside the window"),
        ("job0\t86400\t23\t5\t0\t1\n", [], "no job is submitted inside the window"),
        ("job0\t10\t1\t5\t1000\t1\n", ["--network-mb-s", "1e-320"], "infinite estimated length"),
        ("job0\t10\t1\t5\t0\t1\n", ["--slot-s", "0.001"], "more than the 1,000,000 slots"),
        ("job0\t10\t1\t5\t0\t1\n", ["--deadline", "1000"], "longer than the window"),
        ("job0\t10\t1\t5\t0\t1\n", ["--policy", "all,follow"], "'all' stands alone"),
    ],
)
def test_inputs_that_used_to_crash_or_mislead_are_refused(tmp_path, capsys, lines, argv, message):
    trace = tmp_path / "t.tsv"
    trace.write_text(lines)
    assert main(["replay", "--trace", str(trace), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "rows, message",
    [("0,0\n1,0\n", "zero in every slot"), ("1e300,1\n", "column 1 (slot)"), ("10000000000000,1\n", "below 1,000,000")],
)
def test_bad_load_curves_are_refused(tmp_path, capsys, rows, message):
    curve = tmp_path / "c.csv"
    curve.write_text("slot,released\n" + rows)
    assert main(["replay", "--trace", str(curve)]) == 2
    assert message in capsys.readouterr().err


def test_huge_sizes_are_counted_by_float_arithmetic(tmp_path, capsys):
    # 1e26 shuffle bytes on one reducer: g(S'/Y) alone is about 8.6e19 s, far past the window,
    # so the job is active in every slot from its release and its overrun is clipped (not negative).
    trace = tmp_path / "t.tsv"
    trace.write_text("job0\t0\t0\t5\t1e26\t1\n")
    assert main(["replay", "--trace", str(trace), "--policy", "follow", "--format", "json"]) == 0
    workload = json.loads(capsys.readouterr().out)["workload"]
    assert workload["active"] == [1.0] * 288
    assert workload["clipped_jobs"] == 1 and workload["clipped_job_slots"] > 10**15


def test_out_that_is_a_file_is_refused_before_any_work(tmp_path, capsys):
    target = tmp_path / "afile"
    target.write_text("keep me")
    assert main(["replay", "--out", str(target)]) == 2
    captured = capsys.readouterr()
    assert "exists and is not a folder" in captured.err
    assert captured.out == ""
    assert target.read_text() == "keep me"


def test_a_failed_write_changes_none_of_the_output_files(tmp_path, capsys):
    (tmp_path / "replay.json").write_text("old")
    (tmp_path / "slots.csv").mkdir()  # this target cannot be written
    assert main(["replay", "--policy", "follow", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write {tmp_path / 'slots.csv'}" in err
    assert (tmp_path / "replay.json").read_text() == "old"
    assert not (tmp_path / "replay.png").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["replay.json", "slots.csv"]  # no temporary files left


def test_tiny_and_huge_loads_give_the_same_savings_as_unit_loads(tmp_path, capsys):
    savings = []
    for scale in ("1e-300", "1", "1e15"):
        curve = tmp_path / f"c{scale}.csv"
        curve.write_text(f"slot,released\n0,{scale}\n1,0\n2,{scale}\n")
        assert main(["replay", "--trace", str(curve), "--deadline", "1", "--policy", "offline,gcp-u", "--format", "json"]) == 0
        policies = json.loads(capsys.readouterr().out)["policies"]
        savings.append((policies["offline"]["saving_pct"], policies["gcp-u"]["saving_pct"]))
    for offline, gcp_u in savings:
        assert offline == pytest.approx(savings[1][0], abs=1e-4)
        assert gcp_u == pytest.approx(savings[1][1], abs=1e-9)
