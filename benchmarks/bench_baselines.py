"""Seconds each baseline (fixed, managed, custom-rules) and smallest_fixed_nodes take on the twin.

    python benchmarks/bench_baselines.py [--sigma 0.5]

Two loads: Workload A (the shipped FB-2009_samples_24_times_1hr_0.tsv, as /work/shared/traces has it; its day of 288
five-minute slots, deadline D = 24 slots = 2 h after each job's estimated end) and a synthetic
week of about 90,000 jobs (seed 21: Poisson arrivals on a daily cosine from 15 to 75 jobs per
slot; 92 % of jobs take 1-60 s, 8 % 5 minutes to 6 hours, log-uniform; the same 2 h deadline).
"seconds" is one run's wall time; the other columns are the run's bill, to show what was run
("late jobs": ended after their deadline). ``fixed`` runs at max_nodes and at the smallest size
that meets every deadline (with --sigma > 0 some true lengths outrun their deadline at any size).
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.app.traces import open_trace
from autoscaler.core.baselines import BASELINES, run_baseline, smallest_fixed_nodes
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.twin import TwinConfig
from autoscaler.core.workload import read_swim, workload_from_trace

SLOT_S = 300.0
DEADLINE_SLOTS = 24


def workload_a() -> list[Job]:
    with open_trace("A") as (path, _):
        trace = read_swim(path)
    n_slots = workload_from_trace(trace, slot_s=SLOT_S).n_slots
    return trace_jobs(trace, deadline_slots=DEADLINE_SLOTS, slot_s=SLOT_S, window_s=n_slots * SLOT_S)


def synthetic_week(seed: int = 21) -> list[Job]:
    """About 90,000 jobs over 7 days of 5-minute slots, deterministic."""
    rng = np.random.default_rng(seed)
    slots = np.arange(7 * 288)
    rate = 45.0 - 30.0 * np.cos(2 * np.pi * slots / 288)  # 15 jobs per slot at midnight, 75 at noon
    counts = rng.poisson(rate)
    submit_s = np.concatenate([np.sort(rng.uniform(s * SLOT_S, (s + 1) * SLOT_S, c)) for s, c in zip(slots, counts)])
    long_job = rng.random(len(submit_s)) < 0.08
    length_s = np.where(long_job, np.exp(rng.uniform(np.log(300.0), np.log(21_600.0), len(submit_s))), rng.uniform(1.0, 60.0, len(submit_s)))
    step = StepSpec(args=("true",))
    return [
        Job(job_id=f"w{i}", name=f"w{i}", tenant="trace", submit_s=float(s), deadline_s=float(s + n + DEADLINE_SLOTS * SLOT_S), length_s=float(n), step=step)
        for i, (s, n) in enumerate(zip(submit_s, length_s))
    ]


def late(twin) -> int:
    return sum(1 for step in twin.steps.values() if step.end_s > step.deadline_s + 1e-6)


def bench(title: str, jobs: list[Job], config: TwinConfig, max_nodes: int, console: Console) -> None:
    table = Table(title=f"{title}: {len(jobs):,} jobs, max_nodes {max_nodes}, sigma {config.length_error_sigma:g}")
    for column in ("run", "seconds", "node-h", "$", "kWh", "late jobs", "peak nodes", "scale events"):
        table.add_column(column, justify="right")
    started = time.perf_counter()
    smallest, met = smallest_fixed_nodes(jobs, config, max_nodes=max_nodes, start_s=0.0)
    table.add_row("smallest_fixed_nodes", f"{time.perf_counter() - started:.2f}", f"N = {smallest}", "", "", "" if met else "misses", "", "")
    cases = [("fixed", None)] + ([("fixed", smallest)] if smallest != max_nodes else []) + [(name, None) for name in BASELINES if name != "fixed"]
    for name, fixed_nodes in cases:
        started = time.perf_counter()
        twin = run_baseline(name, jobs, config, min_nodes=0, max_nodes=max_nodes, start_s=0.0, fixed_nodes=fixed_nodes)
        seconds = time.perf_counter() - started
        bill = twin.bill()
        label = f"{name} {fixed_nodes or max_nodes}" if name == "fixed" else name
        table.add_row(
            label, f"{seconds:.2f}", f"{bill.billed_node_s / 3600:,.1f}", f"{bill.cost_usd:,.2f}", f"{bill.energy_wh / 1000:,.1f}",
            str(late(twin)), str(bill.peak_nodes), str(bill.scale_events),
        )  # fmt: skip
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sigma", type=float, default=0.0, help="length error sigma (default 0)")
    args = parser.parse_args()
    console = Console(width=120)
    config = TwinConfig(length_error_sigma=args.sigma)
    bench("Workload A (one day)", workload_a(), config, 100, console)
    bench("Synthetic week", synthetic_week(), config, 250, console)


if __name__ == "__main__":
    main()
