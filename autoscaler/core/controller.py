"""The slot controller: one pure function called once per slot.

    decision, new_state = tick(now_s, jobs, state, config)

It decides the capacity m_t with the configured policy and which queued jobs to
release, in earliest-deadline-first order. It reads no clock, store or cloud:
the live daemon, the dry run and the trace replay all call it with their own
adapters (paper: deferral, §IV Algorithm 2; §V-B for long jobs).

Work model. As in the paper's simulation (§VI-A), a job of estimated length
T_J submitted in slot s counts one unit of work in each slot it would run,
s .. ceil((s + T_J)/tau) - 1, each unit with the job's deadline (D slots for
``hold``, ``gcp-u`` and ``vfw``, the job's own slack for ``gcp``). The policy turns these units into
m_t exactly as ``autoscaler replay`` does, so a replay through the controller
gives the same m_t (``ControllerConfig.work_model`` "job-slots"; under "node-seconds" a job
counts the fraction of each slot it runs, in server-slots of node time, and a slot releases jobs
while their node time fits in the nodes', so short jobs share a node). Dispatch is then physical: a job is released as a whole
(non-preemptive) and holds a node until it finishes; queued jobs are released
by earliest start-by slot (deadline minus length), and a job due (its start-by
slot has come, or is within ``ControllerConfig.release_margin_slots``) is released
even when the policy's nodes are used up, the nodes being raised to fit
(deadline-safe rounding), up to the configured maximum.

Restarts. The policy's state describes the slots decided one after another. When
slots went undecided (the daemon down, a run skipped), the policy changed, or no
slot was decided yet, ``tick`` rebuilds the policy's work from the active jobs
alone (``rebuild_future``): each counts its remaining work, handed to the policy
at the flattest rate that keeps it on time, so work of finished jobs or of slots
gone by never piles on the slot decided.

Policies. ``tick`` looks the configured policy up in the policy table
(:data:`autoscaler.core.policies.POLICY_TABLE`) and runs its slot step
(:mod:`autoscaler.core.policies.slot`); no list of policy names lives here.

Cost. The jobs come as an :class:`~autoscaler.core.edf.JobQueue` (EDF order in
``autoscaler.core.edf``, release in ``autoscaler.core.release``) kept by the caller between slots; a slot reads only the jobs that arrived
(``PolicyState.counted_seq``), those released or missed, and O(log n) of the queue, and its state
does not grow with the queue. Every decision says which rule bound it (``Decision.reason``, one of
``REASONS``, and ``Decision.why``); :func:`explain` gives the lines for one slot.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from autoscaler.core.carbon_window import SIGNAL_FALLBACKS, CarbonWindow, SignalUnavailable
from autoscaler.core.decision import REASON_WORDS, REASONS, Decision, explain
from autoscaler.core.edf import JobQueue, as_queue, demand_vector, release_by_slot, start_by_slot
from autoscaler.core.errors import ConfigError
from autoscaler.core.fairshare import dynamic_drf_step
from autoscaler.core.model import Job
from autoscaler.core.policies import POLICY_TABLE
from autoscaler.core.policies.carbon import CarbonDecision
from autoscaler.core.policies.gcp import GcpState
from autoscaler.core.policies.slot import SlotInput
from autoscaler.core.policy_state import UNKNOWN_SEQ, FollowWatch, PolicyState
from autoscaler.core.readable import count_text
from autoscaler.core.release import MAX_ACTIVE_STEPS, Dispatch, dispatch, fair_release
from autoscaler.core.slot_config import CONTROLLER_POLICIES, UNIFORM_DEADLINE_POLICIES, WORK_MODELS, ControllerConfig
from autoscaler.core.slot_work import arrived_units, counted_now, flow_at, job_units, rebuild_cause, rebuild_future

__all__ = [
    "CONTROLLER_POLICIES",
    "REASONS",
    "REASON_WORDS",
    "SIGNAL_FALLBACKS",
    "UNIFORM_DEADLINE_POLICIES",
    "UNKNOWN_SEQ",
    "CarbonWindow",
    "SignalUnavailable",
    "ControllerConfig",
    "Decision",
    "FollowWatch",
    "PolicyState",
    "arrive_tenants",
    "demand_vector",
    "dispatch",
    "explain",
    "fair_release",
    "job_units",
    "rebuild_cause",
    "rebuild_future",
    "release_by_slot",
    "start_by_slot",
    "tick",
]
"""What other modules import from here. The parts live in role-named modules: the configuration
(``slot_config``), the decision and its reasons (``decision``), the state between slots
(``policy_state``), the policy's work (``slot_work``), each policy's slot (``policies.slot``, named
by the policy table), EDF order and the job queue (``edf``), the release of a slot (``release``)."""


def tick(
    now_s: float,
    jobs: JobQueue | Iterable[Job],
    state: PolicyState,
    config: ControllerConfig,
    carbon_window: CarbonWindow | SignalUnavailable | None = None,
) -> tuple[Decision, PolicyState]:
    """Decide slot floor((now_s - epoch_s)/slot_s): returns (the decision, the state to save).

    ``jobs``: every job not yet done or failed, as a :class:`~autoscaler.core.edf.JobQueue` on the
    config's slots (read, never changed: the caller applies the decision with ``JobQueue.update``)
    or any iterable of jobs (built into one, O(n log n)). Jobs not yet counted
    (``PolicyState.counted_seq``) whose submit slot has come join the policy's work now. In the
    first slot, after undecided slots and after a policy change (``rebuild_cause``) the policy's
    work is rebuilt from the active jobs instead (``rebuild_future``) and the policy starts from no
    queued work (hold keeping what it learned of the load across undecided slots). On a JobQueue a
    slot costs O(log n + jobs arrived + released + missed), n the queued jobs, and a rebuild the
    whole queue once.

    ``carbon_window``: for hold with ``config.carbon`` (hold+carbon), the signal over slots t..t+3D
    (:class:`CarbonWindow`), or why there is none (:class:`SignalUnavailable`; None: "not_given"),
    in which case the slot is hold's carbon-blind decision (``reason`` "no_signal"). Ignored
    without ``config.carbon``.

    Raises ConfigError if the slot is not after ``state.last_slot``, the queue is on other slots or
    the window is not (3D+1,) finite values >= 0.
    """
    queue = as_queue(jobs, config)
    slot = config.slot_of(now_s)
    if slot <= state.last_slot:
        raise ConfigError(f"slot {slot} was already decided (last decided: {state.last_slot})")
    work = _slot_work(queue, state, slot, config)
    state = work.state
    policy = POLICY_TABLE[config.policy]
    rule = policy.carbon_online if config.carbon else policy.online
    assert rule is not None  # ControllerConfig admits online policies only, and a carbon variant only where there is one
    step, states = _policy_step(rule, work.arrivals, state, config, carbon_window)
    load = _load_shown(work, queue, slot, config)
    recent_arrivals = ((load,) + state.recent_arrivals)[: arrival_history_slots(config)]
    tenants, tenant_demands, dominant_shares = arrive_tenants(state, work.arrived, slot, config)
    dispatched = dispatch(
        slot,
        step.capacity,
        queue,
        config,
        dict(zip(tenants, dominant_shares)),
        last_slot=state.last_slot,
        arrived=work.arrived,
        released_due=state.released_due,
        work_model=config.work_model,
        holding_nodes=state.last_nodes if slot == state.last_slot + 1 else None,
        arrival_nodes=arrival_forecast(recent_arrivals, config.deadline_slots, day_slots(config), config.max_nodes) if policy.cap_ahead else None,
    )
    _settle_books(states, rule, dispatched, queue, slot, config, step.assigned)
    decision = _explained_decision(slot, step, load, dispatched, queue, state, config, carbon_window, work.cause)
    watch = state.follow_watch.step(decision.capacity, decision.assigned, decision.load, config.cost)
    decision = _with_follow_watch(decision, watch, state.follow_watch, config)
    released_due = frozenset(job_id for job_id in dispatched.release if start_by_slot(queue.get(job_id), config) == slot)
    return decision, PolicyState(
        last_slot=slot,
        gcp=states["gcp"],
        future=work.future,
        flow=tuple(float(u) for u in work.flowing),
        flow_ends=work.flow_ends,
        counted_seq=work.counted_seq,
        vfw=states["vfw"],
        policy_key=config.policy_key,
        tenants=tenants,
        tenant_demands=tenant_demands,
        dominant_shares=dominant_shares,
        uncounted=work.uncounted,
        hold=states["hold"],
        follow_watch=watch,
        released_due=released_due,
        carbon=states["carbon"],
        last_nodes=decision.nodes,
        recent_arrivals=recent_arrivals,
    )


@dataclass(frozen=True)
class _SlotWork:
    """What a slot's policy is handed, and what the next state carries of it (see :func:`_slot_work`).

    ``state``: the state the slot starts from (rebuilt after a gap or a policy change);
    ``arrivals``: the policy's work released now, shape (nu+1,), server-slots by slots to deadline;
    ``future``: work still to join later slots, {slot: (nu+1,) tuple}; ``flowing``/``flow_ends``: the
    flow of units of the jobs counted so far; ``arrived``: the jobs counted now; ``counted_seq``,
    ``uncounted``: where counting stopped; ``cause``: why the work was rebuilt, or None."""

    state: PolicyState
    arrivals: np.ndarray
    future: dict
    flowing: np.ndarray
    flow_ends: tuple
    arrived: list[Job]
    counted_seq: int
    uncounted: tuple
    cause: str | None


def _slot_work(queue: JobQueue, state: PolicyState, slot: int, config: ControllerConfig) -> _SlotWork:
    """The jobs counted in ``slot`` join the policy's work; after a gap or a policy change
    (``rebuild_cause``) the work is rebuilt from the active jobs instead."""
    nu = config.nu
    arrived, counted_seq, uncounted = counted_now(queue, state, slot, config)
    cause = rebuild_cause(state, slot, config)
    if cause is None:
        future = dict(state.future)
        joining = arrived
    else:
        # The saved work no longer describes the jobs: slots went undecided (jobs finished,
        # arrived and came due meanwhile) or the policy changed (its work vector has another
        # shape). The policy's work is rebuilt from the active jobs' remaining work, spread to
        # their deadlines (``rebuild_future``); every active job is counted once, now. Tenants'
        # shares are irrevocable and survive; across downtime hold keeps what it learned of the
        # load (``HoldState.restarted``) and the cost watch goes on; a new policy starts afresh.
        gap = cause == "gap"
        state = PolicyState(
            last_slot=state.last_slot,
            tenants=state.tenants,
            tenant_demands=state.tenant_demands,
            dominant_shares=state.dominant_shares,
            released_due=state.released_due,
            hold=state.hold.restarted() if gap and state.hold is not None else None,
            carbon=state.carbon.restarted() if gap and state.carbon is not None else None,
            follow_watch=state.follow_watch if gap else FollowWatch(),
            # The arrivals seen stay, each at its slot: an undecided slot's are unknown, taken as none.
            # (At most the history's length of zeros is built: a first slot's gap is the whole epoch,
            # 1.8e9 slots of 1 s, a tuple that took 15 s and gigabytes before it was cut.)
            recent_arrivals=((0.0,) * min(max(0, slot - state.last_slot - 1), arrival_history_slots(config)) + state.recent_arrivals)[
                : arrival_history_slots(config)
            ],
        )
        future = rebuild_future(queue.jobs(), slot, config, submitted_now=False)
        joining = queue.submitted_in(slot, slot)
    # Jobs counted now join the flow of units: one a slot each until its length ends (job_units).
    flowing, flow_ends = flow_at(state.flow, state.flow_ends, joining, slot, config)
    # The flow counts ticks under "node-seconds" (whole numbers, exact); the policy gets server-slots.
    arrivals = np.array(future.pop(slot, (0.0,) * (nu + 1))) + flowing / config.ticks_per_unit
    for s in [s for s in future if s < slot]:  # none after a rebuild; kept for states saved before it
        del future[s]
    return _SlotWork(state, arrivals, future, flowing, flow_ends, arrived, counted_seq, uncounted, cause)


def _load_shown(work: _SlotWork, queue: JobQueue, slot: int, config: ControllerConfig) -> float:
    """L_t as the decision records it (the arrival forecast, the follow watch, explain and the
    report's follow read it), server-slots: the work handed to the policy in ``slot``, except after a
    rebuild, which hands the policy the queue's backlog at the flattest rate on time (380
    server-slots in one slot for a 6-hour job that waited for the daemon's first 1-minute slot: the
    forecast took it for a rate and saw the cap bind, and the report modelled follow running it all
    in one slot). There L_t is the active jobs' own work in ``slot``, as each flows a unit a slot:
    what follow would run now. The rebuilt jobs' later slots show what is handed then, so a report
    over them counts less for follow, not more."""
    if work.cause is None:
        return float(work.arrivals.sum())
    active = [job for job in queue.jobs() if config.slot_of(job.submit_s) <= slot]
    flowing, _ = flow_at((), {}, active, slot, config)
    return float(flowing.sum()) / config.ticks_per_unit


def _policy_step(rule, arrivals: np.ndarray, state: PolicyState, config: ControllerConfig, carbon_window):
    """The step of ``rule`` (the policy's online rule, or its carbon variant under ``config.carbon``) on
    ``arrivals``: (the step: m_t, x_t, reason, why; every policy's state, the one that ran moved on)."""
    window = carbon_window if isinstance(carbon_window, CarbonWindow) else None
    missing = None if window is not None else carbon_window or SignalUnavailable("not_given", "no signal was handed to the slot")
    # Every policy's state is carried; only the one the policy runs changes (gcp's starts empty, as saved before).
    states = {"gcp": state.gcp or GcpState.empty(config.nu), "vfw": state.vfw, "hold": state.hold, "carbon": state.carbon}
    slot_input = SlotInput(
        arrivals=arrivals,
        policy=config.policy,
        deadline_slots=config.deadline_slots,
        delta=config.vfw_delta,
        slot_s=config.slot_s,
        cost=replace(config.cost, max_servers=None),
        window=window,
        missing=missing,
        keep_busy=config.plans_start_by and config.work_model != WORK_MODELS[0],
        max_regret=config.carbon_max_regret,
        short_deferral_s=config.carbon_short_deferral_s,
    )
    step = rule.step(None if rule.state_field is None else states[rule.state_field], slot_input)
    if rule.state_field is not None:
        states[rule.state_field] = step.state
    return step, states


def _settle_books(states: dict, rule, dispatched: Dispatch, queue: JobQueue, slot: int, config: ControllerConfig, work: float) -> None:
    """Under node time, the books of a rule that ``follows_cluster`` (hold's, hold+carbon's) follow the queue:
    the cluster ran whole jobs on whole nodes, ahead of the policy's x_t (``work``). Updates ``states`` in place."""
    books = rule.state_field if rule.follows_cluster and states[rule.state_field] is not None else None
    if books is not None and config.work_model != WORK_MODELS[0]:
        # The cluster ran whole jobs on whole nodes, ahead of hold's x_t: its books follow the queue
        # (under the paper's job-slots the daemon plans as ``autoscaler replay`` does, slot for slot).
        # A job released now runs at most a slot of its w nodes' work now (need_s); the rest
        # of a long job's units, handed over while it waited, is still to run on its node.
        still_queued = dispatched.queue_depth > 0
        released_units = sum(min(float(queue.get(job_id).nodes), arrived_units(queue.get(job_id), slot, config)) for job_id in dispatched.release)
        states[books] = states[books].with_work_done(max(0.0, released_units - work) if still_queued else math.inf)


def _explained_decision(
    slot: int, step, load: float, dispatched: Dispatch, queue: JobQueue, state: PolicyState, config: ControllerConfig, carbon_window, cause: str | None
) -> Decision:
    """The slot's Decision: the policy's m_t and x_t, the release, and why (the rule that bound the
    nodes, the deadline that binds, a rebuild, and hold+carbon's fields)."""
    capacity, work = step.capacity, step.assigned
    decision = Decision(
        slot=slot,
        capacity=capacity,
        assigned=work,
        nodes=dispatched.nodes,
        release=dispatched.release,
        late=dispatched.late,
        at_risk=dispatched.at_risk,
        queue_depth=dispatched.queue_depth,
        running=dispatched.running,
        rounding_node_slots=dispatched.nodes - capacity,
        overloaded=dispatched.overloaded,
        nodes_wanted=dispatched.nodes_wanted,
        missed=dispatched.missed,
        missed_by_tenant=dispatched.missed_by_tenant,
        nodes_by_tenant=dispatched.nodes_by_tenant,
        load=load,
        held_for_steps=dispatched.step_limited,
    )
    policy_reason = (step.reason, step.why)
    reason, why = _node_reason(dispatched, queue, config, policy_reason)
    why += waits_text(dispatched.waits)
    if dispatched.step_limited:
        why += (
            f"; {count_text(len(dispatched.step_limited), 'job')} chosen left queued: EMR holds at most "
            f"{MAX_ACTIVE_STEPS} steps PENDING and RUNNING (added between slots as steps end)"
        )
    if reason == "deadlines" and step.binding_slots:
        binding = binding_job(queue, slot, slot + step.binding_slots - 1, config)
        if binding is not None:
            why += f"; the deadline that binds: job {binding.job_id!r}, start-by slot {start_by_slot(binding, config)}"
    if cause in ("gap", "policy"):
        was = f"{count_text(slot - state.last_slot - 1, 'slot')} went undecided" if cause == "gap" else "the policy changed"
        why += f"; {was}, so the policy's work was rebuilt from the {count_text(len(queue), 'active job')}"
    decision = replace(decision, reason=reason, why=why)
    if step.carbon is not None:
        decision = _with_carbon(decision, step.carbon, carbon_window, reason, policy_reason)
    return decision


def _with_follow_watch(decision: Decision, watch: FollowWatch, before: FollowWatch, config: ControllerConfig) -> Decision:
    """``decision`` marked worse than follow when the running comparison says so, with a warning the
    first slot it does (``before``: the watch as it stood)."""
    if not watch.worse:
        return decision
    decision = replace(decision, worse_than_follow=True)
    if before.worse:
        return decision
    return replace(
        decision,
        warning=f"{config.policy_name} has cost {watch.policy_cost + config.cost.beta * watch.last_capacity:.6g} "
        f"over its slots so far (servers switched off after the last), more than follow the workload "
        f"would have ({watch.follow_cost + config.cost.beta * watch.last_load:.6g}); its deferral is not paying here",
    )


def binding_job(queue: JobQueue, slot: int, last_slot: int, config: ControllerConfig) -> Job | None:
    """The queued job, submitted by ``slot``, with the latest start-by slot at or before ``last_slot``:
    the last job whose work the deadlines' bound r_t counts (hold's max_j Y_j/(j+1) at j = last_slot -
    slot). None when no queued job is due by then (the work that binds is of jobs already released).
    Cost: the queued jobs due by ``last_slot``, in EDF order."""
    found = None
    for job in queue.queued():
        if start_by_slot(job, config) > last_slot:
            break
        if config.slot_of(job.submit_s) <= slot:
            found = job
    return found


def _with_carbon(
    decision: Decision, step: CarbonDecision, carbon_window: CarbonWindow | SignalUnavailable | None, reason: str, policy_reason: tuple[str, str]
) -> Decision:
    """``decision`` with hold+carbon's fields; when a node rule bound the slot, its why keeps the carbon words too."""
    window = carbon_window if isinstance(carbon_window, CarbonWindow) else None
    fallback = ""
    if window is None:
        fallback = carbon_window.reason if isinstance(carbon_window, SignalUnavailable) else "not_given"
    why = decision.why if reason == policy_reason[0] else f"{decision.why}; {policy_reason[1]}"
    used = step.mode == "carbon"
    return replace(
        decision,
        why=why,
        carbon_mode=step.mode,
        carbon_value=None if window is None else float(window.value_now),
        carbon_unit="" if window is None else window.unit,
        carbon_weight_now=step.weight_now if used else None,
        carbon_weight_min=step.weight_min if used else None,
        carbon_cheapest_in_slots=step.cheapest_in_slots if used else None,
        carbon_fallback=fallback,
    )


DAY_S = 86400.0
"""Seconds in a day: the period of the load the arrival forecast looks back over."""


def day_slots(config: ControllerConfig) -> int:
    """Slots in a day (at least one): how far back the same time of day lies."""
    return max(1, round(DAY_S / config.slot_s))


def arrival_history_slots(config: ControllerConfig) -> int:
    """How many slots' arrivals ``PolicyState.recent_arrivals`` keeps: a day and D+1 slots, so that
    the day before holds every slot of the D+1 ahead."""
    return day_slots(config) + config.deadline_slots + 1


def arrival_forecast(recent_arrivals: Sequence[float], deadline_slots: int, day_slots: int, max_nodes: float | None = None) -> np.ndarray | None:
    """The work expected to arrive in each of the slots t..t+D, nodes' worth, shape (D+1,): at least the
    peak L of the last D+1 slots (``recent_arrivals``: L of this slot and those before, newest first),
    and, once a day has been seen, at least what arrived at the same time of day the day before
    (L_{t+k-day}); and all of ``max_nodes`` in every slot when the day before saturated the cap
    within 2D slots of this time of day (its arrivals, run through ``max_nodes`` nodes from D+1 slots
    before, left a backlog). None before any slot. The cap must leave room for it
    (``release._cap_binds``).

    The peak, not the mean: work held back now meets the next peak, and a mean rising through the
    day let hold defer the night's work into a saturated day (FB-2009 at 20 nodes). The day before:
    a load that fills the cap every afternoon starts its climb in the morning, when the last D+1
    slots' peak is still low; work held back through the morning was still queued when the cap
    filled, a backlog added to the afternoon's, and overran where managed scaling, which never holds
    back, met every deadline (a week of weekday peaks at 100 nodes, 2 h: 4,076 jobs overran).

    Before a day is seen the peak so far may be the night's. Taking the whole cap there once twice
    the peak reached it cut FB-2009 A's overruns at 20 nodes and 12 h, but a single burst's peak then
    filled a 500-node cap and hold ran as follow (+20 to +28 % kWh against managed scaling on a
    load of heavy bursts, where it had been -23 %); releasing by deadline under overload
    (``edf.deadline_key``) cut those overruns on its own (1,411 -> 10), so there is no such rule."""
    if not len(recent_arrivals):
        return None
    recent = np.asarray(recent_arrivals, dtype=float)
    forecast = np.full(deadline_slots + 1, float(recent[: deadline_slots + 1].max()))
    back = day_slots - np.arange(deadline_slots + 1)  # recent[day - k] arrived at (t + k) - day
    seen = (back >= 0) & (back < len(recent))
    forecast[seen] = np.maximum(forecast[seen], recent[back[seen]])
    if max_nodes is not None and len(recent) > day_slots and _saturated_ahead(recent, deadline_slots, day_slots, max_nodes):
        forecast[:] = np.maximum(forecast, max_nodes)
    return forecast


def _saturated_ahead(recent: np.ndarray, deadline_slots: int, day_slots: int, max_nodes: float) -> bool:
    """Whether the day before, from D+1 slots before this time of day (or the oldest kept) to 2D slots
    after it, the arrivals (``recent``, newest first) run through ``max_nodes`` nodes left a backlog
    in a slot from this time of day on: b_{s+1} = max(0, b_s + L_s - max_nodes), from b = 0."""
    oldest = min(len(recent) - 1, day_slots + deadline_slots + 1)
    newest = max(0, day_slots - 2 * deadline_slots)
    backlog = 0.0
    for index in range(oldest, newest - 1, -1):
        backlog = max(0.0, backlog + float(recent[index]) - max_nodes)
        if backlog > 1e-9 and index <= day_slots:
            return True
    return False


def _node_reason(dispatched: Dispatch, queue: JobQueue, config: ControllerConfig, policy_reason: tuple[str, str]) -> tuple[str, str]:
    """The rule that bound the nodes (``REASONS``, first to last), else the policy's own for m_t."""
    capacity, nodes = dispatched.capacity, dispatched.nodes
    wanted = math.ceil(capacity - 1e-9)
    running_before = dispatched.running - len(dispatched.release)
    if dispatched.overloaded:
        free = config.max_nodes - dispatched.running_nodes
        released = Counter()
        for job_id in dispatched.release:
            job = queue.get(job_id)
            released[job.tenant] += job.nodes
        shares = ", ".join(f"{tenant} {count}" for tenant, count in sorted(released.items(), key=lambda kv: (-kv[1], kv[0])))
        held = ", ".join(f"{tenant} {count}" for tenant, count in sorted(dispatched.nodes_by_tenant.items(), key=lambda kv: (-kv[1], kv[0])))
        counted = f"ceil(m_t) = {wanted}; {dispatched.running_nodes} running and {dispatched.due} due"
        bound = (
            f"{dispatched.nodes_wanted} nodes wanted ({counted}), more than max_nodes = {config.max_nodes}"
            if dispatched.nodes_wanted > config.max_nodes
            # The cap binds ahead (node-seconds): the queued work cannot all start by its start-by slots
            # within max_nodes, though the nodes wanted now fit.
            else f"with the work forecast to arrive, the queued work would not all start by its start-by slots within "
            f"max_nodes = {config.max_nodes}, so every usable node is fed now ({dispatched.nodes_wanted} nodes wanted now: {counted})"
        )
        return "overloaded", (
            f"{bound}: the {count_text(max(free, 0), 'free node')} went by dynamic DRF share"
            + (f", released now: {shares}" if shares else ", none free")
            + (f"; nodes held: {held}" if held else "")
            + (
                f"; not all can be on time: the jobs that can still meet their deadlines went first "
                f"({len(dispatched.release) - dispatched.overdue_released} released), then the overdue "
                f"({dispatched.overdue_released} of {dispatched.overdue} released)"
                if dispatched.overdue
                else ""
            )
        )
    if wanted > config.max_nodes:
        return "max_nodes", f"m_t = {capacity:.4g} wants {count_text(wanted, 'node')}, capped at max_nodes = {config.max_nodes}"
    if nodes > max(wanted, config.min_nodes):
        beyond = dispatched.beyond if dispatched.beyond is not None else _beyond_policy_nodes(dispatched, queue)
        if beyond:
            first = queue.get(beyond[0])
            early = any(start_by_slot(queue.get(job_id), config) > dispatched.slot for job_id in beyond)
            margin = count_text(config.due_margin_slots, "slot")
            when = f"due (their start-by slot within {margin}, or passed)" if early else "at (or past) their start-by slot"
            return "due_jobs", (
                f"nodes raised from {dispatched.policy_nodes} (ceil(m_t), m_t = {capacity:.4g}) to {nodes} for "
                f"{count_text(len(beyond), 'job')} {when}, first {first.job_id!r} (start-by slot {start_by_slot(first, config)})"
            )
        return "running", (
            f"nodes kept at {nodes}, above the {dispatched.policy_nodes} of m_t = {capacity:.4g}, for {count_text(running_before, 'job')} still running"
        )
    if nodes > wanted:
        return "min_nodes", f"m_t = {capacity:.4g} needs {count_text(wanted, 'node')}; min_nodes keeps {config.min_nodes} on"
    if nodes == 0 and capacity <= 0 and dispatched.queue_depth == 0:
        return "idle", "m_t = 0 and no job is queued or running: no nodes"
    return policy_reason


def _beyond_policy_nodes(dispatched: Dispatch, queue: JobQueue) -> tuple[str, ...]:
    """The jobs released onto nodes beyond the policy's (job-slots): those whose w nodes, after the
    running jobs' and the jobs released before them, pass ``policy_nodes``."""
    used = dispatched.running_nodes
    beyond = []
    for job_id in dispatched.release:
        used += queue.get(job_id).nodes
        if used > dispatched.policy_nodes:
            beyond.append(job_id)
    return tuple(beyond)


def waits_text(waits: tuple[tuple[str, int, int], ...]) -> str:
    """The slot log's words for wide jobs that wait for their nodes (``Dispatch.waits``), '' if none."""
    if not waits:
        return ""
    job_id, width, free = waits[0]
    more = f" (and {count_text(len(waits) - 1, 'more wide job')})" if len(waits) > 1 else ""
    return f"; job {job_id!r} waits for its {width} nodes (w), {count_text(free, 'node')} free for it: no partial start{more}"


def arrive_tenants(
    state: PolicyState, jobs: Iterable[Job], slot: int, config: ControllerConfig
) -> tuple[tuple[str, ...], tuple[tuple[float, ...], ...], tuple[float, ...]]:
    """Dynamic DRF over tenants: each tenant arrives with its first job submitted by ``slot``.

    ``jobs``: the jobs not seen before (``tick`` passes those counted in this slot: a tenant's
    first job is among them, since every earlier job's tenant has arrived already).

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
