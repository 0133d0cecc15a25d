"""Seconds of the twin's lower bound (:func:`autoscaler.core.twin_bound.twin_lower_bound`), and its
figures, printed as a table.

Workload A (/work/shared/traces/FB-2009_samples_24_times_1hr_0.tsv, one day of 300 s slots): its
jobs as the replay makes them (``autoscaler.app.replay_jobs.trace_jobs``), their true lengths
spread by :func:`twin_load` under the default :class:`TwinConfig` (provision_s 330 s, $0.240 per
node-hour, Table III's 60.30 W idle and 93.87 W busy, sigma 0), bounded at D = 6, 24 and 72 slots
(30 min, 2 h, 6 h). Beside it a 7-day synthetic load (2,016 slots): bench_replay's diurnal
L_t = round(clip(30 + 20 sin(2 pi t/288) + N(0, 5), 0)) in servers. Each bound is timed twice: without
a carbon signal (one LP) and with bench_offline_carbon's daily sine of 200..500 gCO2/kWh (a second
LP for the kgCO2). One untimed warm-up solve first (cvxpy's imports); wall time includes cvxpy's
canonicalisation. Figures only; nothing here asserts a timing. Usage::

    python benchmarks/bench_twin_bound.py [--trace PATH] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_offline_carbon import carbon_intensity  # noqa: E402
from bench_replay import diurnal_load, environment_table  # noqa: E402

from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.core.twin import TwinConfig
from autoscaler.core.twin_bound import TwinBound, twin_load, twin_lower_bound
from autoscaler.core.workload import TRACE_DAY_S, read_swim

WORKLOAD_A = Path("/work/shared/traces/FB-2009_samples_24_times_1hr_0.tsv")
SLOT_S = 300.0
DEADLINES_SLOTS = (6, 24, 72)
WEEK_SLOTS = 7 * 288


def timed(load: np.ndarray, deadline_slots: int, config: TwinConfig, g_per_kwh: np.ndarray | None) -> tuple[float, TwinBound]:
    started = time.perf_counter()
    bound = twin_lower_bound(load, deadline_slots, SLOT_S, config, g_per_kwh=g_per_kwh)
    return time.perf_counter() - started, bound


def bound_table(loads: dict[str, np.ndarray], config: TwinConfig) -> Table:
    table = Table(
        title="Twin lower bound: LP (3) with the twin's costs (default TwinConfig, 300 s slots)",
        caption="s: wall time of twin_lower_bound, one call each; kgCO2 under a 200..500 g/kWh daily sine",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for header in ("load", "slots", "D", "s", "s with CO2", "busy node-h", "node-h", "$", "kWh", "kgCO2"):
        table.add_column(header, justify="right", no_wrap=True)
    for name, load in loads.items():
        for deadline_slots in DEADLINES_SLOTS:
            seconds, bound = timed(load, deadline_slots, config, None)
            carbon_s, carbon = timed(load, deadline_slots, config, carbon_intensity(load.shape[0] + deadline_slots))
            table.add_row(
                name,
                f"{load.shape[0]:,}",
                str(deadline_slots),
                f"{seconds:.3f}",
                f"{carbon_s:.3f}",
                f"{bound.busy_node_hours:,.2f}",
                f"{bound.node_hours:,.2f}",
                f"{bound.cost_usd:,.2f}",
                f"{bound.energy_kwh:,.2f}",
                f"{carbon.co2_kg:,.3f}",
            )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=WORKLOAD_A, help="Workload A's SWIM trace")
    parser.add_argument("--seed", type=int, default=0, help="seed of the 7-day synthetic load")
    args = parser.parse_args(argv)
    config = TwinConfig()
    n_slots = round(TRACE_DAY_S / SLOT_S)
    jobs = trace_jobs(read_swim(args.trace), DEADLINES_SLOTS[0], SLOT_S, TRACE_DAY_S)  # the deadline does not change the load
    loads = {"Workload A": twin_load(jobs, config, SLOT_S, 0.0, n_slots), "7-day diurnal": diurnal_load(WEEK_SLOTS, args.seed)}
    twin_lower_bound(loads["Workload A"][:24], 2, SLOT_S, config)  # warm-up: cvxpy's imports
    console = Console(width=140)  # the whole table, also when piped
    console.print(f"Workload A: {len(jobs):,} jobs in {n_slots} slots")
    console.print(bound_table(loads, config))
    console.print(environment_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
