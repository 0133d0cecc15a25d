"""The job store's file where the file system stands in the way: a second hard link to it (left by
`cp -al`), a folder this user cannot write. Each refusal names the file or folder and what to do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
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


# -- finding 18: a folder this user cannot write ---------------------------------------------


@pytest.fixture
def unwritable_folder() -> Iterator[tuple[Path, list[str]]]:
    """A folder with a store in it that the user who runs the command cannot write (mode 0555, and,
    when the tests run as root, the command run as the unprivileged uid 65534), and how to run the CLI
    as that user. Outside pytest's own temporary folder, which only its owner may enter."""
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: no unprivileged user to run as")
        run_as = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    else:
        run_as = []
    top = Path(tempfile.mkdtemp(prefix="store-access-"))
    try:
        top.chmod(0o755)
        folder = top / "data"
        folder.mkdir()
        with SqliteJobStore(folder / "jobs.db") as store:
            store.submit(job("a"))
            # A daemon killed here leaves its WAL and no -shm (in this copy of its files).
            (top / "left").mkdir()
            for name in ("jobs.db", "jobs.db-wal", "jobs.db.created"):
                shutil.copy2(folder / name, top / "left" / name)
        for unwritable in (folder, top / "left"):
            unwritable.chmod(0o555)
        cli = [*run_as, sys.executable, "-c", "import sys; from autoscaler.app.cli import main; sys.exit(main(sys.argv[1:]))"]
        yield folder, cli
    finally:
        for unwritable in (top / "data", top / "left"):
            if unwritable.exists():
                unwritable.chmod(0o755)
        shutil.rmtree(top)


def test_a_folder_the_user_cannot_write_is_named_with_what_sqlite_needs_there(unwritable_folder):
    folder, cli = unwritable_folder
    uid = 65534 if os.geteuid() == 0 else os.geteuid()
    left = folder.parent / "left"
    for argv, where in [
        (submit(folder / "jobs.db"), folder),
        (["jobs", "--store", str(folder / "jobs.db")], folder),
        (submit(folder / "new.db"), folder),
        (["jobs", "--store", str(left / "jobs.db")], left),  # was "corrupt or unreadable ... restore it"
        (submit(left / "jobs.db"), left),
    ]:
        run = subprocess.run([*cli, *argv], capture_output=True, text=True, timeout=120)
        assert run.returncode == 2, run.stderr
        said = run.stderr
        assert "unable to open database file" not in said.split("(SQLite:")[0], said
        assert f"folder {where} cannot be written by this user (uid {uid})" in said and "corrupt" not in said, said
        assert "-shm in it" in said and "give this user write access to the folder" in said, said
    assert sorted(p.name for p in folder.iterdir()) == ["jobs.db", "jobs.db.created"]  # nothing made, nothing changed
    assert sorted(p.name for p in left.iterdir()) == ["jobs.db", "jobs.db-wal", "jobs.db.created"]
