"""The CloudWatch reader and publisher against moto's CloudWatch over HTTP, with the real boto3 client.

What moto does that these tests rely on (moto 5.x): GetMetricData computes Average and Sum per period
over datapoints put with PutMetricData, buckets starting at StartTime, and returns a period only when
it has data. What it does not do: it never returns a NextToken (every answer is one page, whatever
MaxDatapoints says), it does not enforce the 500-query limit or the Id syntax, and no result is ever
PartialData, InternalError or Forbidden. So following NextToken (botocore's GetMetricData paginator) is
not exercised here, and the StatusCode check only in tests/unit/test_cloudwatch_queries.py; the
batching is, by counting the calls.
"""

from __future__ import annotations

import socket
import time
from datetime import datetime, timezone

import boto3
import numpy as np
import pytest

from autoscaler.adapters.cloudwatch_publish import ENERGY_METRIC, NAMESPACE, SAVED_METRIC, EnergyPublisher, energy_metric_data
from autoscaler.adapters.cloudwatch_reader import CloudWatchMetricsReader, calling, cloudwatch_client
from autoscaler.core.energy.metric_queries import METRIC_NAMES
from autoscaler.core.errors import ConfigError, MetricsError

from conftest import REGION

SLOT_S = 300
NAN = np.nan


@pytest.fixture
def cloudwatch(moto_endpoint: str):
    """A CloudWatch client from the project's factory, pointed at the moto server."""
    return cloudwatch_client(region=REGION, endpoint_url=moto_endpoint, session=boto3.Session())


@pytest.fixture
def start_s() -> int:
    """The start of a slot three hours ago, on the 300 s grid (CloudWatch keeps recent data at 1 min)."""
    return (int(time.time()) // SLOT_S) * SLOT_S - 3 * 3600


def utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def ec2_datum(instance_id: str, metric: str, timestamp_s: float, value: float) -> dict:
    return {
        "MetricName": metric,
        "Dimensions": [{"Name": "InstanceId", "Value": instance_id}],
        "Timestamp": utc(timestamp_s),
        "Value": value,
    }


def put_ec2(client, data: list[dict]) -> None:
    """Seed EC2 metrics as EC2 would publish them (PutMetricData takes up to 1000 per call)."""
    for first in range(0, len(data), 1000):
        client.put_metric_data(Namespace="AWS/EC2", MetricData=data[first : first + 1000])


def all_metrics(instance_id: str, timestamp_s: float, base: float) -> list[dict]:
    """One datapoint of each of the seven metrics, metric k (``METRIC_NAMES`` order) = base * 10**k."""
    return [ec2_datum(instance_id, name, timestamp_s, base * 10**k) for k, name in enumerate(METRIC_NAMES)]


def count_calls(client, operation: str) -> list[int]:
    """Record the number of queries of each ``operation`` call the client sends (botocore's event hooks)."""
    sizes: list[int] = []
    client.meta.events.register(
        f"provide-client-params.cloudwatch.{operation}",
        lambda params, **_: sizes.append(len(params.get("MetricDataQueries", []))),
    )
    return sizes


# --- the client factory -------------------------------------------------------------------


def test_cloudwatch_client_uses_standard_retries_and_given_endpoint(moto_endpoint):
    client = cloudwatch_client(region="eu-west-1", endpoint_url=moto_endpoint)

    assert client.meta.endpoint_url == moto_endpoint
    assert client.meta.region_name == "eu-west-1"
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 6}


def test_cloudwatch_client_without_region_raises_config_error(moto_server, monkeypatch, tmp_path):
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))

    with pytest.raises(ConfigError, match="CloudWatch client: no AWS region"):
        cloudwatch_client(session=boto3.Session())


# --- reading EC2 metrics ------------------------------------------------------------------


def test_read_averages_cpu_sums_counters_and_marks_gaps(cloudwatch, start_s):
    # Four slots. i-a: every metric in slots 0, 1 and 3; nothing in slot 2 (a lost datapoint).
    # Slot 0 of i-a has two CPU samples (40 % and 60 %) and two NetworkIn samples (1000 and 500 bytes):
    # the slot's Average is 50 % and its Sum 1500 bytes. i-b: slot 0 only; then nothing (stopped).
    data = []
    for slot in (0, 1, 3):
        data += all_metrics("i-a", start_s + slot * SLOT_S, base=float(slot + 1))
    replaced = ("CPUUtilization", "NetworkIn")
    data = [d for d in data if not (d["MetricName"] in replaced and d["Timestamp"] == utc(start_s))]
    data += [
        ec2_datum("i-a", "CPUUtilization", start_s, 40.0),
        ec2_datum("i-a", "CPUUtilization", start_s + 60, 60.0),
        ec2_datum("i-a", "NetworkIn", start_s, 1000.0),
        ec2_datum("i-a", "NetworkIn", start_s + 120, 500.0),
    ]
    data += all_metrics("i-b", start_s, base=7.0)
    put_ec2(cloudwatch, data)

    reader = CloudWatchMetricsReader(cloudwatch)
    metrics = reader.read(["i-a", "i-b"], start_s, start_s + 4 * SLOT_S, SLOT_S)

    cpu = METRIC_NAMES.index("CPUUtilization")
    assert metrics.values.shape == (4, 2, 7)
    # i-a: slot 2 holds slot 1's values (one slot of hold); i-b: slot 1 held, slots 2 and 3 unmeasured.
    np.testing.assert_array_equal(metrics.values[:, 0, cpu], [50.0, 2.0, 2.0, 4.0])
    assert metrics.values[0, 0, METRIC_NAMES.index("NetworkIn")] == 1500.0
    disk_write = METRIC_NAMES.index("DiskWriteBytes")
    np.testing.assert_array_equal(metrics.values[:, 0, disk_write], [100.0, 200.0, 200.0, 400.0])
    np.testing.assert_array_equal(metrics.values[:, 1, cpu], [7.0, 7.0, NAN, NAN])
    np.testing.assert_array_equal(metrics.measured, [[True, True], [True, True], [True, False], [True, False]])
    assert (metrics.held_count, metrics.unmeasured_count) == (2, 2)
    assert np.isnan(metrics.values[2:, 1, :]).all()  # never zero

    raw = reader.read(["i-a", "i-b"], start_s, start_s + 4 * SLOT_S, SLOT_S, max_hold_slots=0)
    np.testing.assert_array_equal(raw.measured, [[True, True], [True, False], [False, False], [True, False]])
    assert (raw.held_count, raw.unmeasured_count) == (0, 4)


def test_read_only_the_metrics_asked_for(cloudwatch, start_s):
    put_ec2(cloudwatch, [ec2_datum("i-a", "CPUUtilization", start_s, 25.0)])
    sizes = count_calls(cloudwatch, "GetMetricData")

    metrics = CloudWatchMetricsReader(cloudwatch).read(
        ["i-a"], start_s, start_s + SLOT_S, SLOT_S, metric_names=["CPUUtilization"]
    )

    assert sizes == [1]
    assert metrics.measured.tolist() == [[True]]
    assert metrics.cpu_utilization_percent.tolist() == [[25.0]]


def test_504_queries_go_in_two_calls_and_every_answer_finds_its_instance(cloudwatch, start_s):
    # 72 instances x 7 metrics = 504 queries: one call of 500 and one of 4. Each instance's values
    # are distinct, so a result mapped to the wrong instance or metric would show.
    instance_ids = [f"i-{n:04d}" for n in range(72)]
    put_ec2(cloudwatch, [d for n, i in enumerate(instance_ids) for d in all_metrics(i, start_s, base=float(n + 1))])
    sizes = count_calls(cloudwatch, "GetMetricData")

    metrics = CloudWatchMetricsReader(cloudwatch).read(instance_ids, start_s, start_s + SLOT_S, SLOT_S)

    assert sizes == [500, 4]
    expected = np.array([[(n + 1) * 10.0**k for k in range(7)] for n in range(72)])
    np.testing.assert_array_equal(metrics.values[0], expected)
    assert metrics.measured.all()


def test_no_instances_make_no_call(cloudwatch, start_s):
    sizes = count_calls(cloudwatch, "GetMetricData")
    metrics = CloudWatchMetricsReader(cloudwatch).read([], start_s, start_s + 2 * SLOT_S, SLOT_S)
    assert sizes == []
    assert metrics.values.shape == (2, 0, 7)


def test_a_window_off_the_grid_is_refused_before_calling(cloudwatch, start_s):
    sizes = count_calls(cloudwatch, "GetMetricData")
    with pytest.raises(ConfigError, match="not a whole number of 300 s slots"):
        CloudWatchMetricsReader(cloudwatch).read(["i-a"], start_s, start_s + 420, SLOT_S)
    assert sizes == []


def test_an_aws_error_is_raised_naming_the_operation_and_code(cloudwatch, start_s):
    # CloudWatch refuses an EndTime before StartTime; the reader never sends one, so call directly.
    with pytest.raises(MetricsError, match="CloudWatch GetMetricData failed: ValidationError: The parameter EndTime"):
        with calling("GetMetricData"):
            cloudwatch.get_metric_data(MetricDataQueries=[], StartTime=utc(start_s + 600), EndTime=utc(start_s))


def test_unreachable_endpoint_raises_metrics_error(moto_server, start_s):
    with socket.socket() as probe:  # a port that was free a moment ago: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = cloudwatch_client(region=REGION, endpoint_url=f"http://127.0.0.1:{port}")

    with pytest.raises(MetricsError, match="CloudWatch GetMetricData failed"):
        CloudWatchMetricsReader(client).read(["i-a"], start_s, start_s + SLOT_S, SLOT_S)
    with pytest.raises(MetricsError, match="CloudWatch PutMetricData failed"):
        EnergyPublisher(client).publish(1.0, 0.0, start_s)


# --- publishing the energy account --------------------------------------------------------


def test_published_energy_reads_back_per_schedule(cloudwatch, start_s):
    publisher = EnergyPublisher(cloudwatch)
    publisher.publish(energy_wh=12.5, saved_wh=-3.25, timestamp_s=start_s, schedule="gcp-u")
    publisher.publish(energy_wh=7.5, saved_wh=2.0, timestamp_s=start_s + SLOT_S, schedule="gcp-u")
    publisher.publish(energy_wh=99.0, saved_wh=0.0, timestamp_s=start_s, schedule="follow")

    def total(metric: str, schedule: str) -> float:
        answer = cloudwatch.get_metric_statistics(
            Namespace=NAMESPACE,
            MetricName=metric,
            Dimensions=[{"Name": "Schedule", "Value": schedule}],
            StartTime=utc(start_s),
            EndTime=utc(start_s + 2 * SLOT_S),
            Period=2 * SLOT_S,
            Statistics=["Sum"],
        )
        return sum(point["Sum"] for point in answer["Datapoints"])

    assert NAMESPACE == "DeferralAutoscaler"
    assert total(ENERGY_METRIC, "gcp-u") == 20.0
    assert total(SAVED_METRIC, "gcp-u") == -1.25  # a negative saving is published as is
    assert total(ENERGY_METRIC, "follow") == 99.0

    per_slot = cloudwatch.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "energy",
                "MetricStat": {
                    "Metric": {
                        "Namespace": NAMESPACE,
                        "MetricName": ENERGY_METRIC,
                        "Dimensions": [{"Name": "Schedule", "Value": "gcp-u"}],
                    },
                    "Period": SLOT_S,
                    "Stat": "Sum",
                },
            }
        ],
        StartTime=utc(start_s),
        EndTime=utc(start_s + 2 * SLOT_S),
        ScanBy="TimestampAscending",
    )["MetricDataResults"][0]
    assert per_slot["Values"] == [12.5, 7.5]
    assert [t.timestamp() for t in per_slot["Timestamps"]] == [start_s, start_s + SLOT_S]


def test_published_energy_without_a_schedule_has_no_dimension(cloudwatch, start_s):
    EnergyPublisher(cloudwatch).publish(energy_wh=4.0, saved_wh=1.0, timestamp_s=start_s)

    listed = cloudwatch.list_metrics(Namespace=NAMESPACE)["Metrics"]
    assert sorted((m["MetricName"], m.get("Dimensions", [])) for m in listed) == [
        (ENERGY_METRIC, []),
        (SAVED_METRIC, []),
    ]


@pytest.mark.parametrize(
    ("energy_wh", "saved_wh", "message"),
    [
        (float("nan"), 0.0, "energy_wh must be a finite number"),
        (-1.0, 0.0, "energy_wh must be >= 0"),
        (1.0, float("inf"), "saved_wh must be a finite number"),
        (1.0, float("nan"), "saved_wh must be a finite number"),
    ],
)
def test_bad_energy_is_refused_before_any_call(cloudwatch, start_s, energy_wh, saved_wh, message):
    with pytest.raises(ConfigError, match=message):
        EnergyPublisher(cloudwatch).publish(energy_wh, saved_wh, start_s)
    assert cloudwatch.list_metrics(Namespace=NAMESPACE)["Metrics"] == []


def test_energy_metric_data_shape():
    data = energy_metric_data(10.0, -2.0, 1_700_000_100, schedule="vfw")
    assert [(d["MetricName"], d["Value"], d["Unit"]) for d in data] == [
        ("EnergyWh", 10.0, "None"),
        ("SavedWh", -2.0, "None"),
    ]
    assert data[0]["Dimensions"] == [{"Name": "Schedule", "Value": "vfw"}]
    assert data[0]["Timestamp"] == datetime(2023, 11, 14, 22, 15, tzinfo=timezone.utc)
    with pytest.raises(ConfigError, match="schedule must be a non-empty string"):
        energy_metric_data(1.0, 0.0, 1_700_000_100, schedule="")


def test_publisher_refuses_an_aws_namespace(cloudwatch):
    with pytest.raises(ConfigError, match="outside AWS/"):
        EnergyPublisher(cloudwatch, namespace="AWS/EC2")
