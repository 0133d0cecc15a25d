"""Time and memory of GCP and GCP-U on Workload A where nu or D is large, and the budget's estimate.

    python benchmarks/bench_budget.py

Each row builds the workload (with L_(d,t) for gcp, k-means included) and runs one policy:
"seconds" is its wall time; "peak MiB" the largest allocation traced in a second run under
tracemalloc (numpy arrays included); "estimate MiB" what ``autoscaler.core.budget`` says for the
curves, L_(d,t) and that policy's schedule, before anything is built.
Figures are printed, never asserted.
"""

from __future__ import annotations

import time
import tracemalloc

import sklearn.cluster  # noqa: F401  (imported before any measurement)
from rich.console import Console
from rich.table import Table

from autoscaler.app.cli import load_workload
from autoscaler.core import budget
from autoscaler.core.model import CostParams, LengthModel
from autoscaler.core.policies import plan

CASES = [
    ("gcp", 300.0, None, 0),
    ("gcp", 10.0, None, 0),
    ("gcp", 300.0, 20_000, 0),
    ("gcp-u", 300.0, 20_000, 10_000),
    ("vfw", 300.0, 20_000, 10_000),
]


def run_case(policy: str, slot_s: float, window: int | None, deadline_slots: int) -> tuple[float, float, float, float]:
    """(seconds, peak MiB, estimated MiB, value updates) of one policy on Workload A: timed
    without tracemalloc, then measured with it (it slows numpy down)."""
    sizes = []

    def build_and_plan() -> None:
        workload, _ = load_workload(
            None, slot_s=slot_s, window_slots=window, skip_bad_lines=False, length_model=LengthModel(),
            deadline_classes=policy == "gcp", check_size=sizes.append,
        )  # fmt: skip
        plan(policy, workload.active, deadline_slots, CostParams(), load_by_deadline=workload.active_by_deadline)

    started = time.perf_counter()
    build_and_plan()
    elapsed = time.perf_counter() - started
    tracemalloc.start()
    build_and_plan()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    estimate = budget.replay_estimate(sizes[0], [policy], deadline_slots)
    core = sum(n.bytes for n in estimate.needs if n.what.startswith(("L_(d,t)", f"{policy}'s schedule", "curves")))
    return elapsed, peak / 2**20, core / 2**20, float(estimate.value_updates.get(policy, 0))


def main() -> None:
    table = Table(title="Workload A: one policy, workload built and planned under tracemalloc")
    for column in ("policy", "slot s", "window", "D", "seconds", "peak MiB", "estimate MiB", "value updates"):
        table.add_column(column, justify="right")
    for policy, slot_s, window, deadline_slots in CASES:
        seconds, peak, estimate, updates = run_case(policy, slot_s, window, deadline_slots)
        table.add_row(policy, f"{slot_s:g}", str(window or "day"), str(deadline_slots), f"{seconds:.2f}", f"{peak:.1f}", f"{estimate:.1f}", f"{updates:.3g}")
    Console().print(table)


if __name__ == "__main__":
    main()
