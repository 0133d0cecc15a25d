"""Every option that takes a trace reads the names A, B and default as the shipped traces, and a path otherwise."""

from __future__ import annotations

import hashlib
import json
from importlib import resources

import pytest

from autoscaler.app.cli import main
from autoscaler.app.traces import SHIPPED

WORKLOAD_B_ROWS = 6638
"""Lines of FB-2009_samples_24_times_1hr_1.tsv (`wc -l`): Workload B's jobs."""


def without_timings(document):
    """The document without wall-clock figures (solve_ms_per_slot), which differ run to run."""
    if isinstance(document, dict):
        return {k: without_timings(v) for k, v in document.items() if not k.startswith("solve_ms")}
    if isinstance(document, list):
        return [without_timings(v) for v in document]
    return document


def shipped_path(name: str):
    return resources.as_file(resources.files("autoscaler") / "data" / SHIPPED[name].file_name)


def test_workload_b_is_shipped_beside_a_with_the_licence():
    data = resources.files("autoscaler") / "data"
    assert (data / "LICENSE-SWIM").read_text(encoding="utf-8").strip().startswith("Copyright (c) 2011, Regents of the University of California.")
    text_b = (data / SHIPPED["B"].file_name).read_text(encoding="utf-8")
    assert len(text_b.splitlines()) == WORKLOAD_B_ROWS
    assert text_b.splitlines()[0].split("\t") == ["job0", "23", "23", "410483", "0", "2513586060"]
    digest = lambda name: hashlib.sha256((data / SHIPPED[name].file_name).read_bytes()).hexdigest()  # noqa: E731
    assert digest("A") != digest("B")


def test_sweep_takes_both_names_and_gives_what_replay_gives_on_the_files(capsys):
    assert main(["sweep", "--trace", "A", "--trace", "B", "--deadlines", "2", "--policy", "gcp-u", "--format", "json"]) == 0
    swept = json.loads(capsys.readouterr().out)["by_deadline"]
    assert set(swept) == {"Workload A (embedded)", "Workload B (embedded)"}
    for name in ("A", "B"):
        with shipped_path(name) as path:
            assert main(["replay", "--trace", str(path), "--policy", "gcp-u", "--format", "json"]) == 0
        by_path = json.loads(capsys.readouterr().out)["policies"]["gcp-u"]["saving_pct"]
        assert swept[f"Workload {name} (embedded)"]["gcp-u"]["2"] == pytest.approx(by_path)
    assert swept["Workload A (embedded)"]["gcp-u"]["2"] != swept["Workload B (embedded)"]["gcp-u"]["2"]


@pytest.mark.parametrize("argv", [["replay", "--trace"], ["report", "--window", "12", "--replay"]])
def test_replay_and_report_read_every_name(argv, capsys):
    documents = {}
    for name in ("A", "default", "B"):
        assert main([*argv, name, "--format", "json"]) == 0
        documents[name] = without_timings(json.loads(capsys.readouterr().out))
    assert documents["A"] == documents["default"]
    assert documents["A"] != documents["B"]
    first = json.dumps(documents["B"])
    assert SHIPPED["B"].file_name in first and SHIPPED["A"].file_name not in first


def test_run_replay_reads_workload_b_by_name(tmp_path, capsys):
    assert main(["run", "--replay", "B", "--store", str(tmp_path / "b.db")]) == 0
    printed = capsys.readouterr().out
    assert f"{SHIPPED['B'].file_name} through the daemon" in printed
    with shipped_path("B") as path:
        in_window = sum(1 for line in path.read_text().splitlines() if float(line.split("\t")[1]) < 86400)
    assert in_window == 6637  # one job of B is submitted after its 24 h
    assert f"jobs released │ {in_window:,}" in " ".join(printed.split())


def test_a_name_wins_over_a_file_of_that_name_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "B").write_text("j0\t0\t0\t1048576\t0\t1048576\nj1\t300\t300\t1048576\t0\t1048576\n")
    assert main(["replay", "--trace", "B", "--policy", "gcp-u", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["workload"]["n_jobs"] == WORKLOAD_B_ROWS - 1  # one is submitted after the window
    assert "the file B here is not read (give ./B to read it)" in captured.err
    assert main(["replay", "--trace", "./B", "--policy", "gcp-u", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["workload"]["n_jobs"] == 2


@pytest.mark.parametrize("argv", [["replay", "--trace", ""], ["run", "--replay", " "], ["report", "--replay", ""]])
def test_an_empty_trace_is_refused_naming_the_option_and_the_names(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{argv[1]}: expected 'A', 'B', 'default' or a file path" in err


def test_the_same_trace_twice_in_a_sweep_is_refused(capsys):
    assert main(["sweep", "--trace", "A", "--trace", "default"]) == 2
    assert "'A' and 'default' are the same trace" in capsys.readouterr().err
