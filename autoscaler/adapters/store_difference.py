"""What a job store has that a backup of it lacks: what a restore of that backup would lose.

A restore puts an older copy in place of the store; whatever happened since the copy was taken is
then gone from the store (it stays in the replaced file kept beside it): jobs submitted after it,
among them jobs already released to the cluster, whose steps the restored store does not know;
jobs that got further (released, running, finished) since; slots decided since. ``restore_store``
refuses, naming these, unless forced.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from autoscaler.adapters.store_files import beside, sqlite_uri

NAMED_JOBS = 5
"""Job ids a difference names of each kind; the rest are counted."""

# How far a job has got, as a number: a store further along for a job has a higher one.
_PROGRESS = "CASE {t}.state WHEN 'queued' THEN 0 WHEN 'released' THEN 1 WHEN 'running' THEN 2 ELSE 3 END"


def backup_lacks(store: Path, backup: Path) -> str | None:
    """What the store file ``store`` has that the store file ``backup`` lacks, as words ("5 jobs
    submitted after it (2 of them released to the cluster ...): a, b, ...; 1 job further along ...;
    slots 8 to 9 decided"), or None if nothing. Both are read only (a store's leftover WAL
    included). Raises sqlite3.Error when either cannot be read as a store (the caller decides)."""
    conn = sqlite3.connect(_read_only_uri(store), uri=True, isolation_level=None, timeout=30.0)
    try:
        conn.execute("ATTACH DATABASE ? AS backup", (_read_only_uri(backup),))
        conn.execute("BEGIN")  # one read transaction: one commit of each
        order = "m.seq" if "seq" in {row[1] for row in conn.execute("PRAGMA main.table_info(jobs)")} else "m.rowid"
        new = conn.execute(
            f"""SELECT m.job_id, m.step_id IS NOT NULL OR m.state <> 'queued' FROM main.jobs AS m
                WHERE m.job_id NOT IN (SELECT job_id FROM backup.jobs) ORDER BY {order}"""
        ).fetchall()
        further = [
            row[0]
            for row in conn.execute(
                f"""SELECT m.job_id FROM main.jobs AS m JOIN backup.jobs AS b ON b.job_id = m.job_id
                    WHERE {_PROGRESS.format(t="m")} > {_PROGRESS.format(t="b")}
                       OR (m.step_id IS NOT NULL AND b.step_id IS NULL)
                    ORDER BY {order}"""
            )
        ]
        slots = [_last_slot(conn, schema) for schema in ("main", "backup")]
        conn.execute("COMMIT")
    finally:
        conn.close()
    parts = []
    if new:
        released = sum(1 for _, out in new if out)
        on_cluster = f" ({released:,} of them released to the cluster, their steps named autoscaler:<job id>)" if released else ""
        parts.append(f"{_jobs(len(new))} submitted after it{on_cluster}: {_named([job_id for job_id, _ in new])}")
    if further:
        parts.append(f"{_jobs(len(further))} further along than in the backup (released, running or finished since): {_named(further)}")
    store_slot, backup_slot = slots
    if store_slot is not None and (backup_slot is None or store_slot > backup_slot):
        first = 0 if backup_slot is None else backup_slot + 1
        parts.append(f"slot {store_slot:,} decided" if first == store_slot else f"slots {first:,} to {store_slot:,} decided")
    return "; ".join(parts) if parts else None


def _read_only_uri(path: Path) -> str:
    real = Path(os.path.realpath(path))
    # immutable=1 (no -shm made) only where no WAL can hold commits the file lacks.
    return sqlite_uri(real, "mode=ro" if beside(real, "-wal").exists() else "mode=ro&immutable=1")


def _last_slot(conn: sqlite3.Connection, schema: str) -> int | None:
    tables = {row[0] for row in conn.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table'")}
    if "controller_state" not in tables:
        return None
    row = conn.execute(f"SELECT slot FROM {schema}.controller_state WHERE id = 1").fetchone()
    return None if row is None else int(row[0])


def _jobs(n: int) -> str:
    return f"{n:,} job{'' if n == 1 else 's'}"


def _named(job_ids: list[str]) -> str:
    shown = ", ".join(job_id[:60] for job_id in job_ids[:NAMED_JOBS])
    return shown if len(job_ids) <= NAMED_JOBS else f"{shown} and {len(job_ids) - NAMED_JOBS:,} more"
