"""``run --shadow`` against moto's EMR over HTTP, beside a managed-scaling-like resizer: its
counterfactual figures are ``autoscaler compare``'s on the same jobs, and it writes nothing.

The resizer is the project's own model of EMR managed scaling (``autoscaler.core.baselines``,
``managed``): the jobs are played on the twin under that rule, and the test makes moto's cluster do
what the twin did, on a simulated clock, 10 s tick by 10 s tick (managed scaling's evaluation
interval): the TASK group's count through ModifyInstanceGroups (the resizer's own client, as EMR
would resize it), each step added with AddJobFlowSteps at its submission, and its state and Timeline
set on moto's backend object (moto never runs a step, and stamps times with the wall clock). The
shadow reads moto only through its read-only client, at each tick (the TASK group) and each slot
(the steps).
"""

from __future__ import annotations

import datetime

import boto3
import numpy as np
import pytest

from autoscaler.adapters.emr import emr_client
from autoscaler.adapters.emr_read_only import ReadOnlyEmr, ShadowWriteRefused
from autoscaler.adapters.fakes import SimulatedClock
from autoscaler.app.compare import CompareInputs, run_task
from autoscaler.app.config import Settings
from autoscaler.app.shadow_run import ShadowRun
from autoscaler.core.baselines import MANAGED_INTERVAL_S, nodes_over_time, run_baseline
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.shadow_books import SHADOW_TENANT
from autoscaler.core.twin import TwinConfig

START_S = 1_800_000_000.0  # a slot boundary (a multiple of 300 s)
SLOT_S = 300.0
WINDOW_SLOTS = 12
D = 6
MAX_NODES = 20
REGION = "us-east-1"  # the moto server fixture's


def workload(seed: int = 3, n_jobs: int = 36) -> tuple[Job, ...]:
    """Jobs over the first hour, at distinct whole seconds, of 2 to 25 minutes, with no slack
    (``CompareInputs.jobs_at`` adds D); each named by its id, tenant the shadow's."""
    rng = np.random.default_rng(seed)
    offsets = np.sort(rng.choice(np.arange(0, WINDOW_SLOTS * int(SLOT_S) - 1500), size=n_jobs, replace=False))
    lengths = rng.integers(120, 1500, size=n_jobs)
    return tuple(
        Job(f"job{i:02d}", f"job{i:02d}", SHADOW_TENANT, float(at), float(at + length), float(length), StepSpec())
        for i, (at, length) in enumerate(zip(offsets.tolist(), lengths.tolist()))
    )


def _utc(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


class ManagedScalingOnMoto:
    """Makes moto's cluster follow the managed twin's nodes and steps (times from the twin's 0 = START_S)."""

    def __init__(self, client, cluster_id: str, managed_twin, moto_step) -> None:
        self.client, self.cluster_id, self.moto_step = client, cluster_id, moto_step
        self.times_s, self.nodes = nodes_over_time(managed_twin)
        self.runs = sorted(managed_twin.steps.values(), key=lambda run: run.added_s)
        self.step_ids: dict[str, str] = {}  # job id -> moto step id
        group = next(g for g in client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"] if g["InstanceGroupType"] == "TASK")
        self.group_id, self.count = group["Id"], group["RequestedInstanceCount"]
        self.writes = 0

    def at(self, time_s: float) -> None:
        at = np.searchsorted(self.times_s, time_s, side="right") - 1
        count = int(self.nodes[at]) if at >= 0 else 0
        if count != self.count:
            self.client.modify_instance_groups(ClusterId=self.cluster_id, InstanceGroups=[{"InstanceGroupId": self.group_id, "InstanceCount": count}])
            self.count = count
            self.writes += 1
        for run in self.runs:
            if run.added_s > time_s:
                break
            if run.job_id not in self.step_ids:
                added = self.client.add_job_flow_steps(
                    JobFlowId=self.cluster_id,
                    Steps=[{"Name": run.job_id, "ActionOnFailure": "CONTINUE", "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["true"]}}],
                )
                self.step_ids[run.job_id] = added["StepIds"][0]
                self.writes += 1
                step = self.moto_step(self.cluster_id, self.step_ids[run.job_id])
                step.creation_date_time, step.state = _utc(START_S + run.added_s), "PENDING"
            step = self.moto_step(self.cluster_id, self.step_ids[run.job_id])
            if run.start_s is not None and run.start_s <= time_s and step.state == "PENDING":
                step.state, step.start_date_time = "RUNNING", _utc(START_S + run.start_s)
            if run.end_s is not None and run.end_s <= time_s and step.state == "RUNNING":
                step.state, step.end_date_time = "COMPLETED", _utc(START_S + run.end_s)


@pytest.fixture
def task_cluster(emr):
    """A cluster in moto with MASTER 1, CORE 1 and an empty TASK group; (resizer's client, cluster id)."""
    groups = [
        {"Name": "master", "InstanceRole": "MASTER", "InstanceType": "m5.xlarge", "InstanceCount": 1},
        {"Name": "core", "InstanceRole": "CORE", "InstanceType": "m5.xlarge", "InstanceCount": 1},
        {"Name": "task", "InstanceRole": "TASK", "InstanceType": "m5.xlarge", "InstanceCount": 0},
    ]
    response = emr.run_job_flow(
        Name="shadow-test", ReleaseLabel="emr-7.1.0", JobFlowRole="EMR_EC2_DefaultRole", ServiceRole="EMR_DefaultRole",
        Instances={"InstanceGroups": groups, "KeepJobFlowAliveWhenNoSteps": True},
    )  # fmt: skip
    return emr, response["JobFlowId"]


def shadow_beside_managed(client, cluster_id, endpoint, moto_step, jobs, window_slots: int, deadline_slots: int, max_nodes: int):
    """The jobs run on moto's cluster as managed scaling would run them, the shadow watching; returns
    (the shadow's whole figures, compare's managed row, compare's hold row, the resizer, the shadow)."""
    settings = Settings(deadline_slots=deadline_slots, cluster={"max_nodes": max_nodes})
    twin = TwinConfig()
    g_per_kwh = 300.0 + 100.0 * np.sin(np.arange(10 * (window_slots + deadline_slots)) / 7.0)  # a carbon signal per slot from the start
    inputs = CompareInputs(tuple(jobs), window_slots, settings, twin, 0, max_nodes, g_per_kwh=g_per_kwh)
    managed = run_task(inputs, "managed", deadline_slots).figures
    hold = run_task(inputs, "hold", deadline_slots).figures
    managed_twin = run_baseline("managed", inputs.jobs_at(deadline_slots), twin, min_nodes=0, max_nodes=max_nodes, start_s=0.0)
    resizer = ManagedScalingOnMoto(client, cluster_id, managed_twin, moto_step)

    clock = SimulatedClock(START_S)
    reader = ReadOnlyEmr(emr_client(REGION, endpoint, boto3.Session()), cluster_id)
    shadow = ShadowRun(reader, clock, settings, twin, g_per_kwh_at=lambda slot_start_s: g_per_kwh[round((slot_start_s - START_S) / SLOT_S)])
    # Until compare's horizon, as compare ends a policy's run (managed scaling's steps have all ended by then).
    end_s = (window_slots + deadline_slots) * SLOT_S
    assert max(run.end_s for run in managed_twin.steps.values()) <= end_s
    ticks_per_slot = round(SLOT_S / MANAGED_INTERVAL_S)
    for tick in range(round(end_s / MANAGED_INTERVAL_S) + 1):
        clock.time_s = START_S + tick * MANAGED_INTERVAL_S
        resizer.at(tick * MANAGED_INTERVAL_S)
        if tick % ticks_per_slot == 0:
            shadow.run_slot()
        else:
            shadow.poll()
    assert all(step.ended for step in shadow.steps.values()) and len(shadow._fed) == len(inputs.jobs)
    return shadow.finish(), managed, hold, resizer, shadow, reader, inputs


def test_shadow_beside_managed_scaling_equals_compare_within_one_percent(task_cluster, moto_endpoint, moto_step):
    client, cluster_id = task_cluster
    figures, managed, hold, resizer, shadow, reader, inputs = shadow_beside_managed(
        client, cluster_id, moto_endpoint, moto_step, workload(), WINDOW_SLOTS, D, MAX_NODES
    )
    first = round(START_S / SLOT_S)
    assert [s.slot for s in shadow.slots] == list(range(first, first + WINDOW_SLOTS + D))

    # What hold would have run is compare's hold row: the same slot loop on the same twin and jobs.
    for field in ("node_hours", "cost_usd", "energy_kwh", "co2_kg"):
        assert getattr(figures.shadow, field) == pytest.approx(getattr(hold, field), rel=1e-9), field
    # The cluster as it ran is compare's managed row, within what polling every 10 s misses (a node
    # removed between polls is counted to the next) and the twin's 60 s minimum per node.
    assert figures.actual.node_hours == pytest.approx(managed.node_hours, rel=0.01)
    assert figures.actual.energy_kwh == pytest.approx(managed.energy_kwh, rel=0.01)
    assert figures.actual.cost_usd == pytest.approx(managed.cost_usd, rel=0.01)
    assert figures.actual.co2_kg == pytest.approx(managed.co2_kg, rel=0.01)
    for field in ("node_hours", "cost_usd", "energy_kwh", "co2_kg"):
        compare_difference = getattr(hold, field) - getattr(managed, field)
        assert getattr(figures.difference, field) == pytest.approx(compare_difference, rel=0.01, abs=0.01 * abs(getattr(managed, field))), field

    # Every write the cluster saw was the resizer's: the shadow's client refuses them before sending.
    def steps_on_cluster() -> int:
        return len(client.list_steps(ClusterId=cluster_id)["Steps"])

    def task_nodes() -> int:
        return next(g for g in client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"] if g["InstanceGroupType"] == "TASK")["RequestedInstanceCount"]

    assert steps_on_cluster() == len(inputs.jobs) and task_nodes() == resizer.count
    with pytest.raises(ShadowWriteRefused):
        reader.client.modify_instance_groups(ClusterId=cluster_id, InstanceGroups=[{"InstanceGroupId": resizer.group_id, "InstanceCount": 9}])
    with pytest.raises(ShadowWriteRefused):
        reader.client.add_job_flow_steps(JobFlowId=cluster_id, Steps=[{"Name": "x", "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["true"]}}])
    with pytest.raises(ShadowWriteRefused):
        reader.client.cancel_steps(ClusterId=cluster_id, StepIds=[resizer.step_ids["job00"]])
    with pytest.raises(ShadowWriteRefused):
        reader.resize(3)
    with pytest.raises(ShadowWriteRefused):
        reader.add_step(inputs.jobs[0])
    assert steps_on_cluster() == len(inputs.jobs) and task_nodes() == resizer.count


def test_run_shadow_on_the_command_line_publishes_each_slot_it_plays_and_writes_nothing(task_cluster, moto_server, moto_step, tmp_path):
    import json
    import os
    import signal
    import subprocess
    import sys
    import urllib.request

    from conftest import ProcessLog

    client, cluster_id = task_cluster
    group_id = next(g for g in client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"] if g["InstanceGroupType"] == "TASK")["Id"]
    client.modify_instance_groups(ClusterId=cluster_id, InstanceGroups=[{"InstanceGroupId": group_id, "InstanceCount": 2}])  # the cluster's own scaling
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        f'slot_s = 2\ndeadline_slots = 1\nlog_format = "json"\nhealth_port = 0\nstore_path = "{tmp_path / "jobs.db"}"\n'
        f'[cluster]\nid = "{cluster_id}"\nregion = "{REGION}"\nendpoint_url = "{moto_server}"\nmax_nodes = 10\n'
    )
    decisions = tmp_path / "shadow.jsonl"
    command = [sys.executable, "-m", "autoscaler", "run", "--shadow", "--config", str(config_path), "--shadow-poll-s", "1", "--decisions-out", str(decisions)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    log = ProcessLog(process)
    try:
        assert log.wait_for_count("shadow_serving", 1, timeout_s=60), log.text
        metrics_url = log.of("shadow_serving")[0]["metrics"]
        step_ids = client.add_job_flow_steps(
            JobFlowId=cluster_id,
            Steps=[{"Name": f"nightly-{i}", "ActionOnFailure": "CONTINUE", "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["true"]}} for i in range(3)],
        )["StepIds"]
        for step_id in step_ids:  # EMR runs them at once for half a second (moto runs none)
            step = moto_step(cluster_id, step_id)
            step.start_date_time = step.creation_date_time + datetime.timedelta(seconds=0.1)
            step.end_date_time = step.creation_date_time + datetime.timedelta(seconds=0.6)
            step.state = "COMPLETED"
        assert log.wait_for(lambda: sum(e.get("released", 0) for e in log.of("shadow_slot")) >= 3, "the shadow releasing the 3 steps", timeout_s=60), log.text
        with urllib.request.urlopen(metrics_url, timeout=10) as response:
            text = response.read().decode()
        process.send_signal(signal.SIGTERM)
        assert log.finish(timeout_s=60) == 0, log.text
    finally:
        if process.poll() is None:
            process.kill()
    assert "autoscaler_shadow_jobs_released_total 3.0" in text
    assert 'autoscaler_shadow_node_hours{schedule="actual"}' in text and 'autoscaler_shadow_energy_saved_wh ' in text
    lines = [json.loads(line) for line in decisions.read_text().splitlines()]
    assert sorted(s for line in lines for s in line["released"]) == sorted(step_ids)
    assert all(line["actual"]["node_hours"] > 0 for line in lines)  # the group's 2 nodes, from the shadow's start
    cloudwatch = boto3.client("cloudwatch", region_name=REGION, endpoint_url=moto_server)
    published = {(m["MetricName"], {d["Name"]: d["Value"] for d in m["Dimensions"]}["Schedule"]) for m in cloudwatch.list_metrics(Namespace="DeferralAutoscaler")["Metrics"]}
    assert {("NodeHours", "actual"), ("NodeHours", "shadow:hold"), ("NodeHoursSaved", "shadow:hold"), ("SavedWh", "shadow:hold"), ("CostSavedDollars", "shadow:hold")} <= published
    # Nothing written: the steps are the 3 added here, the TASK group as the cluster's scaling left it.
    assert len(client.list_steps(ClusterId=cluster_id)["Steps"]) == 3
    assert next(g for g in client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"] if g["InstanceGroupType"] == "TASK")["RequestedInstanceCount"] == 2



@pytest.mark.slow
def test_shadow_beside_managed_scaling_on_two_hours_of_workload_a(task_cluster, moto_endpoint, moto_step):
    """The first 2 h of Workload A (each job one node, its length cut at the window's end as compare
    cuts it), D = 6, 100 nodes at most: the same agreement on a recorded load."""
    import dataclasses
    from importlib import resources

    from autoscaler.app.replay_daemon import trace_jobs
    from autoscaler.core.workload import read_swim

    window_slots = 24
    with resources.as_file(resources.files("autoscaler") / "data" / "FB-2009_samples_24_times_1hr_0.tsv") as path:
        trace = read_swim(path)
    jobs = sorted(trace_jobs(trace, 0, SLOT_S, window_slots * SLOT_S), key=lambda job: job.submit_s)
    jobs = [dataclasses.replace(job, tenant=SHADOW_TENANT) for job in jobs]
    client, cluster_id = task_cluster
    figures, managed, hold, *_ = shadow_beside_managed(client, cluster_id, moto_endpoint, moto_step, jobs, window_slots, D, 100)
    print(f"jobs {len(jobs)}; shadow {figures.to_dict()}; compare managed {managed}; compare hold {hold}")
    for field in ("node_hours", "cost_usd", "energy_kwh", "co2_kg"):
        assert getattr(figures.shadow, field) == pytest.approx(getattr(hold, field), rel=0.01), field
        assert getattr(figures.actual, field) == pytest.approx(getattr(managed, field), rel=0.01), field


def test_shadow_gives_up_on_an_unreachable_emr_after_the_configs_startup_wait(tmp_path):
    # startup_wait_s = 0: one try, then OutageError; the shadow once ignored it and tried for 300 s.
    import boto3

    from autoscaler.app.config import ClusterSettings, Settings
    from autoscaler.app.shadow_run import shadow_watch
    from autoscaler.core.errors import OutageError
    from autoscaler.core.twin import TwinConfig

    settings = Settings(cluster=ClusterSettings(id="j-UNREACHABLE", region="us-east-1", endpoint_url="http://127.0.0.1:9"), startup_wait_s=0)
    with pytest.raises(OutageError):
        shadow_watch(settings, deadline_slots=None, twin=TwinConfig(), session=boto3.Session(aws_access_key_id="k", aws_secret_access_key="s"))
