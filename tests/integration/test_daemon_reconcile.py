"""What the slot loop reads back from EMR (moto's server over HTTP, the real boto3 client): when a
step found on restart was really added, the TASK group's size as EMR holds it after the slot's
resize, and steps of ours that the store does not know (a store restored from an older backup)."""

from __future__ import annotations

import time

import pytest
import structlog

from autoscaler.adapters.emr import EmrCluster
from autoscaler.adapters.fakes import SimulatedClock
from autoscaler.adapters.health import Telemetry
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.daemon import SlotRunner
from autoscaler.core.controller import ControllerConfig
from autoscaler.core.model import Job, StepSpec

TAU = 300.0


def job(job_id: str, submit_s: float, deadline_s: float, length_s: float = TAU) -> Job:
    return Job(job_id, job_id, "ads", submit_s, deadline_s, length_s, StepSpec(args=("true",)))


def emr_requested(client, cluster_id: str) -> int:
    groups = client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"]
    return next(int(g["RequestedInstanceCount"]) for g in groups if g["InstanceGroupType"] == "TASK")


def test_a_step_found_on_restart_is_released_when_emr_added_it(emr_cluster_id, tmp_path):
    """Issue 20, finding 18: a step added just before a crash is found by the next start; its job
    was released when EMR created the step, not when the restart found it, slots later."""
    client, cluster_id = emr_cluster_id
    added_wall_s = time.time()
    submitted = job("late-looking", added_wall_s - 60.0, added_wall_s + 2 * TAU)
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        store.submit(submitted)
        cluster = EmrCluster(client, cluster_id)
        step_id = cluster.add_step(submitted)  # then the daemon was killed before it recorded the step
        created_s = client.describe_step(ClusterId=cluster_id, StepId=step_id)["Step"]["Status"]["Timeline"]["CreationDateTime"].timestamp()
        # The restart comes an hour later, long past the job's deadline.
        clock = SimulatedClock(added_wall_s + 3600.0)
        config = ControllerConfig(policy="follow", deadline_slots=2, slot_s=TAU, max_nodes=10)
        SlotRunner(config=config, store=store, cluster=cluster, clock=clock).run_slot()
        (stored,) = store.all_jobs()
    assert stored.step_id == step_id
    assert stored.released_s == pytest.approx(created_s, abs=1e-3)
    assert stored.released_s <= submitted.deadline_s  # on EMR in time: not a late job


@pytest.mark.parametrize("emr_cluster_id", [2], indirect=True)
def test_nodes_requested_is_what_emr_holds_after_the_slot(emr_cluster_id, tmp_path):
    """Issue 20, finding 18: ``autoscaler_nodes_requested`` was read before the slot's resize and
    lagged EMR by a slot; after each slot it equals the TASK group's RequestedInstanceCount."""
    client, cluster_id = emr_cluster_id
    clock = SimulatedClock(0.0)
    telemetry = Telemetry(TAU, clock=clock.now_s)
    config = ControllerConfig(policy="follow", deadline_slots=0, slot_s=TAU, max_nodes=100)
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        store.submit_many([job(f"j{i}", 0.0, 2 * TAU) for i in range(5)])
        runner = SlotRunner(config=config, store=store, cluster=EmrCluster(client, cluster_id), clock=clock, telemetry=telemetry)
        seen = []
        for _ in range(3):
            decision = runner.run_slot()
            seen.append((decision.nodes, telemetry.registry.get_sample_value("autoscaler_nodes_requested"), emr_requested(client, cluster_id)))
            clock.advance(TAU)
    assert seen[0][0] == 5 and seen[0][2] == 5  # EMR was asked for the 5 due jobs' nodes
    assert all(gauge == requested for _, gauge, requested in seen), seen


def test_steps_of_ours_the_store_does_not_know_are_reported(emr_cluster_id, tmp_path):
    """Issue 20, finding 16: after a restore from an older backup, EMR holds steps named
    ``autoscaler:<id>`` for jobs the store lacks; the first slot names them in the log and counts
    them in ``autoscaler_steps_unknown_to_store``, and leaves them alone."""
    client, cluster_id = emr_cluster_id
    cluster = EmrCluster(client, cluster_id)
    clock = SimulatedClock(0.0)
    telemetry = Telemetry(TAU, clock=clock.now_s)
    config = ControllerConfig(policy="follow", deadline_slots=2, slot_s=TAU, max_nodes=10)
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        store.submit(job("known", 0.0, 3 * TAU))
        for name in ("gone-1", "gone-2"):  # released by the store that was replaced
            cluster.add_step(job(name, 0.0, 3 * TAU))
        client.add_job_flow_steps(  # not ours: another prefix
            JobFlowId=cluster_id, Steps=[{"Name": "etl:nightly", "ActionOnFailure": "CONTINUE", "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["true"]}}]
        )
        runner = SlotRunner(config=config, store=store, cluster=cluster, clock=clock, telemetry=telemetry)
        with structlog.testing.capture_logs() as logged:
            runner.run_slot()
        assert [j.job_id for j in store.all_jobs()] == ["known"]
    (event,) = [e for e in logged if e["event"] == "steps_unknown_to_store"]
    assert event["job_ids"] == ["gone-1", "gone-2"] and event["count"] == 2
    assert telemetry.registry.get_sample_value("autoscaler_steps_unknown_to_store") == 2
    # Left alone: still two steps of ours for them, one for the known job, none added twice.
    names = sorted(s["Name"] for s in client.list_steps(ClusterId=cluster_id)["Steps"])
    assert names == ["autoscaler:gone-1", "autoscaler:gone-2", "autoscaler:known", "etl:nightly"]


def test_a_step_of_an_earlier_job_with_the_same_id_is_not_taken_for_a_new_stores_job(emr_cluster_id, tmp_path):
    # A cluster whose history has the step of job "nightly" (an earlier store's, done), and a new
    # store where "nightly" is submitted again a day later: the new job runs a step of its own.
    client, cluster_id = emr_cluster_id
    cluster = EmrCluster(client, cluster_id)
    earlier_s = time.time()
    old_step = cluster.add_step(job("nightly", earlier_s - 600.0, earlier_s + 3600.0))
    now_s = earlier_s + 86400.0
    with SqliteJobStore(tmp_path / "fresh.db") as store:
        store.submit(job("nightly", now_s - 60.0, now_s + 1.5 * TAU))  # due at once
        config = ControllerConfig(policy="follow", deadline_slots=2, slot_s=TAU, max_nodes=10)
        with structlog.testing.capture_logs() as logged:
            SlotRunner(config=config, store=store, cluster=cluster, clock=SimulatedClock(now_s)).run_slot()
        (stored,) = store.all_jobs()
    assert stored.state == "released" and stored.step_id not in (None, old_step)
    assert stored.released_s == now_s
    steps = client.list_steps(ClusterId=cluster_id)["Steps"]
    assert sorted(s["Id"] for s in steps) == sorted([old_step, stored.step_id])
    (warning,) = [e for e in logged if e["event"] == "step_of_an_earlier_job"]
    assert (warning["job_id"], warning["step_id"]) == ("nightly", old_step)
