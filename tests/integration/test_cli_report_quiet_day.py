"""The daemon's report for an hour in which no work came: follow runs nothing and uses no energy, so no
schedule has a percentage against it, in the Markdown or the JSON."""

from __future__ import annotations

import json
import math
import time

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main


@pytest.fixture
def quiet_hour(tmp_path) -> str:
    """A config (max_nodes 3, no start-up energy) and a store whose last 20 slots kept 1 node on for no work."""
    store = tmp_path / "jobs.db"
    config = tmp_path / "config.toml"
    config.write_text(
        f'store_path = "{store}"\nslot_s = 300\n[cluster]\nid = "j-TEST"\nregion = "us-east-1"\nmax_nodes = 3\n[report]\nboot_s = 0.0\n'
    )
    now_slot = math.floor(time.time() / 300)
    with SqliteJobStore(store) as jobs:
        for slot in range(now_slot - 20, now_slot + 1):
            jobs.commit_slot(slot, {"last_slot": slot}, {}, {"slot": slot, "capacity": 1.0, "nodes": 1, "running": 0, "load": 0.0})
    return str(config)


def test_report_of_a_quiet_hour_has_no_percentage_against_follows_nothing(quiet_hour, capsys):
    argv = ["report", "--config", quiet_hour, "--since", "1h", "--until", "0m", "--no-measure"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    energy_row = next(line for line in text.splitlines() if line.startswith("| Energy (kWh)"))
    assert energy_row.rstrip(" |").endswith("| n/a")
    # The run kept 1 idle node on where no provisioning keeps 3: a third of its energy, 66.67 % less.
    assert "kWh saved against follow (follow used none; 66.67 % less than no provisioning)." in text
    assert main([*argv, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out, parse_constant=_refuse)
    percent = {s["schedule"]: s["reduction_percent"] for s in document["schedules"]}
    assert percent == {"no provisioning": None, "follow": None, "hold (run)": None}


def _refuse(name: str):
    raise AssertionError(f"{name} in the JSON document")
