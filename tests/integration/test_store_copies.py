"""Backup and restore of the job store against what an operator may give them, on real SQLite files:
a DEST that is the store's own side file or another store's, one a process holds a lock on, or not a
regular file, a backup with a damaged row, a store another program holds open in either journal
mode, a live store newer than the backup, and the files a killed backup or restore leaves behind."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autoscaler.adapters.lock import StoreLock
from autoscaler.adapters.sqlite_store import SqliteJobStore, check_store, restore_store
from autoscaler.app.cli import main
from autoscaler.core.errors import ConfigError, StoreError
from autoscaler.core.model import Job, StepSpec


def job(job_id: str, submit_s: float = 1000.0) -> Job:
    return Job(job_id, "etl", "analytics", submit_s, submit_s + 7200.0, 600.0, StepSpec(args=("spark-submit", "x.py")))


def store_with_jobs(path: Path, n: int = 20, slot: int | None = 7) -> None:
    with SqliteJobStore(path) as store:
        store.submit_many([job(f"j{i:04d}", 1000.0 + i) for i in range(n)])
        if slot is not None:
            store.commit_slot(slot, {"last_slot": slot}, {"j0000": (2000.0, "s-1")}, {"slot": slot})


def job_ids(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("SELECT job_id FROM jobs ORDER BY seq")]
    finally:
        conn.close()


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=120)


# -- finding 1: a backup never lands on the store's own files, nor on what is not a regular file --


def test_a_backup_onto_the_stores_side_files_is_refused_and_they_stay_as_they_were(tmp_path, capsys):
    path = tmp_path / "jobs.db"
    store_with_jobs(path)
    with SqliteJobStore(path) as store:
        store.submit(job("in-the-wal"))  # committed, not checkpointed: only in jobs.db-wal while the store is open
        (tmp_path / "jobs.db.lock").write_bytes(b"")
        (tmp_path / "jobs.db-journal").write_bytes(b"")
        sides = {suffix: tmp_path / f"jobs.db{suffix}" for suffix in ("-wal", "-shm", "-journal", ".lock", ".created")}
        assert sides["-wal"].stat().st_size > 0
        before = {suffix: side.read_bytes() for suffix, side in sides.items()}
        (tmp_path / "to-wal").symlink_to(sides["-wal"])
        for dest in [*sides.values(), tmp_path / "to-wal"]:
            with pytest.raises(StoreError, match=r"is the job store's (WAL|shared-memory index|rollback journal|daemon lock|marker)"):
                store.backup(dest, force=True)
        assert {suffix: side.read_bytes() for suffix, side in sides.items()} == before
        assert main(["store", "backup", "--force", "--store", str(path), str(sides[".lock"])]) == 2
        assert f"{sides['.lock']}: is the job store's daemon lock" in capsys.readouterr().err
    assert "in-the-wal" in job_ids(path)  # closing checkpointed the WAL, which nothing replaced


def test_a_backup_onto_a_fifo_or_a_device_is_refused_and_leaves_it_as_it_was(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    (tmp_path / "null").symlink_to("/dev/null")
    with SqliteJobStore(path) as store:
        for dest, kind in [(fifo, "a FIFO"), (tmp_path / "null", "a character device")]:
            with pytest.raises(StoreError, match=f"{dest}: is {kind}, not a regular file"):
                store.backup(dest, force=True)
    assert fifo.is_fifo() and os.readlink(tmp_path / "null") == "/dev/null"
    assert Path("/dev/null").is_char_device()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # nothing staged is left


def test_a_backup_onto_another_stores_side_files_is_refused_and_its_daemon_keeps_its_lock(tmp_path, capsys):
    path, other = tmp_path / "a.db", tmp_path / "b.db"
    store_with_jobs(path)
    store_with_jobs(other, n=3)
    with StoreLock(other, note=b"the daemon's clock") as daemon:  # a daemon on b.db, as `autoscaler run` holds it
        inode = os.stat(daemon.path).st_ino
        assert main(["store", "backup", "--force", "--store", str(path), str(daemon.path)]) == 2
        said = capsys.readouterr().err
        assert f"{daemon.path}: is the daemon lock of the job store {other}" in said, said
        with SqliteJobStore(other) as second:
            second.submit(job("in-the-wal"))  # b.db-wal and b.db-shm exist while it is open
            (tmp_path / "b.db-journal").write_bytes(b"")
            with SqliteJobStore(path) as store:
                roles = [("-wal", "WAL"), ("-shm", "shared-memory index"), ("-journal", "rollback journal"), (".created", "marker")]
                for suffix, role in roles:
                    with pytest.raises(StoreError, match=f"b.db{suffix}: is the {role} of the job store {other}"):
                        store.backup(f"{other}{suffix}", force=True)
        assert os.stat(daemon.path).st_ino == inode and daemon.path.read_bytes() == b"the daemon's clock"
        with pytest.raises(ConfigError, match="another daemon is running on this store"):
            with StoreLock(other):
                pass
    assert job_ids(other) == ["j0000", "j0001", "j0002", "in-the-wal"]


def test_a_backup_onto_a_lock_file_held_by_a_running_process_is_refused(tmp_path, capsys):
    path, other = tmp_path / "a.db", tmp_path / "b.db"
    store_with_jobs(path)
    store_with_jobs(other, n=3)
    with StoreLock(other) as daemon:
        other.rename(tmp_path / "moved.db")  # b.db.lock is now beside no store, and still held
        assert main(["store", "backup", "--force", "--store", str(path), str(daemon.path)]) == 2
        assert f"{daemon.path}: is held by a running process" in capsys.readouterr().err
        assert daemon.path.read_bytes() == b""
    assert main(["store", "backup", "--force", "--store", str(path), str(daemon.path)]) == 0  # no longer held
    assert job_ids(daemon.path) == job_ids(path)


def test_a_backup_onto_a_store_a_daemon_runs_on_is_refused(tmp_path, capsys):
    path, other = tmp_path / "a.db", tmp_path / "b.db"
    store_with_jobs(path)
    store_with_jobs(other, n=3)
    with StoreLock(other):
        assert main(["store", "backup", "--force", "--store", str(path), str(other)]) == 2
        assert f"{other}: a daemon is running on this job store (it holds {other}.lock)" in capsys.readouterr().err
        assert job_ids(other) == ["j0000", "j0001", "j0002"]
    assert main(["store", "backup", "--force", "--store", str(path), str(other)]) == 0  # a copy of its own, as --force is for
    assert job_ids(other) == job_ids(path)


_KILLED_WRITER = """
import os, sys
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.core.model import Job, StepSpec
store = SqliteJobStore(sys.argv[1])
store.submit_many([Job(f"w{i}", "etl", "analytics", 1000.0, 8200.0, 600.0, StepSpec(args=("true",))) for i in range(12)])
os._exit(0)  # killed: no close, so the WAL keeps its frames
"""


def test_a_backup_over_a_store_a_killed_process_left_a_wal_beside_is_refused(tmp_path, capsys):
    # Replaced, the old store's WAL would be applied to the backup at the next open: a mix of two
    # stores that quick_check passes. Refused, naming the WAL, and both stores are left as they were.
    source, dest = tmp_path / "sub.db", tmp_path / "live.db"
    store_with_jobs(source, n=3)
    done = run_python(_KILLED_WRITER, str(dest))
    assert done.returncode == 0, done.stderr
    wal = Path(f"{dest}-wal")
    assert wal.stat().st_size > 0
    before = {path.name: path.read_bytes() for path in (dest, wal)}
    assert main(["store", "backup", "--store", str(source), str(dest), "--force"]) == 2
    err = capsys.readouterr().err
    assert "has a write-ahead log beside it" in " ".join(err.split()) and "live.db-wal" in err
    assert {path.name: path.read_bytes() for path in (dest, wal)} == before
    assert len(job_ids(dest)) == 12  # the WAL's jobs, read through it


def test_restore_refuses_a_store_path_that_is_another_stores_side_file(tmp_path):
    path, other, backup = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "backup.db"
    store_with_jobs(path)
    store_with_jobs(other, n=3)
    with SqliteJobStore(path) as store:
        store.backup(backup)
    with StoreLock(other) as daemon:
        inode = os.stat(daemon.path).st_ino
        with pytest.raises(StoreError, match=f"b.db.lock: is the daemon lock of the job store {other}"):
            restore_store(backup, daemon.path)
        (tmp_path / "b.db-journal").write_bytes(b"")  # as journal_mode=TRUNCATE leaves it
        with pytest.raises(StoreError, match=f"b.db-journal: is the rollback journal of the job store {other}"):
            restore_store(backup, f"{other}-journal")
        other.rename(tmp_path / "moved.db")  # b.db.lock is now beside no store, and still held
        with pytest.raises(StoreError, match="b.db.lock: is held by a running process"):
            restore_store(backup, daemon.path)
        assert os.stat(daemon.path).st_ino == inode
        assert sorted(p.name for p in tmp_path.iterdir() if "before-restore" in p.name) == []


# -- finding 2: restore checks the backup as `store check` does ------------------------------


def test_restore_refuses_a_backup_that_store_check_refuses_and_leaves_the_store_as_it_was(tmp_path, capsys):
    path, backup = tmp_path / "jobs.db", tmp_path / "backup.db"
    store_with_jobs(path)
    with SqliteJobStore(path) as store:
        store.backup(backup)
    conn = sqlite3.connect(backup, isolation_level=None)
    conn.execute("UPDATE jobs SET step = 'not json {' WHERE job_id = 'j0003'")
    conn.close()
    assert main(["store", "check", "--store", str(backup)]) == 2
    checked = capsys.readouterr().err
    assert "job 'j0003': its row in the job store is damaged" in checked
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main(["store", "restore", "--store", str(path), str(backup)]) == 2
    assert "job 'j0003': its row in the job store is damaged" in capsys.readouterr().err
    with pytest.raises(StoreError, match=f"{backup}: .*job 'j0003'"):
        restore_store(backup, path)
    # The copy is checked, under the store's lock (whose empty file is then there): nothing else changed.
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "jobs.db.lock"} == before
    assert check_store(path).jobs == 20 and main(["jobs", "--store", str(path)]) == 0



def test_a_damaged_backup_is_not_met_with_advice_to_restore_it(tmp_path, capsys):
    # A backup whose pages fail quick_check: the advice for a damaged store ("restore it with store
    # restore BACKUP") is wrong here, where the damaged file is the backup being restored.
    path, backup = tmp_path / "jobs.db", tmp_path / "backup.db"
    store_with_jobs(path, n=400)
    with SqliteJobStore(path) as store:
        store.backup(backup)
    page = sqlite3.connect(backup).execute("PRAGMA page_size").fetchone()[0]
    with open(backup, "r+b") as f:
        f.seek(2 * page)
        f.write(b"\xff" * page)
    assert main(["store", "restore", "--store", str(path), str(backup)]) == 2
    message = capsys.readouterr().err
    assert "corrupt or unreadable" in message and "restore another backup" in message
    assert "restore it with" not in message
    assert check_store(path).jobs == 400


# -- finding 3: restore is refused while another program has the store open, in either journal mode --

_HOLDER = """
import sqlite3, sys
from autoscaler.adapters.sqlite_store import SqliteJobStore
path, how = sys.argv[1], sys.argv[2]
if how == "reader":  # `autoscaler jobs` or a dry run, between two reads
    store = SqliteJobStore(path, read_only=True)
    store.max_seq()
else:  # another program in the middle of a write transaction
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO meta (key, value) VALUES ('written by', 'another program')")
print("open", flush=True)
sys.stdin.read()
if how == "writer":
    conn.execute("COMMIT")
"""


def _hold(path: Path, how: str) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), how], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "open"
    return holder


def _release(holder: subprocess.Popen) -> None:
    holder.stdin.close()
    assert holder.wait(timeout=60) == 0


def test_a_backup_keeps_wal_mode_so_a_reader_of_the_restored_store_is_seen_by_the_next_restore(tmp_path):
    path, backup = tmp_path / "jobs.db", tmp_path / "backup.db"
    store_with_jobs(path)
    with SqliteJobStore(path) as store:
        store.backup(backup)
    assert backup.read_bytes()[18:20] == b"\x02\x02"  # the header's write and read versions: 2 is WAL
    assert not Path(f"{backup}-wal").exists()  # still one file
    restore_store(backup, path)
    assert path.read_bytes()[18:20] == b"\x02\x02"
    holder = _hold(path, "reader")
    try:
        before = path.read_bytes()
        with pytest.raises(StoreError, match="open in another program"):
            restore_store(backup, path)
        assert path.read_bytes() == before
    finally:
        _release(holder)
    assert restore_store(backup, path).summary.jobs == 20


def test_restore_is_refused_while_another_program_writes_to_a_store_in_rollback_journal_mode(tmp_path):
    path, backup = tmp_path / "jobs.db", tmp_path / "backup.db"
    store_with_jobs(path)
    with SqliteJobStore(path) as store:
        store.backup(backup)
    conn = sqlite3.connect(path, isolation_level=None)  # as a store restored from a rollback-journal backup is
    assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    conn.close()
    holder = _hold(path, "writer")
    try:
        assert Path(f"{path}-journal").exists()
        before = path.read_bytes()
        with pytest.raises(StoreError, match="open in another program"):
            restore_store(backup, path)
        assert path.read_bytes() == before and not list(tmp_path.glob("*.before-restore-*"))
    finally:
        _release(holder)  # its transaction commits: the file under it was never moved
    assert check_store(path).jobs == 20
    assert restore_store(backup, path).summary.jobs == 20


# -- finding 16: restore says what the live store has that the backup lacks ------------------


def test_restore_names_what_the_store_has_that_the_backup_lacks_and_needs_force_to_lose_it(tmp_path, capsys):
    path, backup = tmp_path / "jobs.db", tmp_path / "backup.db"
    store_with_jobs(path)  # 20 jobs, slot 7, j0000 released
    with SqliteJobStore(path) as store:
        store.backup(backup)
        store.submit_many([job(f"late{i}", 5000.0 + i) for i in range(5)])  # after the backup
        store.commit_slot(8, {"last_slot": 8}, {"late0": (6000.0, "s-2"), "late1": (6000.0, "s-3"), "j0005": (6000.0, "s-4")}, {"slot": 8})
        store.commit_slot(9, {"last_slot": 9}, {}, {"slot": 9}, states={"j0000": "done"})
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(StoreError) as refused:
        restore_store(backup, path)
    said = str(refused.value)
    assert said.startswith(f"{path}: the store has what the backup {backup} lacks: 5 jobs submitted after it")
    for part in (
        "(2 of them released to the cluster, their steps named autoscaler:<job id>)",
        "late0, late1, late2, late3, late4",
        "2 jobs further along than in the backup (released, running or finished since): j0000, j0005",
        "slots 8 to 9 decided",
        "give --force to restore anyway",
    ):
        assert part in said, said
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "jobs.db.lock"} == before
    assert main(["store", "restore", "--store", str(path), str(backup)]) == 2
    assert "5 jobs submitted after it" in capsys.readouterr().err
    assert main(["store", "restore", "--force", "--store", str(path), str(backup)]) == 0
    err = capsys.readouterr().err
    assert "the replaced store had what the backup lacks: 5 jobs submitted after it" in err and "kept as" in err
    assert job_ids(path) == [f"j{i:04d}" for i in range(20)]
    kept = next(p for p in tmp_path.iterdir() if p.name.startswith("jobs.db.before-restore-") and "-" not in p.name[-4:])
    assert "late4" in job_ids(kept)  # what was lost is in the copy kept beside the store


def test_restore_onto_a_store_that_has_nothing_the_backup_lacks_needs_no_force(tmp_path):
    path, backup = tmp_path / "jobs.db", tmp_path / "backup.db"
    store_with_jobs(path)
    with SqliteJobStore(path) as store:
        store.backup(backup)
        store.commit_slot(8, {"last_slot": 8}, {}, {"slot": 8}, prune_before_s=1e9, states={"j0001": "done"})
    with SqliteJobStore(backup) as older:  # the backup is further along: the store lacks, the backup does not
        older.commit_slot(9, {"last_slot": 9}, {}, {"slot": 9}, states={"j0001": "done", "j0002": "done"})
    assert restore_store(backup, path).lacking is None


# -- finding 18: what a killed backup or restore leaves behind -------------------------------

_KILLED_COPY = """
import os, signal, sys
from pathlib import Path
from autoscaler.adapters import store_copy
from autoscaler.adapters.sqlite_store import SqliteJobStore, restore_store
what, path, other, when = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
real_check = store_copy.quick_check


def stop(conn, full):
    # The copy is written and open in WAL mode (its -wal and -shm beside it), not yet checked.
    if when == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    print("copying", flush=True)
    sys.stdin.read()  # a copy still being written, until told to go on
    return real_check(conn, full)


store_copy.quick_check = stop
if what == "backup":
    with SqliteJobStore(path, read_only=True) as store:
        store.backup(other, force=True)
else:
    restore_store(other, path, force=True)
"""


def _staged_names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _kill_two(what: str, path: Path, backup: Path) -> list[str]:
    for _ in range(2):
        killed = run_python(_KILLED_COPY, what, str(path), str(backup), "kill")
        assert killed.returncode == -9, killed.stderr
    left = _staged_names(path.parent)
    suffix = ".tmp" if what == "backup" else ".restore.tmp"
    named = "backup.db" if what == "backup" else "jobs.db"
    # The second removed what the first left, and left its own.
    assert len([n for n in left if n.endswith(suffix)]) == 1 and all(n.startswith(f".{named}.") for n in left), left
    assert any(n.endswith(f"{suffix}-wal") for n in left), left  # the copy's own WAL, left too
    return left


def test_the_files_of_a_killed_restore_are_removed_by_the_next_restore(tmp_path):
    path, backup = tmp_path / "jobs.db", tmp_path / "backup.db"
    store_with_jobs(path)
    with SqliteJobStore(path) as store:
        store.backup(backup)
    _kill_two("restore", path, backup)  # a second restore cannot run beside one: the store's lock
    restore_store(backup, path)
    assert _staged_names(tmp_path) == []
    assert check_store(path).jobs == 20


def test_the_files_of_a_killed_backup_are_removed_by_the_next_and_those_of_one_in_progress_are_not(tmp_path):
    path, backup = tmp_path / "jobs.db", tmp_path / "backup.db"
    store_with_jobs(path)
    with SqliteJobStore(path) as store:
        store.backup(backup)
    left = _kill_two("backup", path, backup)
    live = subprocess.Popen(
        [sys.executable, "-c", _KILLED_COPY, "backup", str(path), str(backup), "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert live.stdout.readline().strip() == "copying"
        in_progress = sorted(set(_staged_names(tmp_path)) - set(left))
        assert in_progress
        with SqliteJobStore(path) as store:
            store.backup(backup, force=True)
        assert _staged_names(tmp_path) == in_progress  # the killed ones' are gone, the live one's kept
    finally:
        live.stdin.close()
        live.wait(timeout=60)
    assert live.returncode == 0
    assert _staged_names(tmp_path) == []
    assert check_store(backup).jobs == 20


_KILLED_BETWEEN_RENAMES = """
import os, signal, sys
from autoscaler.adapters.sqlite_store import restore_store


def killed(*args):
    # The store and its WAL are renamed aside; the copy was about to take the store's name.
    os.kill(os.getpid(), signal.SIGKILL)


os.replace = killed
restore_store(sys.argv[2], sys.argv[1], force=True)
"""


def test_a_restore_killed_between_its_renames_names_the_store_it_moved_aside_and_how_to_put_it_back(tmp_path, capsys):
    path, backup = tmp_path / "jobs.db", tmp_path / "backup.db"
    store_with_jobs(path)
    with SqliteJobStore(path) as store:
        store.backup(backup)
        store.submit(job("after-backup"))
    killed = run_python(_KILLED_BETWEEN_RENAMES, str(path), str(backup))
    assert killed.returncode == -9, killed.stderr
    assert not path.exists()
    aside = next(p for p in tmp_path.iterdir() if p.name.startswith("jobs.db.before-restore-") and not p.name.endswith("-wal"))
    assert main(["jobs", "--store", str(path)]) == 2
    said = capsys.readouterr().err
    assert "is now missing" in said
    assert f"a restore was stopped after it moved the store aside: the store as it was is {aside}" in said, said
    assert f"mv {aside} {path}" in said
    os.rename(aside, path)  # as it says
    if Path(f"{aside}-wal").exists():
        os.rename(f"{aside}-wal", f"{path}-wal")
    assert "after-backup" in job_ids(path) and check_store(path).jobs == 21
