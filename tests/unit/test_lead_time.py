"""Lead time (issue 22): a job is never planned past its own start-by slot, and never started late
for want of a booting node.

Figures by hand: slot_s = 300 s, the release margin 1 slot, so a job is due ceil(provision_s / 300)
slots before its start-by slot under "job-slots" and one slot more under "node-seconds", at least 1
(``ControllerConfig.due_margin_slots``): a node asked for then is usable by the start of the start-by
slot (under node-seconds by the slot before, so the jobs packed onto it have run by then). Times and
lengths are whole seconds, so every start-by slot and every share of a slot below is exact in
floating point.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slot_simulation import simulate_slots

from autoscaler.app.compare import CompareInputs, policy_on_twin
from autoscaler.app.config import Settings
from autoscaler.core.controller import ControllerConfig, PolicyState, tick
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.slot_config import TICKS_PER_SLOT
from autoscaler.core.slot_work import job_ticks, job_units
from autoscaler.core.twin import TwinConfig

TAU = 300
NODE_S = "node-seconds"
JOB_SLOTS = "job-slots"


def job(job_id: str, submit_s: float, length_s: float, deadline_s: float) -> Job:
    return Job(job_id, job_id, "t", float(submit_s), float(deadline_s), float(length_s), StepSpec(args=("true",)))


def start_by(j: Job) -> int:
    """By hand: the slot of deadline - length (exact: whole seconds)."""
    return math.floor((j.deadline_s - j.length_s) / TAU)


def lead_slots(provision_s: int, margin_slots: int = 1, work_model: str = JOB_SLOTS) -> int:
    """By hand: the slots before its start-by slot a job is due, ceil(provision_s / slot_s) (+ 1 under
    node-seconds) or the margin."""
    return max(margin_slots, -(-provision_s // TAU) + (1 if work_model == NODE_S else 0))


# -- 1. planned by its own start-by slot (the controller alone, slot by slot) -------------------


def work_by_due_slot(j: Job, work_model: str) -> dict[int, tuple[int, float]]:
    """By hand, the work a job hands the policy in each slot it runs as the active-job model counts it
    (from its submit slot, as if it ran from its submit time): {slot: (the slot that work is due
    in, server-slots)}. Its k-th slot of work is due in start-by slot + k, the slot it runs in if it
    starts in its start-by slot; "job-slots" counts 1 a slot, "node-seconds" the slot's share it
    runs, in whole ticks of 5 s rounded up (at least one in its first slot)."""
    first = math.floor(j.submit_s / TAU)
    end_s = j.submit_s + j.length_s
    last = max(first + 1, -(-int(end_s) // TAU))
    work = {}
    for k, slot in enumerate(range(first, last)):
        if work_model == JOB_SLOTS:
            amount = 1.0
        else:
            overlap_s = int(min(end_s, (slot + 1) * TAU) - max(j.submit_s, slot * TAU))
            ticks = -(-overlap_s * TICKS_PER_SLOT // TAU)
            amount = max(ticks, 1 if k == 0 else 0) / TICKS_PER_SLOT
        work[slot] = (start_by(j) + k, amount)
    return work


@st.composite
def mixed_jobs(draw):
    """Up to 25 jobs, submitted in slots 0..15 at any whole second, 1 s to 3 slots long, with 0 to
    30 slots of slack past their length."""
    jobs = []
    for i in range(draw(st.integers(1, 25))):
        submit_s = draw(st.integers(0, 16 * TAU - 1))
        length_s = draw(st.one_of(st.integers(1, 3 * TAU), st.sampled_from([1, 299, 300, 301, 600])))
        slack_s = draw(st.one_of(st.integers(0, 30 * TAU), st.sampled_from([0, TAU - 1, TAU, 2 * TAU])))
        jobs.append(job(f"j{i}", submit_s, length_s, submit_s + length_s + slack_s))
    return jobs


@settings(max_examples=40, deadline=None)
@given(
    jobs=mixed_jobs(),
    work_model=st.sampled_from([JOB_SLOTS, NODE_S]),
    deadline_slots=st.integers(1, 4),
    provision_s=st.sampled_from([0, 1, 299, 300, 330, 600]),
)
def test_hold_plans_each_jobs_work_by_its_start_by_slot_and_releases_it_by_then(jobs, work_model, deadline_slots, provision_s):
    """Slot by slot, after each ``tick``: hold's queue (``HoldState.queue[-1]``: the work it has not
    run, by slots to its deadline) holds nothing due in the slot just decided, and, for every later
    slot d, no more work due at or after d than the counted jobs brought that is due at or after d
    by their own start-by slots (``work_by_due_slot``, by hand): no work is planned later than its
    job allows. Each job's units carry start-by slot - submit slot as their deadline index
    (``job_units``, ``job_ticks``). And, the cap allowing, every job is released by its release-by
    slot (start-by slot - the due margin), or in its submit slot if that is later, with no
    decision late or missed."""
    config = ControllerConfig(
        policy="hold", deadline_slots=deadline_slots, slot_s=TAU, max_nodes=10_000, provision_s=float(provision_s), work_model=work_model
    )
    g = lead_slots(provision_s, work_model=work_model)
    for j in jobs:
        submit_slot = math.floor(j.submit_s / TAU)
        # Under node-seconds each job is planned to the slot it must be released by, g slots before
        # its start-by slot (the nodes' lead time); under job-slots to its start-by slot, as replay.
        planned = start_by(j) - submit_slot - (g if work_model == NODE_S else 0)
        assert job_units(j, config, submit_slot)[2] == max(0, planned), j
        if work_model == NODE_S:
            assert job_ticks(j, config, submit_slot)[2] == max(0, planned), j
    horizon = max(max(start_by(j) for j in jobs), max(math.ceil((j.submit_s + j.length_s) / TAU) for j in jobs)) + 2
    # brought[t, d]: work counted in slot t that is due in slot d.
    work = [work_by_due_slot(j, work_model) for j in jobs]
    brought = np.zeros((horizon, max(due for w in work for due, _ in w.values()) + 1))
    for w in work:
        for slot, (due, amount) in w.items():
            if slot < horizon:
                brought[slot, due] += amount
    assert config.due_margin_slots == g
    # slot_simulation's loop, with hold's queue read after every slot (simulate_slots keeps only the last state).
    live: dict[str, Job] = {}
    released_in: dict[str, int] = {}
    pending = sorted(jobs, key=lambda j: j.submit_s)
    state = PolicyState()
    for t in range(horizon):
        now_s = float(t * TAU)
        while pending and math.floor(pending[0].submit_s / TAU) <= t:
            j = pending.pop(0)
            live[j.job_id] = j
        for j in list(live.values()):
            if j.state == "running" and j.released_s + j.length_s <= now_s:
                del live[j.job_id]
        decision, state = tick(now_s, list(live.values()), state, config)
        assert decision.late == () and decision.missed == (), t
        for job_id in decision.release:
            live[job_id] = dataclasses.replace(live[job_id], state="running", released_s=now_s)
            released_in[job_id] = t
        unrun = state.hold.queue[-1]  # index i: due in slot t + i
        scale = 1e-9 * (1.0 + brought.sum())
        assert unrun[0] <= scale, (t, unrun[0])
        due_after = np.cumsum(brought[: t + 1].sum(axis=0)[::-1])[::-1]  # [d]: brought by t, due at or after d
        held_after = np.cumsum(unrun[::-1])[::-1]  # [i]: unrun, due at or after t + i
        for i in range(1, unrun.shape[0]):
            allowed = due_after[t + i] if t + i < due_after.shape[0] else 0.0
            assert held_after[i] <= allowed + scale, (t, i, held_after[i], allowed)
    for j in jobs:
        submit_slot = math.floor(j.submit_s / TAU)
        assert released_in[j.job_id] <= max(submit_slot, start_by(j) - g), (j, released_in[j.job_id])


@settings(max_examples=30, deadline=None)
@given(
    jobs=mixed_jobs(),
    policy=st.sampled_from(["gcp-u", "follow"]),
    work_model=st.sampled_from([JOB_SLOTS, NODE_S]),
    provision_s=st.sampled_from([0, 330, 600]),
)
def test_gcp_u_and_follow_release_each_job_by_its_release_by_slot(jobs, policy, work_model, provision_s):
    """The release alone for the policies that plan with one D (gcp-u) or none (follow): their plans
    give a job of less slack than D a later deadline (issue 22), and the release must still send it
    out by start-by slot - the due margin (or its submit slot), none late or missed."""
    config = ControllerConfig(
        policy=policy, deadline_slots=2, slot_s=TAU, max_nodes=10_000, provision_s=float(provision_s), work_model=work_model
    )
    horizon = max(start_by(j) for j in jobs) + 2
    run = simulate_slots(jobs, config, horizon)
    assert not any(d.late or d.missed for d in run.decisions)
    g = lead_slots(provision_s)
    for j in jobs:
        assert run.released_in[j.job_id] <= max(math.floor(j.submit_s / TAU), start_by(j) - g), j


# -- 2. never started late for want of a booting node (the daemon's slot loop on the twin) ------


def on_twin(jobs: list[Job], policy: str, work_model: str, provision_s: float, deadline_slots: int = 2):
    """``jobs`` (their real deadlines) through the daemon's slot loop on a twin with exact lengths
    (``compare.policy_on_twin``, which adds D slots to each deadline: taken off here first); the
    twin's step of each job by job id, and the twin."""
    shifted = sorted((dataclasses.replace(j, deadline_s=j.deadline_s - deadline_slots * TAU) for j in jobs), key=lambda j: j.submit_s)
    window_slots = max(start_by(j) for j in jobs) + 2
    inputs = CompareInputs(
        tuple(shifted),
        window_slots,
        Settings(work_model=work_model, deadline_slots=deadline_slots),
        TwinConfig(provision_s=provision_s),
        0,
        10_000,
    )
    twin = policy_on_twin(inputs, policy, deadline_slots)
    return {step.job_id: step for step in twin.steps.values()}, twin


@st.composite
def twin_jobs(draw):
    """Up to 30 jobs, each (job, the slot the daemon first sees it in): seen at the start of slots
    0..10 (submitted up to 299 s before), 1 s to 3 slots long, with a start-by slot 0 to 14 slots
    after the slot it is seen in, anywhere inside that slot."""
    jobs = []
    for i in range(draw(st.integers(1, 30))):
        seen = draw(st.integers(0, 10))
        submit_s = max(0, seen * TAU - draw(st.sampled_from([0, 1, 150, 299])))
        length_s = draw(st.one_of(st.integers(1, 3 * TAU), st.sampled_from([1, 299, 300, 600])))
        lead = draw(st.integers(0, 14))
        into_slot_s = draw(st.sampled_from([0, 1, 150, 299]))
        jobs.append((job(f"j{i}", submit_s, length_s, (seen + lead) * TAU + into_slot_s + length_s), seen))
    return jobs


@settings(max_examples=40, deadline=None)
@given(
    spec=twin_jobs(),
    policy=st.sampled_from(["hold", "hold", "gcp-u", "follow"]),
    provision_s=st.one_of(st.integers(0, 660), st.sampled_from([0, 299, 300, 301, 330, 600])),
)
def test_under_job_slots_no_job_starts_late_for_a_booting_node(spec, policy, provision_s):
    """ "job-slots" (a node for each job): every job's step is added (released) by its release-by
    slot, start-by slot - the due margin, or in the slot the daemon sees it if that is later; it
    starts by the start of its start-by slot, or, seen with less lead than the nodes take, by
    provision_s after the start of that slot (a node asked for then is up); and a job seen with that
    lead ends by its deadline (its latest start, deadline - length, is in its start-by slot)."""
    jobs = [j for j, _ in spec]
    steps, _ = on_twin(jobs, policy, JOB_SLOTS, float(provision_s))
    g = lead_slots(provision_s)
    for j, seen in spec:
        step, s = steps[j.job_id], start_by(j)
        assert step.end_s is not None, j
        assert step.added_s <= max(seen, s - g) * TAU, (j, step)
        assert step.start_s <= max(s * TAU, seen * TAU + provision_s), (j, step)
        if s - seen >= g:
            assert step.end_s <= j.deadline_s, (j, step)


@settings(max_examples=30, deadline=None)
@given(spec=twin_jobs(), policy=st.sampled_from(["hold", "gcp-u", "follow"]))
def test_under_node_seconds_with_nodes_up_at_once_no_job_with_a_slot_of_lead_starts_late(spec, policy):
    """ "node-seconds" (short jobs share a node, a released step waits PENDING for a free one) with
    provision_s = 0: every job is released by its release-by slot (or when seen), and one seen at
    least a slot before its start-by slot starts by the start of that slot, so it ends by its
    deadline."""
    steps, _ = on_twin([j for j, _ in spec], policy, NODE_S, 0.0)
    for j, seen in spec:
        step, s = steps[j.job_id], start_by(j)
        assert step.end_s is not None, j
        assert step.added_s <= max(seen, s - 1) * TAU, (j, step)
        if s - seen >= 1:
            assert step.start_s <= s * TAU and step.end_s <= j.deadline_s, (j, step)


@settings(max_examples=30, deadline=None)
@given(spec=twin_jobs(), policy=st.sampled_from(["hold", "gcp-u", "follow"]), provision_s=st.integers(1, 660))
def test_under_node_seconds_no_job_with_the_lead_starts_late_for_a_booting_node(spec, policy, provision_s):
    """ "node-seconds" with a boot: every job's step is added by its release-by slot (start-by slot -
    ceil(provision_s / slot_s) - 1), or when seen, so a node asked for then is up by the slot before
    its start-by slot; every job runs; and one seen with that lead starts by the start of its
    start-by slot (the work queued ahead of it is at most the nodes' slot) and ends by its deadline."""
    steps, _ = on_twin([j for j, _ in spec], policy, NODE_S, float(provision_s))
    g = lead_slots(provision_s, work_model=NODE_S)
    for j, seen in spec:
        step, s = steps[j.job_id], start_by(j)
        assert step.end_s is not None, j
        assert step.added_s <= max(seen, s - g) * TAU, (j, step)
        if s - seen >= g:
            assert step.start_s <= s * TAU and step.end_s <= j.deadline_s, (j, step)


# -- by hand ----------------------------------------------------------------------------------


@pytest.mark.parametrize("work_model", [JOB_SLOTS, NODE_S])
def test_with_a_330_s_boot_a_job_due_in_slot_10_goes_out_by_slot_8_onto_a_node_up_before_slot_10(work_model):
    # "b" (3,000 s, no slack) holds hold's one node through slot 9, so only being due releases "a"
    # (60 s, start-by slot 10: its deadline 3,160 s - 60 s = 3,100 s is in slot 10): due
    # ceil(330/300) = 2 slots early (3 under node-seconds), by slot 8, on a node up before 3,000 s.
    a = job("a", 0, 60, 10 * TAU + 160)
    b = job("b", 0, 3000, 3000)
    assert start_by(a) == 10 and lead_slots(330) == 2 and lead_slots(330, work_model=NODE_S) == 3
    steps, twin = on_twin([a, b], "hold", work_model, 330.0)
    node = next(node_id for step_id, node_id, *_ in twin.runs if twin.steps[step_id].job_id == "a")
    assert steps["a"].added_s <= 8 * TAU
    assert twin.nodes[node].usable_s < 10 * TAU
    assert steps["a"].start_s <= 10 * TAU and steps["a"].end_s <= a.deadline_s
    # Without a boot the 1-slot margin alone: due in slot 9.
    steps, _ = on_twin([a, b], "hold", work_model, 0.0)
    assert steps["a"].added_s <= 9 * TAU and steps["a"].start_s <= 10 * TAU
    # "b", with no slack, is due at once and starts when the first node is up, 330 s late: no
    # release can help a job with less lead than the nodes take.
    assert on_twin([a, b], "hold", work_model, 330.0)[0]["b"].start_s == 330.0


def packed_pair() -> list[Job]:
    """x: 1 s, start-by slot 1 (deadline 301 s); y: 299 s, start-by slot 1, latest start 300 s
    (deadline 599 s); both submitted at 0, so each is seen a slot before its start-by slot."""
    return [job("x", 0, 1, 301), job("y", 0, 299, 599)]


@pytest.mark.parametrize(("work_model", "provision_s"), [(JOB_SLOTS, 300.0), (NODE_S, 0.0)])
def test_the_packed_pair_is_on_time_with_a_node_each_or_with_nodes_up_at_once(work_model, provision_s):
    steps, _ = on_twin(packed_pair(), "hold", work_model, provision_s)
    assert steps["x"].start_s <= 300 and steps["y"].start_s <= 300 and steps["y"].end_s <= 599


@pytest.mark.parametrize("policy", ["hold", "gcp-u"])
def test_jobs_that_would_pack_onto_a_booting_node_are_due_a_slot_earlier(policy):
    # Packed in slot 0 (1 s + 299 s = one node's 300 s) onto one node up at 300 s, x would run
    # 300-301 s and y 301-600 s, past its latest start (300 s) and its deadline (599 s). Under
    # node-seconds a job is due ceil(300/300) + 1 = 2 slots ahead, so a pair seen with less lead than
    # that goes out at once, each onto its own node (two due jobs need two nodes' slots here).
    steps, _ = on_twin(packed_pair(), policy, NODE_S, 300.0)
    assert steps["x"].start_s <= 300 and steps["y"].end_s is not None
    # With a slot more of lead (start-by slot 2) both start by the start of it and end in time.
    later = [job("x", 0, 1, 601), job("y", 0, 299, 899)]
    steps, _ = on_twin(later, policy, NODE_S, 300.0)
    assert steps["x"].start_s <= 600 and steps["y"].start_s <= 600 and steps["y"].end_s <= 899
