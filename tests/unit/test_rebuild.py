"""After slots go undecided or the policy changes, the policy's work is rebuilt from the active jobs.

The bounds below are computed from the jobs alone, independently of ``rebuild_future``'s majorant:
W(x), the units of remaining work due by slot x, where a queued job of ell = ceil(length/tau) slots
has its k-th unit due by max(start-by slot, t) + k (t the slot decided) and a running job one unit in
each slot it still runs. Then

* R* = max_h W(t+h)/(h+1): the total remaining work over the slots to its deadlines, at the horizon
  where that is largest; the least flat capacity that runs every job by its deadline. Follow (which
  defers nothing) is held to m_t <= R*, and gcp (which sees each unit's own deadline, up to its
  horizon of max_deadline_slots, beyond which a unit counts as due at the horizon) to R* with the
  due slots cut at t + max_deadline_slots.
* rho_D = max_h W(t+h+D)/(h+1): the same for a policy that may defer any unit it holds D slots (hold,
  gcp-u, vfw): the work due by t+h+D must have reached it by t+h. gcp-u and hold run what they hold at
  its flat rate, so m_t <= rho_D; in the first slot, where they hold only what reached them then
  (at most W(t+D), spread over D+1 slots), m_t <= W(t+D)/(D+1) <= R*.

Before the rebuild every job counted after its units' slots had passed added one unit to the slot
decided, and the policy's queue still held work of jobs finished since: on the day down below (no
job overdue) hold and gcp-u gave m_t = 500 for three slots, vfw 999 and follow 1,500, where R* is 12.9;
now hold and gcp-u rise from 4.4 to 12.0, vfw from 0 to 13.2 (rho_D = 13.2), gcp and follow 12.9.
"""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest

from autoscaler.core.controller import ControllerConfig, PolicyState, rebuild_future, start_by_slot, tick
from autoscaler.core.edf import JobQueue, job_length_slots
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.release import MAX_ACTIVE_STEPS

TAU = 300.0
POLICIES = ["hold", "gcp-u", "gcp", "vfw", "follow"]
UNIFORM = ("hold", "gcp-u", "vfw")


def job(job_id: str, submit_s: float, length_s: float, deadline_s: float, seq: int) -> Job:
    return Job(job_id, "n", "t", submit_s, deadline_s, length_s, StepSpec(args=("true",)), seq=seq)


def day_down(overdue: bool, seed: int = 7) -> tuple[list[Job], int, int]:
    """200 jobs over slots 0..38, then 1,500 submitted over the 288 slots the daemon is down
    (48..335). With ``overdue`` their slack is 2..576 slots (a quarter are past their start-by slot at
    the restart); without, every one is due between 3 and 288 slots after the restart, slot 336."""
    rng = random.Random(seed)
    lengths = [60.0, 400.0, 900.0, 1200.0]
    jobs = []
    for i in range(200):  # all released before the gap: start-by slots <= 38 + 6
        submit = rng.uniform(0, 39 * TAU)
        length = rng.choice(lengths)
        jobs.append(job(f"a{i}", submit, length, submit + length + rng.randint(2, 6) * TAU, len(jobs) + 1))
    for i in range(1500):
        submit = rng.uniform(48 * TAU, 336 * TAU)
        length = rng.choice(lengths)
        deadline = submit + length + rng.randint(2, 576) * TAU if overdue else (336 + rng.randint(3, 288)) * TAU + length
        jobs.append(job(f"g{i}", submit, length, deadline, len(jobs) + 1))
    return jobs, 48, 336


class Cluster:
    """Plays the cluster for tick: jobs join the queue by their submit slot, released jobs run for
    their length and are then done (off the queue)."""

    def __init__(self, jobs: list[Job], config: ControllerConfig) -> None:
        self.pending = sorted(jobs, key=lambda j: j.submit_s)
        self.config = config
        self.queue = JobQueue(config.slot_s)
        self.finished: list[Job] = []

    def advance(self, slot: int) -> None:
        while self.pending and self.config.slot_of(self.pending[0].submit_s) <= slot:
            self.queue.add(self.pending.pop(0))
        for j in self.queue.running():
            if j.released_s + j.length_s <= slot * TAU:
                self.finished.append(j)
                self.queue.update(j.job_id, "done")

    def apply(self, decision, slot: int) -> None:
        for job_id in decision.release:
            self.queue.update(job_id, "running", released_s=slot * TAU)


def remaining_due(queue: JobQueue, slot: int, config: ControllerConfig) -> list[int]:
    """The due slot of every unit of remaining work (the module docstring's W), job by job."""
    due = []
    for j in queue.jobs():
        if config.slot_of(j.submit_s) > slot:
            continue
        if j.state == "queued":
            first = max(start_by_slot(j, config), slot)
            due += [first + k for k in range(job_length_slots(j.length_s, TAU))]
        else:
            end = math.ceil((j.released_s + j.length_s) / TAU)
            due += list(range(slot, end))
    return due


def flat_rate(due: list[int], slot: int, deferral: int, horizon: int | None = None) -> float:
    """max_h W(slot + h + deferral)/(h + 1), with due slots beyond slot + ``horizon`` taken as due there."""
    due = np.array(due) if horizon is None else np.minimum(np.array(due), slot + horizon)
    counts = np.bincount(np.maximum(due - slot - deferral, 0))
    return float((np.cumsum(counts) / np.arange(1, counts.shape[0] + 1)).max())


@pytest.mark.parametrize("overdue", [False, True], ids=["due-later", "a-quarter-overdue"])
@pytest.mark.parametrize("policy", POLICIES)
def test_a_day_down_with_1500_jobs_queued_gives_m_t_within_the_remaining_work_over_its_deadlines(policy, overdue):
    jobs, down_from, back_at = day_down(overdue)
    config = ControllerConfig(policy=policy, deadline_slots=2, slot_s=TAU, max_nodes=10**6)
    cluster = Cluster(jobs, config)
    state = PolicyState()
    for t in range(down_from):
        cluster.advance(t)
        decision, state = tick(t * TAU, cluster.queue, state, config)
        cluster.apply(decision, t)
    cluster.advance(back_at)
    assert cluster.queue.queued_count > 1_400
    due = remaining_due(cluster.queue, back_at, config)
    r_star = flat_rate(due, back_at, 0)
    rho_d = flat_rate(due, back_at, config.deadline_slots)
    r_star_gcp = flat_rate(due, back_at, 0, config.max_deadline_slots)
    fresh_cluster = Cluster([], config)
    for j in cluster.queue.jobs():
        fresh_cluster.queue.add(j)
    fresh = PolicyState()
    seen = []
    for t in range(back_at, back_at + 6):
        if t > back_at:
            cluster.advance(t)
            fresh_cluster.advance(t)
        room = MAX_ACTIVE_STEPS - cluster.queue.running_count
        decision, state = tick(t * TAU, cluster.queue, state, config)
        started, fresh = tick(t * TAU, fresh_cluster.queue, fresh, config)
        seen.append((decision.capacity, started.capacity))
        if t == back_at:
            assert "went undecided, so the policy's work was rebuilt" in decision.why
            # m_t of a fresh start on the same jobs, and jobs past their start-by slot go at once (late),
            # first, as many as EMR's 256 steps PENDING and RUNNING allow; the rest are held for it.
            assert decision.capacity == pytest.approx(started.capacity, abs=1e-9)
            overdue_ids = {j.job_id for j in cluster.queue.queued() if start_by_slot(j, config) < t}
            released = set(decision.release)
            assert len(released) <= room
            assert released <= overdue_ids if len(overdue_ids) >= room else overdue_ids <= released
            assert overdue_ids <= released | set(decision.held_for_steps)
            assert set(decision.late) == overdue_ids & released
            assert bool(overdue_ids) == overdue
            assert decision.capacity <= (r_star_gcp if policy == "gcp" else r_star) + 1e-9
        elif policy != "hold":  # hold keeps what it learned of the load across downtime; a fresh start has not
            assert decision.capacity == pytest.approx(started.capacity, abs=1e-9)
        bound = {"follow": r_star, "gcp": r_star_gcp}.get(policy, rho_d)
        assert 0.0 <= decision.capacity <= bound + 1e-9, (t, decision.capacity, bound)
        cluster.apply(decision, t)
        fresh_cluster.apply(started, t)
    print(policy, overdue, f"R* = {r_star:.3g} (gcp's {r_star_gcp:.3g}), rho_D = {rho_d:.3g}, m_t (gap, fresh) = {[(round(a, 2), round(b, 2)) for a, b in seen]}")


def test_finished_jobs_never_count_after_a_gap():
    # Slot 0: three 10-slot jobs are released; two finish early (EMR says done) while slots 1-4 go
    # undecided, and two 2-slot jobs arrive. At slot 5 the work is the survivor's 5 slots left
    # (5..9) and 2 x 2 slots of the queued jobs: 9 units, none of the 2 x 5 the finished ones had left.
    config = ControllerConfig(policy="hold", deadline_slots=2, slot_s=TAU, max_nodes=100)
    queue = JobQueue(TAU)
    for i in range(3):
        queue.add(job(f"long{i}", 0.0, 10 * TAU, 10 * TAU + 60.0, i + 1))  # start-by slot 0: all go now
    first, state = tick(0.0, queue, PolicyState(), config)
    assert len(first.release) == 3 and first.capacity > 0
    for job_id in first.release:
        queue.update(job_id, "running", released_s=0.0)
    queue.update("long0", "done")
    queue.update("long1", "done")
    queue.add(job("q0", 2 * TAU, 2 * TAU, 30 * TAU, 4))
    queue.add(job("q1", 3 * TAU, 2 * TAU, 30 * TAU, 5))
    decision, after = tick(5 * TAU, queue, state, config)
    handed = after.hold.queue[-1].sum() + decision.assigned  # what hold was handed now: it ran x_t of it
    assert handed + sum(sum(units) for units in after.future.values()) == pytest.approx(9.0)
    # L_t shows the active jobs' own units now: the survivor's and the two queued jobs', one each.
    assert decision.load == 3.0
    # The same as a start on these jobs alone: nothing of the slots before the gap is left.
    fresh, fresh_state = tick(5 * TAU, queue, PolicyState(), config)
    assert decision.capacity == pytest.approx(fresh.capacity) and after.future == fresh_state.future


@pytest.mark.parametrize("before, after", [("hold", "follow"), ("hold", "vfw"), ("gcp-u", "gcp"), ("follow", "hold")])
def test_a_policy_change_mid_run_gives_what_the_new_policy_gives_from_a_fresh_start(before, after):
    rng = random.Random(3)
    jobs = []
    for i in range(900):  # about 19 a slot over 48 slots, a few slots of slack each
        submit = rng.uniform(0, 48 * TAU)
        length = rng.choice([60.0, 400.0, 900.0])
        jobs.append(job(f"j{i}", submit, length, submit + length + rng.randint(1, 8) * TAU, i + 1))
    config = ControllerConfig(policy=before, deadline_slots=3, slot_s=TAU, max_nodes=10**6)
    cluster = Cluster(jobs, config)
    state = PolicyState()
    for t in range(30):
        cluster.advance(t)
        decision, state = tick(t * TAU, cluster.queue, state, config)
        cluster.apply(decision, t)
    changed = dataclasses.replace(config, policy=after)
    fresh_cluster = Cluster(cluster.pending, changed)
    for j in cluster.queue.jobs():
        fresh_cluster.queue.add(j)
    fresh = PolicyState()
    for t in range(30, 36):
        cluster.advance(t)
        fresh_cluster.advance(t)
        older = [j for j in cluster.queue.jobs() if config.slot_of(j.submit_s) < t]
        new = sum(1 for j in cluster.queue.jobs() if config.slot_of(j.submit_s) == t)
        decision, state = tick(t * TAU, cluster.queue, state, changed)
        started, fresh = tick(t * TAU, fresh_cluster.queue, fresh, changed)
        assert 0.0 <= decision.capacity <= started.capacity + 1e-9, t
        if t == 30:
            assert "the policy changed, so the policy's work was rebuilt" in decision.why
            # R* of the jobs submitted before (see the module docstring), and each job submitted in
            # this slot counted as in any slot: one unit now, so at most one server more.
            r_star = flat_rate(remaining_due(JobQueue.of(older, TAU), t, changed), t, 0)
            assert decision.capacity <= r_star + new + 1e-9
        cluster.apply(decision, t)
        fresh_cluster.apply(started, t)


def test_a_rebuild_hands_the_work_over_flat_and_every_unit_by_its_latest_slot():
    # Checked on rebuild_future itself: per-slot hand-over never above rho and non-increasing, every
    # job's work handed over in full, and by each slot at least the units that must have reached the
    # policy by then (due slot minus the deferral).
    rng = random.Random(11)
    slot = 100
    jobs = []
    for i in range(400):
        submit = rng.uniform(0, slot * TAU)
        length = rng.choice([60.0, 700.0, 2000.0])
        released = rng.random() < 0.2
        j = job(f"j{i}", submit, length, (slot + rng.randint(-5, 200)) * TAU + length, i + 1)
        jobs.append(dataclasses.replace(j, state="running", released_s=(slot - 1) * TAU) if released else j)
    for policy, deferral in (("gcp-u", 3), ("follow", 0)):
        config = ControllerConfig(policy=policy, deadline_slots=3, slot_s=TAU)
        future = rebuild_future(jobs, slot, config)
        queue = JobQueue.of(jobs, TAU)
        due = np.array(remaining_due(queue, slot, config))
        handed = np.array([sum(future.get(s, ())) for s in range(slot, slot + 300)])
        assert handed.sum() == pytest.approx(len(due))
        latest = np.bincount(np.maximum(due - slot - deferral, 0), minlength=300)
        assert np.all(np.cumsum(handed) >= np.cumsum(latest)[:300] - 1e-6)
        rho = flat_rate(list(due), slot, deferral)
        assert handed.max() <= rho + 1e-9 and np.all(np.diff(handed) <= 1e-9)
