"""The durable job queue, controller state and decision log: one SQLite file, behind the JobStore port.

The file is in WAL mode with ``synchronous=FULL``, so a commit survives a power cut and readers
(``autoscaler jobs``, a second daemon's dry run) never block the writer. Every public method is one
transaction; ``commit_slot`` writes the slot's job states, releases, controller state, decision and
retention together or not at all.

What a slot reads and writes costs the same however long the store has run: every job carries
``seq``, its place in the order of arrival, so a slot reads only the jobs after the last it saw
(``jobs_after``); the step ids it needs to find a step added just before a crash are the newest
released (``recent_step_ids``); and ``commit_slot`` deletes old finished jobs and decisions a bounded
number of rows at a time. Every such query runs on an index.

Durability costs one fsync of the WAL per write transaction. A checkpoint (copying the WAL into the
file: one more fsync of each) runs in the commit that takes the WAL past SQLite's default
``wal_autocheckpoint`` of 1,000 pages; a slot writes about 30 pages, so that is one commit in ~30
(``benchmarks/bench_store.py`` counted 1.08 fsyncs per transaction). The default is kept: a smaller
one makes every few slots pay two more fsyncs for a spike of a few ms, a larger one a longer WAL
for readers to search and a larger spike.

A file is only ever written once it is known to be ours: a new or empty SQLite file is initialised,
a file carrying our marker (``PRAGMA application_id`` and the ``meta`` table) is used, and anything
else (another program's database, a corrupt or non-SQLite file) is refused with StoreError and left
byte-for-byte as it was.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from autoscaler.errors import StoreError, SubmitError
from autoscaler.intake import deadline_difference
from autoscaler.model import JOB_STATES, Job, StepSpec

APPLICATION_ID = 0x44464153
"""``PRAGMA application_id`` of our files: the bytes 'DFAS' (deferral autoscaler), a signed 32-bit int."""

APPLICATION = "deferral-autoscaler"
SCHEMA_VERSION = 4
"""Version 2 added ``jobs.demand_vector``, version 3 ``jobs.deadline_text``, version 4 ``jobs.seq`` (with
the ``last_seq`` mark in ``meta``) and the indexes a slot's queries use; older stores are migrated when opened."""

ACTIVE_STATES = ("queued", "released", "running")
FINISHED_STATES = ("done", "failed")

PRUNE_ROWS_PER_COMMIT = 2_000
"""Most jobs, and separately most decisions, one ``commit_slot`` deletes for retention: a backlog (the
first slot with retention on a store that has run for months) is worked off over several slots
instead of stalling one. A deleted job costs about 5 us (its row and four index entries; measured by
``benchmarks/bench_store.py`` on a store of 1.1 million jobs), so the bound adds at most ~10 ms to a
slot, and still deletes far more than a slot finishes (at 5-minute slots, 576,000 jobs a day)."""

RECENT_STEP_IDS = 256
"""Default number of step ids ``recent_step_ids`` returns."""

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_HEADER_BYTES = 100
_BUSY_TIMEOUT_S = 30.0

# The arrival order is the explicit column ``seq``, not the implicit rowid: SQLite may give a deleted
# maximum rowid to the next row, and VACUUM may renumber the rowids of a table whose primary key is
# not an INTEGER. ``seq`` is taken from ``meta.last_seq``, the highest seq ever given (a high-water
# mark, raised in the inserting transaction), so it only grows, whatever retention deletes, and the
# unique index keeps two jobs from ever sharing one.
_JOBS_TABLE = """CREATE TABLE jobs (
        job_id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        tenant TEXT NOT NULL,
        submit_s REAL NOT NULL,
        deadline_s REAL NOT NULL,
        length_s REAL NOT NULL,
        step TEXT NOT NULL,
        state TEXT NOT NULL,
        released_s REAL,
        step_id TEXT,
        demand_vector TEXT,
        deadline_text TEXT,
        seq INTEGER
    )"""

# A job's age for retention: when it was released, or submitted if it never was (failed while queued).
_AGE_S = "coalesce(released_s, submit_s)"

_INDEXES = (
    # jobs_after and max-seq reads.
    "CREATE UNIQUE INDEX IF NOT EXISTS jobs_by_seq ON jobs (seq)",
    # active_jobs (its prefix, the state) and retention (done/failed rows older than a time).
    f"CREATE INDEX IF NOT EXISTS jobs_by_state_and_age ON jobs (state, {_AGE_S})",
    # recent_step_ids: the newest releases, read backwards.
    "CREATE INDEX IF NOT EXISTS jobs_by_release ON jobs (released_s, seq)",
)

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    _JOBS_TABLE,
    *_INDEXES,
    "CREATE TABLE controller_state (id INTEGER PRIMARY KEY CHECK (id = 1), slot INTEGER NOT NULL, state TEXT NOT NULL)",
    # slot is the rowid: range reads and pruning by slot are index walks.
    "CREATE TABLE decisions (slot INTEGER PRIMARY KEY, decision TEXT NOT NULL)",
)

_JOB_COLUMNS = (
    "job_id, name, tenant, submit_s, deadline_s, length_s, step, state, released_s, step_id, demand_vector, deadline_text, seq"
)
_INSERT_JOB = f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES ({', '.join('?' * 13)})"

# What a resubmission must match to be "the same job": what the client submitted, not what has
# happened to it since (state, release) nor when it was sent (submit_s). The deadline is compared by
# intake.deadline_difference: a duration retried is the same deadline, counted from the first time.
_SUBMITTED_FIELDS = ("name", "tenant", "length_s", "step", "demand_vector")


_IDS_PER_QUERY = 500
"""Job ids per ``IN (...)`` lookup: well under SQLite's limit of bound parameters."""


class SqliteJobStore:
    """JobStore on an SQLite file (stdlib sqlite3). Safe to share between threads; several stores
    (in one or more processes) may open the same file and see each other's commits.

    ``durable``: each commit is synced to disk (``synchronous=FULL``) and survives a power cut;
    False (``synchronous=NORMAL``, for a replay's throwaway store) still survives the process
    being killed, and skips the fsync per commit.

    Raises StoreError when the file is not ours (foreign or corrupt; it is never modified), its
    folder does not exist, or SQLite fails (disk full, locked for longer than 30 s).
    """

    def __init__(self, path: str | os.PathLike, durable: bool = True) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        verdict = _refuse_if_not_ours(self.path)
        try:
            conn = sqlite3.connect(
                _uri(self.path, "mode=rwc"),
                uri=True,
                isolation_level=None,
                timeout=_BUSY_TIMEOUT_S,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the job store: {exc}") from None
        try:
            # WAL before the schema for a new file, so a crash while creating it leaves only
            # uncommitted WAL frames (an empty store) rather than a hot rollback journal.
            if verdict == "empty":
                self._use_wal(conn)
            self._initialise(conn)
            # Only now that the file is known to be ours (switching to WAL writes a header byte).
            self._use_wal(conn)
            conn.execute("PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"{self.path}: cannot open the job store: {exc}") from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    # -- JobStore: jobs in -------------------------------------------------------------------

    def submit(self, job: Job) -> bool:
        """Add a job (normally queued); True if added. False if the same job id is already stored
        with the same name, tenant, deadline, length and step (a retried submission; nothing changes,
        and the stored job keeps its deadline: see ``intake.deadline_difference``). An added job gets
        the next ``seq`` (``job.seq`` itself is ignored).

        Raises SubmitError if the id is stored with different content (naming the fields that
        differ), or if the job's state is not one of JOB_STATES or a field is malformed.
        Retention (``commit_slot(prune_before_s=...)``) forgets finished jobs: a job id submitted
        again after its job was pruned is a new job.
        """
        return self.submit_many([job]) == 1

    def submit_many(self, jobs: Iterable[Job]) -> int:
        """Add jobs, as ``submit`` would one by one, in one transaction; returns how many were added
        (an identical resubmission, also of a job earlier in ``jobs``, is skipped). Jobs get
        consecutive ``seq`` in the order given.

        Raises SubmitError naming the first job that is malformed or conflicts with a stored one
        (or with an earlier one in ``jobs``), and then nothing at all is written.
        """
        rows = [(job, _job_row(job)) for job in jobs]
        if not rows:
            return 0
        added: list[tuple] = []
        with self._transaction(write=True) as conn:
            seq = _last_seq(conn)
            stored = {}
            ids = list({job.job_id for job, _ in rows})
            for start in range(0, len(ids), _IDS_PER_QUERY):
                chunk = ids[start : start + _IDS_PER_QUERY]
                query = f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id IN ({', '.join('?' * len(chunk))})"
                stored.update((row[0], _job_from_row(row)) for row in conn.execute(query, chunk))
            for job, row in rows:
                if job.job_id in stored:
                    _require_same_job(stored[job.job_id], job)
                    continue
                seq += 1
                added.append((*row, seq))
                stored[job.job_id] = job
            if added:
                conn.executemany(_INSERT_JOB, added)
                conn.execute("UPDATE meta SET value = ? WHERE key = 'last_seq'", (str(seq),))
        return len(added)
        return added

    # -- JobStore: reads ---------------------------------------------------------------------

    def active_jobs(self) -> list[Job]:
        """Jobs queued, released or running, oldest submission first (ties in arrival order).
        Reads every active job: the daemon's first slot; later slots read ``jobs_after``."""
        marks = ", ".join("?" * len(ACTIVE_STATES))
        with self._transaction() as conn:
            rows = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE state IN ({marks}) ORDER BY submit_s, seq", ACTIVE_STATES
            ).fetchall()
        return [_job_from_row(row) for row in rows]

    def all_jobs(self) -> list[Job]:
        """Every job stored, oldest submission first (ties in arrival order). Reads the whole table:
        for reports and tests, not for a slot."""
        with self._transaction() as conn:
            rows = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs ORDER BY submit_s, seq").fetchall()
        return [_job_from_row(row) for row in rows]

    def jobs_after(self, seq: int) -> list[Job]:
        """The jobs that arrived after ``seq`` (``job.seq > seq``), in any state, in arrival order.
        ``jobs_after(0)`` is every job; ``jobs_after(max_seq())`` is empty until a job arrives.
        Raises StoreError if ``seq`` is not a whole number."""
        seq = _whole(seq, "seq", self.path)
        with self._transaction() as conn:
            rows = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE seq > ? ORDER BY seq", (seq,)).fetchall()
        return [_job_from_row(row) for row in rows]

    def max_seq(self) -> int:
        """The seq of the last job that arrived (0 before the first). Never decreases, even once
        retention has deleted that job."""
        with self._transaction() as conn:
            return _last_seq(conn)

    def recent_step_ids(self, limit: int = RECENT_STEP_IDS, released_before_s: float | None = None) -> frozenset[str]:
        """The step ids of the ``limit`` jobs released last (newest ``released_s``, ties by seq), only
        those released before ``released_before_s`` (Unix seconds) when given.

        A step added but not recorded (a crash, or an answer lost, between add_step and commit_slot)
        is newer on the cluster than every step recorded before it, so listing the cluster's steps
        newest first down to the first of these ids finds it; any of them is a safe place to stop,
        and the newest one the earliest. Raises StoreError if ``limit`` is not a whole number >= 1 or
        ``released_before_s`` not a number (nor None).
        """
        limit = _whole(limit, "limit", self.path, minimum=1)
        if released_before_s is not None and not (_is_number(released_before_s) and not math.isnan(released_before_s)):
            raise StoreError(f"{self.path}: released_before_s must be Unix seconds or None, got {released_before_s!r}")
        before = "" if released_before_s is None else "AND released_s < ?"
        params = (limit,) if released_before_s is None else (float(released_before_s), limit)
        with self._transaction() as conn:
            rows = conn.execute(
                f"""SELECT step_id FROM jobs
                    WHERE released_s IS NOT NULL {before} AND step_id IS NOT NULL
                    ORDER BY released_s DESC, seq DESC LIMIT ?""",
                params,
            ).fetchall()
        return frozenset(row[0] for row in rows)

    def load_state(self) -> dict | None:
        """The controller state saved by the last ``commit_slot`` (as JSON gives it back: tuples
        come back as lists), or None before the first commit."""
        with self._transaction() as conn:
            row = conn.execute("SELECT state FROM controller_state WHERE id = 1").fetchone()
        return None if row is None else json.loads(row[0])

    def last_slot(self) -> int | None:
        """The slot of the last ``commit_slot``, or None before the first."""
        with self._transaction() as conn:
            row = conn.execute("SELECT slot FROM controller_state WHERE id = 1").fetchone()
        return None if row is None else int(row[0])

    def decisions(self, first_slot: int | None = None, last_slot: int | None = None) -> list[dict]:
        """The decision log, oldest slot first; only slots ``first_slot <= slot <= last_slot`` when
        given (either bound may be left out). Raises StoreError if a bound is not a whole number."""
        low = -(2**63) if first_slot is None else _whole(first_slot, "first_slot", self.path)
        high = 2**63 - 1 if last_slot is None else _whole(last_slot, "last_slot", self.path)
        with self._transaction() as conn:
            rows = conn.execute("SELECT decision FROM decisions WHERE slot BETWEEN ? AND ? ORDER BY slot", (low, high)).fetchall()
        return [json.loads(row[0]) for row in rows]

    def decision(self, slot: int) -> dict | None:
        """The decision recorded for ``slot``, or None (not decided, or pruned)."""
        slot = _whole(slot, "slot", self.path)
        with self._transaction() as conn:
            row = conn.execute("SELECT decision FROM decisions WHERE slot = ?", (slot,)).fetchone()
        return None if row is None else json.loads(row[0])

    # -- JobStore: a slot's writes -----------------------------------------------------------

    def commit_slot(
        self,
        slot: int,
        state: dict,
        released: dict[str, tuple[float, str]],
        decision: dict,
        *,
        states: dict[str, str] | None = None,
        prune_before_s: float | None = None,
        prune_decisions_before_slot: int | None = None,
        prune_limit_rows: int = PRUNE_ROWS_PER_COMMIT,
    ) -> None:
        """Everything a slot writes, in one transaction (one WAL fsync), in this order:

        1. ``states`` ({job id: state}, states from JOB_STATES, e.g. from EMR's step states), as
           ``set_states`` sets them;
        2. ``released`` ({job id: (released_s, step_id)}): a queued job becomes 'released'; a job
           already further along (set running by reconciliation after a crash) keeps its state but
           gets its release time and step id if it had none;
        3. the controller state and the slot's decision (replacing an earlier decision of the same
           slot: a slot decided again after a crash). numpy scalars and arrays are stored as plain
           numbers and lists;
        4. retention, when asked: done and failed jobs released (or, never released, submitted)
           before ``prune_before_s`` (Unix seconds), and decisions of slots before
           ``prune_decisions_before_slot``. At most ``prune_limit_rows`` jobs and as many decisions go
           per call (a backlog goes over the next slots), in index order, not oldest first.

        Unknown job ids are ignored. Raises StoreError, with nothing written, if a state is not one
        of JOB_STATES, ``state`` or ``decision`` is not JSON-serialisable, a prune bound is not a
        finite number (whole, for the slot and the row limit >= 1), or SQLite fails.
        """
        slot = int(slot)
        updates = self._checked_states(states or {})
        if prune_before_s is not None and not (_is_number(prune_before_s) and math.isfinite(prune_before_s)):
            raise StoreError(f"{self.path}: prune_before_s must be a finite number of Unix seconds, got {prune_before_s!r}")
        if prune_decisions_before_slot is not None:
            prune_decisions_before_slot = _whole(prune_decisions_before_slot, "prune_decisions_before_slot", self.path)
        prune_limit_rows = _whole(prune_limit_rows, "prune_limit_rows", self.path, minimum=1)
        with self._transaction(write=True) as conn:
            if updates:
                conn.executemany("UPDATE jobs SET state = ? WHERE job_id = ?", [(s, j) for j, s in updates.items()])
            if released:
                conn.executemany(
                    """UPDATE jobs
                       SET released_s = ?, step_id = ?,
                           state = CASE WHEN state = 'queued' THEN 'released' ELSE state END
                       WHERE job_id = ? AND (state = 'queued' OR step_id IS NULL)""",
                    [(float(released_s), str(step_id), job_id) for job_id, (released_s, step_id) in released.items()],
                )
            conn.execute(
                "INSERT OR REPLACE INTO controller_state (id, slot, state) VALUES (1, ?, ?)",
                (slot, _to_json(state, f"controller state of slot {slot}", self.path)),
            )
            conn.execute(
                "INSERT OR REPLACE INTO decisions (slot, decision) VALUES (?, ?)",
                (slot, _to_json(decision, f"decision of slot {slot}", self.path)),
            )
            if prune_before_s is not None:
                marks = ", ".join("?" * len(FINISHED_STATES))
                conn.execute(
                    f"""DELETE FROM jobs WHERE rowid IN (
                            SELECT rowid FROM jobs WHERE state IN ({marks}) AND {_AGE_S} < ? LIMIT ?)""",
                    (*FINISHED_STATES, float(prune_before_s), prune_limit_rows),
                )
            if prune_decisions_before_slot is not None:
                conn.execute(
                    "DELETE FROM decisions WHERE slot IN (SELECT slot FROM decisions WHERE slot < ? ORDER BY slot LIMIT ?)",
                    (prune_decisions_before_slot, prune_limit_rows),
                )

    def set_states(self, updates: dict[str, str]) -> None:
        """Set job states ({job id: state}, states from JOB_STATES), all in one transaction; unknown
        ids are ignored. Raises StoreError, with nothing changed, if a state is not one of JOB_STATES."""
        updates = self._checked_states(updates)
        with self._transaction(write=True) as conn:
            conn.executemany("UPDATE jobs SET state = ? WHERE job_id = ?", [(s, j) for j, s in updates.items()])

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (checkpointing the WAL if it is the last one). Safe to call twice."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SqliteJobStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteJobStore({str(self.path)!r})"

    # -- internals --------------------------------------------------------------------------

    def _checked_states(self, updates: dict[str, str]) -> dict[str, str]:
        bad = {job_id: state for job_id, state in updates.items() if state not in JOB_STATES}
        if bad:
            raise StoreError(f"{self.path}: job states must be one of {', '.join(JOB_STATES)}, got {bad!r}")
        return updates

    @contextmanager
    def _transaction(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        """One transaction; BEGIN IMMEDIATE for writes so a busy file fails before anything is read.
        Any exception rolls everything back; SQLite's own errors come out as StoreError."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"{self.path}: the job store is closed")
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: cannot start a transaction: {exc}") from None
            try:
                yield conn
            except BaseException as exc:
                _rollback(conn)
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"{self.path}: {exc}") from None
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn)
                raise StoreError(f"{self.path}: cannot commit: {exc}") from None

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: SQLite could not switch to WAL mode (got {mode!r}); is it on a network file system?")

    def _initialise(self, conn: sqlite3.Connection) -> None:
        """Create the schema in an empty file, or check the marker of an existing one and migrate it,
        in one write transaction (the file may have changed since it was inspected read-only)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            verdict = _inspect(conn, self.path)
            if verdict.startswith("version "):
                _migrate(conn)
            if verdict == "empty":
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [("application", APPLICATION), ("schema_version", str(SCHEMA_VERSION)), ("last_seq", "0")],
                )
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a store of version 1-3 to the current schema, adding only what it lacks (so a file whose
    version was set back by hand migrates too) and keeping every row.

    Old rows get no demand vector (as if submitted with a length only) and no deadline text (a retry
    with a duration keeps their deadline, as it always did). Their seq is their rowid: those
    versions never deleted a job, so rowid order is the order they arrived in (and the order
    ``all_jobs`` listed equal submit times).
    """
    columns = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    for column in ("demand_vector", "deadline_text", "seq"):
        if column not in columns:
            conn.execute(f"ALTER TABLE jobs ADD COLUMN {column} {'INTEGER' if column == 'seq' else 'TEXT'}")
    conn.execute("UPDATE jobs SET seq = rowid WHERE seq IS NULL")
    conn.execute("DROP INDEX IF EXISTS jobs_by_state")  # the prefix of jobs_by_state_and_age
    for statement in _INDEXES:
        conn.execute(statement)
    highest = conn.execute("SELECT coalesce(max(seq), 0) FROM jobs").fetchone()[0]
    stored = conn.execute("SELECT value FROM meta WHERE key = 'last_seq'").fetchone()
    mark = max(int(highest), int(stored[0]) if stored is not None else 0)
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_seq', ?)", (str(mark),))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))


def _refuse_if_not_ours(path: Path) -> str:
    """'empty' if ``path`` is absent or an empty database, 'ours' for a store of ours; otherwise
    StoreError. Writes nothing to ``path``.

    Non-SQLite files are recognised from their first bytes without SQLite opening them. SQLite
    files are then opened read-only: with ``immutable=1`` when there is no WAL file beside them
    (so not even a -shm file is left next to someone else's database), else with ``mode=ro``,
    which reads through the WAL.
    """
    if not path.exists():
        if not path.parent.is_dir():
            raise StoreError(f"{path}: cannot create the job store: folder {path.parent} does not exist")
        return "empty"
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, expected a job store file")
    try:
        with open(path, "rb") as handle:
            header = handle.read(_SQLITE_HEADER_BYTES)
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the job store: {exc.strerror or exc}") from None
    if header and (len(header) < _SQLITE_HEADER_BYTES or not header.startswith(_SQLITE_MAGIC)):
        raise StoreError(f"{path}: not an SQLite database (corrupt, or another kind of file); left unchanged")
    wal = path.with_name(path.name + "-wal")
    query = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(_uri(path, query), uri=True, isolation_level=None, timeout=_BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open the job store read-only: {exc}") from None
    try:
        return _inspect(conn, path)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: corrupt or unreadable SQLite database ({exc}); left unchanged") from None
    finally:
        conn.close()


def _inspect(conn: sqlite3.Connection, path: Path) -> str:
    """'empty' for a database with no tables and no application id, 'ours' for one with our marker
    and schema version, 'version 1' to 'version 3' for one of ours to migrate; StoreError for anything else."""
    application_id = conn.execute("PRAGMA application_id").fetchone()[0]
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables and application_id == 0:
        return "empty"
    if application_id != APPLICATION_ID or "meta" not in tables:
        raise StoreError(
            f"{path}: an SQLite database of another application (application_id {application_id}, "
            f"tables {', '.join(sorted(tables)) or 'none'}), not a job store; left unchanged"
        )
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("application") != APPLICATION:
        raise StoreError(f"{path}: meta table names application {meta.get('application')!r}, expected {APPLICATION!r}; left unchanged")
    if meta.get("schema_version") in ("1", "2", "3"):
        return f"version {meta['schema_version']}"
    if meta.get("schema_version") != str(SCHEMA_VERSION):
        raise StoreError(
            f"{path}: job store schema version {meta.get('schema_version')!r}, this program reads version "
            f"{SCHEMA_VERSION}; left unchanged"
        )
    return "ours"


def _uri(path: Path, query: str) -> str:
    # as_uri() percent-encodes '?', '#' and '%', which SQLite would otherwise read as URI syntax.
    return f"{path.resolve().as_uri()}?{query}"


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite has already rolled back (e.g. after an I/O error)


def _last_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT value FROM meta WHERE key = 'last_seq'").fetchone()[0])


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _whole(value: object, name: str, path: Path, minimum: int | None = None) -> int:
    """``value`` as an int if it is a whole number (>= ``minimum``), else StoreError naming ``name``."""
    if not (isinstance(value, (int, np.integer)) and not isinstance(value, bool)) or (minimum is not None and value < minimum):
        expected = "a whole number" + ("" if minimum is None else f" >= {minimum}")
        raise StoreError(f"{path}: {name} must be {expected}, got {value!r}")
    return int(value)


def _require_same_job(existing: Job, job: Job) -> None:
    """Nothing if ``job`` is a resubmission of ``existing``; SubmitError naming what differs otherwise."""
    differing = [
        f"{f}: stored {getattr(existing, f)!r}, given {getattr(job, f)!r}" for f in _SUBMITTED_FIELDS if getattr(existing, f) != getattr(job, f)
    ]
    deadline = deadline_difference(existing, job)
    if deadline is not None:
        differing.insert(0, deadline)
    if differing:
        details = "; ".join(differing)
        raise SubmitError(
            f"job_id {job.job_id!r} is already stored with different content ({details}); use a new job id for a different job"
        )


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _to_json(document: object, what: str, path: Path) -> str:
    try:
        return json.dumps(document, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{path}: the {what} cannot be stored as JSON: {exc}") from None


def _job_row(job: Job) -> tuple:
    """The job's columns but seq (which the store gives). Raises SubmitError for a malformed job."""
    if job.state not in JOB_STATES:
        raise SubmitError(f"job {job.job_id!r}: state must be one of {', '.join(JOB_STATES)}, got {job.state!r}")
    for field in ("submit_s", "deadline_s", "length_s"):
        value = getattr(job, field)
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)):
            raise SubmitError(f"job {job.job_id!r}: {field} must be a finite number of seconds, got {value!r}")
    if job.demand_vector is not None:
        vector = job.demand_vector
        if len(vector) != 3 or not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in vector):
            raise SubmitError(
                f"job {job.job_id!r}: demand_vector must be three finite numbers >= 0 "
                f"(CPU seconds, disk bytes, network bytes), got {vector!r}"
            )
    if job.deadline_text is not None and not isinstance(job.deadline_text, str):
        raise SubmitError(f"job {job.job_id!r}: deadline_text must be the deadline as text or None, got {job.deadline_text!r}")
    step = json.dumps({"jar": job.step.jar, "args": list(job.step.args), "main_class": job.step.main_class})
    released_s = None if job.released_s is None else float(job.released_s)
    return (
        job.job_id,
        job.name,
        job.tenant,
        float(job.submit_s),
        float(job.deadline_s),
        float(job.length_s),
        step,
        job.state,
        released_s,
        job.step_id,
        None if job.demand_vector is None else json.dumps([float(v) for v in job.demand_vector]),
        job.deadline_text,
    )


def _job_from_row(row: tuple) -> Job:
    job_id, name, tenant, submit_s, deadline_s, length_s, step_json, state, released_s, step_id, demand_json, deadline_text, seq = row
    step = json.loads(step_json)
    return Job(
        job_id=job_id,
        name=name,
        tenant=tenant,
        submit_s=submit_s,
        deadline_s=deadline_s,
        length_s=length_s,
        step=StepSpec(jar=step["jar"], args=tuple(step["args"]), main_class=step["main_class"]),
        state=state,
        released_s=released_s,
        step_id=step_id,
        demand_vector=None if demand_json is None else tuple(json.loads(demand_json)),
        deadline_text=deadline_text,
        seq=seq,
    )
