"""`autoscaler report` on the daemon's slots: TASK nodes measured through moto's CloudWatch, EMR's
instance list and the SQLite decision log, against follow and no provisioning."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import numpy as np
import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main
from autoscaler.core.energy.accounting import modelled_schedule
from autoscaler.core.energy.power import TABLE_III

SLOT_S = 300
HOUR_S = 3600


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat()


def put(cloudwatch, instance_id: str, timestamp_s: float, values: dict[str, float]) -> None:
    cloudwatch.put_metric_data(
        Namespace="AWS/EC2",
        MetricData=[
            {"MetricName": name, "Dimensions": [{"Name": "InstanceId", "Value": instance_id}],
             "Timestamp": datetime.fromtimestamp(timestamp_s, timezone.utc), "Value": value}
            for name, value in values.items()
        ],
    )  # fmt: skip


def task_nodes_since(client, cluster_id: str, endpoint: str, backdate_task_group):
    """The cluster's two TASK instances (sorted), a slot-aligned start three hours ago that their group
    is backdated to precede, and a CloudWatch client on moto: (instance ids, start_s, client)."""
    import boto3

    from autoscaler.adapters.cloudwatch_reader import cloudwatch_client

    instances = sorted(i["Ec2InstanceId"] for i in client.list_instances(ClusterId=cluster_id, InstanceGroupTypes=["TASK"])["Instances"])
    start_s = (int(time.time()) // SLOT_S) * SLOT_S - 3 * HOUR_S
    backdate_task_group(cluster_id, start_s - 600)
    return instances, start_s, cloudwatch_client("us-east-1", endpoint, boto3.Session())


def write_config(tmp_path, cluster_id: str, endpoint: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(
        f'policy = "gcp-u"\nstore_path = "{tmp_path / "jobs.db"}"\nslot_s = {SLOT_S}\n'
        f'[cluster]\nid = "{cluster_id}"\nregion = "us-east-1"\nendpoint_url = "{endpoint}"\nmax_nodes = 5\n'
        '[report]\nboot_s = 0.0\n'
    )
    return str(path)


@pytest.mark.parametrize("emr_cluster_id", [2], indirect=True)
def test_report_measures_task_nodes_holds_one_gap_and_models_the_rest(
    emr_cluster_id, moto_endpoint, backdate_task_group, tmp_path, capsys
):
    client, cluster_id = emr_cluster_id
    (a, b), start_s, cloudwatch = task_nodes_since(client, cluster_id, moto_endpoint, backdate_task_group)
    # Four slots. A: CPU 50 %, 2e9 disk bytes, 2e6 network bytes. B: CPU 100 %, 1e9 disk bytes, 5e6
    # network bytes, silent in slots 2 and 3. No Disk*Ops at all (EBS-only instances report none).
    for t in range(4):
        put(cloudwatch, a, start_s + t * SLOT_S + 10, {"CPUUtilization": 50.0, "DiskReadBytes": 1.5e9, "DiskWriteBytes": 0.5e9, "NetworkIn": 1e6, "NetworkOut": 1e6})
        if t < 2:
            put(cloudwatch, b, start_s + t * SLOT_S + 10, {"CPUUtilization": 100.0, "DiskReadBytes": 1e9, "DiskWriteBytes": 0.0, "NetworkIn": 3e6, "NetworkOut": 2e6})
    first_slot = start_s // SLOT_S
    loads = [3.0, 1.0, 0.0, 2.0]
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        for t, load in enumerate(loads):
            store.commit_slot(first_slot + t, {"last_slot": first_slot + t}, {}, {"slot": first_slot + t, "capacity": 2.0, "nodes": 2, "running": 1, "load": load})
    config = write_config(tmp_path, cluster_id, moto_endpoint)

    argv = ["report", "--config", config, "--since", iso(start_s), "--until", iso(start_s + 4 * SLOT_S), "--format", "json", "--publish"]
    assert main(argv + ["--out", str(tmp_path / "out")]) == 0
    document = json.loads(capsys.readouterr().out)
    schedules = {s["schedule"]: s for s in document["schedules"]}
    actual = schedules["gcp-u (run)"]
    assert actual["source"] == "measured"

    # By hand, eq. (13) with Table III: u_disk = b_db / max b_db (max 2e9), u_net = b_net / max (5e6).
    power_a = 60.30 + 25.70 * 0.5 + 7.21 * 1.0 + 0.66 * (2e6 / 5e6)
    power_b = 60.30 + 25.70 * 1.0 + 7.21 * 0.5 + 0.66 * 1.0
    # Slot 2: B holds slot 1's values. Slot 3: B has no data, so it is modelled at the slot's
    # utilisation, 1 running job on 2 nodes: u = 0.5 for every term (the Disk*Ops term is 0 anyway).
    modelled_b = 60.30 + (25.70 + 7.21 + 0.66) * 0.5
    expected_wh = (4 * power_a + 3 * power_b + modelled_b) * SLOT_S / 3600
    assert actual["energy_wh"] == pytest.approx(expected_wh, rel=1e-9)
    assert actual["metric_totals"]["CPUUtilization"] == pytest.approx(4 * 50 + 3 * 100)
    assert actual["metric_totals"]["DiskReadBytes"] == pytest.approx(4 * 1.5e9 + 3 * 1e9)
    assert "DiskReadOps" not in actual["metric_totals"]
    notes = " ".join(document["notes"])
    assert "Not reported by any TASK instance: DiskReadOps, DiskWriteOps" in notes
    assert "7 of 8 node-slots from CloudWatch" in notes and "1 held" in notes and "1 had no data" in notes

    # The counterfactuals, modelled from the logged L_t, then scaled by the run's measured energy
    # over its modelled energy (2 nodes, 1 job running, in each of the 4 slots).
    run_modelled = modelled_schedule("run", np.full(4, 2.0), np.full(4, 1.0), SLOT_S, TABLE_III, boot_s=0.0)
    factor = expected_wh / run_modelled.energy_wh
    follow = modelled_schedule("follow", np.array(loads), np.array(loads), SLOT_S, TABLE_III, boot_s=0.0)
    assert schedules["follow"]["source"] == schedules["no provisioning"]["source"] == "calibrated"
    assert schedules["follow"]["energy_wh"] == pytest.approx(factor * follow.energy_wh)
    assert schedules["no provisioning"]["energy_wh"] == pytest.approx(
        factor * sum(5 * 60.30 + (25.70 + 7.21 + 0.66) * load for load in loads) * SLOT_S / 3600
    )
    assert f"scaled by that ratio, {factor:.3f}" in notes

    # Published: EnergyWh and SavedWh, read back from CloudWatch.
    stats = cloudwatch.get_metric_statistics(
        Namespace="DeferralAutoscaler", MetricName="EnergyWh", Dimensions=[{"Name": "ClusterId", "Value": cluster_id}], StartTime=datetime.fromtimestamp(start_s, timezone.utc),
        EndTime=datetime.fromtimestamp(start_s + 2 * HOUR_S, timezone.utc), Period=3600, Statistics=["Sum"],
    )  # fmt: skip
    assert sum(p["Sum"] for p in stats["Datapoints"]) == pytest.approx(expected_wh)
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"energy.md", "energy-slots.csv", "energy.png"}


@pytest.mark.parametrize("emr_cluster_id", [2], indirect=True)
def test_report_without_decided_slots_names_what_the_store_has(emr_cluster_id, moto_endpoint, tmp_path, capsys):
    _, cluster_id = emr_cluster_id
    config = write_config(tmp_path, cluster_id, moto_endpoint)
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        store.commit_slot(100, {"last_slot": 100}, {}, {"slot": 100, "capacity": 1.0, "nodes": 1, "running": 1, "load": 1.0})
    assert main(["report", "--config", config, "--since", "2h", "--until", "1h"]) == 2
    err = capsys.readouterr().err
    assert "no slot decided between" in err and "decided: slots 100..100" in err and "Traceback" not in err


@pytest.mark.parametrize("emr_cluster_id", [2], indirect=True)
def test_daily_report_logs_each_schedule_and_publishes_yesterday(emr_cluster_id, moto_endpoint, tmp_path):
    import boto3
    from structlog.testing import capture_logs

    from autoscaler.adapters.cloudwatch_reader import cloudwatch_client
    from autoscaler.app.config import load_settings
    from autoscaler.app.reporting import daily_report

    _, cluster_id = emr_cluster_id
    yesterday_s = (int(time.time()) // 86400 - 1) * 86400
    first_slot = yesterday_s // SLOT_S + 12  # 01:00 UTC yesterday
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        for t, (nodes, load) in enumerate([(2, 2.0), (2, 1.0), (1, 1.0)]):
            store.commit_slot(first_slot + t, {"last_slot": first_slot + t}, {}, {"slot": first_slot + t, "capacity": float(nodes), "nodes": nodes, "running": nodes, "load": load})
    settings = load_settings(write_config(tmp_path, cluster_id, moto_endpoint))
    with capture_logs() as events:
        daily_report(settings, boto3.Session())
    energy = {e["schedule"]: e for e in events if e["event"] == "energy"}
    assert set(energy) == {"no provisioning", "follow", "gcp-u (run)"}
    # moto's TASK instances were created today: none was up yesterday, so the run is modelled.
    assert energy["gcp-u (run)"]["source"] == "modelled"
    # The rest of the day has no decision: its slots keep the last nodes (1), fully idle.
    n_slots = 288 - 12
    busy = (2 + 2 + 1) * 93.87 * SLOT_S / 3600
    idle = (n_slots - 3) * 1 * 60.30 * SLOT_S / 3600
    assert energy["gcp-u (run)"]["energy_wh"] == pytest.approx(busy + idle, abs=1e-3)
    assert energy["gcp-u (run)"]["saved_wh"] == pytest.approx(energy["follow"]["energy_wh"] - energy["gcp-u (run)"]["energy_wh"], abs=2e-3)
    stats = cloudwatch_client("us-east-1", moto_endpoint, boto3.Session()).get_metric_statistics(
        Namespace="DeferralAutoscaler", MetricName="SavedWh", Dimensions=[{"Name": "ClusterId", "Value": cluster_id}], StartTime=datetime.fromtimestamp(yesterday_s, timezone.utc),
        EndTime=datetime.fromtimestamp(yesterday_s + 2 * 86400, timezone.utc), Period=86400, Statistics=["Sum"],
    )  # fmt: skip
    assert sum(p["Sum"] for p in stats["Datapoints"]) == pytest.approx(energy["gcp-u (run)"]["saved_wh"], abs=2e-3)


def write_config_without_hold(tmp_path, cluster_id: str, endpoint: str) -> str:
    """The test config with [report] max_hold_slots = 0: a missing node-slot is modelled, never held."""
    path = write_config(tmp_path, cluster_id, endpoint)
    with open(path, "a") as config:
        config.write("max_hold_slots = 0\n")
    return path


def decide(tmp_path, first_slot: int, n_slots: int) -> None:
    """The decision log: 2 nodes, 1 job running, 1 server of load in each slot."""
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        for t in range(n_slots):
            store.commit_slot(first_slot + t, {"last_slot": first_slot + t}, {}, {"slot": first_slot + t, "capacity": 2.0, "nodes": 2, "running": 1, "load": 1.0})


@pytest.mark.parametrize("emr_cluster_id", [2], indirect=True)
def test_report_treats_datapoints_out_of_bounds_as_missing_and_names_them(
    emr_cluster_id, moto_endpoint, backdate_task_group, tmp_path, capsys
):
    client, cluster_id = emr_cluster_id
    (a, b), start_s, cloudwatch = task_nodes_since(client, cluster_id, moto_endpoint, backdate_task_group)
    # The first test's four slots, with four values no EC2 instance reports or one a little off:
    # A's CPU 1e9 % in slot 1 and 1e30 disk bytes read in slot 3, B's CPU 100.4 % in slot 0 and
    # NetworkIn -5e6 bytes in slot 2.
    for t in range(4):
        put(cloudwatch, a, start_s + t * SLOT_S + 10, {"CPUUtilization": 1e9 if t == 1 else 50.0, "DiskReadBytes": 1e30 if t == 3 else 1.5e9, "DiskWriteBytes": 0.5e9, "NetworkIn": 1e6, "NetworkOut": 1e6})
        put(cloudwatch, b, start_s + t * SLOT_S + 10, {"CPUUtilization": 100.4 if t == 0 else 100.0, "DiskReadBytes": 1e9, "DiskWriteBytes": 0.0, "NetworkIn": -5e6 if t == 2 else 3e6, "NetworkOut": 2e6})
    decide(tmp_path, start_s // SLOT_S, 4)
    config = write_config_without_hold(tmp_path, cluster_id, moto_endpoint)

    argv = ["report", "--config", config, "--since", iso(start_s), "--until", iso(start_s + 4 * SLOT_S), "--format", "json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)  # stdout is the JSON alone; the warnings are on stderr
    events = [json.loads(line) for line in captured.err.splitlines() if line.startswith("{")]
    actual = {s["schedule"]: s for s in document["schedules"]}["gcp-u (run)"]
    assert actual["source"] == "measured"

    # By hand: the three cells out of bounds (A slot 1, A slot 3, B slot 2) are missing, not held
    # (max_hold_slots = 0), so modelled at the slot's u = 1/2. B's 100.4 % is 100 %. The five measured
    # cells keep the maxima of the clean run: disk bytes 2e9 (A), network bytes 5e6 (B).
    power_a = 60.30 + 25.70 * 0.5 + 7.21 * 1.0 + 0.66 * (2e6 / 5e6)
    power_b = 60.30 + 25.70 * 1.0 + 7.21 * 0.5 + 0.66 * 1.0
    modelled = 60.30 + (25.70 + 7.21 + 0.66) * 0.5
    assert actual["energy_wh"] == pytest.approx((2 * power_a + 3 * power_b + 3 * modelled) * SLOT_S / 3600, rel=1e-9)
    assert actual["metric_totals"]["CPUUtilization"] == pytest.approx(2 * 50 + 3 * 100)
    assert actual["metric_totals"]["DiskReadBytes"] == pytest.approx(2 * 1.5e9 + 3 * 1e9)

    # One warning per (instance, metric), by instance id, metric, UTC time and value.
    warnings = sorted(
        ((e["instance_id"], e["metric"], e["time"], e["value"]) for e in events if e["event"] == "metric_out_of_bounds"),
    )
    assert warnings == sorted([
        (a, "CPUUtilization", _minute(start_s + SLOT_S), 1e9),
        (a, "DiskReadBytes", _minute(start_s + 3 * SLOT_S), 1e30),
        (b, "NetworkIn", _minute(start_s + 2 * SLOT_S), -5e6),
    ])  # fmt: skip
    assert all(e["level"] == "warning" for e in events if e["event"] == "metric_out_of_bounds")
    notes = " ".join(document["notes"])
    assert "5 of 8 node-slots from CloudWatch" in notes and "3 had no data" in notes
    assert "Out of bounds, so treated as missing: 3 datapoints of 3 instance metrics." in notes
    assert f"CPUUtilization of {a} at {_minute(start_s + SLOT_S)} is 1e+09" in notes
    assert "1 CPUUtilization datapoint a little above 100 % was read as 100 %" in notes


@pytest.mark.parametrize("emr_cluster_id", [2], indirect=True)
def test_report_with_every_datapoint_out_of_bounds_is_refused_naming_the_window(
    emr_cluster_id, moto_endpoint, backdate_task_group, tmp_path, capsys
):
    client, cluster_id = emr_cluster_id
    (a, b), start_s, cloudwatch = task_nodes_since(client, cluster_id, moto_endpoint, backdate_task_group)
    for t in range(2):
        for instance in (a, b):
            put(cloudwatch, instance, start_s + t * SLOT_S + 10, {"CPUUtilization": 1e9, "NetworkIn": 1e6, "NetworkOut": 1e6})
    decide(tmp_path, start_s // SLOT_S, 2)
    config = write_config(tmp_path, cluster_id, moto_endpoint)

    argv = ["report", "--config", config, "--since", iso(start_s), "--until", iso(start_s + 2 * SLOT_S)]
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"autoscaler: error: nothing to measure from {_minute(start_s)} to {_minute(start_s + 2 * SLOT_S)}" in err
    assert "a datapoint was out of bounds or missing" in err
    assert f"CPUUtilization of {a} at {_minute(start_s)} is 1e+09" in err and "Traceback" not in err


def _minute(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
