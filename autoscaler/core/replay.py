"""Replay a workload through provisioning policies and compare their costs (pure).

Every policy is costed twice: by the deferral paper's abstract cost (eq. 2, ``cost`` and
``saving_pct``) and in real units, the modelled energy of its schedule on whole nodes
(:func:`autoscaler.core.energy.accounting.modelled_schedule`: the power model, plus ``boot_s`` of idle power per node
started). With a per-slot signal (:class:`ReplaySignal`: a carbon intensity or a price) each
schedule's energy is also priced slot by slot (grams of CO2eq or dollars), and the policies that have
a carbon-aware variant run it: ``offline`` as LP (3) with the slot cost s_t / mean(s), ``hold`` as
``hold+carbon`` (:mod:`autoscaler.core.policies.carbon`); their carbon-blind schedules are costed beside.

The signal's placement on the slots is :func:`autoscaler.core.signal_slots.place_signal` (kept
importable from here). The result feeds every renderer (table, CSV, JSON, PNG); nothing here does I/O.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace

import numpy as np

from autoscaler.core.carbon_risk import Risk, risks_by_day
from autoscaler.core.cost import check_schedule, deadline_curve, pad_to_horizon, schedule_cost
from autoscaler.core.energy.accounting import DEFAULT_BOOT_S, ScheduleEnergy, modelled_schedule
from autoscaler.core.energy.power import TABLE_III, PowerModel
from autoscaler.core.energy.signal import utc_text
from autoscaler.core.errors import ConfigError, InfeasibleError
from autoscaler.core.model import CostBreakdown, CostParams, Schedule, Workload
from autoscaler.core.policies import (
    BASELINE,
    CARBON_AWARE,
    CLASS_DEADLINE_POLICIES,
    POLICIES,
    POLICY_TABLE,
    carbon,
    offline,
    plan,
    smallest_max_servers,
)
from autoscaler.core.readable import number_text
from autoscaler.core.signal_slots import ReplaySignal
from autoscaler.core.signal_slots import place_signal as place_signal  # where the CLI has always found it

WORSE_THAN_FOLLOW_RTOL = 1e-9
"""A schedule is worse than follow when it costs more by over this share of follow's cost (solver noise is not)."""


@dataclass(frozen=True)
class PolicyResult:
    """One policy's schedule, its cost and its saving against ``follow`` (in %).

    ``span_slots``: the slots its peak and mean m are taken over, the replay's horizon (the longest
    policy's: the window plus D, or plus gcp's largest class deadline nu), the same for every policy.
    ``worse_than_follow``: the schedule costs more than follow the workload (a negative saving
    beyond rounding); a deferral policy that does is no better than not deferring.
    ``energy``: the schedule's modelled energy (Wh per slot, whole nodes); ``energy_saving_pct``
    against follow's. With a signal: ``signal_total``, grams of CO2eq or dollars, and
    ``signal_saving_pct`` against follow's; ``carbon_aware``: the schedule is the policy's carbon-aware
    variant, and then ``blind_energy`` and ``blind_signal_total`` are those of its carbon-blind schedule.
    """

    schedule: Schedule
    cost: CostBreakdown
    saving_pct: float
    span_slots: int
    note: str = ""
    worse_than_follow: bool = False
    energy: ScheduleEnergy | None = None
    energy_saving_pct: float = 0.0
    signal_total: float | None = None
    signal_saving_pct: float | None = None
    carbon_aware: bool = False
    blind_energy: ScheduleEnergy | None = None
    blind_signal_total: float | None = None

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
    signal: ReplaySignal | None = None
    power_model: str = TABLE_III.name
    boot_s: float = DEFAULT_BOOT_S


def parse_policy_list(text: str) -> list[str]:
    """"all", one name or a comma list -> policy names, with ``follow`` first (the baseline).

    Raises ConfigError naming any unknown policy, after the field it checks (`policy`: ..., which the
    command line names by its flag).
    """
    names = list(POLICIES) if text.strip() == "all" else [p.strip() for p in text.split(",") if p.strip()]
    if "all" in names:
        raise ConfigError(f"`policy`: 'all' stands alone, not in a list; got {text!r}")
    if not names:
        raise ConfigError("`policy`: expected a policy name, a comma list or 'all'")
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise ConfigError(f"`policy`: unknown policy {', '.join(map(repr, unknown))}; expected one of: {', '.join(POLICIES)} or all")
    return [BASELINE] + [n for n in dict.fromkeys(names) if n != BASELINE]


def require_deadline_within_window(deadline_slots: int, window_slots: int, what: str = "deadline D") -> None:
    """The one rule for every replay (``replay``, ``sweep``, ``run --replay``): a deadline D (slots)
    no longer than the window (slots) it is replayed over; beyond, a replay's horizon of window + D
    slots is mostly waiting. ``what`` names the input in the message (a flag or a config field).
    Raises ConfigError naming it, D, the window and the largest D allowed."""
    if deadline_slots > window_slots:
        raise ConfigError(
            f"{what} = {deadline_slots} slots is longer than the window ({window_slots} slots); give a D of at most {window_slots}"
        )


def replay(
    workload: Workload,
    policy_names: list[str],
    deadline_slots: int,
    params: CostParams,
    progress=None,
    delta: int | None = None,
    signal: ReplaySignal | None = None,
    power: PowerModel = TABLE_III,
    boot_s: float = DEFAULT_BOOT_S,
) -> ReplayResult:
    """Run each policy on the workload's L_t (``workload.active``) and cost it (eq. 2), and model its
    energy with ``power`` and ``boot_s`` (seconds of idle power per node started).

    ``gcp`` uses ``workload.active_by_deadline``; ``delta`` is VFW's look-ahead.
    ``signal``: None (every schedule is the one it always was), or the signal the schedules are priced
    under; offline then solves LP (3) with slot_cost s_t / mean(s) over its n_slots + D slots, and hold
    runs as hold+carbon; both are checked (C1/C2) like every schedule, and their carbon-blind schedules
    are costed too. The other policies have no carbon-aware variant and run carbon-blind.
    ``progress``: optional callable(name) told before each policy runs.
    Raises what :func:`autoscaler.core.policies.plan` raises (an InfeasibleError under the cap M
    also says the smallest M that works for every policy asked for), and ConfigError when a cost is not a
    finite number (a load or coefficients so large that the sums overflow).
    """
    if not workload.active.any():
        raise ConfigError(f"{workload.source}: the load is zero in every slot of the window: nothing to provision for")
    require_deadline_within_window(deadline_slots, workload.n_slots)
    results: dict[str, PolicyResult] = {}
    baseline_total: float | None = None
    baseline_energy: float | None = None
    baseline_signal: float | None = None
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
        blind = None
        try:
            schedule = plan(
                name, workload.active, deadline_slots, run_params, delta=delta, load_by_deadline=workload.active_by_deadline
            )
            if signal is not None and name in CARBON_AWARE:
                blind = schedule
                schedule = carbon_aware_plan(name, workload.active, deadline_slots, run_params, signal)
        except InfeasibleError as exc:
            if run_params.max_servers is None:
                raise
            raise InfeasibleError(
                str(exc).removesuffix(f" (solver status: {exc.status})")
                + "; "
                + _smallest_caps(workload, policy_names, deadline_slots, params, delta),
                exc.status,
            ) from None
        if signal is not None and name != BASELINE:
            extra = (
                (
                    "carbon-aware: LP (3) with the slot cost s_t / mean(s)"
                    if POLICY_TABLE[name].is_offline_lp
                    else f"carbon-aware: {schedule.policy}"
                )
                if blind is not None
                else f"{name} has no carbon-aware variant: run carbon-blind, costed under the signal"
            )
            note = f"{note}; {extra}" if note else extra
        cost = schedule_cost(schedule.capacity, schedule.assigned, params)
        if not (math.isfinite(cost.operating) and math.isfinite(cost.switching)):
            raise ConfigError(
                f"{name}: its cost overflows float64 (operating {cost.operating:g}, switching {cost.switching:g}): "
                f"a load of {float(workload.active.sum()):.4g} server-slots with e0 = {params.e0:g}, e1 = {params.e1:g}, "
                f"beta = {params.beta:g}; give the load in servers and the costs per server-slot"
            )
        energy = schedule_energy(schedule, workload.slot_s, power, boot_s)
        signal_total = signal.priced(energy) if signal is not None else None
        blind_energy = blind_total = None
        if blind is not None:
            blind_energy = schedule_energy(blind, workload.slot_s, power, boot_s)
            blind_total = signal.priced(blind_energy)
        if baseline_total is None:
            baseline_total, baseline_energy, baseline_signal = cost.total, energy.energy_wh, signal_total
        saving = 100.0 * (1.0 - cost.total / baseline_total) + 0.0 if baseline_total > 0 else 0.0
        worse = name != BASELINE and cost.total > baseline_total * (1 + WORSE_THAN_FOLLOW_RTOL) + 1e-12
        results[name] = PolicyResult(
            schedule,
            cost,
            round(saving, 9) + 0.0,
            workload.n_slots,
            note,
            worse,
            energy=energy,
            energy_saving_pct=_saving_pct(energy.energy_wh, baseline_energy),
            signal_total=signal_total,
            signal_saving_pct=None if signal is None else _saving_pct(signal_total, baseline_signal),
            carbon_aware=blind is not None,
            blind_energy=blind_energy,
            blind_signal_total=blind_total,
        )
    span = max(r.schedule.capacity.shape[0] for r in results.values())
    results = {name: replace(r, span_slots=span) for name, r in results.items()}
    return ReplayResult(
        workload=workload, deadline_slots=deadline_slots, params=params, policies=results, signal=signal, power_model=power.name, boot_s=boot_s
    )


def schedule_energy(schedule: Schedule, slot_s: float, power: PowerModel = TABLE_III, boot_s: float = DEFAULT_BOOT_S) -> ScheduleEnergy:
    """The modelled energy of ``schedule`` on whole nodes (:func:`autoscaler.core.energy.accounting.modelled_schedule`;
    solver noise above a whole number is not a node, :func:`autoscaler.core.energy.accounting.whole_nodes`).
    Raises ConfigError as modelled_schedule does."""
    return modelled_schedule(schedule.policy, schedule.capacity, schedule.assigned, slot_s, power, boot_s)


def carbon_aware_plan(name: str, load: np.ndarray, deadline_slots: int, params: CostParams, signal: ReplaySignal) -> Schedule:
    """The carbon-aware schedule of ``name`` (one of :data:`CARBON_AWARE`) under ``signal``, checked (C1/C2, M).

    offline: LP (3) with slot_cost s_t / mean(s) over its n_slots + D slots (beta keeps its meaning; a
    signal that is 0 in every slot is flat); hold: :func:`autoscaler.core.policies.carbon.plan`, named
    hold+carbon. ``load``: L_t, shape (n_slots,). Raises ConfigError for another name, and what the
    policies raise (InfeasibleError, SolverError, ScheduleError).
    """
    load = np.asarray(load, dtype=float)
    released = pad_to_horizon(load, deadline_slots)
    policy = POLICY_TABLE.get(name)
    if policy is not None and policy.is_offline_lp:
        s = signal.actual(released.shape[0])
        mean = float(s.mean())
        schedule = offline.plan(load, deadline_slots, params, slot_cost=s / mean if mean > 0 else np.ones_like(s))
    elif policy is not None and policy.carbon == carbon.NAME:
        schedule = carbon.plan(load, deadline_slots, params, signal.slots)
    else:
        raise ConfigError(f"{name} has no carbon-aware variant; these have: {', '.join(CARBON_AWARE)}")
    check_schedule(schedule, released, deadline_curve(released, deadline_slots), params.max_servers)
    return schedule


def _saving_pct(value: float | None, baseline: float | None) -> float:
    """100 * (1 - value / baseline), 0 when the baseline is 0 (nothing to save)."""
    if value is None or baseline is None or not baseline > 0:
        return 0.0
    return round(100.0 * (1.0 - value / baseline), 9) + 0.0


def _smallest_caps(workload: Workload, names: list[str], deadline_slots: int, params: CostParams, delta: int | None) -> str:
    """The smallest cap M that works for each policy asked for, in a sentence naming the field that sets
    it, `max_servers` (the command line names it by its flag)."""
    caps = {
        name: smallest_max_servers(
            name, workload.active, deadline_slots, params, delta=delta, load_by_deadline=workload.active_by_deadline
        )
        for name in parse_policy_list(",".join(names))
        if name != BASELINE and (name not in CLASS_DEADLINE_POLICIES or workload.active_by_deadline is not None)
    }
    if len(caps) == 1:
        ((name, cap),) = caps.items()
        return f"the smallest cap that works for {name} is M = {_rounded_up(cap)} (`max_servers`)"
    listed = ", ".join(f"{name} {_rounded_up(cap)}" for name, cap in caps.items())
    return f"the smallest cap that works (`max_servers`) is M = {_rounded_up(max(caps.values()))} for all of them: {listed}"


def _rounded_up(value: float) -> str:
    """``value`` to 6 significant figures, rounded up so that the cap printed still works."""
    if value <= 0:
        return "0"
    scale = 10.0 ** (5 - math.floor(math.log10(value)))
    return f"{math.ceil(value * scale) / scale:.6g}"


def to_dict(result: ReplayResult) -> dict:
    """The JSON document of ``autoscaler replay --format json``."""
    w = result.workload
    document = {
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
    # Real units, beside the paper's abstract cost; with a signal, what each schedule emits or costs.
    document["energy"] = {"power_model": result.power_model, "boot_s": result.boot_s}
    for name, r in result.policies.items():
        row = document["policies"][name]
        if r.energy is not None:
            row["energy_wh"] = r.energy.energy_wh
            row["energy_saving_pct"] = r.energy_saving_pct
        if result.signal is not None:
            sig = result.signal
            row["schedule"] = r.schedule.policy
            row["carbon_aware"] = r.carbon_aware
            row[sig.total_key] = r.signal_total
            row[sig.saving_key] = r.signal_saving_pct
            if r.carbon_aware:
                row["carbon_blind"] = {"energy_wh": r.blind_energy.energy_wh, sig.total_key: r.blind_signal_total}
    for name, risk in risks_against_follow(result).items():
        document["policies"][name]["signal_risk"] = dataclasses.asdict(risk)
    if result.signal is not None:
        sig = result.signal
        span = max(r.schedule.capacity.shape[0] for r in result.policies.values())
        document["signal"] = {
            "source": sig.source,
            "unit": sig.unit,
            "source_unit": sig.source_unit,
            "start": utc_text(sig.start_s),
            "slot_s": sig.slot_s,
            "forecast": sig.forecast_kind,
            "history_slots": sig.slots.history_slots,
            "slots_per_day": sig.slots.slots_per_day,
            "values": _numbers(sig.actual(span)),
            "notes": list(sig.notes),
        }
    return document


def _numbers(values: np.ndarray) -> list[float]:
    # Rounded to 1e-9 servers: solver noise below that is not information.
    return [round(float(v), 9) + 0.0 for v in values]


def risks_against_follow(result: ReplayResult) -> dict[str, Risk]:
    """Per policy but follow, what its schedule emits (or costs) under the replay's signal against
    follow's, by day of the replay's window (:func:`autoscaler.core.carbon_risk.risks_by_day`); {}
    without a signal or follow's energy, or when follow spent nothing at all."""
    signal, follow = result.signal, result.policies.get(BASELINE)
    if signal is None or follow is None or follow.energy is None:
        return {}
    cumulative = {name: np.cumsum(signal.priced_slots(r.energy)) for name, r in result.policies.items() if r.energy is not None}
    return risks_by_day(cumulative, BASELINE, max(1, round(86_400.0 / signal.slot_s)), result.workload.n_slots)
