"""The CloudWatch reader adapter: per-slot EC2 metrics of the cluster's instances (paper: dynamic
deferral, §VII-A, the seven metrics of eq. (12)).

Every call goes through one boto3 client made by ``cloudwatch_client``; retries (standard mode:
exponential backoff with jitter, a retry quota) are botocore's, never a loop of ours. A call that still
fails is raised as MetricsError naming the AWS operation and error code. The queries, the slot grid and
the missing-data rule are the pure functions of ``autoscaler.core.energy.metric_queries``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone

import boto3
from botocore.client import BaseClient
from botocore.exceptions import BotoCoreError, ClientError

from autoscaler.adapters.aws import aws_client
from autoscaler.core.energy.metric_queries import (
    DEFAULT_BOUNDS,
    MAX_QUERIES_PER_CALL,
    METRIC_NAMES,
    InstanceMetrics,
    MetricBounds,
    batched,
    check_status,
    instance_metrics,
    metric_data_queries,
    place_datapoints,
    slot_count,
)
from autoscaler.core.errors import MetricsError


def cloudwatch_client(
    region: str | None = None,
    endpoint_url: str | None = None,
    session: boto3.Session | None = None,
) -> BaseClient:
    """The CloudWatch client every CloudWatch call of the project goes through: ``aws_client`` (standard
    retries, failed attempts logged). Does not call AWS; ConfigError when no region is configured."""
    return aws_client("cloudwatch", "CloudWatch", region, endpoint_url, session)


@contextmanager
def calling(operation: str) -> Iterator[None]:
    """Raise botocore's errors from CloudWatch ``operation`` as MetricsError, keeping the cause."""
    try:
        yield
    except ClientError as error:
        details = error.response.get("Error", {})
        code = details.get("Code", "unknown")
        message = " ".join(str(details.get("Message", "")).split())[:200]
        raise MetricsError(f"CloudWatch {error.operation_name or operation} failed: {code}: {message}") from error
    except BotoCoreError as error:
        raise MetricsError(f"CloudWatch {operation} failed: {error}") from error


class CloudWatchMetricsReader:
    """Reads the EC2 metrics of given instances per slot with GetMetricData.

    ``client`` is a CloudWatch client, normally from ``cloudwatch_client``. Calls block until AWS
    answers (botocore's retries included).
    """

    def __init__(self, client: BaseClient, max_queries_per_call: int = MAX_QUERIES_PER_CALL) -> None:
        batched([], max_queries_per_call)  # validates the limit now, not at the first read
        self.client = client
        self.max_queries_per_call = max_queries_per_call

    def read(
        self,
        instance_ids: Sequence[str],
        start_s: int,
        end_s: int,
        slot_s: int,
        metric_names: Sequence[str] = METRIC_NAMES,
        max_hold_slots: int = 1,
        bounds: MetricBounds = DEFAULT_BOUNDS,
    ) -> InstanceMetrics:
        """The metrics of ``instance_ids`` in each slot of [start_s, end_s) (unix seconds).

        One GetMetricData call per batch of at most ``max_queries_per_call`` queries (instances x
        ``metric_names``), every page followed through NextToken. Datapoints out of ``bounds`` are
        treated as missing and listed in ``out_of_bounds`` (``bound_metrics``); missing datapoints are
        NaN and then go through ``hold_last_measured`` (``max_hold_slots``, default 1); see
        ``InstanceMetrics`` for the shapes and units. No instance ids: no call, an empty result.
        Raises ConfigError for a window or slot CloudWatch cannot use (``slot_count``), bad ids or
        names (``metric_data_queries``); MetricsError when a call fails, a query comes back
        InternalError or Forbidden, or an answer does not fit the slot grid (``place_datapoints``).
        """
        n_slots = slot_count(start_s, end_s, slot_s)
        queries = metric_data_queries(instance_ids, slot_s, metric_names)
        start = datetime.fromtimestamp(int(start_s), tz=timezone.utc)
        end = datetime.fromtimestamp(int(end_s), tz=timezone.utc)
        results: list[dict] = []
        for batch in batched(queries, self.max_queries_per_call):
            with calling("GetMetricData"):
                pages = self.client.get_paginator("get_metric_data").paginate(
                    MetricDataQueries=batch, StartTime=start, EndTime=end, ScanBy="TimestampAscending"
                )
                for page in pages:
                    results.extend(page.get("MetricDataResults", []))
        check_status(results, instance_ids)
        raw = place_datapoints(results, n_slots, len(instance_ids), int(start_s), int(slot_s))
        return instance_metrics(raw, instance_ids, int(start_s), int(slot_s), metric_names, max_hold_slots, bounds)

