"""The job store's file where the file system stands in the way: a second hard link to it (left by
`cp -al`), a folder this user cannot write. Each refusal names the file or folder and what to do."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autoscaler.adapters.lock import StoreLock
from autoscaler.adapters.sqlite_store import SqliteJobStore, check_store
from autoscaler.app.cli import main
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job, StepSpec


def submit(store: Path) -> list[str]:
    return ["submit", "--store", str(store), "--name", "etl", "--tenant", "t", "--deadline", "2h", "--length-s", "60", "--command", "true"]


def job(job_id: str) -> Job:
    return Job(job_id, "etl", "analytics", 1000.0, 8200.0, 600.0, StepSpec(args=("true",)))


# -- finding 18: a hard link left by `cp -al` -------------------------------------------------


def test_a_hard_link_left_by_cp_al_is_named_with_a_remedy_that_keeps_the_copy(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    path = tmp_path / "data" / "jobs.db"
    with SqliteJobStore(path) as store:
        store.submit_many([job("a"), job("b")])
    subprocess.run(["cp", "-al", str(tmp_path / "data"), str(tmp_path / "data.snapshot")], check=True)
    other = tmp_path / "data.snapshot" / "jobs.db"
    assert path.stat().st_nlink == 2
    remedy = f"autoscaler store backup --force --store {path} {other}"
    assert main(submit(path)) == 2
    said = capsys.readouterr().err
    assert f"the job store file has 2 hard links (the other: {other})" in said and remedy in said, said
    with pytest.raises(ConfigError, match="hard links") as refused:
        with StoreLock(path):
            pass
    assert f"(the other: {other})" in str(refused.value) and remedy in str(refused.value)
    assert main(remedy.split()[1:]) == 0  # as it says
    assert path.stat().st_nlink == 1 and check_store(other).jobs == 2  # the snapshot is a copy of its own
    assert main(submit(path)) == 0
    with StoreLock(path):
        pass
