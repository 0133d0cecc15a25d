"""The slot runner when things go wrong: refused steps, AWS failing part-way, a changed policy, two daemons."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
from autoscaler.adapters.lock import StoreLock
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.daemon import SlotRunner
from autoscaler.core.controller import ControllerConfig
from autoscaler.core.errors import ActuationError, ConfigError
from autoscaler.core.model import Job, StepSpec

TAU = 300.0


@dataclasses.dataclass
class FlakyCluster(FakeCluster):
    """The in-memory cluster, refusing some jobs' steps outright and failing the n-th add transiently."""

    refuse: frozenset = frozenset()
    fail_add_number: int | None = None
    adds: list = dataclasses.field(default_factory=list)

    def add_step(self, job: Job) -> str:
        self.adds.append(job.job_id)
        if job.job_id in self.refuse:
            raise ActuationError("EMR AddJobFlowSteps failed: ValidationException: bad step", permanent=True)
        if self.fail_add_number is not None and len(self.adds) == self.fail_add_number:
            raise ActuationError("EMR AddJobFlowSteps failed: InternalServerError")
        return super().add_step(job)


def job(job_id: str, length_s: float = 60.0, deadline_s: float = 3 * TAU) -> Job:
    return Job(job_id, job_id, "t", 0.0, deadline_s, length_s, StepSpec(args=("true",)))


def runner_for(tmp_path, cluster_cls=FakeCluster, config=None, **cluster_args):
    clock = SimulatedClock(0.0)
    store = SqliteJobStore(tmp_path / "jobs.db")
    cluster = cluster_cls(clock=clock, **cluster_args)
    config = config or ControllerConfig(policy="follow", slot_s=TAU, max_nodes=100)
    return SlotRunner(config=config, store=store, cluster=cluster, clock=clock), store, cluster, clock


def test_a_refused_step_fails_that_job_only(tmp_path):
    runner, store, cluster, _ = runner_for(tmp_path, FlakyCluster, refuse=frozenset({"bad"}))
    for j in (job("bad"), job("ok1"), job("ok2")):
        store.submit(j)
    runner.run_slot()
    states = {j.job_id: j.state for j in store.all_jobs()}
    assert states == {"bad": "failed", "ok1": "released", "ok2": "released"}


def test_a_transient_failure_part_way_commits_what_was_added_and_repeats_nothing(tmp_path):
    runner, store, cluster, clock = runner_for(tmp_path, FlakyCluster, fail_add_number=2)
    for j in (job("a", length_s=1.0), job("b"), job("c")):
        store.submit(j)
    runner.run_slot()  # "a" is added, "b" fails and waits, "c" is added: all committed
    assert {j.job_id: j.state for j in store.all_jobs()} == {"a": "released", "b": "queued", "c": "released"}
    for slot in (1, 2):  # "a" finishes; "b" is looked for, not found, and released by its start-by slot, 2
        clock.time_s = slot * TAU
        runner.run_slot()
    assert Counter(cluster.adds) == Counter({"a": 1, "b": 2, "c": 1})  # b once failed, once added
    assert {j.job_id: j.state for j in store.all_jobs()}["a"] == "done"


def test_a_changed_policy_across_a_restart_starts_its_state_afresh(tmp_path):
    runner, store, cluster, clock = runner_for(
        tmp_path, config=ControllerConfig(policy="gcp-u", deadline_slots=2, slot_s=TAU, max_nodes=100)
    )
    store.submit(job("a", length_s=4 * TAU, deadline_s=8 * TAU))
    runner.run_slot()
    clock.time_s = TAU
    runner.config = ControllerConfig(policy="gcp", deadline_slots=6, slot_s=TAU, max_nodes=100, max_deadline_slots=12)
    store.submit(dataclasses.replace(job("b", length_s=60.0, deadline_s=8 * TAU), submit_s=TAU))
    decision = runner.run_slot()
    # No shape error: the gcp state was rebuilt, and the jobs were counted again as work.
    assert decision.slot == 1 and decision.capacity > 0 and decision.queue_depth == 1


def test_a_second_daemon_on_the_same_store_is_refused(tmp_path):
    with StoreLock(tmp_path / "jobs.db"):
        with pytest.raises(ConfigError, match="another daemon is running"):
            with StoreLock(tmp_path / "jobs.db"):
                pass
    with StoreLock(tmp_path / "jobs.db"):  # released on exit
        pass


def test_a_replay_store_with_an_in_memory_cluster_is_not_resumed(tmp_path, capsys):
    from autoscaler.app.cli import main

    trace = tmp_path / "t.tsv"
    trace.write_text("".join(f"j{i}\t{i * 100}\t100\t1000\t0\t1000\n" for i in range(20)))
    assert main(["run", "--replay", str(trace), "--store", str(tmp_path / "r.db")]) == 0
    capsys.readouterr()
    assert main(["run", "--replay", str(trace), "--store", str(tmp_path / "r.db")]) == 2
    assert "only a replay against an EMR endpoint can resume" in capsys.readouterr().err


def test_vfw_config_with_too_short_a_deadline_is_refused_at_load(tmp_path):
    from autoscaler.app.config import load_settings

    path = tmp_path / "c.toml"
    path.write_text('policy = "vfw"\ndeadline_slots = 1\n[cluster]\nid = "j-ABC"\n')
    with pytest.raises(ConfigError, match="needs 0 < delta < deadline_slots"):
        load_settings(path)


@dataclasses.dataclass
class LosingCluster(FakeCluster):
    """Adds the step, then loses the answer (as a 5xx after EMR processed the request would)."""

    lose: frozenset = frozenset()
    adds: list = dataclasses.field(default_factory=list)

    def add_step(self, job: Job) -> str:
        self.adds.append(job.job_id)
        step_id = super().add_step(job)
        if job.job_id in self.lose and self.adds.count(job.job_id) == 1:
            raise ActuationError("EMR AddJobFlowSteps failed: InternalServerError")
        return step_id


def test_a_step_added_but_answered_with_an_error_is_found_not_added_again(tmp_path):
    runner, store, cluster, clock = runner_for(tmp_path, LosingCluster, lose=frozenset({"b"}))
    for j in (job("a"), job("b"), job("c")):
        store.submit(j)
    runner.run_slot()
    assert {j.job_id: j.state for j in store.all_jobs()}["b"] == "queued"
    clock.time_s = TAU
    runner.run_slot()  # the listing since the newest recorded step finds b's step
    assert Counter(cluster.adds) == Counter({"a": 1, "b": 1, "c": 1})
    stored = {j.job_id: j for j in store.all_jobs()}
    assert stored["b"].state in ("released", "running", "done") and stored["b"].step_id == cluster.steps()[1].step_id


@dataclasses.dataclass
class UnreachableCluster(FakeCluster):
    """EMR answers nothing: every call fails after botocore's retries."""

    def task_group(self):
        raise ActuationError("EMR ListInstanceGroups failed: EndpointConnectionError")

    def steps(self, active_only: bool = False, newer_than=None):
        raise ActuationError("EMR ListSteps failed: EndpointConnectionError")


def test_slots_that_cannot_reach_emr_make_health_fail(tmp_path):
    from autoscaler.adapters.health import Telemetry

    now = [0.0]
    runner, store, cluster, clock = runner_for(tmp_path)
    runner.telemetry = Telemetry(TAU, clock=lambda: now[0])
    store.submit(job("a"))
    runner.run_slot()  # reachable: healthy
    assert runner.telemetry.health()[0]
    runner.cluster = UnreachableCluster(clock=clock)
    for slot in (1, 2, 3):
        clock.time_s = now[0] = slot * TAU
        runner.run_slot()  # decided from what is known, but nothing could be read from EMR
    healthy, details = runner.telemetry.health()
    assert not healthy and details["seconds_since_last_success"] == 3 * TAU
