"""What an operator pays and gets, per policy or baseline, from a finished cluster twin. Pure.

`autoscaler compare` runs the product's policies through the daemon's slot loop and the baselines
an operator would run instead (``autoscaler.core.baselines``) on the same twin and the same jobs;
this module turns each finished twin into one row of figures, in the operator's units: node-hours
billed, $, kWh, kgCO2, jobs released late, jobs that finished after their deadline, the wait from
submission to start, peak nodes and scale events (issue 21, item 3).

Times are seconds from the trace's start (slot 0 starts at 0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np

from autoscaler.core.baselines import MANAGED_VARIANTS
from autoscaler.core.twin import ClusterTwin, StepRun

FIGURE_UNITS = {
    "node_hours": "node-hours billed (per second, 60 s minimum per node)",
    "cost_usd": "$ at the twin's price per node-hour",
    "energy_kwh": "kWh of the power model over every node's life (booting, idle, busy)",
    "co2_kg": "kgCO2eq: each slot's energy x the carbon signal (with --carbon), over the slots it covers",
    "co2_uncovered_slots": "slots in which the run used energy the carbon signal does not cover (left out of co2_kg)",
    "busy_node_hours": "node-hours running a job to its end (the same work under every policy)",
    "jobs": "jobs run",
    "jobs_released_late": "jobs released after their start-by slot (deadline - estimated length)",
    "jobs_finished_after_deadline": "jobs that overran: their step ended after their deadline",
    "overran_too_long": "of those, jobs that ran longer than their deadline left from submission: late whatever runs them",
    "overran_held": "of those, jobs released with less time left than they ran (held back, or waiting for a slot's decision)",
    "overran_waited": "of those, the rest: released in time for the length they ran, then waited for a node (or were killed and run again)",
    "wait_p50_s": "median seconds from submission to the step's first start",
    "wait_p95_s": "95th percentile of the same",
    "peak_nodes": "most nodes up at once (booting, idle, busy or draining)",
    "scale_events": "resizes that changed the nodes asked for",
    "jobs_killed": "runs killed at the decommission timeout (and run again)",
}
"""Every figure of a row, its key in ``--format json`` and what it counts, in the words of the help."""


@dataclass(frozen=True)
class TwinFigures:
    """One row of ``autoscaler compare``: ``name`` (a policy, a baseline or ``bound``), the deadline
    D in slots, and the figures of :data:`FIGURE_UNITS` (``co2_kg`` None without a signal; a bound
    has no job counts, waits, peak or scale events: None)."""

    name: str
    deadline_slots: int
    node_hours: float
    cost_usd: float
    energy_kwh: float
    co2_kg: float | None
    co2_uncovered_slots: int | None
    busy_node_hours: float
    jobs: int | None
    jobs_released_late: int | None
    jobs_finished_after_deadline: int | None
    overran_too_long: int | None
    overran_held: int | None
    overran_waited: int | None
    wait_p50_s: float | None
    wait_p95_s: float | None
    peak_nodes: int | None
    scale_events: int | None
    jobs_killed: int | None

    def to_dict(self) -> dict:
        return asdict(self)


def released_late(added_s: float, deadline_s: float, estimate_s: float, slot_s: float) -> bool:
    """Whether a job added as a step at ``added_s`` was released after its start-by slot, the slot of
    (deadline - estimated length) (``autoscaler.core.lateness``: released in that slot is in time)."""
    return math.floor(added_s / slot_s + 1e-9) > math.floor((deadline_s - estimate_s) / slot_s + 1e-9)


def overran_causes(steps: Iterable[StepRun]) -> tuple[int, int, int]:
    """Why the steps that ended after their deadline did: (too long, held, waited), which sum to them.
    Too long: the job's true length exceeds deadline - submit, so it overruns even started at once.
    Held: not too long, but added as a step with less than its true length left (added + true >
    deadline): held back by the policy, or waiting for the slot loop's next decision. Waited: the
    rest, added in time for the length it ran, then late from waiting PENDING for a node or from a
    run killed at a decommission and run again. Times s; checkable from each step's own record."""
    too_long = held = waited = 0
    for step in steps:
        if step.end_s is None or step.end_s <= step.deadline_s + 1e-6:
            continue
        if step.submit_s + step.true_s > step.deadline_s + 1e-6:
            too_long += 1
        elif step.added_s + step.true_s > step.deadline_s + 1e-6:
            held += 1
        else:
            waited += 1
    return too_long, held, waited


def twin_figures(name: str, twin: ClusterTwin, deadline_slots: int, slot_s: float, g_per_kwh: np.ndarray | None = None) -> TwinFigures:
    """The row of a finished twin (call ``twin.finish`` first). ``g_per_kwh``: the carbon signal per
    slot of ``slot_s`` from 0, shape (n_slots,), NaN where it does not cover (those slots' energy is
    left out of ``co2_kg`` and counted in ``co2_uncovered_slots``). Energy used before 0 (nodes
    booting for the trace's start) is priced at the first slot's value. A job's wait runs from its
    submit time to its step's first start."""
    bill = twin.bill()
    steps = list(twin.steps.values())
    too_long, held, waited = overran_causes(steps)
    started = [step for step in steps if step.start_s is not None]
    waits = np.array([step.start_s - step.submit_s for step in started]) if started else np.zeros(1)
    co2_kg = uncovered = None
    if g_per_kwh is not None:
        values = np.asarray(g_per_kwh, dtype=float)
        early = _slots_before_zero(twin, slot_s)
        values = np.concatenate([np.full(early, values[0] if len(values) else np.nan), values])
        co2_kg, uncovered = bill.carbon_kg(-early * slot_s, slot_s, values)
    return TwinFigures(
        name=name,
        deadline_slots=deadline_slots,
        node_hours=bill.billed_node_s / 3600.0,
        cost_usd=bill.cost_usd,
        energy_kwh=bill.energy_wh / 1000.0,
        co2_kg=co2_kg,
        co2_uncovered_slots=uncovered,
        busy_node_hours=bill.work_node_s / 3600.0,
        jobs=len(steps),
        jobs_released_late=sum(released_late(s.added_s, s.deadline_s, s.estimate_s, slot_s) for s in steps),
        jobs_finished_after_deadline=too_long + held + waited,
        overran_too_long=too_long,
        overran_held=held,
        overran_waited=waited,
        wait_p50_s=float(np.percentile(waits, 50)),
        wait_p95_s=float(np.percentile(waits, 95)),
        peak_nodes=bill.peak_nodes,
        scale_events=bill.scale_events,
        jobs_killed=bill.jobs_killed,
    )


def _slots_before_zero(twin: ClusterTwin, slot_s: float) -> int:
    """Whole slots before 0 in which the twin had a node (a fixed cluster booted for the start)."""
    first_s = min((node.requested_s for node in twin.nodes.values()), default=0.0)
    return max(0, math.ceil(-first_s / slot_s - 1e-9))


def cumulative_use(twin: ClusterTwin, slot_s: float, n_slots: int, g_per_kwh: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(kWh, kgCO2eq) used from the twin's first node to the end of each slot from 0, shapes
    (n_slots,): energy before 0 is in the first slot's figure, so the last is the bill's energy.
    kgCO2eq with ``g_per_kwh`` (as :func:`twin_figures` takes it, uncovered slots adding nothing), else None."""
    early = _slots_before_zero(twin, slot_s)
    boundaries = slot_s * np.arange(-early, n_slots + 1, dtype=float)
    used_wh = twin.bill().energy_wh_between(boundaries)
    used_wh = np.concatenate([[used_wh[: early + 1].sum()], used_wh[early + 1 :]])
    kwh = np.cumsum(used_wh) / 1000.0
    if g_per_kwh is None:
        return kwh, None
    values = np.asarray(g_per_kwh, dtype=float)[:n_slots]
    values = np.concatenate([values, np.full(n_slots - len(values), np.nan)])
    return kwh, np.cumsum(np.nan_to_num(used_wh * values)) / 1e6


def against(value: float, reference: float) -> float | None:
    """``value`` against ``reference`` in %: +10 is 10 % more; None when the reference is 0."""
    return None if reference == 0 else 100.0 * (value / reference - 1.0)


def strongest_managed(rows: Iterable[TwinFigures | None]) -> TwinFigures | None:
    """The row every other is set against, among one deadline's rows (None: a run that did not
    finish): the managed variant (:data:`~autoscaler.core.baselines.MANAGED_VARIANTS`) with the least
    kWh among those that finished, the first of them on a tie; None when none did."""
    finished = [row for row in rows if row is not None and row.name in MANAGED_VARIANTS]
    return min(finished, key=lambda row: (row.energy_kwh, MANAGED_VARIANTS.index(row.name)), default=None)
