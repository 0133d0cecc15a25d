"""Emissions of hold+carbon against the carbon-aware offline LP, printed as a table.

Loads: Workload A (one day of 5-minute slots, the shipped trace), the same day three times over
(``A x3``: a trace that goes on, so the last D slots, which only the offline LP knows are empty,
weigh a third as much), and the synthetic diurnal load of bench_replay.py over three days.
Signals: a daily sine s_t = 350 + 150*sin(2*pi*(t - phase)/288) gCO2eq/kWh (200 to 500), at four
phases (its clean hours at 06:00, 12:00, 18:00 and 00:00 of the trace's clock), with one day of
history before slot 0 so that persistence has a yesterday. Policies: follow, hold (carbon-blind),
the offline LP blind and with s_t / mean(s), and hold+carbon with a persistence forecast (on a
periodic signal it equals a perfect forecast). Emissions: autoscaler.core.energy.accounting.modelled_schedule
(Table III, whole nodes, 300 s boot at idle power) times s_t. "kept" is hold+carbon's CO2 cut
against follow divided by the carbon-aware offline LP's.

Figures only; nothing here asserts anything. Usage::

    python benchmarks/bench_carbon.py [--quick] [--deadlines 12,24,72,144] [--beta 12]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from rich import box
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_replay import diurnal_load, environment_table, load_workload_a  # noqa: E402

from autoscaler.core.cost import schedule_cost
from autoscaler.core.energy.accounting import modelled_schedule
from autoscaler.core.model import CostParams
from autoscaler.core.policies import carbon, follow, hold, offline

SLOTS_PER_DAY = 288
SLOT_S = 300.0
PHASES = {"06:00": 144, "12:00": 216, "18:00": 0, "00:00": 72}
"""Time of the clean trough -> phase of the sine in slots (the trough is 3/4 of a period after the phase)."""


def daily_signal(n_slots: int, phase: int) -> carbon.SlotSignal:
    """The daily sine over one day of history, the horizon and its look-ahead, gCO2eq/kWh."""
    slots = np.arange(-SLOTS_PER_DAY, n_slots)
    values = 350.0 + 150.0 * np.sin(2.0 * np.pi * (slots - phase) / SLOTS_PER_DAY)
    return carbon.SlotSignal(values=values, history_slots=SLOTS_PER_DAY, slots_per_day=SLOTS_PER_DAY, kind="persistence")


def co2_kg(schedule, intensity: np.ndarray) -> float:
    """kg CO2eq of a schedule: modelled Wh per slot times s_t."""
    energy = modelled_schedule(schedule.policy, schedule.capacity, schedule.assigned, SLOT_S)
    return float(energy.slot_energy_wh @ intensity) / 1e6


def measure(load: np.ndarray, deadline_slots: int, params: CostParams, phase: int) -> dict[str, tuple[float, float]]:
    """(kg CO2eq, abstract cost of eq. 2) per policy."""
    horizon = load.shape[0] + deadline_slots
    signal = daily_signal(horizon + carbon.window_slots(deadline_slots), phase)
    intensity = signal.actual(horizon)
    schedules = {
        "follow": follow.plan(load, deadline_slots, params),
        "hold": hold.plan(load, deadline_slots, params),
        "offline": offline.plan(load, deadline_slots, params),
        "offline+carbon": offline.plan(load, deadline_slots, params, slot_cost=intensity / intensity.mean()),
        "hold+carbon": carbon.plan(load, deadline_slots, params, signal),
    }
    return {
        name: (co2_kg(s, intensity), schedule_cost(s.capacity, s.assigned, params).total) for name, s in schedules.items()
    }


def result_table(rows: list[tuple[str, int, str, dict[str, tuple[float, float]]]], params: CostParams) -> Table:
    table = Table(
        title=f"CO2 cut against follow, daily sine 200-500 gCO2eq/kWh, e0 = {params.e0:g}, beta = {params.beta:g}",
        caption="cut: 1 - kg/kg(follow); kept: hold+carbon's cut / offline+carbon's; cost: eq. (2), unweighted",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for header in ("load", "D", "clean at", "follow kg", "hold", "offline", "offline+c", "hold+c", "kept", "cost off+c", "cost hold+c"):
        table.add_column(header, justify="right", no_wrap=True)
    for load_name, deadline_slots, clean_at, figures in rows:
        cut = {name: 1.0 - kg / figures["follow"][0] for name, (kg, _) in figures.items()}
        table.add_row(
            load_name,
            f"{deadline_slots * SLOT_S / 3600:g} h",
            clean_at,
            f"{figures['follow'][0]:,.1f}",
            f"{cut['hold']:.1%}",
            f"{cut['offline']:.1%}",
            f"{cut['offline+carbon']:.1%}",
            f"{cut['hold+carbon']:.1%}",
            f"{cut['hold+carbon'] / cut['offline+carbon']:.2f}" if cut["offline+carbon"] > 0 else "-",
            f"{figures['offline+carbon'][1]:,.0f}",
            f"{figures['hold+carbon'][1]:,.0f}",
        )
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Workload A only, D = 6 h, two phases")
    parser.add_argument("--deadlines", default="12,24,72,144", help="deadlines D in slots, a comma list (default %(default)s)")
    parser.add_argument("--beta", type=float, default=12.0, help="switching cost beta in server-slots (default %(default)s)")
    args = parser.parse_args(argv)
    params = CostParams(beta=args.beta)
    workload_a = load_workload_a()
    loads = {"A": workload_a, "A x3": np.tile(workload_a, 3), "diurnal 3d": diurnal_load(3 * SLOTS_PER_DAY, 0)}
    deadlines = [int(d) for d in args.deadlines.split(",")]
    phases = PHASES
    if args.quick:
        loads, deadlines, phases = {"A": workload_a}, [72], {k: PHASES[k] for k in ("06:00", "18:00")}
    cases = [(name, d, clean) for name in loads for d in deadlines for clean in phases]
    console = Console(width=max(140, Console().width))
    console.print(environment_table())
    rows = []
    started = time.perf_counter()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("replaying", total=len(cases))
        for name, deadline_slots, clean_at in cases:
            rows.append((name, deadline_slots, clean_at, measure(loads[name], deadline_slots, params, phases[clean_at])))
            progress.advance(task)
    console.print(result_table(rows, params))
    console.print(f"{len(cases)} cases in {time.perf_counter() - started:,.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
