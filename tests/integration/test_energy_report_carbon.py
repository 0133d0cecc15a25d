"""`autoscaler report` with a carbon signal: the daemon's decision log in SQLite costed by a CSV signal
named in the config's [carbon], Co2Grams and Co2SavedGrams published to moto's CloudWatch over HTTP
and read back, and a replay costed by --carbon, checked slot by slot against its own CSV."""

from __future__ import annotations

import csv
import json
import time
from datetime import datetime, timezone

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main

SLOT_S = 300
BUSY_W, IDLE_W = 93.87, 60.30
CLUSTER_ID = "j-CARBONREPORT1"


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat().replace("+00:00", "Z")


def write_signal(path, start_s: float, step_s: float, values: list[float]) -> str:
    path.write_text("time,value\n" + "".join(f"{iso(start_s + i * step_s)},{v}\n" for i, v in enumerate(values)))
    return str(path)


def write_config(tmp_path, endpoint: str, carbon: str = "") -> str:
    path = tmp_path / "config.toml"
    path.write_text(
        f'policy = "gcp-u"\nstore_path = "{tmp_path / "jobs.db"}"\nslot_s = {SLOT_S}\n'
        f'[cluster]\nid = "{CLUSTER_ID}"\nregion = "us-east-1"\nendpoint_url = "{endpoint}"\nmax_nodes = 5\n'
        "[report]\nboot_s = 0.0\n" + carbon
    )
    return str(path)


def decide(tmp_path, first_slot: int) -> None:
    """Four slots of 2 busy nodes; loads 1, 2, 3, 2; tenants a and b holding 1 and 1, then a 2, then
    a 3 and b 1, then no breakdown."""
    tenants = [{"a": 1, "b": 1}, {"a": 2}, {"a": 3, "b": 1}, {}]
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        for t, (load, held) in enumerate(zip([1.0, 2.0, 3.0, 2.0], tenants)):
            slot = first_slot + t
            store.commit_slot(
                slot, {"last_slot": slot}, {}, {"slot": slot, "capacity": 2.0, "nodes": 2, "running": 2, "load": load, "nodes_by_tenant": held}
            )


def test_daemon_report_costs_the_run_by_the_config_signal_splits_it_by_tenant_and_publishes_co2(tmp_path, moto_endpoint, capsys):
    import boto3

    from autoscaler.adapters.cloudwatch_reader import cloudwatch_client

    start_s = (int(time.time()) // SLOT_S) * SLOT_S - 3 * 3600
    decide(tmp_path, start_s // SLOT_S)
    # One point per slot: 100, 200, 300, 400 gCO2eq/kWh, and one more so the last slot is covered.
    source = write_signal(tmp_path / "grid.csv", start_s, SLOT_S, [100.0, 200.0, 300.0, 400.0, 400.0])
    config = write_config(tmp_path, moto_endpoint, f'[carbon]\nsource = "{source}"\nunit = "gCO2eq/kWh"\n')
    argv = ["report", "--config", config, "--since", iso(start_s), "--until", iso(start_s + 4 * SLOT_S), "--no-measure"]
    assert main(argv + ["--format", "json", "--publish", "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    schedules = {s["schedule"]: s for s in document["schedules"]}

    # By hand: the run's 2 busy nodes draw 187.74 W, 15.645 Wh a 5-minute slot; at 100..400 g/kWh that
    # is 1.5645, 3.129, 4.6935 and 6.258 g, 15.645 g in all. Follow's 1, 2, 3, 2 busy nodes: 7.8225,
    # 15.645, 23.4675 and 15.645 Wh, so 0.78225 + 3.129 + 7.04025 + 6.258 = 17.2095 g.
    grams = [100.0, 200.0, 300.0, 400.0]
    run = schedules["gcp-u (run)"]
    assert run["energy_wh"] == pytest.approx(4 * 15.645)
    assert run["co2_g"] == pytest.approx(15.645)
    assert schedules["follow"]["co2_g"] == pytest.approx(17.2095)
    assert run["co2_saved_g"] == pytest.approx(17.2095 - 15.645)
    assert run["co2_reduction_percent"] == pytest.approx(100 * 1.5645 / 17.2095)
    no_provisioning_g = sum((5 * IDLE_W + (BUSY_W - IDLE_W) * load) * SLOT_S / 3600 * g / 1000 for load, g in zip([1, 2, 3, 2], grams))
    assert schedules["no provisioning"]["co2_g"] == pytest.approx(no_provisioning_g)
    assert run["co2_saved_vs_no_provisioning_g"] == pytest.approx(no_provisioning_g - 15.645)
    assert document["signal"] == {
        "source": source, "unit": "gCO2eq/kWh", "converted_from": None, "cost_unit": "gCO2eq",
        "slots_covered": 4, "slots_left_out": 0, "first_left_out_s": None,
    }  # fmt: skip

    # Tenants: slot 0 half each, slot 1 all a, slot 2 75 % a and 25 % b, slot 3 unattributed.
    tenants = {t["tenant"]: t for t in document["tenants"]}
    assert tenants["a"]["co2_g"] == pytest.approx(0.5 * 1.5645 + 3.129 + 0.75 * 4.6935)
    assert tenants["b"]["co2_g"] == pytest.approx(0.5 * 1.5645 + 0.25 * 4.6935)
    assert tenants["unattributed"]["co2_g"] == pytest.approx(6.258)
    assert (tenants["a"]["node_slots"], tenants["b"]["node_slots"], tenants["unattributed"]["node_slots"]) == (6, 2, 2)
    assert sum(t["share_percent"] for t in tenants.values()) == pytest.approx(100.0)

    rows = list(csv.DictReader((tmp_path / "out" / "energy-slots.csv").open()))
    assert [float(r["gcp-u (run) co2_g"]) for r in rows] == pytest.approx([1.5645, 3.129, 4.6935, 6.258], rel=1e-5)
    assert [float(r["tenant b co2_g"]) for r in rows] == pytest.approx([0.78225, 0.0, 1.173375, 0.0], rel=1e-5)
    assert "published EnergyWh, SavedWh, Co2Grams and Co2SavedGrams to CloudWatch" in captured.err

    cloudwatch = cloudwatch_client("us-east-1", moto_endpoint, boto3.Session())

    def published(metric: str) -> float:
        stats = cloudwatch.get_metric_statistics(
            Namespace="DeferralAutoscaler", MetricName=metric, Dimensions=[{"Name": "ClusterId", "Value": CLUSTER_ID}],
            StartTime=datetime.fromtimestamp(start_s, timezone.utc), EndTime=datetime.fromtimestamp(start_s + 7200, timezone.utc),
            Period=3600, Statistics=["Sum"],
        )  # fmt: skip
        return sum(p["Sum"] for p in stats["Datapoints"])

    assert published("Co2Grams") == pytest.approx(15.645)
    assert published("Co2SavedGrams") == pytest.approx(1.5645)

    # The Markdown report: the CO2 row and the tenant table.
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "CO2 (kgCO2eq)" in text and "| unattributed | 2 | 0.006 |" in text


def test_without_a_signal_the_report_has_no_co2(tmp_path, moto_endpoint, capsys):
    start_s = (int(time.time()) // SLOT_S) * SLOT_S - 3 * 3600
    decide(tmp_path, start_s // SLOT_S)
    config = write_config(tmp_path, moto_endpoint)
    argv = ["report", "--config", config, "--since", iso(start_s), "--until", iso(start_s + 4 * SLOT_S), "--no-measure"]
    assert main(argv + ["--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert "signal" not in document and "tenants" not in document
    assert all(not any(key.startswith(("co2", "cost")) for key in s) for s in document["schedules"])
    assert main(argv + ["--carbon-unit", "$/kWh"]) == 2
    assert "--carbon-unit needs --carbon SOURCE" in capsys.readouterr().err


def test_daemon_report_leaves_out_slots_the_signal_misses_and_refuses_one_that_misses_all(tmp_path, moto_endpoint, capsys):
    start_s = (int(time.time()) // SLOT_S) * SLOT_S - 3 * 3600
    decide(tmp_path, start_s // SLOT_S)
    config = write_config(tmp_path, moto_endpoint)
    argv = ["report", "--config", config, "--since", iso(start_s), "--until", iso(start_s + 4 * SLOT_S), "--no-measure", "--format", "json"]
    # Points for slots 0 and 1 only (the last holds one median step): slots 2 and 3 are left out.
    early = write_signal(tmp_path / "early.csv", start_s, SLOT_S, [100.0, 200.0])
    assert main(argv + ["--carbon", early, "--carbon-unit", "gCO2eq/kWh"]) == 0
    document = json.loads(capsys.readouterr().out)
    run = {s["schedule"]: s for s in document["schedules"]}["gcp-u (run)"]
    assert run["co2_g"] == pytest.approx(1.5645 + 3.129)
    assert document["signal"]["slots_left_out"] == 2 and document["signal"]["first_left_out_s"] == start_s + 2 * SLOT_S
    assert any("does not cover 2 of the 4 slots" in note for note in document["notes"])

    late = write_signal(tmp_path / "late.csv", start_s + 3600, SLOT_S, [100.0, 200.0])
    assert main(argv + ["--carbon", late, "--carbon-unit", "gCO2eq/kWh"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"autoscaler: error: {late}: covers none of the report's 4 slots" in err
    assert f"first uncovered slot at {datetime.fromtimestamp(start_s, timezone.utc):%Y-%m-%d %H:%M} UTC" in err


def test_replay_report_costs_every_policy_by_the_signal_slot_by_slot(tmp_path, capsys):
    # Two days of hourly points from the start: 200 g/kWh in the first half of each day, 500 in the second.
    start_s = 1_590_969_600  # 2020-06-01T00:00:00Z
    source = write_signal(tmp_path / "day.csv", start_s, 3600, [200.0 if h % 24 < 12 else 500.0 for h in range(48)])
    argv = ["report", "--replay", "--carbon", source, "--carbon-unit", "gCO2eq/kWh", "--start", iso(start_s), "--format", "json"]
    assert main(argv + ["--out", str(tmp_path / "out")]) == 0
    document = json.loads(capsys.readouterr().out)
    assert "tenants" not in document
    rows = list(csv.DictReader((tmp_path / "out" / "energy-slots.csv").open()))
    assert rows[0]["start"] == "2020-06-01 00:00 UTC"
    follow = {s["schedule"]: s for s in document["schedules"]}["follow"]
    for entry in document["schedules"]:
        name = entry["schedule"]
        # Each slot's grams are its Wh times the signal over 1000; the totals are the slots' sums.
        for row in rows:
            grams_per_kwh = 200.0 if int(row["slot"]) * SLOT_S % 86400 < 43200 else 500.0
            assert float(row[f"{name} co2_g"]) == pytest.approx(float(row[f"{name} energy_wh"]) * grams_per_kwh / 1000, rel=1e-5, abs=1e-9)
        assert entry["co2_g"] == pytest.approx(sum(float(r[f"{name} co2_g"]) for r in rows), rel=1e-5)
        assert entry["co2_saved_g"] == pytest.approx(follow["co2_g"] - entry["co2_g"])
    assert document["signal"]["slots_left_out"] == 0


def test_daily_report_counts_co2_by_the_config_signal_and_goes_out_without_it_when_unreadable(tmp_path, moto_endpoint):
    import boto3
    from structlog.testing import capture_logs

    from autoscaler.adapters.cloudwatch_reader import cloudwatch_client
    from autoscaler.app.config import load_settings
    from autoscaler.app.reporting import daily_report

    yesterday_s = (int(time.time()) // 86400 - 1) * 86400
    decide(tmp_path, yesterday_s // SLOT_S + 12)  # from 01:00 UTC yesterday
    source = write_signal(tmp_path / "flat.csv", yesterday_s, 3600, [300.0] * 25)
    settings = load_settings(write_config(tmp_path, moto_endpoint, f'publish_metrics = true\n[carbon]\nsource = "{source}"\nunit = "gCO2eq/kWh"\n'))
    with capture_logs() as events:
        daily_report(settings, boto3.Session())
    run = next(e for e in events if e["event"] == "energy" and e["schedule"] == "gcp-u (run)")
    # A flat 300 g/kWh: every schedule's grams are 0.3 times its Wh.
    assert run["co2_g"] == pytest.approx(0.3 * run["energy_wh"], abs=2e-3)
    stats = cloudwatch_client("us-east-1", moto_endpoint, boto3.Session()).get_metric_statistics(
        Namespace="DeferralAutoscaler", MetricName="Co2Grams", Dimensions=[{"Name": "ClusterId", "Value": CLUSTER_ID}],
        StartTime=datetime.fromtimestamp(yesterday_s, timezone.utc), EndTime=datetime.fromtimestamp(yesterday_s + 2 * 86400, timezone.utc),
        Period=86400, Statistics=["Sum"],
    )  # fmt: skip
    assert sum(p["Sum"] for p in stats["Datapoints"]) == pytest.approx(run["co2_g"], abs=2e-3)

    missing = str(tmp_path / "gone.csv")
    settings = load_settings(write_config(tmp_path, moto_endpoint, f'[carbon]\nsource = "{missing}"\nunit = "gCO2eq/kWh"\n'))
    with capture_logs() as events:
        daily_report(settings, boto3.Session())
    failed = [e for e in events if e["event"] == "report_signal_failed"]
    assert len(failed) == 1 and failed[0]["log_level"] == "warning" and f"{missing}: no such file" in failed[0]["error"]
    assert all("co2_g" not in e for e in events if e["event"] == "energy")
