"""Whether a replay's queue can drain: the node-slots the trace's jobs hold against the cap times the
slots left to the replay's end, checked before the first slot and then slot after slot, so a replay
that could never release every job stops with a ConfigError that names the cap's flag, the least cap
that could release them all and a lower bound on the cap that meets every deadline.
"""

from __future__ import annotations

import itertools
import math

from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job, JobState
from autoscaler.core.twin import STEP_CONCURRENCY


def node_slots(job: Job, slot_s: float) -> int:
    """Node-slots a released job holds: its length in slots, at least the one it is released in, on
    each of its w nodes (``Job.nodes``)."""
    return max(1, math.ceil(job.length_s / slot_s)) * job.nodes


def deadline_nodes_needed(jobs: list[Job], slot_s: float) -> int:
    """A lower bound on the nodes that meet every deadline: the most node-slots due by a slot,
    over the slots from the first submission to it (the prefix density; jobs hold whole nodes
    and cannot be split, so more may be needed)."""
    if not jobs:
        return 0
    first_slot = min(math.floor(job.submit_s / slot_s) for job in jobs)
    due = sorted((math.ceil(job.deadline_s / slot_s), node_slots(job, slot_s)) for job in jobs)
    work = 0
    needed = 0.0
    for deadline_slot, held in due:
        work += held
        needed = max(needed, work / max(1, deadline_slot - first_slot))
    return math.ceil(needed - 1e-9)


def check_drain(
    waiting: list[Job], running: list[Job], slot: int, end_slot: int, horizon: int, max_nodes: int, slot_s: float, deadline_cap: int,
    cap_flag: str = "--max-nodes", step_limit: int | None = None,
) -> None:
    """Raise ConfigError when the jobs not yet released (``waiting``) cannot all be released by
    ``end_slot`` on ``max_nodes`` nodes.

    Jobs hold their w nodes for ``node_slots``; ``running`` ones hold theirs until they end. For
    the slots from now, and from each later submit slot r on, the node-slots of the jobs that
    can only run there must fit in max_nodes x the slots to ``end_slot``. The message names
    --max-nodes, the least cap that could release every job in time, and ``deadline_cap``, a
    lower bound on the cap that meets every deadline; ``cap_flag`` is the flag that set the cap
    (--step-concurrency on a twin that runs fewer steps at once than --max-nodes). ``step_limit``:
    the steps EMR runs at once when every job is one node wide (None: not so); a cap needed above it
    is said to be out of reach of --max-nodes.
    """
    busy = sum(max(0, math.ceil((job.released_s + job.length_s) / slot_s) - slot) * job.nodes for job in running if job.released_s is not None)
    by_release: dict[int, list[int]] = {}
    for job in waiting:
        by_release.setdefault(max(slot, math.floor(job.submit_s / slot_s)), []).append(node_slots(job, slot_s))
    windows = []  # (first slot, jobs, node-slots) of every window [r, end_slot)
    jobs_from = work_from = 0
    for release in sorted(by_release, reverse=True):
        jobs_from += len(by_release[release])
        work_from += sum(by_release[release])
        if release > slot:
            windows.append((release, jobs_from, work_from))
    windows.append((slot, jobs_from, work_from + busy))
    _refuse_if_short(windows, len(running) if busy else 0, slot, end_slot, horizon, max_nodes, deadline_cap, cap_flag, step_limit)


class DrainCheck:
    """``check_drain`` slot after slot at the cost of the jobs in the store: the windows that
    start at a later submit slot hold only jobs not yet submitted, so they are checked once,
    before the first slot; each slot then checks the window from now."""

    def __init__(
        self, jobs: list[Job], end_slot: int, horizon: int, max_nodes: int, slot_s: float, cap_flag: str = "--max-nodes", step_limit: int | None = None
    ) -> None:
        self._cap_flag, self._step_limit = cap_flag, step_limit
        self._held = [node_slots(job, slot_s) for job in jobs]
        self._left = list(itertools.accumulate(reversed(self._held)))[::-1] + [0]  # node-slots of jobs[i:]
        self._end, self._horizon, self._max_nodes, self._slot_s = end_slot, horizon, max_nodes, slot_s
        self._held_by_id = {job.job_id: held for job, held in zip(jobs, self._held)}
        self.deadline_cap = deadline_nodes_needed(jobs, slot_s)
        self._first_slot: int | None = None
        self._jobs = jobs

    def __call__(self, slot: int, submitted: int, active_jobs) -> None:
        """Check slot ``slot`` with ``jobs[:submitted]`` in the store; ``active_jobs()`` lists the
        store's active jobs, asked for only when the trace's work might not fit any more."""
        if self._first_slot is None:
            self._first_slot = slot
            active = active_jobs()
            check_drain(
                [job for job in active if job.state == JobState.QUEUED] + self._jobs[submitted:],
                [job for job in active if job.state != JobState.QUEUED],
                slot, self._end, self._horizon, self._max_nodes, self._slot_s, self.deadline_cap, self._cap_flag, self._step_limit,
            )  # fmt: skip
            return
        if self._left[0] <= self._max_nodes * (self._end - slot):
            return  # all of the trace's node-slots fit in what is left, whatever has run
        active = active_jobs()
        queued = [job for job in active if job.state == JobState.QUEUED]
        running = [job for job in active if job.state != JobState.QUEUED and job.released_s is not None]
        busy = sum(max(0, math.ceil((job.released_s + job.length_s) / self._slot_s) - slot) * job.nodes for job in running)
        work = sum(self._held_by_id.get(job.job_id, node_slots(job, self._slot_s)) for job in queued) + self._left[submitted] + busy
        count = len(queued) + len(self._jobs) - submitted
        _refuse_if_short(
            [(slot, count, work)], len(running) if busy else 0, slot, self._end, self._horizon, self._max_nodes, self.deadline_cap, self._cap_flag, self._step_limit
        )


def _refuse_if_short(
    windows: list[tuple[int, int, int]], running: int, slot: int, end_slot: int, horizon: int, max_nodes: int, deadline_cap: int,
    cap_flag: str = "--max-nodes", step_limit: int | None = None,
) -> None:
    """ConfigError when some window [first, end_slot) holds more node-slots than max_nodes can run."""
    needed = max(math.ceil(work / max(1, end_slot - first)) for first, _, work in windows)
    if needed <= max_nodes:
        return
    first, count, work = max(windows, key=lambda window: window[2] / max(1, end_slot - window[0]))
    when = "before its first slot" if slot == 0 else f"at slot {slot}"
    if first == slot:
        what = f"{count:,} jobs not yet released" + (f" and {running:,} running" if running else "") + f" hold {work:,} node-slots"
    else:
        what = f"{count:,} jobs submitted from slot {first:,} on hold {work:,} node-slots"
    raise ConfigError(
        f"run --replay: under {cap_flag} {max_nodes:,} the queue cannot drain ({when}): {what}, more than "
        f"{max_nodes:,} {'node(s)' if cap_flag == '--max-nodes' else 'step(s) at once'} x the {end_slot - first:,} slots from slot {first:,} to {end_slot:,} (the horizon of "
        f"{horizon:,} slots and as long again for late jobs); fewer than {cap_flag} {needed:,} cannot release them all "
        f"by then (a lower bound: jobs hold whole nodes for whole slots, so a few more may be needed), and meeting every "
        f"deadline takes at least {cap_flag} {deadline_cap:,}" + _beyond_steps(needed, deadline_cap, cap_flag, step_limit)
    )


def _beyond_steps(needed: int, deadline_cap: int, cap_flag: str, step_limit: int | None) -> str:
    """What the refusal adds when the cap it names is out of reach: under --max-nodes, nodes beyond
    the steps EMR runs at once (``step_limit``, one-node jobs); under --step-concurrency, more steps
    at once than EMR's StepConcurrencyLevel allows (``STEP_CONCURRENCY``)."""
    if cap_flag == "--step-concurrency":
        limit, why = STEP_CONCURRENCY, f"EMR runs at most {STEP_CONCURRENCY} steps at once (--step-concurrency {STEP_CONCURRENCY} is the most)"
    elif step_limit is not None:
        limit, why = step_limit, f"EMR runs at most {step_limit} steps at once, and every job here is one step on one node"
    else:
        return ""
    if max(needed, deadline_cap) <= limit:
        return ""
    if needed > limit:
        return f"; but {why}, so no {cap_flag} above {limit} drains it: give the jobs later deadlines or replay fewer of them"
    return f"; but {why}, so no {cap_flag} meets every deadline: beyond {limit} at once the jobs still wait for steps"
