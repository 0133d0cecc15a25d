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
from autoscaler.core.errors import StoreError, SubmitError
from autoscaler.core.model import Job, StepSpec


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
            "last_seq": "1",
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
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, path.name + ".created"]


def test_refusing_a_database_leaves_no_files_beside_it(tmp_path):
    path = tmp_path / "theirs.db"
    _foreign_wal(path)
    assert [p.name for p in tmp_path.iterdir()] == ["theirs.db"]
    with pytest.raises(StoreError):
        SqliteJobStore(path)
    assert [p.name for p in tmp_path.iterdir()] == ["theirs.db"]


# -- arrival order, reads of what changed, one write per slot, retention ---------------------


def ids(jobs) -> list[str]:
    return [job.job_id for job in jobs]


def test_seq_follows_arrival_and_never_goes_back(db_path):
    with SqliteJobStore(db_path) as store:
        assert store.max_seq() == 0 and store.jobs_after(0) == []
        for job_id, submit_s in (("a", 3000.0), ("b", 1000.0), ("c", 2000.0)):
            store.submit(make_job(job_id, submit_s=submit_s))
        assert store.submit(make_job("a", submit_s=3000.0)) is False  # a retry takes no seq
        assert [(job.job_id, job.seq) for job in store.jobs_after(0)] == [("a", 1), ("b", 2), ("c", 3)]
        assert [(job.job_id, job.seq) for job in store.all_jobs()] == [("b", 2), ("c", 3), ("a", 1)]
        assert [(job.job_id, job.seq) for job in store.active_jobs()] == [("b", 2), ("c", 3), ("a", 1)]
        assert ids(store.jobs_after(1)) == ["b", "c"]
        assert store.max_seq() == 3 and store.jobs_after(3) == []
        # c, the newest, finishes and is pruned: SQLite would give its rowid to the next row.
        store.commit_slot(1, {}, {"c": (2100.0, "s-c")}, {}, states={"c": "done"}, prune_before_s=5000.0)
        assert ids(store.all_jobs()) == ["b", "a"]
        assert store.max_seq() == 3
        store.submit(make_job("d"))
    with raw(db_path) as conn:
        assert conn.execute("SELECT rowid, seq FROM jobs WHERE job_id = 'd'").fetchone() == (3, 4)
    with SqliteJobStore(db_path) as again:
        assert [(job.job_id, job.seq) for job in again.jobs_after(3)] == [("d", 4)]
        assert again.max_seq() == 4
        again.submit(make_job("e"))
        assert [job.seq for job in again.jobs_after(0)] == [1, 2, 4, 5]


def test_jobs_after_sees_every_state_and_a_second_writer(db_path):
    with SqliteJobStore(db_path) as daemon, SqliteJobStore(db_path) as cli:
        daemon.submit(make_job("mine"))
        seen = daemon.max_seq()
        cli.submit(make_job("from-cli", state="running", released_s=1100.0, step_id="s-1"))
        (job,) = daemon.jobs_after(seen)
        assert (job.job_id, job.state, job.seq) == ("from-cli", "running", 2)


def _version_3_file(path: Path) -> list[tuple]:
    """A store as version 3 wrote it (its schema, by hand), jobs in an arrival order unlike their submit order."""
    rows = [
        (
            "late",
            "n",
            "t",
            3000.0,
            9000.0,
            60.0,
            '{"jar": "command-runner.jar", "args": ["true"], "main_class": null}',
            "queued",
            None,
            None,
            None,
            "2h",
        ),
        (
            "early",
            "n",
            "u",
            1000.0,
            9000.0,
            30.0,
            '{"jar": "x.jar", "args": [], "main_class": "M"}',
            "done",
            1100.0,
            "s-e",
            "[1.0, 2.0, 3.0]",
            None,
        ),
        (
            "mid",
            "n",
            "t",
            2000.0,
            9000.0,
            45.0,
            '{"jar": "command-runner.jar", "args": ["ls"], "main_class": null}',
            "running",
            2050.0,
            "s-m",
            None,
            None,
        ),
    ]
    with raw(path) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(
            """CREATE TABLE jobs (job_id TEXT PRIMARY KEY, name TEXT NOT NULL, tenant TEXT NOT NULL,
               submit_s REAL NOT NULL, deadline_s REAL NOT NULL, length_s REAL NOT NULL, step TEXT NOT NULL,
               state TEXT NOT NULL, released_s REAL, step_id TEXT, demand_vector TEXT, deadline_text TEXT)"""
        )
        conn.execute("CREATE INDEX jobs_by_state ON jobs (state)")
        conn.execute("CREATE TABLE controller_state (id INTEGER PRIMARY KEY CHECK (id = 1), slot INTEGER NOT NULL, state TEXT NOT NULL)")
        conn.execute("CREATE TABLE decisions (slot INTEGER PRIMARY KEY, decision TEXT NOT NULL)")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [("application", "deferral-autoscaler"), ("schema_version", "3")])
        conn.executemany("INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute("INSERT INTO controller_state VALUES (1, 41, '{\"last_slot\": 41}')")
        conn.execute("INSERT INTO decisions VALUES (41, '{\"slot\": 41}')")
    return rows


def test_a_version_3_store_is_migrated_keeping_every_job_and_giving_seqs_in_arrival_order(db_path):
    rows = _version_3_file(db_path)
    with SqliteJobStore(db_path) as store:
        migrated = store.jobs_after(0)
        assert [(job.job_id, job.seq) for job in migrated] == [("late", 1), ("early", 2), ("mid", 3)]
        assert ids(store.all_jobs()) == ["early", "mid", "late"]
        for job, row in zip(migrated, rows, strict=True):
            assert (job.job_id, job.tenant, job.submit_s, job.length_s, job.state, job.released_s, job.step_id, job.deadline_text) == (
                row[0],
                row[2],
                row[3],
                row[5],
                row[7],
                row[8],
                row[9],
                row[11],
            )
        assert migrated[1].demand_vector == (1.0, 2.0, 3.0) and migrated[1].step == StepSpec(jar="x.jar", main_class="M")
        assert store.load_state() == {"last_slot": 41} and store.decisions() == [{"slot": 41}]
        assert store.max_seq() == 3
        assert store.recent_step_ids() == frozenset({"s-e", "s-m"})
        store.submit(make_job("new"))
        assert [(job.job_id, job.seq) for job in store.jobs_after(3)] == [("new", 4)]
    with raw(db_path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert conn.execute("SELECT count(*) FROM intents").fetchone() == (0,)
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}
        assert indexes == {"jobs_by_seq", "jobs_by_state_and_age", "jobs_by_release", "jobs_by_name_and_end"}


def _snapshot(path: Path) -> dict:
    with raw(path) as conn:
        return {
            "jobs": conn.execute("SELECT * FROM jobs ORDER BY seq").fetchall(),
            "state": conn.execute("SELECT * FROM controller_state").fetchall(),
            "decisions": conn.execute("SELECT * FROM decisions ORDER BY slot").fetchall(),
            "meta": conn.execute("SELECT * FROM meta ORDER BY key").fetchall(),
        }


@pytest.fixture
def slot_store(db_path):
    """A store after one slot: a queued, a released job, two old finished jobs and three decisions."""
    with SqliteJobStore(db_path) as store:
        store.submit(make_job("q", submit_s=900.0))
        store.submit(make_job("r", submit_s=900.0))
        store.submit(make_job("old-done", submit_s=100.0, state="done", released_s=200.0, step_id="s-o"))
        store.submit(make_job("old-failed", submit_s=100.0, state="failed"))
        for slot in (1, 2):
            store.commit_slot(slot, {"last_slot": slot}, {}, {"slot": slot})
        store.commit_slot(3, {"last_slot": 3}, {"r": (1000.0, "s-r")}, {"slot": 3})
        yield store


def test_commit_slot_applies_states_releases_and_retention_together(slot_store, db_path):
    slot_store.commit_slot(
        4,
        {"last_slot": 4},
        {"q": (1200.0, "s-q")},
        {"slot": 4, "nodes": 2},
        states={"r": "running", "unknown": "done"},
        prune_before_s=1000.0,
        prune_decisions_before_slot=3,
    )
    stored = {job.job_id: (job.state, job.released_s, job.step_id) for job in slot_store.all_jobs()}
    assert stored == {"q": ("released", 1200.0, "s-q"), "r": ("running", 1000.0, "s-r")}
    assert slot_store.decisions() == [{"slot": 3}, {"slot": 4, "nodes": 2}]
    assert slot_store.load_state() == {"last_slot": 4} and slot_store.last_slot() == 4


def test_states_and_releases_in_one_commit_are_set_in_that_order(slot_store):
    # Reconciliation finds q's step running (added just before a crash): it keeps 'running' and gets its step.
    slot_store.commit_slot(4, {}, {"q": (1200.0, "s-q")}, {}, states={"q": "running"})
    (q,) = [job for job in slot_store.all_jobs() if job.job_id == "q"]
    assert (q.state, q.released_s, q.step_id) == ("running", 1200.0, "s-q")


class _Refuse:
    """Not JSON-serialisable."""


@pytest.mark.parametrize("failure", ["decision not JSON", "SQLite fails at the last statement", "bad state", "bad cutoff"])
def test_a_commit_slot_failing_part_way_writes_nothing(slot_store, db_path, failure):
    decision: dict = {"slot": 4}
    states = {"r": "done", "q": "failed"}
    prune_before_s: float = 1000.0
    if failure == "decision not JSON":
        decision = {"slot": 4, "bad": _Refuse()}
    elif failure == "SQLite fails at the last statement":
        with raw(db_path) as conn:  # the decisions' pruning is the last statement of the transaction
            conn.execute("CREATE TRIGGER keep_decisions BEFORE DELETE ON decisions BEGIN SELECT RAISE(ABORT, 'kept by the test'); END")
    elif failure == "bad state":
        states = {"r": "done", "q": "FAILED"}
    else:
        prune_before_s = float("nan")
    before = _snapshot(db_path)
    with pytest.raises(StoreError) as caught:
        slot_store.commit_slot(
            4,
            {"last_slot": 4},
            {"q": (1200.0, "s-q")},
            decision,
            states=states,
            prune_before_s=prune_before_s,
            prune_decisions_before_slot=3,
        )
    assert str(db_path) in str(caught.value)
    assert _snapshot(db_path) == before
    assert slot_store.load_state() == {"last_slot": 3}
    assert len(slot_store.all_jobs()) == 4


def test_pruning_deletes_only_finished_jobs_older_than_the_cutoff_and_at_most_the_bound(store):
    cutoff_s = 5000.0
    jobs = [
        make_job("done-old-1", submit_s=100.0, state="done", released_s=4000.0, step_id="s-1"),
        make_job("failed-queued-old", submit_s=200.0, state="failed"),  # never released: its submit time counts
        make_job("done-old-2", submit_s=300.0, state="done", released_s=4999.0, step_id="s-2"),
        make_job("done-at-cutoff", submit_s=100.0, state="done", released_s=cutoff_s, step_id="s-3"),
        make_job("failed-released-late", submit_s=100.0, state="failed", released_s=6000.0, step_id="s-4"),
        make_job("queued-old", submit_s=100.0),
        make_job("released-old", submit_s=100.0, state="released", released_s=150.0, step_id="s-5"),
        make_job("running-old", submit_s=100.0, state="running", released_s=150.0, step_id="s-6"),
    ]
    assert store.submit_many(jobs) == len(jobs)
    expected_left = {"done-at-cutoff", "failed-released-late", "queued-old", "released-old", "running-old"}
    for slot in range(10):
        store.commit_slot(slot, {}, {}, {"slot": slot})
    store.commit_slot(10, {}, {}, {"slot": 10}, prune_before_s=cutoff_s, prune_decisions_before_slot=6, prune_limit_rows=2)
    left = {job.job_id for job in store.all_jobs()}
    assert expected_left < left and len(left) == len(jobs) - 2
    assert [d["slot"] for d in store.decisions()] == [2, 3, 4, 5, 6, 7, 8, 9, 10]
    store.commit_slot(11, {}, {}, {"slot": 11}, prune_before_s=cutoff_s, prune_decisions_before_slot=6, prune_limit_rows=2)
    assert {job.job_id for job in store.all_jobs()} == expected_left
    assert [d["slot"] for d in store.decisions()] == [4, 5, 6, 7, 8, 9, 10, 11]
    store.commit_slot(12, {}, {}, {"slot": 12}, prune_before_s=cutoff_s, prune_decisions_before_slot=6, prune_limit_rows=2)
    store.commit_slot(13, {}, {}, {"slot": 13}, prune_before_s=cutoff_s, prune_decisions_before_slot=6, prune_limit_rows=2)
    assert {job.job_id for job in store.all_jobs()} == expected_left
    assert [d["slot"] for d in store.decisions()] == [6, 7, 8, 9, 10, 11, 12, 13]


def test_pruning_is_bounded_by_default(store):
    from autoscaler.adapters.sqlite_store import PRUNE_ROWS_PER_COMMIT

    n = PRUNE_ROWS_PER_COMMIT + 7
    store.submit_many(make_job(f"j{i}", submit_s=100.0, state="done", released_s=200.0, step_id=f"s-{i}") for i in range(n))
    store.commit_slot(1, {}, {}, {}, prune_before_s=1000.0)
    assert len(store.jobs_after(0)) == 7
    store.commit_slot(2, {}, {}, {}, prune_before_s=1000.0)
    assert store.jobs_after(0) == [] and store.max_seq() == n


def test_submit_many_adds_in_one_transaction_and_skips_retries(store):
    store.submit(make_job("x"))
    added = store.submit_many([make_job("n1"), make_job("n2"), make_job("n1"), make_job("x")])
    assert added == 2
    assert [(job.job_id, job.seq) for job in store.jobs_after(0)] == [("x", 1), ("n1", 2), ("n2", 3)]
    assert store.submit_many([]) == 0


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ([make_job("n1"), make_job("x", length_s=1.0), make_job("n2")], r"job_id 'x' is already stored with different content \(length_s"),
        ([make_job("n1"), make_job("n1", tenant="other")], r"job_id 'n1' is already stored with different content \(tenant"),
        ([make_job("n1"), make_job("n2", state="COMPLETED")], r"job 'n2': state must be one of"),
        ([make_job("n1"), make_job("n2", length_s=float("inf"))], r"job 'n2': length_s must be a finite number"),
    ],
)
def test_submit_many_writes_nothing_when_one_job_is_refused(store, db_path, batch, message):
    store.submit(make_job("x"))
    before = _snapshot(db_path)
    with pytest.raises(SubmitError, match=message):
        store.submit_many(batch)
    assert _snapshot(db_path) == before
    assert store.max_seq() == 1


def test_recent_step_ids_are_those_of_the_newest_releases(store):
    rng = random.Random(3)
    jobs = [make_job(f"j{i}", submit_s=10.0 * i) for i in range(40)]
    store.submit_many(jobs)
    # Releases over several slots, several per slot (equal times), some not released at all.
    for slot in range(8):
        chosen = rng.sample([job.job_id for job in jobs[slot * 5 : slot * 5 + 5]], 3)
        store.commit_slot(slot, {}, {job_id: (1000.0 + 300.0 * slot, f"s-{job_id}") for job_id in chosen}, {})
    store.submit(make_job("never", submit_s=99999.0))
    released = sorted((job for job in store.all_jobs() if job.released_s is not None), key=lambda job: (job.released_s, job.seq))
    assert len(released) == 24
    for limit in (1, 5, 24, 100):
        assert store.recent_step_ids(limit) == frozenset(job.step_id for job in released[-limit:])
    assert store.recent_step_ids() == frozenset(job.step_id for job in released)
    before_s = 1000.0 + 300.0 * 5  # releases of slots 0-4
    assert store.recent_step_ids(4, released_before_s=before_s) == frozenset(
        job.step_id for job in [job for job in released if job.released_s < before_s][-4:]
    )
    assert store.recent_step_ids(released_before_s=1000.0) == frozenset()


def test_decisions_by_range_and_one_decision(store):
    for slot in (3, 4, 5, 9):
        store.commit_slot(slot, {}, {}, {"slot": slot})
    assert [d["slot"] for d in store.decisions(4, 9)] == [4, 5, 9]
    assert [d["slot"] for d in store.decisions(first_slot=5)] == [5, 9]
    assert [d["slot"] for d in store.decisions(last_slot=4)] == [3, 4]
    assert store.decisions(6, 8) == []
    assert store.decision(5) == {"slot": 5} and store.decision(6) is None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.jobs_after("3"), "seq must be a whole number"),
        (lambda s: s.jobs_after(1.5), "seq must be a whole number"),
        (lambda s: s.recent_step_ids(0), "limit must be a whole number >= 1"),
        (lambda s: s.recent_step_ids(released_before_s=float("nan")), "released_before_s must be Unix seconds or None"),
        (lambda s: s.decisions(first_slot="a"), "first_slot must be a whole number"),
        (lambda s: s.decision(None), "slot must be a whole number"),
        (lambda s: s.commit_slot(1, {}, {}, {}, prune_decisions_before_slot=2.5), "prune_decisions_before_slot must be"),
        (lambda s: s.commit_slot(1, {}, {}, {}, prune_before_s=1.0, prune_limit_rows=0), "prune_limit_rows must be a whole number >= 1"),
    ],
)
def test_bad_arguments_are_refused_by_name(store, call, message):
    with pytest.raises(StoreError, match=message):
        call(store)
    assert store.last_slot() is None


def test_every_query_of_a_slot_runs_on_an_index(slot_store, db_path):
    """The statements the per-slot calls run, as SQLite executed them, each planned without a table scan."""
    executed: list[str] = []
    slot_store._conn.set_trace_callback(executed.append)
    try:
        slot_store.jobs_after(2)
        slot_store.max_seq()
        slot_store.recent_step_ids(released_before_s=2000.0)
        slot_store.recent_step_ids()
        slot_store.load_state()
        slot_store.commit_slot(
            4,
            {"last_slot": 4},
            {"q": (1200.0, "s-q")},
            {"slot": 4},
            states={"r": "done"},
            prune_before_s=1000.0,
            prune_decisions_before_slot=2,
        )
        slot_store.decisions(2, 4)
        slot_store.decision(4)
        slot_store.submit_many([make_job("n")])
    finally:
        slot_store._conn.set_trace_callback(None)
    queries = [sql for sql in executed if sql.split()[0].upper() in ("SELECT", "UPDATE", "DELETE", "INSERT")]
    assert len(queries) >= 12
    with raw(db_path) as conn:
        for sql in queries:
            plan = " / ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert "SCAN" not in plan.replace("SCAN CONSTANT ROW", ""), f"{sql}: {plan}"
            assert "TEMP B-TREE" not in plan, f"{sql}: {plan}"


def test_runs_are_on_disk_after_a_reopen_and_a_bad_run_writes_nothing(db_path):
    with SqliteJobStore(db_path) as store:
        store.submit_many([make_job("a"), make_job("b", submit_s=1500.0)])
        store.commit_slot(3, {}, {"a": (1100.0, "s-1")}, {"slot": 3}, states={"a": "done"}, runs={"a": (1100.5, 1712.75)})
        with pytest.raises(StoreError, match=r"job 'b': a run must be \(run_start_s, run_end_s\).*got \(2000.0, 1999.0\)"):
            store.set_runs({"a": (1.0, 2.0), "b": (2000.0, 1999.0)})
        with pytest.raises(StoreError, match="job 'b'"):
            store.commit_slot(4, {}, {}, {"slot": 4}, states={"b": "done"}, runs={"b": (float("nan"), 1.0)})
    with raw(db_path) as conn:
        rows = conn.execute("SELECT job_id, state, run_start_s, run_end_s FROM jobs ORDER BY job_id").fetchall()
        last = conn.execute("SELECT MAX(slot) FROM decisions").fetchone()[0]
    assert rows == [("a", "done", 1100.5, 1712.75), ("b", "queued", None, None)] and last == 3
    with SqliteJobStore(db_path) as store:
        (a,) = [job for job in store.all_jobs() if job.job_id == "a"]
        assert (a.run_start_s, a.run_end_s) == (1100.5, 1712.75)
        assert a.overran is False  # ended at 1712.75, its deadline 1000 + 7200
        assert store.run_lengths_s("analytics", "nightly etl", 1712.75) == [612.25]


def test_cancel_queued_cancels_only_what_waits_and_an_intent_withdraws_what_was_cancelled(store):
    for job_id in ("waiting", "in-intent", "released", "done", "read-then-cancelled"):
        store.submit(make_job(job_id))
    store.commit_release(1, {"released": (1500.0, "s-EMR1")})
    store.set_states({"done": "done"})
    assert store.record_intent(2, ["in-intent"], 3) == []

    outcomes = store.cancel_queued(["waiting", "in-intent", "released", "done", "nobody", "read-then-cancelled"])
    assert outcomes == {
        "waiting": "cancelled", "in-intent": "releasing", "released": "released", "done": "finished",
        "nobody": "unknown", "read-then-cancelled": "cancelled",
    }  # fmt: skip
    assert store.cancel_queued(["waiting"]) == {"waiting": "cancelled"}  # asked again: the same answer
    states = {job.job_id: job.state for job in store.all_jobs()}
    assert states == {"waiting": "cancelled", "in-intent": "queued", "released": "released", "done": "done", "read-then-cancelled": "cancelled"}
    assert {job.job_id for job in store.active_jobs()} == {"in-intent", "released"}

    # A slot that read "read-then-cancelled" as queued before the cancel: its intent leaves it out.
    assert store.record_intent(3, ["in-intent", "read-then-cancelled"], 3) == ["read-then-cancelled"]
    assert store.pending_intent()["job_ids"] == ["in-intent"]
