"""What the docs and the help say about ``report --replay`` with a signal, against what it does.

Both were stale: the README said ``report --replay`` costs the carbon-blind schedules (it runs hold
as hold+carbon, as ``replay --carbon`` does), and ``report --start``'s help gave the signal's first
point as the default (the trace is placed a day later, where persistence has a yesterday).
"""

from __future__ import annotations

import calendar
import json
import time
from pathlib import Path

import pytest

from autoscaler.app.cli import main

REPO = Path(__file__).resolve().parents[2]
SIGNAL = str(REPO / "deploy" / "carbon-daily.csv")
README_TEXT = (REPO / "docs" / "concepts.md").read_text(encoding="utf-8")  # carbon deferral, report --carbon
DAY_S = 86_400


def _json(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _first_point_s() -> float:
    first = Path(SIGNAL).read_text(encoding="utf-8").splitlines()[1].split(",")[0]
    return float(calendar.timegm(time.strptime(first, "%Y-%m-%dT%H:%M:%SZ")))


def test_report_replay_runs_hold_as_hold_carbon_as_the_readme_says(capsys):
    signal = ["--carbon", SIGNAL, "--carbon-unit", "gCO2eq/kWh", "-D", "12"]
    report = _json(capsys, "report", "--replay", *signal, "--policy", "hold", "--format", "json")
    replay = _json(capsys, "replay", *signal, "--policy", "follow,hold", "--format", "json")
    (hold_wh,) = [s["energy_wh"] for s in report["schedules"] if s["schedule"] == "hold"]
    hold = replay["policies"]["hold"]
    assert hold["schedule"] == "hold+carbon"
    assert hold["energy_wh"] != pytest.approx(hold["carbon_blind"]["energy_wh"], rel=1e-6)  # the two schedules differ here
    assert hold_wh == pytest.approx(hold["energy_wh"], rel=1e-9)  # the report's hold is hold+carbon
    bullet = README_TEXT.split("* **`report --carbon SOURCE`**", 1)[1].split("\n\n", 1)[0]
    assert "does not run hold+carbon" not in bullet
    assert "hold as hold+carbon" in bullet


def test_report_start_help_gives_the_default_the_report_applies(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    start_help = help_text.split("--start START", 1)[1]  # the last option of report's help
    assert "a day after the signal's first" in start_help, start_help
    report = _json(capsys, "report", "--replay", "--carbon", SIGNAL, "--carbon-unit", "gCO2eq/kWh", "--policy", "gcp-u", "--format", "json")
    assert report["start_s"] == _first_point_s() + DAY_S  # the signal covers that day and the replay
