"""benchmarks/bench_spread.py: bad flags are refused before any work with the flag named, and a case
is quoted against the managed variant of least kWh that compare's JSON holds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import bench_spread  # noqa: E402


def refusal(argv: list[str], capsys) -> str:
    """stderr of bench_spread.main(argv), which must stop with exit 2."""
    with pytest.raises(SystemExit) as stopped:
        bench_spread.main(argv)
    assert stopped.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--deadlines", "x"),
        ("--deadlines", "-5"),
        ("--sigmas", "-0.5"),
        ("--sigmas", "nan"),
        ("--sigmas", "0,0"),
        ("--sigmas", "6"),  # above compare's --length-error limit of 5
        ("--deadlines", "7m"),
        ("--max-nodes", "0"),
        ("--max-nodes", "1.5"),
        ("--workers", "0"),
        ("--traces", "no-such-folder"),
        ("--json", "no-such-folder/spread.json"),
    ],
)
def test_a_bad_flag_is_refused_before_any_work_with_the_flag_named(tmp_path, monkeypatch, capsys, flag, value):
    monkeypatch.chdir(tmp_path)
    assert f"{flag} {value}" in refusal([flag, value, "--no-timing"], capsys)


def test_a_folder_without_traces_is_refused_naming_it(tmp_path, capsys):
    assert f"--traces {tmp_path}: holds no .tsv trace" in refusal(["--traces", str(tmp_path)], capsys)


def _run(name: str, kwh: float, node_hours: float, overran: int | None = 0, error: str | None = None) -> dict:
    return {"name": name, "deadline_slots": 24, "energy_kwh": kwh, "node_hours": node_hours, "jobs_finished_after_deadline": overran, "error": error}


def test_a_case_is_quoted_against_the_managed_variant_of_least_kwh_and_counted_where_hold_is_worse():
    document = {
        "slot_s": 300.0,
        "jobs": 10,
        "deadline_slots": [24],
        "runs": [
            _run("hold", 81.0, 200.0, overran=3),
            _run("follow", 80.0, 210.0, overran=1),
            _run("managed", 100.0, 250.0, overran=0),
            _run("managed-dampened", 90.0, 240.0, overran=2),
            _run("bound", 75.0, 180.0, overran=None),
        ],
    }
    (row,) = bench_spread.case_rows(document, "t.tsv", 0.5, 100)
    assert row["managed_run"] == "managed-dampened" and row["managed_variants"] == ["managed", "managed-dampened"]
    assert row["kwh_vs_managed_pct"] == pytest.approx(-10.0)  # 81 / 90 - 1
    assert row["node_hours_vs_managed_pct"] == pytest.approx(100 * (200 / 240 - 1))
    assert row["kwh_vs_follow_pct"] == pytest.approx(100 * (81 / 80 - 1))
    assert (row["overran_hold"], row["overran_follow"], row["overran_managed"]) == (3, 1, 2)
    assert row["hold_over_bound"] == pytest.approx(81 / 75)
    summary = bench_spread.spread([row])
    assert summary["kwh_vs_managed_pct"] == {"min": pytest.approx(-10.0), "median": pytest.approx(-10.0), "max": pytest.approx(-10.0)}
    assert summary["worse"] == {
        "kWh vs managed": 0, "kWh vs follow": 1, "node-hours vs managed": 0, "node-hours vs follow": 0,
        "overran vs managed": 1, "overran vs follow": 1,
    }  # fmt: skip
    assert summary["worse_in_any"] == 1


def test_a_managed_variant_that_did_not_finish_is_not_the_reference():
    document = {
        "slot_s": 300.0,
        "jobs": 10,
        "deadline_slots": [24],
        "runs": [_run("hold", 81.0, 200.0), _run("follow", 80.0, 210.0), _run("managed", 100.0, 250.0), _run("managed-dampened", 0.0, 0.0, error="queue not drained")],
    }
    (row,) = bench_spread.case_rows(document, "t.tsv", 0.0, 100)
    assert row["managed_run"] == "managed" and row["not_finished"] == ["managed-dampened"]
    assert row["kwh_vs_managed_pct"] == pytest.approx(-19.0)


def _case(trace: str, kwh_pct: float, overran: tuple[int, int, int]) -> dict:
    return {
        "trace": trace, "max_nodes": 100, "sigma": 0.0, "deadline_s": 7200.0, "not_finished": [],
        "kwh_vs_managed_pct": kwh_pct, "node_hours_vs_managed_pct": kwh_pct, "kwh_vs_follow_pct": -1.0, "node_hours_vs_follow_pct": -1.0,
        "overran_hold": overran[0], "overran_follow": overran[1], "overran_managed": overran[2],
    }  # fmt: skip


def test_the_readme_figures_give_the_spread_and_list_only_the_cases_where_hold_is_worse_than_managed():
    # Three cases: -10 % and no overrun; -4 % with 2 overran against managed's 1; +2 % with none.
    # Min / median / max -10 / -4 / +2; the last two are worse than managed, the first is not listed.
    document = {"cases": [_case("a.tsv", -10.0, (0, 0, 0)), _case("b.tsv", -4.0, (2, 2, 1)), _case("c.tsv", 2.0, (0, 0, 0))]}
    figures = bench_spread.markdown_figures(document)
    assert figures["spread-range"] == "−10.0 % / −4.0 % / +2.0 % over 3 cases"
    assert "| all cases | 3 | −10.0 % | −4.0 % | +2.0 % | 1 | 1 | 1 | 0 | 0 |" in figures["spread-table"]
    listed = figures["spread-worse"].splitlines()[2:]
    assert listed == ["| b | 100 | 0 | 2 h | −4.0 % | 2 / 2 / 1 |", "| c | 100 | 0 | 2 h | +2.0 % | 0 / 0 / 0 |"]
