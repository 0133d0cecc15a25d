"""Energy used and saved: the schedule run against "follow the workload" and "no provisioning".

Pure. A schedule's energy is measured (CloudWatch metrics of the VMs that ran, ``measured_schedule``)
or modelled from its per-slot capacity and work (``modelled_schedule``); every ``ScheduleEnergy``
says which. The counterfactual schedules never ran, so they are always modelled: "follow" runs
x_t = m_t = L_t, "no provisioning" keeps all M task nodes on and runs L_t on them (paper: dynamic
deferral, §VII-B, Table IV).

Whole nodes. A cluster runs whole nodes, so a schedule's m_t is rounded up to nodes
n_t = ceil(m_t) and the work spread over them (u_t = x_t / n_t). Starting a node costs energy before
it does any work: ``boot_s`` seconds at idle power per node switched on (EMR takes minutes to bring a
task node into service). That start-up energy is the part of the paper's switching cost β that a power
model can see; without it, every schedule that does the same work on busy nodes uses the same energy.

Carbon and price. With a cost signal on the report's slots (``slot_signal``), each schedule's slot
costs the signal times what it used: grams CO2eq = Wh / 1000 * gCO2eq/kWh (lbs/MWh converted first),
dollars = Wh / 1000 * $/kWh, or nodes * slot hours * $/node-hour. A slot the signal does not cover has
an unknown cost (NaN), not zero: totals cover the slots with a signal and the report says how many were
left out. A tenant's cost is the run's cost of each slot times the tenant's share of the node-slots held
in it (``EnergyReport.tenant_costs``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from autoscaler.core import defaults
from autoscaler.core.energy.metric_queries import METRIC_NAMES, InstanceMetrics, OutOfBounds, utc_text
from autoscaler.core.energy.power import TABLE_III, PowerModel, measured_energy, modelled_energy_wh
from autoscaler.core.energy.signal import Signal, covered_means, in_grams
from autoscaler.core.errors import ConfigError, MetricsError, TraceError
from autoscaler.core.readable import count_text, duration_text, number_text

DEFAULT_BOOT_S = defaults.BOOT_S
"""Seconds a new task node draws idle power before it runs work: EMR provisions and bootstraps a
node in a few minutes; one 5-minute slot is assumed. Configurable; docs/operating.md shows 0 and 600 too."""

FOLLOW = "follow"
NO_PROVISIONING = "no provisioning"
UNATTRIBUTED = "unattributed"
"""The tenant a slot's cost goes to when its decision names no tenant holding nodes."""


@dataclass(frozen=True, eq=False)
class ScheduleEnergy:
    """The energy of one schedule over n_slots slots.

    ``slot_energy_wh``: (n_slots,), Wh used by the nodes on in each slot, start-up included.
    ``nodes``: (n_slots,) whole nodes on. ``node_slots``: sum of ``nodes``. ``switch_ons``: nodes
    started (sum of the increases of ``nodes``, from 0 before the first slot). ``boot_energy_wh``:
    the part of the energy spent starting nodes. ``source``: "measured", "modelled", or "calibrated"
    (modelled, then scaled to a measured run, see ``calibrated``).
    ``metric_totals``: for a measured schedule, each CloudWatch metric's total (Table IV's rows).
    """

    schedule: str
    source: Literal["measured", "modelled", "calibrated"]
    slot_energy_wh: np.ndarray
    nodes: np.ndarray
    boot_energy_wh: float
    metric_totals: dict[str, float] = field(default_factory=dict)

    @property
    def energy_wh(self) -> float:
        return float(self.slot_energy_wh.sum())

    @property
    def node_slots(self) -> float:
        return float(self.nodes.sum())

    @property
    def switch_ons(self) -> float:
        return float(np.maximum(np.diff(self.nodes, prepend=0.0), 0.0).sum())


NODE_NOISE_RTOL = 1e-6
"""A capacity within this share of the schedule's peak above a whole number is solver noise, not a node more."""


def whole_nodes(capacity: np.ndarray) -> np.ndarray:
    """n_t = ceil(m_t) for capacities ``(n_slots,)``; a hair above a whole number, up to
    NODE_NOISE_RTOL times max(1, the peak m_t), is not a node more: the offline LP leaves about 1e-8
    servers in slots it empties, which would otherwise each count as a node started."""
    m = np.maximum(np.asarray(capacity, dtype=float), 0.0)
    tolerance = NODE_NOISE_RTOL * max(1.0, float(m.max(initial=0.0)))
    return np.maximum(np.ceil(m - tolerance), 0.0)


def modelled_schedule(
    schedule: str,
    capacity: np.ndarray,
    assigned: np.ndarray,
    slot_s: float,
    model: PowerModel = TABLE_III,
    boot_s: float = DEFAULT_BOOT_S,
    io_utilisation: Literal["proportional", "zero"] = "proportional",
) -> ScheduleEnergy:
    """The modelled energy of a schedule (eq. (13)-(14) on whole nodes, plus start-up).

    ``capacity`` m_t and ``assigned`` x_t: ``(n_slots,)``, servers. Nodes n_t = ceil(m_t) each run at
    u_t = x_t / n_t (``modelled_energy_wh``); each node switched on adds ``boot_s`` at idle power,
    charged to the slot it starts in. Raises ConfigError as ``modelled_energy_wh`` does, or for a
    ``boot_s`` that is not finite and >= 0.
    """
    if not (isinstance(boot_s, (int, float)) and math.isfinite(boot_s) and boot_s >= 0):
        raise ConfigError(f"boot_s must be a finite number of seconds >= 0, got {boot_s!r}")
    # The fractional schedule is checked as given (x_t <= m_t, finite, >= 0) before it is rounded to nodes.
    modelled_energy_wh(capacity, assigned, slot_s, model, io_utilisation)
    nodes = whole_nodes(capacity)
    running_wh = modelled_energy_wh(nodes, np.minimum(np.asarray(assigned, dtype=float), nodes), slot_s, model, io_utilisation)
    boot_wh = np.maximum(np.diff(nodes, prepend=0.0), 0.0) * model.idle_power_w * boot_s / 3600.0
    return ScheduleEnergy(
        schedule=schedule,
        source="modelled",
        slot_energy_wh=running_wh + boot_wh,
        nodes=nodes,
        boot_energy_wh=float(boot_wh.sum()),
    )


@dataclass(frozen=True, eq=False)
class MeasuredRun:
    """What ``measured_schedule`` made of a run's metrics.

    ``energy``: the run's schedule, source "measured". Node-slots (a TASK instance up in a slot):
    ``up_count`` in all, ``counted_count`` measured by eq. (13), ``modelled_count`` with no usable
    data, modelled at the slot's utilisation. ``held_count``: (slot, instance) pairs measured with a
    datapoint held from a slot before (``InstanceMetrics.held_count``). ``out_of_bounds``: one record
    per (instance, metric) whose datapoints were out of bounds and treated as missing;
    ``clipped_count``: CPUUtilization datapoints read as 100 %.
    """

    energy: ScheduleEnergy
    up_count: int
    counted_count: int
    held_count: int
    modelled_count: int
    out_of_bounds: tuple[OutOfBounds, ...]
    clipped_count: int


def measured_schedule(
    schedule: str,
    metrics: InstanceMetrics,
    up: np.ndarray,
    utilisation: np.ndarray,
    model: PowerModel = TABLE_III,
) -> MeasuredRun:
    """A run's energy from its nodes' CloudWatch metrics (eq. (13)-(14)), the gaps modelled.

    ``metrics``: the TASK instances' metrics over the report's slots, already bounded and held
    (``autoscaler.core.energy.metric_queries.instance_metrics``). ``up``: (n_slots, n_instances) bool, the instance was
    up in the slot (EMR's timeline). ``utilisation``: (n_slots,), u in [0, 1] of the slot's nodes from
    the decision log, used for a node-slot that is up but not measured: P(u) with every term at u.
    Each slot's energy is the measured cells' energy plus the modelled cells'; a node's start-up is
    inside its measured power, so ``boot_energy_wh`` is 0. ``metric_totals``: each metric read, summed
    over the measured cells.

    Raises MetricsError, naming the window and the first out-of-bounds datapoints by instance id, metric,
    UTC time and value, when no node-slot that was up is measured and some of its datapoints were out of
    bounds: every datapoint was out of bounds or missing, and the model alone would hide that.
    Raises ConfigError for shapes that do not fit.
    """
    up = np.asarray(up)
    shape = (metrics.n_slots, len(metrics.instance_ids))
    if up.shape != shape or up.dtype != bool:
        raise ConfigError(f"up must be a bool array of shape {shape}, got {up.dtype} {up.shape}")
    utilisation = np.asarray(utilisation, dtype=float)
    if utilisation.shape != (metrics.n_slots,):
        raise ConfigError(f"utilisation must have shape ({metrics.n_slots},), got {utilisation.shape}")
    counted = up & metrics.measured
    if not counted.any() and (metrics.rejected & up[:, :, None]).any():
        end_s = metrics.start_s + metrics.n_slots * metrics.slot_s
        shown = "; ".join(record.message for record in metrics.out_of_bounds[:3])
        more = f"; and {count_text(len(metrics.out_of_bounds) - 3, 'more instance metric')}" if len(metrics.out_of_bounds) > 3 else ""
        raise MetricsError(
            f"nothing to measure from {utc_text(metrics.start_s)} to {utc_text(end_s)}: in every node-slot of the "
            f"{count_text(int(up.any(axis=0).sum()), 'TASK instance')} up then, a datapoint was out of bounds or missing ({shown}{more})"
        )
    energy = measured_energy(
        metrics.cpu_utilization_percent, metrics.disk_bytes, metrics.disk_ops, metrics.network_bytes, metrics.slot_s, model, counted
    )
    unmeasured = up & ~metrics.measured
    filled_wh = unmeasured.sum(axis=1) * model.power_w(utilisation, utilisation, utilisation, utilisation) * metrics.slot_s / 3600
    totals = {name: float(np.where(counted, metrics.metric(name), 0.0).sum()) for name in METRIC_NAMES if name in metrics.metric_names}
    return MeasuredRun(
        energy=ScheduleEnergy(
            schedule=schedule,
            source="measured",
            slot_energy_wh=energy.slot_energy_wh + filled_wh,
            nodes=up.sum(axis=1).astype(float),
            boot_energy_wh=0.0,
            metric_totals=totals,
        ),
        up_count=int(up.sum()),
        counted_count=int(counted.sum()),
        held_count=metrics.held_count,
        modelled_count=int(unmeasured.sum()),
        out_of_bounds=metrics.out_of_bounds,
        clipped_count=metrics.clipped_count,
    )


def calibrated(energy: ScheduleEnergy, factor: float) -> ScheduleEnergy:
    """A modelled schedule's energy scaled by ``factor`` (a run's measured over modelled energy), so it
    compares like with like with that measured run. Raises ConfigError unless factor is finite and > 0."""
    if not (math.isfinite(factor) and factor > 0):
        raise ConfigError(f"calibration factor must be a finite number > 0, got {factor!r}")
    return dataclasses.replace(
        energy, source="calibrated", slot_energy_wh=energy.slot_energy_wh * factor, boot_energy_wh=energy.boot_energy_wh * factor
    )


def counterfactual_schedules(
    load: np.ndarray, max_nodes: float, on_slots: int | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{name: (capacity, assigned)} of the schedules compared against, for released work L_t ``(n_slots,)``.

    "no provisioning": m_t = M (``max_nodes``) in the first ``on_slots`` slots (default all), 0 after,
    x_t = min(L_t, M). "follow": m_t = x_t = L_t. Raises ConfigError for a negative or non-finite load or M.
    """
    load = np.asarray(load, dtype=float)
    if load.ndim != 1 or not np.all(np.isfinite(load)) or np.any(load < 0):
        raise ConfigError("load L_t must be finite numbers >= 0 of shape (n_slots,)")
    if not (math.isfinite(max_nodes) and max_nodes >= 0):
        raise ConfigError(f"max_nodes M must be a finite number >= 0, got {max_nodes!r}")
    always_on = np.full(load.shape, float(max_nodes))
    if on_slots is not None:
        always_on[on_slots:] = 0.0
    return {
        NO_PROVISIONING: (always_on, np.minimum(load, always_on)),
        FOLLOW: (load, load),
    }


@dataclass(frozen=True, eq=False)
class ReportSignal:
    """A cost signal on a report's slots.

    ``values``: (n_slots,), the signal's time-weighted mean over each slot (``autoscaler.core.energy.signal.resample``)
    in ``unit``: gCO2eq/kWh (a lbs/MWh series is converted), $/kWh or $/node-hour; NaN where the
    signal does not cover the slot (before its first point, after its last step, or across a gap).
    ``source``: the file or URL; ``converted_from``: the series' own unit when it was converted.
    """

    values: np.ndarray
    unit: str
    source: str
    converted_from: str | None = None

    @property
    def is_carbon(self) -> bool:
        return self.unit == "gCO2eq/kWh"

    @property
    def cost_unit(self) -> str:
        """What a slot's cost is counted in: "gCO2eq" or "$"."""
        return "gCO2eq" if self.is_carbon else "$"

    @property
    def covered(self) -> np.ndarray:
        """(n_slots,) bool: the slot has a value."""
        return ~np.isnan(self.values)

    @property
    def covered_count(self) -> int:
        return int(self.covered.sum())


def slot_signal(signal: Signal, start_s: float, slot_s: float, n_slots: int) -> ReportSignal:
    """The signal on ``n_slots`` slots of ``slot_s`` seconds from ``start_s`` (Unix seconds): the mean
    over each slot the signal covers, NaN over a slot it does not (before its first point, after its
    last point's step, or overlapping a step longer than ``GAP_FACTOR`` median intervals, the gaps
    ``resample`` refuses). lbs/MWh is converted to gCO2eq/kWh.

    Raises TraceError naming the source, the report's window and its first slot's UTC time when no
    slot is covered, and as ``resample`` does for a series of one point.
    """
    converted_from = "lbs/MWh" if signal.unit == "lbs/MWh" else None
    signal = in_grams(signal)
    median_s = signal.median_interval_s  # a series of one point is refused here, by resample's rule
    values = covered_means(signal, start_s, slot_s, n_slots)
    if np.isnan(values).all():
        end_s = start_s + n_slots * slot_s
        raise TraceError(
            signal.source,
            None,
            f"covers none of the report's {count_text(n_slots, 'slot')} from {utc_text(start_s)} to {utc_text(end_s)} "
            f"(first uncovered slot at {utc_text(start_s)}); the series runs from {utc_text(float(signal.times_s[0]))} to "
            f"{utc_text(float(signal.times_s[-1]) + median_s)}",
        )
    return ReportSignal(values, signal.unit, signal.source, converted_from)


def slot_cost(energy: ScheduleEnergy, signal: ReportSignal, slot_s: float) -> np.ndarray:
    """(n_slots,) cost of a schedule in each slot: gCO2eq = Wh / 1000 * gCO2eq/kWh, $ = Wh / 1000 * $/kWh,
    or $ = nodes * slot_s / 3600 * $/node-hour; NaN where the signal has no value."""
    if signal.unit == "$/node-hour":
        return energy.nodes * (slot_s / 3600.0) * signal.values
    return energy.slot_energy_wh / 1000.0 * signal.values


@dataclass(frozen=True, eq=False)
class EnergyReport:
    """Schedules over the same slots, compared with ``baseline`` (normally "follow").

    ``start_s``: Unix seconds (or trace seconds) where slot 0 starts; ``slot_s``: slot length.
    ``notes``: what the reader must know (what was measured or modelled, what was missing).
    ``window_slots``: for a replay, the slots of the trace's window; the report's slots after them
    are where deferred work runs (None: every slot is the window).
    ``signal``: a carbon or price signal on the slots (``slot_signal``), or None: no cost in CO2 or $.
    ``nodes_by_tenant``: for the daemon's report, one {tenant: node-slots held} per slot of the last
    schedule (the run), empty where the decision names no tenant; None when unknown (a replay).
    """

    title: str
    start_s: float
    slot_s: float
    schedules: tuple[ScheduleEnergy, ...]
    model: PowerModel
    boot_s: float
    baseline: str = FOLLOW
    notes: tuple[str, ...] = ()
    window_slots: int | None = None
    signal: ReportSignal | None = None
    nodes_by_tenant: tuple[dict[str, int], ...] | None = None

    def __post_init__(self) -> None:
        names = [s.schedule for s in self.schedules]
        if len(set(names)) != len(names):
            raise ConfigError(f"schedules must have distinct names, got {names}")
        if self.baseline not in names:
            raise ConfigError(f"baseline {self.baseline!r} is not among the schedules {names}")
        lengths = {s.slot_energy_wh.shape for s in self.schedules}
        if len(lengths) != 1:
            raise ConfigError(f"schedules must cover the same slots, got shapes {sorted(lengths)}")
        if self.signal is not None and self.signal.values.shape != (self.n_slots,):
            raise ConfigError(f"the signal must have one value per slot, ({self.n_slots},), got {self.signal.values.shape}")
        if self.nodes_by_tenant is not None and len(self.nodes_by_tenant) != self.n_slots:
            raise ConfigError(f"nodes_by_tenant must have one entry per slot ({self.n_slots}), got {len(self.nodes_by_tenant)}")

    @property
    def n_slots(self) -> int:
        return int(self.schedules[0].slot_energy_wh.shape[0])

    def get(self, schedule: str) -> ScheduleEnergy:
        for energy in self.schedules:
            if energy.schedule == schedule:
                return energy
        raise ConfigError(f"no schedule {schedule!r} in the report")

    def saved_wh(self, schedule: str, against: str | None = None) -> float:
        """Energy ``against`` (default the baseline) used minus what ``schedule`` used, Wh (negative if it used more)."""
        return self.get(against or self.baseline).energy_wh - self.get(schedule).energy_wh

    def reduction_percent(self, schedule: str, against: str | None = None) -> float:
        """``saved_wh`` as a percentage of the energy ``against`` used (NaN if it used none)."""
        reference = self.get(against or self.baseline).energy_wh
        return 100.0 * self.saved_wh(schedule, against) / reference if reference > 0 else math.nan

    def _signal(self) -> ReportSignal:
        if self.signal is None:
            raise ConfigError("the report has no carbon or price signal")
        return self.signal

    def slot_cost(self, schedule: str) -> np.ndarray:
        """(n_slots,) gCO2eq or $ of ``schedule`` per slot, NaN where the signal has no value (``slot_cost``).
        Raises ConfigError when the report has no signal."""
        return slot_cost(self.get(schedule), self._signal(), self.slot_s)

    def cost(self, schedule: str) -> float:
        """gCO2eq or $ of ``schedule`` over the slots the signal covers."""
        return float(np.nansum(self.slot_cost(schedule)))

    def cost_saved(self, schedule: str, against: str | None = None) -> float:
        """What ``against`` (default the baseline) cost minus what ``schedule`` cost, over the covered slots."""
        return self.cost(against or self.baseline) - self.cost(schedule)

    def cost_reduction_percent(self, schedule: str, against: str | None = None) -> float:
        """``cost_saved`` as a percentage of what ``against`` cost (NaN if it cost nothing)."""
        reference = self.cost(against or self.baseline)
        return 100.0 * self.cost_saved(schedule, against) / reference if reference > 0 else math.nan

    def tenant_slot_costs(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """{tenant: ((n_slots,) node-slots held, (n_slots,) gCO2eq or $)} of the run (the last schedule).

        In each slot a tenant holding n of the N node-slots named in ``nodes_by_tenant`` gets n / N of
        the run's cost in that slot; a slot that names none goes to ``UNATTRIBUTED`` with all its nodes.
        The costs of a slot add up to the run's; NaN where the signal has no value. Raises ConfigError
        when the report has no signal or no tenant breakdown.
        """
        if self.nodes_by_tenant is None:
            raise ConfigError("the report has no tenant breakdown (only the daemon's report has one)")
        run = self.schedules[-1]
        costs = self.slot_cost(run.schedule)
        split: dict[str, tuple[np.ndarray, np.ndarray]] = {}

        def charge(tenant: str, t: int, node_slots: float, cost: float) -> None:
            if tenant not in split:
                split[tenant] = (np.zeros(self.n_slots), np.where(np.isnan(costs), np.nan, 0.0))
            split[tenant][0][t] += node_slots
            split[tenant][1][t] += cost

        for t, held in enumerate(self.nodes_by_tenant):
            held = {tenant: n for tenant, n in held.items() if n > 0}
            named = sum(held.values())
            if not named:
                charge(UNATTRIBUTED, t, float(run.nodes[t]), costs[t])
            for tenant, n in held.items():
                charge(tenant, t, float(n), costs[t] * n / named)
        return split

    def tenant_costs(self) -> dict[str, tuple[float, float]]:
        """{tenant: (node-slots held, gCO2eq or $)} of the run over the slots the signal covers
        (``tenant_slot_costs``), largest cost first. Raises ConfigError as ``tenant_slot_costs``."""
        totals = {}
        for tenant, (node_slots, costs) in self.tenant_slot_costs().items():
            covered = ~np.isnan(costs)
            totals[tenant] = (float(node_slots[covered].sum()), float(costs[covered].sum()))
        return dict(sorted(totals.items(), key=lambda kv: (-kv[1][1], kv[0])))


def with_signal(report: EnergyReport, signal: Signal) -> EnergyReport:
    """``report`` with ``signal`` resampled onto its slots (``slot_signal``) and a note on what it covers.
    Raises TraceError as ``slot_signal`` does."""
    on_slots = slot_signal(signal, report.start_s, report.slot_s, report.n_slots)
    unit = on_slots.unit + (f" (converted from {on_slots.converted_from} at 453.59237 g/lb)" if on_slots.converted_from else "")
    notes = [f"Signal: {on_slots.source}, {unit}, resampled to each slot by its time-weighted mean."]
    missing = report.n_slots - on_slots.covered_count
    if missing:
        first = int(np.flatnonzero(~on_slots.covered)[0])
        notes.append(
            f"The signal does not cover {missing:,} of the {count_text(report.n_slots, 'slot')} (the first at "
            f"{utc_text(report.start_s + first * report.slot_s)}): their {'CO2' if on_slots.is_carbon else 'cost'} is "
            f"unknown, so every {'CO2' if on_slots.is_carbon else '$'} total covers the other {count_text(on_slots.covered_count, 'slot')} only."
        )
    return dataclasses.replace(report, signal=on_slots, notes=(*report.notes, *notes))


def schedules_report(
    title: str,
    load: np.ndarray,
    schedules: dict[str, tuple[np.ndarray, np.ndarray]],
    slot_s: float,
    *,
    start_s: float = 0.0,
    model: PowerModel = TABLE_III,
    boot_s: float = DEFAULT_BOOT_S,
    max_nodes: float | None = None,
    io_utilisation: Literal["proportional", "zero"] = "proportional",
    notes: tuple[str, ...] = (),
    on_slots: int | None = None,
) -> EnergyReport:
    """Modelled energy of planned schedules against follow and no provisioning (a replay's report).

    ``load``: released work L_t over the window, ``(n_slots,)``. ``schedules``: {policy: (capacity m_t,
    assigned x_t)}, each ``(horizon,)`` with horizon >= n_slots (a policy may finish deferred work
    after the window); everything is padded with idle slots to the longest. A schedule named "follow"
    replaces the counterfactual one. No provisioning keeps M = ``max_nodes`` nodes on, by default
    ceil(max L_t), the fewest that run the peak without deferral, for ``on_slots`` slots (default:
    the whole horizon). Raises ConfigError as ``modelled_schedule`` does.
    """
    load = np.asarray(load, dtype=float)
    horizon = max([load.shape[0], *(np.shape(c)[0] for c, _ in schedules.values())])

    def padded(values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        return np.concatenate([values, np.zeros(horizon - values.shape[0])])

    peak = float(whole_nodes(np.array([load.max(initial=0.0)]))[0]) if max_nodes is None else float(max_nodes)
    on_slots = horizon if on_slots is None else min(on_slots, horizon)
    planned = counterfactual_schedules(padded(load), peak, on_slots)
    planned.update({name: (padded(c), padded(x)) for name, (c, x) in schedules.items()})
    energies = tuple(modelled_schedule(name, c, x, slot_s, model, boot_s, io_utilisation) for name, (c, x) in planned.items())
    window = load.shape[0]
    if on_slots == horizon:
        kept_on = f"in all {horizon:,} slots" if horizon != 1 else "in 1 slot"
    elif on_slots > window:
        kept_on = f"in the first {on_slots:,} of the {horizon:,} slots (the window and {on_slots - window:,} more), then none"
    else:
        kept_on = f"in the first {on_slots:,} of the {horizon:,} slots, then none"
    notes = (
        f"Every schedule is modelled, none measured: whole nodes ceil(m_t) at u = x_t/nodes, the {model.name} "
        f"power model, {duration_text(boot_s)} of idle power per node started; no provisioning keeps "
        f"{number_text(peak)} node{'' if peak == 1 else 's'} on {kept_on}.",
        *notes,
    )
    return EnergyReport(title, start_s, slot_s, energies, model, boot_s, FOLLOW, notes, window_slots=window)
