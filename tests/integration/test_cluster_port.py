"""One suite over every implementation of the Cluster port (``autoscaler.core.ports.Cluster``): the
in-memory cluster of replays and dry runs (``adapters.fakes.FakeCluster``), the cluster twin
(``adapters.twin.TwinCluster``) and the EMR adapter
against moto's server over HTTP with the real boto3 client. What they both promise is checked the
same way on each; what only one does stays in its own tests (test_fakes.py, test_emr.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from autoscaler.adapters.emr import EmrCluster
from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
from autoscaler.adapters.twin import TwinCluster
from autoscaler.core.errors import ActuationError
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.ports import Cluster, TaskGroup
from autoscaler.core.release import MAX_ACTIVE_STEPS

from conftest import _set_step_state

LENGTH_S = 600.0


@dataclass
class ClusterUnderTest:
    cluster: Cluster
    complete: Callable[[str], None]
    """Make a step of ours complete, as the cluster would once its job has run."""


def make_job(job_id: str) -> Job:
    return Job(job_id, job_id, "ads", 0.0, 3600.0, LENGTH_S, StepSpec(args=("true",)))


@pytest.fixture(params=["in-memory", "twin", "emr-via-moto"])
def under_test(request) -> ClusterUnderTest:
    """Each implementation with 2 TASK nodes requested and no step yet."""
    if request.param == "in-memory":
        clock = SimulatedClock(1_000.0)
        cluster = FakeCluster(clock, requested=2)
        added: dict[str, float] = {}
        original_add = cluster.add_step

        def add_step(job: Job) -> str:
            step_id = original_add(job)
            added[step_id] = clock.now_s()
            clock.advance(LENGTH_S / 4)  # steps added apart, so one can end before the next
            return step_id

        cluster.add_step = add_step

        def complete(step_id: str) -> None:
            clock.time_s = max(clock.time_s, added[step_id] + LENGTH_S)

        return ClusterUnderTest(cluster, complete)
    if request.param == "twin":
        clock = SimulatedClock(1_000.0)
        cluster = TwinCluster(clock, start_nodes=2)
        clock.advance(cluster.config.provision_s)  # both nodes usable before the first step
        original_twin_add = cluster.add_step

        def add_twin_step(job: Job) -> str:
            step_id = original_twin_add(job)
            clock.advance(LENGTH_S / 4)  # steps added apart, so one can end before the next
            return step_id

        cluster.add_step = add_twin_step

        def complete(step_id: str) -> None:
            # The twin ends a step when its run has lasted its true length: move its clock until it has.
            run = cluster.twin.steps[step_id]
            while cluster.step_state(step_id) != "COMPLETED":
                assert clock.time_s < run.added_s + 100 * LENGTH_S, f"{step_id} never completed"
                clock.advance(LENGTH_S / 10)

        return ClusterUnderTest(cluster, complete)
    client, cluster_id = request.getfixturevalue("emr_cluster_id")
    return ClusterUnderTest(EmrCluster(client, cluster_id), lambda step_id: _set_step_state(cluster_id, step_id, "COMPLETED"))


def test_the_task_group_reads_back_what_resize_asked_for(under_test):
    cluster = under_test.cluster
    cluster.start_slot()
    assert isinstance(cluster.task_group(), TaskGroup) and cluster.task_group().requested == 2
    cluster.resize(5)
    assert cluster.task_group().requested == 5
    cluster.resize(0)
    assert cluster.task_group().requested == 0


def test_steps_list_ours_oldest_first_and_only_those_after_the_newest_known(under_test):
    cluster = under_test.cluster
    ids = [cluster.add_step(make_job(name)) for name in ("a", "b", "c:with:colons")]
    assert len(set(ids)) == 3
    listed = cluster.steps()
    assert [(s.job_id, s.step_id) for s in listed] == list(zip(["a", "b", "c:with:colons"], ids))
    assert all(s.created_s is not None for s in listed)
    assert [s.job_id for s in cluster.steps(newer_than=frozenset({ids[0]}))] == ["b", "c:with:colons"]
    assert [s.job_id for s in cluster.steps(newer_than=frozenset({ids[0], ids[1]}))] == ["c:with:colons"]
    assert cluster.steps(newer_than=frozenset({ids[2]})) == []


def test_a_completed_step_leaves_the_active_list_and_says_so(under_test):
    cluster = under_test.cluster
    first, second = cluster.add_step(make_job("a")), cluster.add_step(make_job("b"))
    assert {s.step_id for s in cluster.steps(active_only=True)} == {first, second}
    under_test.complete(first)
    assert cluster.step_state(first) == "COMPLETED"
    assert second in {s.step_id for s in cluster.steps(active_only=True)}
    assert first not in {s.step_id for s in cluster.steps(active_only=True)}
    assert [s.state for s in cluster.steps() if s.step_id == first] == ["COMPLETED"]


def test_the_twin_refuses_a_step_beyond_emrs_256_pending_and_running_as_emr_does():
    clock = SimulatedClock(0.0)
    cluster = TwinCluster(clock)  # no nodes: every step stays PENDING
    for i in range(MAX_ACTIVE_STEPS):
        cluster.add_step(make_job(f"j{i:03d}"))
    with pytest.raises(ActuationError, match="256 steps PENDING and RUNNING") as refused:
        cluster.add_step(make_job("one-more"))
    assert refused.value.permanent
    assert len(cluster.steps(active_only=True)) == MAX_ACTIVE_STEPS
