"""The command line starts without the solvers: ``autoscaler --help``, ``submit`` and ``jobs`` import
neither scipy nor cvxpy nor matplotlib (about half a second of imports at each start), nor, without
``--config``, the config's pydantic-settings (nor ``submit`` the logging library); a command that plans imports them where it plans.
Checked in a fresh interpreter by the modules it loaded, not by a time."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("scipy", "cvxpy", "matplotlib", "sklearn")

PROBE = """
import json, sys
from autoscaler.app.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "modules": sorted(name.split(".")[0] for name in sys.modules)}))
"""


def loaded(*argv: str, cwd) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=False, cwd=cwd)
    document = json.loads(done.stdout.strip().splitlines()[-1])
    return document["code"], set(document["modules"])


def test_help_loads_no_solver_plotting_or_config_library(tmp_path):
    code, modules = loaded("--help", cwd=tmp_path)
    assert code == 0
    assert modules.isdisjoint(HEAVY + ("pydantic_settings",)), sorted(modules.intersection(HEAVY + ("pydantic_settings",)))


def test_submit_and_jobs_load_no_solver_or_plotting_library(tmp_path):
    store = str(tmp_path / "jobs.db")
    code, modules = loaded("submit", "--store", store, "--name", "etl", "--tenant", "ads", "--deadline", "2h", "--length-s", "60", "--command", "true", cwd=tmp_path)
    assert code == 0
    assert modules.isdisjoint(HEAVY + ("pydantic_settings", "structlog")), sorted(modules.intersection(HEAVY + ("pydantic_settings", "structlog")))
    code, modules = loaded("jobs", "--store", store, cwd=tmp_path)
    assert code == 0
    assert modules.isdisjoint(HEAVY), sorted(modules.intersection(HEAVY))


def test_a_replay_still_plans_with_them(tmp_path):
    # The lazy imports are where the plans are made: the offline LP needs cvxpy and scipy.
    code, modules = loaded("replay", "--policy", "offline", "--window", "12", "--format", "json", cwd=tmp_path)
    assert code == 0
    assert {"scipy", "cvxpy"} <= modules
