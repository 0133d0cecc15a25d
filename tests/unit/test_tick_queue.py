"""tick on a JobQueue, with the seq watermark and the range rule for missed jobs, against a copy of
the controller as it was before them (every job scanned and sorted each slot, ``counted`` and
``missed`` kept as id sets): the same decisions, slot by slot, on random job sets.

Three rules came after that copy and are added to it where they apply, so the comparison goes on
covering them: the release margin (a job is due ``release_margin_slots`` before its start-by slot;
``_edf_release`` below), the rebuild of the policy's work after undecided slots or a policy
change (``rebuild_future``, shared with the controller, which a test of its own checks), and, under
overload, the jobs that can still be on time served before the overdue (``old_dispatch``). With a
margin of 0 and every slot decided under one policy the copy is the former controller apart from
that last rule (``test_with_no_margin_and_no_gap_tick_decides_as_before``)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter, deque
from dataclasses import dataclass, field, replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.controller import (
    UNKNOWN_SEQ,
    ControllerConfig,
    FollowWatch,
    PolicyState,
    demand_vector,
    job_units,
    rebuild_future,
    tick,
)
from autoscaler.core.edf import JobQueue, start_by_slot
from autoscaler.core.errors import ConfigError
from autoscaler.core.fairshare import dynamic_drf_step
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.policies.gcp import GcpState, gcp_step
from autoscaler.core.policies.hold import HoldState, hold_step
from autoscaler.core.policies.vfw import VfwState, vfw_step

TAU = 300.0
SHARE_TOLERANCE = 1e-12
REBUILDS: list[int] = []
"""Slots in which the copy took the rebuild added to it (a test of the former code checks it never does)."""

# -- the oracle: the controller's tick, dispatch and fair release before JobQueue ------------------


@dataclass(frozen=True)
class OldState:
    """What the controller carries between slots, persisted with the queue in one transaction.

    ``last_slot``: the slot last decided (-1 before the first). ``gcp``: GCP's unassigned
    work y and m_{t-1}. ``hold``: hold's queues, capacities and its rules' costs. ``future``: units of already-submitted jobs still to arrive,
    {slot: [units by deadline, shape (nu+1,)]}. ``tenants``: dynamic DRF's agents in arrival
    order, with their normalised demand vectors ``tenant_demands`` (k, 3) and dominant shares
    ``dominant_shares`` (k,), which never decrease. ``missed``: active jobs already counted as
    having missed their start-by slot.
    """

    last_slot: int = -1
    gcp: GcpState | None = None
    future: dict[int, tuple[float, ...]] = field(default_factory=dict)
    counted: frozenset[str] = frozenset()
    vfw: VfwState | None = None
    policy_key: str = ""
    tenants: tuple[str, ...] = ()
    tenant_demands: tuple[tuple[float, ...], ...] = ()
    dominant_shares: tuple[float, ...] = ()
    missed: frozenset[str] = frozenset()
    hold: HoldState | None = None
    follow_watch: FollowWatch = field(default_factory=FollowWatch)


def old_tick(now_s: float, jobs: list[Job], state: OldState, config: ControllerConfig) -> tuple[dict, OldState]:
    """Decide slot floor((now_s - epoch_s)/slot_s).

    ``jobs``: every job not yet done or failed, in any order. Jobs submitted after
    since the last decided slot (not in ``state.counted``) join the policy's work now. Raises ConfigError if the
    slot is not after ``state.last_slot``.
    """
    slot = config.slot_of(now_s)
    if slot <= state.last_slot:
        raise ConfigError(f"slot {slot} was already decided (last decided: {state.last_slot})")
    nu = config.nu
    changed = state.last_slot >= 0 and state.policy_key != config.policy_key
    gap = state.last_slot >= 0 and slot > state.last_slot + 1
    if changed or gap:
        # Added to the copy: the policy's work rebuilt from the active jobs (rebuild_future).
        # Tenants' shares are irrevocable and survive; hold's learning and the cost watch survive downtime.
        REBUILDS.append(slot)
        state = OldState(
            last_slot=state.last_slot,
            tenants=state.tenants,
            tenant_demands=state.tenant_demands,
            dominant_shares=state.dominant_shares,
            missed=state.missed,
            hold=state.hold.restarted() if state.hold is not None and not changed else None,
            follow_watch=FollowWatch() if changed else state.follow_watch,
        )
        future = rebuild_future(jobs, slot, config)
    else:
        future = dict(state.future)
        for job in jobs:
            if job.job_id not in state.counted and config.slot_of(job.submit_s) <= slot:
                start, end, deadline = job_units(job, config, slot)
                for s in range(start, end):
                    units = list(future.get(s, (0.0,) * (nu + 1)))
                    units[deadline] += 1.0
                    future[s] = tuple(units)
    arrivals = np.array(future.pop(slot, (0.0,) * (nu + 1)))
    # Units of slots skipped while the daemon was down belonged to slots that are gone:
    # piling them on now would only spike m_t. Jobs still queued are released by their
    # start-by slot whatever m_t says.
    for s in [s for s in future if s < slot]:
        del future[s]
    gcp_state = state.gcp or GcpState.empty(nu)
    vfw_state = state.vfw
    hold_state = state.hold
    work = None
    if config.policy == "follow":
        capacity = float(arrivals.sum())
    elif config.policy == "hold":
        # The daemon clamps nodes to max_nodes itself, as for gcp; hold never asks beyond max(r_t, m_{t-1}).
        # hold plans each job's units to its own start-by slot: the work by deadline index, as tick hands it.
        capacity, work, hold_state = hold_step(
            hold_state or HoldState.empty(config.deadline_slots, config.cost, queue_slots=nu),
            arrivals,
            config.deadline_slots,
            replace(config.cost, max_servers=None),
        )
    elif config.policy == "vfw":
        capacity, vfw_state = vfw_step(
            vfw_state or VfwState.empty(config.deadline_slots), float(arrivals.sum()), config.deadline_slots, config.vfw_delta
        )
    else:
        capacity, gcp_state = gcp_step(gcp_state, arrivals, replace(config.cost, max_servers=None))
    tenants, tenant_demands, dominant_shares = old_arrive_tenants(state, jobs, slot, config)
    decision = old_dispatch(slot, capacity, jobs, config, dict(zip(tenants, dominant_shares)), state.missed)
    load = float(arrivals.sum())
    if changed or gap:
        # After a rebuild L_t is the active jobs' own units in the slot, not the backlog handed over.
        load = float(sum(1 for job in jobs if config.slot_of(job.submit_s) <= slot and job_units(job, config, slot)[0] <= slot < job_units(job, config, slot)[1]))
    decision |= dict(load=load, work=capacity if work is None else work)
    watch = state.follow_watch.step(decision["capacity"], decision["work"], decision["load"], config.cost)
    decision |= dict(worse_than_follow=False, warning="")
    if watch.worse:
        decision |= dict(worse_than_follow=True)
        if not state.follow_watch.worse:
            decision |= dict(
                warning=f"{config.policy} has cost {watch.policy_cost + config.cost.beta * watch.last_capacity:.6g} "
                f"over its slots so far (servers switched off after the last), more than follow the workload "
                f"would have ({watch.follow_cost + config.cost.beta * watch.last_load:.6g}); its deferral is not paying here",
            )
    counted = frozenset(j.job_id for j in jobs if config.slot_of(j.submit_s) <= slot)
    active = {j.job_id for j in jobs}
    return decision, OldState(
        last_slot=slot,
        gcp=gcp_state,
        future=future,
        counted=counted,
        vfw=vfw_state,
        policy_key=config.policy_key,
        tenants=tenants,
        tenant_demands=tenant_demands,
        dominant_shares=dominant_shares,
        missed=(state.missed & active) | frozenset(decision["missed"]),
        hold=hold_state,
        follow_watch=watch,
    )


def old_arrive_tenants(
    state: OldState, jobs: list[Job], slot: int, config: ControllerConfig
) -> tuple[tuple[str, ...], tuple[tuple[float, ...], ...], tuple[float, ...]]:
    """Dynamic DRF over tenants: each tenant arrives with its first job submitted by ``slot``.

    Returns (tenants, normalised demand vectors, dominant shares) in arrival order. A tenant's
    demand vector is its first job's (``demand_vector``); newcomers arrive in submit order, one
    linear-time step each (paper: dynamic DRF note, §4), with n = ``config.tenants_n``, or k
    once more than n have come (the late ones share what is left, which may be nothing).
    """
    tenants = list(state.tenants)
    demands = [np.array(d) for d in state.tenant_demands]
    shares = np.array(state.dominant_shares, dtype=float)
    present = set(tenants)
    for job in sorted(jobs, key=lambda j: (j.submit_s, j.job_id)):
        if job.tenant in present or config.slot_of(job.submit_s) > slot:
            continue
        vector = demand_vector(job, config)
        demands.append(vector / vector.max())
        tenants.append(job.tenant)
        present.add(job.tenant)
        _, shares = dynamic_drf_step(np.array(demands), shares, max(config.tenants_n, len(tenants)))
    return tuple(tenants), tuple(tuple(float(v) for v in d) for d in demands), tuple(float(x) for x in shares)


def old_dispatch(
    slot: int,
    capacity: float,
    jobs: list[Job],
    config: ControllerConfig,
    dominant_shares: dict[str, float] | None = None,
    missed_before: frozenset[str] = frozenset(),
) -> dict:
    """Turn m_t into whole nodes and the jobs to release this slot (EDF, non-preemptive).

    Without overload, queued jobs are released in EDF order (earliest start-by slot first)
    onto the policy's nodes (so nodes ``hold`` keeps on run queued jobs early, as its x_t does), and those whose start-by slot has come onto extra nodes up to
    ``max_nodes``. Under overload (``Decision.overloaded``), every free node is filled and the
    free nodes go to tenants by weighted fair sharing with their dynamic DRF dominant shares as
    weights, EDF within each tenant (``fair_release``). ``dominant_shares``: {tenant: x_i}; a
    tenant missing from it has weight 0. ``missed_before``: ids already counted as missed.
    """
    running = [j for j in jobs if j.state in ("released", "running")]
    queued = sorted(
        (j for j in jobs if j.state == "queued" and config.slot_of(j.submit_s) <= slot),
        key=lambda j: _edf_key(j, config),
    )
    wanted = math.ceil(capacity - 1e-9)
    due = sum(1 for j in queued if start_by_slot(j, config) <= slot)
    nodes_wanted = max(wanted, len(running) + due)
    overloaded = nodes_wanted > config.max_nodes and bool(queued)
    nodes = min(config.max_nodes, max(config.min_nodes, wanted))
    if overloaded:
        # Added to the copy: the jobs that can still be on time (by deadline - length, without the
        # margin) first, then the overdue; each by deadline (Jackson's rule), not by start-by slot;
        # ahead of both, when they all fit the free nodes, the on-time jobs whose start-by slot is
        # within the nodes' lead time.
        free = config.max_nodes - len(running)

        def on_time(j: Job) -> bool:
            return config.slot_of(j.deadline_s - j.length_s) >= slot

        urgent = [j for j in queued if on_time(j) and start_by_slot(j, config) <= slot + config.due_margin_slots]
        classes = [[j for j in queued if on_time(j)], [j for j in queued if not on_time(j)]]
        if urgent and sum(j.nodes for j in urgent) <= free:
            classes.insert(0, urgent)
        release, chosen = [], []
        for members in classes:
            members = sorted((j for j in members if j.job_id not in release), key=_deadline_key)
            got = old_fair_release(members, running + chosen, free - len(release), dominant_shares or {}, config)
            release += got
            chosen += [j for j in members if j.job_id in got]
    else:
        release = _edf_release(queued, len(running), nodes, slot + config.release_margin_slots, config)
    nodes = min(config.max_nodes, max(nodes, len(running) + len(release)))
    released = set(release)
    by_id = {j.job_id: j for j in queued}
    late = [job_id for job_id in release if start_by_slot(by_id[job_id], config) < slot]  # in release order
    held = [j for j in queued if j.job_id not in released]
    at_risk = sum(1 for j in held if start_by_slot(j, config) <= slot + 1)
    # Released in its start-by slot is in time; held through it, or released after it, is missed.
    missed = [
        j
        for j in queued
        if j.job_id not in missed_before
        and (start_by_slot(j, config) < slot or (start_by_slot(j, config) == slot and j.job_id not in released))
    ]
    missed_by_tenant = dict(Counter(j.tenant for j in missed))
    nodes_by_tenant = dict(Counter(j.tenant for j in running) + Counter(j.tenant for j in queued if j.job_id in released))
    return dict(
        slot=slot,
        capacity=capacity,
        work=capacity,
        nodes=nodes,
        release=tuple(release),
        late=tuple(late),
        at_risk=at_risk,
        queue_depth=len(held),
        running=len(running) + len(release),
        rounding_node_slots=nodes - capacity,
        overloaded=overloaded,
        nodes_wanted=nodes_wanted,
        missed=tuple(j.job_id for j in missed),
        missed_by_tenant=missed_by_tenant,
        nodes_by_tenant=nodes_by_tenant,
    )


def _edf_key(job: Job, config: ControllerConfig) -> tuple:
    return (start_by_slot(job, config), job.deadline_s, job.submit_s, job.job_id)


def _deadline_key(job: Job) -> tuple:
    return (job.deadline_s, job.submit_s, job.job_id)


def _edf_release(queued: list[Job], running: int, nodes: int, due_by: int, config: ControllerConfig) -> list[str]:
    """EDF onto the policy's ``nodes``; a job whose start-by slot is by ``due_by`` also onto extra nodes up to the maximum.

    Added to the copy: ``due_by`` is the slot plus the release margin (it was the slot)."""
    release: list[str] = []
    for job in queued:
        due = start_by_slot(job, config) <= due_by
        if running + len(release) < nodes or (due and running + len(release) < config.max_nodes):
            release.append(job.job_id)
        elif not due:
            break
    return release


def old_fair_release(
    queued: list[Job], running: list[Job], free_nodes: int, dominant_shares: dict[str, float], config: ControllerConfig
) -> list[str]:
    """Give ``free_nodes`` nodes to queued jobs, tenant by tenant, in proportion to dominant shares.

    ``queued`` is by deadline. Each free node goes to the tenant with queued jobs whose nodes
    held (running plus released now) per unit of dominant share is least, ties to the tenant
    whose next job's deadline is earliest; that tenant's earliest-deadline job takes it.
    This is weighted fair queueing with the dynamic DRF shares as weights (paper: dynamic DRF
    note, §2), work-conserving: a tenant with nothing queued leaves its part to the others.
    Tenants of weight 0 are served only when no tenant of positive weight has jobs queued.
    Returns job ids by deadline.
    """
    held = Counter(j.tenant for j in running)
    queues: dict[str, deque[Job]] = {}
    for job in queued:
        queues.setdefault(job.tenant, deque()).append(job)
    chosen: set[str] = set()

    def load(tenant: str) -> tuple[float, tuple]:
        weight = dominant_shares.get(tenant, 0.0)
        # A share within rounding of 0 (what is left after the first n, e.g. 4e-17) is 0.
        return (held[tenant] / weight if weight > SHARE_TOLERANCE else math.inf, _deadline_key(queues[tenant][0]))

    for _ in range(max(0, free_nodes)):
        if not queues:
            break
        tenant = min(queues, key=load)
        chosen.add(queues[tenant].popleft().job_id)
        held[tenant] += 1
        if not queues[tenant]:
            del queues[tenant]
    return [j.job_id for j in queued if j.job_id in chosen]


# -- the comparison ---------------------------------------------------------------------------------

FIELDS = (
    "slot", "capacity", "nodes", "release", "late", "at_risk", "queue_depth", "running", "rounding_node_slots",
    "overloaded", "nodes_wanted", "missed", "missed_by_tenant", "nodes_by_tenant", "load", "worse_than_follow", "warning",
)  # fmt: skip
DEMANDS = {"P": (100.0, 0.0, 0.0), "Q": (0.0, 1e9, 0.0), "R": (50.0, 0.0, 0.0)}  # shares 2/3, 2/3, 1/3 in that order

job_spec = st.tuples(
    st.floats(0, 1),  # submit, a share of the span
    st.floats(1, 4 * TAU),  # length
    st.integers(-1, 5),  # slack in slots beyond the length (-1: due before it can finish)
    st.sampled_from("PQR"),
    st.sampled_from(["on time", "on time", "on time", "early", "late"]),  # when the store shows it
)


def compare_with_the_copy(spec, policy, changed_to, deadline_slots, max_nodes, span_s, with_seq, skipped, failing, margin) -> None:
    """Drive tick on a JobQueue and the copy side by side for 30 slots; assert equal decisions."""
    config = ControllerConfig(
        policy=policy, deadline_slots=deadline_slots, slot_s=TAU, max_nodes=max_nodes, max_deadline_slots=12, tenants_n=3,
        release_margin_slots=margin,
    )  # fmt: skip
    jobs, shown = [], []
    for i, (share, length, slack, tenant, when) in enumerate(spec):
        submit = share * span_s
        deadline = (math.floor(submit / TAU) + math.ceil(length / TAU) + slack + 1) * TAU
        j = Job(f"j{i}", f"j{i}", tenant, submit, deadline, length, StepSpec(args=("true",)), demand_vector=DEMANDS[tenant])
        submit_slot = math.floor(submit / TAU)
        # A job without a seq shows up by its submit slot; one shown late needs the store's seq.
        late = when == "late" and with_seq
        shown.append(max(0, submit_slot - 2) if when == "early" else submit_slot + 2 if late else submit_slot)
        jobs.append(j)
    queue = JobQueue(TAU)
    live: dict[str, Job] = {}
    old_state, state = OldState(), PolicyState()
    seq = 0
    failed_once: set[str] = set()
    for t in range(30):
        for i in sorted(range(len(jobs)), key=lambda i: (shown[i], i)):
            if shown[i] == t:
                seq += 1
                j = dataclasses.replace(jobs[i], seq=seq if with_seq else None)
                queue.add(j)
                live[j.job_id] = j
        for j in list(live.values()):
            if j.state == "running" and j.released_s + j.length_s <= t * TAU:
                queue.update(j.job_id, "done")
                del live[j.job_id]
        if t in skipped:
            continue  # the daemon was down
        if changed_to is not None and t == 12:
            config = replace(config, policy=changed_to)
        expected, old_state = old_tick(t * TAU, list(live.values()), old_state, config)
        decision, state = tick(t * TAU, queue, state, config)
        got = dataclasses.asdict(decision)
        assert {k: got[k] for k in FIELDS} == {k: expected[k] for k in FIELDS}, t
        assert decision.assigned == expected["work"]
        state = PolicyState.from_json(state.to_json())
        for job_id in decision.release:
            if int(job_id[1:]) in failing and job_id not in failed_once:
                failed_once.add(job_id)  # its step could not be added: the job stays queued, once
                continue
            queue.update(job_id, "running", released_s=t * TAU)
            live[job_id] = dataclasses.replace(live[job_id], state="running", released_s=t * TAU)


@settings(max_examples=150, deadline=None)
@given(
    spec=st.lists(job_spec, min_size=1, max_size=40),
    policy=st.sampled_from(["hold", "gcp-u", "gcp", "vfw", "follow"]),
    changed_to=st.sampled_from([None, None, "gcp-u", "follow"]),
    deadline_slots=st.integers(2, 4),
    max_nodes=st.sampled_from([2, 5, 10_000]),
    span_s=st.sampled_from([2 * TAU, 14 * TAU]),
    with_seq=st.booleans(),
    skipped=st.sets(st.integers(1, 24), max_size=4),
    failing=st.sets(st.integers(0, 39), max_size=3),
    margin=st.integers(0, 2),
)
def test_tick_on_a_job_queue_decides_as_the_old_scan_did(
    spec, policy, changed_to, deadline_slots, max_nodes, span_s, with_seq, skipped, failing, margin
):
    compare_with_the_copy(spec, policy, changed_to, deadline_slots, max_nodes, span_s, with_seq, skipped, failing, margin)


@settings(max_examples=100, deadline=None)
@given(
    spec=st.lists(job_spec, min_size=1, max_size=40),
    policy=st.sampled_from(["hold", "gcp-u", "gcp", "vfw", "follow"]),
    deadline_slots=st.integers(2, 4),
    max_nodes=st.sampled_from([2, 5, 10_000]),
    span_s=st.sampled_from([2 * TAU, 14 * TAU]),
    with_seq=st.booleans(),
    failing=st.sets(st.integers(0, 39), max_size=3),
)
def test_with_no_margin_and_no_gap_tick_decides_as_before(spec, policy, deadline_slots, max_nodes, span_s, with_seq, failing):
    """release_margin_slots = 0, every slot decided, one policy: the former controller's decisions
    (the copy without either added rule: it never takes the rebuild, and its due_by is the slot)."""
    REBUILDS.clear()
    compare_with_the_copy(spec, policy, None, deadline_slots, max_nodes, span_s, with_seq, set(), failing, margin=0)
    assert REBUILDS == []


def test_a_state_saved_before_the_watermark_goes_on_without_counting_a_job_twice():
    # Jobs with store seqs, ticked to slot 5; the state is then written as the former code wrote it
    # (counted and missed id lists, no counted_seq) and the run goes on from it. Every job there was
    # submitted by slot 5, so the rule for it (counted iff submitted by the last decided slot) is exact.
    config = ControllerConfig(policy="gcp-u", deadline_slots=2, slot_s=TAU, max_nodes=3)
    jobs = [
        Job(f"j{i}", "n", "t", (i % 6) * TAU + i, (i % 6 + 2) * TAU + i, 200.0, StepSpec(args=("true",)), seq=i + 1) for i in range(24)
    ]
    late = [Job("late", "n", "t", 7 * TAU, 9 * TAU, 200.0, StepSpec(args=("true",)), seq=25)]
    queue = JobQueue(TAU)
    state = PolicyState()
    for t in range(6):
        for j in jobs:
            if math.floor(j.submit_s / TAU) == t:
                queue.add(j)
        decision, state = tick(t * TAU, queue, state, config)
        for job_id in decision.release:
            queue.update(job_id, "running", released_s=t * TAU)
    document = state.to_json()
    assert len(json.dumps(document)) < 2_000  # no list of every job counted or missed
    old = {k: v for k, v in document.items() if k not in ("counted_seq", "uncounted", "released_due")}
    old |= {"counted": sorted(j.job_id for j in jobs), "missed": ["j0", "gone"]}
    resumed, fresh = PolicyState.from_json(old), state
    assert resumed.counted_seq == UNKNOWN_SEQ
    queue.add(late[0])  # seen already, submitted for slot 7
    for t in range(6, 10):
        a, resumed = tick(t * TAU, queue, resumed, config)
        b, fresh = tick(t * TAU, queue, fresh, config)
        assert a == b, t
        for job_id in a.release:
            queue.update(job_id, "running", released_s=t * TAU)
    assert resumed.counted_seq == fresh.counted_seq == 25 and resumed.uncounted == fresh.uncounted == frozenset()
