"""Solve times of the offline LP and of GCP-U's per-slot decision, printed as tables.

Two measurements, both taken in the same run:

1. The offline LP (paper: deferral, eq. 3) on synthetic diurnal load curves
   L_t = round(clip(30 + 20*sin(2*pi*t/288) + N(0, 5), 0)) of 288 (one day of
   5-minute slots) to 100,000 slots, D = 2: :func:`autoscaler.core.policies.offline.plan`
   beside the straightforward ``cumsum`` formulation in cvxpy, with both objectives.
2. GCP-U (paper: deferral, §VI-B) on Workload A at D = 2 and D = 12: the wall time of
   every :func:`autoscaler.core.policies.gcp.gcp_step` call for three GCP-OPT back ends:
   the exact O(nu) solver, the cvxpy problem built once with Parameters, and a cvxpy
   problem rebuilt from scratch every slot.

Figures only; nothing here asserts a timing. Usage::

    python benchmarks/bench_replay.py [--quick] [--budget-s 60] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version

import cvxpy as cp
import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from autoscaler.core.cost import deadline_curve, pad_to_horizon, schedule_cost
from autoscaler.core.errors import SolverError
from autoscaler.core.model import CostParams
from autoscaler.core.policies import offline
from autoscaler.core.policies.gcp import GcpOptProblem, GcpState, gcp_step

OFFLINE_SIZES = (288, 2_016, 10_080, 100_000)
QUICK_SIZES = OFFLINE_SIZES[:2]
OFFLINE_DEADLINE_SLOTS = 2
GCP_DEADLINE_SLOTS = (2, 12)
SLOTS_PER_DAY = 288
WARMUP_SLOTS = 48
DEFAULT_SEED = 0
DEFAULT_BUDGET_S = 60.0

GcpOptSolve = Callable[[np.ndarray, float], np.ndarray]


@dataclass(frozen=True)
class OfflineRow:
    """One horizon of the offline comparison; ``straightforward_s`` is None when skipped."""

    n_slots: int
    ours_s: float
    ours_objective: float
    straightforward_s: float | None
    straightforward_objective: float | None


@dataclass(frozen=True)
class GcpRow:
    """Per-slot decision times (ms) of one GCP-OPT back end at one deadline D."""

    deadline_slots: int
    backend: str
    step_ms: np.ndarray
    total_cost: float


def diurnal_load(n_slots: int, seed: int) -> np.ndarray:
    """Synthetic L_t = round(clip(30 + 20*sin(2*pi*t/288) + N(0, 5), 0)), shape (n_slots,), in servers."""
    rng = np.random.default_rng(seed)
    slots = np.arange(n_slots)
    curve = 30.0 + 20.0 * np.sin(2.0 * np.pi * slots / SLOTS_PER_DAY) + rng.normal(0.0, 5.0, n_slots)
    return np.round(np.clip(curve, 0.0, None))


def solve_straightforward(load: np.ndarray, deadline_slots: int, params: CostParams) -> float:
    """LP (3) written the textbook way, with cumulative sums, solved with Clarabel; returns its optimal value.

    ``load``: L_t, shape (n_slots,); the horizon is n_slots + D with L padded by D
    zeros and l_t = L_{t-D}. The objective charges the final switch-off beta*m_T like
    :func:`autoscaler.core.cost.schedule_cost`. Raises SolverError unless the status is optimal.
    """
    released = pad_to_horizon(load, deadline_slots)
    due = deadline_curve(released, deadline_slots)
    horizon = released.shape[0]
    assigned = cp.Variable(horizon)
    capacity = cp.Variable(horizon)
    switching = cp.abs(capacity[0]) + cp.sum(cp.abs(cp.diff(capacity))) + capacity[horizon - 1]
    objective = params.e0 * cp.sum(capacity) + params.e1 * cp.sum(assigned) + params.beta * switching
    constraints = [
        cp.cumsum(assigned) >= np.cumsum(due),
        cp.cumsum(assigned) <= np.cumsum(released),
        cp.sum(assigned) == released.sum(),
        assigned >= 0,
        assigned <= capacity,
    ]
    if params.max_servers is not None:
        constraints.append(capacity <= params.max_servers)
    problem = cp.Problem(cp.Minimize(objective), constraints)
    problem.solve(solver=cp.CLARABEL)
    if problem.status != cp.OPTIMAL:
        raise SolverError(f"straightforward LP over {horizon} slots was not solved", str(problem.status))
    return float(problem.value)


def time_offline(sizes: Sequence[int], params: CostParams, budget_s: float, seed: int) -> list[OfflineRow]:
    """Time ``offline.plan`` and :func:`solve_straightforward` on a diurnal curve of each size.

    Sizes run in increasing order; once a straightforward solve takes longer than
    budget_s/4 the larger sizes skip it. Both are warmed up on a short curve first so
    one-off import and first-solve costs stay out of the figures. Times in seconds.
    """
    warmup = diurnal_load(WARMUP_SLOTS, seed)
    offline.plan(warmup, OFFLINE_DEADLINE_SLOTS, params)
    solve_straightforward(warmup, OFFLINE_DEADLINE_SLOTS, params)

    rows = []
    over_budget = False
    for n_slots in sorted(sizes):
        load = diurnal_load(n_slots, seed)
        started = time.perf_counter()
        schedule = offline.plan(load, OFFLINE_DEADLINE_SLOTS, params)
        ours_s = time.perf_counter() - started
        ours_objective = schedule_cost(schedule.capacity, schedule.assigned, params).total
        straightforward_s = straightforward_objective = None
        if not over_budget:
            started = time.perf_counter()
            straightforward_objective = solve_straightforward(load, OFFLINE_DEADLINE_SLOTS, params)
            straightforward_s = time.perf_counter() - started
            over_budget = straightforward_s > budget_s / 4
        rows.append(OfflineRow(n_slots, ours_s, ours_objective, straightforward_s, straightforward_objective))
    return rows


def rebuilt_gcp_opt(params: CostParams) -> GcpOptSolve:
    """A GCP-OPT (7) solver that builds a fresh cvxpy problem on every call and solves it with Clarabel.

    The returned function takes Y, shape (nu+1,), and m_{t-1}, and returns m, shape
    (nu+1,), in servers. Raises SolverError unless the status is optimal.
    """

    def solve(prefix_work: np.ndarray, previous_capacity: float) -> np.ndarray:
        capacity = cp.Variable(prefix_work.shape[0])
        switching = cp.abs(capacity[0] - previous_capacity) + cp.sum(cp.abs(cp.diff(capacity)))
        constraints = [
            cp.sum(capacity) == prefix_work[-1],
            cp.cumsum(capacity)[:-1] >= prefix_work[:-1],
            capacity >= 0,
        ]
        if params.max_servers is not None:
            constraints.append(capacity <= params.max_servers)
        problem = cp.Problem(cp.Minimize((params.e0 + params.e1) * cp.sum(capacity) + params.beta * switching), constraints)
        problem.solve(solver=cp.CLARABEL)
        if problem.status != cp.OPTIMAL:
            raise SolverError("rebuilt GCP-OPT was not solved", str(problem.status))
        return np.clip(np.asarray(capacity.value, dtype=float), 0.0, None)

    return solve


def time_gcp_steps(load: np.ndarray, deadline_slots: int, params: CostParams, solve: GcpOptSolve | None) -> tuple[np.ndarray, float]:
    """Drive GCP-U over ``load`` (L_t, shape (n_slots,)) as ``plan_uniform`` does, timing each step.

    Returns the wall time of every ``gcp_step`` call in ms, shape (n_slots + D,), and
    the schedule's total cost (x_t = m_t).
    """
    released = pad_to_horizon(load, deadline_slots)
    horizon = released.shape[0]
    state = GcpState.empty(deadline_slots)
    capacity = np.zeros(horizon)
    step_ms = np.zeros(horizon)
    arrivals = np.zeros(deadline_slots + 1)
    for t in range(horizon):
        arrivals[deadline_slots] = released[t]
        started = time.perf_counter()
        capacity[t], state = gcp_step(state, arrivals, params, solve)
        step_ms[t] = (time.perf_counter() - started) * 1000
    return step_ms, schedule_cost(capacity, capacity, params).total


def time_gcp(load: np.ndarray, params: CostParams) -> list[GcpRow]:
    """Per-slot GCP-U decision times on ``load`` for every D in GCP_DEADLINE_SLOTS and every back end."""
    rows = []
    for deadline_slots in GCP_DEADLINE_SLOTS:
        backends: dict[str, GcpOptSolve | None] = {
            "exact": None,
            "cvxpy once": GcpOptProblem(deadline_slots + 1, params).solve,
            "cvxpy rebuild": rebuilt_gcp_opt(params),
        }
        for name, solve in backends.items():
            step_ms, total_cost = time_gcp_steps(load, deadline_slots, params, solve)
            rows.append(GcpRow(deadline_slots, name, step_ms, total_cost))
    return rows


def load_workload_a() -> np.ndarray:
    """Workload A's active curve L_t (embedded SWIM trace, 5-minute slots), shape (n_slots,)."""
    from autoscaler.app.cli import load_workload
    from autoscaler.core.model import LengthModel

    workload, _ = load_workload(None, slot_s=300.0, window_slots=None, skip_bad_lines=False, length_model=LengthModel())
    return workload.active


def environment_table() -> Table:
    """CPU count and the versions the figures depend on."""
    table = Table(title="Environment", show_header=False, box=box.SIMPLE_HEAD)
    table.add_column("what")
    table.add_column("value")
    table.add_row("CPUs (os.cpu_count)", str(os.cpu_count()))
    table.add_row("Python", platform.python_version())
    table.add_row("numpy", np.__version__)
    table.add_row("cvxpy", cp.__version__)
    table.add_row("clarabel", version("clarabel"))
    return table


def offline_table(rows: Sequence[OfflineRow], budget_s: float) -> Table:
    """Offline LP times in seconds, and both optimal values."""
    table = Table(
        title=f"Offline LP, diurnal load, D = {OFFLINE_DEADLINE_SLOTS}, CostParams(), budget {budget_s:g} s",
        caption="growth: ours, time ratio / size ratio vs the row above; 1 = linear",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for header in ("slots T", "ours s", "growth", "cumsum s", "ours obj", "cumsum obj", "rel diff"):
        table.add_column(header, justify="right", no_wrap=True)
    previous = None
    for row in rows:
        growth = "-"
        if previous is not None:
            growth = f"{(row.ours_s / previous.ours_s) / (row.n_slots / previous.n_slots):.2f}"
        if row.straightforward_s is None:
            straight_s, straight_objective, rel_diff = "skipped (> budget)", "-", "-"
        else:
            straight_s = f"{row.straightforward_s:.3f}"
            straight_objective = f"{row.straightforward_objective:.2f}"
            rel_diff = f"{abs(row.ours_objective - row.straightforward_objective) / abs(row.straightforward_objective):.0e}"
        table.add_row(f"{row.n_slots:,}", f"{row.ours_s:.3f}", growth, straight_s, f"{row.ours_objective:.2f}", straight_objective, rel_diff)
        previous = row
    return table


def gcp_table(rows: Sequence[GcpRow], n_slots: int) -> Table:
    """GCP-U per-slot decision times in ms, and each schedule's total cost."""
    table = Table(
        title=f"GCP-U per-slot decision time, Workload A ({n_slots} slots), CostParams()",
        caption="speed-up: median of cvxpy rebuild / median of this back end, same D",
        box=box.SIMPLE_HEAD,
    )
    for header in ("D", "GCP-OPT back end", "slots", "median ms", "p95 ms", "speed-up", "total cost"):
        table.add_column(header, justify="left" if header == "GCP-OPT back end" else "right")
    rebuilt_median = {row.deadline_slots: float(np.median(row.step_ms)) for row in rows if row.backend == "cvxpy rebuild"}
    for row in rows:
        median_ms = float(np.median(row.step_ms))
        table.add_row(
            str(row.deadline_slots),
            row.backend,
            str(row.step_ms.shape[0]),
            f"{median_ms:.4f}",
            f"{float(np.percentile(row.step_ms, 95)):.4f}",
            f"{rebuilt_median[row.deadline_slots] / median_ms:.0f}x",
            f"{row.total_cost:,.1f}",
        )
    return table


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = float(text)
    if not (np.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"offline LP at {QUICK_SIZES} slots only")
    parser.add_argument(
        "--budget-s",
        type=positive_float,
        default=DEFAULT_BUDGET_S,
        help="skip the cumsum form at larger sizes once one solve took longer than a quarter of this (default %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the synthetic load's noise (default %(default)s)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run both measurements and print the tables."""
    args = parse_args(argv)
    console = Console()
    params = CostParams()
    console.print(environment_table())
    sizes = QUICK_SIZES if args.quick else OFFLINE_SIZES
    console.print(offline_table(time_offline(sizes, params, args.budget_s, args.seed), args.budget_s))
    load = load_workload_a()
    console.print(gcp_table(time_gcp(load, params), load.shape[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
