"""What the job store keeps and how: its tables and indexes, the migrations from older versions, and a
job (or a JSON document) as a row and back. A new column changes all of these together.

A file is ours when ``PRAGMA application_id`` is ``APPLICATION_ID`` and its ``meta`` table names
``APPLICATION`` and a schema version this program reads (``schema_verdict``); an empty file is given
the schema (``initialise``); one of versions 1-5 is migrated in the same write transaction.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import numpy as np

from autoscaler.core import model
from autoscaler.core.errors import StoreError, SubmitError
from autoscaler.core.intake import deadline_difference
from autoscaler.core.model import JOB_STATES, Job, StepSpec

APPLICATION_ID = 0x44464153
"""``PRAGMA application_id`` of our files: the bytes 'DFAS' (deferral autoscaler), a signed 32-bit int."""

APPLICATION = "deferral-autoscaler"

SCHEMA_VERSION = 6
"""Version 2 added ``jobs.demand_vector``, version 3 ``jobs.deadline_text``, version 4 ``jobs.seq`` (with
the ``last_seq`` mark in ``meta``) and the indexes a slot's queries use, version 5 the ``intents`` table,
version 6 a job's width (``jobs.nodes``), its submitted length when a learned one replaced it
(``prior_length_s``), where its length came from (``length_source``) and its run's start and end
(``run_start_s``, ``run_end_s``), with the index the learned lengths read; older stores are migrated
when opened."""

ACTIVE_STATES = model.ACTIVE_STATES

FINISHED_STATES = model.FINISHED_STATES

SMALL_TABLES = ("meta", "controller_state", "intents")

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
        seq INTEGER,
        nodes INTEGER NOT NULL DEFAULT 1,
        prior_length_s REAL,
        length_source TEXT,
        run_start_s REAL,
        run_end_s REAL
    )"""

# A job's age for retention: when it was released, or submitted if it never was (failed while queued).
AGE_S = "coalesce(released_s, submit_s)"

_INDEXES = (
    # jobs_after and max-seq reads.
    "CREATE UNIQUE INDEX IF NOT EXISTS jobs_by_seq ON jobs (seq)",
    # active_jobs (its prefix, the state) and retention (done/failed rows older than a time).
    f"CREATE INDEX IF NOT EXISTS jobs_by_state_and_age ON jobs (state, {AGE_S})",
    # recent_step_ids: the newest releases, read backwards.
    "CREATE INDEX IF NOT EXISTS jobs_by_release ON jobs (released_s, seq)",
    # learned lengths: the runs of one name and tenant that ended by a time.
    "CREATE INDEX IF NOT EXISTS jobs_by_name_and_end ON jobs (tenant, name, run_end_s)",
)

# What a slot is about to do on the cluster, written before it acts and deleted by its commit_slot.
_INTENTS_TABLE = """CREATE TABLE IF NOT EXISTS intents (
        slot INTEGER PRIMARY KEY,
        job_ids TEXT NOT NULL,
        nodes INTEGER NOT NULL,
        recorded_s REAL NOT NULL
    )"""

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    _JOBS_TABLE,
    *_INDEXES,
    "CREATE TABLE controller_state (id INTEGER PRIMARY KEY CHECK (id = 1), slot INTEGER NOT NULL, state TEXT NOT NULL)",
    # slot is the rowid: range reads and pruning by slot are index walks.
    "CREATE TABLE decisions (slot INTEGER PRIMARY KEY, decision TEXT NOT NULL)",
    _INTENTS_TABLE,
)

JOB_COLUMNS = (
    "job_id, name, tenant, submit_s, deadline_s, length_s, step, state, released_s, step_id, demand_vector, deadline_text, "
    "nodes, prior_length_s, length_source, run_start_s, run_end_s, seq"
)

INSERT_JOB = f"INSERT INTO jobs ({JOB_COLUMNS}) VALUES ({', '.join('?' * 18)})"

# What a resubmission must match to be "the same job": what the client submitted, not what has
# happened to it since (state, release) nor when it was sent (submit_s). The deadline is compared by
# intake.deadline_difference: a duration retried is the same deadline, counted from the first time.
# The length compared is the submitted one: a learned estimate may differ between two tries of one job.
_SUBMITTED_FIELDS = ("name", "tenant", "submitted_length_s", "step", "demand_vector", "nodes")
_SHOWN = {"submitted_length_s": "length_s"}


def schema_verdict(conn: sqlite3.Connection, path: Path) -> str:
    """'empty' for a database with no tables and no application id, 'ours' for one with our marker
    and schema version, 'version 1' to 'version 5' for one of ours to migrate; StoreError for anything else."""
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
    if meta.get("schema_version") in ("1", "2", "3", "4", "5"):
        return f"version {meta['schema_version']}"
    if meta.get("schema_version") != str(SCHEMA_VERSION):
        raise StoreError(
            f"{path}: job store schema version {meta.get('schema_version')!r}, this program reads version "
            f"{SCHEMA_VERSION}; left unchanged"
        )
    return "ours"


def migrate(conn: sqlite3.Connection) -> None:
    """Bring a store of version 1-5 to the current schema, adding only what it lacks (so a file whose
    version was set back by hand migrates too) and keeping every row.

    Old rows get no demand vector (as if submitted with a length only) and no deadline text (a retry
    with a duration keeps their deadline, as it always did). Their seq is their rowid: those
    versions never deleted a job, so rowid order is the order they arrived in (and the order
    ``all_jobs`` listed equal submit times). Old rows are one node wide, planned at their submitted
    length, with no run times.
    """
    columns = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    added = {
        "demand_vector": "TEXT",
        "deadline_text": "TEXT",
        "seq": "INTEGER",
        "nodes": "INTEGER NOT NULL DEFAULT 1",
        "prior_length_s": "REAL",
        "length_source": "TEXT",
        "run_start_s": "REAL",
        "run_end_s": "REAL",
    }
    for column, kind in added.items():
        if column not in columns:
            conn.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")
    conn.execute("UPDATE jobs SET seq = rowid WHERE seq IS NULL")
    conn.execute("DROP INDEX IF EXISTS jobs_by_state")  # the prefix of jobs_by_state_and_age
    for statement in _INDEXES:
        conn.execute(statement)
    conn.execute(_INTENTS_TABLE)
    highest = conn.execute("SELECT coalesce(max(seq), 0) FROM jobs").fetchone()[0]
    stored = conn.execute("SELECT value FROM meta WHERE key = 'last_seq'").fetchone()
    mark = max(int(highest), int(stored[0]) if stored is not None else 0)
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_seq', ?)", (str(mark),))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))


def initialise(conn: sqlite3.Connection, path: Path) -> bool:
    """Create the schema in an empty file, or check the marker of an existing one and migrate it,
    in one write transaction (the file may have changed since it was inspected read-only).
    True if it created the schema. Raises StoreError (naming ``path``) for a file not ours."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        verdict = schema_verdict(conn, path)
        if verdict.startswith("version "):
            migrate(conn)
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
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # SQLite has already rolled back (e.g. after an I/O error)
        raise
    return verdict == "empty"


def last_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT value FROM meta WHERE key = 'last_seq'").fetchone()[0])


def is_number(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def whole_number(value: object, name: str, path: Path, minimum: int | None = None) -> int:
    """``value`` as an int if it is a whole number (>= ``minimum``), else StoreError naming ``name``."""
    if not (isinstance(value, (int, np.integer)) and not isinstance(value, bool)) or (minimum is not None and value < minimum):
        expected = "a whole number" + ("" if minimum is None else f" >= {minimum}")
        raise StoreError(f"{path}: {name} must be {expected}, got {value!r}")
    return int(value)


def require_same_job(existing: Job, job: Job) -> None:
    """Nothing if ``job`` is a resubmission of ``existing``; SubmitError naming what differs otherwise."""
    differing = [
        f"{_SHOWN.get(f, f)}: stored {_shown_value(getattr(existing, f))}, given {_shown_value(getattr(job, f))}"
        for f in _SUBMITTED_FIELDS
        if getattr(existing, f) != getattr(job, f)
    ]
    deadline = deadline_difference(existing, job)
    if deadline is not None:
        differing.insert(0, deadline)
    if differing:
        details = "; ".join(differing)
        raise SubmitError(
            f"job_id {job.job_id!r} is already stored with different content ({details}); use a new job id for a different job"
        )


def _shown_value(value: object) -> str:
    """A submitted field for a message: numbers to 6 significant figures (1,147.75, not
    1147.7470397949219), a tuple of them likewise, anything else as its repr."""
    if is_number(value):
        return f"{float(value):,.6g}"
    if isinstance(value, tuple) and value and all(is_number(v) for v in value):
        return "(" + ", ".join(f"{float(v):,.6g}" for v in value) + ")"
    return repr(value)


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def to_json(document: object, what: str, path: Path) -> str:
    try:
        return json.dumps(document, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{path}: the {what} cannot be stored as JSON: {exc}") from None


def job_row(job: Job) -> tuple:
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
    if isinstance(job.nodes, bool) or not isinstance(job.nodes, (int, np.integer)) or job.nodes < 1:
        raise SubmitError(f"job {job.job_id!r}: nodes must be a whole number >= 1 (TASK nodes it runs on), got {job.nodes!r}")
    for field in ("prior_length_s", "run_start_s", "run_end_s"):
        value = getattr(job, field)
        if value is not None and not (is_number(value) and math.isfinite(value) and value >= 0):
            raise SubmitError(f"job {job.job_id!r}: {field} must be a finite number of seconds >= 0 or None, got {value!r}")
    if job.length_source is not None and not isinstance(job.length_source, str):
        raise SubmitError(f"job {job.job_id!r}: length_source must be text or None, got {job.length_source!r}")
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
        int(job.nodes),
        _seconds_or_none(job.prior_length_s),
        job.length_source,
        _seconds_or_none(job.run_start_s),
        _seconds_or_none(job.run_end_s),
    )


def _seconds_or_none(value: float | None) -> float | None:
    return None if value is None else float(value)


def loads_stored(text: str, what: str, path: Path) -> object:
    """JSON stored in a row; StoreError naming the file and the row when it is damaged."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreError(
            f"{path}: {what} is damaged in the job store ({type(exc).__name__}: {str(exc)[:80]}); "
            "restore the store from a backup (`autoscaler store restore BACKUP`)"
        ) from None


def job_from_row(row: tuple) -> Job:
    """A job from its row; StoreError naming the job when a stored field cannot be read back."""
    try:
        return _read_job_row(row)
    except (TypeError, ValueError, KeyError, RecursionError) as exc:
        raise StoreError(
            f"job {row[0]!r}: its row in the job store is damaged ({type(exc).__name__}: {str(exc)[:80]}); "
            "restore the store from a backup (`autoscaler store restore BACKUP`)"
        ) from None


def _read_job_row(row: tuple) -> Job:
    (job_id, name, tenant, submit_s, deadline_s, length_s, step_json, state, released_s, step_id, demand_json, deadline_text,
     nodes, prior_length_s, length_source, run_start_s, run_end_s, seq) = row
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
        nodes=int(nodes),
        prior_length_s=prior_length_s,
        length_source=length_source,
        run_start_s=run_start_s,
        run_end_s=run_end_s,
        seq=seq,
    )
