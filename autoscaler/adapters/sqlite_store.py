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

This module holds the store's queries; what it keeps (tables, migrations, rows) is in
``store_schema``, the files beside it and the words for disk and permission errors in
``store_files``, the checks of a file in ``store_check``, backup and restore in ``store_copy``
(with ``store_staging``, the temporary copy, and ``store_difference``, what a restore would lose).
The names callers use are importable from here.

When the disk is full SQLite's error comes out as "disk full: <path> (N bytes free on its file
system)", at open and at every write; ``record_intent`` is the small write a slot makes before it
acts, so a store that cannot write stops the slot before the cluster is touched.

Over 600 lines, one module: every method is one transaction on the store's one connection and lock;
the schema, the file checks and the copies, which stand alone, are modules of their own.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from autoscaler.adapters.store_check import FULL_CHECK_MAX_BYTES, StoreSummary, check_file, check_store
from autoscaler.adapters.store_copy import RestoreResult, backup_store, restore_store
from autoscaler.adapters.store_files import (
    BUSY_TIMEOUT_S,
    MARKER_SUFFIX,
    marker_path,
    new_marker,
    read_marker,
    sqlite_uri,
    store_error,
    write_marker,
)
from autoscaler.adapters.store_schema import (
    ACTIVE_STATES,
    AGE_S,
    APPLICATION,
    APPLICATION_ID,
    FINISHED_STATES,
    INSERT_JOB,
    JOB_COLUMNS,
    SCHEMA_VERSION,
    initialise,
    is_number,
    job_from_row,
    job_row,
    last_seq,
    loads_stored,
    require_same_job,
    to_json,
    whole_number,
)
from autoscaler.core.defaults import LEARNED_RUNS, LENGTH_ERROR_RUNS, PRUNE_ROWS_PER_COMMIT
from autoscaler.core.errors import StoreError
from autoscaler.core.model import JOB_STATES, Job, JobState

__all__ = [
    "APPLICATION",
    "APPLICATION_ID",
    "FULL_CHECK_MAX_BYTES",
    "MARKER_SUFFIX",
    "PRUNE_ROWS_PER_COMMIT",
    "RECENT_STEP_IDS",
    "SCHEMA_VERSION",
    "RestoreResult",
    "SqliteJobStore",
    "StoreSummary",
    "check_store",
    "marker_path",
    "read_marker",
    "restore_store",
]

RECENT_STEP_IDS = 256
"""Default number of step ids ``recent_step_ids`` returns."""

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
    ``flag``: where the path came from ("--store", "store_path"), named when it is a FIFO or a device.

    A new store gets its marker ``<store>.created`` beside it; a store from before markers gets one
    at its first open (when its folder can be written).

    Raises StoreError, naming the file, when it is not ours (foreign or corrupt; it is never
    modified), was ours and is now empty, missing or damaged (the marker or a WAL beside it says
    so), has more than one hard link, is a FIFO or a device (never opened), its folder does not exist, the disk is full, or SQLite fails
    (locked for longer than 30 s).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        durable: bool = True,
        full_check_max_bytes: int | None = FULL_CHECK_MAX_BYTES,
        read_only: bool = False,
        flag: str = "--store",
    ) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        verdict, _ = check_file(self.path, full_check_max_bytes, to_write=not read_only, flag=flag)
        if read_only and verdict == "ours":
            self._open_read_only()
            return
        try:
            conn = sqlite3.connect(
                sqlite_uri(self.path, "mode=rwc"),
                uri=True,
                isolation_level=None,
                timeout=BUSY_TIMEOUT_S,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise store_error(self.path, exc, "cannot open the job store") from None
        try:
            # WAL before the schema for a new file, so a crash while creating it leaves only
            # uncommitted WAL frames (an empty store) rather than a hot rollback journal.
            if verdict == "new":
                self._use_wal(conn)
            created = initialise(conn, self.path)
            # Only now that the file is known to be ours (switching to WAL writes a header byte).
            self._use_wal(conn)
            conn.execute("PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            conn.close()
            raise store_error(self.path, exc, "cannot open the job store") from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        marker = marker_path(self.path)
        if created:
            # After the schema's commit: a crash before leaves a store without a marker, which the
            # next open adopts, never a marker beside a store that was not yet there.
            try:
                write_marker(marker, new_marker(self.path))
            except StoreError:
                self.close()
                raise
        elif not marker.exists():
            try:
                write_marker(marker, {**new_marker(self.path), "created_s": None, "first_seen_s": time.time()})
            except StoreError:
                pass  # a folder this user cannot write to: the store is still usable, only less guarded

    def _open_read_only(self) -> None:
        """A connection that cannot write (``mode=ro``): it reads through the WAL and, unlike a
        writer, never checkpoints it into the file when it closes, so the files stay as they were
        (a leftover WAL of a killed daemon included). No marker is written."""
        try:
            self._conn = sqlite3.connect(
                sqlite_uri(self.path, "mode=ro"), uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise store_error(self.path, exc, "cannot open the job store read-only") from None

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
        rows = [(job, job_row(job)) for job in jobs]
        if not rows:
            return 0
        added: list[tuple] = []
        with self._transaction(write=True) as conn:
            seq = last_seq(conn)
            stored = {}
            ids = list({job.job_id for job, _ in rows})
            for start in range(0, len(ids), _IDS_PER_QUERY):
                chunk = ids[start : start + _IDS_PER_QUERY]
                query = f"SELECT {JOB_COLUMNS} FROM jobs WHERE job_id IN ({', '.join('?' * len(chunk))})"
                stored.update((row[0], job_from_row(row)) for row in conn.execute(query, chunk))
            for job, row in rows:
                if job.job_id in stored:
                    require_same_job(stored[job.job_id], job)
                    continue
                seq += 1
                added.append((*row, seq))
                stored[job.job_id] = job
            if added:
                conn.executemany(INSERT_JOB, added)
                conn.execute("UPDATE meta SET value = ? WHERE key = 'last_seq'", (str(seq),))
        return len(added)

    # -- JobStore: reads ---------------------------------------------------------------------

    def active_jobs(self) -> list[Job]:
        """Jobs queued, released or running, oldest submission first (ties in arrival order).
        Reads every active job: the daemon's first slot; later slots read ``jobs_after``."""
        marks = ", ".join("?" * len(ACTIVE_STATES))
        with self._transaction() as conn:
            rows = conn.execute(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE state IN ({marks}) ORDER BY submit_s, seq", ACTIVE_STATES
            ).fetchall()
        return [job_from_row(row) for row in rows]

    def all_jobs(self) -> list[Job]:
        """Every job stored, oldest submission first (ties in arrival order). Reads the whole table:
        for reports and tests, not for a slot."""
        with self._transaction() as conn:
            rows = conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs ORDER BY submit_s, seq").fetchall()
        return [job_from_row(row) for row in rows]

    def job(self, job_id: str) -> Job | None:
        """The stored job ``job_id``, or None if there is none (never submitted, or pruned by
        retention): one row, found by the table's primary key."""
        with self._transaction() as conn:
            row = conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return None if row is None else job_from_row(row)

    def tenants_jobs(self, tenants: Iterable[str], states: Iterable[str] | None = None) -> list[Job]:
        """The jobs of ``tenants`` (in ``states``, when given), newest arrival first: what a caller of
        ``autoscaler serve`` may list. Reads by the tenant index, not the whole table."""
        tenants = list(tenants)
        if not tenants:
            return []
        query = f"SELECT {JOB_COLUMNS} FROM jobs WHERE tenant IN ({', '.join('?' * len(tenants))})"
        params = list(tenants)
        if states is not None:
            states = list(states)
            query += f" AND state IN ({', '.join('?' * len(states))})" if states else " AND 0"
            params += states
        with self._transaction() as conn:
            rows = conn.execute(query + " ORDER BY seq DESC", params).fetchall()
        return [job_from_row(row) for row in rows]

    def jobs_after(self, seq: int) -> list[Job]:
        """The jobs that arrived after ``seq`` (``job.seq > seq``), in any state, in arrival order.
        ``jobs_after(0)`` is every job; ``jobs_after(max_seq())`` is empty until a job arrives.
        Raises StoreError if ``seq`` is not a whole number."""
        seq = whole_number(seq, "seq", self.path)
        with self._transaction() as conn:
            rows = conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE seq > ? ORDER BY seq", (seq,)).fetchall()
        return [job_from_row(row) for row in rows]

    def max_seq(self) -> int:
        """The seq of the last job that arrived (0 before the first). Never decreases, even once
        retention has deleted that job."""
        with self._transaction() as conn:
            return last_seq(conn)

    def recent_step_ids(self, limit: int = RECENT_STEP_IDS, released_before_s: float | None = None) -> frozenset[str]:
        """The step ids of the ``limit`` jobs released last (newest ``released_s``, ties by seq), only
        those released before ``released_before_s`` (Unix seconds) when given.

        A step added but not recorded (a crash, or an answer lost, between add_step and commit_slot)
        is newer on the cluster than every step recorded before it, so listing the cluster's steps
        newest first down to the first of these ids finds it; any of them is a safe place to stop,
        and the newest one the earliest. Raises StoreError if ``limit`` is not a whole number >= 1 or
        ``released_before_s`` not a number (nor None).
        """
        limit = whole_number(limit, "limit", self.path, minimum=1)
        if released_before_s is not None and not (is_number(released_before_s) and not math.isnan(released_before_s)):
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

    def recent_runs(self, limit: int = LENGTH_ERROR_RUNS) -> list[tuple[float, float, bool]]:
        """(length_s, run time s, learned) of the ``limit`` newest done jobs with a run, by run end,
        oldest first (read at start-up only: no index orders the done jobs by run end, so a store of a
        million jobs takes a scan of its done ones)."""
        limit = whole_number(limit, "limit", self.path, minimum=1)
        with self._transaction() as conn:
            rows = conn.execute(
                """SELECT length_s, run_end_s - run_start_s, prior_length_s IS NOT NULL FROM jobs
                   WHERE state = 'done' AND run_start_s IS NOT NULL AND run_end_s IS NOT NULL
                   ORDER BY run_end_s DESC, seq DESC LIMIT ?""",
                (limit,),
            ).fetchall()
        return [(float(length_s), float(run_s), bool(learned)) for length_s, run_s, learned in reversed(rows)]

    def load_state(self) -> dict | None:
        """The controller state saved by the last ``commit_slot`` (as JSON gives it back: tuples
        come back as lists), or None before the first commit."""
        with self._transaction() as conn:
            row = conn.execute("SELECT state FROM controller_state WHERE id = 1").fetchone()
        return None if row is None else loads_stored(row[0], "the controller state", self.path)

    def last_slot(self) -> int | None:
        """The slot of the last ``commit_slot``, or None before the first."""
        with self._transaction() as conn:
            row = conn.execute("SELECT slot FROM controller_state WHERE id = 1").fetchone()
        return None if row is None else int(row[0])

    def decisions(self, first_slot: int | None = None, last_slot: int | None = None) -> list[dict]:
        """The decision log, oldest slot first; only slots ``first_slot <= slot <= last_slot`` when
        given (either bound may be left out). Raises StoreError if a bound is not a whole number."""
        low = -(2**63) if first_slot is None else whole_number(first_slot, "first_slot", self.path)
        high = 2**63 - 1 if last_slot is None else whole_number(last_slot, "last_slot", self.path)
        with self._transaction() as conn:
            rows = conn.execute("SELECT decision FROM decisions WHERE slot BETWEEN ? AND ? ORDER BY slot", (low, high)).fetchall()
        return [loads_stored(row[0], "a decision", self.path) for row in rows]

    def decision(self, slot: int) -> dict | None:
        """The decision recorded for ``slot``, or None (not decided, or pruned)."""
        slot = whole_number(slot, "slot", self.path)
        with self._transaction() as conn:
            row = conn.execute("SELECT decision FROM decisions WHERE slot = ?", (slot,)).fetchone()
        return None if row is None else loads_stored(row[0], f"the decision of slot {slot}", self.path)

    # -- JobStore: a slot's writes -----------------------------------------------------------

    def commit_slot(
        self,
        slot: int,
        state: dict,
        released: dict[str, tuple[float, str]],
        decision: dict,
        *,
        states: dict[str, str] | None = None,
        runs: dict[str, tuple[float, float]] | None = None,
        prune_before_s: float | None = None,
        prune_decisions_before_slot: int | None = None,
        prune_limit_rows: int = PRUNE_ROWS_PER_COMMIT,
    ) -> None:
        """Everything a slot writes, in one transaction (one WAL fsync), in this order:

        1. ``states`` ({job id: state}, states from JOB_STATES, e.g. from EMR's step states), as
           ``set_states`` sets them, and ``runs`` ({job id: (run_start_s, run_end_s)}) as ``set_runs``;
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
        run_rows = self._checked_runs(runs or {})
        if prune_before_s is not None and not (is_number(prune_before_s) and math.isfinite(prune_before_s)):
            raise StoreError(f"{self.path}: prune_before_s must be a finite number of Unix seconds, got {prune_before_s!r}")
        if prune_decisions_before_slot is not None:
            prune_decisions_before_slot = whole_number(prune_decisions_before_slot, "prune_decisions_before_slot", self.path)
        prune_limit_rows = whole_number(prune_limit_rows, "prune_limit_rows", self.path, minimum=1)
        with self._transaction(write=True) as conn:
            _set_states(conn, updates)
            if run_rows:
                conn.executemany("UPDATE jobs SET run_start_s = ?, run_end_s = ? WHERE job_id = ?", run_rows)
            _mark_released(conn, released)
            conn.execute(
                "INSERT OR REPLACE INTO controller_state (id, slot, state) VALUES (1, ?, ?)",
                (slot, to_json(state, f"controller state of slot {slot}", self.path)),
            )
            conn.execute(
                "INSERT OR REPLACE INTO decisions (slot, decision) VALUES (?, ?)",
                (slot, to_json(decision, f"decision of slot {slot}", self.path)),
            )
            conn.execute("DELETE FROM intents WHERE slot <= ?", (slot,))
            if prune_before_s is not None:
                marks = ", ".join("?" * len(FINISHED_STATES))
                conn.execute(
                    f"""DELETE FROM jobs WHERE rowid IN (
                            SELECT rowid FROM jobs WHERE state IN ({marks}) AND {AGE_S} < ? LIMIT ?)""",
                    (*FINISHED_STATES, float(prune_before_s), prune_limit_rows),
                )
            if prune_decisions_before_slot is not None:
                conn.execute(
                    "DELETE FROM decisions WHERE slot IN (SELECT slot FROM decisions WHERE slot < ? ORDER BY slot LIMIT ?)",
                    (prune_decisions_before_slot, prune_limit_rows),
                )

    def commit_release(self, slot: int, released: dict[str, tuple[float, str]], *, states: dict[str, str] | None = None) -> None:
        """What a release between slots writes, in one transaction: ``states`` ({job id: state}, e.g.
        'failed' for a step EMR refused), then ``released`` ({job id: (released_s, step_id)}) as
        ``commit_slot`` marks them, and the intents of slot ``slot`` and earlier ones settled. The
        slot's decision and the controller state are left as they are.

        Unknown job ids are ignored. Raises StoreError, with nothing written, on a state not in
        JOB_STATES, a ``slot`` that is not a whole number, or a store failure."""
        slot = whole_number(slot, "slot", self.path)
        updates = self._checked_states(states or {})
        with self._transaction(write=True) as conn:
            _set_states(conn, updates)
            _mark_released(conn, released)
            conn.execute("DELETE FROM intents WHERE slot <= ?", (slot,))

    def set_states(self, updates: dict[str, str]) -> None:
        """Set job states ({job id: state}, states from JOB_STATES), all in one transaction; unknown
        ids are ignored. Raises StoreError, with nothing changed, if a state is not one of JOB_STATES."""
        updates = self._checked_states(updates)
        with self._transaction(write=True) as conn:
            _set_states(conn, updates)

    def set_runs(self, runs: dict[str, tuple[float, float]]) -> None:
        """Record finished steps' runs ({job id: (run_start_s, run_end_s)}, Unix seconds) in one
        transaction; unknown ids are ignored. Raises StoreError, with nothing changed, on a time that is
        not a finite number or an end before its start."""
        run_rows = self._checked_runs(runs)
        with self._transaction(write=True) as conn:
            conn.executemany("UPDATE jobs SET run_start_s = ?, run_end_s = ? WHERE job_id = ?", run_rows)

    def run_lengths_s(self, tenant: str, name: str, ended_by_s: float, limit: int = LEARNED_RUNS) -> list[float]:
        """Run times, s, of the ``limit`` newest done jobs of ``tenant`` named ``name`` whose run ended at
        or before ``ended_by_s``, oldest first (the (tenant, name, run_end_s) index answers it)."""
        if not (is_number(ended_by_s) and not math.isnan(ended_by_s)):
            raise StoreError(f"{self.path}: ended_by_s must be a number of Unix seconds, got {ended_by_s!r}")
        limit = whole_number(limit, "limit", self.path, minimum=1)
        with self._transaction() as conn:
            rows = conn.execute(
                """SELECT run_end_s - run_start_s FROM jobs
                   WHERE tenant = ? AND name = ? AND run_end_s <= ? AND run_start_s IS NOT NULL AND state = 'done'
                   ORDER BY run_end_s DESC, seq DESC LIMIT ?""",
                (str(tenant), str(name), float(ended_by_s), limit),
            ).fetchall()
        return [float(row[0]) for row in reversed(rows)]

    # -- JobStore: what a slot is about to do ------------------------------------------------

    def record_intent(self, slot: int, job_ids: list[str], nodes: int) -> list[str]:
        """Write, in one small transaction, what slot ``slot`` is about to do on the cluster: add the
        steps of ``job_ids`` and ask for ``nodes`` TASK nodes. Called before the cluster is touched,
        so a store that cannot write (a full disk) stops the slot before it acts; ``commit_slot``
        deletes the intent. A second intent for the same slot (a retry) replaces the first.

        Returns the ids of ``job_ids`` cancelled since they were read (``cancel_queued``), which the
        intent leaves out and the caller must not release: the check and the intent are one
        transaction, so a cancel either comes before it (and the job is withdrawn) or finds the job
        in the intent (and is refused as being released).

        Costs one more write transaction (one WAL fsync) per slot. Raises StoreError, with nothing
        written, if ``slot`` is not a whole number, ``nodes`` not a whole number >= 0, ``job_ids``
        not a list of strings, or the store cannot write ("disk full: ..." when that is why).
        """
        slot = whole_number(slot, "slot", self.path)
        nodes = whole_number(nodes, "nodes", self.path, minimum=0)
        try:
            ids = None if isinstance(job_ids, (str, bytes)) else list(job_ids)
        except TypeError:
            ids = None
        if ids is None or not all(isinstance(job_id, str) for job_id in ids):
            raise StoreError(f"{self.path}: job_ids must be a list of job id strings, got {job_ids!r}")
        with self._transaction(write=True) as conn:
            withdrawn = _cancelled_among(conn, ids)
            conn.execute(
                "INSERT OR REPLACE INTO intents (slot, job_ids, nodes, recorded_s) VALUES (?, ?, ?, ?)",
                (slot, json.dumps([job_id for job_id in ids if job_id not in withdrawn]), nodes, time.time()),
            )
        return [job_id for job_id in ids if job_id in withdrawn]

    def cancel_queued(self, job_ids: list[str]) -> dict[str, str]:
        """Cancel the jobs of ``job_ids`` that are still queued, in one write transaction; returns
        {job id: outcome} for each: "cancelled" (now, or before), "releasing" (a slot's intent names
        it: its step is being added, so it is not cancelled here; ask again once released),
        "released" (its step is on EMR: ``Job.step_id``; cancel that), "finished" (done or failed)
        or "unknown" (no such job). Raises StoreError when the store cannot write.
        """
        outcomes: dict[str, str] = {}
        with self._transaction(write=True) as conn:
            releasing = {job_id for (text,) in conn.execute("SELECT job_ids FROM intents") for job_id in json.loads(text)}
            for job_id in job_ids:
                row = conn.execute("SELECT state FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
                state = None if row is None else row[0]
                if state is None:
                    outcomes[job_id] = "unknown"
                elif state == JobState.CANCELLED:
                    outcomes[job_id] = "cancelled"
                elif state == JobState.QUEUED and job_id in releasing:
                    outcomes[job_id] = "releasing"
                elif state == JobState.QUEUED:
                    conn.execute("UPDATE jobs SET state = ? WHERE job_id = ?", (JobState.CANCELLED.value, job_id))
                    outcomes[job_id] = "cancelled"
                elif state in ACTIVE_STATES:
                    outcomes[job_id] = "released"
                else:
                    outcomes[job_id] = "finished"
        return outcomes

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
        one self-contained file in WAL mode (its WAL checkpointed into it), as the store is, so a
        store restored from it is at once one whose readers a restore sees; it is checked whole with
        quick_check, synced, and only then appears at ``dest``.

        Returns the copy's summary. Raises StoreError if ``dest`` exists (unless ``force``: then it
        is replaced at once, atomically, if it is a regular file), is a folder, a FIFO or a device,
        is the store itself or one of its side files (``store_files.SIDE_FILES``) or another store's,
        is held (``flock``) by a running process, is a store a daemon runs on, or its folder is
        missing, or if writing fails ("disk full: ..." when that is why); ``dest`` is then untouched.
        """
        return backup_store(self._connection, self.path, dest, force)

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

    def _checked_runs(self, runs: dict[str, tuple[float, float]]) -> list[tuple[float, float, str]]:
        rows = []
        for job_id, run in runs.items():
            start_s, end_s = run
            if not (is_number(start_s) and is_number(end_s) and math.isfinite(start_s) and math.isfinite(end_s) and end_s >= start_s):
                raise StoreError(
                    f"{self.path}: job {job_id!r}: a run must be (run_start_s, run_end_s), finite Unix seconds with the "
                    f"end not before the start, got {run!r}"
                )
            rows.append((float(start_s), float(end_s), str(job_id)))
        return rows

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """The open connection, held against other threads; StoreError if the store is closed."""
        with self._lock:
            if self._conn is None:
                raise StoreError(f"{self.path}: the job store is closed")
            yield self._conn

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
                raise store_error(self.path, exc, "cannot start a transaction") from None
            try:
                yield conn
            except BaseException as exc:
                _rollback(conn)
                if isinstance(exc, sqlite3.Error):
                    raise store_error(self.path, exc, None) from None
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn)
                raise store_error(self.path, exc, "cannot commit") from None

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: SQLite could not switch to WAL mode (got {mode!r}); is it on a network file system?")


def _set_states(conn: sqlite3.Connection, updates: dict[str, str]) -> None:
    """Jobs take the (checked) states of ``updates``, {job id: state}."""
    if updates:
        conn.executemany("UPDATE jobs SET state = ? WHERE job_id = ?", [(s, j) for j, s in updates.items()])


def _mark_released(conn: sqlite3.Connection, released: dict[str, tuple[float, str]]) -> None:
    """A queued job becomes 'released' with its release time and step id; a job already further
    along keeps its state but gets them if it had no step id."""
    if released:
        conn.executemany(
            """UPDATE jobs
               SET released_s = ?, step_id = ?,
                   state = CASE WHEN state = 'queued' THEN 'released' ELSE state END
               WHERE job_id = ? AND (state = 'queued' OR step_id IS NULL)""",
            [(float(released_s), str(step_id), job_id) for job_id, (released_s, step_id) in released.items()],
        )


def _cancelled_among(conn: sqlite3.Connection, job_ids: list[str]) -> set[str]:
    """The ids of ``job_ids`` whose job is cancelled."""
    cancelled: set[str] = set()
    for start in range(0, len(job_ids), _IDS_PER_QUERY):
        chunk = job_ids[start : start + _IDS_PER_QUERY]
        query = f"SELECT job_id FROM jobs WHERE state = ? AND job_id IN ({', '.join('?' * len(chunk))})"
        cancelled.update(row[0] for row in conn.execute(query, (JobState.CANCELLED.value, *chunk)))
    return cancelled


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite has already rolled back (e.g. after an I/O error)
