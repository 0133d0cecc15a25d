"""Replay a workload through provisioning policies and compare their costs (pure).

The result feeds every renderer (table, CSV, JSON, PNG); nothing here does I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from autoscaler.cost import schedule_cost
from autoscaler.errors import ConfigError, InfeasibleError
from autoscaler.model import CostBreakdown, CostParams, Schedule, Workload
from autoscaler.policies import POLICIES, plan, smallest_max_servers
from autoscaler.readable import number_text

BASELINE = "follow"

WORSE_THAN_FOLLOW_RTOL = 1e-9
"""A schedule is worse than follow when it costs more by over this share of follow's cost (solver noise is not)."""


@dataclass(frozen=True)
class PolicyResult:
    """One policy's schedule, its cost and its saving against ``follow`` (in %).

    ``span_slots``: the slots its peak and mean m are taken over, the replay's horizon (the longest
    policy's: the window plus D, or plus gcp's largest class deadline nu), the same for every policy.
    ``worse_than_follow``: the schedule costs more than follow the workload (a negative saving
    beyond rounding); a deferral policy that does is no better than not deferring.
    """

    schedule: Schedule
    cost: CostBreakdown
    saving_pct: float
    span_slots: int
    note: str = ""
    worse_than_follow: bool = False

    @property
    def peak_servers(self) -> float:
        """Largest m_t over the span (servers)."""
        return float(self.schedule.capacity.max(initial=0.0))

    @property
    def mean_servers(self) -> float:
        """Mean m_t over ``span_slots`` (servers): the slots the peak is taken over, so mean <= peak,
        and the same slots for every policy, so policies with a longer horizon stay comparable."""
        return float(self.schedule.capacity.sum()) / max(1, self.span_slots)


@dataclass(frozen=True)
class ReplayResult:
    """Every policy's result on one workload; ``policies`` keeps the order asked for, follow first."""

    workload: Workload
    deadline_slots: int
    params: CostParams
    policies: dict[str, PolicyResult]


def parse_policy_list(text: str) -> list[str]:
    """"all", one name or a comma list -> policy names, with ``follow`` first (the baseline).

    Raises ConfigError naming any unknown policy.
    """
    names = list(POLICIES) if text.strip() == "all" else [p.strip() for p in text.split(",") if p.strip()]
    if "all" in names:
        raise ConfigError(f"--policy: 'all' stands alone, not in a list; got {text!r}")
    if not names:
        raise ConfigError("--policy: expected a policy name, a comma list or 'all'")
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise ConfigError(f"--policy: unknown policy {', '.join(map(repr, unknown))}; expected one of: {', '.join(POLICIES)} or all")
    return [BASELINE] + [n for n in dict.fromkeys(names) if n != BASELINE]


def replay(
    workload: Workload,
    policy_names: list[str],
    deadline_slots: int,
    params: CostParams,
    progress=None,
    delta: int | None = None,
) -> ReplayResult:
    """Run each policy on the workload's L_t (``workload.active``) and cost it (eq. 2).

    ``gcp`` uses ``workload.active_by_deadline``; ``delta`` is VFW's look-ahead.
    ``progress``: optional callable(name) told before each policy runs.
    Raises what :func:`autoscaler.policies.plan` raises (an InfeasibleError under the cap M
    also says the smallest M that works for every policy asked for), and ConfigError when a cost is not a
    finite number (a load or coefficients so large that the sums overflow).
    """
    if not workload.active.any():
        raise ConfigError(f"{workload.source}: the load is zero in every slot of the window: nothing to provision for")
    if deadline_slots > workload.n_slots:
        raise ConfigError(
            f"deadline D = {deadline_slots} slots is longer than the window ({workload.n_slots} slots); "
            f"give a D of at most {workload.n_slots}"
        )
    results: dict[str, PolicyResult] = {}
    baseline_total: float | None = None
    for name in parse_policy_list(",".join(policy_names)):
        if progress is not None:
            progress(name)
        note = ""
        run_params = params
        if name == BASELINE and params.max_servers is not None and workload.active.max() > params.max_servers:
            # Follow cannot defer, so under a cap below the peak it has no schedule; the
            # baseline is then follow without the cap, and the result says so.
            run_params = replace(params, max_servers=None)
            note = (
                f"follow exceeds M = {number_text(params.max_servers)} (peak L_t = {number_text(workload.active.max())}); "
                "the baseline is follow without the cap"
            )
        try:
            schedule = plan(
                name, workload.active, deadline_slots, run_params, delta=delta, load_by_deadline=workload.active_by_deadline
            )
        except InfeasibleError as exc:
            if run_params.max_servers is None:
                raise
            raise InfeasibleError(
                str(exc).removesuffix(f" (solver status: {exc.status})")
                + "; "
                + _smallest_caps(workload, policy_names, deadline_slots, params, delta),
                exc.status,
            ) from None
        cost = schedule_cost(schedule.capacity, schedule.assigned, params)
        if not (math.isfinite(cost.operating) and math.isfinite(cost.switching)):
            raise ConfigError(
                f"{name}: its cost overflows float64 (operating {cost.operating:g}, switching {cost.switching:g}): "
                f"a load of {float(workload.active.sum()):.4g} server-slots with e0 = {params.e0:g}, e1 = {params.e1:g}, "
                f"beta = {params.beta:g}; give the load in servers and the costs per server-slot"
            )
        if baseline_total is None:
            baseline_total = cost.total
        saving = 100.0 * (1.0 - cost.total / baseline_total) + 0.0 if baseline_total > 0 else 0.0
        worse = name != BASELINE and cost.total > baseline_total * (1 + WORSE_THAN_FOLLOW_RTOL) + 1e-12
        results[name] = PolicyResult(schedule, cost, round(saving, 9) + 0.0, workload.n_slots, note, worse)
    span = max(r.schedule.capacity.shape[0] for r in results.values())
    results = {name: replace(r, span_slots=span) for name, r in results.items()}
    return ReplayResult(workload=workload, deadline_slots=deadline_slots, params=params, policies=results)


def _smallest_caps(workload: Workload, names: list[str], deadline_slots: int, params: CostParams, delta: int | None) -> str:
    """"the smallest --max-servers that works: offline 28.4, gcp-u 35" for the policies asked for."""
    caps = {
        name: smallest_max_servers(
            name, workload.active, deadline_slots, params, delta=delta, load_by_deadline=workload.active_by_deadline
        )
        for name in parse_policy_list(",".join(names))
        if name != BASELINE and (name != "gcp" or workload.active_by_deadline is not None)
    }
    if len(caps) == 1:
        ((name, cap),) = caps.items()
        return f"the smallest cap that works for {name} is M = {_rounded_up(cap)} (--max-servers)"
    listed = ", ".join(f"{name} {_rounded_up(cap)}" for name, cap in caps.items())
    return f"the smallest cap that works (--max-servers) is M = {_rounded_up(max(caps.values()))} for all of them: {listed}"


def _rounded_up(value: float) -> str:
    """``value`` to 6 significant figures, rounded up so that the cap printed still works."""
    if value <= 0:
        return "0"
    scale = 10.0 ** (5 - math.floor(math.log10(value)))
    return f"{math.ceil(value * scale) / scale:.6g}"


def to_dict(result: ReplayResult) -> dict:
    """The JSON document of ``autoscaler replay --format json``."""
    w = result.workload
    return {
        "trace": w.source,
        "slot_s": w.slot_s,
        "params": {
            "e0": result.params.e0,
            "e1": result.params.e1,
            "beta": result.params.beta,
            "deadline": result.deadline_slots,
            "max_servers": result.params.max_servers,
        },
        "workload": {
            "n_slots": w.n_slots,
            "n_jobs": w.n_jobs,
            "jobs_after_window": w.jobs_after_window,
            "clipped_jobs": w.clipped_jobs,
            "clipped_job_slots": w.clipped_job_slots,
            "skipped_lines": w.skipped_lines,
            "out_of_order_lines": w.out_of_order_lines,
            "notes": list(w.notes),
            "released": _numbers(w.released),
            "active": _numbers(w.active),
        },
        "policies": {
            name: {
                "cost": r.cost.total,
                "operating_cost": r.cost.operating,
                "switching_cost": r.cost.switching,
                "saving_pct": r.saving_pct,
                "peak_servers": r.peak_servers,
                "mean_servers": r.mean_servers,
                "solve_ms_per_slot": r.schedule.solve_ms_per_slot,
                "note": r.note,
                "worse_than_follow": r.worse_than_follow,
                "m": _numbers(r.schedule.capacity),
                "x": _numbers(r.schedule.assigned),
            }
            for name, r in result.policies.items()
        },
    }


def _numbers(values: np.ndarray) -> list[float]:
    # Rounded to 1e-9 servers: solver noise below that is not information.
    return [round(float(v), 9) + 0.0 for v in values]
