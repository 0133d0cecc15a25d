"""AWS faults injected into the real boto3 client (a botocore ``before-send`` hook) against moto's
EMR server: throttling and 5xx on 30 % of calls over a replayed day (2 hours by default, 8 hours and
the whole day with ``-m slow``), and a resize that keeps failing.

The hook answers in place of the server, so an injected failure is a request AWS never processed:
what botocore's standard retry mode retries. Retries wait botocore's jittered exponential backoff,
its scale shrunk a thousandfold here so a simulated day does not take real hours; which calls are
retried, and how often, is botocore's own decision.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.retries.standard import ExponentialBackoff
from structlog.testing import capture_logs

from autoscaler.adapters.emr import EmrCluster, emr_client
from autoscaler.adapters.fakes import SimulatedClock
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.daemon import SlotRunner
from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.core.controller import ControllerConfig, start_by_slot
from autoscaler.core.errors import AutoscalerError

from conftest import REGION
from test_daemon import TAU, our_steps, workload_a


class _Body:
    def __init__(self, content: bytes) -> None:
        self.content = content

    def stream(self, **_):
        yield self.content


def error_response(request, status: int, code: str) -> AWSResponse:
    """What EMR (a JSON protocol service) answers with an error."""
    body = json.dumps({"__type": code, "message": "injected"}).encode()
    return AWSResponse(request.url, status, {"Content-Type": "application/x-amz-json-1.1"}, _Body(body))


class Faults:
    """before-send hook: fails a share of the calls (seeded), or every call of one operation."""

    def __init__(self, share: float, seed: int = 7, always: str | None = None) -> None:
        self.random = random.Random(seed)
        self.share = share
        self.always = always
        self.injected: Counter[str] = Counter()
        self.calls = 0

    def __call__(self, request, **_):
        self.calls += 1
        operation = request.headers.get("X-Amz-Target", b"").decode().rsplit(".", 1)[-1]
        if operation == self.always or self.random.random() < self.share:
            status, code = (400, "ThrottlingException") if self.random.random() < 0.8 else (503, "ServiceUnavailable")
            self.injected[code] += 1
            return error_response(request, status, code)
        return None


@pytest.fixture
def quick_backoff(monkeypatch):
    monkeypatch.setattr(
        ExponentialBackoff, "_DEFAULT_BACKOFF_CONFIG", {"throttling_base_scale": 0.001, "non_throttling_base_scale": 0.00005}
    )


def faulty_emr(moto_endpoint: str, faults: Faults):
    client = emr_client(REGION, moto_endpoint, boto3.Session())
    client.meta.events.register("before-send.emr", faults)
    return client


def replay_day(client, cluster_id: str, set_step_state, store, window_slots: int, new_client=None):
    """Drive the daemon over Workload A's first ``window_slots`` slots; a failed slot is logged and the
    next one goes on, as the live loop does. Returns (jobs, config, failed slots)."""
    deadline_slots = 2
    jobs = sorted(trace_jobs(workload_a(window_slots), deadline_slots, TAU, window_slots * TAU), key=lambda j: j.submit_s)
    by_id = {j.job_id: j for j in jobs}
    config = ControllerConfig(policy="gcp-u", deadline_slots=deadline_slots, slot_s=TAU, max_nodes=10_000)
    clock = SimulatedClock(0.0)
    cluster = EmrCluster(client, cluster_id, new_client=new_client)
    runner = SlotRunner(config=config, store=store, cluster=cluster, clock=clock)
    submitted, failed = 0, []
    slot = 0
    while slot < window_slots + deadline_slots or any(j.state == "queued" for j in store.active_jobs()):
        clock.time_s = slot * TAU
        for job in store.active_jobs():  # EMR runs each released step for its length
            if job.step_id and job.released_s + by_id[job.job_id].length_s <= clock.time_s:
                set_step_state(cluster_id, job.step_id, "COMPLETED")
        while submitted < len(jobs) and jobs[submitted].submit_s < (slot + 1) * TAU:
            store.submit(jobs[submitted])
            submitted += 1
        try:
            runner.run_slot()
        except AutoscalerError:
            failed.append(slot)
        slot += 1
    return jobs, config, failed


@pytest.mark.parametrize(
    "window_slots",
    [
        pytest.param(24, id="2h"),
        pytest.param(96, id="8h", marks=pytest.mark.slow),
        pytest.param(288, id="whole-day", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_thirty_percent_throttled_and_5xx_calls_over_a_day_lose_and_repeat_nothing(
    emr_cluster_id, moto_endpoint, set_step_state, quick_backoff, tmp_path, window_slots
):
    plain, cluster_id = emr_cluster_id
    faults = Faults(share=0.30)
    client = faulty_emr(moto_endpoint, faults)
    with capture_logs() as events, SqliteJobStore(tmp_path / "jobs.db") as store:
        jobs, config, failed = replay_day(
            client, cluster_id, set_step_state, store, window_slots, new_client=lambda: faulty_emr(moto_endpoint, faults)
        )
        stored = {j.job_id: j for j in store.all_jobs()}

    late = [j.job_id for j in jobs if stored[j.job_id].released_s is None or config.slot_of(stored[j.job_id].released_s) > start_by_slot(j, config)]
    print(f"\n{faults.calls} EMR calls, injected {dict(faults.injected)}, slots failed after retries: {failed}, late: {late}")
    # Every job released exactly once, none lost, each before its deadline.
    steps = our_steps(plain, cluster_id)
    assert Counter(s["Name"] for s in steps) == Counter(f"autoscaler:{j.job_id}" for j in jobs)
    for job in jobs:
        assert stored[job.job_id].released_s is not None
        assert stored[job.job_id].released_s < job.deadline_s
    # The log shows the retries: one line per failed attempt, with its operation and AWS error code.
    retried = [e for e in events if e["event"] == "aws_call_failed"]
    assert sum(faults.injected.values()) == len(retried) > 0.25 * faults.calls
    assert {e["error"] for e in retried} == {"ThrottlingException", "ServiceUnavailable"}
    assert max(e["attempt"] for e in retried) >= 3
    assert late == []


@pytest.mark.parametrize("emr_cluster_id", [2], indirect=True)
def test_a_resize_that_keeps_failing_still_releases_due_jobs_and_is_asked_again(
    emr_cluster_id, moto_endpoint, set_step_state, quick_backoff, tmp_path
):
    plain, cluster_id = emr_cluster_id
    faults = Faults(share=0.0, always="ModifyInstanceGroups")
    client = faulty_emr(moto_endpoint, faults)
    with capture_logs() as events, SqliteJobStore(tmp_path / "jobs.db") as store:
        jobs, _, failed = replay_day(
            client, cluster_id, set_step_state, store, window_slots=6, new_client=lambda: faulty_emr(moto_endpoint, faults)
        )
        released = [j for j in store.all_jobs() if j.released_s is not None]
    assert failed == [] and len(released) == len(jobs)
    resize_failures = [e for e in events if e["event"] == "resize_failed"]
    assert resize_failures and all("ModifyInstanceGroups" in e["error"] for e in resize_failures)
    # Each slot asked again: one failed resize per slot whose decision differed from the group's 2 nodes.
    assert len({e["slot"] for e in resize_failures}) == len(resize_failures)
    group = [g for g in plain.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"] if g["InstanceGroupType"] == "TASK"]
    assert group[0]["RequestedInstanceCount"] == 2  # never changed: every resize failed
