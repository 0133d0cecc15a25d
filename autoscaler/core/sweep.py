"""Savings of every policy over a range of deadlines D and of VFW over delta (paper: deferral, Fig. 9, Fig. 11).

With a signal (a carbon intensity or a price, :class:`autoscaler.core.replay.ReplaySignal`) offline and hold
run their carbon-aware variants, as in a replay, and every schedule's emissions (or dollars), from its
modelled energy, are compared with follow's at the same D.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autoscaler.core.cost import schedule_cost
from autoscaler.core.energy.accounting import DEFAULT_BOOT_S
from autoscaler.core.energy.power import TABLE_III, PowerModel
from autoscaler.core.energy.signal import utc_text
from autoscaler.core.model import CostParams, Workload
from autoscaler.core.policies import BASELINE, gcp, plan, runs_at_deadline, vfw
from autoscaler.core.replay import CARBON_AWARE, ReplaySignal, carbon_aware_plan, schedule_energy


@dataclass
class SweepResult:
    """Saving in % against follow, by trace: ``by_deadline[trace][policy][D]``,
    ``gcp_classes[trace]`` (GCP with k-means class deadlines, independent of D) and
    ``vfw_by_delta[trace][delta]`` at D = ``delta_deadline``.

    With a signal: ``signal_cut_by_deadline[trace][policy][D]``, the cut in % of follow's grams of
    CO2eq (or dollars, ``signal_unit``) at that D; ``blind_cut_by_deadline`` the same for the
    carbon-blind schedules of the carbon-aware policies; ``signals[trace]`` where the signal was placed
    (source, unit, start, forecast, history_slots). None without a signal."""

    deadlines: list[int]
    policies: list[str]
    delta_deadline: int
    by_deadline: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)
    gcp_classes: dict[str, float] = field(default_factory=dict)
    vfw_by_delta: dict[str, dict[int, float]] = field(default_factory=dict)
    signal_unit: str | None = None
    signal_cut_by_deadline: dict[str, dict[str, dict[int, float]]] | None = None
    blind_cut_by_deadline: dict[str, dict[str, dict[int, float]]] | None = None
    signals: dict[str, dict] | None = None


def sweep(
    workloads: dict[str, Workload],
    deadlines: list[int],
    policies: list[str],
    params: CostParams,
    delta_deadline: int = 12,
    advance=None,
    signals: dict[str, ReplaySignal] | None = None,
    power: PowerModel = TABLE_III,
    boot_s: float = DEFAULT_BOOT_S,
) -> SweepResult:
    """Run ``policies`` (not follow, the baseline) at every D on every workload.

    VFW is skipped at D < 2, where no delta satisfies 0 < delta < D. ``advance``:
    optional callable() told after each solve, for a progress bar. ``signals``: None, or one
    ReplaySignal per trace (covering its window plus the largest D); then offline and hold are their
    carbon-aware variants (their abstract saving too is of that schedule, as in a replay) and the
    cuts are modelled with ``power`` and ``boot_s``.
    """
    result = SweepResult(deadlines=list(deadlines), policies=list(policies), delta_deadline=delta_deadline)
    if signals is not None:
        first = next(iter(signals.values()))
        result.signal_unit = first.unit
        result.signal_cut_by_deadline, result.blind_cut_by_deadline, result.signals = {}, {}, {}

    def priced(signal: ReplaySignal, schedule, slot_s: float) -> float:
        return signal.priced(schedule_energy(schedule, slot_s, power, boot_s))

    def saving(name: str, workload: Workload, deadline: int, trace: str | None = None, **options) -> float:
        schedule = plan(name, workload.active, deadline, params, **options)
        baseline = plan(BASELINE, workload.active, deadline, params)
        signal = signals[trace] if signals is not None and trace is not None else None
        if signal is not None:
            base_total = priced(signal, baseline, workload.slot_s)
            if name in CARBON_AWARE:
                blind_total = priced(signal, schedule, workload.slot_s)
                result.blind_cut_by_deadline.setdefault(trace, {}).setdefault(name, {})[deadline] = _cut(blind_total, base_total)
                schedule = carbon_aware_plan(name, workload.active, deadline, params, signal)
            total = priced(signal, schedule, workload.slot_s)
            result.signal_cut_by_deadline.setdefault(trace, {}).setdefault(name, {})[deadline] = _cut(total, base_total)
        base = schedule_cost(baseline.capacity, baseline.assigned, params).total
        cost = schedule_cost(schedule.capacity, schedule.assigned, params).total
        if advance is not None:
            advance()
        return 100.0 * (1.0 - cost / base) if base > 0 else 0.0

    for trace, workload in workloads.items():
        table = result.by_deadline.setdefault(trace, {})
        if signals is not None:
            signal = signals[trace]
            result.signals[trace] = {
                "source": signal.source,
                "unit": signal.unit,
                "start": utc_text(signal.start_s),
                "forecast": signal.forecast_kind,
                "history_slots": signal.slots.history_slots,
            }
        for name in policies:
            for deadline in deadlines:
                if not runs_at_deadline(name, deadline):
                    continue
                table.setdefault(name, {})[deadline] = saving(name, workload, deadline, trace)
        if workload.active_by_deadline is not None:
            result.gcp_classes[trace] = saving(gcp.NAME, workload, 0, load_by_deadline=workload.active_by_deadline)
        result.vfw_by_delta[trace] = {
            delta: saving(vfw.NAME, workload, delta_deadline, delta=delta) for delta in range(1, delta_deadline)
        }
    return result


def _cut(total: float, baseline: float) -> float:
    """100 * (1 - total / baseline): the % of follow's emissions (or dollars) a schedule saves; 0 when follow's are 0."""
    return round(100.0 * (1.0 - total / baseline), 9) + 0.0 if baseline > 0 else 0.0


def solves_needed(n_traces: int, deadlines: list[int], policies: list[str], delta_deadline: int) -> int:
    """How many policy runs :func:`sweep` makes, for a progress bar's total."""
    per_trace = sum(1 for name in policies for d in deadlines if runs_at_deadline(name, d))
    return n_traces * (per_trace + 1 + max(0, delta_deadline - 1))
