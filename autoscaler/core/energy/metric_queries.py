"""GetMetricData queries for the seven EC2 metrics of the power model, where each returned datapoint
goes, and what a missing datapoint means (paper: dynamic deferral, §VII-A).

Pure: no boto3, no clock. ``autoscaler.adapters.cloudwatch_reader`` sends the queries and hands the answers back here.

One query per (instance, metric): namespace AWS/EC2, dimension InstanceId, period = the slot. The
statistic is Average for CPUUtilization (a percentage, so the slot's mean) and Sum for the byte and
operation counters (the slot's total, which is what eq. (12) takes). No metric math: the arithmetic
(read + write, in + out, normalisation) is done in numpy by ``autoscaler.core.energy.power``.

What the metrics cover, from AWS's EC2 documentation: basic monitoring publishes every 5 minutes,
detailed monitoring every minute, so ``slot_s`` should be at least the instance's monitoring period
or most slots come back empty. The Disk* metrics count instance-store volumes only; for an instance
without any, "either the value is 0 or the metric is not reported" (EBS traffic is in AWS/EBS, per
volume, which is not read here). Ask the reader for fewer ``metric_names`` when a model does not need
the rest.

Every datapoint is bounded before the missing-data rule (``MetricBounds``, ``bound_metrics``): one that
no EC2 instance can report (a CPUUtilization of 1e9 %, a negative NetworkIn, 1e30 disk bytes in a slot,
an infinity) is not a measurement, so it is treated as missing, and the caller is told which instance,
metric, time and value.

Over 600 lines, one module: the queries, where each answer goes and the missing-data rule are one
contract with CloudWatch, and a change to one (a metric, a period) changes the others.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from numbers import Real

import numpy as np

from autoscaler.core import readable
from autoscaler.core.errors import ConfigError, MetricsError

EC2_NAMESPACE = "AWS/EC2"
INSTANCE_DIMENSION = "InstanceId"

EC2_METRICS: tuple[tuple[str, str], ...] = (
    ("CPUUtilization", "Average"),
    ("DiskReadBytes", "Sum"),
    ("DiskWriteBytes", "Sum"),
    ("DiskReadOps", "Sum"),
    ("DiskWriteOps", "Sum"),
    ("NetworkIn", "Sum"),
    ("NetworkOut", "Sum"),
)
"""(metric name, statistic) in the order of the last axis of every metrics array here."""

METRIC_NAMES: tuple[str, ...] = tuple(name for name, _ in EC2_METRICS)
METRIC_INDEX: dict[str, int] = {name: index for index, name in enumerate(METRIC_NAMES)}

MAX_QUERIES_PER_CALL = 500
"""CloudWatch's limit on MetricDataQueries in one GetMetricData call."""

MINUTE_S = 60

FAILED_STATUS_CODES = frozenset({"InternalError", "Forbidden"})
"""MetricDataResult StatusCodes that mean the query's datapoints were not (all) returned."""

_QUERY_ID = re.compile(r"^m(\d+)_i(\d+)$")

CPU_TOLERANCE_PERCENT = 1.0
"""How far above 100 % a CPUUtilization may be and still be read, as 100 %: CloudWatch's Average over a
slot of a saturated node can come back a little above 100 (100.4 has been seen). Beyond 100 + this it
is out of bounds."""

DISK_BYTES_PER_S = 50e9
DISK_OPS_PER_S = 10e6
NETWORK_BYTES_PER_S = 50e9
"""Default ceilings per metric (DiskReadBytes alone, NetworkIn alone, ...), per second of the period a
datapoint covers. Generous on purpose: they catch values no EC2 instance can report, not a busy node.
The largest instance-store instances (i3en, i4i) are listed by AWS at about 16 GB/s of sequential disk
throughput and a few million IOPS, and the network-optimised ones (c6in, m6in .32xlarge) at 200 Gbps
(25 GB/s); 50 GB/s and 10 million operations per second are a few times above those. GPU instances
with EFA list more network bandwidth than that: give them a larger ``network_bytes_per_s``. The job-length model's
rates (``autoscaler.core.model.LengthModel``: 100 MB/s disk, 10 MB/s network) are per-task estimates, far
below what a node can move, so they are not used as ceilings."""

BASIC_MONITORING_PERIOD_S = 300
"""The longest period one EC2 datapoint covers: basic monitoring publishes one Sum per 5 minutes. A slot
shorter than that can receive a whole 5-minute Sum, so a counter's ceiling is its rate times
max(slot_s, this)."""


def period_s(slot_s: float) -> int:
    """The GetMetricData Period for slots of ``slot_s`` seconds, as an int.

    Raises ConfigError unless ``slot_s`` is a whole multiple of 60 s and > 0 (CloudWatch takes periods
    of 1, 5, 10, 30 s or multiples of 60 s; sub-minute ones exist only for high-resolution metrics,
    which EC2 does not publish).
    """
    if isinstance(slot_s, bool) or not isinstance(slot_s, Real) or not math.isfinite(slot_s):
        raise ConfigError(f"slot_s must be a whole number of minutes in seconds, got {slot_s!r}")
    if slot_s <= 0 or slot_s != int(slot_s) or int(slot_s) % MINUTE_S:
        raise ConfigError(f"slot_s must be a multiple of 60 s and > 0 for CloudWatch, got {slot_s!r}")
    return int(slot_s)


def slot_count(start_s: float, end_s: float, slot_s: float) -> int:
    """How many slots of ``slot_s`` seconds make [start_s, end_s) (unix seconds).

    Raises ConfigError unless start_s and end_s are whole minutes (CloudWatch rounds its StartTime down
    to the minute, and the slot grid must be the same as CloudWatch's), end_s > start_s, and the
    interval is a whole number of slots.
    """
    period = period_s(slot_s)
    for name, value in (("start_s", start_s), ("end_s", end_s)):
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
            raise ConfigError(f"{name} must be unix seconds, got {value!r}")
        if value != int(value) or int(value) % MINUTE_S:
            raise ConfigError(f"{name} must be a whole minute (a multiple of 60 unix seconds), got {value!r}")
    span_s = int(end_s) - int(start_s)
    if span_s <= 0:
        raise ConfigError(f"end_s ({end_s!r}) must be after start_s ({start_s!r})")
    if span_s % period:
        raise ConfigError(f"[start_s, end_s) is {span_s} s, not a whole number of {period} s slots")
    return span_s // period


def query_id(instance_index: int, metric_index: int) -> str:
    """The query Id of (instance, metric): ``m{metric}_i{instance}``.

    CloudWatch wants an Id that starts with a lowercase letter and holds only letters, digits and '_';
    instance ids ('i-0abc...') have a '-', so the Id carries positions, which ``query_cell`` maps back.
    """
    return f"m{metric_index}_i{instance_index}"


def query_cell(query_id_: str) -> tuple[int, int]:
    """(instance index, metric index) of a query Id made by ``query_id``.

    Raises MetricsError for an Id this module did not make (CloudWatch answered a query never sent).
    """
    match = _QUERY_ID.match(query_id_)
    if match is None:
        raise MetricsError(f"GetMetricData answered query Id {query_id_!r}, which was not asked for")
    return int(match.group(2)), int(match.group(1))


def metric_data_queries(
    instance_ids: Sequence[str],
    slot_s: float,
    metric_names: Sequence[str] = METRIC_NAMES,
) -> list[dict]:
    """GetMetricData MetricDataQueries: one MetricStat per instance x metric, instance by instance.

    Returns ``len(instance_ids) * len(metric_names)`` queries, Period ``slot_s``, Average for
    CPUUtilization and Sum for the counters, Ids from ``query_id`` (positions in ``instance_ids`` and
    ``METRIC_NAMES``). Raises ConfigError for an empty or repeated instance id, an unknown or repeated
    metric name, or a ``slot_s`` CloudWatch cannot use (see ``period_s``).
    """
    period = period_s(slot_s)
    metric_indices = _metric_indices(metric_names)
    _check_instance_ids(instance_ids)
    queries = []
    for instance_index, instance_id in enumerate(instance_ids):
        for metric_index in metric_indices:
            name, statistic = EC2_METRICS[metric_index]
            queries.append(
                {
                    "Id": query_id(instance_index, metric_index),
                    "MetricStat": {
                        "Metric": {
                            "Namespace": EC2_NAMESPACE,
                            "MetricName": name,
                            "Dimensions": [{"Name": INSTANCE_DIMENSION, "Value": instance_id}],
                        },
                        "Period": period,
                        "Stat": statistic,
                    },
                    "ReturnData": True,
                }
            )
    return queries


def batched(queries: Sequence[dict], max_per_call: int = MAX_QUERIES_PER_CALL) -> list[list[dict]]:
    """Split queries into consecutive batches of at most ``max_per_call`` (one GetMetricData call each).

    Raises ConfigError unless 1 <= max_per_call <= 500.
    """
    is_int = isinstance(max_per_call, int) and not isinstance(max_per_call, bool)
    if not is_int or not 1 <= max_per_call <= MAX_QUERIES_PER_CALL:
        raise ConfigError(f"max_per_call must be an int in [1, {MAX_QUERIES_PER_CALL}], got {max_per_call!r}")
    return [list(queries[i : i + max_per_call]) for i in range(0, len(queries), max_per_call)]


def place_datapoints(
    results: Iterable[Mapping],
    n_slots: int,
    n_instances: int,
    start_s: int,
    slot_s: int,
) -> np.ndarray:
    """Put GetMetricData's MetricDataResults (every page of every batch) on the slot grid.

    Returns shape (n_slots, n_instances, len(METRIC_NAMES)), metric axis in ``METRIC_NAMES`` order; NaN
    wherever CloudWatch returned no datapoint, never 0. A datapoint's Timestamp (a timezone-aware
    datetime, as boto3 gives it) is the start of its period, so slot = (timestamp - start_s) / slot_s.
    Raises MetricsError for an Id not made by ``query_id`` or out of range, a datapoint not on the slot
    grid or outside [start_s, start_s + n_slots*slot_s), Values and Timestamps of different lengths, or
    two datapoints for one slot.
    """
    values = np.full((n_slots, n_instances, len(METRIC_NAMES)), np.nan)
    placed = np.zeros(values.shape, dtype=bool)  # a datapoint whose value is NaN is still a datapoint
    for result in results:
        instance_index, metric_index = query_cell(str(result.get("Id", "")))
        if instance_index >= n_instances or metric_index >= len(METRIC_NAMES):
            raise MetricsError(f"GetMetricData answered query Id {result.get('Id')!r}, which was not asked for")
        timestamps = list(result.get("Timestamps", []))
        points = list(result.get("Values", []))
        if len(timestamps) != len(points):
            raise MetricsError(
                f"GetMetricData result {result.get('Id')!r}: {len(points)} values for {len(timestamps)} timestamps"
            )
        for timestamp, value in zip(timestamps, points):
            slot = _slot_of(timestamp, start_s, slot_s, n_slots, result.get("Id"))
            if placed[slot, instance_index, metric_index]:
                raise MetricsError(
                    f"GetMetricData result {result.get('Id')!r}: two datapoints for slot {slot} ({timestamp})"
                )
            values[slot, instance_index, metric_index] = float(value)
            placed[slot, instance_index, metric_index] = True
    return values


def check_status(results: Iterable[Mapping], instance_ids: Sequence[str]) -> None:
    """Raise MetricsError, naming the metric and instance, for a MetricDataResult whose StatusCode is
    InternalError or Forbidden: its datapoints were not (all) returned, and reading the missing ones as
    gaps would hide the failure. Complete and PartialData pass (PartialData comes with a NextToken,
    and the following pages hold the rest).
    """
    for result in results:
        status = result.get("StatusCode", "Complete")
        if status in FAILED_STATUS_CODES:
            instance_index, metric_index = query_cell(str(result.get("Id", "")))
            instance = instance_ids[instance_index] if instance_index < len(instance_ids) else f"#{instance_index}"
            metric = METRIC_NAMES[metric_index] if metric_index < len(METRIC_NAMES) else f"#{metric_index}"
            raise MetricsError(f"CloudWatch GetMetricData: {metric} of {instance} ended {status}")


@dataclass(frozen=True)
class MetricBounds:
    """What one datapoint of each EC2 metric may be (the defaults are the module's constants).

    CPUUtilization: 0 to 100 %, values in (100, 100 + ``cpu_tolerance_percent``] read as 100. The
    counters (Sum over the slot): 0 to rate * max(slot_s, ``datapoint_period_s``), with rate
    ``disk_bytes_per_s`` for DiskReadBytes and DiskWriteBytes, ``disk_ops_per_s`` for DiskReadOps and
    DiskWriteOps, ``network_bytes_per_s`` for NetworkIn and NetworkOut, each metric on its own. Raises
    ConfigError for a tolerance that is not a finite number >= 0 or a rate or period that is not a
    finite number > 0.
    """

    cpu_tolerance_percent: float = CPU_TOLERANCE_PERCENT
    disk_bytes_per_s: float = DISK_BYTES_PER_S
    disk_ops_per_s: float = DISK_OPS_PER_S
    network_bytes_per_s: float = NETWORK_BYTES_PER_S
    datapoint_period_s: float = BASIC_MONITORING_PERIOD_S

    def __post_init__(self) -> None:
        for name in ("cpu_tolerance_percent", "disk_bytes_per_s", "disk_ops_per_s", "network_bytes_per_s", "datapoint_period_s"):
            value = getattr(self, name)
            smallest_ok = 0.0 if name == "cpu_tolerance_percent" else math.nextafter(0.0, 1.0)
            if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < smallest_ok:
                expected = ">= 0" if name == "cpu_tolerance_percent" else "> 0"
                raise ConfigError(f"metric bounds: {name} must be a finite number {expected}, got {value!r}")

    def upper(self, slot_s: float) -> np.ndarray:
        """The largest accepted value of each metric in a slot of ``slot_s`` seconds, shape (7,), in
        ``METRIC_NAMES`` order: percent for CPUUtilization (100 + tolerance), bytes or operations for the
        counters. Raises ConfigError for a ``slot_s`` that is not a finite number > 0."""
        if isinstance(slot_s, bool) or not isinstance(slot_s, Real) or not math.isfinite(slot_s) or slot_s <= 0:
            raise ConfigError(f"slot_s must be a finite number of seconds > 0, got {slot_s!r}")
        span_s = max(float(slot_s), float(self.datapoint_period_s))
        rate = {
            "DiskReadBytes": self.disk_bytes_per_s,
            "DiskWriteBytes": self.disk_bytes_per_s,
            "DiskReadOps": self.disk_ops_per_s,
            "DiskWriteOps": self.disk_ops_per_s,
            "NetworkIn": self.network_bytes_per_s,
            "NetworkOut": self.network_bytes_per_s,
        }
        return np.array([100.0 + self.cpu_tolerance_percent if name == "CPUUtilization" else rate[name] * span_s for name in METRIC_NAMES])


DEFAULT_BOUNDS = MetricBounds()
"""The bounds the reader and ``instance_metrics`` apply unless given others."""

METRIC_UNITS: dict[str, str] = {
    "CPUUtilization": "%",
    "DiskReadBytes": "bytes",
    "DiskWriteBytes": "bytes",
    "DiskReadOps": "operations",
    "DiskWriteOps": "operations",
    "NetworkIn": "bytes",
    "NetworkOut": "bytes",
}


@dataclass(frozen=True)
class OutOfBounds:
    """The datapoints of one (instance, metric) that were out of bounds and so treated as missing.

    ``time_s`` and ``value``: the first of them (unix seconds of its slot's start, the value as
    CloudWatch gave it). ``count``: how many there were. ``upper``: the largest accepted value (unit
    ``METRIC_UNITS[metric]``); the smallest is 0. ``slot_s``: the slot length the bound is for.
    """

    instance_id: str
    metric: str
    time_s: int
    value: float
    count: int
    upper: float
    slot_s: int

    @property
    def message(self) -> str:
        """One line naming the instance, metric, UTC time and value, and what was expected."""
        unit = METRIC_UNITS[self.metric]
        if self.metric == "CPUUtilization":
            expected = f"0 to 100 % (up to {self.upper:g} % is read as 100)"
        else:
            expected = f"0 to {self.upper:.4g} {unit} in a {self.slot_s} s slot"
        more = f"; {self.count - 1} more of its datapoints too" if self.count > 1 else ""
        return (
            f"{self.metric} of {self.instance_id} at {utc_text(self.time_s)} is {self.value:g}, expected {expected}: "
            f"treated as missing{more}"
        )


@dataclass(frozen=True, eq=False)
class BoundedValues:
    """What ``bound_metrics`` made of an array of datapoints.

    ``values``: same shape as the input, (n_slots, n_instances, 7), NaN where a datapoint was missing or
    out of bounds, CPUUtilization within the tolerance above 100 set to 100. ``rejected``: (n_slots,
    n_instances, 7) bool, True where a datapoint was there but out of bounds (NaN is missing, not
    rejected). ``out_of_bounds``: one record per (instance, metric) with a rejected datapoint, instance
    by instance in ``METRIC_NAMES`` order. ``clipped_count``: CPUUtilization datapoints read as 100.
    """

    values: np.ndarray
    rejected: np.ndarray
    out_of_bounds: tuple[OutOfBounds, ...]
    clipped_count: int


def bound_metrics(
    raw: np.ndarray,
    instance_ids: Sequence[str],
    start_s: int,
    slot_s: int,
    bounds: MetricBounds = DEFAULT_BOUNDS,
    metric_names: Sequence[str] = METRIC_NAMES,
) -> BoundedValues:
    """Bound every datapoint of the ``metric_names`` columns (see ``MetricBounds``); the others are left
    as they are.

    ``raw``: (n_slots, len(instance_ids), 7) from ``place_datapoints``, NaN = no datapoint. A value below
    0, above its metric's upper bound, or infinite becomes NaN (missing) and is reported in
    ``out_of_bounds``; NaN stays NaN (CloudWatch stores no NaN, so it is a missing datapoint).
    Raises ConfigError for a shape that does not match ``instance_ids``, an unknown metric name or a bad
    ``slot_s``.
    """
    raw = np.asarray(raw, dtype=float)
    if raw.ndim != 3 or raw.shape[1:] != (len(instance_ids), len(METRIC_NAMES)):
        raise ConfigError(
            f"raw metrics must have shape (n_slots, {len(instance_ids)}, {len(METRIC_NAMES)}), got {raw.shape}"
        )
    columns = _metric_indices(metric_names)
    upper = bounds.upper(slot_s)
    values = raw.copy()
    rejected = np.zeros(raw.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        outside = ~np.isnan(raw) & ~((raw >= 0.0) & (raw <= upper))  # infinities fail the comparison
    rejected[:, :, columns] = outside[:, :, columns]
    values[rejected] = np.nan
    cpu = METRIC_INDEX["CPUUtilization"]
    clipped_count = 0
    if cpu in columns:
        over = values[:, :, cpu] > 100.0  # NaN compares False
        clipped_count = int(over.sum())
        values[:, :, cpu] = np.where(over, 100.0, values[:, :, cpu])
    records = []
    for instance_index, metric_index in sorted({(int(i), int(m)) for _, i, m in np.argwhere(rejected)}):
        slots = np.flatnonzero(rejected[:, instance_index, metric_index])
        first = int(slots[0])
        records.append(
            OutOfBounds(
                instance_id=str(instance_ids[instance_index]),
                metric=METRIC_NAMES[metric_index],
                time_s=int(start_s) + first * int(slot_s),
                value=float(raw[first, instance_index, metric_index]),
                count=int(slots.size),
                upper=float(upper[metric_index]),
                slot_s=int(slot_s),
            )
        )
    return BoundedValues(
        values=_read_only(values), rejected=_read_only(rejected), out_of_bounds=tuple(records), clipped_count=clipped_count
    )


def utc_text(seconds: float) -> str:
    """Unix seconds as 'YYYY-MM-DD HH:MM UTC' (slots start on whole minutes)."""
    return readable.utc_text(seconds, layout="text")


@dataclass(frozen=True, eq=False)
class HeldValues:
    """What ``hold_last_measured`` made of an array with gaps.

    ``values``: same shape as the input, (n_slots, n_instances, n_metrics), gaps filled where the rule
    allows, NaN elsewhere. ``measured``: (n_slots, n_instances) bool, True where every metric has a value.
    ``held_count``: measured (slot, instance) pairs that needed a held value for at least one metric.
    ``unmeasured_count``: (slot, instance) pairs still missing a metric.
    """

    values: np.ndarray
    measured: np.ndarray
    held_count: int
    unmeasured_count: int


def hold_last_measured(values: np.ndarray, max_hold_slots: int = 1) -> HeldValues:
    """The missing-data rule: a gap is filled with the last measured value for at most ``max_hold_slots``
    slots; after that the (slot, instance) pair is unmeasured, never zero.

    ``values``: (n_slots, n_instances, n_metrics), NaN = no datapoint. Each (instance, metric) series is
    held on its own, and only from a measured value: with ``max_hold_slots`` = 1 a run of three gaps
    gets one held slot and two NaN slots; a gap before the first datapoint stays NaN (nothing to hold).
    0 disables holding. Why hold at all: CloudWatch publishes EC2 metrics a few minutes late and
    occasionally skips a period, so one empty slot of a running instance is far more often a late or
    lost datapoint than a stopped machine; a longer gap may be a stopped or terminated instance, and
    guessing its power would invent energy.

    Raises ConfigError for a ``max_hold_slots`` that is not an int >= 0, a ``values`` that is not 3-d,
    or an infinite value (only NaN means missing).
    """
    if isinstance(max_hold_slots, bool) or not isinstance(max_hold_slots, int) or max_hold_slots < 0:
        raise ConfigError(f"max_hold_slots must be an int >= 0, got {max_hold_slots!r}")
    raw = np.asarray(values, dtype=float)
    if raw.ndim != 3:
        raise ConfigError(f"values must have shape (n_slots, n_instances, n_metrics), got {raw.shape}")
    if np.isinf(raw).any():
        slot, instance, metric = (int(i) for i in np.argwhere(np.isinf(raw))[0])
        raise ConfigError(f"values: infinite value at slot {slot}, instance {instance}, metric {metric}")
    filled = raw.copy()
    held = np.zeros(raw.shape, dtype=bool)
    last_value = np.full(raw.shape[1:], np.nan)
    last_slot = np.full(raw.shape[1:], -np.inf)
    for slot in range(raw.shape[0]):
        present = ~np.isnan(raw[slot])
        last_value = np.where(present, raw[slot], last_value)
        last_slot = np.where(present, slot, last_slot)
        hold = ~present & (slot - last_slot <= max_hold_slots)
        filled[slot] = np.where(hold, last_value, raw[slot])
        held[slot] = hold
    measured = ~np.isnan(filled).any(axis=2)
    return HeldValues(
        values=_read_only(filled),
        measured=_read_only(measured),
        held_count=int((held.any(axis=2) & measured).sum()),
        unmeasured_count=int((~measured).sum()),
    )


@dataclass(frozen=True, eq=False)
class InstanceMetrics:
    """The seven EC2 metrics of some instances, per slot, after the bounds and the missing-data rule.

    ``values``: (n_slots, n_instances, 7) in ``METRIC_NAMES`` order; CPUUtilization in percent
    (the slot's Average, 0 to 100), the others the slot's Sum in bytes or operations; NaN where missing
    or out of bounds (after holding) or not read. ``metric_names``: the metrics read; the others are all
    NaN. ``measured``: (n_slots, n_instances) bool, True where every metric read has a value.
    ``held_count`` and ``unmeasured_count`` are (slot, instance) pairs, see ``hold_last_measured``.
    ``rejected``: (n_slots, n_instances, 7) bool, where CloudWatch gave a datapoint that was out of
    bounds; ``out_of_bounds``: one record per (instance, metric) of them; ``clipped_count``:
    CPUUtilization datapoints a little above 100 read as 100 (see ``bound_metrics``). Slot t covers
    [start_s + t*slot_s, start_s + (t+1)*slot_s), unix seconds.
    """

    instance_ids: tuple[str, ...]
    start_s: int
    slot_s: int
    metric_names: tuple[str, ...]
    values: np.ndarray
    measured: np.ndarray
    held_count: int
    unmeasured_count: int
    rejected: np.ndarray
    out_of_bounds: tuple[OutOfBounds, ...] = ()
    clipped_count: int = 0

    @property
    def n_slots(self) -> int:
        return int(self.values.shape[0])

    def metric(self, name: str) -> np.ndarray:
        """One metric, shape (n_slots, n_instances). Raises ConfigError for an unknown name."""
        (index,) = _metric_indices([name])
        return self.values[:, :, index]

    @property
    def cpu_utilization_percent(self) -> np.ndarray:
        """CPUUtilization, percent, (n_slots, n_instances)."""
        return self.metric("CPUUtilization")

    @property
    def disk_bytes(self) -> np.ndarray:
        """b_db = DiskReadBytes + DiskWriteBytes per slot, (n_slots, n_instances); NaN if either is."""
        return self.metric("DiskReadBytes") + self.metric("DiskWriteBytes")

    @property
    def disk_ops(self) -> np.ndarray:
        """b_do = DiskReadOps + DiskWriteOps per slot, (n_slots, n_instances); NaN if either is."""
        return self.metric("DiskReadOps") + self.metric("DiskWriteOps")

    @property
    def network_bytes(self) -> np.ndarray:
        """b_net = NetworkIn + NetworkOut per slot, bytes, (n_slots, n_instances); NaN if either is."""
        return self.metric("NetworkIn") + self.metric("NetworkOut")


def instance_metrics(
    raw: np.ndarray,
    instance_ids: Sequence[str],
    start_s: int,
    slot_s: int,
    metric_names: Sequence[str] = METRIC_NAMES,
    max_hold_slots: int = 1,
    bounds: MetricBounds = DEFAULT_BOUNDS,
) -> InstanceMetrics:
    """Bound the metrics read (``bound_metrics``), apply ``hold_last_measured`` to them and wrap the result.

    ``raw``: (n_slots, n_instances, 7) from ``place_datapoints``. An out-of-bounds datapoint is missing,
    so it may be held from the slot before like any gap. Only the ``metric_names`` columns decide
    ``measured``; the others are set to NaN. Raises ConfigError as ``bound_metrics`` and
    ``hold_last_measured`` do.
    """
    bounded = bound_metrics(raw, instance_ids, start_s, slot_s, bounds, metric_names)
    columns = _metric_indices(metric_names)
    held = hold_last_measured(bounded.values[:, :, columns], max_hold_slots)
    values = np.full(bounded.values.shape, np.nan)
    values[:, :, columns] = held.values
    return InstanceMetrics(
        instance_ids=tuple(instance_ids),
        start_s=int(start_s),
        slot_s=int(slot_s),
        metric_names=tuple(METRIC_NAMES[i] for i in columns),
        values=_read_only(values),
        measured=held.measured,
        held_count=held.held_count,
        unmeasured_count=held.unmeasured_count,
        rejected=bounded.rejected,
        out_of_bounds=bounded.out_of_bounds,
        clipped_count=bounded.clipped_count,
    )


def _metric_indices(metric_names: Sequence[str]) -> list[int]:
    if isinstance(metric_names, str):
        raise ConfigError(f"metric_names must be a sequence of names, got the string {metric_names!r}")
    indices = []
    for name in metric_names:
        if name not in METRIC_INDEX:
            raise ConfigError(f"unknown EC2 metric {name!r}; expected one of {', '.join(METRIC_NAMES)}")
        if METRIC_INDEX[name] in indices:
            raise ConfigError(f"EC2 metric {name!r} is asked for twice")
        indices.append(METRIC_INDEX[name])
    if not indices:
        raise ConfigError("metric_names is empty; ask for at least one EC2 metric")
    return sorted(indices)


def _check_instance_ids(instance_ids: Sequence[str]) -> None:
    if isinstance(instance_ids, str):
        raise ConfigError(f"instance_ids must be a sequence of ids, got the string {instance_ids!r}")
    seen: set[str] = set()
    for position, instance_id in enumerate(instance_ids):
        if not isinstance(instance_id, str) or not instance_id:
            raise ConfigError(f"instance_ids[{position}] must be a non-empty string, got {instance_id!r}")
        if instance_id in seen:
            raise ConfigError(f"instance id {instance_id!r} is listed twice")
        seen.add(instance_id)


def _slot_of(timestamp: datetime, start_s: int, slot_s: int, n_slots: int, query: object) -> int:
    if not isinstance(timestamp, datetime) or timestamp.tzinfo is None:
        raise MetricsError(f"GetMetricData result {query!r}: timestamp {timestamp!r} is not a timezone-aware datetime")
    offset_s = timestamp.timestamp() - start_s
    slot, remainder = divmod(offset_s, slot_s)
    if remainder or not 0 <= slot < n_slots:
        raise MetricsError(
            f"GetMetricData result {query!r}: datapoint at {timestamp.isoformat()} is not the start of one of "
            f"the {n_slots} slots of {slot_s} s from unix second {start_s}"
        )
    return int(slot)


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array
