"""SqliteJobStore on a real file: round trips, idempotent submits, one-transaction slots, WAL, and
refusing (without touching) files that are not ours."""

from __future__ import annotations

import random
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from autoscaler.adapters.sqlite_store import APPLICATION_ID, SCHEMA_VERSION, SqliteJobStore
from autoscaler.errors import StoreError, SubmitError
from autoscaler.model import Job, StepSpec


def make_job(job_id: str = "job-1", submit_s: float = 1000.0, **overrides) -> Job:
    fields = dict(
        job_id=job_id,
        name="nightly etl",
        tenant="analytics",
        submit_s=submit_s,
        deadline_s=submit_s + 7200.0,
        length_s=612.25,
        step=StepSpec(jar="s3://bucket/etl.jar", args=("--in", "s3://bucket/in", ""), main_class="org.example.Etl"),
    )
    fields.update(overrides)
    return Job(**fields)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "jobs.sqlite"


@pytest.fixture
def store(db_path: Path):
    with SqliteJobStore(db_path) as opened:
        yield opened


@contextmanager
def raw(path: Path) -> Iterator[sqlite3.Connection]:
    """An independent connection, to check what is really on disk; committed and closed on exit."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            yield conn
    finally:
        conn.close()


def test_jobs_round_trip_exactly(store):
    jobs = [
        make_job("b", submit_s=2000.0),
        make_job("a", submit_s=1000.0, step=StepSpec(args=("bash", "-c", "echo hi"))),
        make_job("c", submit_s=2000.0, length_s=0.1 + 0.2, state="running", released_s=2100.5, step_id="s-1"),
    ]
    for job in jobs:
        assert store.submit(job) is True
    # Oldest submission first; equal times in the order stored.
    assert store.all_jobs() == [jobs[1], jobs[0], jobs[2]]
    assert store.all_jobs()[0].step.args == ("bash", "-c", "echo hi")
    assert isinstance(store.all_jobs()[0].step.args, tuple)
    assert store.all_jobs()[2].length_s == 0.1 + 0.2


def test_submit_is_idempotent_and_refuses_a_changed_job(store):
    job = make_job()
    assert store.submit(job) is True
    assert store.submit(job) is False
    with pytest.raises(SubmitError, match=r"job_id 'job-1' is already stored with different content \(deadline_s: stored"):
        store.submit(make_job(deadline_s=job.deadline_s + 1))
    with pytest.raises(SubmitError, match="step"):
        store.submit(make_job(step=StepSpec(args=("ls",))))
    assert store.all_jobs() == [job]


def test_resubmitting_a_released_job_is_still_the_same_job(store):
    job = make_job()
    store.submit(job)
    store.commit_slot(1, {"last_slot": 1}, {"job-1": (1500.0, "s-9")}, {"slot": 1})
    assert store.submit(job) is False
    assert store.all_jobs()[0].state == "released"


def test_commit_slot_saves_state_releases_and_decision_together(store):
    assert store.load_state() is None
    assert store.decisions() == []
    for job_id in ("q", "r", "gone"):
        store.submit(make_job(job_id))
    store.set_states({"gone": "done"})
    store.commit_slot(7, {"last_slot": 7, "queue": [1, 2]}, {"q": (1500.0, "s-1"), "unknown": (1500.0, "s-x")}, {"slot": 7, "nodes": 3})
    assert store.load_state() == {"last_slot": 7, "queue": [1, 2]}
    assert store.last_slot() == 7
    assert store.decisions() == [{"slot": 7, "nodes": 3}]
    by_id = {job.job_id: job for job in store.all_jobs()}
    assert (by_id["q"].state, by_id["q"].released_s, by_id["q"].step_id) == ("released", 1500.0, "s-1")
    assert (by_id["r"].state, by_id["r"].released_s, by_id["r"].step_id) == ("queued", None, None)
    assert [job.job_id for job in store.active_jobs()] == ["q", "r"]

    # Releasing again does not move a released job's time; the same slot decided again replaces its decision.
    store.commit_slot(7, {"last_slot": 7}, {"q": (1600.0, "s-2")}, {"slot": 7, "nodes": 4})
    store.commit_slot(8, {"last_slot": 8}, {}, {"slot": 8, "nodes": 0, "solve_ms": np.float32(1.5), "m": np.array([1.0, 2.0])})
    assert store.decisions() == [{"slot": 7, "nodes": 4}, {"slot": 8, "nodes": 0, "solve_ms": 1.5, "m": [1.0, 2.0]}]
    q = next(job for job in store.all_jobs() if job.job_id == "q")
    assert (q.released_s, q.step_id) == (1500.0, "s-1")


def test_a_job_found_running_before_its_commit_keeps_its_state_and_gets_its_step(store):
    # After a crash between add_step and commit_slot, reconciliation sees the step running first.
    store.submit(make_job("j"))
    store.set_states({"j": "running"})
    store.commit_slot(3, {}, {"j": (1500.0, "s-7")}, {})
    job = store.all_jobs()[0]
    assert (job.state, job.released_s, job.step_id) == ("running", 1500.0, "s-7")


def test_a_failing_commit_writes_nothing(store, db_path):
    store.submit(make_job("q"))
    store.commit_slot(1, {"last_slot": 1}, {}, {"slot": 1})
    store.submit(make_job("q2"))
    # The decision is serialised last, after the state row and the job update ran inside the transaction.
    with pytest.raises(StoreError, match="decision of slot 2 cannot be stored as JSON"):
        store.commit_slot(2, {"last_slot": 2}, {"q2": (2000.0, "s-2")}, {"slot": 2, "bad": object()})
    for view in (store, SqliteJobStore(db_path)):
        assert view.load_state() == {"last_slot": 1}
        assert view.last_slot() == 1
        assert view.decisions() == [{"slot": 1}]
        assert [(job.job_id, job.state, job.step_id) for job in view.all_jobs()] == [("q", "queued", None), ("q2", "queued", None)]
    with raw(db_path) as conn:
        assert conn.execute("SELECT state FROM controller_state").fetchall() == [('{"last_slot": 1}',)]
        assert conn.execute("SELECT count(*) FROM decisions").fetchone() == (1,)
    # The store is still usable afterwards.
    store.commit_slot(2, {"last_slot": 2}, {"q2": (2000.0, "s-2")}, {"slot": 2})
    assert store.load_state() == {"last_slot": 2}


def test_set_states_checks_every_state_before_changing_any(store):
    store.submit(make_job("a"))
    store.submit(make_job("b"))
    store.set_states({"a": "running", "nobody": "done"})
    with pytest.raises(StoreError, match="job states must be one of"):
        store.set_states({"a": "done", "b": "COMPLETED"})
    assert [(job.job_id, job.state) for job in store.all_jobs()] == [("a", "running"), ("b", "queued")]
    store.set_states({"a": "done", "b": "failed"})
    assert store.active_jobs() == []


def test_file_is_in_wal_mode_with_our_marker(store, db_path):
    store.submit(make_job())
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
        assert dict(conn.execute("SELECT key, value FROM meta")) == {
            "application": "deferral-autoscaler",
            "schema_version": str(SCHEMA_VERSION),
        }
    assert store._conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    store.close()
    header = db_path.read_bytes()[:100]
    assert header[18:20] == b"\x02\x02"  # file format versions 2 = WAL
    assert int.from_bytes(header[68:72], "big") == APPLICATION_ID


def test_reopening_keeps_everything(db_path):
    job = make_job()
    with SqliteJobStore(db_path) as first:
        first.submit(job)
        first.commit_slot(4, {"last_slot": 4, "nested": {"x": [1.5, None]}}, {"job-1": (1234.5, "s-4")}, {"slot": 4})
    with SqliteJobStore(db_path) as again:
        stored = again.all_jobs()
        assert stored == [Job(**{**job.__dict__, "state": "released", "released_s": 1234.5, "step_id": "s-4"})]
        assert again.load_state() == {"last_slot": 4, "nested": {"x": [1.5, None]}}
        assert again.decisions() == [{"slot": 4}]


def test_two_stores_on_one_file_see_each_others_commits(db_path):
    with SqliteJobStore(db_path) as daemon, SqliteJobStore(db_path) as cli:
        assert cli.submit(make_job("from-cli")) is True
        assert [job.job_id for job in daemon.active_jobs()] == ["from-cli"]
        daemon.commit_slot(1, {"last_slot": 1}, {"from-cli": (10.0, "s-1")}, {"slot": 1})
        assert cli.load_state() == {"last_slot": 1}
        assert cli.all_jobs()[0].state == "released"
        assert daemon.submit(make_job("from-cli")) is False


def test_the_store_can_be_used_from_another_thread(store):
    # APScheduler runs each slot on a worker thread, not the one that opened the store.
    errors: list[BaseException] = []

    def work() -> None:
        try:
            store.submit(make_job("threaded"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert errors == []
    assert [job.job_id for job in store.all_jobs()] == ["threaded"]


def test_an_empty_file_is_initialised(db_path):
    db_path.write_bytes(b"")
    with SqliteJobStore(db_path) as store:
        assert store.submit(make_job()) is True
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)


def _foreign_rollback(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
        conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    conn.close()


def _foreign_wal(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    with conn:
        conn.execute("CREATE TABLE jobs (job_id TEXT PRIMARY KEY)")  # same table name as ours
        conn.execute("INSERT INTO jobs VALUES ('theirs')")
    conn.close()


def _foreign_with_meta(path: Path) -> None:
    # Our application id (a clash), but its meta names another application.
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('application', 'something-else')")
    conn.close()


def _empty_with_application_id(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA application_id = 1234")
    conn.close()


def _garbage(path: Path) -> None:
    path.write_bytes(random.Random(0).randbytes(8192))


def _corrupt_sqlite(path: Path) -> None:
    # The right magic, then noise: SQLite itself has to find out it is corrupt.
    path.write_bytes(b"SQLite format 3\x00" + random.Random(1).randbytes(8192 - 16))


def _short_text(path: Path) -> None:
    path.write_text("not a database\n")


@pytest.mark.parametrize(
    ("make_file", "message"),
    [
        (_foreign_rollback, "another application"),
        (_foreign_wal, "another application"),
        (_foreign_with_meta, "something-else"),
        (_empty_with_application_id, "application_id 1234"),
        (_garbage, "not an SQLite database"),
        (_corrupt_sqlite, "corrupt or unreadable"),
        (_short_text, "not an SQLite database"),
    ],
)
def test_files_that_are_not_ours_are_refused_and_left_unchanged(db_path, make_file, message):
    make_file(db_path)
    before = db_path.read_bytes()
    with pytest.raises(StoreError, match=message) as caught:
        SqliteJobStore(db_path)
    assert str(db_path) in str(caught.value)
    assert db_path.read_bytes() == before
    with pytest.raises(StoreError):  # and again: the first refusal did not leave it half-converted
        SqliteJobStore(db_path)
    assert db_path.read_bytes() == before


def test_a_store_of_another_schema_version_is_refused(db_path):
    SqliteJobStore(db_path).close()
    with raw(db_path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    before = db_path.read_bytes()
    with pytest.raises(StoreError, match="schema version '99'"):
        SqliteJobStore(db_path)
    assert db_path.read_bytes() == before


def test_a_version_1_store_is_migrated_keeping_its_jobs(db_path):
    """Version 1 had no demand_vector column: opening it adds the column and nothing else changes."""
    with raw(db_path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(
            """CREATE TABLE jobs (job_id TEXT PRIMARY KEY, name TEXT NOT NULL, tenant TEXT NOT NULL,
               submit_s REAL NOT NULL, deadline_s REAL NOT NULL, length_s REAL NOT NULL, step TEXT NOT NULL,
               state TEXT NOT NULL, released_s REAL, step_id TEXT)"""
        )
        conn.execute("CREATE TABLE controller_state (id INTEGER PRIMARY KEY CHECK (id = 1), slot INTEGER NOT NULL, state TEXT NOT NULL)")
        conn.execute("CREATE TABLE decisions (slot INTEGER PRIMARY KEY, decision TEXT NOT NULL)")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [("application", "deferral-autoscaler"), ("schema_version", "1")])
        conn.execute(
            "INSERT INTO jobs VALUES ('old', 'n', 't', 10.0, 700.0, 60.0, ?, 'queued', NULL, NULL)",
            ('{"jar": "command-runner.jar", "args": ["true"], "main_class": null}',),
        )
    with SqliteJobStore(db_path) as store:
        (old,) = store.active_jobs()
        assert (old.job_id, old.tenant, old.length_s, old.demand_vector) == ("old", "t", 60.0, None)
        store.submit(make_job("new", demand_vector=(1.5, 2.0, 0.0)))
    with SqliteJobStore(db_path) as store:
        assert [job.demand_vector for job in store.all_jobs()] == [None, (1.5, 2.0, 0.0)]
    with raw(db_path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)


def test_a_bad_demand_vector_is_refused(store):
    for vector in [(1.0, 2.0), (1.0, -1.0, 0.0), (float("nan"), 0.0, 0.0)]:
        with pytest.raises(SubmitError, match="demand_vector"):
            store.submit(make_job(demand_vector=vector))
    assert store.all_jobs() == []


def test_a_missing_folder_or_a_folder_path_is_refused(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        SqliteJobStore(tmp_path / "nowhere" / "jobs.sqlite")
    assert not (tmp_path / "nowhere").exists()
    with pytest.raises(StoreError, match="is a folder"):
        SqliteJobStore(tmp_path)


def test_a_closed_store_refuses_calls(db_path):
    store = SqliteJobStore(db_path)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.all_jobs()


def test_odd_characters_in_the_path_are_not_read_as_uri_syntax(tmp_path):
    path = tmp_path / "jobs?mode=ro#1%20.sqlite"
    with SqliteJobStore(path) as store:
        store.submit(make_job())
    assert path.exists()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_refusing_a_database_leaves_no_files_beside_it(tmp_path):
    path = tmp_path / "theirs.db"
    _foreign_wal(path)
    assert [p.name for p in tmp_path.iterdir()] == ["theirs.db"]
    with pytest.raises(StoreError):
        SqliteJobStore(path)
    assert [p.name for p in tmp_path.iterdir()] == ["theirs.db"]
