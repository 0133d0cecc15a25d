"""What the commands print is the text they mean: a file name, a line number or a job's name shows as
given (never as an emoji code or a vanished [style] tag), a malformed trace line names the flag that
skips it, and a value pasted by mistake is not echoed whole."""

from __future__ import annotations

import json

import pytest

from autoscaler.app.cli import main

ODD = "[bold]nightly:100:[/]"
"""Text rich would read as markup and an emoji code (:100: is U+1F4AF)."""


def _swim(path, bad_line: int, lines: int = 120) -> None:
    """A SWIM trace of ``lines`` good jobs but line ``bad_line``, whose column 2 is not a number."""
    rows = []
    for number in range(1, lines + 1):
        submit = "soon" if number == bad_line else f"{number * 30}"
        rows.append(f"job{number}\t{submit}\t30\t1000000\t1000000\t1000000\n")
    path.write_text("".join(rows))


def test_an_error_naming_a_file_and_line_is_printed_as_written(tmp_path, capsys):
    trace = tmp_path / "bad.tsv"
    _swim(trace, bad_line=100)
    assert main(["replay", "--trace", str(trace), "--policy", "follow"]) == 2
    error = capsys.readouterr().err
    assert f"{trace}:100: column 2" in error and "\N{HUNDRED POINTS SYMBOL}" not in error
    # Brackets in a path are not a style tag.
    folder = tmp_path / "[red]in"
    folder.mkdir()
    assert main(["replay", "--trace", str(folder / "missing.tsv")]) == 2
    assert f"{folder / 'missing.tsv'}: no such file" in capsys.readouterr().err


def test_notes_and_written_files_are_printed_as_written(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("slot,released\n0,3\n1,3\n2,3\n")
    out = tmp_path / "[b]out:100:"
    assert main(["replay", "--trace", str(curve), "--policy", "hold", "--out", str(out)]) == 0
    assert f"wrote {out / 'replay.png'}" in capsys.readouterr().err
    decisions = tmp_path / "[bold]d:100:.jsonl"
    line = {"slot": 0, "capacity": 1.0, "assigned": 1.0, "nodes": 1}
    decisions.write_text(json.dumps(line) + "\n" + json.dumps(line) + "\n")
    assert main(["explain", "--decisions", str(decisions)]) == 0
    assert f"is in {decisions} 2 times" in capsys.readouterr().err


def test_names_in_tables_are_printed_as_written(tmp_path, capsys):
    store = tmp_path / "jobs.db"
    assert main(["submit", "--store", str(store), "--name", ODD, "--tenant", "t", "--deadline", "2h", "--length-s", "60", "--command", "true"]) == 0
    capsys.readouterr()
    assert main(["jobs", "--store", str(store)]) == 0
    assert ODD in capsys.readouterr().out
    demands = tmp_path / "demands.csv"
    demands.write_text(f"agent,cpu,mem\n{ODD},0.5,0.1\nb,0.1,0.5\n")
    assert main(["drf", "--demands", str(demands)]) == 0
    assert ODD in capsys.readouterr().out


def test_a_malformed_trace_line_names_the_flag_that_skips_it_where_there_is_one(tmp_path, capsys):
    trace = tmp_path / "bad.tsv"
    _swim(trace, bad_line=100)
    for command in (["replay", "--policy", "follow"], ["sweep", "--deadlines", "1-2", "--policy", "hold"]):
        assert main([*command, "--trace", str(trace)]) == 2
        error = capsys.readouterr().err
        assert f"{trace}:100: column 2" in error and "--skip-bad-lines" in error, command
    # With the flag the line is skipped and the rest replayed.
    assert main(["replay", "--policy", "follow", "--trace", str(trace), "--skip-bad-lines", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["workload"]["skipped_lines"] == 1
    # report --replay has no such flag: its message does not offer one.
    assert main(["report", "--replay", str(trace)]) == 2
    error = capsys.readouterr().err
    assert f"{trace}:100: column 2" in error and "--skip-bad-lines" not in error


LONG = "a" * 10_000


def _last_error_line(argv: list[str], capsys) -> str:
    """The one-line error of a refused run (argparse's usage before it, if any, left out)."""
    try:
        code = main(argv)
    except SystemExit as exit_:  # refused by argparse
        code = exit_.code
    assert code == 2
    return capsys.readouterr().err.rstrip("\n").split("\n")[-1]


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["submit", "--id", LONG, "--name", "n", "--tenant", "t", "--deadline", "2h", "--length-s", "60", "--command", "true"], "job_id"),
        (["submit", "--name", "n", "--tenant", "t", "--deadline", LONG, "--length-s", "60", "--command", "true"], "deadline"),
        (["replay", "--policy", LONG], "--policy"),
        (["replay", "--deadline", LONG], "--deadline"),
        (["sweep", "--deadlines", LONG], "--deadlines"),
        (["replay", f"--window={LONG}"], "--window"),
        (["run", "--policy", LONG], "--policy"),
        (["replay", LONG], "unrecognized arguments"),
    ],
)
def test_a_long_value_is_echoed_by_its_start_and_its_length(argv, flag, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # submit's default store
    line = _last_error_line(argv, capsys)
    assert flag in line and "(10,000 characters)" in line and "a" * 200 in line
    assert len(line) < 600, line[:300]


def test_no_region_names_the_setting_and_its_variable(moto_endpoint, tmp_path, monkeypatch, capsys):
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))  # no profile's region either
    config = tmp_path / "config.toml"
    config.write_text(f'store_path = "{tmp_path / "jobs.db"}"\nhealth_port = 0\n[cluster]\nid = "j-ANY"\nendpoint_url = "{moto_endpoint}"\n')
    assert main(["run", "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert "cluster.region" in error and "AUTOSCALER_CLUSTER__REGION" in error and "AWS_DEFAULT_REGION" in error
