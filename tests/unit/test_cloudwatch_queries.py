"""GetMetricData queries, the slot grid and the missing-data rule (pure; no AWS)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import numpy as np
import pytest

from autoscaler.core.energy.metric_queries import (
    EC2_NAMESPACE,
    MAX_QUERIES_PER_CALL,
    METRIC_NAMES,
    MetricBounds,
    batched,
    bound_metrics,
    check_status,
    hold_last_measured,
    instance_metrics,
    metric_data_queries,
    period_s,
    place_datapoints,
    query_cell,
    query_id,
    slot_count,
)
from autoscaler.core.errors import ConfigError, MetricsError

NAN = np.nan
START_S = 1_700_000_100  # a whole minute (and a whole 300 s slot) in unix seconds
CLOUDWATCH_ID = re.compile(r"^[a-z][a-zA-Z0-9_]*$")


def at(offset_s: int) -> datetime:
    return datetime.fromtimestamp(START_S + offset_s, tz=timezone.utc)


def series(*values: float) -> np.ndarray:
    """One instance, one metric: shape (n_slots, 1, 1)."""
    return np.array(values, dtype=float).reshape(-1, 1, 1)


# --- queries --------------------------------------------------------------------------------


def test_seven_metrics_per_instance_with_the_right_statistic():
    queries = metric_data_queries(["i-0aaa", "i-0bbb"], slot_s=300)

    assert len(queries) == 2 * 7
    first = queries[0]["MetricStat"]
    assert first["Metric"] == {
        "Namespace": EC2_NAMESPACE,
        "MetricName": "CPUUtilization",
        "Dimensions": [{"Name": "InstanceId", "Value": "i-0aaa"}],
    }
    assert first["Period"] == 300
    statistics = {q["MetricStat"]["Metric"]["MetricName"]: q["MetricStat"]["Stat"] for q in queries}
    assert statistics == {
        "CPUUtilization": "Average",
        "DiskReadBytes": "Sum",
        "DiskWriteBytes": "Sum",
        "DiskReadOps": "Sum",
        "DiskWriteOps": "Sum",
        "NetworkIn": "Sum",
        "NetworkOut": "Sum",
    }
    assert all("Expression" not in q for q in queries)  # no metric math


def test_query_ids_are_unique_valid_and_map_back_to_instance_and_metric():
    instance_ids = [f"i-{n:017x}" for n in range(30)]
    queries = metric_data_queries(instance_ids, slot_s=60)
    ids = [q["Id"] for q in queries]

    assert len(set(ids)) == len(ids)
    assert all(CLOUDWATCH_ID.match(i) for i in ids)
    for query in queries:
        instance_index, metric_index = query_cell(query["Id"])
        metric = query["MetricStat"]["Metric"]
        assert metric["Dimensions"][0]["Value"] == instance_ids[instance_index]
        assert metric["MetricName"] == METRIC_NAMES[metric_index]
    assert query_cell(query_id(12, 3)) == (12, 3)


def test_a_subset_of_metrics_asks_only_for_those():
    queries = metric_data_queries(["i-1"], 300, metric_names=["NetworkOut", "CPUUtilization"])
    assert [q["MetricStat"]["Metric"]["MetricName"] for q in queries] == ["CPUUtilization", "NetworkOut"]


@pytest.mark.parametrize(
    ("instance_ids", "message"),
    [
        (["i-1", "i-1"], "instance id 'i-1' is listed twice"),
        (["i-1", ""], r"instance_ids\[1\] must be a non-empty string"),
        ("i-1", "a sequence of ids"),
    ],
)
def test_bad_instance_ids_are_refused(instance_ids, message):
    with pytest.raises(ConfigError, match=message):
        metric_data_queries(instance_ids, 300)


def test_unknown_metric_is_refused():
    with pytest.raises(ConfigError, match="unknown EC2 metric 'MemoryUtilization'"):
        metric_data_queries(["i-1"], 300, metric_names=["MemoryUtilization"])


@pytest.mark.parametrize("slot_s", [0, -60, 90, 30, 300.5, float("nan"), True, "300"])
def test_period_must_be_a_positive_multiple_of_60(slot_s):
    with pytest.raises(ConfigError, match="slot_s"):
        period_s(slot_s)


def test_period_of_a_whole_float_slot_is_an_int():
    assert period_s(300.0) == 300 and isinstance(period_s(300.0), int)


def test_504_queries_make_two_batches():
    # 72 instances x 7 metrics = 504 queries; CloudWatch takes at most 500 per call.
    queries = metric_data_queries([f"i-{n}" for n in range(72)], 300)
    batches = batched(queries)

    assert [len(batch) for batch in batches] == [500, 4]
    assert [q["Id"] for batch in batches for q in batch] == [q["Id"] for q in queries]
    assert MAX_QUERIES_PER_CALL == 500


@pytest.mark.parametrize("max_per_call", [0, 501, 2.5, True])
def test_batch_size_must_be_1_to_500(max_per_call):
    with pytest.raises(ConfigError, match="max_per_call"):
        batched([], max_per_call)


# --- the slot grid --------------------------------------------------------------------------


def test_slot_count():
    assert slot_count(START_S, START_S + 3600, 300) == 12


@pytest.mark.parametrize(
    ("start_s", "end_s", "message"),
    [
        (START_S + 30, START_S + 630, "start_s must be a whole minute"),
        (START_S, START_S, "must be after start_s"),
        (START_S, START_S + 420, "not a whole number of 300 s slots"),
        (float("nan"), START_S, "start_s must be unix seconds"),
    ],
)
def test_slot_count_refuses_windows_off_the_grid(start_s, end_s, message):
    with pytest.raises(ConfigError, match=message):
        slot_count(start_s, end_s, 300)


def test_datapoints_land_in_their_slot_and_gaps_stay_nan():
    results = [
        {"Id": query_id(0, 0), "Timestamps": [at(600), at(0)], "Values": [30.0, 10.0], "StatusCode": "Complete"},
        {"Id": query_id(1, 5), "Timestamps": [at(300)], "Values": [0.0], "StatusCode": "Complete"},
    ]
    values = place_datapoints(results, n_slots=3, n_instances=2, start_s=START_S, slot_s=300)

    assert values.shape == (3, 2, 7)
    np.testing.assert_array_equal(values[:, 0, 0], [10.0, NAN, 30.0])
    assert values[1, 1, 5] == 0.0  # a measured zero stays zero
    assert np.isnan(values[0, 1, 5]) and np.isnan(values[2, 1, 5])  # a gap is never zero
    assert np.isnan(values[:, :, 1:5]).all()


def test_a_second_page_of_the_same_query_fills_later_slots():
    results = [
        {"Id": query_id(0, 0), "Timestamps": [at(0)], "Values": [1.0]},
        {"Id": query_id(0, 0), "Timestamps": [at(300)], "Values": [2.0]},
    ]
    values = place_datapoints(results, 2, 1, START_S, 300)
    np.testing.assert_array_equal(values[:, 0, 0], [1.0, 2.0])


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ({"Id": "cpu", "Timestamps": [], "Values": []}, "query Id 'cpu', which was not asked for"),
        ({"Id": query_id(5, 0), "Timestamps": [], "Values": []}, "which was not asked for"),
        ({"Id": query_id(0, 0), "Timestamps": [at(150)], "Values": [1.0]}, "is not the start of one of the 2 slots"),
        ({"Id": query_id(0, 0), "Timestamps": [at(600)], "Values": [1.0]}, "is not the start of one of the 2 slots"),
        ({"Id": query_id(0, 0), "Timestamps": [at(0)], "Values": [1.0, 2.0]}, "2 values for 1 timestamps"),
        ({"Id": query_id(0, 0), "Timestamps": [at(0), at(0)], "Values": [1.0, 2.0]}, "two datapoints for slot 0"),
        ({"Id": query_id(0, 0), "Timestamps": [datetime(2023, 1, 1)], "Values": [1.0]}, "not a timezone-aware"),
    ],
)
def test_answers_that_do_not_fit_the_request_raise(result, message):
    with pytest.raises(MetricsError, match=message):
        place_datapoints([result], n_slots=2, n_instances=1, start_s=START_S, slot_s=300)


@pytest.mark.parametrize("status", ["InternalError", "Forbidden"])
def test_a_failed_query_raises_naming_metric_and_instance(status):
    results = [
        {"Id": query_id(0, 0), "StatusCode": "Complete"},
        {"Id": query_id(1, 6), "StatusCode": status},
    ]
    with pytest.raises(MetricsError, match=f"NetworkOut of i-b ended {status}"):
        check_status(results, ["i-a", "i-b"])


def test_complete_and_partial_results_pass():
    results = [{"Id": query_id(0, 0), "StatusCode": "Complete"}, {"Id": query_id(0, 1), "StatusCode": "PartialData"}]
    check_status(results, ["i-a"])  # no error


# --- the missing-data rule ------------------------------------------------------------------


def test_one_gap_is_held_and_a_longer_one_is_unmeasured():
    # Slot 1 holds slot 0's value; slots 2 and 3 are too far from a measurement (hold 1).
    held = hold_last_measured(series(1.0, NAN, NAN, NAN, 5.0), max_hold_slots=1)

    np.testing.assert_array_equal(held.values[:, 0, 0], [1.0, 1.0, NAN, NAN, 5.0])
    np.testing.assert_array_equal(held.measured[:, 0], [True, True, False, False, True])
    assert (held.held_count, held.unmeasured_count) == (1, 2)


def test_nothing_to_hold_before_the_first_datapoint():
    held = hold_last_measured(series(NAN, 2.0, NAN), max_hold_slots=1)
    np.testing.assert_array_equal(held.values[:, 0, 0], [NAN, 2.0, 2.0])
    assert (held.held_count, held.unmeasured_count) == (1, 1)


def test_hold_zero_disables_holding_and_two_holds_two_slots():
    raw = series(3.0, NAN, NAN, NAN)
    none = hold_last_measured(raw, max_hold_slots=0)
    np.testing.assert_array_equal(none.values[:, 0, 0], [3.0, NAN, NAN, NAN])
    assert (none.held_count, none.unmeasured_count) == (0, 3)
    two = hold_last_measured(raw, max_hold_slots=2)
    np.testing.assert_array_equal(two.values[:, 0, 0], [3.0, 3.0, 3.0, NAN])
    assert (two.held_count, two.unmeasured_count) == (2, 1)


def test_a_pair_is_measured_only_when_every_metric_is_and_counts_are_per_pair():
    # One instance, two metrics, three slots.
    # slot 0: both measured. slot 1: metric 1 missing -> held. slot 2: metric 1 missing again -> not
    # held (two slots from its last measurement) -> the pair is unmeasured though metric 0 is there.
    raw = np.array([[[10.0, 100.0]], [[11.0, NAN]], [[12.0, NAN]]])
    held = hold_last_measured(raw, max_hold_slots=1)

    np.testing.assert_array_equal(held.measured[:, 0], [True, True, False])
    np.testing.assert_array_equal(held.values[:, 0, 1], [100.0, 100.0, NAN])
    assert held.values[2, 0, 0] == 12.0  # what was measured stays
    assert (held.held_count, held.unmeasured_count) == (1, 1)


def test_hold_is_per_instance():
    # Instance 0 has a gap at slot 1, instance 1 has none.
    raw = np.array([[[1.0], [5.0]], [[NAN], [6.0]], [[3.0], [7.0]]])
    held = hold_last_measured(raw)
    np.testing.assert_array_equal(held.values[:, :, 0], [[1.0, 5.0], [1.0, 6.0], [3.0, 7.0]])
    assert (held.held_count, held.unmeasured_count) == (1, 0)


@pytest.mark.parametrize("max_hold_slots", [-1, 1.5, True])
def test_hold_refuses_bad_max_hold_slots(max_hold_slots):
    with pytest.raises(ConfigError, match="max_hold_slots"):
        hold_last_measured(series(1.0), max_hold_slots)


def test_hold_refuses_infinity_and_wrong_shapes():
    with pytest.raises(ConfigError, match="infinite value at slot 1, instance 0, metric 0"):
        hold_last_measured(series(1.0, np.inf))
    with pytest.raises(ConfigError, match="shape"):
        hold_last_measured(np.zeros((3, 2)))


def test_instance_metrics_decide_measured_only_on_the_metrics_read():
    # Two instances, two slots; only CPUUtilization and NetworkIn/Out are read.
    raw = np.full((2, 2, 7), NAN)
    raw[:, :, METRIC_NAMES.index("CPUUtilization")] = [[50.0, 20.0], [60.0, NAN]]
    raw[:, :, METRIC_NAMES.index("NetworkIn")] = [[100.0, 1.0], [200.0, 2.0]]
    raw[:, :, METRIC_NAMES.index("NetworkOut")] = [[10.0, 1.0], [20.0, 2.0]]
    raw[:, :, METRIC_NAMES.index("DiskReadBytes")] = 7.0  # returned but not asked for: dropped
    metrics = instance_metrics(
        raw, ["i-a", "i-b"], START_S, 300, metric_names=["CPUUtilization", "NetworkIn", "NetworkOut"]
    )

    np.testing.assert_array_equal(metrics.measured, [[True, True], [True, True]])  # i-b's CPU held in slot 1
    assert (metrics.held_count, metrics.unmeasured_count) == (1, 0)
    np.testing.assert_array_equal(metrics.cpu_utilization_percent, [[50.0, 20.0], [60.0, 20.0]])
    np.testing.assert_array_equal(metrics.network_bytes, [[110.0, 2.0], [220.0, 4.0]])
    assert np.isnan(metrics.disk_bytes).all()
    assert metrics.metric_names == ("CPUUtilization", "NetworkIn", "NetworkOut")
    assert metrics.n_slots == 2 and metrics.instance_ids == ("i-a", "i-b")
    with pytest.raises(ValueError):
        metrics.values[0, 0, 0] = 0.0  # read-only: a value type


def test_a_nan_datapoint_still_counts_as_one_for_the_two_datapoints_check():
    result = {"Id": query_id(0, 0), "Timestamps": [at(0), at(0)], "Values": [NAN, 5.0]}
    with pytest.raises(MetricsError, match="two datapoints for slot 0"):
        place_datapoints([result], n_slots=1, n_instances=1, start_s=START_S, slot_s=300)


# --- bounds ---------------------------------------------------------------------------------

CPU, DISK_READ, NET_IN = (METRIC_NAMES.index(n) for n in ("CPUUtilization", "DiskReadBytes", "NetworkIn"))
START_UTC = "2023-11-14 22:15 UTC"  # START_S: 1_700_000_000 is 22:13:20 UTC, plus 100 s


def plausible(n_slots: int, n_instances: int) -> np.ndarray:
    """Every metric of every cell in bounds: CPU 50 %, each counter 1000 bytes or operations."""
    raw = np.full((n_slots, n_instances, len(METRIC_NAMES)), 1000.0)
    raw[:, :, CPU] = 50.0
    return raw


def test_upper_bounds_are_rate_times_the_longer_of_slot_and_datapoint_period():
    bounds = MetricBounds()
    # CPU 100 % plus 1 % of tolerance; disk and network 50 GB/s, disk operations 10 million a second.
    np.testing.assert_allclose(bounds.upper(300), [101.0, 1.5e13, 1.5e13, 3e9, 3e9, 1.5e13, 1.5e13])
    # A 60 s slot can receive a whole 5-minute basic-monitoring Sum: the 300 s bound still applies.
    np.testing.assert_allclose(bounds.upper(60), bounds.upper(300))
    np.testing.assert_allclose(bounds.upper(3600)[1:], bounds.upper(300)[1:] * 12)
    custom = MetricBounds(cpu_tolerance_percent=0.0, network_bytes_per_s=1e6, datapoint_period_s=60)
    assert custom.upper(120)[CPU] == 100.0 and custom.upper(120)[NET_IN] == 1.2e8


@pytest.mark.parametrize(
    ("field", "value"),
    [("cpu_tolerance_percent", -0.1), ("disk_bytes_per_s", 0.0), ("network_bytes_per_s", NAN), ("disk_ops_per_s", True), ("datapoint_period_s", np.inf)],
)
def test_bad_bounds_are_config_errors_naming_the_field(field, value):
    with pytest.raises(ConfigError, match=f"metric bounds: {field} must be a finite number"):
        MetricBounds(**{field: value})


def test_an_absurd_cpu_is_missing_and_named_by_instance_metric_time_and_value():
    raw = plausible(3, 2)
    raw[1, 1, CPU] = 1e9
    bounded = bound_metrics(raw, ["i-0aaa", "i-0bbb"], START_S, 300)

    assert np.isnan(bounded.values[1, 1, CPU])
    assert bounded.rejected.sum() == 1 and bounded.rejected[1, 1, CPU]
    (record,) = bounded.out_of_bounds
    assert (record.instance_id, record.metric, record.time_s, record.value, record.count) == (
        "i-0bbb", "CPUUtilization", START_S + 300, 1e9, 1
    )
    assert record.message == (
        "CPUUtilization of i-0bbb at 2023-11-14 22:20 UTC is 1e+09, expected 0 to 100 % (up to 101 % is read as 100): "
        "treated as missing"
    )
    assert "slot" not in record.message.replace("s slot", "") and "index" not in record.message
    # Everything else is as given.
    untouched = ~bounded.rejected
    np.testing.assert_array_equal(bounded.values[untouched], raw[untouched])


def test_a_cpu_a_little_above_100_is_clipped_not_dropped():
    raw = plausible(4, 1)
    raw[:, 0, CPU] = [100.4, 101.0, 101.5, 100.0]  # 101.0 is the tolerance's edge; 101.5 is past it
    bounded = bound_metrics(raw, ["i-a"], START_S, 300)

    np.testing.assert_array_equal(bounded.values[:, 0, CPU], [100.0, 100.0, NAN, 100.0])
    assert bounded.clipped_count == 2
    assert [(r.metric, r.value, r.time_s) for r in bounded.out_of_bounds] == [("CPUUtilization", 101.5, START_S + 600)]


@pytest.mark.parametrize(
    ("metric", "value", "shown"),
    [
        ("NetworkIn", -5e6, "NetworkIn of i-a at 2023-11-14 22:15 UTC is -5e+06, expected 0 to 1.5e+13 bytes in a 300 s slot"),
        ("DiskReadBytes", 1e30, "DiskReadBytes of i-a at 2023-11-14 22:15 UTC is 1e+30, expected 0 to 1.5e+13 bytes in a 300 s slot"),
        ("DiskWriteOps", 3e9 + 1, "DiskWriteOps of i-a at 2023-11-14 22:15 UTC is 3e+09, expected 0 to 3e+09 operations"),
        ("CPUUtilization", -0.5, "CPUUtilization of i-a at 2023-11-14 22:15 UTC is -0.5, expected 0 to 100 %"),
        ("NetworkOut", np.inf, "NetworkOut of i-a at 2023-11-14 22:15 UTC is inf, expected 0 to"),
        ("CPUUtilization", -np.inf, "CPUUtilization of i-a at 2023-11-14 22:15 UTC is -inf"),
    ],
)
def test_negative_too_large_and_infinite_values_are_out_of_bounds(metric, value, shown):
    raw = plausible(2, 1)
    raw[0, 0, METRIC_NAMES.index(metric)] = value
    bounded = bound_metrics(raw, ["i-a"], START_S, 300)

    (record,) = bounded.out_of_bounds
    assert record.message.startswith(shown)
    assert np.isnan(bounded.values[0, 0, METRIC_NAMES.index(metric)])
    assert np.isfinite(bounded.values[1]).all()


def test_the_upper_bound_itself_is_accepted():
    raw = plausible(1, 1)
    raw[0, 0, DISK_READ] = 1.5e13
    raw[0, 0, NET_IN] = np.nextafter(1.5e13, np.inf)
    bounded = bound_metrics(raw, ["i-a"], START_S, 300)
    assert bounded.values[0, 0, DISK_READ] == 1.5e13
    assert [r.metric for r in bounded.out_of_bounds] == ["NetworkIn"]


def test_nan_is_missing_not_out_of_bounds():
    raw = plausible(2, 1)
    raw[0, 0, CPU] = NAN
    bounded = bound_metrics(raw, ["i-a"], START_S, 300)
    assert bounded.out_of_bounds == () and not bounded.rejected.any()
    assert np.isnan(bounded.values[0, 0, CPU])


def test_one_record_per_instance_and_metric_with_the_first_time_and_the_count():
    raw = plausible(5, 2)
    raw[[1, 3, 4], 0, NET_IN] = [-1.0, -2.0, -3.0]
    raw[2, 0, CPU] = 1e9
    raw[0, 1, NET_IN] = -4.0
    bounded = bound_metrics(raw, ["i-a", "i-b"], START_S, 300)

    summary = [(r.instance_id, r.metric, r.time_s - START_S, r.value, r.count) for r in bounded.out_of_bounds]
    assert summary == [("i-a", "CPUUtilization", 600, 1e9, 1), ("i-a", "NetworkIn", 300, -1.0, 3), ("i-b", "NetworkIn", 0, -4.0, 1)]
    assert bounded.out_of_bounds[1].message.endswith("treated as missing; 2 more of its datapoints too")


def test_only_the_metrics_read_are_bounded():
    raw = plausible(1, 1)
    raw[0, 0, DISK_READ] = 1e30
    bounded = bound_metrics(raw, ["i-a"], START_S, 300, metric_names=["CPUUtilization"])
    assert bounded.out_of_bounds == () and bounded.values[0, 0, DISK_READ] == 1e30


def test_an_out_of_bounds_datapoint_is_a_gap_for_the_missing_data_rule():
    # i-a's DiskReadBytes: 10, 1e30, 30. Held (max_hold_slots 1): slot 1 reads slot 0's 10.
    raw = plausible(3, 1)
    raw[:, 0, DISK_READ] = [10.0, 1e30, 30.0]
    held = instance_metrics(raw, ["i-a"], START_S, 300, max_hold_slots=1)
    np.testing.assert_array_equal(held.metric("DiskReadBytes")[:, 0], [10.0, 10.0, 30.0])
    assert held.measured.all() and held.held_count == 1
    assert [r.metric for r in held.out_of_bounds] == ["DiskReadBytes"] and held.rejected[1, 0, DISK_READ]
    # Not held: the node-slot is unmeasured, exactly as if CloudWatch had sent nothing.
    not_held = instance_metrics(raw, ["i-a"], START_S, 300, max_hold_slots=0)
    gap = raw.copy()
    gap[1, 0, DISK_READ] = NAN
    missing = instance_metrics(gap, ["i-a"], START_S, 300, max_hold_slots=0)
    np.testing.assert_array_equal(not_held.values, missing.values)
    np.testing.assert_array_equal(not_held.measured, [[True], [False], [True]])
    assert missing.out_of_bounds == ()
