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

A store that was there and is now gone is told from a new one by a file beside it,
``<store>.created`` (its creation time, written when the store is created, and for a store from
before it at the first open): an empty, missing or headerless store file with that marker, or an
empty one with a non-empty ``-wal`` beside it, is refused, not silently started afresh. A store that
opens is checked with ``PRAGMA quick_check`` (the whole file up to ``FULL_CHECK_MAX_BYTES``; beyond,
its size against its header and its small tables: see ``SqliteJobStore``), and a damaged one refused.
``SqliteJobStore.backup`` and ``restore_store`` copy a store with SQLite's online backup API.

When the disk is full SQLite's error comes out as "disk full: <path> (N bytes free on its file
system)", at open and at every write; ``record_intent`` is the small write a slot makes before it
acts, so a store that cannot write stops the slot before the cluster is touched.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autoscaler.adapters.files import write_all_atomic
from autoscaler.adapters.lock import StoreLock
from autoscaler.core.errors import AutoscalerError, StoreError, SubmitError
from autoscaler.core.intake import deadline_difference
from autoscaler.core.model import JOB_STATES, Job, StepSpec
from autoscaler.core.readable import utc_text

APPLICATION_ID = 0x44464153
"""``PRAGMA application_id`` of our files: the bytes 'DFAS' (deferral autoscaler), a signed 32-bit int."""

APPLICATION = "deferral-autoscaler"
SCHEMA_VERSION = 5
"""Version 2 added ``jobs.demand_vector``, version 3 ``jobs.deadline_text``, version 4 ``jobs.seq`` (with
the ``last_seq`` mark in ``meta``) and the indexes a slot's queries use, version 5 the ``intents`` table;
older stores are migrated when opened."""

MARKER_SUFFIX = ".created"
"""The marker beside a store (``<store's real path>.created``): JSON with the creation time."""

FULL_CHECK_MAX_BYTES = 64 * 2**20
"""Largest store file that opening checks whole with ``PRAGMA quick_check``. quick_check reads every
page (``quick_check(N)`` only stops after N errors: on a sound file it costs the same), and every
``autoscaler submit`` opens the store: ``benchmarks/bench_store_checks.py`` measured the whole check
at 0.9 s with the file in the page cache and 7-8 s from a cold cache on the 320 MB store of 1.1
million jobs, and 0.12 s warm, 1 s cold at 58 MB (200,000 jobs). A larger file is checked for its
size against its header (a file cut short) and its small tables with quick_check(TABLE): 3 ms warm,
30 ms cold at 1.1 million jobs. ``check_store`` (``autoscaler store check``) and
``full_check_max_bytes=None`` check it whole."""

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
_LOW_SPACE_BYTES = 2**20
"""Below this much free space an SQLite I/O error is read as a full disk (SQLite reports ENOSPC
while growing the -shm file as a "disk I/O error", not SQLITE_FULL)."""
_SHM_DMS_BYTE = 128
"""The byte of ``<store>-shm`` every SQLite connection to a WAL database holds a shared POSIX lock on
for as long as it is open (the unix VFS's "dead man switch", UNIX_SHM_DMS in sqlite3.c)."""
_SMALL_TABLES = ("meta", "controller_state", "intents")

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

    ``read_only``: open a store of ours that needs no migration for reading only (``jobs``,
    ``explain``, a dry run): nothing is written, not even a checkpoint of its WAL; a store that does
    not exist yet or needs migrating is opened as usual.
    ``durable``: each commit is synced to disk (``synchronous=FULL``) and survives a power cut;
    False (``synchronous=NORMAL``, for a replay's throwaway store) still survives the process
    being killed, and skips the fsync per commit.

    ``full_check_max_bytes``: an existing store file up to this size is checked whole with
    ``PRAGMA quick_check`` before it is used; a larger one only for its size against its header and
    its small tables (see ``FULL_CHECK_MAX_BYTES``); None checks every file whole.

    A new store gets its marker ``<store>.created`` beside it; a store from before markers gets one
    at its first open (when its folder can be written).

    Raises StoreError, naming the file, when it is not ours (foreign or corrupt; it is never
    modified), was ours and is now empty, missing or damaged (the marker or a WAL beside it says
    so), has more than one hard link, its folder does not exist, the disk is full, or SQLite fails
    (locked for longer than 30 s).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        durable: bool = True,
        full_check_max_bytes: int | None = FULL_CHECK_MAX_BYTES,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        verdict, _ = _check_file(self.path, full_check_max_bytes, to_write=not read_only)
        if read_only and verdict == "ours":
            self._open_read_only()
            return
        try:
            conn = sqlite3.connect(
                _uri(self.path, "mode=rwc"),
                uri=True,
                isolation_level=None,
                timeout=_BUSY_TIMEOUT_S,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc, "cannot open the job store") from None
        try:
            # WAL before the schema for a new file, so a crash while creating it leaves only
            # uncommitted WAL frames (an empty store) rather than a hot rollback journal.
            if verdict == "new":
                self._use_wal(conn)
            created = self._initialise(conn)
            # Only now that the file is known to be ours (switching to WAL writes a header byte).
            self._use_wal(conn)
            conn.execute("PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            conn.close()
            raise _store_error(self.path, exc, "cannot open the job store") from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        marker = marker_path(self.path)
        if created:
            # After the schema's commit: a crash before leaves a store without a marker, which the
            # next open adopts, never a marker beside a store that was not yet there.
            try:
                _write_marker(marker, _new_marker(self.path))
            except StoreError:
                self.close()
                raise
        elif not marker.exists():
            try:
                _write_marker(marker, {**_new_marker(self.path), "created_s": None, "first_seen_s": time.time()})
            except StoreError:
                pass  # a folder this user cannot write to: the store is still usable, only less guarded

    def _open_read_only(self) -> None:
        """A connection that cannot write (``mode=ro``): it reads through the WAL and, unlike a
        writer, never checkpoints it into the file when it closes, so the files stay as they were
        (a leftover WAL of a killed daemon included). No marker is written."""
        try:
            self._conn = sqlite3.connect(
                _uri(self.path, "mode=ro"), uri=True, isolation_level=None, timeout=_BUSY_TIMEOUT_S, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc, "cannot open the job store read-only") from None

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
        return None if row is None else _loads(row[0], "the controller state", self.path)

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
        return [_loads(row[0], "a decision", self.path) for row in rows]

    def decision(self, slot: int) -> dict | None:
        """The decision recorded for ``slot``, or None (not decided, or pruned)."""
        slot = _whole(slot, "slot", self.path)
        with self._transaction() as conn:
            row = conn.execute("SELECT decision FROM decisions WHERE slot = ?", (slot,)).fetchone()
        return None if row is None else _loads(row[0], f"the decision of slot {slot}", self.path)

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
           numbers and lists; the intents of this slot and earlier ones are deleted (an earlier
           slot's, left by a crash, is settled once a later slot has reconciled and committed);
        4. retention, when asked: done and failed jobs released (or, never released, submitted)
           before ``prune_before_s`` (Unix seconds), and decisions of slots before
           ``prune_decisions_before_slot``. At most ``prune_limit_rows`` jobs and as many decisions go
           per call (a backlog goes over the next slots), in index order, not oldest first.

        Unknown job ids are ignored. Raises StoreError, with nothing written, if a state is not one
        of JOB_STATES, ``state`` or ``decision`` is not JSON-serialisable, a prune bound is not a
        finite number (whole, for the slot and the row limit >= 1), or SQLite fails ("disk full:
        <path> (N bytes free on its file system)" when the disk is full).
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
            conn.execute("DELETE FROM intents WHERE slot <= ?", (slot,))
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

    # -- JobStore: what a slot is about to do ------------------------------------------------

    def record_intent(self, slot: int, job_ids: list[str], nodes: int) -> None:
        """Write, in one small transaction, what slot ``slot`` is about to do on the cluster: add the
        steps of ``job_ids`` and ask for ``nodes`` TASK nodes. Called before the cluster is touched,
        so a store that cannot write (a full disk) stops the slot before it acts; ``commit_slot``
        deletes the intent. A second intent for the same slot (a retry) replaces the first.

        Costs one more write transaction (one WAL fsync) per slot. Raises StoreError, with nothing
        written, if ``slot`` is not a whole number, ``nodes`` not a whole number >= 0, ``job_ids``
        not a list of strings, or the store cannot write ("disk full: ..." when that is why).
        """
        slot = _whole(slot, "slot", self.path)
        nodes = _whole(nodes, "nodes", self.path, minimum=0)
        try:
            ids = None if isinstance(job_ids, (str, bytes)) else list(job_ids)
        except TypeError:
            ids = None
        if ids is None or not all(isinstance(job_id, str) for job_id in ids):
            raise StoreError(f"{self.path}: job_ids must be a list of job id strings, got {job_ids!r}")
        with self._transaction(write=True) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO intents (slot, job_ids, nodes, recorded_s) VALUES (?, ?, ?, ?)",
                (slot, json.dumps(ids), nodes, time.time()),
            )

    def pending_intent(self) -> dict | None:
        """The newest intent no ``commit_slot`` has settled: ``{"slot": int, "job_ids": [str], "nodes":
        int, "recorded_s": Unix seconds}``, or None. One is left when a slot stopped between
        ``record_intent`` and its ``commit_slot`` (a crash, or a failed write): its steps may or may
        not be on the cluster, and the next slot's reconciliation finds those that are."""
        with self._transaction() as conn:
            row = conn.execute("SELECT slot, job_ids, nodes, recorded_s FROM intents ORDER BY slot DESC LIMIT 1").fetchone()
        if row is None:
            return None
        return {"slot": int(row[0]), "job_ids": json.loads(row[1]), "nodes": int(row[2]), "recorded_s": float(row[3])}

    # -- copies ------------------------------------------------------------------------------

    def backup(self, dest: str | os.PathLike, force: bool = False) -> StoreSummary:
        """Copy the store to a new file ``dest`` with SQLite's online backup API, in one step: one
        read transaction, so the copy is the store as of one commit while other connections go on
        writing (a WAL reader does not block them; this store's own connection waits). The copy is
        one self-contained file (rollback-journal mode; a store opened on it goes back to WAL), is
        checked whole with quick_check, synced, and only then appears at ``dest``.

        Returns the copy's summary. Raises StoreError if ``dest`` exists (unless ``force``: then it
        is replaced at once, atomically), is a folder, is the store itself, or its folder is
        missing, or if writing fails ("disk full: ..." when that is why); ``dest`` is then untouched.
        """
        dest = Path(dest)
        if os.path.realpath(dest) == os.path.realpath(self.path):
            raise StoreError(f"{dest}: is the job store itself; back it up to another file")
        if dest.is_dir():
            raise StoreError(f"{dest}: is a folder; give the backup's file name")
        if not dest.parent.is_dir():
            raise StoreError(f"{dest}: cannot write the backup: folder {dest.parent} does not exist")
        if (dest.exists() or dest.is_symlink()) and not force:
            raise StoreError(f"{dest}: exists; give --force to replace it, or another file name")
        staged = _staging_file(dest, dest, ".tmp", "cannot write the backup")
        try:
            with self._lock:
                conn = self._conn
                if conn is None:
                    raise StoreError(f"{self.path}: the job store is closed")
                summary = _copy_database(conn, staged, dest)
            _copy_mode(Path(os.path.realpath(self.path)), staged)
            _place(staged, dest, replace=force)
        finally:
            _remove_staged(staged)
        return summary

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
                raise _store_error(self.path, exc, "cannot start a transaction") from None
            try:
                yield conn
            except BaseException as exc:
                _rollback(conn)
                if isinstance(exc, sqlite3.Error):
                    raise _store_error(self.path, exc, None) from None
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn)
                raise _store_error(self.path, exc, "cannot commit") from None

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: SQLite could not switch to WAL mode (got {mode!r}); is it on a network file system?")

    def _initialise(self, conn: sqlite3.Connection) -> bool:
        """Create the schema in an empty file, or check the marker of an existing one and migrate it,
        in one write transaction (the file may have changed since it was inspected read-only).
        True if it created the schema."""
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
        return verdict == "empty"


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a store of version 1-4 to the current schema, adding only what it lacks (so a file whose
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
    conn.execute(_INTENTS_TABLE)
    highest = conn.execute("SELECT coalesce(max(seq), 0) FROM jobs").fetchone()[0]
    stored = conn.execute("SELECT value FROM meta WHERE key = 'last_seq'").fetchone()
    mark = max(int(highest), int(stored[0]) if stored is not None else 0)
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_seq', ?)", (str(mark),))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))


def _check_file(
    path: Path, full_check_max_bytes: int | None, summarise: bool = False, to_write: bool = True
) -> tuple[str, StoreSummary | None]:
    """What is at ``path``, found without writing to it: 'new' (no file, an empty file or an SQLite
    database without tables, and nothing says a store was there), 'ours' or 'version 1' to
    'version 4' (a store of ours that passed its checks, with its summary when ``summarise``).
    Raises StoreError for anything else, naming the file and what to do; when the file is
    ``to_write``, also for a file with more than one hard link.

    Non-SQLite files are recognised from their first bytes without SQLite opening them. SQLite
    files are then opened read-only: with ``immutable=1`` when there is no WAL file beside them
    (so not even a -shm file is left next to someone else's database), else with ``mode=ro``,
    which reads through the WAL. The WAL and the marker are looked for beside the real path,
    where SQLite keeps the WAL of a store reached through a symlink.
    """
    real = Path(os.path.realpath(path))
    marker = marker_path(path)
    wal = _beside(real, "-wal")
    wal_bytes = _file_bytes(wal)
    if not real.exists():
        if not real.parent.is_dir():
            raise StoreError(f"{path}: cannot create the job store: folder {real.parent} does not exist")
        if marker.exists():
            raise StoreError(_gone_text(path, marker, "is now missing", wal, wal_bytes))
        if wal_bytes:
            raise StoreError(
                f"{path}: there is no job store file, but its WAL {wal} holds {wal_bytes:,} bytes (the last commits "
                f"of a store that was here): keep a copy of it, then restore the store with `autoscaler store restore "
                f"BACKUP`, or remove {wal} to start afresh on purpose"
            )
        return "new", None
    if real.is_dir():
        raise StoreError(f"{path}: is a folder, expected a job store file")
    try:
        status = os.stat(real)
        with open(real, "rb") as handle:
            header = handle.read(_SQLITE_HEADER_BYTES)
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the job store: {exc.strerror or exc}") from None
    if to_write and status.st_nlink > 1:
        raise StoreError(
            f"{path}: the job store file has {status.st_nlink} hard links; SQLite keeps the WAL by name, so a "
            f"program on another name of it would keep a second WAL and corrupt it: remove the other links "
            f"(find / -samefile {real})"
        )
    known = marker.exists()
    if not header:
        if known:
            raise StoreError(_gone_text(path, marker, "is now empty (0 bytes)", wal, wal_bytes))
        if wal_bytes:
            raise StoreError(
                f"{path}: the job store file is empty (0 bytes), but its WAL {wal} holds {wal_bytes:,} bytes: the "
                f"store was cut. Keep a copy of both files, then restore it with `autoscaler store restore BACKUP`, "
                f"or remove both to start afresh on purpose"
            )
        return "new", None
    if len(header) < _SQLITE_HEADER_BYTES or not header.startswith(_SQLITE_MAGIC):
        if known:
            raise StoreError(_damaged_text(path, marker, "no SQLite header: it was overwritten or cut", ours=True))
        raise StoreError(f"{path}: not an SQLite database (corrupt, or another kind of file); left unchanged")
    if not wal_bytes:  # with a WAL, pages past the end of the file may be in it
        problem = _size_problem(header, status.st_size)
        if problem:
            raise StoreError(_damaged_text(path, marker if known else None, problem, ours=known))
    try:
        conn = _connect_read_only(real)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open the job store read-only: {exc}") from None
    try:
        verdict = _inspect(conn, path)
        if verdict == "empty":
            if known:
                raise StoreError(_gone_text(path, marker, "is now an SQLite database without tables", wal, wal_bytes))
            return "new", None
        problem = _quick_check(conn, full=full_check_max_bytes is None or status.st_size <= full_check_max_bytes)
        if problem:
            raise StoreError(_damaged_text(path, marker if known else None, problem, ours=True))
        return verdict, (_summary(conn, path) if summarise else None)
    except sqlite3.Error as exc:
        raise StoreError(_damaged_text(path, marker if known else None, str(exc), ours=known)) from None
    finally:
        conn.close()


def _connect_read_only(real: Path) -> sqlite3.Connection:
    query = "mode=ro" if _beside(real, "-wal").exists() else "mode=ro&immutable=1"
    return sqlite3.connect(_uri(real, query), uri=True, isolation_level=None, timeout=_BUSY_TIMEOUT_S)


def _quick_check(conn: sqlite3.Connection, full: bool) -> str | None:
    """The first problem ``PRAGMA quick_check`` finds, or None: over the whole file when ``full``,
    else over the small tables only (quick_check(TABLE), SQLite >= 3.33)."""
    if full:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    else:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        rows = []
        for table in _SMALL_TABLES:
            if table in tables:
                rows = conn.execute(f"PRAGMA quick_check({table})").fetchall()
                if rows != [("ok",)]:
                    break
    if rows == [("ok",)] or not rows:
        return None
    return str(rows[0][0]).replace("*** in database main ***\n", "").strip()


def _size_problem(header: bytes, size_bytes: int) -> str | None:
    """What is wrong with a file of ``size_bytes`` whose header says it has more pages, or None (also
    when the header's page count is not valid: files last written by SQLite before 3.7.0)."""
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if page_size < 512 or page_size & (page_size - 1) or pages == 0 or header[24:28] != header[92:96]:
        return None
    if size_bytes < pages * page_size:
        counted = f"{pages:,} pages of {page_size:,} bytes ({pages * page_size:,} bytes)"
        return f"cut short: {size_bytes:,} bytes, where its header counts {counted}"
    return None


def _gone_text(path: Path, marker: Path, state: str, wal: Path, wal_bytes: int) -> str:
    text = f"{path}: the job store was {_created_text(read_marker(marker))} and {state}"
    if wal_bytes:
        text += f"; its WAL {wal} still holds {wal_bytes:,} bytes (perhaps its last commits): keep a copy of both files first"
    afresh = f"{marker} and {wal}" if wal_bytes else str(marker)
    return f"{text}. Restore it with `autoscaler store restore BACKUP`, or, to start afresh on purpose, remove {afresh}"


def _damaged_text(path: Path, marker: Path | None, problem: str, ours: bool) -> str:
    free = _free_bytes(path)
    if "disk I/O error" in problem and free is not None and free < _LOW_SPACE_BYTES:
        # SQLite could not make its -shm or journal: the disk is full, the store may be sound.
        return f"{_disk_full_text(path, free)}: SQLite cannot open the job store ({problem}); free some space and start again"
    since = "" if marker is None else f"; the job store was {_created_text(read_marker(marker))}"
    advice = ": restore it with `autoscaler store restore BACKUP`" if ours else ""
    return f"{path}: corrupt or unreadable SQLite database ({problem}){since}; left unchanged{advice}"


def _created_text(marker: dict | None) -> str:
    marker = marker or {}
    for key, words in (("created_s", "created on"), ("first_seen_s", "first seen on")):
        if _is_number(marker.get(key)):
            return f"{words} {utc_text(marker[key])}"
    return "created (when, its marker does not say)"


# -- the marker beside a store ---------------------------------------------------------------


def marker_path(store_path: str | os.PathLike) -> Path:
    """The marker of the store at ``store_path``: ``<realpath>.created``, the same for every name of it."""
    return Path(os.path.realpath(store_path) + MARKER_SUFFIX)


def read_marker(marker: Path) -> dict | None:
    """The marker's document (``created_s`` or ``first_seen_s``, ``restored_s``, ``restored_from``:
    Unix seconds and paths); None if there is none, {} if it cannot be read as one."""
    try:
        text = marker.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return {}
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return document if isinstance(document, dict) else {}


def _new_marker(path: Path) -> dict:
    now_s = time.time()
    return {
        "application": APPLICATION,
        "application_id": APPLICATION_ID,
        "store": os.path.realpath(path),
        "created_s": now_s,
        "created": utc_text(now_s),
    }


def _write_marker(marker: Path, document: dict) -> None:
    try:
        write_all_atomic({marker: json.dumps(document, indent=1) + "\n"})
    except AutoscalerError as exc:
        free = _free_bytes(marker)
        if free is not None and free < _LOW_SPACE_BYTES:
            raise StoreError(f"{_disk_full_text(marker, free)}: cannot write the store's marker") from None
        raise StoreError(f"{marker}: the store's marker: {exc}") from None


# -- errors ------------------------------------------------------------------------------------


def _store_error(path: Path, exc: sqlite3.Error, doing: str | None) -> StoreError:
    """SQLite's error as StoreError naming ``path``; "disk full: ..." for SQLITE_FULL, and for an I/O
    error on a file system with almost no space left."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    said = f"{doing} ({exc})" if doing else str(exc)
    if primary == sqlite3.SQLITE_FULL or primary == sqlite3.SQLITE_IOERR:
        free = _free_bytes(path)
        if primary == sqlite3.SQLITE_FULL or (free is not None and free < _LOW_SPACE_BYTES):
            return StoreError(f"{_disk_full_text(path, free)}: {said}; nothing was written")
    return StoreError(f"{path}: {doing}: {exc}" if doing else f"{path}: {exc}")


def _staging_file(target: Path, named: Path, suffix: str, what: str) -> Path:
    """An empty temporary file in ``target``'s folder (so that renaming it onto ``target`` is atomic);
    a failure is a StoreError naming ``named`` and ``what`` could not be done."""
    try:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
    except OSError as exc:
        raise _os_store_error(named, exc, what) from None
    os.close(fd)
    return Path(name)


def _os_store_error(path: Path, exc: OSError, doing: str) -> StoreError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreError(f"{_disk_full_text(path, _free_bytes(path))}: {doing} ({exc.strerror})")
    return StoreError(f"{path}: {doing}: {exc.strerror or exc}")


def _disk_full_text(path: Path, free: int | None) -> str:
    room = "free space unknown" if free is None else f"{free:,} bytes free on its file system"
    return f"disk full: {path} ({room})"


def _free_bytes(path: Path) -> int | None:
    """Bytes free to this user on the file system of ``path`` (its nearest existing folder), or None."""
    folder = Path(os.path.realpath(path)).parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


# -- summaries, copies, restore ----------------------------------------------------------------


@dataclass(frozen=True)
class StoreSummary:
    """What a store file holds: ``jobs`` (of them ``active_jobs`` queued, released or running), the
    last slot committed (None before the first), the last job seq, its schema version and its size
    in bytes (pages times page size)."""

    path: Path
    jobs: int
    active_jobs: int
    last_slot: int | None
    max_seq: int
    schema_version: int
    size_bytes: int

    def text(self) -> str:
        slot = "no slot committed yet" if self.last_slot is None else f"last slot {self.last_slot:,}"
        return (
            f"{self.jobs:,} job{'' if self.jobs == 1 else 's'} ({self.active_jobs:,} queued, released or running), "
            f"{slot}, schema version {self.schema_version}, {self.size_bytes:,} bytes"
        )


def _summary(conn: sqlite3.Connection, path: Path) -> StoreSummary:
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    marks = ", ".join("?" * len(ACTIVE_STATES))
    jobs = conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
    active = conn.execute(f"SELECT count(*) FROM jobs WHERE state IN ({marks})", ACTIVE_STATES).fetchone()[0]
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    row = conn.execute("SELECT slot FROM controller_state WHERE id = 1").fetchone() if "controller_state" in tables else None
    max_seq = int(meta["last_seq"]) if "last_seq" in meta else conn.execute("SELECT coalesce(max(rowid), 0) FROM jobs").fetchone()[0]
    size_bytes = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    return StoreSummary(
        path=path,
        jobs=int(jobs),
        active_jobs=int(active),
        last_slot=None if row is None else int(row[0]),
        max_seq=int(max_seq),
        schema_version=int(meta.get("schema_version", 0)),
        size_bytes=int(size_bytes),
    )


def check_store(path: str | os.PathLike) -> StoreSummary:
    """Check the store at ``path`` whole (``PRAGMA quick_check`` over every page, read-only) and
    summarise it. Raises StoreError naming the file and the first problem, or if there is no store."""
    path = Path(path)
    verdict, summary = _check_file(path, None, summarise=True, to_write=False)
    if verdict == "new":
        raise StoreError(f"{path}: no job store here (no file, an empty file, or an SQLite file without tables)")
    _check_rows(path)
    return summary


def _check_rows(path: Path) -> None:
    """Read every job, the controller state and every decision back, read-only: a row whose bytes
    are sound pages but whose content cannot be read (bad JSON, bad UTF-8) is a StoreError naming it."""
    conn = _connect_read_only(Path(os.path.realpath(path)))
    try:
        for row in conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs"):
            _job_from_row(row)
        for (state,) in conn.execute("SELECT state FROM controller_state"):
            _loads(state, "the controller state", path)
        for slot, decision in conn.execute("SELECT slot, decision FROM decisions"):
            _loads(decision, f"the decision of slot {slot}", path)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: a row cannot be read ({exc}); restore the store from a backup (`autoscaler store restore BACKUP`)") from None
    finally:
        conn.close()


@dataclass(frozen=True)
class RestoreResult:
    """A restore: the restored store's summary, and the files of the store it replaced, kept under
    new names (``<store>.before-restore-<UTC time>`` and its ``-wal``), oldest name first."""

    summary: StoreSummary
    kept: tuple[Path, ...]


def restore_store(source: str | os.PathLike, store_path: str | os.PathLike) -> RestoreResult:
    """Replace the store at ``store_path`` with a copy of the store ``source`` (a backup).

    ``source`` must be one of our stores that checks out whole (quick_check, schema); it is read
    only. The store being replaced must be absent, empty, one of ours (even damaged) or have our
    marker: another program's file is never replaced. While holding the store's lock (so no daemon
    runs on it) and the SQLite lock every connection holds while open (so no dry run, ``submit`` or
    ``jobs`` has it open), the copy, staged and synced beside the store, is renamed into place.
    The replaced store and its ``-wal`` are renamed aside first, together, so no WAL of the old
    store is ever beside the new one; its ``-shm`` is left for SQLite, which rebuilds it at the next
    open. The marker beside the store is then written, noting the restore.

    Raises StoreError (ConfigError when a daemon holds the lock) with the store unchanged when the
    source is not a whole store of ours, the store is another program's file or in use, or the
    copy cannot be written ("disk full: ..." when that is why). Not to be called by a process that
    has the store open itself: POSIX locks do not set a process's own connections apart.
    """
    source, path = Path(source), Path(store_path)
    real = Path(os.path.realpath(path))
    if os.path.realpath(source) == str(real):
        raise StoreError(f"{source}: is the job store itself; restore from a backup file")
    verdict, _ = _check_file(source, None, to_write=False)
    if verdict == "new":
        raise StoreError(f"{source}: not a job store to restore from (no file, an empty file, or an SQLite file without tables)")
    _require_replaceable(path, real)
    with StoreLock(path):
        staged = _staging_file(real, path, ".restore.tmp", "cannot stage the copy")
        try:
            try:
                conn = _connect_read_only(Path(os.path.realpath(source)))
            except sqlite3.Error as exc:
                raise StoreError(f"{source}: cannot open the backup read-only: {exc}") from None
            try:
                summary = _copy_database(conn, staged, path)
            finally:
                conn.close()
            _copy_mode(real, staged)
            with _nothing_else_open(path, real):
                try:
                    kept = _move_aside(real)
                    os.replace(staged, real)
                except OSError as exc:
                    raise _os_store_error(path, exc, "cannot put the copy in place") from None
                _fsync_folder(real.parent)
        finally:
            _remove_staged(staged)
        marker = marker_path(path)
        document = read_marker(marker) or {}
        if document.get("application") != APPLICATION:
            document = _new_marker(path)
        now_s = time.time()
        document.update(restored_s=now_s, restored=utc_text(now_s), restored_from=os.path.realpath(source))
        try:
            _write_marker(marker, document)
        except StoreError as exc:
            raise StoreError(f"{path}: the store was restored from {source}, but its marker was not updated: {exc}") from None
    return RestoreResult(summary, kept)


def _require_replaceable(path: Path, real: Path) -> None:
    """Nothing if restore may replace what is at ``path``; StoreError naming it otherwise."""
    if not real.exists():
        return
    if real.is_dir():
        raise StoreError(f"{path}: is a folder, expected a job store file")
    if marker_path(path).exists() or real.stat().st_size == 0:
        return
    refusal = f"restore replaces only a job store (or a file with its marker {marker_path(path)}): move it away or give another --store"
    with open(real, "rb") as handle:
        header = handle.read(_SQLITE_HEADER_BYTES)
    if not header.startswith(_SQLITE_MAGIC):
        raise StoreError(f"{path}: not an SQLite database; {refusal}")
    try:
        conn = _connect_read_only(real)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot be read ({exc}); {refusal}") from None
    try:
        _inspect(conn, path)
    except StoreError as exc:
        raise StoreError(f"{exc}; {refusal}") from None
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: a corrupt SQLite file that nothing says is a job store ({exc}); {refusal}") from None
    finally:
        conn.close()


@contextmanager
def _nothing_else_open(path: Path, real: Path) -> Iterator[None]:
    """Hold the store's ``-shm`` dead man switch exclusively: refused (StoreError) while any SQLite
    connection has the store open, and, while held, any that tries to open it waits (and after ~10 s
    fails with "locking protocol") instead of reading or writing the file being replaced. A POSIX
    lock: it is dropped if this process closes any descriptor of the -shm, so nothing else here
    opens it meanwhile."""
    shm = _beside(real, "-shm")
    try:
        fd = os.open(shm, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise _os_store_error(path, exc, "cannot open its -shm file to see whether it is in use") from None
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _SHM_DMS_BYTE)
        except OSError:
            raise StoreError(
                f"{path}: the job store is open in another program (a dry run, `autoscaler jobs` or `submit`); "
                "restore replaces it only while nothing has it open: stop them and retry"
            ) from None
        yield
    finally:
        os.close(fd)


def _move_aside(real: Path) -> tuple[Path, ...]:
    """Rename the store file, then its -wal and -journal, to ``<store>.before-restore-<UTC time>``
    (plus the same suffixes), never over an existing file; returns the new names."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside, n = real.with_name(f"{real.name}.before-restore-{stamp}"), 1
    while any(os.path.lexists(f"{aside}{suffix}") for suffix in ("", "-wal", "-journal")):
        aside, n = real.with_name(f"{real.name}.before-restore-{stamp}-{n}"), n + 1
    kept = []
    for suffix in ("", "-wal", "-journal"):
        current = Path(f"{real}{suffix}")
        if os.path.lexists(current):
            os.rename(current, f"{aside}{suffix}")
            kept.append(Path(f"{aside}{suffix}"))
    return tuple(kept)


def _copy_database(source: sqlite3.Connection, staged: Path, named: Path) -> StoreSummary:
    """Copy ``source`` into the file ``staged`` (SQLite's backup API, one step), as one file in
    rollback-journal mode, check the copy whole and fsync it; its summary is named ``named``."""
    try:
        target = sqlite3.connect(staged, isolation_level=None)
        try:
            source.backup(target)
            target.execute("PRAGMA journal_mode=DELETE")
            problem = _quick_check(target, full=True)
            if problem:
                raise StoreError(
                    f"{named}: the copy does not check out ({problem}); run `autoscaler store check` on the store it was copied from"
                )
            summary = _summary(target, named)
        finally:
            target.close()
        fd = os.open(staged, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except sqlite3.Error as exc:
        raise _store_error(named, exc, "cannot write the copy") from None
    except OSError as exc:
        raise _os_store_error(named, exc, "cannot write the copy") from None
    return summary


def _place(staged: Path, dest: Path, replace: bool) -> None:
    """Give the complete file ``staged`` the name ``dest``: atomically replacing it when ``replace``,
    else only if ``dest`` does not exist (a hard link refuses an existing name)."""
    try:
        if replace:
            os.replace(staged, dest)
        else:
            try:
                os.link(staged, dest)
            except FileExistsError:
                raise StoreError(f"{dest}: exists (it appeared while the copy was written); give --force to replace it") from None
            except OSError:  # a file system without hard links
                if os.path.lexists(dest):
                    raise StoreError(f"{dest}: exists; give --force to replace it") from None
                os.replace(staged, dest)
        _fsync_folder(dest.parent)
    except OSError as exc:
        raise _os_store_error(dest, exc, "cannot write the backup") from None


def _copy_mode(real: Path, staged: Path) -> None:
    try:
        mode = real.stat().st_mode & 0o777 if real.exists() else 0o644 & ~_umask()
        os.chmod(staged, mode)
    except OSError:
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_staged(staged: Path) -> None:
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{staged}{suffix}").unlink(missing_ok=True)


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable; a file system that cannot sync a folder is let be."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _beside(real: Path, suffix: str) -> Path:
    return Path(f"{real}{suffix}")


def _file_bytes(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _inspect(conn: sqlite3.Connection, path: Path) -> str:
    """'empty' for a database with no tables and no application id, 'ours' for one with our marker
    and schema version, 'version 1' to 'version 4' for one of ours to migrate; StoreError for anything else."""
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
    if meta.get("schema_version") in ("1", "2", "3", "4"):
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


def _loads(text: str, what: str, path: Path) -> object:
    """JSON stored in a row; StoreError naming the file and the row when it is damaged."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreError(
            f"{path}: {what} is damaged in the job store ({type(exc).__name__}: {str(exc)[:80]}); "
            "restore the store from a backup (`autoscaler store restore BACKUP`)"
        ) from None


def _job_from_row(row: tuple) -> Job:
    """A job from its row; StoreError naming the job when a stored field cannot be read back."""
    try:
        return _read_job_row(row)
    except (TypeError, ValueError, KeyError, RecursionError) as exc:
        raise StoreError(
            f"job {row[0]!r}: its row in the job store is damaged ({type(exc).__name__}: {str(exc)[:80]}); "
            "restore the store from a backup (`autoscaler store restore BACKUP`)"
        ) from None


def _read_job_row(row: tuple) -> Job:
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
