"""The layers hold: ``lint-imports`` (import-linter) checks the contracts in pyproject.toml, so core
importing an adapter, an adapter importing the app, or anything inside importing the top-level
``energy``/``cloudwatch`` re-exports fails the test run, naming the import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"]


def lint(folder: Path) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(folder)}
    return subprocess.run([*LINT, "--no-cache"], cwd=folder, env=environment, capture_output=True, text=True, check=False)


def test_the_code_keeps_every_import_contract():
    done = lint(REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 kept, 0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "wrong_import", "contract"),
    [
        ("autoscaler/core/readable.py", "import autoscaler.adapters.lock", "app above adapters above core"),
        ("autoscaler/adapters/lock.py", "import autoscaler.app.config", "app above adapters above core"),
        ("autoscaler/core/readable.py", "import energy.power", "core is pure"),
        ("autoscaler/app/render.py", "import cloudwatch.reader", "re-exports nothing inside imports"),
    ],
)
def test_a_wrong_way_import_breaks_a_contract(tmp_path, module, wrong_import, contract):
    for name in ("autoscaler", "energy", "cloudwatch"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / module, "a", encoding="utf-8") as file:
        file.write(f"\n{wrong_import}  # a wrong-way import\n")
    done = lint(tmp_path)
    assert done.returncode != 0
    broken = " ".join(done.stdout.split("Broken contracts", 1)[-1].split())
    assert contract in broken and wrong_import.split()[-1] in broken, done.stdout[-3000:]
