"""Which queued jobs a slot releases (paper: deferral, §V-B; paper: dynamic DRF note, §2).

``dispatch`` turns m_t into whole nodes and releases queued jobs in EDF order of their start-by slot
(:mod:`autoscaler.core.edf`): onto the policy's nodes, the jobs due, from ``release_margin_slots``
before their start-by slot on (``release_by_slot``), onto extra nodes up to the maximum. Under
overload the jobs that can still be on time go first, then the overdue, each by dynamic DRF share
(``fair_release``) and, within a tenant, by deadline (``deadline_key``).

Over 600 lines, one module: ``dispatch``'s phases and the overload releases share the queue view
and the node limits of one slot; each phase is a function of its own and reads as one step of the slot.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from autoscaler.core.edf import (
    QUEUED,
    JobQueue,
    NodeLimits,
    SlotGrid,
    as_queue,
    deadline_key,
    edf_key,
    need_s,
    release_by_slot,
    start_by_slot,
)
from autoscaler.core.model import Job, JobState

__all__ = ["MAX_ACTIVE_STEPS", "SHARE_TOLERANCE", "Dispatch", "active_step_room", "deadline_key", "dispatch", "fair_release", "need_s", "running_need_s"]

SHARE_TOLERANCE = 1e-12
"""A dominant share at or below this is 0: the linear-time DRF step leaves rounding dust."""

MAX_ACTIVE_STEPS = 256
"""EMR's limit on a cluster's steps PENDING and RUNNING at once ("You can have up to 256 PENDING and
RUNNING steps in a cluster": Amazon EMR Management Guide, *Submit work to an Amazon EMR cluster*).
AddJobFlowSteps beyond it is refused, so a slot releases at most this many less the jobs it has
released that have not ended (``active_step_room``)."""


@dataclass(frozen=True)
class Dispatch:
    """What EDF dispatch decided for one slot (``dispatch``); the controller's Decision carries it.

    ``policy_nodes``: ceil(m_t) clamped to [min_nodes, max_nodes]. ``nodes``: that, raised to the
    running jobs plus those released now (never beyond max_nodes). ``due``: queued jobs whose
    start-by slot has come (the margin left out: what overload is judged on). Other fields as in
    ``autoscaler.core.controller.Decision``. Under "node-seconds" only (else None): ``beyond``, the
    jobs released beyond the policy's node time (due ones), ``node_s_running``, the node seconds the
    running jobs still need in the slot (``running_need_s``), ``node_s_released``, those the
    released jobs need in it (``need_s``). ``running_nodes``: the nodes the jobs running before the
    slot hold (the sum of their w). ``waits``: (job id, w, nodes free for it) of each queued job of w
    > 1 nodes read and not released because fewer than its w nodes were there (no partial start).
    ``due`` is in nodes: the w of each job due. ``step_limited``: the jobs chosen and then left queued
    (in the order chosen) because EMR holds at most ``MAX_ACTIVE_STEPS`` steps PENDING and RUNNING (``active_step_room``).
    """

    slot: int
    capacity: float
    policy_nodes: int
    nodes: int
    release: tuple[str, ...]
    late: tuple[str, ...]
    at_risk: int
    queue_depth: int
    running: int
    overloaded: bool
    nodes_wanted: int
    due: int
    missed: tuple[str, ...] = ()
    missed_by_tenant: dict[str, int] = field(default_factory=dict)
    nodes_by_tenant: dict[str, int] = field(default_factory=dict)
    overdue: int = 0
    overdue_released: int = 0
    beyond: tuple[str, ...] | None = None
    node_s_running: float | None = None
    node_s_released: float | None = None
    running_nodes: int = 0
    waits: tuple[tuple[str, int, int], ...] = ()
    step_limited: tuple[str, ...] = ()


def dispatch(
    slot: int,
    capacity: float,
    jobs: JobQueue | Iterable[Job],
    limits: NodeLimits,
    dominant_shares: dict[str, float] | None = None,
    last_slot: int | None = None,
    arrived: Iterable[Job] = (),
    released_due: Iterable[str] = (),
    work_model: str = "job-slots",
    holding_nodes: int | None = None,
    arrival_nodes: float | Sequence[float] | None = None,
) -> Dispatch:
    """Turn m_t (``capacity``, servers) into whole nodes and the jobs to release in ``slot`` (EDF,
    non-preemptive; paper: deferral, §V-B).

    ``jobs``: the active jobs, a :class:`JobQueue` on ``limits``' grid (read, never changed) or any
    iterable of jobs; queued jobs submitted after ``slot`` wait. Without overload, queued jobs are
    released in EDF order (earliest start-by slot first) onto the policy's nodes (so nodes ``hold``
    keeps on run queued jobs early, as its x_t does), and those due (``release_by_slot`` <= ``slot``:
    within ``release_margin_slots`` of their start-by slot, or past it) onto extra nodes up to
    ``max_nodes``. Under overload (``Dispatch.overloaded``: jobs are queued and the running jobs plus
    those whose start-by slot has come, or ceil(m_t), exceed ``max_nodes``), not every job can be on
    time; every free node is filled, first with the jobs that can still be (the slot of deadline -
    length, without the length-error margin, at or after ``slot``), then with the overdue ones (late
    whatever happens now), so that the fewest go late; ahead of both, when they all fit the free node
    time, the jobs that can still be on time and must start within the nodes' lead time
    (``due_margin_slots``) by their start-by slot. Within each class, the free nodes go to tenants by
    weighted fair sharing with their dynamic DRF dominant shares as weights, earliest deadline first
    within each tenant (``deadline_key``).
    ``dominant_shares``: {tenant: x_i}; a tenant missing from it has weight 0. Without overload every
    job at or past its start-by slot gets a node, so none that can be on time waits for an overdue one.
    ``Dispatch.overdue``: queued jobs past their start-by slot; ``overdue_released``: how many of them
    were released.

    Missed, each job once if every slot is decided: a queued job whose start-by slot is in
    (``last_slot``, ``slot``) (it passed while no slot was decided), or is ``slot`` and the job is
    not released; or one of ``arrived`` (jobs seen for the first time now) already past its start-by
    slot; or one of ``released_due`` (released in their start-by slot by the decision of
    ``last_slot``) still queued. ``last_slot`` None: ``slot - 1``.

    ``arrival_nodes``: the work expected to arrive, nodes' worth: one rate for every slot ahead, or
    one per slot from this one on (the last repeated beyond); the controller gives its forecast
    (``autoscaler.core.controller.arrival_forecast``); None: not known, taken as 0. Under "node-seconds" the slot is also overloaded when the
    queued work cannot all start by its start-by slots on ``max_nodes`` less ``arrival_nodes``
    (``_cap_binds``): deferral needs spare capacity later, and at the cap there is none.

    ``work_model`` "node-seconds" (``ControllerConfig.work_model``): the nodes hold node time, nodes x
    slot_s seconds in the slot, less what the running jobs still need in it (``running_need_s``); a
    queued job needs min(its length, slot_s) of it (``need_s``: it runs from the slot's start, on one
    node, so a job longer than a slot takes a node's whole slot). Jobs are released in EDF order while
    their need fits in the policy's node time, first fit past one that does not (``_edf_release_node_s``;
    several short jobs share a node: a step released beyond the idle nodes waits, PENDING, for one to
    be free), the due ones (as above) also in the
    node time of extra nodes up to ``max_nodes``; the nodes are then raised to ceil(node time needed /
    slot_s), and to the running jobs that can hold a node (a node running a job is never asked to go):
    at most ``holding_nodes``, the nodes the last decision asked for (None: not known, every running
    job counts), since a released job beyond them waits, PENDING, and needs no node of its own; and,
    when due jobs are released, to the nodes that hold them and the running jobs whole
    (``_nodes_packed``), so every due job can start in the slot. Overload is judged
    on node time too (running and due jobs' need beyond ``max_nodes`` x slot_s); under overload each released job still takes a whole free node (free: ``max_nodes``
    less ceil(running need / slot_s)). O(running jobs + due jobs) more.

    Cost: O(log n + released + missed + queued jobs submitted after ``slot``), and under overload
    O(free nodes x tenants) more, for n queued jobs (a list is first built into a JobQueue, O(n log n)).
    """
    view = _SlotQueue.of(as_queue(jobs, limits), slot, limits)
    by_time = work_model == "node-seconds"
    load = _slot_load(view, capacity, by_time, arrival_nodes)
    waits: list[tuple[Job, int]] = []
    release, beyond = _release(view, load, dominant_shares or {}, by_time, waits)
    chosen = release
    release, beyond = _within_step_room(view.queue, release, beyond)
    released_s: float | None = None
    if by_time:
        released_s = sum(need_s(j, limits.slot_s) for j in release)
        nodes = _nodes_node_s(view, load, release, released_s, holding_nodes)
    else:
        nodes = min(limits.max_nodes, max(load.policy_nodes, load.running_nodes + sum(j.nodes for j in release)))
    missed_jobs = _missed(view, release, slot - 1 if last_slot is None else last_slot, arrived, released_due)
    release_start_by = [start_by_slot(j, limits) for j in release]
    nodes_by_tenant = Counter(view.queue.running_by_tenant())
    for job in release:
        nodes_by_tenant[job.tenant] += job.nodes
    released = {j.job_id for j in release}
    return Dispatch(
        slot=slot,
        capacity=capacity,
        policy_nodes=load.policy_nodes,
        nodes=nodes,
        release=tuple(j.job_id for j in release),
        late=tuple(j.job_id for j, s in zip(release, release_start_by) if s < slot),
        at_risk=view.count_by(slot + 1) - sum(1 for s in release_start_by if s <= slot + 1),
        queue_depth=load.queued - len(release),
        running=load.running + len(release),
        overloaded=load.overloaded,
        nodes_wanted=load.nodes_wanted,
        due=load.due_nodes,
        missed=tuple(j.job_id for j in missed_jobs),
        missed_by_tenant=dict(Counter(j.tenant for j in missed_jobs)),
        nodes_by_tenant=dict(nodes_by_tenant),
        overdue=load.overdue,
        overdue_released=sum(1 for s in release_start_by if s < slot),
        beyond=None if not by_time else tuple(j.job_id for j in beyond or ()),
        node_s_running=load.running_s if by_time else None,
        node_s_released=released_s,
        running_nodes=load.running_nodes,
        waits=tuple((j.job_id, j.nodes, free) for j, free in waits if j.job_id not in released),
        step_limited=tuple(j.job_id for j in chosen[len(release):]),
    )


def active_step_room(queue: JobQueue) -> int:
    """How many steps may still be added: ``MAX_ACTIVE_STEPS`` less the queue's released and running
    jobs (each an EMR step PENDING or RUNNING until it is seen to end; one seen late is counted a
    slot longer, which errs on the side EMR accepts). Steps others add to the cluster count at EMR
    too and are not seen here."""
    return max(0, MAX_ACTIVE_STEPS - queue.running_count)


def _within_step_room(queue: JobQueue, release: list[Job], beyond: list[Job] | None) -> tuple[list[Job], list[Job] | None]:
    """The first ``active_step_room`` jobs of ``release`` (its order is the slot's priority: the due
    and urgent ones first), and of ``beyond`` those kept; the rest stay queued for a later slot."""
    room = active_step_room(queue)
    if len(release) <= room:
        return release, beyond
    kept = release[:room]
    ids = {job.job_id for job in kept}
    return kept, None if beyond is None else [job for job in beyond if job.job_id in ids]


@dataclass(frozen=True)
class _SlotQueue:
    """The queue as ``slot`` sees it: queued jobs submitted after the slot are not there yet, so they
    are skipped (``present``) and taken off the queue's counts (``count_by``, ``nodes_by``).
    ``waiting``: {job id: start-by slot} of those jobs; ``waiting_nodes``: {job id: w}."""

    queue: JobQueue
    slot: int
    limits: NodeLimits
    waiting: dict[str, int]
    waiting_nodes: dict[str, int]

    @classmethod
    def of(cls, queue: JobQueue, slot: int, limits: NodeLimits) -> _SlotQueue:
        later = [j for j in queue.submitted_in(slot + 1, None) if j.state == QUEUED]
        return cls(queue, slot, limits, {j.job_id: start_by_slot(j, limits) for j in later}, {j.job_id: j.nodes for j in later})

    def present(self, jobs: Iterable[Job]) -> Iterator[Job]:
        """``jobs`` less those submitted after the slot."""
        return (j for j in jobs if j.job_id not in self.waiting) if self.waiting else iter(jobs)

    def count_by(self, start_by: int) -> int:
        """Queued jobs present whose start-by slot is ``start_by`` or earlier."""
        return self.queue.due_count(start_by) - sum(1 for s in self.waiting.values() if s <= start_by)

    def nodes_by(self, start_by: int) -> int:
        """Their nodes: the sum of their w."""
        return self.queue.due_nodes(start_by) - sum(self.waiting_nodes[i] for i, s in self.waiting.items() if s <= start_by)

    def waiting_need_s(self, start_by: int) -> float:
        """The node seconds (``need_s``) of the jobs not there yet whose start-by slot is ``start_by`` or earlier."""
        return sum(need_s(self.queue.get(i), self.limits.slot_s) for i, s in self.waiting.items() if s <= start_by)


@dataclass(frozen=True)
class _SlotLoad:
    """What the slot has to carry before any job is released (``_slot_load``).

    ``running``: jobs running; ``running_nodes``: the nodes they hold (the sum of their w);
    ``queued``: jobs queued and present; ``due_nodes``: the nodes of those whose start-by slot has
    come; ``overdue``: the jobs past it. ``policy_nodes``: ceil(m_t) within [min_nodes, max_nodes];
    ``nodes_wanted`` and ``overloaded`` as in :class:`Dispatch`; ``busy``: the nodes the running jobs
    keep. ``slot_start_s``: the slot's start. Under "node-seconds" only (else empty, 0):
    ``running_needs``, the node seconds the running jobs still need on each of their nodes in the
    slot; ``running_s``, their sum.
    """

    running: int
    running_nodes: int
    queued: int
    due_nodes: int
    overdue: int
    policy_nodes: int
    nodes_wanted: int
    overloaded: bool
    busy: int
    slot_start_s: float
    running_needs: tuple[float, ...] = ()
    running_s: float = 0.0


def _slot_load(view: _SlotQueue, capacity: float, by_time: bool, arrival_nodes: float | Sequence[float] | None) -> _SlotLoad:
    """Count the running and due work against m_t (``capacity``) and the cap, in nodes or, ``by_time``,
    in node seconds, and judge overload (``Dispatch.overloaded``)."""
    queue, slot, limits = view.queue, view.slot, view.limits
    running_nodes = queue.running_nodes  # the running jobs' w: what they hold
    queued = queue.queued_count - len(view.waiting)
    wanted = math.ceil(capacity - 1e-9)
    due = view.count_by(slot)
    due_nodes = due if queue.all_narrow else view.nodes_by(slot)
    slot_start_s = limits.epoch_s + slot * limits.slot_s
    running_needs: tuple[float, ...] = ()
    running_s = 0.0
    if by_time:
        running_needs = tuple(need for j in queue.running() for need in _per_node(j, running_need_s(j, slot_start_s, limits.slot_s)))
        running_s = sum(running_needs)
        due_s = queue.due_need_s(slot) - view.waiting_need_s(slot)
        busy = _whole_nodes(running_s, limits.slot_s)
        nodes_wanted = max(wanted, _whole_nodes(running_s + due_s, limits.slot_s))
    else:
        busy = running_nodes
        nodes_wanted = max(wanted, running_nodes + due_nodes)
    # Under node-seconds the cap also binds ahead: when the queued work cannot all start by its start-by
    # slots on the nodes the arriving work leaves spare (_cap_binds), every usable node is fed now.
    overloaded = queued > 0 and (
        nodes_wanted > limits.max_nodes
        or (by_time and _cap_binds(view.present(queue.queued()), slot, running_s, limits, 0.0 if arrival_nodes is None else arrival_nodes))
    )
    return _SlotLoad(
        running=queue.running_count,
        running_nodes=running_nodes,
        queued=queued,
        due_nodes=due_nodes,
        overdue=view.count_by(slot - 1),
        policy_nodes=min(limits.max_nodes, max(limits.min_nodes, wanted)),
        nodes_wanted=nodes_wanted,
        overloaded=overloaded,
        busy=busy,
        slot_start_s=slot_start_s,
        running_needs=running_needs,
        running_s=running_s,
    )


def _release(
    view: _SlotQueue, load: _SlotLoad, shares: dict[str, float], by_time: bool, waits: list[tuple[Job, int]]
) -> tuple[list[Job], list[Job] | None]:
    """The jobs released in the slot, and under "node-seconds" without overload those of them beyond the
    policy's node time (else None): under overload by fair passes, else in EDF order. Wide jobs left
    waiting for their nodes are appended to ``waits``."""
    due_by = view.slot + view.limits.due_margin_slots
    if load.overloaded and by_time:
        return _overload_release_node_s(view, load, shares, waits), None
    if load.overloaded:
        return _overload_release_nodes(view, load, shares, waits), None
    if by_time:
        return _edf_release_node_s(view.present(view.queue.queued()), load.running_s, load.policy_nodes, due_by, view.limits, waits)
    return _edf_release(view.present(view.queue.queued()), load.running_nodes, load.policy_nodes, due_by, view.limits, waits), None


class _FairPasses:
    """Under overload, the free node time handed out in passes over classes of queued jobs, each by
    dynamic DRF share (``_fair_release``) and, within a tenant, by deadline (``deadline_key``).

    Overdue jobs are late whatever is done now: the jobs that can still be on time go first. On
    time is by the estimate alone (start-by slot without the length-error margin): a margin is
    room for error, and a job past it may well end in time; classed overdue, it waited behind
    every other (saturating-2d at 500 nodes, 2 h, σ 0.5: 457 overran; judged so, 84).
    ``held``: {tenant: what its jobs hold}, in the passes' unit; grows as jobs are chosen, as
    ``taken`` (the job ids chosen) does.
    """

    def __init__(self, view: _SlotQueue, shares: dict[str, float], held: Counter) -> None:
        self.view = view
        self.shares = shares
        self.held = held
        self.tenants = view.queue.queued_tenants()
        self.taken: set[str] = set()

    def urgent_jobs(self) -> dict[str, list[Job]]:
        """The jobs that must start within the nodes' lead time to be on time (by their start-by slot
        with its length-error margin, or past it) and still can be (by their estimate alone), per
        tenant by deadline: read from the queue's on-time index, up to that slot."""
        view = self.view
        by_tenant: dict[str, list[Job]] = {}
        for job in view.present(view.queue.on_time_by(view.slot, view.slot + view.limits.due_margin_slots)):
            if job.job_id not in self.taken:
                by_tenant.setdefault(job.tenant, []).append(job)
        return {t: sorted(jobs, key=deadline_key) for t, jobs in by_tenant.items()}

    def on_time_left(self) -> bool:
        """Whether a job that can still be on time (by its estimate alone) is queued and not taken."""
        view = self.view
        return any(job.job_id not in self.taken for job in view.present(view.queue.on_time_by(view.slot)))

    def urgent_fit(self, urgent: dict[str, list[Job]], free: float, cost: Callable[[Job], float]) -> bool:
        """Whether those whose start-by slot is this one or within the lead time ahead fit the node time."""
        view = self.view
        need = sum(cost(j) for jobs in urgent.values() for j in jobs if start_by_slot(j, view.limits) >= view.slot)
        return 0 < need <= free + 1e-6

    def fair_pass(
        self,
        free: float,
        cost: Callable[[Job], float],
        unit: float,
        pass_waits: list[tuple[Job, int]] | None,
        overdue: bool = True,
        starts_in_slot: bool = False,
    ) -> list[Job]:
        """The jobs chosen for ``free`` node time (``cost`` of it each, ``unit`` of it a node): the
        urgent ones first when they all fit, then those that can be on time, then (``overdue``) the
        overdue ones."""
        # By deadline (Jackson's rule), not by start-by slot: once the cap binds, ordering by
        # start-by (least laxity) let long jobs submitted later take nodes ahead of short ones due
        # sooner, which then overran (a week at 100 nodes, 2 h: 1,054-1,166 jobs, where managed
        # scaling's first-come-first-served queue overran none). But by deadline alone a long job
        # waits behind every shorter one due before it, past its start-by slot (saturating-2d at
        # 500 nodes, 2 h: 26 overran, managed none). So the jobs that must start within the lead
        # time go first when they all fit the node time: then none of them need be late, and the
        # others have slack. When they do not all fit, some job is late whatever is done, and
        # earliest deadline first makes the fewest late.
        present, queue, slot, taken = self.view.present, self.view.queue, self.view.slot, self.taken
        chosen: list[Job] = []
        classes: list[bool | dict[str, list[Job]]] = [True, False][: 2 if overdue else 1]  # on time, then lapsed
        urgent = self.urgent_jobs()
        if self.urgent_fit(urgent, free, cost):
            classes.insert(0, urgent)
        for wanted in classes:
            if isinstance(wanted, dict):
                queues = {t: (j for j in jobs if j.job_id not in taken) for t, jobs in wanted.items()}
            else:
                queues = {
                    t: (j for j in present(queue.tenant_by_deadline(t, slot, on_time=wanted)) if j.job_id not in taken) for t in self.tenants
                }
            left = free - sum(cost(j) for j in chosen)
            got = _fair_release(
                queues, self.held, left, self.shares, self.view.limits, pass_waits, cost, unit, starts_in_slot, deadline_key
            )
            for job in got:
                self.held[job.tenant] += cost(job)
                taken.add(job.job_id)
            chosen += got
        return chosen


def _overload_release_nodes(view: _SlotQueue, load: _SlotLoad, shares: dict[str, float], waits: list[tuple[Job, int]]) -> list[Job]:
    """Under overload, in nodes: every free node (``max_nodes`` less those the running jobs hold)
    goes by fair passes (``_FairPasses``), each job taking its w whole nodes."""
    passes = _FairPasses(view, shares, Counter(view.queue.running_by_tenant()))
    return passes.fair_pass(view.limits.max_nodes - load.busy, _width, 1.0, waits)


def _overload_release_node_s(view: _SlotQueue, load: _SlotLoad, shares: dict[str, float], waits: list[tuple[Job, int]]) -> list[Job]:
    """Under overload, in node seconds (shares held in node seconds): the slot's node time at the cap,
    then OVERLOAD_AHEAD_SLOTS of it more, by fair passes (``_FairPasses``)."""
    # The slot's node time at the cap (less what the running jobs still need) goes first, to jobs that
    # start within it (the last may run past the slot's end: its node would idle otherwise); then
    # OVERLOAD_AHEAD_SLOTS of the cap's node time more wait, PENDING, in EMR's queue (YARN starts one
    # the moment a container ends), so a node freed before the next decision takes the next step at once.
    queue, limits = view.queue, view.limits
    held = Counter()
    for job in queue.running():
        held[job.tenant] += running_need_s(job, load.slot_start_s, limits.slot_s) * job.nodes
    passes = _FairPasses(view, shares, held)

    def seconds(job: Job) -> float:
        return need_s(job, limits.slot_s)

    release = passes.fair_pass(limits.max_nodes * limits.slot_s - load.running_s, seconds, limits.slot_s, waits, starts_in_slot=True)
    # Ahead: the node time the cap leaves free over this slot and the next OVERLOAD_AHEAD_SLOTS,
    # less what the running jobs, the steps EMR still holds PENDING and those just released
    # need of it, each job counted for its length up to that horizon. Counted for this slot
    # only, a cap busy with jobs of hours took a cap's worth of them PENDING, and a job due
    # soon waited behind them for hours (FB-2009 A at 20 nodes: 2,602 / 1,165 overran at
    # 30 min / 2 h; so counted, with the classes above, 199 / 55). Only jobs that can still be on time go
    # ahead while any is queued: an overdue job ahead in EMR's queue would hold the next slot's on-time
    # jobs behind it.
    horizon_s = (1 + OVERLOAD_AHEAD_SLOTS) * limits.slot_s
    ahead_s = (
        limits.max_nodes * horizon_s
        - sum(running_need_s(j, load.slot_start_s, horizon_s) * j.nodes for j in queue.running())
        - sum(min(max(j.length_s, 0.0), horizon_s) * j.nodes for j in release)
    )
    release += passes.fair_pass(ahead_s, _narrow_seconds(horizon_s), limits.slot_s, None, overdue=not passes.on_time_left(), starts_in_slot=True)
    return release


def _nodes_node_s(view: _SlotQueue, load: _SlotLoad, release: list[Job], released_s: float, holding_nodes: int | None) -> int:
    """The nodes to ask for under "node-seconds": the policy's, raised to the node time the running
    and released jobs need, to the running jobs that can hold a node, to w whole nodes for each job
    of w > 1 and to the due jobs packed whole; at most ``max_nodes``."""
    slot, limits = view.slot, view.limits
    # Never fewer nodes than jobs running: a resize down drains busy nodes too (the twin the job
    # started last, EMR one it picks), and a long job on a draining node is killed at YARN's timeout.
    holding = load.running_nodes if holding_nodes is None else min(load.running_nodes, holding_nodes)
    # Whole jobs on whole nodes: the due jobs released with the running jobs' need packed into
    # nodes of a slot each (best fit, largest first), so that every due job can start in the slot
    # (200 due 140-s jobs are 93.3 nodes of node time but 100 nodes of two jobs each); a job of
    # w > 1 nodes, due or not, takes w whole nodes, so that it starts on all of them at once.
    due_needs = [
        need
        for j in release
        if j.nodes > 1 or release_by_slot(j, limits) <= slot
        for need in _per_node(j, need_s(j, limits.slot_s) / j.nodes)
    ]
    packed = _nodes_packed([*load.running_needs, *due_needs], limits.slot_s) if due_needs else 0
    # A job of w > 1 nodes starts on w nodes at once: w of its own beside those the running jobs hold.
    gang = holding + sum(j.nodes for j in release if j.nodes > 1)
    return min(limits.max_nodes, max(load.policy_nodes, holding, gang, packed, _whole_nodes(load.running_s + released_s, limits.slot_s)))


def _missed(view: _SlotQueue, release: list[Job], last: int, arrived: Iterable[Job], released_due: Iterable[str]) -> list[Job]:
    """The jobs that missed their start-by slot, in EDF order, each once if every slot is decided
    (``dispatch``'s docstring): ``last`` is the slot decided before this one."""
    queue, slot, limits = view.queue, view.slot, view.limits
    released = {j.job_id for j in release}
    # Released in its start-by slot is in time; held through it, or released after it, is missed.
    missed = {
        j.job_id: j
        for j in view.present(queue.start_by_between(last + 1, slot))
        if start_by_slot(j, limits) < slot or j.job_id not in released
    }
    for job in [*arrived, *(queue.get(job_id) for job_id in released_due)]:
        if job is None or job.job_id in missed or job.job_id in view.waiting:
            continue
        current = queue.get(job.job_id)
        if current is not None and current.state == QUEUED and start_by_slot(current, limits) <= min(last, slot - 1):
            missed[job.job_id] = current
    return sorted(missed.values(), key=lambda j: edf_key(j, limits))


def _cap_binds(queued: Iterable[Job], slot: int, running_s: float, limits: NodeLimits, arrival_nodes: float | Sequence[float] = 0.0) -> bool:
    """Whether the queued work (EDF order) cannot all run from its start-by slots on the nodes that the
    arriving work leaves spare, ``max_nodes`` - ``arrival_nodes``: at the end of some queued job's
    start-by slot s, the node seconds every job due by then must have had, min(its length, the
    slots from its start-by slot to s) x w (it must start by its start-by slot, and a long job holds
    its nodes on after), with ``running_s``, exceed the spare node time from this slot to s. Work
    keeps arriving (``arrival_nodes``: one rate, or one per slot from this one, the last repeated);
    held back, the queued work can later run only on what that leaves, so where it does not fit, a
    node left idle now is capacity the deadlines needed: the slot is treated as overloaded and every
    usable node is fed. GCP-OPT (7)'s prefix density (``flat_capacity``) against the spare nodes;
    always true once the arrivals alone fill ``max_nodes`` in this slot. O(queued log queued + the
    slots ahead)."""
    slot_s = limits.slot_s
    forecast = np.atleast_1d(np.asarray(arrival_nodes, dtype=float))
    spare_by = np.cumsum((limits.max_nodes - forecast) * slot_s)  # spare node time from this slot to the end of slot + k

    def spare_s(horizon: int) -> float:
        ahead = horizon - slot
        if ahead < len(spare_by):
            return float(spare_by[ahead])
        return float(spare_by[-1]) + (ahead - len(spare_by) + 1) * (limits.max_nodes - float(forecast[-1])) * slot_s

    if spare_s(slot) <= 0:
        return True
    due_s = running_s  # node seconds due by the end of the horizon slot
    horizon = slot
    going: list[tuple[float, int]] = []  # (slot position its length ends at, nodes) of the jobs due that hold nodes on
    going_nodes = 0
    for job in queued:
        start_by = max(start_by_slot(job, limits), slot)
        if start_by > horizon:
            # Jobs due before keep their nodes from the old horizon to this one, until their length ends.
            # (slot positions: a job's length ends at ``ends``; the horizon slot h ends at h + 1.)
            while going and going[0][0] <= start_by + 1:
                ends, nodes = heapq.heappop(going)
                going_nodes -= nodes
                due_s += max(0.0, ends - (horizon + 1)) * slot_s * nodes
            due_s += going_nodes * (start_by - horizon) * slot_s
            horizon = start_by
        length_s = max(job.length_s, 0.0)
        due_s += min(length_s, slot_s) * job.nodes
        if length_s > slot_s:
            heapq.heappush(going, (start_by + length_s / slot_s, job.nodes))
            going_nodes += job.nodes
        if due_s > spare_s(horizon) + 1e-6:
            return True
    return False


def _per_node(job: Job, need: float) -> list[float]:
    """A job's node seconds ``need`` on each of its w nodes."""
    return [need] * job.nodes


def running_need_s(job: Job, slot_start_s: float, slot_s: float) -> float:
    """Node seconds a running job still needs on each of its w nodes in the slot starting at ``slot_start_s``: what is left
    of its expected length (``Job.work_length_s``) after ``slot_start_s``, at most ``slot_s``, counted from when its step
    started (``run_start_s``, EMR's StartDateTime, once the daemon saw it RUNNING), else from its
    release (``released_s``); a step still PENDING (state "released") needs min(work_length_s, slot_s),
    and a job still running past its expected end (runs longer than expected, or started unseen) needs
    min(work_length_s, slot_s) again, as if it started now."""
    if job.state == JobState.RUNNING and job.run_start_s is not None:
        started_s = job.run_start_s
    else:
        started_s = slot_start_s if job.released_s is None else job.released_s
    length_s = job.work_length_s
    left_s = started_s + length_s - slot_start_s
    return min(left_s if left_s > 0 else length_s, slot_s)


def _nodes_packed(needs_s: list[float], slot_s: float) -> int:
    """Nodes of ``slot_s`` seconds each that hold jobs of ``needs_s`` seconds whole (best fit
    decreasing: each job onto the fullest node it fits, largest first; at most 11/9 of the fewest
    plus one). O(k log k + k x nodes) for k jobs."""
    free: list[float] = []  # seconds left on each node, ascending
    for need in sorted(needs_s, reverse=True):
        at = bisect.bisect_left(free, need - 1e-6)
        if at < len(free):
            left = free.pop(at) - need
        else:
            left = slot_s - need
        bisect.insort(free, left)
    return len(free)


def _whole_nodes(node_s: float, slot_s: float) -> int:
    """The fewest whole nodes whose slot holds ``node_s`` node seconds, forgiving the microsecond of
    float dust ``_edf_release_node_s`` lets a release exceed its node time by."""
    return max(0, math.ceil((node_s - 1e-6) / slot_s))


OVERLOAD_AHEAD_SLOTS = 1
"""Under overload (node-seconds), the slots beyond the slot's own whose free node time at the cap
(less what the running and PENDING jobs need of it) is kept PENDING in EMR's queue, so that a node that frees before the next
decision (a job shorter than its estimate, a PENDING step that starts late in the slot, a gap left by
packing) takes the next step at once instead of idling to the slot's end. Half a slot left a node
idle for up to 177 s while a job waited in 34 of 102 random bursts; one slot, in none. The price,
measured on FB-2009 at 20 nodes: EMR runs its queue first come first served, so a deeper queue holds
the next slot's jobs that can still be on time behind it (one job a node ahead instead gave 2-55 %
fewer jobs ending after their deadline, and idle nodes)."""


def _width(job: Job) -> float:
    return job.nodes


def _narrow_seconds(horizon_s: float) -> Callable[[Job], float]:
    """A one-node job's need over ``horizon_s`` seconds (``need_s``: min(length, horizon_s)); a job of
    w > 1 nodes does not go ahead (inf): it is released when its w nodes are there, by a later slot's
    own node time, as a gang start needs."""
    return lambda job: need_s(job, horizon_s) if job.nodes == 1 else math.inf

FIRST_FIT_JOBS = 64
"""How many queued jobs, past the first that does not fit, a node-seconds release reads for jobs that
fit the node time left (first fit): the cost of a slot stays bounded."""


def _edf_release_node_s(
    queued: Iterable[Job], running_s: float, nodes: int, due_by: int, limits: NodeLimits, waits: list[tuple[Job, int]] | None = None
) -> tuple[list[Job], list[Job]]:
    """``_edf_release`` in node time: (the jobs released, those of them beyond the policy's node time).

    A job is released while its need (``need_s``) fits in the policy's ``nodes`` x slot_s less
    ``running_s`` and what is released before it, or, due (start-by slot <= ``due_by``), in
    ``max_nodes`` x slot_s less the same. A job not due that does not fit is passed over for later
    jobs that fit the node time left (first fit, EDF order otherwise), reading at most
    ``FIRST_FIT_JOBS`` such jobs: a long job next in line no longer leaves the nodes' last minutes
    idle (on Workload B at 12 h, 8 of the 18 idle node-hours). A passed-over job is not due, so it has
    a slot or more to go; the work released stays within the nodes' (plus the due jobs' extra nodes).
    A job of w > 1 nodes needs w whole nodes' slots (``need_s``); one that does not find them is
    appended to ``waits`` with the whole nodes' time left, and later jobs may pass it.
    """
    policy_s = nodes * limits.slot_s - running_s
    most_s = limits.max_nodes * limits.slot_s - running_s
    tolerance_s = 1e-6
    used_s = 0.0
    passed = 0
    release: list[Job] = []
    beyond: list[Job] = []
    for job in queued:
        need = need_s(job, limits.slot_s)
        due = start_by_slot(job, limits) <= due_by
        if used_s + need <= policy_s + tolerance_s:
            release.append(job)
        elif due and used_s + need <= most_s + tolerance_s:
            release.append(job)
            beyond.append(job)
        elif job.nodes > 1:
            if waits is not None:
                waits.append((job, max(0, math.floor(((most_s if due else policy_s) - used_s + tolerance_s) / limits.slot_s))))
            passed += 1
            if passed > FIRST_FIT_JOBS:
                break
            continue
        elif not due:
            # Node time left that this job does not fit is filled by the next jobs that do (first
            # fit): it would idle otherwise. The job keeps its place for the next slot.
            passed += 1
            if passed > FIRST_FIT_JOBS or policy_s - used_s <= tolerance_s:
                break
            continue
        else:
            continue
        used_s += need
    return release, beyond


def _edf_release(
    queued: Iterable[Job], running: int, nodes: int, due_by: int, limits: NodeLimits, waits: list[tuple[Job, int]] | None = None
) -> list[Job]:
    """EDF onto the policy's ``nodes``; a job due (start-by slot <= ``due_by``) also onto extra nodes up to the maximum.

    ``running``: the nodes the running jobs hold. A job of w nodes (``Job.nodes``) is released only
    when its w nodes are there (no partial start); one that does not find them is appended to
    ``waits`` with the nodes that were free, and later, narrower jobs may take them (at most
    ``FIRST_FIT_JOBS`` passed over). ``queued`` in EDF order; it is read only up to the first job
    not due that finds no node free at all (jobs due come first), so this costs the jobs released plus
    one, unless due jobs find no node (overload) or wide jobs wait.
    """
    release: list[Job] = []
    used = running
    passed = 0
    for job in queued:
        due = start_by_slot(job, limits) <= due_by
        if used + job.nodes <= nodes or (due and used + job.nodes <= limits.max_nodes):
            release.append(job)
            used += job.nodes
        elif job.nodes > 1 and used < (limits.max_nodes if due else nodes):
            if waits is not None:
                waits.append((job, (limits.max_nodes if due else nodes) - used))
            passed += 1
            if passed > FIRST_FIT_JOBS:
                break
        elif not due:
            break
    return release


def fair_release(
    queued: list[Job], running: list[Job], free_nodes: int, dominant_shares: dict[str, float], grid: SlotGrid
) -> list[str]:
    """Give ``free_nodes`` nodes to queued jobs, tenant by tenant, in proportion to dominant shares.

    ``queued`` is in EDF order. Each job's w free nodes (``Job.nodes``) go to the tenant with queued jobs whose nodes
    held (running plus released now) per unit of dominant share is least, ties to the tenant
    whose next job's start-by slot is earliest; that tenant's earliest-deadline job takes it.
    This is weighted fair queueing with the dynamic DRF shares as weights (paper: dynamic DRF
    note, §2), work-conserving: a tenant with nothing queued leaves its part to the others.
    Tenants of weight 0 are served only when no tenant of positive weight has jobs queued.
    Returns job ids in EDF order. Cost: O(free_nodes x tenants) past grouping ``queued``.
    """
    by_tenant: dict[str, list[Job]] = {}
    for job in queued:
        by_tenant.setdefault(job.tenant, []).append(job)
    heads = {tenant: iter(jobs) for tenant, jobs in by_tenant.items()}
    held = Counter()
    for job in running:
        held[job.tenant] += job.nodes
    chosen = {j.job_id for j in _fair_release(heads, held, free_nodes, dominant_shares, grid)}
    return [j.job_id for j in queued if j.job_id in chosen]


def _fair_release(
    queues: dict[str, Iterator[Job]],
    held: Counter,
    free_nodes: float,
    dominant_shares: dict[str, float],
    grid: SlotGrid,
    waits: list[tuple[Job, int]] | None = None,
    cost: Callable[[Job], float] = _width,
    unit: float = 1.0,
    starts_in_slot: bool = False,
    order: Callable[[Job], tuple] | None = None,
) -> list[Job]:
    """``fair_release`` on each tenant's queued jobs in ``order`` (read lazily; None: EDF order,
    ``edf_key``) and what each holds; the jobs chosen, in that order. A job takes ``cost(job)`` of ``free_nodes`` (default its w nodes,
    ``Job.nodes``; under node-seconds its node seconds, ``need_s``, and ``held`` and ``free_nodes`` are
    node seconds too, ``unit`` = slot_s of them a node); a tenant whose next job needs more than is
    left gets none more this slot (the job is appended to ``waits`` with the whole nodes left).
    ``starts_in_slot``: a
    one-node job is taken while any of ``free_nodes`` is left, not only when it fits whole: it starts
    within the slot, on the node time that would otherwise idle to its end."""
    held = Counter(held)

    def key(job: Job) -> tuple:
        return edf_key(job, grid) if order is None else order(job)

    heads: dict[str, tuple[tuple, Job]] = {}
    for tenant, jobs in queues.items():
        first = next(jobs, None)
        if first is not None:
            heads[tenant] = (key(first), first)

    def load(tenant: str) -> tuple[float, tuple]:
        weight = dominant_shares.get(tenant, 0.0)
        # A share within rounding of 0 (what is left after the first n, e.g. 4e-17) is 0.
        return (held[tenant] / weight if weight > SHARE_TOLERANCE else math.inf, heads[tenant][0])

    chosen: list[tuple[tuple, Job]] = []
    free = max(0, free_nodes)
    while free > 1e-6 and heads:
        tenant = min(heads, key=load)
        job = heads[tenant][1]
        need = cost(job)
        if need > free + 1e-6 and not (starts_in_slot and job.nodes == 1):
            # No partial start: its tenant waits for the nodes; the others may use what is left.
            if waits is not None:
                waits.append((job, math.floor(free / unit + 1e-9)))
            del heads[tenant]
            continue
        chosen.append(heads[tenant])
        held[tenant] += need
        free -= need
        following = next(queues[tenant], None)
        if following is None:
            del heads[tenant]
        else:
            heads[tenant] = (key(following), following)
    return [job for _, job in sorted(chosen, key=lambda pair: pair[0])]
