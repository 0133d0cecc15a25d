"""GetMetricData queries for the seven EC2 metrics of the power model, where each returned datapoint
goes, and what a missing datapoint means (paper: dynamic deferral, §VII-A).

Pure: no boto3, no clock. ``cloudwatch.reader`` sends the queries and hands the answers back here.

One query per (instance, metric): namespace AWS/EC2, dimension InstanceId, period = the slot. The
statistic is Average for CPUUtilization (a percentage, so the slot's mean) and Sum for the byte and
operation counters (the slot's total, which is what eq. (12) takes). No metric math: the arithmetic
(read + write, in + out, normalisation) is done in numpy by ``energy.power``.

What the metrics cover, from AWS's EC2 documentation: basic monitoring publishes every 5 minutes,
detailed monitoring every minute, so ``slot_s`` should be at least the instance's monitoring period
or most slots come back empty. The Disk* metrics count instance-store volumes only; for an instance
without any, "either the value is 0 or the metric is not reported" (EBS traffic is in AWS/EBS, per
volume, which is not read here). Ask the reader for fewer ``metric_names`` when a model does not need
the rest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from numbers import Real

import numpy as np

from autoscaler.errors import ConfigError, MetricsError

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
            if not math.isnan(values[slot, instance_index, metric_index]):
                raise MetricsError(
                    f"GetMetricData result {result.get('Id')!r}: two datapoints for slot {slot} ({timestamp})"
                )
            values[slot, instance_index, metric_index] = float(value)
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
    """The seven EC2 metrics of some instances, per slot, after the missing-data rule.

    ``values``: (n_slots, n_instances, 7) in ``METRIC_NAMES`` order; CPUUtilization in percent
    (the slot's Average), the others the slot's Sum in bytes or operations; NaN where missing (after
    holding) or not read. ``metric_names``: the metrics read; the others are all NaN. ``measured``:
    (n_slots, n_instances) bool, True where every metric read has a value. ``held_count`` and
    ``unmeasured_count`` are (slot, instance) pairs, see ``hold_last_measured``. Slot t covers
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
) -> InstanceMetrics:
    """Apply ``hold_last_measured`` to the metrics read and wrap the result.

    ``raw``: (n_slots, n_instances, 7) from ``place_datapoints``. Only the ``metric_names`` columns
    decide ``measured``; the others are set to NaN. Raises ConfigError as ``hold_last_measured`` and
    for an unknown metric name or a shape that does not match ``instance_ids``.
    """
    raw = np.asarray(raw, dtype=float)
    if raw.ndim != 3 or raw.shape[1:] != (len(instance_ids), len(METRIC_NAMES)):
        raise ConfigError(
            f"raw metrics must have shape (n_slots, {len(instance_ids)}, {len(METRIC_NAMES)}), got {raw.shape}"
        )
    columns = _metric_indices(metric_names)
    held = hold_last_measured(raw[:, :, columns], max_hold_slots)
    values = np.full(raw.shape, np.nan)
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
