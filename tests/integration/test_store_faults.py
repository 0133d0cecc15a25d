"""The job store against the faults of a real disk, on real SQLite files: a store cut to 0 bytes or
lost (told from a new one by its marker), a damaged page, backup and restore, two names of one store
(symlink, relative path, hard link), and a full disk (SQLITE_FULL from ``max_page_count``, and a real
ENOSPC on a small tmpfs where the kernel lets this user mount one)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autoscaler.adapters.lock import StoreLock, lock_path
from autoscaler.adapters.shadow import ShadowStore
from autoscaler.adapters.sqlite_store import (
    APPLICATION_ID,
    SqliteJobStore,
    check_store,
    marker_path,
    read_marker,
    restore_store,
)
from autoscaler.app.cli import main
from autoscaler.core.errors import ConfigError, StoreError
from autoscaler.core.model import Job, StepSpec


def job(job_id: str, submit_s: float = 1000.0) -> Job:
    return Job(job_id, "etl", "analytics", submit_s, submit_s + 7200.0, 600.0, StepSpec(args=("spark-submit", "x.py")))


def folder_listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def store_with_jobs(path: Path, n: int = 50, slot: int | None = 7) -> None:
    with SqliteJobStore(path) as store:
        store.submit_many([job(f"j{i:04d}", 1000.0 + i) for i in range(n)])
        if slot is not None:
            store.commit_slot(slot, {"last_slot": slot}, {"j0000": (2000.0, "s-1")}, {"slot": slot})


def raw_count(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
    finally:
        conn.close()


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=120)


# -- a store that was there and is now gone, or damaged --------------------------------------


def test_a_new_store_gets_a_marker_saying_when_it_was_created(tmp_path):
    path = tmp_path / "jobs.db"
    before_s = time.time()
    SqliteJobStore(path).close()
    marker = read_marker(marker_path(path))
    assert marker_path(path) == tmp_path / "jobs.db.created"
    assert before_s <= marker["created_s"] <= time.time()
    assert marker["application_id"] == APPLICATION_ID and marker["store"] == str(path)


def test_a_store_cut_to_zero_bytes_is_refused_naming_the_marker_and_left_as_it_is(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path)
    created = time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(read_marker(marker_path(path))["created_s"]))
    path.write_bytes(b"")
    before = folder_listing(tmp_path)
    with pytest.raises(StoreError) as caught:
        SqliteJobStore(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: the job store was created on {created} and is now empty (0 bytes)")
    assert "autoscaler store restore BACKUP" in message and f"remove {marker_path(path)}" in message
    assert folder_listing(tmp_path) == before


def test_the_cli_refuses_a_cut_store_instead_of_listing_no_jobs(tmp_path, capsys):
    path = tmp_path / "jobs.db"
    store_with_jobs(path)
    path.write_bytes(b"")
    assert main(["jobs", "--store", str(path)]) == 2
    assert "is now empty (0 bytes)" in capsys.readouterr().err
    assert path.stat().st_size == 0


def test_a_cut_store_with_its_wal_beside_it_is_refused_even_without_a_marker(tmp_path):
    """What a crash leaves: the file and its WAL holding the last commits; then the file is cut."""
    live, left = tmp_path / "live", tmp_path / "left"
    live.mkdir()
    left.mkdir()
    with SqliteJobStore(live / "jobs.db") as store:
        store.submit_many([job(f"j{i}") for i in range(50)])
        shutil.copy(live / "jobs.db-wal", left / "jobs.db-wal")  # while open: the WAL holds the 50 jobs
    (left / "jobs.db").write_bytes(b"")
    wal_bytes = (left / "jobs.db-wal").stat().st_size
    assert wal_bytes > 0
    before = folder_listing(left)
    with pytest.raises(StoreError, match=rf"is empty \(0 bytes\), but its WAL .*jobs.db-wal holds {wal_bytes:,} bytes"):
        SqliteJobStore(left / "jobs.db")
    assert folder_listing(left) == before


def test_a_store_that_is_gone_with_its_marker_left_is_refused_and_removing_the_marker_starts_afresh(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path)
    path.unlink()
    with pytest.raises(StoreError, match="is now missing"):
        SqliteJobStore(path)
    assert not path.exists()
    marker_path(path).unlink()  # on purpose
    with SqliteJobStore(path) as store:
        assert store.all_jobs() == []
    assert read_marker(marker_path(path))["created_s"] > 0


def test_a_store_from_before_markers_gets_one_and_is_then_guarded(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path)
    marker_path(path).unlink()  # as a store made before markers existed
    before_s = time.time()
    with SqliteJobStore(path) as store:
        assert len(store.all_jobs()) == 50
    marker = read_marker(marker_path(path))
    assert marker["created_s"] is None and before_s <= marker["first_seen_s"] <= time.time()
    path.write_bytes(b"")
    with pytest.raises(StoreError, match="was first seen on .* and is now empty"):
        SqliteJobStore(path)


def test_an_empty_file_with_nothing_beside_it_is_still_a_new_store(tmp_path):
    path = tmp_path / "jobs.db"
    path.write_bytes(b"")
    with SqliteJobStore(path) as store:
        assert store.submit(job("a"))
    assert read_marker(marker_path(path))["created_s"] > 0


def _page_of(path: Path, table: str) -> tuple[int, int]:
    conn = sqlite3.connect(path)
    try:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        return root, conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()


def _smash_page(path: Path, page: int, page_size: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek((page - 1) * page_size)
        handle.write(b"\xff" * 64)  # an invalid b-tree page type and header


def test_a_damaged_page_is_found_at_open_and_the_file_left_unchanged(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path, n=2000)
    _smash_page(path, *_page_of(path, "jobs"))
    before = folder_listing(tmp_path)
    with pytest.raises(StoreError) as caught:
        SqliteJobStore(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: corrupt or unreadable SQLite database (")
    assert "created on" in message and "autoscaler store restore BACKUP" in message
    assert folder_listing(tmp_path) == before


def test_a_store_cut_short_is_refused_from_its_header(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path, n=2000)
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size // 2 // 4096 * 4096)
    with pytest.raises(StoreError, match=rf"cut short: {size // 2 // 4096 * 4096:,} bytes, where its header counts {size // 4096:,} pages"):
        SqliteJobStore(path)


def test_a_large_store_is_checked_in_its_small_tables_at_open_and_whole_by_check_store(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path, n=2000)
    _smash_page(path, *_page_of(path, "jobs"))
    # A file over the bound: the jobs table's damage is not looked for at open ...
    SqliteJobStore(path, full_check_max_bytes=0).close()
    # ... but is by a whole check.
    with pytest.raises(StoreError, match="corrupt or unreadable"):
        check_store(path)
    store_with_jobs(tmp_path / "other.db", n=10)
    _smash_page(tmp_path / "other.db", *_page_of(tmp_path / "other.db", "meta"))
    with pytest.raises(StoreError, match="corrupt or unreadable"):  # a small table is checked at any size
        SqliteJobStore(tmp_path / "other.db", full_check_max_bytes=0)


# -- backup and restore ---------------------------------------------------------------------


def _contents(path: Path) -> dict:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("meta", "jobs", "controller_state", "decisions", "intents")
        }
    finally:
        conn.close()


def test_a_backup_is_the_store_in_one_file_and_an_existing_file_is_not_replaced_without_force(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path, n=120)
    with SqliteJobStore(path) as store:
        summary = store.backup(tmp_path / "backup.db")
        assert (summary.jobs, summary.active_jobs, summary.last_slot, summary.max_seq) == (120, 120, 7, 120)
        assert not (tmp_path / "backup.db-wal").exists()
        assert _contents(tmp_path / "backup.db") == _contents(path)
        store.submit(job("later"))
        before = (tmp_path / "backup.db").read_bytes()
        with pytest.raises(StoreError, match="backup.db: exists; give --force"):
            store.backup(tmp_path / "backup.db")
        assert (tmp_path / "backup.db").read_bytes() == before
        assert store.backup(tmp_path / "backup.db", force=True).jobs == 121
        with pytest.raises(StoreError, match="is the job store itself"):
            store.backup(path, force=True)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no staged file left
    assert check_store(tmp_path / "backup.db").jobs == 121


def test_a_backup_does_not_wait_for_nor_see_a_write_another_connection_has_not_committed(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path, n=10)
    writer = sqlite3.connect(path, isolation_level=None, timeout=0)
    with SqliteJobStore(path) as store:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("DELETE FROM jobs")
        summary = store.backup(tmp_path / "backup.db")  # a WAL reader: it would wait 30 s for a lock, then fail
        writer.execute("COMMIT")
    writer.close()
    assert summary.jobs == 10 and raw_count(tmp_path / "backup.db") == 10
    assert raw_count(path) == 0


_WRITER = """
import sys, time
from pathlib import Path
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.core.model import Job, StepSpec
path, stop = Path(sys.argv[1]), Path(sys.argv[2])
batch = 0
with SqliteJobStore(path, durable=False) as store:
    while not stop.exists():
        jobs = [Job(f"w{batch}-{i}", "etl", "t", 1e3, 1e4, 60.0, StepSpec(args=("true",))) for i in range(25)]
        store.submit_many(jobs)  # 25 jobs and last_seq, in one transaction
        batch += 1
        print(batch, flush=True)
"""


def test_a_backup_taken_while_another_process_writes_is_one_commit_of_the_store(tmp_path):
    path, stop = tmp_path / "jobs.db", tmp_path / "stop"
    store_with_jobs(path, n=5000, slot=None)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(stop)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "1"  # it is writing
        with SqliteJobStore(path) as store:
            floor = store.max_seq()
            summary = store.backup(tmp_path / "backup.db")
            ceiling = store.max_seq()
    finally:
        stop.touch()
        writer.wait(timeout=60)
    assert writer.returncode == 0
    conn = sqlite3.connect(tmp_path / "backup.db")
    seqs = [row[0] for row in conn.execute("SELECT seq FROM jobs ORDER BY seq")]
    last_seq = int(conn.execute("SELECT value FROM meta WHERE key = 'last_seq'").fetchone()[0])
    conn.close()
    # One commit's view: every job up to the mark and none past it, whole batches of 25.
    assert seqs == list(range(1, last_seq + 1)) and (last_seq - 5000) % 25 == 0
    assert floor <= last_seq <= ceiling and summary.jobs == last_seq
    print(f"backup while writing: {floor - 5000} to {ceiling - 5000} jobs written around it, the copy has {last_seq - 5000}")


def test_restore_puts_a_backup_in_place_of_a_cut_store_and_keeps_the_old_files(tmp_path, capsys):
    path = tmp_path / "jobs.db"
    store_with_jobs(path, n=40)
    created_s = read_marker(marker_path(path))["created_s"]
    assert main(["store", "backup", "--store", str(path), str(tmp_path / "backup.db")]) == 0
    assert "backed up" in capsys.readouterr().out
    # After the backup: one more job, left in the WAL by a process that died, then the file is cut.
    left = run_python(
        """
        import os, sys
        from autoscaler.adapters.sqlite_store import SqliteJobStore
        from autoscaler.core.model import Job, StepSpec
        store = SqliteJobStore(sys.argv[1])
        store.submit(Job("after-backup", "etl", "t", 1e3, 1e4, 60.0, StepSpec(args=("true",))))
        os._exit(0)
        """,
        str(path),
    )
    assert left.returncode == 0, left.stderr
    wal = (tmp_path / "jobs.db-wal").read_bytes()
    assert wal
    path.write_bytes(b"")
    assert main(["store", "restore", "--store", str(path), str(tmp_path / "backup.db")]) == 0
    said = capsys.readouterr()
    assert said.out.startswith(f"restored {path} from {tmp_path / 'backup.db'}: 40 jobs (40 queued, released or running), last slot 7")
    kept = sorted(p for p in tmp_path.iterdir() if ".before-restore-" in p.name)
    assert [p.name.endswith("-wal") for p in kept] == [False, True] and kept[0].read_bytes() == b"" and kept[1].read_bytes() == wal
    assert str(kept[0]) in said.err
    assert not (tmp_path / "jobs.db-wal").exists()  # the old WAL is never beside the new file
    marker = read_marker(marker_path(path))
    assert marker["created_s"] == created_s and marker["restored_from"] == str(tmp_path / "backup.db")
    with SqliteJobStore(path) as store:
        assert sorted(j.job_id for j in store.all_jobs()) == [f"j{i:04d}" for i in range(40)]
        assert store.last_slot() == 7


def test_restore_is_refused_while_a_daemon_holds_the_lock_and_the_store_is_unchanged(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path, n=3)
    with SqliteJobStore(path) as store:
        store.backup(tmp_path / "backup.db")
    store_with_jobs(tmp_path / "x.db", n=1)
    before = folder_listing(tmp_path)
    with StoreLock(path):
        with pytest.raises(ConfigError, match="another daemon is running"):
            restore_store(tmp_path / "backup.db", path)
    assert folder_listing(tmp_path) == {**before, "jobs.db.lock": b""}


def test_restore_is_refused_while_another_program_has_the_store_open(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path, n=3)
    with SqliteJobStore(path) as store:
        store.backup(tmp_path / "backup.db")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from autoscaler.adapters.sqlite_store import SqliteJobStore\n"
         "s = SqliteJobStore(sys.argv[1]); s.max_seq(); print('open', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "open"
        before = path.read_bytes()
        with pytest.raises(StoreError, match="open in another program"):
            restore_store(tmp_path / "backup.db", path)
        assert path.read_bytes() == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert restore_store(tmp_path / "backup.db", path).summary.jobs == 3  # once it has closed


def test_restore_takes_only_a_whole_store_of_ours_and_replaces_only_a_store(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path, n=3)
    foreign = tmp_path / "theirs.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    (tmp_path / "notes.txt").write_text("not a store\n")
    store_with_jobs(tmp_path / "damaged.db", n=2000)
    _smash_page(tmp_path / "damaged.db", *_page_of(tmp_path / "damaged.db", "jobs"))
    before = folder_listing(tmp_path)
    for source, message in [
        (foreign, "another application"),
        (tmp_path / "notes.txt", "not an SQLite database"),
        (tmp_path / "damaged.db", "corrupt or unreadable"),
        (tmp_path / "nothing.db", "not a job store to restore from"),
        (path, "is the job store itself"),
    ]:
        with pytest.raises(StoreError, match=message):
            restore_store(source, path)
    with SqliteJobStore(path) as store:
        store.backup(tmp_path / "backup.db")
    for target, message in [(foreign, "another application"), (tmp_path / "notes.txt", "not an SQLite database")]:
        with pytest.raises(StoreError, match=f"{message}.*restore replaces only a job store"):
            restore_store(tmp_path / "backup.db", target)
    del before["jobs.db"]  # opened again for the backup: SQLite may have rewritten its header
    after = folder_listing(tmp_path)
    assert {name: after[name] for name in before} == before


def test_store_check_reads_the_whole_store(tmp_path, capsys):
    path = tmp_path / "jobs.db"
    store_with_jobs(path, n=12)
    assert main(["store", "check", "--store", str(path)]) == 0
    assert capsys.readouterr().out.startswith(
        f"{path}: ok (quick_check of every page): 12 jobs (12 queued, released or running), last slot 7"
    )
    assert main(["store", "check", "--store", str(tmp_path / "none.db")]) == 2
    assert "no job store here" in capsys.readouterr().err


# -- one lock for every name of a store ------------------------------------------------------


def test_a_symlink_a_relative_path_and_a_detour_reach_the_same_lock(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    path = tmp_path / "data" / "jobs.db"
    SqliteJobStore(path).close()
    (tmp_path / "link.db").symlink_to(path)
    monkeypatch.chdir(tmp_path / "data")
    names = [tmp_path / "link.db", Path("jobs.db"), tmp_path / "data" / ".." / "data" / "jobs.db"]
    assert {lock_path(name) for name in names} == {Path(str(path) + ".lock")}
    with StoreLock(path):
        for name in names:
            with pytest.raises(ConfigError, match="another daemon is running"):
                with StoreLock(name):
                    pass
    with StoreLock(tmp_path / "link.db"):
        with pytest.raises(ConfigError, match="another daemon is running"):
            with StoreLock(path):
                pass
    assert marker_path(tmp_path / "link.db") == marker_path(path)


def test_a_store_with_a_second_hard_link_is_refused_by_the_lock_and_the_store(tmp_path):
    path = tmp_path / "jobs.db"
    store_with_jobs(path, n=2)
    os.link(path, tmp_path / "other-name.db")
    for name in (path, tmp_path / "other-name.db"):
        with pytest.raises(ConfigError, match="2 hard links"):
            with StoreLock(name):
                pass
        with pytest.raises(StoreError, match="2 hard links"):
            SqliteJobStore(name)
    assert check_store(tmp_path / "other-name.db").jobs == 2  # reading it is fine
    (tmp_path / "other-name.db").unlink()
    with StoreLock(path), SqliteJobStore(path) as store:
        assert len(store.all_jobs()) == 2


# -- a full disk, and the intent written before a slot acts ----------------------------------


def _fill_pages(store: SqliteJobStore) -> None:
    """Let the store's connection grow the file by no page: SQLite then fails as on a full disk (SQLITE_FULL)."""
    conn = store._conn  # the store's own connection: the limit is per connection
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")


def _free_in(message: str) -> int:
    return int(re.search(r"\(([\d,]+) bytes free on its file system\)", message).group(1).replace(",", ""))


def test_intents_are_recorded_read_back_and_settled_by_the_slots_commit(tmp_path):
    path = tmp_path / "jobs.db"
    with SqliteJobStore(path) as store:
        assert store.pending_intent() is None
        before_s = time.time()
        store.record_intent(5, ["a", "b"], 3)
        intent = store.pending_intent()
        assert {k: intent[k] for k in ("slot", "job_ids", "nodes")} == {"slot": 5, "job_ids": ["a", "b"], "nodes": 3}
        assert before_s <= intent["recorded_s"] <= time.time()
        store.record_intent(5, ["a"], 2)  # the slot retried: replaces
        store.record_intent(6, [], 4)
        assert store.pending_intent()["slot"] == 6
        store.commit_slot(5, {}, {}, {"slot": 5})
        assert store.pending_intent()["slot"] == 6  # a later slot's intent stays
        store.commit_slot(6, {}, {}, {"slot": 6})
        assert store.pending_intent() is None
        store.record_intent(7, ["c"], 1)
    with SqliteJobStore(path) as again:  # durable: the restart sees it
        assert again.pending_intent()["job_ids"] == ["c"]
        for bad, message in [((7.5, [], 1), "slot must be a whole number"), ((8, "ab", 1), "job_ids must be a list"),
                             ((8, [1], 1), "job_ids must be a list"), ((8, 5, 1), "job_ids must be a list"), ((8, [], -1), "nodes must be a whole number >= 0")]:  # fmt: skip
            with pytest.raises(StoreError, match=message):
                again.record_intent(*bad)
        assert again.pending_intent()["slot"] == 7


def test_an_intent_that_cannot_be_written_says_disk_full_and_writes_nothing(tmp_path):
    path = tmp_path / "jobs.db"
    with SqliteJobStore(path) as store:
        store.submit(job("a"))
        _fill_pages(store)
        ids = [f"job-{i:06d}" for i in range(5000)]  # ~60 kB: needs new pages
        with pytest.raises(StoreError) as caught:
            store.record_intent(3, ids, 10)
        message = str(caught.value)
        assert message.startswith(f"disk full: {path} (") and message.endswith("nothing was written")
        assert abs(_free_in(message) - shutil.disk_usage(tmp_path).free) < 2**30  # others write to this disk too
        assert store.pending_intent() is None
        store.record_intent(3, ["a"], 1)  # a small one fits in the pages there are
    with SqliteJobStore(path) as again:
        assert again.pending_intent()["job_ids"] == ["a"]


def test_a_slot_commit_that_cannot_be_written_says_disk_full_and_changes_nothing(tmp_path):
    path = tmp_path / "jobs.db"
    with SqliteJobStore(path) as store:
        store.submit_many([job(f"j{i}") for i in range(10)])
        store.commit_slot(1, {"last_slot": 1}, {}, {"slot": 1})
        store.record_intent(2, ["j0"], 2)
        _fill_pages(store)
        with pytest.raises(StoreError, match=rf"^disk full: {re.escape(str(path))} \([\d,]+ bytes free on its file system\)"):
            store.commit_slot(2, {"last_slot": 2}, {"j0": (5.0, "s-0")}, {"slot": 2, "notes": "x" * 100_000})
        assert store.last_slot() == 1 and store.load_state() == {"last_slot": 1}
        assert store.pending_intent()["slot"] == 2
        assert {j.job_id: j.state for j in store.all_jobs()}["j0"] == "queued"


def test_the_shadow_store_keeps_intents_in_memory(tmp_path):
    shadow = ShadowStore(None)
    shadow.record_intent(4, ["a"], 2)
    shadow.record_intent(5, ["b"], 3)
    assert shadow.pending_intent()["job_ids"] == ["b"]
    shadow.commit_slot(5, {}, {}, {"slot": 5})
    assert shadow.pending_intent() is None


_FULL_DISK = """
import json, os, sys
from pathlib import Path
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.core.errors import StoreError
from autoscaler.core.model import Job, StepSpec
folder = Path(sys.argv[1])
said = {}


def fill():
    # Write to a file until the file system is full.
    with open(folder / "filler", "ab", buffering=0) as filler:
        try:
            while True:
                filler.write(b"x" * 512)
        except OSError:
            pass


store = SqliteJobStore(folder / "jobs.db")
store.submit(Job("a", "etl", "t", 1e3, 1e4, 60.0, StepSpec(args=("true",))))
store.close()
fill()
for what, act in [
    ("open", lambda: SqliteJobStore(folder / "jobs.db").close()),
    ("create", lambda: SqliteJobStore(folder / "new.db").close()),
]:
    try:
        act()
        said[what] = "ok"
    except StoreError as exc:
        said[what] = str(exc)
os.remove(folder / "filler")
store = SqliteJobStore(folder / "jobs.db")
fill()
try:
    store.commit_slot(1, {}, {}, {"notes": "x" * 200_000})
    said["commit"] = "ok"
except StoreError as exc:
    said["commit"] = str(exc)
said["last_slot"] = store.last_slot()
print(json.dumps(said))
"""


def test_a_real_full_disk_is_named_at_open_at_creation_and_at_commit(tmp_path):
    """On a 1 MiB tmpfs, mounted in a user and mount namespace of its own (skipped where the kernel
    does not allow that): ENOSPC as the daemon meets it."""
    folder = tmp_path / "small"
    folder.mkdir()
    script = tmp_path / "full.py"
    script.write_text(_FULL_DISK)
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True) if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (unshare -rm is not allowed)")
    run = subprocess.run(
        ["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$1" && exec "$2" "$3" "$1"', "sh", str(folder), sys.executable, str(script)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    said = json.loads(run.stdout)
    for what in ("open", "create", "commit"):
        assert re.match(rf"disk full: {re.escape(str(folder))}/(jobs|new)\.db \(0 bytes free on its file system\)", said[what]), said
    assert said["last_slot"] is None


def test_a_row_whose_content_cannot_be_read_is_named_by_jobs_and_by_store_check(tmp_path, capsys):
    path = tmp_path / "jobs.db"
    with SqliteJobStore(path) as store:
        store.submit_many([job("a"), job("b")])
        store._conn.execute("UPDATE jobs SET step = 'not json {' WHERE job_id = 'b'")
    assert main(["jobs", "--store", str(path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("autoscaler: error: job 'b': its row in the job store is damaged") and "Traceback" not in error
    assert main(["store", "check", "--store", str(path)]) == 2
    assert "job 'b': its row in the job store is damaged" in capsys.readouterr().err


def test_reading_commands_leave_a_killed_daemons_files_byte_for_byte(tmp_path, capsys):
    import hashlib

    live = tmp_path / "live"
    live.mkdir()
    with SqliteJobStore(live / "jobs.db") as store:
        store.submit_many([job(f"j{i}") for i in range(50)])
        # The daemon dies here: its WAL is not checkpointed. Its files, as a SIGKILL leaves them:
        left = tmp_path / "left"
        left.mkdir()
        for name in ("jobs.db", "jobs.db-wal", "jobs.db.created"):
            shutil.copy2(live / name, left / name)
    assert (left / "jobs.db-wal").stat().st_size > 0

    def digests() -> dict[str, str]:
        return {name: hashlib.sha256((left / name).read_bytes()).hexdigest() for name in ("jobs.db", "jobs.db-wal")}

    before = digests()
    assert main(["jobs", "--store", str(left / "jobs.db"), "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 50  # read through the WAL
    assert main(["store", "backup", str(tmp_path / "copy.db"), "--store", str(left / "jobs.db")]) == 0
    with SqliteJobStore(left / "jobs.db", read_only=True) as reader:
        shadow = ShadowStore(reader)
        assert len(shadow.active_jobs()) == 50
    assert digests() == before


def test_reading_commands_on_a_store_that_is_gone_say_how_to_restore_it(tmp_path, capsys):
    path = tmp_path / "jobs.db"
    with SqliteJobStore(path) as store:
        store.submit(job("a"))
    path.unlink()
    (tmp_path / "jobs.db-wal").unlink(missing_ok=True)
    for argv in (["jobs", "--store", str(path)], ["explain", "--store", str(path)]):
        assert main(argv) == 2
        error = capsys.readouterr().err
        assert "is now missing" in error and "store restore" in error and str(path) in error, error
    assert not path.exists()  # nothing was created in its place
