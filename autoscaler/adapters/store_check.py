"""Is the file at a store's path a sound job store of ours? Found without writing to it.

``check_file`` is what every open runs first (the file's first bytes, its size against its header,
the marker and the WAL beside it, ``PRAGMA quick_check``); ``check_store`` (``autoscaler store
check``) runs it over every page and then reads every row back; ``summary_of`` counts what a store holds.
"""

from __future__ import annotations

import calendar
import os
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from autoscaler.adapters.files import require_regular_file
from autoscaler.adapters.lock import hard_links_text
from autoscaler.adapters.store_files import (
    BUSY_TIMEOUT_S,
    LOW_SPACE_BYTES,
    access_problem,
    beside,
    created_text,
    disk_full_text,
    file_bytes,
    free_bytes,
    marker_path,
    read_marker,
    sqlite_uri,
    store_error,
)
from autoscaler.adapters.store_schema import ACTIVE_STATES, JOB_COLUMNS, SMALL_TABLES, is_number, job_from_row, loads_stored, schema_verdict
from autoscaler.core.errors import StoreError

FULL_CHECK_MAX_BYTES = 64 * 2**20
"""Largest store file that opening checks whole with ``PRAGMA quick_check``. quick_check reads every
page (``quick_check(N)`` only stops after N errors: on a sound file it costs the same), and every
``autoscaler submit`` opens the store: ``benchmarks/bench_store_checks.py`` measured the whole check
at 0.9 s with the file in the page cache and 7-8 s from a cold cache on the 320 MB store of 1.1
million jobs, and 0.12 s warm, 1 s cold at 58 MB (200,000 jobs). A larger file is checked for its
size against its header (a file cut short) and its small tables with quick_check(TABLE): 3 ms warm,
30 ms cold at 1.1 million jobs. ``check_store`` (``autoscaler store check``) and
``full_check_max_bytes=None`` check it whole."""

SQLITE_MAGIC = b"SQLite format 3\x00"

SQLITE_HEADER_BYTES = 100


def check_file(
    path: Path, full_check_max_bytes: int | None, summarise: bool = False, to_write: bool = True, flag: str = "--store"
) -> tuple[str, StoreSummary | None]:
    """What is at ``path``, found without writing to it: 'new' (no file, an empty file or an SQLite
    database without tables, and nothing says a store was there), 'ours' or 'version 1' to
    'version 4' (a store of ours that passed its checks, with its summary when ``summarise``).
    Raises StoreError for anything else, naming the file and what to do; when the file is
    ``to_write``, also for a file with more than one hard link; and, naming ``flag`` (where the
    path came from), for a FIFO or a device, which is never opened (reading a FIFO blocks).

    Non-SQLite files are recognised from their first bytes without SQLite opening them. SQLite
    files are then opened read-only: with ``immutable=1`` when there is no WAL file beside them
    (so not even a -shm file is left next to someone else's database), else with ``mode=ro``,
    which reads through the WAL. The WAL and the marker are looked for beside the real path,
    where SQLite keeps the WAL of a store reached through a symlink.
    """
    real = Path(os.path.realpath(path))
    marker = marker_path(path)
    wal = beside(real, "-wal")
    wal_bytes = file_bytes(wal)
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
    require_regular_file(path, flag, StoreError)
    try:
        status = os.stat(real)
        with open(real, "rb") as handle:
            header = handle.read(SQLITE_HEADER_BYTES)
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the job store: {exc.strerror or exc}") from None
    if to_write and status.st_nlink > 1:
        raise StoreError(hard_links_text(path, "SQLite keeps the WAL by name, so a program on another name of it would keep a second WAL and corrupt it"))
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
    if len(header) < SQLITE_HEADER_BYTES or not header.startswith(SQLITE_MAGIC):
        if known:
            raise StoreError(_damaged_text(path, marker, "no SQLite header: it was overwritten or cut", ours=True))
        raise StoreError(f"{path}: not an SQLite database (corrupt, or another kind of file); left unchanged")
    if not wal_bytes:  # with a WAL, pages past the end of the file may be in it
        problem = _size_problem(header, status.st_size)
        if problem:
            raise StoreError(_damaged_text(path, marker if known else None, problem, ours=known))
    try:
        conn = connect_read_only(real)
    except sqlite3.Error as exc:
        raise store_error(path, exc, "cannot open the job store read-only") from None
    try:
        verdict = schema_verdict(conn, path)
        if verdict == "empty":
            if known:
                raise StoreError(_gone_text(path, marker, "is now an SQLite database without tables", wal, wal_bytes))
            return "new", None
        problem = quick_check(conn, full=full_check_max_bytes is None or status.st_size <= full_check_max_bytes)
        if problem:
            raise StoreError(_damaged_text(path, marker if known else None, problem, ours=True, backup=flag == "SRC"))
        return verdict, (summary_of(conn, path) if summarise else None)
    except sqlite3.Error as exc:
        problem = access_problem(path)  # not damaged: this user cannot make or write its -shm
        if problem:
            raise StoreError(f"{path}: cannot read the job store: {problem} (SQLite: {exc})") from None
        raise StoreError(_damaged_text(path, marker if known else None, str(exc), ours=known)) from None
    finally:
        conn.close()


def connect_read_only(real: Path) -> sqlite3.Connection:
    query = "mode=ro" if beside(real, "-wal").exists() else "mode=ro&immutable=1"
    return sqlite3.connect(sqlite_uri(real, query), uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S)


def quick_check(conn: sqlite3.Connection, full: bool) -> str | None:
    """The first problem ``PRAGMA quick_check`` finds, or None: over the whole file when ``full``,
    else over the small tables only (quick_check(TABLE), SQLite >= 3.33)."""
    if full:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    else:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        rows = []
        for table in SMALL_TABLES:
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
    text = f"{path}: the job store was {created_text(read_marker(marker))} and {state}"
    stopped = _stopped_restore(path, marker) if state == "is now missing" else None
    if stopped:
        return f"{text}; {stopped}"
    if wal_bytes:
        text += f"; its WAL {wal} still holds {wal_bytes:,} bytes (perhaps its last commits): keep a copy of both files first"
    afresh = f"{marker} and {wal}" if wal_bytes else str(marker)
    return f"{text}. Restore it with `autoscaler store restore BACKUP`, or, to start afresh on purpose, remove {afresh}"


def _stopped_restore(path: Path, marker: Path) -> str | None:
    """What to do when a restore was stopped (killed) after it moved the store aside and before the
    copy took its name: the newest ``<store>.before-restore-<UTC time>`` beside it is newer than the
    last restore the marker notes. None when there is no such file."""
    real = Path(os.path.realpath(path))
    stamped = re.compile(rf"{re.escape(real.name)}\.before-restore-(\d{{8}}T\d{{6}}Z)(-\d+)?")
    try:
        names = os.listdir(real.parent)
    except OSError:
        return None
    found = sorted(
        (calendar.timegm(time.strptime(m.group(1), "%Y%m%dT%H%M%SZ")), int((m.group(2) or "-0")[1:]), name)
        for name in names
        if (m := stamped.fullmatch(name))
    )
    if not found:
        return None
    stamp_s, _, name = found[-1]
    restored_s = (read_marker(marker) or {}).get("restored_s")
    if is_number(restored_s) and restored_s >= stamp_s:
        return None  # that restore finished: the marker was written after its renames
    aside = real.parent / name
    wal = beside(aside, "-wal")
    move = f"mv {aside} {path}" + (f" && mv {wal} {beside(real, '-wal')}" if wal.exists() else "")
    return (
        f"a restore was stopped after it moved the store aside: the store as it was is {aside}"
        + (f" (with its WAL {wal})" if wal.exists() else "")
        + f", intact. To go back to it: {move}; or run the restore again"
    )


def _damaged_text(path: Path, marker: Path | None, problem: str, ours: bool, backup: bool = False) -> str:
    free = free_bytes(path)
    if "disk I/O error" in problem and free is not None and free < LOW_SPACE_BYTES:
        # SQLite could not make its -shm or journal: the disk is full, the store may be sound.
        return f"{disk_full_text(path, free)}: SQLite cannot open the job store ({problem}); free some space and start again"
    since = "" if marker is None else f"; the job store was {created_text(read_marker(marker))}"
    # A damaged restore source is the backup itself: restoring it is what cannot be done.
    advice = ": it cannot be restored from; restore another backup" if backup else ": restore it with `autoscaler store restore BACKUP`" if ours else ""
    return f"{path}: corrupt or unreadable SQLite database ({problem}){since}; left unchanged{advice}"


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


def summary_of(conn: sqlite3.Connection, path: Path) -> StoreSummary:
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


def check_store(path: str | os.PathLike, flag: str = "--store") -> StoreSummary:
    """Check the store at ``path`` whole (``PRAGMA quick_check`` over every page, read-only) and
    summarise it. Raises StoreError naming the file and the first problem, or if there is no store;
    naming ``flag`` too if it is a FIFO or a device (never opened)."""
    path = Path(path)
    verdict, summary = check_file(path, None, summarise=True, to_write=False, flag=flag)
    if verdict == "new":
        raise StoreError(f"{path}: no job store here (no file, an empty file, or an SQLite file without tables)")
    check_rows(path)
    return summary


def check_rows(path: Path) -> None:
    """Read every job, the controller state and every decision back, read-only: a row whose bytes
    are sound pages but whose content cannot be read (bad JSON, bad UTF-8) is a StoreError naming it."""
    conn = connect_read_only(Path(os.path.realpath(path)))
    try:
        read_every_row(conn, path)
    finally:
        conn.close()


def read_every_row(conn: sqlite3.Connection, path: Path) -> None:
    """``check_rows`` on an open connection to the store named ``path``."""
    try:
        for row in conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs"):
            job_from_row(row)
        for (state,) in conn.execute("SELECT state FROM controller_state"):
            loads_stored(state, "the controller state", path)
        for slot, decision in conn.execute("SELECT slot, decision FROM decisions"):
            loads_stored(decision, f"the decision of slot {slot}", path)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: a row cannot be read ({exc}); restore the store from a backup (`autoscaler store restore BACKUP`)") from None
