"""Online policies against the offline optimum: saving against follow and its ratio to the offline LP's.

For each trace and D = 1..12 (e0 = 1, e1 = 0, beta = 12, 5-minute slots, the switch-off after
the horizon charged to every schedule): the offline LP's saving, and for gcp-u, vfw and hold their
saving and saving / offline saving. The last column checks hold against its targets: ratio >= 0.88
at D = 2, >= 0.95 at D >= 8, and at least GCP-U's saving at every D; and against its guarantee
(policies/hold.py): never more than GCP-U's cost + 2*beta*max L, and (not guaranteed) never more than follow's. Then the per-slot decision time
of hold (each hold_step timed on its own) at D = 12.

Default traces: Workloads A and B (/work/shared/traces/FB-2009_samples_24_times_1hr_{0,1}.tsv).
A SWIM trace's window is the whole days its submissions span (rounded); a .csv load curve is used whole.

Prints figures; asserts nothing. Run:
    .venv/bin/python benchmarks/bench_policies.py [--trace PATH ...] [--synthetic first|fresh|all] [--no-default]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from autoscaler.adapters.files import write_all_atomic
from autoscaler.app.traces import SHIPPED
from autoscaler.core.cost import pad_to_horizon, schedule_cost
from autoscaler.core.model import CostParams
from autoscaler.core.policies import plan
from autoscaler.core.policies.hold import HoldState, hold_step
from autoscaler.core.workload import read_load_curve, read_swim, workload_from_trace

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_traces  # noqa: E402

SHIPPED_DATA = Path(__file__).resolve().parents[1] / "autoscaler" / "data"
DEFAULT_TRACES = [SHIPPED_DATA / SHIPPED[name].file_name for name in ("A", "B")]
"""Workloads A and B as the package ships them, so the benchmark needs nothing beside the repository."""
DEADLINES = list(range(1, 13))
ONLINE = ("gcp-u", "vfw", "hold")


def load_curve(path: Path, slot_s: float, window_slots: int | None) -> np.ndarray:
    """L_t of a trace: a SWIM trace over the whole days it spans (or ``window_slots``), or a load curve."""
    if path.suffix.lower() == ".csv":
        load = read_load_curve(path)
        return load if window_slots is None else np.pad(load[:window_slots], (0, max(0, window_slots - load.shape[0])))
    trace = read_swim(path)
    if window_slots is None:
        # Whole days, as many as the submissions span (the Facebook samples: one, with two jobs just after it).
        window_slots = round(86400 / slot_s) * max(1, round(max(job.submit_s for job in trace.jobs) / 86400))
    return workload_from_trace(trace, slot_s=slot_s, window_slots=window_slots).active


def total_cost(name: str, load: np.ndarray, deadline_slots: int, params: CostParams) -> float:
    schedule = plan(name, load, deadline_slots, params)
    return schedule_cost(schedule.capacity, schedule.assigned, params).total


def meets_targets(deadline_slots: int, hold_ratio: float, gcp_ratio: float, offline_saving: float, excess: list[str]) -> str:
    if offline_saving < 0.01:
        return "n/a (offline saves < 1 %)" + "".join(f", {e}" for e in excess)
    misses = list(excess)
    if hold_ratio < gcp_ratio - 1e-12:
        misses.append("< gcp-u")
    if deadline_slots == 2 and hold_ratio < 0.88:
        misses.append("< 0.88")
    if deadline_slots >= 8 and hold_ratio < 0.95:
        misses.append("< 0.95")
    return "ok" if not misses else "MISS " + ", ".join(misses)


def trace_table(name: str, load: np.ndarray, params: CostParams) -> tuple[Table, int]:
    table = Table(title=f"{name}: {load.shape[0]} slots, sum L {load.sum():,.0f} server-slots, peak {load.max():g}")
    table.add_column("D", justify="right")
    table.add_column("offline", justify="right")
    for policy in ONLINE:
        table.add_column(policy, justify="right")
        table.add_column("ratio", justify="right")
    table.add_column("hold's targets")
    misses = 0
    for deadline in DEADLINES:
        follow = total_cost("follow", load, deadline, params)
        offline_saving = 1 - total_cost("offline", load, deadline, params) / follow
        cells, ratios, costs = [], {}, {}
        for policy in ONLINE:
            if policy == "vfw" and deadline < 2:
                cells += ["-", "-"]
                continue
            costs[policy] = total_cost(policy, load, deadline, params)
            saving = 1 - costs[policy] / follow
            ratios[policy] = saving / offline_saving if offline_saving > 0 else float("nan")
            cells += [f"{100 * saving:.1f} %", f"{ratios[policy]:.3f}"]
        excess = []
        if costs["hold"] > follow * (1 + 1e-9):
            excess.append("> follow")
        if costs["hold"] > costs["gcp-u"] + 2 * params.beta * float(load.max(initial=0.0)) + 1e-9 * follow:
            excess.append("> gcp-u + 2*beta*max L")
        verdict = meets_targets(deadline, ratios["hold"], ratios["gcp-u"], offline_saving, excess)
        misses += verdict.startswith("MISS")
        table.add_row(str(deadline), f"{100 * offline_saving:.1f} %", *cells, verdict)
    return table, misses


def hold_step_times_ms(load: np.ndarray, deadline_slots: int, params: CostParams) -> list[float]:
    """Wall time of each hold_step over the horizon, in ms."""
    state = HoldState.empty(deadline_slots, params)
    times = []
    for value in pad_to_horizon(load, deadline_slots):
        started = time.perf_counter()
        _, _, state = hold_step(state, value, deadline_slots, params)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="append", type=Path, default=[], help="SWIM trace or load curve, repeatable")
    parser.add_argument("--synthetic", choices=["first", "fresh", "all"], default=None, help="also these traces of benchmarks/make_traces.py")
    parser.add_argument("--no-default", action="store_true", help="leave out Workloads A and B")
    parser.add_argument("--window", type=int, default=None, help="slots in every trace's window (default: see above)")
    parser.add_argument("--slot-s", type=float, default=300.0, help="slot length in seconds")
    args = parser.parse_args()
    params = CostParams(e0=1.0, e1=0.0, beta=12.0)
    traces = ([] if args.no_default else list(DEFAULT_TRACES)) + list(args.trace)
    console = Console(width=150)
    with tempfile.TemporaryDirectory(prefix="bench-policies-") as folder:
        if args.synthetic:
            chosen = {**(make_traces.traces() if args.synthetic in ("first", "all") else {}), **(make_traces.fresh_traces() if args.synthetic in ("fresh", "all") else {})}
            traces += write_all_atomic({Path(folder) / name: content for name, content in chosen.items()})
        timing_load = None
        summary = []
        for path in traces:
            load = load_curve(path, args.slot_s, args.window)
            timing_load = load if timing_load is None else timing_load
            table, misses = trace_table(path.name, load, params)
            console.print(table)
            summary.append((path.name, misses))
    console.print("hold's targets missed (of 12 deadlines): " + ", ".join(f"{name} {misses}" for name, misses in summary))
    if timing_load is not None:
        times = hold_step_times_ms(timing_load, 12, params)
        times.sort()
        console.print(
            f"hold, D = 12, {len(times)} slots of {traces[0].name}: per-slot decision median {statistics.median(times):.3f} ms, "
            f"90th percentile {times[int(0.9 * (len(times) - 1))]:.3f} ms, max {times[-1]:.3f} ms"
        )


if __name__ == "__main__":
    main()
