"""Savings of every policy over a range of deadlines D and of VFW over delta (paper: deferral, Fig. 9, Fig. 11)."""

from __future__ import annotations

from dataclasses import dataclass, field

from autoscaler.cost import schedule_cost
from autoscaler.model import CostParams, Workload
from autoscaler.policies import plan


@dataclass
class SweepResult:
    """Saving in % against follow, by trace: ``by_deadline[trace][policy][D]``,
    ``gcp_classes[trace]`` (GCP with k-means class deadlines, independent of D) and
    ``vfw_by_delta[trace][delta]`` at D = ``delta_deadline``."""

    deadlines: list[int]
    policies: list[str]
    delta_deadline: int
    by_deadline: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)
    gcp_classes: dict[str, float] = field(default_factory=dict)
    vfw_by_delta: dict[str, dict[int, float]] = field(default_factory=dict)


def sweep(
    workloads: dict[str, Workload],
    deadlines: list[int],
    policies: list[str],
    params: CostParams,
    delta_deadline: int = 12,
    advance=None,
) -> SweepResult:
    """Run ``policies`` (not follow, the baseline) at every D on every workload.

    VFW is skipped at D < 2, where no delta satisfies 0 < delta < D. ``advance``:
    optional callable() told after each solve, for a progress bar.
    """
    result = SweepResult(deadlines=list(deadlines), policies=list(policies), delta_deadline=delta_deadline)

    def saving(name: str, workload: Workload, deadline: int, **options) -> float:
        schedule = plan(name, workload.active, deadline, params, **options)
        baseline = plan("follow", workload.active, deadline, params)
        base = schedule_cost(baseline.capacity, baseline.assigned, params).total
        cost = schedule_cost(schedule.capacity, schedule.assigned, params).total
        if advance is not None:
            advance()
        return 100.0 * (1.0 - cost / base) if base > 0 else 0.0

    for trace, workload in workloads.items():
        table = result.by_deadline.setdefault(trace, {})
        for name in policies:
            for deadline in deadlines:
                if name == "vfw" and deadline < 2:
                    continue
                table.setdefault(name, {})[deadline] = saving(name, workload, deadline)
        if workload.active_by_deadline is not None:
            result.gcp_classes[trace] = saving("gcp", workload, 0, load_by_deadline=workload.active_by_deadline)
        result.vfw_by_delta[trace] = {
            delta: saving("vfw", workload, delta_deadline, delta=delta) for delta in range(1, delta_deadline)
        }
    return result


def solves_needed(n_traces: int, deadlines: list[int], policies: list[str], delta_deadline: int) -> int:
    """How many policy runs :func:`sweep` makes, for a progress bar's total."""
    per_trace = sum(1 for name in policies for d in deadlines if not (name == "vfw" and d < 2))
    return n_traces * (per_trace + 1 + max(0, delta_deadline - 1))
