"""compose.py is the one composition root: the application's modules ask it for their adapters and
clients and build none themselves, so a setting (an endpoint, a region, a session) means the same on
every path. Read from the source (an AST walk), independently of what any adapter does."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONSTRUCTORS = {
    "SqliteJobStore", "ShadowStore", "StoreLock", "EmrCluster", "FakeCluster", "SimulatedClock", "WallClock",
    "CloudWatchMetricsReader", "EnergyPublisher", "SesSender", "SmtpSender",
    "emr_client", "cloudwatch_client", "ses_client", "aws_client",
}  # fmt: skip
"""Adapters and client factories: called in compose.py and the adapters, nowhere else in app/."""


def constructed(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name in CONSTRUCTORS:
                found.append(f"{path.name}:{node.lineno}: {name}")
    return found


@pytest.mark.parametrize("module", ["reporting.py", "replay_daemon.py", "replay_jobs.py", "replay_drain.py", "cluster_twin.py"])
def test_the_application_modules_build_no_adapter_of_their_own(module):
    assert constructed(ROOT / "autoscaler" / "app" / module) == []
