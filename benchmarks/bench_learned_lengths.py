"""Jobs that overran their deadline, and node-hours, with lengths learned from past runs against lengths
as submitted, printed as a table.

Workload A (FB-2009 day 0) repeated over ``--days`` days (``run --replay A --days N``: each job keeps
its trace id as its name, so from day 2 on every job has a history), on the cluster twin with
``--length-error 0.48``: each name's true length is its submitted (size-model) length x lognormal(0,
0.48), the same factor every day, which puts about 15 % of jobs off by 2x or more (counted here, not
assumed). Each (D, --lengths) pair is one ``autoscaler run --replay`` in its own process, hold, at
D = 12 and 72 slots of 300 s (1 h and 6 h of slack beyond the submitted length).

Columns: jobs that overran (the replay's own count, from the twin's bill); of them, those on days
2..N (the days with a history), from the run times the daemon stored (EMR's step start and end as the
twin reports them; checked against the bill's count); of those, the jobs that could finish by their
deadline at all (true length, the twin's draw computed here, at most the time from submission to the
deadline: a longer one overruns whatever plans it); node-hours billed; jobs released late. Figures only; nothing here asserts. Usage::

    python benchmarks/bench_learned_lengths.py [--days 7] [--deadlines 12,72] [--sigma 0.48]
"""

from __future__ import annotations

import argparse
import math
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.core.recurring import repeat_days
from autoscaler.core.twin import TwinConfig
from autoscaler.core.workload import read_swim

WORKLOAD_A = Path(__file__).resolve().parents[1] / "autoscaler" / "data" / "FB-2009_samples_24_times_1hr_0.tsv"
SLOT_S = 300.0


def row(out: str, label: str) -> str:
    match = re.search(rf"{re.escape(label)}\s*│\s*([^│]+?)\s*│", out)
    if not match:
        raise SystemExit(f"no row {label!r} in the replay's output:\n{out[-3000:]}")
    return match.group(1)


def replay(days: int, deadline_slots: int, lengths: str, sigma: float, folder: Path) -> dict:
    store = folder / f"{lengths}-{deadline_slots}.db"
    command = [
        sys.executable, "-m", "autoscaler", "run", "--replay", "A", "--cluster", "twin", "--length-error", f"{sigma:g}",
        "--deadline", str(deadline_slots), "--days", str(days), "--lengths", lengths, "--store", str(store),
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    with SqliteJobStore(store, read_only=True) as opened:
        jobs = opened.all_jobs()
    twin = TwinConfig(length_error_sigma=sigma)
    later = [job for job in jobs if not job.job_id.endswith("-day1")]
    feasible = [job for job in later if twin.true_length_s(job.name, job.submitted_length_s, job.job_id) <= job.deadline_s - job.submit_s]
    return {
        "overran": int(row(done.stdout, "jobs overran (ended after their deadline)").replace(",", "")),
        "overran_store": sum(1 for job in jobs if job.overran),
        "overran_later": sum(1 for job in later if job.overran),
        "overran_feasible": sum(1 for job in feasible if job.overran),
        "unended": sum(1 for job in jobs if job.run_end_s is None),
        "node_hours": float(row(done.stdout, "node-hours billed (per second, 60 s minimum)").replace(",", "")),
        "busy": float(row(done.stdout, "  booting, idle, busy node-hours").split(", ")[2].replace(",", "")),
        "late": int(row(done.stdout, "jobs late (missed their deadline)").replace(",", "")),
        "learned": int(row(done.stdout, f"lengths planned ({lengths})").split(" learned")[0].replace(",", "")),
        "seconds": time.perf_counter() - started,
    }


def off_by_2x(days: int, sigma: float) -> tuple[int, float]:
    """(jobs, share of them whose true length is off its submitted one by 2x or more), from the twin's draw."""
    trace, names = repeat_days(read_swim(WORKLOAD_A), days, round(86400 / SLOT_S) * SLOT_S)
    jobs = trace_jobs(trace, 0, SLOT_S, days * 86400.0, names=names)
    twin = TwinConfig(length_error_sigma=sigma)
    # The factor a job's submitted length is drawn off by (a job of length 0 has one too).
    ratio = np.array([twin.true_length_s(job.name, 1.0, job.job_id) for job in jobs])
    return len(jobs), float((np.abs(np.log(ratio)) >= np.log(2.0)).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=7, help="days Workload A's day is repeated, each job keeping its name (default %(default)s)")
    parser.add_argument("--deadlines", default="12,72", help="deadlines D in 5-minute slots, a comma list (default %(default)s: 1 h and 6 h)")
    parser.add_argument(
        "--sigma", type=float, default=0.48,
        help="the twin's --length-error: lognormal sigma of each name's factor (default %(default)s: about 15 %% of jobs off by 2x or more)",
    )  # fmt: skip
    args = parser.parse_args()
    try:
        deadlines = [int(d) for d in args.deadlines.split(",")]
    except ValueError:
        parser.error(f"--deadlines {args.deadlines}: expected whole numbers of slots >= 1, a comma list (12,72)")
    if min(deadlines) < 1:
        parser.error(f"--deadlines {args.deadlines}: expected whole numbers of slots >= 1")
    if not 1 <= args.days <= 366:
        parser.error(f"--days {args.days}: expected a whole number of days in 1..366")
    if not (math.isfinite(args.sigma) and 0 <= args.sigma <= 5):
        parser.error(f"--sigma {args.sigma}: expected a finite number in [0, 5] (the twin's --length-error)")
    console = Console(width=240)
    n_jobs, off = off_by_2x(args.days, args.sigma)
    with tempfile.TemporaryDirectory(prefix="bench-learned-") as folder:
        tasks = [(d, lengths) for d in deadlines for lengths in ("submitted", "learned")]
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = dict(zip(tasks, pool.map(lambda task: replay(args.days, task[0], task[1], args.sigma, Path(folder)), tasks)))
    table = Table(
        title=f"Workload A x {args.days} days on the twin, --length-error {args.sigma:g} (seed 0), hold: learned lengths (p90) against submitted",
        box=box.SIMPLE,
    )
    for column in (
        "D", "lengths", "jobs learned", "overran", "change", "overran days 2..N", "change",
        "of them could finish in time", "change", "node-hours billed", "change", "released late", "wall s",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column == "lengths" else "right")
    notes = []

    def change(value: float, base: float, digits: int = 1) -> str:
        return f"{100 * (value / base - 1):+.{digits}f} %" if base else "n/a"

    for d in deadlines:
        base = results[d, "submitted"]
        for lengths in ("submitted", "learned"):
            r = results[d, lengths]
            first = lengths == "submitted"
            table.add_row(
                f"{d} ({d * SLOT_S / 3600:g} h)", lengths, f"{r['learned']:,}",
                f"{r['overran']:,}", "" if first else change(r["overran"], base["overran"]),
                f"{r['overran_later']:,}", "" if first else change(r["overran_later"], base["overran_later"]),
                f"{r['overran_feasible']:,}", "" if first else change(r["overran_feasible"], base["overran_feasible"]),
                f"{r['node_hours']:,.2f}", "" if first else change(r["node_hours"], base["node_hours"], 2),
                f"{r['late']:,}", f"{r['seconds']:.0f}",
            )  # fmt: skip
            if r["unended"] or r["overran_store"] != r["overran"]:
                notes.append(f"D = {d}, {lengths}: {r['unended']:,} jobs without a run end in the store; it counts {r['overran_store']:,} overran")
    notes.append(f"{n_jobs:,} jobs; {100 * off:.1f} % of them off by 2x or more (|ln(true / submitted)| >= ln 2)")
    notes.append("could finish in time: the job's true length is at most the time from its submission to its deadline")
    console.print(table)
    for note in notes:
        console.print(note, highlight=False)


if __name__ == "__main__":
    main()
