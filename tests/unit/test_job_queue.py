"""JobQueue against a plain list sorted on every question (the naive computation it replaces)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.edf import JobQueue, edf_key, start_by_slot
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.release import deadline_key

TAU = 300.0
EPOCH = 1000.0


def job(job_id: str, submit_s: float, length_s: float, deadline_s: float, tenant: str = "t", state: str = "queued", seq=None) -> Job:
    return Job(job_id, job_id, tenant, submit_s, deadline_s, length_s, StepSpec(args=("true",)), state=state, seq=seq)


class Naive:
    """Every active job in a dict; every answer computed by sorting or scanning all of them."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}

    def add(self, j: Job) -> None:
        self.jobs.pop(j.job_id, None)
        if j.state not in ("done", "failed"):
            self.jobs[j.job_id] = j

    def update(self, job_id, state, released_s=None, step_id=None) -> None:
        if job_id not in self.jobs:
            return
        old = self.jobs.pop(job_id)
        if state in ("done", "failed"):
            return
        self.jobs[job_id] = dataclasses.replace(
            old,
            state=state,
            released_s=old.released_s if released_s is None else released_s,
            step_id=old.step_id if step_id is None else step_id,
        )

    def queued(self, grid) -> list[Job]:
        return sorted((j for j in self.jobs.values() if j.state == "queued"), key=lambda j: edf_key(j, grid))


job_spec = st.tuples(
    st.integers(0, 30),  # id
    st.floats(0, 20 * TAU),  # submit, from the epoch
    st.floats(0, 5 * TAU),  # length
    st.floats(-2 * TAU, 8 * TAU),  # deadline beyond submit + length (negative: already late)
    st.sampled_from("PQR"),
    st.sampled_from(["queued", "queued", "released", "running", "done"]),
    st.one_of(st.none(), st.integers(1, 60)),
    st.sampled_from([0.0, 0.0, 150.0, 700.0]),  # start margin: start-by moves earlier, the estimate does not
)
operation = st.one_of(
    st.tuples(st.just("add"), job_spec),
    st.tuples(st.just("update"), st.tuples(st.integers(0, 30), st.sampled_from(["released", "running", "done", "failed", "queued"]))),
)


def make(spec) -> Job:
    i, submit, length, slack, tenant, state, seq, margin = spec
    submit_s = EPOCH + submit
    released_s = submit_s if state in ("released", "running") else None
    made = job(f"j{i}", submit_s, length, submit_s + length + slack, tenant, state, seq)
    return dataclasses.replace(made, released_s=released_s, start_margin_s=margin)


@settings(max_examples=200, deadline=None)
@given(initial=st.lists(job_spec, max_size=20), operations=st.lists(operation, max_size=40), probe=st.integers(-3, 30))
def test_job_queue_answers_as_a_sorted_list_does(initial, operations, probe):
    queue = JobQueue.of([make(spec) for spec in initial], TAU, EPOCH)
    naive = Naive()
    for spec in initial:
        naive.add(make(spec))
    for kind, argument in operations:
        if kind == "add":
            queue.add(make(argument))
            naive.add(make(argument))
        else:
            i, state = argument
            queue.update(f"j{i}", state, released_s=EPOCH + 7.0, step_id="s-1")
            naive.update(f"j{i}", state, released_s=EPOCH + 7.0, step_id="s-1")
        check(queue, naive, probe)


def check(queue: JobQueue, naive: Naive, probe: int) -> None:
    edf = naive.queued(queue)
    assert list(queue.queued()) == edf
    assert queue.queued_count == len(edf)
    assert len(queue) == len(naive.jobs)
    assert sorted(j.job_id for j in queue.jobs()) == sorted(naive.jobs)
    for job_id, j in naive.jobs.items():
        assert job_id in queue and queue.get(job_id) == j and queue.get(job_id).seq == j.seq
    assert "nobody" not in queue and queue.get("nobody") is None
    running = [j for j in naive.jobs.values() if j.state in ("released", "running")]
    assert sorted(j.job_id for j in queue.running()) == sorted(j.job_id for j in running)
    assert queue.running_count == len(running)
    by_tenant: dict[str, int] = {}
    for j in running:
        by_tenant[j.tenant] = by_tenant.get(j.tenant, 0) + 1
    assert queue.running_by_tenant() == by_tenant
    assert sorted(queue.queued_tenants()) == sorted({j.tenant for j in edf})
    for tenant in "PQR":
        assert list(queue.tenant_queued(tenant)) == [j for j in edf if j.tenant == tenant]
    start_by = [start_by_slot(j, queue) for j in edf]
    assert queue.due_count(probe) == sum(1 for s in start_by if s <= probe)
    # Each due job needs min(length, slot) node seconds (one node wide): summed by hand.
    assert queue.due_need_s(probe) == pytest.approx(sum(min(j.length_s, TAU) for j, s in zip(edf, start_by) if s <= probe), abs=1e-6)
    for first, last in ((probe, probe + 2), (None, probe), (probe, None), (probe + 3, probe)):
        expected = [j for j, s in zip(edf, start_by) if (first is None or s >= first) and (last is None or s <= last)]
        assert queue.start_by_between(first, last) == expected
    # On time by the estimate alone (the slot of deadline - length is the slot's or later), or lapsed;
    # asked of slots forward and back, as the split between the two moves either way.
    for slot in (probe, probe + 4, probe - 3, probe):
        on_time = [j for j in edf if math.floor((j.deadline_s - j.length_s - EPOCH) / TAU) >= slot]
        lapsed = [j for j in edf if j not in on_time]
        for tenant in "PQR":
            assert list(queue.tenant_by_deadline(tenant, slot, on_time=True)) == sorted((j for j in on_time if j.tenant == tenant), key=deadline_key)
            assert list(queue.tenant_by_deadline(tenant, slot, on_time=False)) == sorted((j for j in lapsed if j.tenant == tenant), key=deadline_key)
        assert list(queue.on_time_by(slot)) == on_time
        assert list(queue.on_time_by(slot, slot + 1)) == [j for j in on_time if start_by_slot(j, queue) <= slot + 1]
    with_seq = sorted((j for j in naive.jobs.values() if j.seq is not None), key=lambda j: (j.seq, j.job_id))
    for after in (0, probe, 40):
        assert queue.arrived_after(after) == [j for j in with_seq if j.seq > after]
    assert queue.max_seq() == (max(j.seq for j in with_seq) if with_seq else None)
    submit_slot = {j.job_id: math.floor((j.submit_s - EPOCH) / TAU) for j in naive.jobs.values()}
    for first, last in ((probe, probe + 1), (None, probe), (probe, None)):
        got = sorted(j.job_id for j in queue.submitted_in(first, last))
        assert got == sorted(i for i, s in submit_slot.items() if (first is None or s >= first) and (last is None or s <= last))


@pytest.mark.parametrize("slot_s, epoch_s", [(0.1, 0.0), (300.0, 1.7e9 + 0.3), (1.0, 1.7e9), (0.3, -7.0)])
def test_submit_slots_at_a_slots_edge_are_found_in_that_slot(slot_s, epoch_s):
    # Slots of 0.1 s: floating point puts some multiples of slot_s a hair off their edge (0.1 * 3).
    queue = JobQueue(slot_s, epoch_s)
    edges = [job(f"e{k}{d}", epoch_s + k * slot_s + d, 0.0, epoch_s + k * slot_s + 10.0) for k in range(50) for d in (0.0, -1e-7, 1e-7)]
    for j in edges:
        queue.add(j)
    for k in range(-1, 51):
        expected = sorted(j.job_id for j in edges if math.floor((j.submit_s - epoch_s) / slot_s) == k)
        assert sorted(j.job_id for j in queue.submitted_in(k, k)) == expected


def test_bad_grid_and_state_are_refused_by_name():
    with pytest.raises(ConfigError, match="slot_s"):
        JobQueue(0.0)
    with pytest.raises(ConfigError, match="epoch_s"):
        JobQueue(300.0, math.nan)
    with pytest.raises(ConfigError, match="'x'.*state"):
        JobQueue.of([job("x", 0.0, 1.0, 10.0, state="lost")], TAU)
    queue = JobQueue(TAU)
    queue.add(job("a", 0.0, 1.0, 10.0))
    with pytest.raises(ConfigError, match="'a'.*state"):
        queue.update("a", "paused")
    queue.update("unknown", "done")  # ignored
    assert len(queue) == 1
