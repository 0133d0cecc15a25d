"""The in-memory cluster: what it lists, what listing it costs, what it records, and starting it
from an observed cluster."""

from __future__ import annotations

import dataclasses

import pytest

from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job, StepSpec


def job(job_id: str, length_s: float) -> Job:
    return Job(job_id, job_id, "t", 0.0, 9999.0, length_s, StepSpec(args=("true",)))


def listing(statuses) -> list[tuple[str, str]]:
    return [(s.job_id, s.state) for s in statuses]


def test_steps_complete_after_their_length_and_leave_the_active_listing():
    clock = SimulatedClock(100.0)
    cluster = FakeCluster(clock)
    ids = [cluster.add_step(job(job_id, length_s)) for job_id, length_s in (("a", 50.0), ("b", 10.0), ("c", 30.0))]
    assert listing(cluster.steps(active_only=True)) == [("a", "RUNNING"), ("b", "RUNNING"), ("c", "RUNNING")]
    clock.advance(10.0)  # b ends at 110: exactly now
    assert listing(cluster.steps(active_only=True)) == [("a", "RUNNING"), ("c", "RUNNING")]
    assert cluster.step_state(ids[1]) == "COMPLETED"
    clock.advance(25.0)
    assert listing(cluster.steps(active_only=True)) == [("a", "RUNNING")]
    assert listing(cluster.steps()) == [("a", "RUNNING"), ("b", "COMPLETED"), ("c", "COMPLETED")]
    assert [cluster.step_state(step_id) for step_id in ids] == ["RUNNING", "COMPLETED", "COMPLETED"]
    # Only the steps added after the newest known one.
    assert [s.step_id for s in cluster.steps(newer_than=frozenset({ids[0]}))] == ids[1:]
    assert [s.step_id for s in cluster.steps(newer_than=frozenset({ids[0], ids[1]}))] == ids[2:]
    assert [s.step_id for s in cluster.steps(newer_than=frozenset({"s-unknown"}))] == ids
    assert cluster.steps(newer_than=frozenset({ids[2]})) == []
    with pytest.raises(KeyError):
        cluster.step_state("s-unknown")


@dataclasses.dataclass
class CountingCluster(FakeCluster):
    """Counts the steps whose state is worked out."""

    looked_at: list = dataclasses.field(default_factory=list)

    def _status(self, step_id):
        self.looked_at.append(step_id)
        return super()._status(step_id)


def test_the_active_listing_looks_only_at_steps_not_yet_seen_completed():
    clock = SimulatedClock(0.0)
    cluster = CountingCluster(clock)
    for i in range(1000):
        cluster.add_step(job(f"short-{i}", 1.0))
    long_ids = [cluster.add_step(job(f"long-{i}", 1000.0)) for i in range(3)]
    clock.advance(5.0)
    assert [s.step_id for s in cluster.steps(active_only=True)] == long_ids
    assert len(cluster.looked_at) == 1003  # the first listing after they ended finds them ended
    cluster.looked_at.clear()
    for _ in range(10):
        assert [s.step_id for s in cluster.steps(active_only=True)] == long_ids
    assert len(cluster.looked_at) == 30
    cluster.looked_at.clear()
    assert len(cluster.steps()) == 1003  # the full listing still has every step
    cluster.looked_at.clear()
    cluster.step_state(long_ids[0])
    assert cluster.looked_at == [long_ids[0]]


def test_calls_are_recorded_only_when_asked():
    clock = SimulatedClock(0.0)
    quiet = FakeCluster(clock)
    quiet.resize(3)
    quiet.add_step(job("a", 10.0))
    assert quiet.calls is None and quiet.resizes == [3]
    recorded = FakeCluster(clock, calls=[])
    recorded.resize(4)
    step_id = recorded.add_step(job("a", 10.0))
    recorded.resize(0)
    recorded.task_group()
    recorded.steps(active_only=True)
    assert recorded.calls == [("resize", 4), ("add_step", "a", step_id), ("resize", 0)]


def test_a_seeded_cluster_runs_the_observed_steps_to_their_estimated_end():
    clock = SimulatedClock(1000.0)
    observed = [("a", "s-AAA", 400.0, 700.0), ("b", "s-BBB", 900.0, 60.0), ("c", "s-CCC", 950.0, 300.0)]
    cluster = FakeCluster.seeded(clock, requested=5, running_steps=observed, calls=[])
    assert cluster.task_group().requested == 5
    # b was released at 900 with 60 s to run: already over when the dry run starts.
    assert listing(cluster.steps(active_only=True)) == [("a", "RUNNING"), ("c", "RUNNING")]
    assert cluster.step_state("s-BBB") == "COMPLETED"
    new_id = cluster.add_step(job("d", 10.0))
    assert new_id not in {"s-AAA", "s-BBB", "s-CCC"}
    assert [s.step_id for s in cluster.steps(newer_than=frozenset({"s-CCC"}))] == [new_id]
    clock.time_s = 1100.0  # a ends at 1100
    assert listing(cluster.steps(active_only=True)) == [("c", "RUNNING")]
    clock.time_s = 1250.0
    assert cluster.steps(active_only=True) == []
    assert cluster.calls == [("add_step", "d", new_id)]  # seeding is not a call


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([("a", "s-1", 0.0, 5.0), ("b", "s-1", 0.0, 5.0)], "step id 's-1' given twice"),
        ([("a", "s-1", 0.0, -5.0)], "length_s -5.0"),
        ([("a", "s-1", 0.0, float("nan"))], "length_s nan"),
        ([("a", "s-1", float("inf"), 1.0)], "added_s inf"),
    ],
)
def test_seeding_refuses_bad_steps(steps, message):
    with pytest.raises(ConfigError, match=message):
        FakeCluster.seeded(SimulatedClock(0.0), 1, steps)
    with pytest.raises(ConfigError, match="requested must be a whole number of nodes >= 0, got -1"):
        FakeCluster.seeded(SimulatedClock(0.0), -1, [])
