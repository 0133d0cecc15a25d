"""Publishing the energy account as CloudWatch custom metrics, so dashboards and alarms can follow it.

Two metrics in namespace ``NAMESPACE``: ``EnergyWh``, the energy the cluster used (paper: dynamic
deferral, eq. (14)), and ``SavedWh``, the energy saved against a reference schedule (follow the
workload, as in the paper's Table IV). Both are watt-hours; CloudWatch has no Wh unit, so the Unit is
"None" and the unit is in the name. One datapoint per call and timestamp: publish per slot and
CloudWatch's Sum over any period is the energy over that period.

``SavedWh`` may be negative: a policy can use more energy than the reference (a deferral that keeps
servers on longer, a switching storm), and hiding that would make the saving look better than it is;
it is published as is. ``EnergyWh`` must be >= 0. NaN and infinity are refused for both.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from numbers import Real

from botocore.client import BaseClient

from autoscaler.errors import ConfigError
from cloudwatch.reader import calling

NAMESPACE = "DeferralAutoscaler"
ENERGY_METRIC = "EnergyWh"
SAVED_METRIC = "SavedWh"
SCHEDULE_DIMENSION = "Schedule"
CLUSTER_DIMENSION = "ClusterId"
"""Dimension naming the schedule (policy) the numbers belong to, e.g. 'gcp-u' or 'vfw'."""

DIMENSION_VALUE_MAX_CHARS = 1024
"""CloudWatch's limit on a dimension value."""


def energy_metric_data(
    energy_wh: float,
    saved_wh: float,
    timestamp_s: float,
    schedule: str | None = None,
    cluster_id: str | None = None,
) -> list[dict]:
    """The PutMetricData MetricData for one datapoint of EnergyWh and SavedWh at ``timestamp_s``.

    ``energy_wh``: finite and >= 0. ``saved_wh``: finite, any sign (see the module docstring).
    ``timestamp_s``: unix seconds. ``cluster_id`` and ``schedule``: when given, both metrics carry the
    dimensions ClusterId=<cluster_id> and Schedule=<schedule>. Raises ConfigError for a NaN, infinite
    or negative energy, a NaN or infinite saving or timestamp, or an empty or over-long dimension value.
    """
    for name, value in (("energy_wh", energy_wh), ("saved_wh", saved_wh), ("timestamp_s", timestamp_s)):
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
            raise ConfigError(f"{name} must be a finite number, got {value!r}")
    if energy_wh < 0:
        raise ConfigError(f"energy_wh must be >= 0, got {energy_wh!r}")
    dimensions = []
    for label, name, value in (("cluster_id", CLUSTER_DIMENSION, cluster_id), ("schedule", SCHEDULE_DIMENSION, schedule)):
        if value is None:
            continue
        if not isinstance(value, str) or not value or len(value) > DIMENSION_VALUE_MAX_CHARS:
            raise ConfigError(
                f"{label} must be a non-empty string of at most {DIMENSION_VALUE_MAX_CHARS} characters, got {value!r}"
            )
        dimensions.append({"Name": name, "Value": value})
    timestamp = datetime.fromtimestamp(timestamp_s, tz=timezone.utc)
    metric_data = []
    for metric, value in ((ENERGY_METRIC, energy_wh), (SAVED_METRIC, saved_wh)):
        datum = {"MetricName": metric, "Timestamp": timestamp, "Value": float(value), "Unit": "None"}
        if dimensions:
            datum["Dimensions"] = dimensions
        metric_data.append(datum)
    return metric_data


class EnergyPublisher:
    """Publishes EnergyWh and SavedWh with PutMetricData in ``namespace`` (default ``NAMESPACE``).

    ``client`` is a CloudWatch client, normally from ``cloudwatch.reader.cloudwatch_client``. Calls
    block until AWS answers (botocore's retries included).
    """

    def __init__(self, client: BaseClient, namespace: str = NAMESPACE) -> None:
        if not isinstance(namespace, str) or not namespace or namespace.startswith("AWS/"):
            raise ConfigError(f"namespace must be a non-empty name outside AWS/, got {namespace!r}")
        self.client = client
        self.namespace = namespace

    def publish(
        self, energy_wh: float, saved_wh: float, timestamp_s: float, schedule: str | None = None, cluster_id: str | None = None
    ) -> None:
        """Send one datapoint of each metric (see ``energy_metric_data``) in one PutMetricData call.

        Raises ConfigError for bad values before any call; MetricsError when the call fails.
        """
        metric_data = energy_metric_data(energy_wh, saved_wh, timestamp_s, schedule, cluster_id)
        with calling("PutMetricData"):
            self.client.put_metric_data(Namespace=self.namespace, MetricData=metric_data)
