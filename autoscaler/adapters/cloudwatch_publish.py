"""Publishing the energy account as CloudWatch custom metrics, so dashboards and alarms can follow it.

Two metrics in namespace ``NAMESPACE``: ``EnergyWh``, the energy the cluster used (paper: dynamic
deferral, eq. (14)), and ``SavedWh``, the energy saved against a reference schedule (follow the
workload, as in the paper's Table IV). Both are watt-hours; CloudWatch has no Wh unit, so the Unit is
"None" and the unit is in the name. One datapoint per call and timestamp: publish per slot and
CloudWatch's Sum over any period is the energy over that period.

``SavedWh`` may be negative: a policy can use more energy than the reference (a deferral that keeps
servers on longer, a switching storm), and hiding that would make the saving look better than it is;
it is published as is. ``EnergyWh`` must be >= 0. NaN and infinity are refused for both.

With a carbon signal, two more in the same call: ``Co2Grams`` (gCO2eq the cluster's energy emitted)
and ``Co2SavedGrams`` (against the same reference); with a price signal, ``CostDollars`` and
``CostSavedDollars``. Their sign rules are EnergyWh's and SavedWh's.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from numbers import Real

from botocore.client import BaseClient

from autoscaler.adapters.cloudwatch_reader import calling
from autoscaler.core.errors import ConfigError

NAMESPACE = "DeferralAutoscaler"
ENERGY_METRIC = "EnergyWh"
SAVED_METRIC = "SavedWh"
CO2_METRICS = ("Co2Grams", "Co2SavedGrams")
COST_METRICS = ("CostDollars", "CostSavedDollars")
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
    cost: tuple[str, float, float] | None = None,
) -> list[dict]:
    """The PutMetricData MetricData for one datapoint of EnergyWh and SavedWh at ``timestamp_s``.

    ``energy_wh``: finite and >= 0. ``saved_wh``: finite, any sign (see the module docstring).
    ``timestamp_s``: unix seconds. ``cluster_id`` and ``schedule``: when given, both metrics carry the
    dimensions ClusterId=<cluster_id> and Schedule=<schedule>. ``cost``: ("co2", grams, saved grams)
    adds Co2Grams and Co2SavedGrams, ("price", dollars, saved dollars) CostDollars and CostSavedDollars.
    Raises ConfigError for a NaN, infinite or negative energy or cost, a NaN or infinite saving or
    timestamp, an unknown cost kind, or an empty or over-long dimension value.
    """
    checked = [("energy_wh", energy_wh), ("saved_wh", saved_wh), ("timestamp_s", timestamp_s)]
    if cost is not None:
        if cost[0] not in ("co2", "price"):
            raise ConfigError(f"cost kind must be 'co2' or 'price', got {cost[0]!r}")
        checked += [("cost", cost[1]), ("cost saved", cost[2])]
    for name, value in checked:
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
            raise ConfigError(f"{name} must be a finite number, got {value!r}")
    if energy_wh < 0:
        raise ConfigError(f"energy_wh must be >= 0, got {energy_wh!r}")
    if cost is not None and cost[1] < 0:
        raise ConfigError(f"cost must be >= 0, got {cost[1]!r}")
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
    values = [(ENERGY_METRIC, energy_wh), (SAVED_METRIC, saved_wh)]
    if cost is not None:
        names = CO2_METRICS if cost[0] == "co2" else COST_METRICS
        values += [(names[0], cost[1]), (names[1], cost[2])]
    for metric, value in values:
        datum = {"MetricName": metric, "Timestamp": timestamp, "Value": float(value), "Unit": "None"}
        if dimensions:
            datum["Dimensions"] = dimensions
        metric_data.append(datum)
    return metric_data


class EnergyPublisher:
    """Publishes EnergyWh and SavedWh with PutMetricData in ``namespace`` (default ``NAMESPACE``).

    ``client`` is a CloudWatch client, normally from ``autoscaler.adapters.cloudwatch_reader.cloudwatch_client``. Calls
    block until AWS answers (botocore's retries included).
    """

    def __init__(self, client: BaseClient, namespace: str = NAMESPACE) -> None:
        if not isinstance(namespace, str) or not namespace or namespace.startswith("AWS/"):
            raise ConfigError(f"namespace must be a non-empty name outside AWS/, got {namespace!r}")
        self.client = client
        self.namespace = namespace

    def publish(
        self,
        energy_wh: float,
        saved_wh: float,
        timestamp_s: float,
        schedule: str | None = None,
        cluster_id: str | None = None,
        cost: tuple[str, float, float] | None = None,
    ) -> None:
        """Send one datapoint of each metric (see ``energy_metric_data``, ``cost`` included) in one
        PutMetricData call. Raises ConfigError for bad values before any call; MetricsError when the call fails.
        """
        metric_data = energy_metric_data(energy_wh, saved_wh, timestamp_s, schedule, cluster_id, cost)
        with calling("PutMetricData"):
            self.client.put_metric_data(Namespace=self.namespace, MetricData=metric_data)
