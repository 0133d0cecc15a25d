"""What one slot costs the job store when it holds a long history, printed as figures.

The store is built directly (executemany in one transaction) with ``--queued`` queued jobs
(submitted over the last two hours) and ``--finished`` done or failed ones (2 % failed, released
over the last 60 days), then opened with SqliteJobStore and driven like the daemon's slot:

    new jobs arrive (submit_many, the CLI's write; timed apart)
    jobs_after(seen)                                   the slot's read
    commit_slot(states=..., released=..., prune...)    the slot's one write

with, per slot, ``--per-slot`` jobs released, as many released ones set running and as many
running ones set done. Four phases: no retention; retention with a 30-day cutoff, so each commit
deletes its bound of rows (the first slots on a store that never pruned); the rest of that backlog
worked off; then retention caught up (a cutoff that moves with the clock). Then the file's size,
and, when strace is installed, the fsync calls of ``--probe-slots`` commits, by file.

Figures only; nothing is asserted. Usage::

    python benchmarks/bench_store.py [--queued 100000] [--finished 1000000] [--slots 50] [--keep PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from autoscaler.adapters.sqlite_store import PRUNE_ROWS_PER_COMMIT, SqliteJobStore
from autoscaler.core.model import Job, StepSpec

NOW_S = 1_800_000_000.0
SLOT_S = 300.0
DAY_S = 86_400.0
RETENTION_S = 30 * DAY_S
HISTORY_S = 60 * DAY_S
STEP_JSON = json.dumps({"jar": "command-runner.jar", "args": ["spark-submit", "s3://bucket/etl.py", "--day", "x"], "main_class": None})
COLUMNS = "job_id, name, tenant, submit_s, deadline_s, length_s, step, state, released_s, step_id, demand_vector, deadline_text, seq"


def build(path: Path, queued: int, finished: int) -> float:
    """The store file with ``finished`` finished jobs then ``queued`` queued ones; seconds taken."""
    started = time.perf_counter()
    SqliteJobStore(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA cache_size = -262144")  # 256 MiB for the build only
    conn.execute("BEGIN")

    def finished_rows():
        for i in range(finished):
            released_s = NOW_S - HISTORY_S + HISTORY_S * i / finished
            state = "failed" if i % 50 == 0 else "done"
            yield (f"done-{i:07d}", "etl", f"tenant-{i % 4}", released_s - 600.0, released_s + 3600.0, 612.0, STEP_JSON,
                   state, released_s, f"s-{i:07d}", None, None, i + 1)  # fmt: skip

    def queued_rows():
        for i in range(queued):
            submit_s = NOW_S - 7200.0 + 7200.0 * i / queued
            yield (f"queued-{i:07d}", "etl", f"tenant-{i % 4}", submit_s, submit_s + 4 * 3600.0, 612.0, STEP_JSON,
                   "queued", None, None, None, "4h", finished + i + 1)  # fmt: skip

    insert = f"INSERT INTO jobs ({COLUMNS}) VALUES ({', '.join('?' * 13)})"
    conn.executemany(insert, finished_rows())
    conn.executemany(insert, queued_rows())
    conn.execute("UPDATE meta SET value = ? WHERE key = 'last_seq'", (str(finished + queued),))
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return time.perf_counter() - started


class Slots:
    """Drives slots on an open store: the pipeline of queued -> released -> running -> done."""

    def __init__(self, store: SqliteJobStore, per_slot: int) -> None:
        self.store = store
        self.per_slot = per_slot
        self.slot = int(NOW_S // SLOT_S)
        self.seen = store.max_seq()
        self.queued = [job.job_id for job in store.active_jobs()]
        self.released: list[str] = []
        self.running: list[str] = []
        self.arrived = 0

    def arrive(self) -> float:
        jobs = [
            Job(f"new-{self.slot}-{i}", "etl", "tenant-0", self.now_s, self.now_s + 7200.0, 300.0, StepSpec(args=("true",)))
            for i in range(self.per_slot)
        ]
        self.arrived += len(jobs)
        started = time.perf_counter()
        self.store.submit_many(jobs)
        return time.perf_counter() - started

    @property
    def now_s(self) -> float:
        return self.slot * SLOT_S

    def run(self, prune_before_s: float | None, prune_limit_rows: int = PRUNE_ROWS_PER_COMMIT) -> tuple[float, float, int]:
        """One slot: (seconds in jobs_after, seconds in commit_slot, jobs it read)."""
        self.slot += 1
        started = time.perf_counter()
        new = self.store.jobs_after(self.seen)
        read_s = time.perf_counter() - started
        if new:
            self.seen = max(job.seq for job in new)
            self.queued.extend(job.job_id for job in new if job.state == "queued")
        n = self.per_slot
        done, self.running = self.running[:n], self.running[n:]
        started_running, self.released = self.released[:n], self.released[n:]
        release, self.queued = self.queued[:n], self.queued[n:]
        states = {job_id: "done" for job_id in done} | {job_id: "running" for job_id in started_running}
        released = {job_id: (self.now_s, f"s-{self.slot}-{i}") for i, job_id in enumerate(release)}
        decision = {"slot": self.slot, "nodes": 12, "capacity": 11.5, "release": release, "late": [], "solve_ms": 1.25}
        started = time.perf_counter()
        self.store.commit_slot(
            self.slot,
            {"last_slot": self.slot, "backlog": [1.0] * 24},
            released,
            decision,
            states=states,
            prune_before_s=prune_before_s,
            prune_decisions_before_slot=None if prune_before_s is None else int(prune_before_s // SLOT_S),
            prune_limit_rows=prune_limit_rows,
        )
        commit_s = time.perf_counter() - started
        self.running.extend(started_running)
        self.released.extend(release)
        return read_s, commit_s, len(new)


def summary(label: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"  {label:<34} median {statistics.median(ms):7.2f} ms   p90 {p90:7.2f} ms   max {ms[-1]:7.2f} ms   (n = {len(ms)})"


def finished_older_than(path: Path, cutoff_s: float) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT count(*) FROM jobs WHERE state IN ('done', 'failed') AND coalesce(released_s, submit_s) < ?", (cutoff_s,)
        ).fetchone()[0]
    finally:
        conn.close()


def file_figures(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        pages, free, page_size = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "freelist_count", "page_size"))
        jobs = conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
    finally:
        conn.close()
    wal = path.with_name(path.name + "-wal")
    wal_mib = wal.stat().st_size / 2**20 if wal.exists() else 0.0
    return (
        f"{path.stat().st_size / 2**20:8.1f} MiB file ({pages:,} pages of {page_size} B, {free:,} free), "
        f"{wal_mib:.1f} MiB WAL, {jobs:,} jobs"
    )


def phase(slots: Slots, label: str, n: int, prune_before_s, prune_limit_rows: int = PRUNE_ROWS_PER_COMMIT) -> None:
    reads, commits, arrivals, read_jobs = [], [], [], 0
    for _ in range(n):
        arrivals.append(slots.arrive())
        cutoff = prune_before_s() if callable(prune_before_s) else prune_before_s
        read_s, commit_s, got = slots.run(cutoff, prune_limit_rows)
        reads.append(read_s)
        commits.append(commit_s)
        read_jobs += got
    print(f"{label}:")
    print(summary("jobs_after (the slot's read)", reads) + f"   {read_jobs / n:.0f} jobs read per slot")
    print(summary("commit_slot (the slot's write)", commits))
    print(summary("jobs_after + commit_slot", [r + c for r, c in zip(reads, commits)]))
    print(summary(f"submit_many of {slots.per_slot} new jobs", arrivals))


def probe(path: Path, n: int, per_slot: int) -> None:
    """Run ``n`` slots without retention (the child process under strace)."""
    with SqliteJobStore(path) as store:
        slots = Slots(store, per_slot)
        slots.slot += 10_000  # after the parent's slots
        for _ in range(n):
            slots.arrive()
            slots.run(None)


def count_fsyncs(path: Path, n: int, per_slot: int) -> None:
    strace = shutil.which("strace")
    if strace is None:
        print("fsync calls: strace is not installed; not counted")
        return
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace"
        for label, extra in (("arrivals + slots", []), ("slots only", ["--no-arrivals"])):
            subprocess.run(
                [strace, "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync", "-o", str(trace), sys.executable, __file__,
                 "--probe", str(path), "--probe-slots", str(n), "--per-slot", str(per_slot), *extra],
                check=True,
            )  # fmt: skip
            by_file = Counter(os.path.basename(match.group(1)) for match in re.finditer(r"f(?:data)?sync\(\d+<([^>]*)>", trace.read_text()))
            transactions = n * (2 if not extra else 1)
            print(
                f"fsync calls over {n} slots ({label}, {transactions} write transactions, wal_autocheckpoint = 1000 pages): "
                + ", ".join(f"{name}: {count}" for name, count in sorted(by_file.items()))
                + f"  ->  {sum(by_file.values()) / transactions:.2f} per transaction"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--slots", type=int, default=50, help="slots timed in each phase")
    parser.add_argument("--per-slot", type=int, default=50, help="jobs released, started, finished and arriving per slot")
    parser.add_argument("--probe-slots", type=int, default=200, help="slots whose fsyncs are counted")
    parser.add_argument("--keep", type=Path, help="build the store here and keep it (else a temporary folder)")
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--no-arrivals", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        if args.no_arrivals:
            Slots.arrive = lambda self: 0.0  # type: ignore[method-assign]
        probe(args.probe, args.probe_slots, args.per_slot)
        return

    folder = None if args.keep else tempfile.TemporaryDirectory()
    path = args.keep or Path(folder.name) / "jobs.db"
    if path.exists():
        sys.exit(f"{path} exists; give a new path")
    print(f"SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; file in {path.parent}")
    built_s = build(path, args.queued, args.finished)
    print(f"built {args.finished:,} finished + {args.queued:,} queued jobs in {built_s:.1f} s: {file_figures(path)}")

    with SqliteJobStore(path) as store:
        started = time.perf_counter()
        slots = Slots(store, args.per_slot)
        print(f"start-up read (active_jobs, {len(slots.queued):,} jobs): {(time.perf_counter() - started) * 1000:.0f} ms")
        started = time.perf_counter()
        store.recent_step_ids()
        print(f"recent_step_ids(256): {(time.perf_counter() - started) * 1000:.2f} ms")
        phase(slots, "no retention", args.slots, None)
        cutoff_s = NOW_S - RETENTION_S
        backlog = finished_older_than(path, cutoff_s)
        print(f"\n{backlog:,} finished jobs older than the 30-day cutoff; each commit deletes at most {PRUNE_ROWS_PER_COMMIT:,}")
        size_before = file_figures(path)
        print("retention with a backlog, by the bound on rows deleted per commit:")
        for limit in (1_000, 5_000, 10_000):
            commits = []
            for _ in range(5):
                read_s, commit_s, _ = slots.run(cutoff_s, limit)
                commits.append(read_s + commit_s)
            print(summary(f"jobs_after + commit_slot, {limit:,}", commits))
        phase(slots, f"retention with a backlog, {PRUNE_ROWS_PER_COMMIT:,} rows per commit", args.slots, cutoff_s)
        started, commits = time.perf_counter(), 0
        while finished_older_than(path, cutoff_s):
            slots.run(cutoff_s)
            commits += 1
        print(f"  rest of the backlog: {commits} more commits, {time.perf_counter() - started:.1f} s")
        phase(slots, "\nretention caught up (cutoff moves with the slot)", args.slots, lambda: slots.now_s - RETENTION_S)
    print(f"\nbefore pruning: {size_before}")
    print(f"after pruning:  {file_figures(path)}")
    print("  (SQLite keeps deleted pages as free pages, reused by new rows: the file stops growing rather than shrinks)")
    count_fsyncs(path, args.probe_slots, args.per_slot)
    if folder is not None:
        folder.cleanup()


if __name__ == "__main__":
    main()
