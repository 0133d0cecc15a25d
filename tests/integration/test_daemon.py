"""The daemon's slot loop against moto's EMR server over HTTP, with the real boto3 client.

moto never advances step states: the tests complete steps themselves through moto's
in-process backend (the ``set_step_state`` fixture), when a job's estimated length
has passed on the simulated clock.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from importlib import resources

import numpy as np
import pytest

from autoscaler.adapters.emr import EmrCluster
from autoscaler.adapters.fakes import SimulatedClock
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.daemon import SlotRunner
from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.core.controller import ControllerConfig, start_by_slot
from autoscaler.core.model import CostParams, Trace
from autoscaler.core.policies import plan
from autoscaler.core.workload import read_swim, workload_from_trace

from conftest import ProcessLog, StepsRunForTheirLength

TAU = 300.0
WINDOW_SLOTS = 48  # the paper's cluster experiment: 4 hours of 5-minute slots (§VII-A)


def workload_a(window_slots: int) -> Trace:
    with resources.as_file(resources.files("autoscaler") / "data" / "FB-2009_samples_24_times_1hr_0.tsv") as path:
        trace = read_swim(path)
    return Trace(trace.path, tuple(j for j in trace.jobs if j.submit_s < window_slots * TAU))


def write_swim(path, trace: Trace) -> None:
    """``trace``'s jobs as a SWIM file (six tab-separated columns), for ``autoscaler run --replay``."""
    path.write_text(
        "".join(
            f"{j.job_id}\t{j.submit_s:g}\t{j.gap_s:g}\t{j.map_input_bytes:g}\t{j.shuffle_bytes:g}\t{j.reduce_output_bytes:g}\n"
            for j in trace.jobs
        )
    )


def our_steps(client, cluster_id: str) -> list[dict]:
    steps = []
    for page in client.get_paginator("list_steps").paginate(ClusterId=cluster_id):
        steps += [s for s in page["Steps"] if s["Name"].startswith("autoscaler:")]
    return steps


@pytest.mark.parametrize("policy", ["hold", "gcp-u"])
@pytest.mark.parametrize(
    "window_slots", [pytest.param(48, id="4h"), pytest.param(288, id="whole-day", marks=pytest.mark.slow)]
)
@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_slots_follow_the_policy_and_release_every_job_by_edf_before_its_deadline(
    emr_cluster_id, set_step_state, tmp_path, window_slots, policy
):
    client, cluster_id = emr_cluster_id
    deadline_slots = 2
    trace = workload_a(window_slots)
    jobs = sorted(trace_jobs(trace, deadline_slots, TAU, window_slots * TAU), key=lambda j: j.submit_s)
    by_id = {j.job_id: j for j in jobs}
    config = ControllerConfig(policy=policy, deadline_slots=deadline_slots, slot_s=TAU, max_nodes=10_000)
    clock = SimulatedClock(0.0)
    cluster = EmrCluster(client, cluster_id)
    requested = []
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        runner = SlotRunner(config=config, store=store, cluster=cluster, clock=clock)
        submitted = 0
        for slot in range(window_slots + deadline_slots):
            clock.time_s = slot * TAU
            released_s = {j.job_id: j.released_s for j in store.active_jobs()}
            for status in cluster.steps(active_only=True):  # finish what has run its length
                released = released_s.get(status.job_id)
                if released is not None and released + by_id[status.job_id].length_s <= clock.time_s:
                    set_step_state(cluster_id, status.step_id, "COMPLETED")
            while submitted < len(jobs) and jobs[submitted].submit_s < (slot + 1) * TAU:
                store.submit(jobs[submitted])
                submitted += 1
            decision = runner.run_slot()
            requested.append(cluster.task_group().requested)
            assert requested[-1] == decision.nodes
        decisions = store.decisions()
        stored = {j.job_id: j for j in store.all_jobs()}

    # The TASK group followed the decisions, and the decisions are autoscaler replay's.
    assert requested == [d["nodes"] for d in decisions]
    expected = plan(policy, workload_from_trace(trace, window_slots=window_slots).active, deadline_slots, CostParams())
    np.testing.assert_allclose([d["capacity"] for d in decisions], expected.capacity, atol=1e-9)
    # Every job released once, in EDF order within its slot, and by its start-by slot.
    steps = our_steps(client, cluster_id)
    assert Counter(s["Name"] for s in steps) == Counter(f"autoscaler:{j.job_id}" for j in jobs)
    for d in decisions:
        order = [start_by_slot(by_id[i], config) for i in d["release"]]
        assert order == sorted(order)
        assert not d["late"]
    for job in jobs:
        assert stored[job.job_id].released_s is not None
        assert config.slot_of(stored[job.job_id].released_s) <= start_by_slot(job, config)


@pytest.mark.long
@pytest.mark.parametrize(
    "kills_planned, window_slots",
    [pytest.param(6, 48, id="6-kills-4h"), pytest.param(20, 96, id="20-kills-8h", marks=pytest.mark.slow)],
)
@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_sigkill_at_random_points_loses_no_job_and_submits_none_twice(
    emr_cluster_id, moto_server, tmp_path, kills_planned, window_slots
):
    client, cluster_id = emr_cluster_id
    trace_path = tmp_path / "trace.tsv"
    trace = workload_a(window_slots)
    write_swim(trace_path, trace)
    store_path = tmp_path / "jobs.db"
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        f'policy = "gcp-u"\ndeadline_slots = 2\nstore_path = "{store_path}"\nlog_format = "json"\n'
        f'[cluster]\nid = "{cluster_id}"\nregion = "us-east-1"\nendpoint_url = "{moto_server}"\nmax_nodes = 100000\n'
    )
    slot_real_s = 0.05
    command = [
        sys.executable, "-m", "autoscaler", "run", "--config", str(config_path), "--replay", str(trace_path),
        "--store", str(store_path), "--speedup", str(TAU / slot_real_s),
    ]  # fmt: skip

    def committed_slots() -> int:
        if not store_path.exists():
            return 0
        with SqliteJobStore(store_path) as store:
            return len(store.decisions())

    config = ControllerConfig(policy="gcp-u", deadline_slots=2, slot_s=TAU, max_nodes=100_000)
    jobs = {j.job_id: j for j in trace_jobs(trace, 2, TAU, window_slots * TAU)}
    # EMR runs the steps, so the cluster's list of active steps stays as short as it would be.
    emr_runs = StepsRunForTheirLength(cluster_id, {job_id: j.length_s for job_id, j in jobs.items()}, TAU)

    # Each run is killed after it has logged 1 to 3 slots, at a random point of the pause and the
    # slot after (as long as its last slot took): what it has done decides when, not the wall
    # clock, so every kill lands mid-replay however slow the machine.
    rng = random.Random(20)
    kills = []  # per kill: (slots the run logged, slots it committed)
    while len(kills) < kills_planned:
        committed_before = committed_slots()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
        log = ProcessLog(process, on_event=emr_runs)
        logged_before_kill = rng.randint(1, 3)
        try:
            running = log.wait_for_count("slot", logged_before_kill)
            if running:
                slot_work_s = log.of("slot")[-1]["slot_ms"] / 1000
                time.sleep(rng.uniform(0.0, slot_real_s + slot_work_s))
        finally:
            process.send_signal(signal.SIGKILL)
            log.finish()
        if not running:
            break  # the replay ended before this kill
        kills.append((log.count("slot"), committed_slots() - committed_before))
    # The rest of the day uninterrupted, with shorter pauses between slots: nothing is timed in it.
    command[-1] = str(TAU / 0.01)
    final = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    log = ProcessLog(final, on_event=emr_runs)
    assert log.finish(timeout_s=600) == 0, log.text[-2000:]
    print(f"\n{len(kills)} kills; slots logged and committed by each killed run: {kills}; steps completed: {emr_runs.completed}")

    steps = our_steps(client, cluster_id)
    names = Counter(s["Name"] for s in steps)
    assert len(kills) == kills_planned, f"the replay ended after {len(kills)} of {kills_planned} kills"
    # A slot is logged after it is committed: a kill can cut off at most the log line of one slot.
    assert all(committed - logged in (0, 1) for logged, committed in kills), kills
    assert all(count == 1 for count in names.values()), [n for n, c in names.items() if c > 1]
    assert set(names) == {f"autoscaler:{job_id}" for job_id in jobs}
    with SqliteJobStore(store_path) as store:
        stored = {j.job_id: j for j in store.all_jobs()}
        decisions = store.decisions()
    assert set(stored) == set(jobs)
    for job_id, job in jobs.items():
        assert stored[job_id].state != "queued"
        assert config.slot_of(stored[job_id].released_s) <= start_by_slot(job, config), job_id
    assert [d["slot"] for d in decisions] == list(range(len(decisions)))
