"""The policy's work, slot by slot (paper: deferral, §VI-A's active-job model): which jobs a slot
counts for the first time, the units each job adds, and the work rebuilt from the active jobs after
undecided slots, a policy change or at the first slot (``rebuild_future``).

A job of w nodes (``Job.nodes``) is w times the work of a one-node job of its length: L_t is the sum
of w over the active jobs (w units a slot under "job-slots", w x its ticks under "node-seconds")."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from autoscaler.core.edf import QUEUED, JobQueue, job_length_slots, start_by_slot
from autoscaler.core.model import Job
from autoscaler.core.policies import POLICY_TABLE
from autoscaler.core.policies.gcp import solve_gcp_opt
from autoscaler.core.policy_state import PolicyState
from autoscaler.core.slot_config import TICKS_PER_SLOT, UNIFORM_DEADLINE_POLICIES, WORK_MODELS, ControllerConfig

__all__ = ["arrived_units", "counted_now", "flow_at", "job_ticks", "job_units", "node_seconds_active", "rebuild_cause", "rebuild_future", "slot_ticks", "with_units"]


def job_units(job: Job, config: ControllerConfig, first_slot: int) -> tuple[int, int, int]:
    """(first slot, one past the last slot, deadline index) of a job's units (paper's active-job model):
    one unit in each slot from max(``first_slot``, its submit slot) to the slot its expected length
    (``Job.work_length_s``: the length planned times the learned work factor) ends in, at least one,
    as ``autoscaler replay``'s active curve counts it. The deadline index is, for a policy
    that plans to the start-by slot (hold: ``config.plans_start_by``), the slots from its submission
    to its start-by slot, under "node-seconds" less the slots it must be released ahead of it
    (``due_margin_slots``: its nodes' lead time); D for the other uniform-deadline policies; else the job's own slack in
    slots; at most ``nu`` (``max_deadline_slots``: it bounds the deadline, never the work)."""
    submit_slot = config.slot_of(job.submit_s)
    start = max(first_slot, submit_slot)
    end_position = math.ceil((job.submit_s - config.epoch_s + job.work_length_s) / config.slot_s)
    end = max(start + 1, end_position)
    if config.plans_start_by:
        # Each unit may wait as long as the job may before it starts: to its start-by slot (a trace's
        # job, deadline = submit + length + D, gets D exactly, as the replay plans it); under
        # node-seconds to the slot it is due in, so its nodes are asked for their lead time ahead.
        lead = config.due_margin_slots if config.work_model != WORK_MODELS[0] else 0
        deadline = max(0, min(start_by_slot(job, config) - submit_slot - lead, config.nu))
    elif config.policy in UNIFORM_DEADLINE_POLICIES:
        deadline = config.deadline_slots
    else:
        deadline = max(0, min(config.slot_of(job.deadline_s) - submit_slot, config.max_deadline_slots))
    return start, end, deadline


def slot_ticks(start_s: float, length_s: float, slot: int, config: ControllerConfig) -> int:
    """Ticks (1/``TICKS_PER_SLOT`` of a slot, rounded up) that a job running from ``start_s`` for
    ``length_s`` seconds runs in ``slot``; 0 if it does not run in it."""
    low = max(start_s, config.epoch_s + slot * config.slot_s)
    high = min(start_s + length_s, config.epoch_s + (slot + 1) * config.slot_s)
    if high <= low:
        return 0
    # 1e-9 of a tick: a share that is a whole number of ticks in exact arithmetic is not raised by float dust.
    return min(TICKS_PER_SLOT, math.ceil((high - low) / config.slot_s * TICKS_PER_SLOT - 1e-9))


def job_ticks(job: Job, config: ControllerConfig, first_slot: int) -> tuple[int, int, int, dict[int, int]]:
    """(first slot, one past the last slot, deadline index, {slot: ticks}) of a job's node time under
    "node-seconds": ``job_units``'s first slot and deadline, the job taken to run from max(its submit
    time, the start of its first slot) for its expected length (``Job.work_length_s``; its last slot
    from that); in each slot the ticks it runs there (``slot_ticks``), at least one in its first slot (a job of no length still
    asks for a node). Only the first slot, the last and the second are listed (the slots between run whole:
    ``TICKS_PER_SLOT`` each), so the cost does not grow with the length."""
    start, _, deadline = job_units(job, config, first_slot)
    start_s = max(job.submit_s, config.epoch_s + start * config.slot_s)
    # Its end from when it is taken to start (a job seen a slot after its submission runs later).
    end = max(start + 1, math.ceil((start_s - config.epoch_s + job.work_length_s) / config.slot_s - 1e-9))
    ticks = {s: slot_ticks(start_s, job.work_length_s, s, config) for s in {start, start + 1, end - 1} if start <= s < end}
    ticks[start] = max(1, ticks[start])
    return start, end, deadline, ticks


def _ticks_in(ticks: dict[int, int], start: int, end: int, slot: int) -> int:
    """A job's ticks in ``slot`` from ``job_ticks``' listing: whole slots between the listed ones."""
    if slot < start or slot >= end:
        return 0
    return ticks.get(slot, TICKS_PER_SLOT)


def arrived_units(job: Job, slot: int, config: ControllerConfig) -> float:
    """Server-slots of ``job``'s work the policy has been handed up to and including ``slot``, counted
    from its submit slot: one unit a slot it would have run (``job_units``), under "node-seconds" its
    ticks there (``job_ticks``) over ``TICKS_PER_SLOT``. O(1) whatever the job's length."""
    if config.work_model == WORK_MODELS[0]:
        start, end, _ = job_units(job, config, config.slot_of(job.submit_s))
        return float(max(0, min(slot + 1, end) - start) * job.nodes)
    start, end, _, ticks = job_ticks(job, config, config.slot_of(job.submit_s))
    last = min(slot, end - 1)
    if last < start:
        return 0.0
    listed = {s for s in ticks if start <= s <= last}
    whole = (last - start + 1) - len(listed)
    return (sum(ticks[s] for s in listed) + whole * TICKS_PER_SLOT) * job.nodes / TICKS_PER_SLOT


def node_seconds_active(jobs: Iterable[Job], config: ControllerConfig, n_slots: int) -> np.ndarray:
    """The active curve under "node-seconds", shape (``n_slots``,), server-slots: each job's ticks
    (``job_ticks``, counted from its submit slot) over ``TICKS_PER_SLOT``, what the controller hands
    the policy slot by slot when every slot is decided (``autoscaler replay``'s active curve counts
    one unit a job and slot instead). Work after ``n_slots`` is left out."""
    ticks = np.zeros(n_slots + 1, dtype=np.int64)  # a difference array; index n_slots gathers the rest
    for job in jobs:
        start, end, _, listed = job_ticks(job, config, config.slot_of(job.submit_s))
        for s in sorted({start, start + 1, end - 1, end}):
            if start <= s <= end and 0 <= s:
                change = _ticks_in(listed, start, end, s) - _ticks_in(listed, start, end, s - 1)
                ticks[min(s, n_slots)] += change * job.nodes
    return np.cumsum(ticks)[:n_slots] / TICKS_PER_SLOT


def counted_now(queue: JobQueue, state: PolicyState, slot: int, config: ControllerConfig) -> tuple[list[Job], int, frozenset[str]]:
    """(jobs counted for the first time in ``slot``, the new ``counted_seq``, the new ``uncounted``).

    A job with a seq above ``state.counted_seq`` is seen now: counted if its submit slot has come,
    else kept in ``uncounted`` until it does. A job without a seq is counted in the first slot
    decided at or after its submit slot: now iff its submit slot is in (``state.last_slot``, ``slot``].
    Cost: O(log n + the jobs returned + uncounted).
    """
    since = None if state.last_slot < 0 else state.last_slot + 1
    if state.counted_seq < 0:  # UNKNOWN_SEQ: the no-seq rule for every job, once
        top = queue.max_seq()
        later = frozenset(j.job_id for j in queue.submitted_in(slot + 1, None) if j.seq is not None)
        return queue.submitted_in(since, slot), 0 if top is None else top, later
    found = {j.job_id: j for j in queue.submitted_in(since, slot) if j.seq is None}
    counted_seq = state.counted_seq
    later: set[str] = set()
    for job_id in sorted(state.uncounted):  # sorted: a set's order changes with the hash seed, and sums follow it
        job = queue.get(job_id)
        if job is not None:
            if config.slot_of(job.submit_s) <= slot:
                found[job_id] = job
            else:
                later.add(job_id)
    for job in queue.arrived_after(state.counted_seq):
        counted_seq = max(counted_seq, job.seq)
        if config.slot_of(job.submit_s) <= slot:
            found[job.job_id] = job
        else:
            later.add(job.job_id)
    return list(found.values()), counted_seq, frozenset(later)


def flow_at(
    flow: tuple[float, ...], flow_ends: dict[int, tuple[float, ...]], jobs: Iterable[Job], slot: int, config: ControllerConfig
) -> tuple[np.ndarray, dict[int, tuple[float, ...]]]:
    """The counted jobs' units in ``slot`` (shape (nu+1,), by deadline index) and the new ``flow_ends``,
    after the jobs that ended by ``slot`` leave the flow and ``jobs`` (counted in ``slot``) join it:
    each from ``slot`` to the end ``job_units`` gives it. ``flow``, ``flow_ends``: as in ``PolicyState``
    (() and {}: nothing flows). Cost: O(jobs + entries held), whatever the jobs' lengths; counts
    are whole numbers, so adding and taking them away is exact.

    Under "node-seconds" the units are ticks (``job_ticks``; ``config.ticks_per_unit`` to a
    server-slot) and a job's share changes where its listing does: ``flow_ends`` holds what leaves
    the flow at each of those slots (negative where the share grows, e.g. after a partial first
    slot), at most three entries a job.
    """
    units = np.array(flow, dtype=float) if flow else np.zeros(config.nu + 1)
    ends = dict(flow_ends)
    for s in sorted(s for s in ends if s <= slot):
        units -= np.asarray(ends.pop(s))
    joining: dict[int, np.ndarray] = {}

    def leave(at: int, deadline: int, amount: float) -> None:
        leaving = joining.get(at)
        if leaving is None:
            leaving = joining[at] = np.array(ends.get(at, np.zeros(config.nu + 1)), dtype=float)
        leaving[deadline] += amount

    by_ticks = config.work_model != WORK_MODELS[0]
    for job in jobs:
        if not by_ticks:
            start, end, deadline = job_units(job, config, slot)
            if start > slot:  # not submitted yet: counted when it is
                continue
            units[deadline] += float(job.nodes)
            leave(end, deadline, float(job.nodes))
            continue
        start, end, deadline, ticks = job_ticks(job, config, slot)
        if start > slot:
            continue
        units[deadline] += ticks[start] * job.nodes
        for at in sorted({start + 1, end - 1, end}):
            change = _ticks_in(ticks, start, end, at) - _ticks_in(ticks, start, end, at - 1)
            if at > start and change:
                leave(at, deadline, float(-change * job.nodes))
    ends.update({s: tuple(float(u) for u in leaving) for s, leaving in joining.items()})
    return units, ends


def with_units(future: dict[int, tuple[float, ...]], jobs: list[Job], slot: int, config: ControllerConfig) -> dict[int, tuple[float, ...]]:
    """``future`` with w units (``Job.nodes``) per slot each of ``jobs`` would run from ``slot`` on (``job_units``);
    under "node-seconds" w x its share of each slot in server-slots (``job_ticks`` / ``TICKS_PER_SLOT``)."""
    empty = (0.0,) * (config.nu + 1)
    touched: dict[int, list[float]] = {}
    by_ticks = config.work_model != WORK_MODELS[0]
    for job in jobs:
        if by_ticks:
            start, end, deadline, ticks = job_ticks(job, config, slot)
        else:
            start, end, deadline = job_units(job, config, slot)
        for s in range(start, end):
            units = touched.get(s)
            if units is None:
                units = touched[s] = list(future.get(s, empty))
            units[deadline] += (_ticks_in(ticks, start, end, s) / TICKS_PER_SLOT if by_ticks else 1.0) * job.nodes
    return {**future, **{s: tuple(units) for s, units in touched.items()}}


def rebuild_cause(state: PolicyState, slot: int, config: ControllerConfig) -> str | None:
    """Why ``tick`` rebuilds the policy's work from the active jobs in ``slot`` (``rebuild_future``):
    "start" (no slot decided yet), "policy" (``config.policy_key`` is not the state's), "gap" (a slot
    between ``state.last_slot`` and ``slot`` went undecided), or None (the slot after the last one)."""
    if state.last_slot < 0:
        return "start"
    if state.policy_key != config.policy_key:
        return "policy"
    return "gap" if slot > state.last_slot + 1 else None


def rebuild_future(
    jobs: Iterable[Job], slot: int, config: ControllerConfig, *, submitted_now: bool = True
) -> dict[int, tuple[float, ...]]:
    """The policy's work rebuilt from the active jobs alone in ``slot``: {slot >= ``slot``: units by
    deadline index, shape (nu+1,)}, as ``PolicyState.future`` holds it (``tick`` after downtime, a
    policy change, and at the first slot).

    Each job submitted by ``slot`` counts its remaining work, in slots of one unit each, and no more:

    * submitted in ``slot``: as in any slot (``job_units``), so a slot decided on time counts the
      same whether the state was rebuilt or not (left out with ``submitted_now`` False: ``tick``
      adds them to ``PolicyState.flow`` instead, two entries a job however long it runs);
    * submitted earlier and running: one unit in each slot it still runs, ``slot`` up to the slot of
      released_s + work_length_s (none if that has passed; the job keeps its node anyway);
    * submitted earlier and queued: ell = ceil(work_length_s/slot_s) units (``job_length_slots``), the
      k-th due by max(start-by slot, ``slot``) + k, its real deadline (not the margin's);
    * done and failed jobs are not active and count nothing, nor does work of slots gone by.

    The older jobs' units are not piled on ``slot``. gcp, which holds each unit with its own
    deadline, is handed all of them now, each with the slots to its due slot (at most nu, gcp's
    horizon), and runs them at its flat rate, max_j Y_j/(j+1). The other policies give a unit they
    hold the one deadline D (hold, gcp-u, vfw) or run it at once (follow), so each unit must reach
    them by its latest slot, its due slot minus D (minus 0 for follow); they are handed over in that
    order at the flattest rate that is on time: the slopes of the least concave majorant of the
    count of units latest by each slot (GCP-OPT (7)'s shape, ``solve_gcp_opt``), non-increasing from
    rho = max_h (units latest by ``slot`` + h)/(h+1), in fractions of a unit. So no slot is handed
    more than rho, and a policy that runs what it holds at its flat rate (gcp-u, hold's r_t) asks for
    at most rho; for follow rho is the remaining work over the slots to its due slots, the largest
    such ratio over every horizon. Cost: O(n + u log u) for n active jobs with u units, once per
    rebuild; the result holds a slot for each slot up to the last one handed over.
    """
    now: list[Job] = []
    due_slots: list[int] = []
    weights: list[float] = []  # each unit's size in server-slots: 1 under "job-slots"
    by_ticks = config.work_model != WORK_MODELS[0]
    for job in jobs:
        submit_slot = config.slot_of(job.submit_s)
        if submit_slot > slot:
            continue
        if submit_slot == slot:
            if submitted_now:
                now.append(job)
            continue
        if job.state == QUEUED:
            first = max(start_by_slot(job, config), slot)
            pieces = range(first, first + job_length_slots(job.work_length_s, config.slot_s))
            start_s = config.epoch_s + first * config.slot_s  # run from its due slot's start
        else:
            start_s = config.epoch_s + slot * config.slot_s if job.released_s is None else job.released_s
            end = math.ceil((start_s - config.epoch_s + job.work_length_s) / config.slot_s)
            pieces = range(slot, end)
        due_slots.extend(pieces)
        if by_ticks:
            weights.extend(max(1, slot_ticks(start_s, job.work_length_s, s, config)) * job.nodes / TICKS_PER_SLOT for s in pieces)
        else:
            weights.extend(float(job.nodes) for _ in pieces)
    future = with_units({}, now, slot, config)
    if not due_slots:
        return future
    uniform = config.policy in UNIFORM_DEADLINE_POLICIES and not config.plans_start_by
    order = np.argsort(np.array(due_slots, dtype=np.int64), kind="stable")
    due = np.array(due_slots, dtype=np.int64)[order]
    weight = np.array(weights, dtype=float)[order]
    if POLICY_TABLE[config.policy].deadlines == "per_job" or config.plans_start_by:
        latest = np.zeros_like(due)  # gcp holds each unit with its own deadline: all of it goes now
    else:
        latest = np.maximum(due - (config.deadline_slots if uniform else 0), slot) - slot  # sorted, as due is
    on_time = np.cumsum(np.bincount(latest, weights=weight))  # work latest by each slot from now
    handed = np.cumsum(solve_gcp_opt(on_time, 0.0))  # >= on_time: the majorant
    whole = np.round(handed)
    handed = np.where(np.abs(handed - whole) <= 1e-9 * on_time[-1], whole, handed)  # no rounding dust
    # Unit i (latest order) is [W_i, W_i+1) on the axis of work handed over (W: the weights' running
    # sum; [i, i+1) under "job-slots"), slot h hands [handed[h-1], handed[h]); cut the axis at both
    # sets of edges: each piece is part of one unit in one slot, never after the unit's latest slot
    # (on_time, below the majorant, has reached W_i+1 there).
    n = due.shape[0]
    bounds = np.concatenate(([0.0], np.cumsum(weight)))
    edges = np.union1d(bounds, np.minimum(handed, bounds[-1]))
    low, high = edges[:-1], edges[1:]
    unit = np.minimum(np.searchsorted(bounds, low, side="right") - 1, n - 1)
    given = np.minimum(np.searchsorted(handed, low, side="right"), latest[unit])
    index = np.full(unit.shape[0], config.deadline_slots) if uniform else np.clip(due[unit] - slot - given, 0, config.nu)
    units = np.zeros((int(given.max()) + 1, config.nu + 1))
    np.add.at(units, (given, index), high - low)
    empty = (0.0,) * (config.nu + 1)
    for offset in np.flatnonzero(units.sum(axis=1)):
        s = slot + int(offset)
        future[s] = tuple(float(a + b) for a, b in zip(future.get(s, empty), units[offset]))
    return future
