"""The dry run is the live slot loop on shadows: slot after slot it decides what the live daemon does.

Against moto's EMR over HTTP with the real boto3 client. The dry run runs first, on a store the
test keeps submitting to; it must leave the cluster and that store as they were. The live daemon
then runs the same slots on the same cluster; moto never advances step states, so the test
completes each step once its job's estimated length has passed on the simulated clock, which is
the rule the dry run's simulated cluster follows. Both must decide the same m_t, nodes and jobs
released in every slot.
"""

from __future__ import annotations

import hashlib

import pytest

from autoscaler.adapters.emr import EmrCluster
from autoscaler.adapters.fakes import SimulatedClock
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app import compose
from autoscaler.app.config import Settings
from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.core.controller import Decision
from autoscaler.core.model import Job

from conftest import REGION
from test_daemon import TAU, our_steps, workload_a


def _settings(cluster_id: str, endpoint: str, store_path, policy: str, work_model: str = "job-slots") -> Settings:
    return Settings(
        work_model=work_model,
        cluster={"id": cluster_id, "region": REGION, "endpoint_url": endpoint, "max_nodes": 10_000},
        store_path=store_path,
        policy=policy,
        deadline_slots=2,
        slot_s=TAU,
    )


def run_slots(settings: Settings, jobs: list[Job], slots: int, dry_run: bool, cluster, complete=None) -> list[tuple]:
    """Slots 0 .. ``slots`` - 1 on a simulated clock, each after submitting the jobs of its slot to
    the real store (what submitters write to, in both runs) and, if given, ``complete(store, now_s)``;
    returns per slot (slot, m_t, nodes, released job ids)."""
    clock = SimulatedClock(0.0)
    decided = []
    submitted = 0
    with SqliteJobStore(settings.store_path) as users:
        with compose.daemon_runner(settings, dry_run=dry_run, clock=clock, cluster=cluster) as runner:
            for slot in range(slots):
                clock.time_s = slot * settings.slot_s
                arriving = submitted
                while submitted < len(jobs) and jobs[submitted].submit_s < (slot + 1) * settings.slot_s:
                    submitted += 1
                users.submit_many(jobs[arriving:submitted])
                if complete is not None:
                    complete(users, clock.time_s)
                decision = runner.run_slot()
                decided.append((decision.slot, round(decision.capacity, 9), decision.nodes, decision.release))
    return decided


def dry_then_live(client, cluster_id: str, set_step_state, settings_at, jobs: list[Job], slots: int) -> tuple[list, list]:
    """The dry run, then the live daemon, over ``slots`` slots of the same jobs on the same cluster;
    ``settings_at(store_name)`` gives each its settings. Checks that the dry run changed nothing on
    the cluster or in the store it watched; returns both runs' (slot, m_t, nodes, released ids)."""
    cluster = EmrCluster(client, cluster_id)
    watched = settings_at("watched.db")
    dry = run_slots(watched, jobs, slots, dry_run=True, cluster=cluster)
    assert our_steps(client, cluster_id) == []
    assert cluster.task_group().requested == 0
    with SqliteJobStore(watched.store_path) as store:
        assert store.last_slot() is None and store.decisions() == []
        assert {job.state for job in store.all_jobs()} == {"queued"}
        assert len(store.all_jobs()) == len(jobs)

    lengths_s = {job.job_id: job.length_s for job in jobs}

    def complete(store, now_s: float) -> None:
        released = {job.step_id: job for job in store.active_jobs() if job.step_id}
        for step in our_steps(client, cluster_id):
            job = released.get(step["Id"])
            if job is not None and step["Status"]["State"] in ("PENDING", "RUNNING") and job.released_s + lengths_s[job.job_id] <= now_s:
                set_step_state(cluster_id, step["Id"], "COMPLETED")

    live = run_slots(settings_at("live.db"), jobs, slots, dry_run=False, cluster=cluster, complete=complete)
    assert len(dry) == len(live) == slots
    first_difference = next((i for i, (a, b) in enumerate(zip(dry, live)) if a != b), None)
    assert first_difference is None, f"slot {first_difference}: dry {dry[first_difference]} != live {live[first_difference]}"
    return dry, live


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("policy, work_model", [("hold", "job-slots"), ("gcp-u", "job-slots"), ("hold", "node-seconds")])
@pytest.mark.parametrize("window_slots", [pytest.param(36, id="3h"), pytest.param(288, id="day", marks=pytest.mark.slow)])
@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_a_dry_run_decides_every_slot_as_the_live_daemon_and_changes_nothing(
    emr_cluster_id, moto_endpoint, set_step_state, tmp_path, policy, work_model, window_slots
):
    # Under "node-seconds" several short jobs go out per node and slot: the two runs still agree.
    client, cluster_id = emr_cluster_id
    jobs = sorted(trace_jobs(workload_a(window_slots), 2, TAU, window_slots * TAU), key=lambda j: j.submit_s)
    slots = window_slots + 2
    _, live = dry_then_live(
        client, cluster_id, set_step_state, lambda store: _settings(cluster_id, moto_endpoint, tmp_path / store, policy, work_model), jobs, slots
    )
    assert sum(len(released) for *_, released in live) == len(jobs)
    if work_model == "node-seconds":  # the jobs did share nodes: some slot released more jobs than it had nodes
        assert any(len(released) > nodes for _, _, nodes, released in live)


@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_a_dry_run_beside_a_live_daemon_changes_nothing_in_its_store(emr_cluster_id, moto_endpoint, tmp_path):
    client, cluster_id = emr_cluster_id
    settings = _settings(cluster_id, moto_endpoint, tmp_path / "shared.db", "hold")
    jobs = sorted(trace_jobs(workload_a(12), 2, TAU, 12 * TAU), key=lambda j: j.submit_s)
    cluster = EmrCluster(client, cluster_id)
    clock = SimulatedClock(0.0)
    with compose.daemon_runner(settings, dry_run=False, clock=clock, cluster=cluster) as live:
        with SqliteJobStore(settings.store_path) as users:
            users.submit_many(jobs)
        for slot in range(6):
            clock.time_s = slot * TAU
            live.run_slot()
        steps_before = our_steps(client, cluster_id)
        # The database and its WAL hold the data; -shm is SQLite's shared index of the WAL, which
        # every reader updates, and the lock file is the live daemon's.
        store_files = [tmp_path / "shared.db", tmp_path / "shared.db-wal"]
        before = {path.name: _digest(path) for path in store_files}
        with compose.daemon_runner(settings, dry_run=True, clock=clock, cluster=cluster) as dry:
            for slot in range(6, 12):
                clock.time_s = slot * TAU
                assert dry.run_slot() is not None
        assert {path.name: _digest(path) for path in store_files} == before
        assert our_steps(client, cluster_id) == steps_before
        # The live daemon goes on where it was: the dry run's slots are not in its store.
        clock.time_s = 6 * TAU
        assert live.run_slot().slot == 6


@pytest.mark.long
@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_hold_carbon_against_moto_defers_by_the_signal_and_its_dry_run_agrees(emr_cluster_id, moto_endpoint, set_step_state, tmp_path):
    # A signal of 500 g except 100 g from 02:00 to 03:00 UTC (slots 24..35) on the simulated clock's
    # day (from 1970-01-01), with the day before; D = 24 slots: work submitted in the first two hours
    # can wait for the clean hour.
    client, cluster_id = emr_cluster_id
    lines = ["time,value"] + [f"{_iso(k * TAU)},{100.0 if 24 <= k % 288 < 36 else 500.0}" for k in range(-288, 2 * 288)]
    signal = tmp_path / "carbon.csv"
    signal.write_text("\n".join(lines) + "\n")
    jobs = sorted(trace_jobs(workload_a(24), 24, TAU, 24 * TAU), key=lambda j: j.submit_s)
    lengths_s = {job.job_id: job.length_s for job in jobs}
    cluster = EmrCluster(client, cluster_id)

    def settings(store: str, source) -> Settings:
        base = _settings(cluster_id, moto_endpoint, tmp_path / store, "hold")
        carbon = {"source": str(source), "unit": "gCO2eq/kWh"} if source else {}
        return base.model_copy(update={"deadline_slots": 24, "carbon": base.carbon.model_copy(update=carbon)})

    def complete(store, now_s: float) -> None:
        released = {job.step_id: job for job in store.active_jobs() if job.step_id}
        for step in our_steps(client, cluster_id):
            job = released.get(step["Id"])
            if job is not None and step["Status"]["State"] in ("PENDING", "RUNNING") and job.released_s + lengths_s[job.job_id] <= now_s:
                set_step_state(cluster_id, step["Id"], "COMPLETED")

    slots = 50
    dry = run_slots(settings("watched.db", signal), jobs, slots, dry_run=True, cluster=cluster)
    assert our_steps(client, cluster_id) == [] and cluster.task_group().requested == 0
    live = run_slots(settings("live.db", signal), jobs, slots, dry_run=False, cluster=cluster, complete=complete)
    assert dry == live
    with SqliteJobStore(tmp_path / "live.db") as store:
        decisions = [Decision.from_json(record) for record in store.decisions()]
        assert {job.state for job in store.all_jobs()} <= {"running", "done"}
        assert not any(d.late or d.missed for d in decisions)
    # Until the clean hour has passed the window holds it; after it the next 73 slots are all 500 g: flat.
    assert {d.carbon_mode for d in decisions if d.slot < 36} == {"carbon"}
    assert {d.carbon_mode for d in decisions if d.slot >= 36} == {"flat"}
    # Carbon-blind hold on the same jobs (its dry run decides as its live loop would): hold+carbon runs
    # more node-slots in the clean hour, and fewer node-slots weighted by the signal (its emissions at
    # a fixed power per node) over the whole run.
    blind = run_slots(settings("blind.db", None), jobs, slots, dry_run=True, cluster=cluster)

    def intensity(slot: int) -> float:
        return 100.0 if 24 <= slot % 288 < 36 else 500.0

    def node_slots(run, first: int, end: int) -> float:
        return sum(m for slot, m, *_ in run if first <= slot < end)

    def weighted(run) -> float:
        return sum(m * intensity(slot) for slot, m, *_ in run)

    assert node_slots(live, 24, 36) > node_slots(blind, 24, 36)
    assert weighted(live) < weighted(blind)
    assert cluster.task_group().requested == decisions[-1].nodes


def _iso(time_s: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(time_s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
