"""Seconds `autoscaler compare` takes: Workload A with every policy and baseline, and a 7-day trace of
about 90,000 jobs. Prints figures; asserts nothing.

Each run is the command itself (``autoscaler.app.cli.main``), wall time from the call to its return,
so it includes reading the trace and the worker processes' start.

Run: .venv/bin/python benchmarks/bench_compare.py [--skip-week] [--workers N]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from autoscaler.adapters.files import write_all_atomic
from autoscaler.app.cli import main as cli_main

SLOT_S = 300.0
DAY_SLOTS = 288
MIB = 1024 * 1024


def week_trace(path: Path, jobs_per_day: int = 15_000, seed: int = 7) -> int:
    """A 7-day SWIM trace: a daily cosine of arrivals (night a fifth of the afternoon's peak), weekend
    days at half, lengths as the Facebook samples spread them (most a few seconds, 2 % up to hours)
    through the shuffle size. Returns the number of jobs written."""
    rng = np.random.default_rng(seed)
    slot = np.arange(7 * DAY_SLOTS)
    day = slot // DAY_SLOTS
    phase = 2 * np.pi * (slot % DAY_SLOTS) / DAY_SLOTS
    shape = 0.6 - 0.4 * np.cos(phase - 2 * np.pi * 15 / 24 + np.pi)
    shape *= np.where(day >= 5, 0.5, 1.0)
    rate = shape / shape[:DAY_SLOTS].sum() * jobs_per_day
    counts = rng.poisson(rate)
    lines, previous_s, n = [], 0.0, 0
    for k, count in enumerate(counts):
        for submit_s in np.sort(rng.uniform(k * SLOT_S, (k + 1) * SLOT_S, int(count))):
            long_job = rng.random() < 0.02
            map_bytes = int(rng.uniform(1, 64) * MIB)
            shuffle = int(rng.uniform(300, 6 * 3600) * MIB) if long_job else int(rng.uniform(0, 30) * MIB)
            lines.append(f"job{n}\t{submit_s:.0f}\t{submit_s - previous_s:.0f}\t{map_bytes}\t{shuffle}\t{int(MIB)}")
            previous_s, n = submit_s, n + 1
    write_all_atomic({path: "\n".join(lines) + "\n"})
    return n


def timed(*argv: str) -> tuple[float, dict]:
    """(seconds, the JSON document) of ``autoscaler compare ARGV --format json``."""
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli_main(["compare", *argv, "--format", "json"])
    seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"compare {' '.join(argv)}: exit {status}: {err.getvalue()[-1500:]}")
    return seconds, json.loads(out.getvalue())


def show(title: str, seconds: float, document: dict) -> None:
    print(f"{title}: {seconds:.1f} s ({document['jobs']:,} jobs, {len(document['runs'])} runs)")
    for run in document["runs"]:
        print(f"  D={run['deadline_slots']:>3} {run['name']:<16} {run['node_hours']:>10,.1f} node-h {run['energy_kwh']:>9,.1f} kWh")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-week", action="store_true", help="only Workload A")
    parser.add_argument("--workers", default=None, help="compare --workers (default: the machine's cores)")
    args = parser.parse_args()
    workers = ["--workers", args.workers] if args.workers else []
    seconds, document = timed("--trace", "A", "--deadline", "2h", *workers)
    show("Workload A, every policy and baseline, D = 2 h", seconds, document)
    if args.skip_week:
        return
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "week.tsv"
        n = week_trace(trace)
        print(f"7-day trace: {n:,} jobs")
        seconds, document = timed("--trace", str(trace), "--deadline", "2h", "--max-nodes", "400", *workers)
        show("7-day trace, every policy and baseline, D = 2 h", seconds, document)


if __name__ == "__main__":
    main()
