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
from autoscaler.controller import ControllerConfig, start_by_slot
from autoscaler.daemon import SlotRunner
from autoscaler.model import CostParams, Trace
from autoscaler.policies import plan
from autoscaler.replay_daemon import trace_jobs
from autoscaler.workload import read_swim, workload_from_trace

TAU = 300.0
WINDOW_SLOTS = 48  # the paper's cluster experiment: 4 hours of 5-minute slots (§VII-A)


def workload_a(window_slots: int) -> Trace:
    with resources.as_file(resources.files("autoscaler") / "data" / "FB-2009_samples_24_times_1hr_0.tsv") as path:
        trace = read_swim(path)
    return Trace(trace.path, tuple(j for j in trace.jobs if j.submit_s < window_slots * TAU))


def our_steps(client, cluster_id: str) -> list[dict]:
    steps = []
    for page in client.get_paginator("list_steps").paginate(ClusterId=cluster_id):
        steps += [s for s in page["Steps"] if s["Name"].startswith("autoscaler:")]
    return steps


@pytest.mark.parametrize("policy", ["hold", "gcp-u"])
@pytest.mark.parametrize("window_slots", [pytest.param(288, id="whole-day")])
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


@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_sigkill_at_random_points_loses_no_job_and_submits_none_twice(emr_cluster_id, moto_server, tmp_path):
    client, cluster_id = emr_cluster_id
    trace_path = tmp_path / "four-hours.tsv"
    trace = workload_a(WINDOW_SLOTS)
    trace_path.write_text(
        "".join(
            f"{j.job_id}\t{j.submit_s:g}\t{j.gap_s:g}\t{j.map_input_bytes:g}\t{j.shuffle_bytes:g}\t{j.reduce_output_bytes:g}\n"
            for j in trace.jobs
        )
    )
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        f'policy = "gcp-u"\ndeadline_slots = 2\nstore_path = "{tmp_path / "jobs.db"}"\nlog_format = "json"\n'
        f'[cluster]\nid = "{cluster_id}"\nregion = "us-east-1"\nendpoint_url = "{moto_server}"\nmax_nodes = 100000\n'
    )
    command = [
        sys.executable, "-m", "autoscaler", "run", "--config", str(config_path), "--replay", str(trace_path),
        "--store", str(tmp_path / "jobs.db"), "--speedup", str(TAU / 0.05),
    ]  # fmt: skip
    rng = random.Random(20)
    kills = 0
    while kills < 20:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
        time.sleep(rng.uniform(0.7, 2.5))  # start-up (imports) takes about half a second
        if process.poll() is not None:
            break  # it finished the replay before this kill
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
    final = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr[-2000:]

    config = ControllerConfig(policy="gcp-u", deadline_slots=2, slot_s=TAU, max_nodes=100_000)
    jobs = {j.job_id: j for j in trace_jobs(trace, 2, TAU, WINDOW_SLOTS * TAU)}
    steps = our_steps(client, cluster_id)
    names = Counter(s["Name"] for s in steps)
    assert kills >= 10, "the replay finished before most kills; slow it down"
    assert all(count == 1 for count in names.values()), [n for n, c in names.items() if c > 1]
    assert set(names) == {f"autoscaler:{job_id}" for job_id in jobs}
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        stored = {j.job_id: j for j in store.all_jobs()}
        decisions = store.decisions()
    assert set(stored) == set(jobs)
    for job_id, job in jobs.items():
        assert stored[job_id].state != "queued"
        assert config.slot_of(stored[job_id].released_s) <= start_by_slot(job, config), job_id
    assert [d["slot"] for d in decisions] == list(range(len(decisions)))
