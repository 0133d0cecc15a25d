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
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from autoscaler.errors import ConfigError, MetricsError
from autoscaler.readable import duration_text, number_text
from cloudwatch.queries import METRIC_NAMES, InstanceMetrics, OutOfBounds, utc_text
from energy.power import TABLE_III, PowerModel, measured_energy, modelled_energy_wh

DEFAULT_BOOT_S = 300.0
"""Seconds a new task node draws idle power before it runs work: EMR provisions and bootstraps a
node in a few minutes; one 5-minute slot is assumed. Configurable; the README shows 0 and 600 too."""

FOLLOW = "follow"
NO_PROVISIONING = "no provisioning"


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


def whole_nodes(capacity: np.ndarray) -> np.ndarray:
    """n_t = ceil(m_t) for capacities ``(n_slots,)``; a hair above a whole number (solver rounding) is not a node more."""
    m = np.asarray(capacity, dtype=float)
    return np.ceil(np.maximum(m, 0.0) - 1e-9)


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
    (``cloudwatch.queries.instance_metrics``). ``up``: (n_slots, n_instances) bool, the instance was
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
        more = f"; and {len(metrics.out_of_bounds) - 3} more instance metrics" if len(metrics.out_of_bounds) > 3 else ""
        raise MetricsError(
            f"nothing to measure from {utc_text(metrics.start_s)} to {utc_text(end_s)}: in every node-slot of the "
            f"{int(up.any(axis=0).sum())} TASK instances up then, a datapoint was out of bounds or missing ({shown}{more})"
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
class EnergyReport:
    """Schedules over the same slots, compared with ``baseline`` (normally "follow").

    ``start_s``: Unix seconds (or trace seconds) where slot 0 starts; ``slot_s``: slot length.
    ``notes``: what the reader must know (what was measured or modelled, what was missing).
    ``window_slots``: for a replay, the slots of the trace's window; the report's slots after them
    are where deferred work runs (None: every slot is the window).
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

    def __post_init__(self) -> None:
        names = [s.schedule for s in self.schedules]
        if len(set(names)) != len(names):
            raise ConfigError(f"schedules must have distinct names, got {names}")
        if self.baseline not in names:
            raise ConfigError(f"baseline {self.baseline!r} is not among the schedules {names}")
        lengths = {s.slot_energy_wh.shape for s in self.schedules}
        if len(lengths) != 1:
            raise ConfigError(f"schedules must cover the same slots, got shapes {sorted(lengths)}")

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
        kept_on = f"in all {horizon:,} slots"
    elif on_slots > window:
        kept_on = f"in the first {on_slots:,} of the {horizon:,} slots (the window and {on_slots - window:,} more), then none"
    else:
        kept_on = f"in the first {on_slots:,} of the {horizon:,} slots, then none"
    notes = (
        f"Every schedule is modelled, none measured: whole nodes ceil(m_t) at u = x_t/nodes, the {model.name} "
        f"power model, {duration_text(boot_s)} of idle power per node started; no provisioning keeps "
        f"{number_text(peak)} nodes on {kept_on}.",
        *notes,
    )
    return EnergyReport(title, start_s, slot_s, energies, model, boot_s, FOLLOW, notes, window_slots=window)
