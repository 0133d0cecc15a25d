"""hold+carbon's window LP: ms per slot and CO2 of the grid LP (carbon_lp.solve_window) against the slot LP
(carbon_lp.solve_window_exact), printed as a table.

Load: Workload A (the shipped SWIM trace, 5-minute slots). Signal: the French grid's carbon intensity
of 2020 (a CSV ``Time,Carbon Intensity``, naive UTC, 30-minute values, each repeated over six
5-minute slots), one day of history before slot 0, persistence for the slots ahead
(:class:`autoscaler.core.slot_signal.SlotSignal`, 288 slots a day). For each day and D, carbon.plan
is run once with each solver: "solve" is the wall time of each window LP (median and p95 over the
slots), "plan" is carbon.plan's own ms per slot (hold's shadow, the signal's window and the LP).
CO2: autoscaler.core.energy.accounting.modelled_schedule (Table III, whole nodes, 300 s boot at idle power) times
s_t, as benchmarks/bench_carbon.py; "dCO2" is the grid LP's against the slot LP's, "max |dm|" the
largest difference of m_t between the two schedules, servers.

Figures only; nothing here asserts anything. Usage::

    python benchmarks/bench_carbon_lp.py [--quick] [--grid /work/shared/grid/fr_ci_2020.csv]
        [--days 2020-01-15,2020-04-15,2020-07-15] [--deadlines 12,24,72,144] [--beta 12]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
from rich import box
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_carbon import co2_kg  # noqa: E402
from bench_replay import environment_table, load_workload_a  # noqa: E402

from autoscaler.core.model import CostParams
from autoscaler.core.policies import carbon, carbon_lp
from autoscaler.core.slot_signal import SlotSignal

SLOTS_PER_DAY = 288
SLOT_S = 300.0
SOURCE_SLOT_S = 1800.0
SOLVERS = {"slot LP": carbon_lp.solve_window_exact, "grid LP": carbon_lp.solve_window}


def read_intensity(path: Path) -> tuple[dt.datetime, np.ndarray]:
    """(the first row's time, gCO2eq/kWh per 5-minute slot, shape (6 * rows,)) of a ``Time,Carbon Intensity`` CSV."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    first = dt.datetime.fromisoformat(rows[0]["Time"])
    values = np.array([float(row["Carbon Intensity"]) for row in rows])
    return first, np.repeat(values, int(SOURCE_SLOT_S // SLOT_S))


def day_signal(first: dt.datetime, intensity: np.ndarray, day: dt.date, n_slots: int) -> SlotSignal:
    """The signal from 00:00 UTC of ``day`` over ``n_slots`` slots, with the day before as history."""
    start = int((dt.datetime.combine(day, dt.time()) - first).total_seconds() // SLOT_S)
    if start < SLOTS_PER_DAY or start + n_slots > intensity.shape[0]:
        raise SystemExit(f"bench_carbon_lp: {day} and the {n_slots} slots after it are not all in the series")
    return SlotSignal(intensity[start - SLOTS_PER_DAY : start + n_slots], SLOTS_PER_DAY, SLOTS_PER_DAY)


@contextlib.contextmanager
def timed_solver(solver: Callable) -> Iterator[list[float]]:
    """carbon.plan's window LP replaced by ``solver``, each call's wall time appended (ms) to the list yielded."""
    solve_ms: list[float] = []

    def timed(*args):
        started = time.perf_counter()
        try:
            return solver(*args)
        finally:
            solve_ms.append((time.perf_counter() - started) * 1000)

    original = carbon.solve_window
    carbon.solve_window = timed
    try:
        yield solve_ms
    finally:
        carbon.solve_window = original


def measure(load: np.ndarray, deadline_slots: int, params: CostParams, signal: SlotSignal) -> dict:
    """Per solver: the schedule, its kg CO2eq, the LP's ms per call and plan's ms per slot; "groups":
    the grid LP's slot groups, mean over the slots' windows."""
    horizon = load.shape[0] + deadline_slots
    intensity = signal.actual(horizon)
    n = carbon.window_slots(deadline_slots)
    out: dict = {"groups": np.mean([carbon_lp.window_groups(signal.window(t, n), deadline_slots).shape[0] for t in range(horizon)])}
    for name, solver in SOLVERS.items():
        with timed_solver(solver) as solve_ms:
            schedule = carbon.plan(load, deadline_slots, params, signal)
        out[name] = {
            "schedule": schedule,
            "kg": co2_kg(schedule, intensity),
            "solve_ms": np.array(solve_ms),
            "plan_ms": schedule.solve_ms_per_slot,
        }
    return out


def result_table(rows: list[tuple[str, int, dict]], params: CostParams, source: str) -> Table:
    table = Table(
        title=f"hold+carbon's window LP on Workload A, {source}, e0 = {params.e0:g}, beta = {params.beta:g}",
        caption="slots, groups: of the window LP (groups: mean); solve: ms per window LP (median, p95); plan: carbon.plan's ms per slot",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    headers = ("day", "D", "slots", "groups", "slot LP med", "p95", "plan", "grid LP med", "p95", "plan")
    for header in headers + ("slot LP kg", "grid LP kg", "dCO2", "max |dm|"):
        table.add_column(header, justify="right", no_wrap=True)
    for day, deadline_slots, figures in rows:
        n = carbon.window_slots(deadline_slots)
        exact, grid = figures["slot LP"], figures["grid LP"]
        timing = []
        for f in (exact, grid):
            solve_ms = f["solve_ms"]
            median, p95 = (float(np.median(solve_ms)), float(np.percentile(solve_ms, 95))) if solve_ms.size else (0.0, 0.0)
            timing += [f"{median:.1f}", f"{p95:.1f}", f"{f['plan_ms']:.1f}"]
        gap_m = float(np.max(np.abs(grid["schedule"].capacity - exact["schedule"].capacity)))
        table.add_row(
            day,
            f"{deadline_slots} ({deadline_slots * SLOT_S / 3600:g} h)",
            str(n),
            f"{figures['groups']:.0f}",
            *timing,
            f"{exact['kg']:,.2f}",
            f"{grid['kg']:,.2f}",
            f"{grid['kg'] / exact['kg'] - 1.0:+.3%}",
            f"{gap_m:.3g}",
        )
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the first day only")
    parser.add_argument("--grid", type=Path, default=Path("/work/shared/grid/fr_ci_2020.csv"), help="carbon intensity CSV")
    parser.add_argument("--days", default="2020-01-15,2020-04-15,2020-07-15", help="days (UTC) to start on, a comma list")
    parser.add_argument("--deadlines", default="12,24,72,144", help="deadlines D in slots, a comma list (default %(default)s)")
    parser.add_argument("--beta", type=float, default=12.0, help="switching cost beta in server-slots (default %(default)s)")
    args = parser.parse_args(argv)
    params = CostParams(beta=args.beta)
    load = load_workload_a()
    first, intensity = read_intensity(args.grid)
    days = [dt.date.fromisoformat(d) for d in args.days.split(",")]
    deadlines = [int(d) for d in args.deadlines.split(",")]
    if args.quick:
        days = days[:1]
    cases = [(day, d) for day in days for d in deadlines]
    console = Console(width=max(160, Console().width))
    console.print(environment_table())
    rows = []
    started = time.perf_counter()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("replaying", total=len(cases))
        for day, deadline_slots in cases:
            signal = day_signal(first, intensity, day, load.shape[0] + deadline_slots + carbon.window_slots(deadline_slots))
            rows.append((day.isoformat(), deadline_slots, measure(load, deadline_slots, params, signal)))
            progress.advance(task)
    console.print(result_table(rows, params, args.grid.name))
    console.print(f"{len(cases)} cases in {time.perf_counter() - started:,.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
