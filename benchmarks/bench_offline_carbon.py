"""Solve time of the carbon-aware offline LP beside the carbon-blind one, printed as a table.

The offline LP (paper: deferral, eq. 3) on the synthetic diurnal load of benchmarks/bench_replay.py,
L_t = round(clip(30 + 20*sin(2*pi*t/288) + N(0, 5), 0)) in 5-minute slots, solved twice per size with
:func:`autoscaler.core.policies.offline.plan`: as written (carbon-blind), and with the operating cost of
slot t multiplied by a daily sine carbon intensity s_t = 350 + 150*sin(2*pi*(t - 144)/288) g/kWh
(200 to 500 g/kWh; low while the load peaks, high six hours later). The LP is given the relative
intensity s_t / mean(s), so that beta = 12 stays in the units of e0 = 1 (one server-slot at average
intensity) and the trade-off between switching and running is the paper's. Both schedules are costed
under the signal with :func:`autoscaler.core.cost.weighted_operating_cost`, converting server-slots to
kWh at an assumed 200 W per server (1/60 kWh per 5-minute slot), and by the abstract cost of eq. (2).

One untimed warm-up solve of each variant first; then one solve per size and variant, wall time including cvxpy's canonicalisation. Figures only;
nothing here asserts a timing. Usage::

    python benchmarks/bench_offline_carbon.py [--quick] [--sizes 10080,100000] [--deadline-slots 12] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_replay import diurnal_load, environment_table  # noqa: E402

from autoscaler.core.cost import schedule_cost, weighted_operating_cost
from autoscaler.core.model import CostParams, Schedule
from autoscaler.core.policies import offline

SIZES = (10_080, 100_000)
QUICK_SIZES = (288, 2_016)
SLOTS_PER_DAY = 288
SLOT_S = 300.0
SERVER_POWER_KW = 0.2
"""Assumed draw of one server, to turn server-slots (e0 = 1) into kWh for the gCO2 column."""
DEFAULT_DEADLINE_SLOTS = 12
DEFAULT_SEED = 0


@dataclass(frozen=True)
class CarbonRow:
    """One horizon: solve times (s), emissions (kg CO2) and abstract costs of both schedules."""

    n_slots: int
    blind_s: float
    aware_s: float
    blind_kg: float
    aware_kg: float
    blind_cost: float
    aware_cost: float


def carbon_intensity(horizon: int) -> np.ndarray:
    """s_t = 350 + 150*sin(2*pi*(t - 144)/288) in gCO2/kWh, shape (horizon,)."""
    slots = np.arange(horizon)
    return 350.0 + 150.0 * np.sin(2.0 * np.pi * (slots - SLOTS_PER_DAY / 2) / SLOTS_PER_DAY)


def emissions_kg(schedule: Schedule, params: CostParams, intensity_g_per_kwh: np.ndarray) -> float:
    """kg CO2 of a schedule's operating energy, with e0 = 1 server-slot = SERVER_POWER_KW * SLOT_S / 3600 kWh."""
    kwh_per_server_slot = SERVER_POWER_KW * SLOT_S / 3600.0
    grams = weighted_operating_cost(schedule.capacity, schedule.assigned, params, intensity_g_per_kwh * kwh_per_server_slot)
    return grams / 1000.0


def time_sizes(sizes: Sequence[int], deadline_slots: int, params: CostParams, seed: int) -> list[CarbonRow]:
    """Solve both LPs at every size; returns one row per size."""
    warm_up = diurnal_load(SLOTS_PER_DAY, seed)
    offline.plan(warm_up, deadline_slots, params)
    offline.plan(warm_up, deadline_slots, params, slot_cost=carbon_intensity(SLOTS_PER_DAY + deadline_slots))
    rows = []
    for n_slots in sizes:
        load = diurnal_load(n_slots, seed)
        intensity = carbon_intensity(n_slots + deadline_slots)
        started = time.perf_counter()
        blind = offline.plan(load, deadline_slots, params)
        blind_s = time.perf_counter() - started
        started = time.perf_counter()
        aware = offline.plan(load, deadline_slots, params, slot_cost=intensity / intensity.mean())
        aware_s = time.perf_counter() - started
        rows.append(
            CarbonRow(
                n_slots=n_slots,
                blind_s=blind_s,
                aware_s=aware_s,
                blind_kg=emissions_kg(blind, params, intensity),
                aware_kg=emissions_kg(aware, params, intensity),
                blind_cost=schedule_cost(blind.capacity, blind.assigned, params).total,
                aware_cost=schedule_cost(aware.capacity, aware.assigned, params).total,
            )
        )
    return rows


def carbon_table(rows: Sequence[CarbonRow], deadline_slots: int) -> Table:
    """Solve times in seconds, emissions in kg CO2 and the abstract cost of eq. (2)."""
    table = Table(
        title=f"Offline LP, carbon-blind vs carbon-aware, diurnal load, D = {deadline_slots}, CostParams()",
        caption=f"kg CO2 at {SERVER_POWER_KW * 1000:g} W per server; cost: eq. (2), unweighted; one solve each",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for header in ("slots T", "blind s", "aware s", "aware/blind", "blind kg", "aware kg", "CO2 saved", "blind cost", "aware cost"):
        table.add_column(header, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(
            f"{row.n_slots:,}",
            f"{row.blind_s:.3f}",
            f"{row.aware_s:.3f}",
            f"{row.aware_s / row.blind_s:.2f}",
            f"{row.blind_kg:,.1f}",
            f"{row.aware_kg:,.1f}",
            f"{(row.blind_kg - row.aware_kg) / row.blind_kg:.2%}",
            f"{row.blind_cost:,.1f}",
            f"{row.aware_cost:,.1f}",
        )
    return table


def slot_counts(text: str) -> tuple[int, ...]:
    """argparse type: comma-separated whole numbers >= 1."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected slot counts >= 1, got {text!r}")
    return sizes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SIZES} slots instead of {SIZES}")
    parser.add_argument("--sizes", type=slot_counts, default=None, help="comma-separated slot counts (overrides --quick)")
    parser.add_argument(
        "--deadline-slots", type=int, default=DEFAULT_DEADLINE_SLOTS, help="deadline D in slots (default %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the synthetic load's noise (default %(default)s)")
    args = parser.parse_args(argv)
    if args.deadline_slots < 0:
        parser.error(f"--deadline-slots must be >= 0, got {args.deadline_slots}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Solve both LPs at every size and print the tables."""
    args = parse_args(argv)
    console = Console(width=max(120, Console().width))
    params = CostParams()
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    console.print(environment_table())
    console.print(carbon_table(time_sizes(sizes, args.deadline_slots, params, args.seed), args.deadline_slots))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
