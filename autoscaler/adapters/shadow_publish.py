"""Shadow mode's figures where operators already look: Prometheus /metrics and CloudWatch.

Both speak the words the daemon's own metrics use: a *schedule* is what ran (``actual``: the cluster
under its own scaling) or what would have (the policy's name), and *saved* is the actual less the
policy's, so a positive saving is the policy using less, as ``SavedWh`` is follow's less the daemon's.

Prometheus (:class:`ShadowMetrics`, on the daemon's registry): the last slot the counterfactual
played (``autoscaler_shadow_capacity_servers``, ``autoscaler_shadow_nodes_decided``,
``autoscaler_shadow_jobs_released_total``, ``autoscaler_shadow_slot_end_timestamp_seconds``,
``autoscaler_shadow_lag_seconds``) and the running totals from the shadow's start, by ``schedule``
(``autoscaler_shadow_node_hours``, ``autoscaler_shadow_energy_wh``, ``autoscaler_shadow_cost_usd``,
``autoscaler_shadow_co2_grams``) with their savings (``autoscaler_shadow_node_hours_saved``,
``autoscaler_shadow_energy_saved_wh``, ``autoscaler_shadow_cost_saved_usd``,
``autoscaler_shadow_co2_saved_grams``; a negative saving is the policy using more).

CloudWatch (:func:`shadow_metric_data`): per slot played, the slot's own amounts (CloudWatch sums
datapoints over a period), namespace ``DeferralAutoscaler``, dimensions ClusterId and Schedule:
``EnergyWh``, ``NodeHours``, ``CostDollars`` (and ``Co2Grams`` with a carbon signal) for Schedule
``actual`` and ``shadow:<policy>``, and for the latter ``SavedWh``, ``NodeHoursSaved``,
``CostSavedDollars`` (``Co2SavedGrams``).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from prometheus_client import CollectorRegistry, Counter, Gauge

from autoscaler.adapters.cloudwatch_publish import CLUSTER_DIMENSION, NAMESPACE, SCHEDULE_DIMENSION
from autoscaler.adapters.cloudwatch_reader import calling
from autoscaler.core.errors import ConfigError
from autoscaler.core.shadow_books import UseFigures

ACTUAL = "actual"
"""The schedule of the cluster as it ran, under its own scaling."""

FIGURES = (
    ("node_hours", "NodeHours", "NodeHoursSaved", "node_hours", "node_hours_saved", "node-hours billed", 1.0),
    ("energy_kwh", "EnergyWh", "SavedWh", "energy_wh", "energy_saved_wh", "Wh", 1000.0),
    ("cost_usd", "CostDollars", "CostSavedDollars", "cost_usd", "cost_saved_usd", "$", 1.0),
    ("co2_kg", "Co2Grams", "Co2SavedGrams", "co2_grams", "co2_saved_grams", "gCO2eq", 1000.0),
)
"""(UseFigures field, CloudWatch metric, its saving, Prometheus name after ``autoscaler_shadow_``, its
saving, unit, factor from the field's unit to the metric's)."""


def shadow_schedule(policy: str) -> str:
    """The Schedule dimension (and Prometheus label) of the policy's counterfactual: ``shadow:<policy>``."""
    return f"shadow:{policy}"


class ShadowMetrics:
    """The shadow's Prometheus metrics on ``registry`` (the daemon's :class:`~autoscaler.adapters.health.Telemetry`'s,
    so /metrics serves both). Calls return at once; none raises."""

    def __init__(self, registry: CollectorRegistry, policy: str) -> None:
        r = registry
        self.schedule = shadow_schedule(policy)
        self.capacity = Gauge("autoscaler_shadow_capacity_servers", "m_t the policy would have had in the last slot the shadow played", registry=r)
        self.nodes = Gauge("autoscaler_shadow_nodes_decided", "task nodes the policy would have asked for in the last slot the shadow played", registry=r)
        self.released = Counter("autoscaler_shadow_jobs_released", "the cluster's steps the policy would have released, in the slots played", registry=r)
        self.slot_end = Gauge("autoscaler_shadow_slot_end_timestamp_seconds", "the end of the last slot the shadow played (Unix seconds)", registry=r)
        self.lag = Gauge("autoscaler_shadow_lag_seconds", "how far the shadow's counterfactual is behind now: steps still running hold it", registry=r)
        self.totals = {}
        self.saved = {}
        for field, _, _, name, saved, unit, _ in FIGURES:
            self.totals[field] = Gauge(f"autoscaler_shadow_{name}", f"{unit} from the shadow's start, by schedule (actual, or the policy's)", ["schedule"], registry=r)
            self.saved[field] = Gauge(f"autoscaler_shadow_{saved}", f"{unit} the policy would have saved against the actual from the shadow's start (negative: used more)", registry=r)
            self.saved[field].set(math.nan)  # unknown (NaN) until a slot gives both sides, not "0 saved": kgCO2 without a signal stays so

    def slot_played(self, shadow_slot) -> None:
        """A slot the counterfactual played (:class:`autoscaler.app.shadow_run.ShadowSlot`)."""
        decision, figures = shadow_slot.decision, shadow_slot.figures
        if decision:
            self.capacity.set(decision.get("m_t") or 0.0)
            self.nodes.set(decision.get("nodes") or 0)
        self.released.inc(len(shadow_slot.released))
        self.slot_end.set(figures.until_s)
        for field, _, _, _, _, _, factor in FIGURES:
            actual, shadow = getattr(figures.actual, field), getattr(figures.shadow, field)
            if actual is None or shadow is None:
                continue
            self.totals[field].labels(schedule=ACTUAL).set(actual * factor)
            self.totals[field].labels(schedule=self.schedule).set(shadow * factor)
            self.saved[field].set((actual - shadow) * factor)

    def lagging(self, lag_s: float) -> None:
        self.lag.set(lag_s)


def shadow_metric_data(actual: UseFigures, shadow: UseFigures, timestamp_s: float, policy: str, cluster_id: str) -> list[dict]:
    """PutMetricData's MetricData for one slot's amounts (``actual`` and ``shadow``: the slot's use, not
    running totals) at ``timestamp_s`` (Unix s): see the module's docstring. A figure None on either
    side (kgCO2 without a signal) is left out. Raises ConfigError for a value that is NaN or infinite,
    or a cluster id or policy that is empty."""
    if not cluster_id or not policy:
        raise ConfigError(f"shadow metrics: cluster id and policy must be non-empty, got {cluster_id!r} and {policy!r}")
    if not math.isfinite(timestamp_s):
        raise ConfigError(f"shadow metrics: timestamp_s must be finite, got {timestamp_s!r}")
    timestamp = datetime.fromtimestamp(timestamp_s, tz=timezone.utc)
    schedule = shadow_schedule(policy)
    data = []

    def datum(metric: str, value: float, schedule_name: str) -> dict:
        if not math.isfinite(value):
            raise ConfigError(f"shadow metrics: {metric} for {schedule_name} must be a finite number, got {value!r}")
        dimensions = [{"Name": CLUSTER_DIMENSION, "Value": cluster_id}, {"Name": SCHEDULE_DIMENSION, "Value": schedule_name}]
        return {"MetricName": metric, "Timestamp": timestamp, "Value": float(value), "Unit": "None", "Dimensions": dimensions}

    for field, metric, saved, _, _, _, factor in FIGURES:
        ran, would = getattr(actual, field), getattr(shadow, field)
        if ran is None or would is None:
            continue
        data += [datum(metric, ran * factor, ACTUAL), datum(metric, would * factor, schedule), datum(saved, (ran - would) * factor, schedule)]
    return data


class ShadowPublisher:
    """Sends :func:`shadow_metric_data` with PutMetricData in ``namespace`` (CloudWatch takes up to
    1,000 datapoints a call; a slot has at most 12). Raises MetricsError when the call fails."""

    def __init__(self, client, cluster_id: str, policy: str, namespace: str = NAMESPACE) -> None:
        self.client, self.cluster_id, self.policy, self.namespace = client, cluster_id, policy, namespace

    def publish(self, actual: UseFigures, shadow: UseFigures, timestamp_s: float) -> None:
        data = shadow_metric_data(actual, shadow, timestamp_s, self.policy, self.cluster_id)
        with calling("PutMetricData"):
            self.client.put_metric_data(Namespace=self.namespace, MetricData=data)
