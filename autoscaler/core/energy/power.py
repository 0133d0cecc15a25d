"""The VM power model and the energy of a schedule (paper: dynamic deferral, §VII-B, eq. (11)-(14)).

Pure numpy. Two ways in:

* ``measured_energy``: from per-slot CloudWatch metrics of each VM (``cloudwatch.InstanceMetrics``
  gives the four inputs and the ``measured`` mask): eq. (13) per VM and slot, eq. (14) summed.
* ``modelled_energy_wh``: from a schedule alone (replay, sweeps): capacity m_t and assigned work x_t,
  utilisation u_t = x_t/m_t on every server that is on.

Eq. (13) gives a VM's average power over a slot in watts (the paper calls it E_vm(t), energy, but its
coefficients are watts: Table III's 60.30 is an idle power); eq. (14) multiplies by tau/3600 to get
watt-hours. Every utilisation u is a fraction in [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from numbers import Real
from typing import Literal

import numpy as np

from autoscaler.core.errors import ConfigError

POWER_CEILING_W = 10_000.0
"""A VM drawing more than 10 kW at full load is not a VM (the largest servers draw a few kW); a model
whose peak power exceeds this is refused as a unit or typing error."""

UTILISATION_TOLERANCE = 1e-6
"""How far a utilisation may stray outside [0, 1] (solver rounding, CloudWatch's 100.0000x %) before it
is an error rather than rounding; values within it are clipped."""

SERVER_TOLERANCE = 1e-6
"""How far (in servers) x_t may exceed m_t, or either fall below 0, before it is an error; an LP solution
is only feasible up to its solver's tolerance."""

CCF_AWS_MIN_WATTS_PER_VCPU = 0.74
CCF_AWS_MAX_WATTS_PER_VCPU = 3.5
CCF_AWS_PUE = 1.135
"""Cloud Carbon Footprint's AWS compute constants: average min and max watts per vCPU over the
micro-architectures AWS uses, and AWS's PUE. Sources: the CCF methodology page
(https://www.cloudcarbonfootprint.org/docs/methodology/, "Compute" and "Power Usage Effectiveness"),
and ``AWS_CLOUD_CONSTANTS`` (MIN_WATTS_AVG, MAX_WATTS_AVG, PUE_AVG) in
cloud-carbon-footprint/cloud-carbon-footprint, packages/aws/src/domain/AwsFootprintEstimationConstants.ts.
Older versions of that page list 0.71 and 3.46 W."""

IO_UTILISATIONS = ("proportional", "zero")


@dataclass(frozen=True)
class PowerModel:
    """A linear VM power model, eq. (13): P = sum over k of (alpha_k * u_k + gamma_k) watts, for k in
    cpu, disk (bytes), dops (disk operations), net (network bytes), each u_k in [0, 1].

    The defaults are Table III of the paper, which takes them from its ref. [22]: alpha_cpu 25.70,
    alpha_disk 7.21, alpha_dops 0, alpha_net 0.66, gamma_cpu 60.30, the other gammas 0 (W).
    ``name`` identifies the coefficient set in reports, ``source`` says where it comes from.
    Raises ConfigError for a coefficient that is not a finite number >= 0, or a peak power
    (all alphas + all gammas) above ``POWER_CEILING_W``.
    """

    name: str = "table-iii"
    alpha_cpu: float = 25.70
    alpha_disk: float = 7.21
    alpha_dops: float = 0.0
    alpha_net: float = 0.66
    gamma_cpu: float = 60.30
    gamma_disk: float = 0.0
    gamma_dops: float = 0.0
    gamma_net: float = 0.0
    source: str = "paper: dynamic deferral, Table III (from its ref. [22])"

    def __post_init__(self) -> None:
        for label in ("name", "source"):
            if not isinstance(getattr(self, label), str) or not getattr(self, label):
                raise ConfigError(f"power model {label} must be a non-empty string, got {getattr(self, label)!r}")
        for field in fields(self):
            if field.name in ("name", "source"):
                continue
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0:
                raise ConfigError(
                    f"power model {self.name!r}: {field.name} must be a finite number >= 0 W, got {value!r}"
                )
        if self.peak_power_w > POWER_CEILING_W:
            raise ConfigError(
                f"power model {self.name!r}: peak power {self.peak_power_w:g} W is above the {POWER_CEILING_W:g} W "
                "ceiling for one VM; check the units of the coefficients"
            )

    @property
    def idle_power_w(self) -> float:
        """Power at u = 0 for every input: the sum of the gammas, W."""
        return self.gamma_cpu + self.gamma_disk + self.gamma_dops + self.gamma_net

    @property
    def peak_power_w(self) -> float:
        """Power at u = 1 for every input, W."""
        return self.idle_power_w + self.alpha_cpu + self.alpha_disk + self.alpha_dops + self.alpha_net

    def power_w(self, u_cpu, u_disk=0.0, u_dops=0.0, u_net=0.0) -> np.ndarray:
        """Eq. (13): a VM's average power over a slot, W, for utilisations in [0, 1] (any broadcastable
        shapes; the result has their broadcast shape).

        Raises ConfigError for a utilisation that is NaN or outside [0, 1], naming its index.
        """
        terms = []
        for name, u, alpha, gamma in (
            ("u_cpu", u_cpu, self.alpha_cpu, self.gamma_cpu),
            ("u_disk", u_disk, self.alpha_disk, self.gamma_disk),
            ("u_dops", u_dops, self.alpha_dops, self.gamma_dops),
            ("u_net", u_net, self.alpha_net, self.gamma_net),
        ):
            u = np.asarray(u, dtype=float)
            bad = ~((u >= 0.0) & (u <= 1.0))  # NaN fails both comparisons
            if bad.any():
                where = tuple(int(i) for i in np.argwhere(bad)[0])
                raise ConfigError(f"{name} must be in [0, 1], got {float(u[where])!r} at index {where}")
            terms.append(alpha * u + gamma)
        return np.asarray(sum(terms))


TABLE_III = PowerModel()


def ccf_aws_model(vcpus: int = 1) -> PowerModel:
    """Cloud Carbon Footprint's compute estimate for an AWS VM with ``vcpus`` vCPUs, as eq. (13).

    CCF: average watts = min watts + vCPU utilisation * (max watts - min watts), per vCPU, times the
    provider's PUE. With AWS's averages (0.74 W and 3.5 W per vCPU, PUE 1.135, see
    ``CCF_AWS_MIN_WATTS_PER_VCPU``): gamma_cpu = 0.74 * vcpus * 1.135 W and alpha_cpu = (3.5 - 0.74) *
    vcpus * 1.135 W; disk and network terms are 0, because CCF prices storage per allocated terabyte-hour
    and networking per GB between regions, neither of which is a per-slot utilisation. The default, one
    vCPU, is the paper's EC2 small instance. Unlike Table III, this includes the data centre's overhead
    (PUE) and covers the processor only, so its watts are far lower; compare savings in percent, not Wh,
    across models. Raises ConfigError unless ``vcpus`` is an int >= 1.
    """
    if isinstance(vcpus, bool) or not isinstance(vcpus, int) or vcpus < 1:
        raise ConfigError(f"vcpus must be an int >= 1, got {vcpus!r}")
    scale = vcpus * CCF_AWS_PUE
    return PowerModel(
        name="ccf-aws" if vcpus == 1 else f"ccf-aws-{vcpus}vcpu",
        alpha_cpu=(CCF_AWS_MAX_WATTS_PER_VCPU - CCF_AWS_MIN_WATTS_PER_VCPU) * scale,
        alpha_disk=0.0,
        alpha_dops=0.0,
        alpha_net=0.0,
        gamma_cpu=CCF_AWS_MIN_WATTS_PER_VCPU * scale,
        source=(
            f"Cloud Carbon Footprint methodology, compute (AWS averages: {CCF_AWS_MIN_WATTS_PER_VCPU} W min, "
            f"{CCF_AWS_MAX_WATTS_PER_VCPU} W max per vCPU, PUE {CCF_AWS_PUE}), {vcpus} vCPU"
        ),
    )


MODELS: dict[str, PowerModel] = {"table-iii": TABLE_III, "ccf-aws": ccf_aws_model()}
"""The named power models."""


def power_model(name: str) -> PowerModel:
    """The power model called ``name`` in ``MODELS``. Raises ConfigError for an unknown name."""
    try:
        return MODELS[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown power model {name!r}; expected one of {', '.join(MODELS)}") from None


def energy_wh(power_w: np.ndarray, slot_s: float) -> float:
    """Eq. (14): sum over slots and VMs of power * tau / 3600, Wh.

    ``power_w``: W per slot (and per VM), any shape, e.g. (n_slots, n_instances). Raises ConfigError for
    a ``slot_s`` that is not finite and > 0 or a power that is NaN or negative.
    """
    slot_s = _check_slot_s(slot_s)
    power_w = np.asarray(power_w, dtype=float)
    bad = ~(power_w >= 0.0)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ConfigError(f"power_w must be finite and >= 0, got {float(power_w[where])!r} at index {where}")
    return float(power_w.sum() * slot_s / 3600.0)


@dataclass(frozen=True)
class IoMaxima:
    """The maxima b_db, b_do and b_net are divided by (eq. (13)): bytes, operations, bytes per slot."""

    disk_bytes: float
    disk_ops: float
    network_bytes: float

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"maximum {field.name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True, eq=False)
class MeasuredEnergy:
    """The energy of measured VMs (eq. (13)-(14)).

    ``energy_wh``: total over the counted (slot, VM) cells. ``slot_energy_wh``: (n_slots,), per slot.
    ``power_w``: (n_slots, n_instances), W, NaN where a cell is not counted. ``counted_count``: cells
    counted. ``maxima``: the normalisation maxima used; pass them to another call to put a second run
    on the same scale.
    """

    energy_wh: float
    slot_energy_wh: np.ndarray
    power_w: np.ndarray
    counted_count: int
    maxima: IoMaxima


def measured_energy(
    cpu_utilization_percent: np.ndarray,
    disk_bytes: np.ndarray,
    disk_ops: np.ndarray,
    network_bytes: np.ndarray,
    slot_s: float,
    model: PowerModel = TABLE_III,
    counted: np.ndarray | None = None,
    maxima: IoMaxima | None = None,
) -> MeasuredEnergy:
    """Energy of VMs from their per-slot metrics: eq. (13) for every counted (slot, VM), then eq. (14).

    Inputs, each (n_slots, n_instances): CloudWatch's CPUUtilization in percent (u_cpu = value/100);
    b_db = disk bytes read + written, b_do = disk operations read + written, b_net = network bytes in +
    out, per slot. ``counted``: (n_slots, n_instances) bool, the cells to count, normally
    ``metrics.measured`` (and'ed with a mask of the VMs that were running); default every cell. A cell
    not counted adds nothing and its inputs are not looked at: report those cells as unmeasured, the
    energy here does not include them.

    Normalisation: u_disk, u_dops and u_net are b_db, b_do and b_net divided by their maximum over every
    counted cell, all VMs and all slots together (the paper normalises by the maximum over the interval
    T; one maximum across VMs keeps a busy VM's u above an idle one's). A maximum of 0 gives u = 0.
    ``maxima`` replaces the computed maxima, e.g. by a reference run's, so two runs share one scale; each
    must then be at least the observed maximum.

    An input whose alpha is 0 is not needed and may be NaN (e.g. Disk*Ops under Table III).
    Raises ConfigError, naming the input, slot and VM, when a counted cell has a needed input that is
    NaN or negative or a CPUUtilization above 100 % (beyond ``UTILISATION_TOLERANCE``); for shapes that
    differ, a bad ``slot_s``, or a given maximum below the observed one.
    """
    slot_s = _check_slot_s(slot_s)
    inputs = {
        "cpu_utilization_percent": np.asarray(cpu_utilization_percent, dtype=float),
        "disk_bytes": np.asarray(disk_bytes, dtype=float),
        "disk_ops": np.asarray(disk_ops, dtype=float),
        "network_bytes": np.asarray(network_bytes, dtype=float),
    }
    shape = inputs["cpu_utilization_percent"].shape
    if len(shape) != 2 or any(array.shape != shape for array in inputs.values()):
        shapes = ", ".join(f"{name} {array.shape}" for name, array in inputs.items())
        raise ConfigError(f"metrics must all have shape (n_slots, n_instances); got {shapes}")
    counted = np.ones(shape, dtype=bool) if counted is None else np.asarray(counted)
    if counted.shape != shape or counted.dtype != bool:
        raise ConfigError(f"counted must be a bool array of shape {shape}, got {counted.dtype} {counted.shape}")
    alphas = {
        "cpu_utilization_percent": model.alpha_cpu,
        "disk_bytes": model.alpha_disk,
        "disk_ops": model.alpha_dops,
        "network_bytes": model.alpha_net,
    }
    for name, array in inputs.items():
        if alphas[name] > 0:
            _check_counted_values(name, array, counted, model)

    cpu = inputs["cpu_utilization_percent"] / 100.0
    if model.alpha_cpu > 0:
        over = counted & (cpu > 1.0 + UTILISATION_TOLERANCE)
        if over.any():
            slot, instance = (int(i) for i in np.argwhere(over)[0])
            percent = float(inputs["cpu_utilization_percent"][slot, instance])
            raise ConfigError(
                f"cpu_utilization_percent is {percent!r} at slot {slot}, instance {instance}; expected at most 100"
            )
    observed = {name: _counted_max(inputs[name], counted) for name in ("disk_bytes", "disk_ops", "network_bytes")}
    if maxima is None:
        maxima = IoMaxima(**observed)
    else:
        for name, value in observed.items():
            if alphas[name] > 0 and getattr(maxima, name) < value:
                raise ConfigError(
                    f"given maximum {name} {getattr(maxima, name)!r} is below the observed maximum {value!r}"
                )

    def utilisation(name: str, values: np.ndarray) -> np.ndarray:
        if alphas[name] == 0:
            return np.zeros(shape)  # not needed; its values may be NaN
        scale = getattr(maxima, name) if name != "cpu_utilization_percent" else 1.0
        if scale == 0:
            return np.zeros(shape)
        return np.clip(np.where(counted, values, 0.0) / scale, 0.0, 1.0)

    power_w = model.power_w(
        utilisation("cpu_utilization_percent", cpu),
        utilisation("disk_bytes", inputs["disk_bytes"]),
        utilisation("disk_ops", inputs["disk_ops"]),
        utilisation("network_bytes", inputs["network_bytes"]),
    )
    power_w = np.where(counted, power_w, np.nan)
    slot_energy_wh = np.nansum(power_w, axis=1) * slot_s / 3600.0
    power_w.flags.writeable = False
    slot_energy_wh.flags.writeable = False
    return MeasuredEnergy(
        energy_wh=float(slot_energy_wh.sum()),
        slot_energy_wh=slot_energy_wh,
        power_w=power_w,
        counted_count=int(counted.sum()),
        maxima=maxima,
    )


def modelled_energy_wh(
    capacity: np.ndarray,
    assigned: np.ndarray,
    slot_s: float,
    model: PowerModel = TABLE_III,
    io_utilisation: Literal["proportional", "zero"] = "proportional",
) -> np.ndarray:
    """Energy per slot of a schedule without measurements, Wh, shape (n_slots,) (eq. (13)-(14)).

    ``capacity``: m_t, servers on, (n_slots,); ``assigned``: x_t, servers' worth of work, (n_slots,).
    Work is spread evenly over the servers that are on, so each runs at u_t = x_t/m_t (0 when m_t = 0),
    and slot t uses m_t * P(u_t) * slot_s/3600 Wh. Fractional servers count linearly: 2.5 servers use
    2.5 times one server's power, the same linearity as the operating cost e0*m_t + e1*x_t.
    ``io_utilisation``: what the disk and network terms see, since a schedule says nothing about I/O.
    "proportional": u_disk = u_dops = u_net = u_t, i.e. a busy server drives its disk and network at the
    same fraction of the peak as its CPU (MapReduce tasks read, shuffle and write as they compute).
    "zero": those terms are idle (gammas only). With alphas >= 0, "zero" is a lower bound of
    "proportional".

    Raises ConfigError (naming the slot) for a NaN, infinite or negative m_t or x_t, x_t > m_t, both
    beyond ``SERVER_TOLERANCE``; for shapes that are not (n_slots,) alike, a bad ``slot_s`` or an
    unknown ``io_utilisation``.
    """
    slot_s = _check_slot_s(slot_s)
    if io_utilisation not in IO_UTILISATIONS:
        raise ConfigError(f"io_utilisation must be one of {', '.join(IO_UTILISATIONS)}, got {io_utilisation!r}")
    m = np.asarray(capacity, dtype=float)
    x = np.asarray(assigned, dtype=float)
    if m.ndim != 1 or x.shape != m.shape:
        raise ConfigError(f"capacity and assigned must both have shape (n_slots,), got {m.shape} and {x.shape}")
    for name, array in (("capacity m_t", m), ("assigned x_t", x)):
        bad = ~np.isfinite(array) | (array < -SERVER_TOLERANCE)
        if bad.any():
            slot = int(np.argmax(bad))
            raise ConfigError(f"{name} must be finite and >= 0, got {float(array[slot])!r} at slot {slot}")
    over = x > m + SERVER_TOLERANCE
    if over.any():
        slot = int(np.argmax(over))
        raise ConfigError(f"assigned x_t = {float(x[slot])!r} exceeds capacity m_t = {float(m[slot])!r} at slot {slot}")
    m = np.maximum(m, 0.0)
    x = np.clip(x, 0.0, m)
    u = np.divide(x, m, out=np.zeros_like(m), where=m > 0)
    u_io = u if io_utilisation == "proportional" else 0.0
    power_w = m * model.power_w(u, u_io, u_io, u_io)
    return power_w * slot_s / 3600.0


def _check_slot_s(slot_s: float) -> float:
    if isinstance(slot_s, bool) or not isinstance(slot_s, Real) or not math.isfinite(slot_s) or slot_s <= 0:
        raise ConfigError(f"slot_s must be a finite number of seconds > 0, got {slot_s!r}")
    return float(slot_s)


def _check_counted_values(name: str, values: np.ndarray, counted: np.ndarray, model: PowerModel) -> None:
    bad = counted & ~(np.isfinite(values) & (values >= 0.0))
    if bad.any():
        slot, instance = (int(i) for i in np.argwhere(bad)[0])
        value = float(values[slot, instance])
        what = "missing (NaN)" if math.isnan(value) else f"{value!r}, not a finite number >= 0"
        raise ConfigError(
            f"{name} is {what} at slot {slot}, instance {instance}, a counted cell; model {model.name!r} needs it. "
            "Leave unmeasured cells out of `counted`."
        )


def _counted_max(values: np.ndarray, counted: np.ndarray) -> float:
    """The largest finite value over counted cells, 0 when there is none."""
    usable = counted & np.isfinite(values)
    return max(0.0, float(values[usable].max())) if usable.any() else 0.0
