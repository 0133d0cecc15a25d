"""The durable job queue, controller state and decision log: one SQLite file, behind the JobStore port.

The file is in WAL mode with ``synchronous=FULL``, so a commit survives a power cut and readers
(``autoscaler jobs``, a second daemon's dry run) never block the writer. Every public method is one
transaction; ``commit_slot`` writes the slot's state, releases and decision together or not at all.

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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from autoscaler.errors import StoreError, SubmitError
from autoscaler.intake import deadline_difference
from autoscaler.model import JOB_STATES, Job, StepSpec

APPLICATION_ID = 0x44464153
"""``PRAGMA application_id`` of our files: the bytes 'DFAS' (deferral autoscaler), a signed 32-bit int."""

APPLICATION = "deferral-autoscaler"
SCHEMA_VERSION = 3
"""Version 2 added ``jobs.demand_vector``, version 3 ``jobs.deadline_text``; older stores are migrated when opened."""

ACTIVE_STATES = ("queued", "released", "running")

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_HEADER_BYTES = 100
_BUSY_TIMEOUT_S = 30.0

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE jobs (
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
        deadline_text TEXT
    )""",
    "CREATE INDEX jobs_by_state ON jobs (state)",
    "CREATE TABLE controller_state (id INTEGER PRIMARY KEY CHECK (id = 1), slot INTEGER NOT NULL, state TEXT NOT NULL)",
    "CREATE TABLE decisions (slot INTEGER PRIMARY KEY, decision TEXT NOT NULL)",
)

_JOB_COLUMNS = "job_id, name, tenant, submit_s, deadline_s, length_s, step, state, released_s, step_id, demand_vector, deadline_text"

# What a resubmission must match to be "the same job": what the client submitted, not what has
# happened to it since (state, release) nor when it was sent (submit_s). The deadline is compared by
# intake.deadline_difference: a duration retried is the same deadline, counted from the first time.
_SUBMITTED_FIELDS = ("name", "tenant", "length_s", "step", "demand_vector")


class SqliteJobStore:
    """JobStore on an SQLite file (stdlib sqlite3). Safe to share between threads; several stores
    (in one or more processes) may open the same file and see each other's commits.

    Raises StoreError when the file is not ours (foreign or corrupt; it is never modified), its
    folder does not exist, or SQLite fails (disk full, locked for longer than 30 s).
    """

    def __init__(self, path: str | os.PathLike) -> None:
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
            conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"{self.path}: cannot open the job store: {exc}") from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    # -- JobStore ---------------------------------------------------------------------------

    def submit(self, job: Job) -> bool:
        """Add a job (normally queued); True if added. False if the same job id is already stored
        with the same name, tenant, deadline, length and step (a retried submission; nothing changes,
        and the stored job keeps its deadline: see ``intake.deadline_difference``).

        Raises SubmitError if the id is stored with different content (naming the fields that
        differ), or if the job's state is not one of JOB_STATES.
        """
        if job.state not in JOB_STATES:
            raise SubmitError(f"job {job.job_id!r}: state must be one of {', '.join(JOB_STATES)}, got {job.state!r}")
        row = _job_row(job)
        with self._transaction(write=True) as conn:
            stored = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job.job_id,)).fetchone()
            if stored is not None:
                existing = _job_from_row(stored)
                differing = [
                    f"{f}: stored {getattr(existing, f)!r}, given {getattr(job, f)!r}"
                    for f in _SUBMITTED_FIELDS
                    if getattr(existing, f) != getattr(job, f)
                ]
                deadline = deadline_difference(existing, job)
                if deadline is not None:
                    differing.insert(0, deadline)
                if differing:
                    details = "; ".join(differing)
                    raise SubmitError(
                        f"job_id {job.job_id!r} is already stored with different content ({details}); "
                        "use a new job id for a different job"
                    )
                return False
            conn.execute(f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES ({', '.join('?' * len(row))})", row)
            return True

    def active_jobs(self) -> list[Job]:
        """Jobs queued, released or running, oldest submission first."""
        marks = ", ".join("?" * len(ACTIVE_STATES))
        with self._transaction() as conn:
            rows = conn.execute(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE state IN ({marks}) ORDER BY submit_s, rowid", ACTIVE_STATES
            ).fetchall()
        return [_job_from_row(row) for row in rows]

    def all_jobs(self) -> list[Job]:
        """Every job, oldest submission first (ties in the order they were stored)."""
        with self._transaction() as conn:
            rows = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs ORDER BY submit_s, rowid").fetchall()
        return [_job_from_row(row) for row in rows]

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

    def commit_slot(self, slot: int, state: dict, released: dict[str, tuple[float, str]], decision: dict) -> None:
        """In one transaction: save the controller state, mark jobs released and record the slot's decision.

        ``released`` maps job id -> (released_s, step_id). A queued job becomes 'released'; a job
        already further along (set running by reconciliation after a crash) keeps its state but
        gets its release time and step id if it had none; unknown ids are ignored. The decision
        replaces any earlier one for the same slot (a slot decided again after a crash).
        numpy scalars and arrays in ``state`` and ``decision`` are stored as plain numbers and lists.

        Raises StoreError, with nothing written, if ``state`` or ``decision`` is not JSON-serialisable
        or SQLite fails.
        """
        slot = int(slot)
        with self._transaction(write=True) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO controller_state (id, slot, state) VALUES (1, ?, ?)",
                (slot, _to_json(state, f"controller state of slot {slot}", self.path)),
            )
            for job_id, (released_s, step_id) in released.items():
                conn.execute(
                    """UPDATE jobs
                       SET released_s = ?, step_id = ?,
                           state = CASE WHEN state = 'queued' THEN 'released' ELSE state END
                       WHERE job_id = ? AND (state = 'queued' OR step_id IS NULL)""",
                    (float(released_s), str(step_id), job_id),
                )
            conn.execute(
                "INSERT OR REPLACE INTO decisions (slot, decision) VALUES (?, ?)",
                (slot, _to_json(decision, f"decision of slot {slot}", self.path)),
            )

    def set_states(self, updates: dict[str, str]) -> None:
        """Set job states ({job id: state}, states from JOB_STATES), all in one transaction; unknown
        ids are ignored. Raises StoreError, with nothing changed, if a state is not one of JOB_STATES."""
        bad = {job_id: state for job_id, state in updates.items() if state not in JOB_STATES}
        if bad:
            raise StoreError(f"{self.path}: job states must be one of {', '.join(JOB_STATES)}, got {bad!r}")
        with self._transaction(write=True) as conn:
            conn.executemany("UPDATE jobs SET state = ? WHERE job_id = ?", [(s, j) for j, s in updates.items()])

    def decisions(self) -> list[dict]:
        """The decision log, oldest slot first."""
        with self._transaction() as conn:
            rows = conn.execute("SELECT decision FROM decisions ORDER BY slot").fetchall()
        return [json.loads(row[0]) for row in rows]

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
        """Create the schema in an empty file, or check the marker of an existing one, in one
        write transaction (the file may have changed since it was inspected read-only)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            verdict = _inspect(conn, self.path)
            if verdict in ("version 1", "version 2"):
                # Additive: old rows get no demand vector (as if submitted with a length only) and no
                # deadline text (a retry with a duration keeps their deadline, as it always did).
                if verdict == "version 1":
                    conn.execute("ALTER TABLE jobs ADD COLUMN demand_vector TEXT")
                conn.execute("ALTER TABLE jobs ADD COLUMN deadline_text TEXT")
                conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            if verdict == "empty":
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [("application", APPLICATION), ("schema_version", str(SCHEMA_VERSION))],
                )
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise


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
    and schema version, 'version 1' or 'version 2' for one of ours to migrate; StoreError for anything else."""
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
    if meta.get("schema_version") in ("1", "2"):
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
    job_id, name, tenant, submit_s, deadline_s, length_s, step_json, state, released_s, step_id, demand_json, deadline_text = row
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
    )
