"""`autoscaler submit`, `jobs` and `run` as an operator uses them, against moto's EMR server over HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main

from conftest import ProcessLog


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_config(tmp_path, cluster_id: str, endpoint: str, slot_s: float = 300.0, health_port: int = 0) -> str:
    path = tmp_path / "config.toml"
    path.write_text(
        f'policy = "gcp-u"\ndeadline_slots = 2\nslot_s = {slot_s}\nstore_path = "{tmp_path / "jobs.db"}"\n'
        f'log_format = "json"\nknown_tenants = ["ads", "search"]\nhealth_port = {health_port}\n'
        f'[cluster]\nid = "{cluster_id}"\nregion = "us-east-1"\nendpoint_url = "{endpoint}"\nmax_nodes = 10\n'
    )
    return str(path)


def submit(config: str, job_id: str, *extra: str) -> int:
    return main(
        ["submit", "--config", config, "--id", job_id, "--name", "nightly", "--tenant", "ads", "--deadline", "2h",
         "--length-s", "600", "--command", "spark-submit", "job.py", *extra]
    )  # fmt: skip


@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_submit_is_idempotent_and_bad_submissions_change_nothing(emr_cluster_id, moto_server, tmp_path, capsys):
    _, cluster_id = emr_cluster_id
    config = write_config(tmp_path, cluster_id, moto_server)
    assert submit(config, "job-1") == 0
    assert submit(config, "job-1") == 0
    assert "already queued: job-1" in capsys.readouterr().out
    bad = [
        ["--deadline", "2001-01-01T00:00:00Z"],  # in the past
        ["--tenant", "nobody"],
        ["--deadline", "5m"],  # shorter than the 600 s job
    ]
    for extra in bad:
        argv = ["submit", "--config", config, "--id", "job-2", "--name", "n", "--tenant", "ads", "--deadline", "2h",
                "--length-s", "600", "--command", "true"]  # fmt: skip
        for flag, value in zip(extra[::2], extra[1::2], strict=True):
            argv[argv.index(flag) + 1] = value
        assert main(argv) == 2
        assert "Traceback" not in capsys.readouterr().err
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        assert [j.job_id for j in store.all_jobs()] == ["job-1"]
    assert main(["jobs", "--config", config, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(j["job_id"], j["shown_state"]) for j in listed] == [("job-1", "queued")]


@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_dry_run_changes_nothing_on_the_cluster_or_in_the_store(emr_cluster_id, moto_server, tmp_path):
    client, cluster_id = emr_cluster_id
    config = write_config(tmp_path, cluster_id, moto_server, slot_s=1.0)
    assert submit(config, "job-1") == 0
    before = (tmp_path / "jobs.db").read_bytes()
    process = subprocess.Popen(
        [sys.executable, "-m", "autoscaler", "run", "--config", config, "--dry-run", "--decisions-out", str(tmp_path / "decisions.jsonl")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
    )  # fmt: skip
    log = ProcessLog(process)
    try:
        assert log.wait_for_count("slot", 2), log.text
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = log.finish(timeout_s=60)
    assert returncode == 0, log.text
    slots = [e for e in log.events if e["event"] == "slot"]
    assert len(slots) >= 2 and all(s["dry_run"] for s in slots)
    # It would release the job in its first slot; in its shadow the job then runs for its length,
    # so the next slot has nothing to release (a dry run that forgot its own decisions would release it again).
    assert [s["jobs_released"] for s in slots[:2]] == [1, 0]
    lines = [json.loads(line) for line in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    assert [line["released"] for line in lines[:2]] == [["job-1"], []]
    assert all({"slot", "m_t", "nodes", "reason", "why"} <= set(line) and line["dry_run"] for line in lines)
    # One node running one job: Table III at u = 1, 60.30 + 25.70 + 7.21 + 0.66 W, for a 1-s slot.
    assert slots[0]["energy_wh_modelled"] == round(93.87 / 3600, 3)
    assert client.list_steps(ClusterId=cluster_id)["Steps"] == []
    groups = client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"]
    assert [g["RequestedInstanceCount"] for g in groups if g["InstanceGroupType"] == "TASK"] == [0]
    assert (tmp_path / "jobs.db").read_bytes() == before
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        assert [j.state for j in store.all_jobs()] == ["queued"]
        assert store.decisions() == []


@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_sigterm_finishes_the_current_slot_and_stops(emr_cluster_id, moto_server, tmp_path):
    client, cluster_id = emr_cluster_id
    port = free_port()
    config = write_config(tmp_path, cluster_id, moto_server, slot_s=1.0, health_port=port)
    assert submit(config, "job-1") == 0
    process = subprocess.Popen(
        [sys.executable, "-m", "autoscaler", "run", "--config", config],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
    )  # fmt: skip
    log = ProcessLog(process)
    try:
        assert log.wait_for_count("slot", 2), log.text
        # /healthz and /metrics, on the loopback.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert response.status == 200 and json.load(response)["status"] == "ok"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            metrics = response.read().decode()
    finally:
        process.send_signal(signal.SIGTERM)
        returncode = log.finish(timeout_s=60)
    assert "autoscaler_jobs_released_total 1.0" in metrics and "autoscaler_capacity_servers" in metrics
    assert returncode == 0, log.text
    events = [e["event"] for e in log.events]
    assert "stopping" in events and events.count("slot") >= 2
    assert "slot_failed" not in events
    steps = client.list_steps(ClusterId=cluster_id)["Steps"]
    assert [s["Name"] for s in steps] == ["autoscaler:job-1"]
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        decisions = store.decisions()
        assert [j.state for j in store.all_jobs()] in (["released"], ["running"])
    # Every slot that logged was committed: nothing was cut off half-way.
    assert len(decisions) == events.count("slot")


def test_run_with_a_bad_config_fails_at_start_naming_the_field(tmp_path, capsys):
    path = tmp_path / "config.toml"
    path.write_text('slto_s = 300\n[cluster]\nid = "j-1"\n')
    assert main(["run", "--config", str(path)]) == 2
    assert "slto_s" in capsys.readouterr().err
