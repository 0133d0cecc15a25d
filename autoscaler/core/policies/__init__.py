"""Provisioning policies. Each maps L_t (n_slots,) and D to a Schedule over n_slots + D slots.

Online policies: ``hold`` (the default: lazy scale-in, x_t <= m_t), ``gcp-u`` and ``vfw``
(x_t = m_t); ``offline`` is LP (3), the optimum; ``follow`` the baseline.

``gcp`` instead takes the load split by deadline, L_{d,t} (a LoadByDeadline: the rows of
the (nu+1, n_slots) matrix that have work), and schedules over n_slots + nu slots.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from autoscaler.core.cost import check_schedule, deadline_curve, pad_to_horizon
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import MAX_SLOTS, CostParams, LoadByDeadline, Schedule
from autoscaler.core.policies import follow, gcp, hold, offline, vfw
from autoscaler.core.policies import slot as slot_steps
from autoscaler.core.policies.carbon import NAME as HOLD_CARBON


@dataclass(frozen=True)
class SlotRule:
    """How the controller runs a policy slot by slot: ``step(before, slot)`` (:mod:`autoscaler.core.policies.slot`),
    the ``PolicyState`` field holding its state (None: it keeps none), and the reason codes its step gives.

    ``follows_cluster``: its state keeps books of the work still queued (``with_work_done``) that
    follow the work the cluster ran: under a work model other than "job-slots" the daemon releases
    whole jobs onto whole nodes, ahead of the policy's x_t, so the controller hands the work run
    beyond x_t back to the state (under "job-slots" it plans slot for slot as the replay does).
    """

    step: Callable[[object, slot_steps.SlotInput], slot_steps.SlotStep]
    state_field: str | None
    reasons: tuple[str, ...]
    follows_cluster: bool = False


@dataclass(frozen=True)
class Policy:
    """One row of the policy table: what the replay, the controller, the command line and the config know of a policy.

    ``deadlines``: "uniform" (every unit of work gets the one deadline D), "per_job" (each job's own
    slack, up to ``max_deadline_slots``) or "none" (nothing is deferred). ``plan``: the replay's
    planner of L_t (n_slots,) and D, None for gcp (it plans L_{d,t}). ``online``: how the controller
    runs it (None: replay only); ``online_rank``: its place in the daemon's list, the default first.
    ``carbon``: the name of its carbon-aware variant (None: none); ``carbon_online``: how the
    controller runs that variant, None if only the replay has it. ``work_vector``: its slot updates
    a vector of nu + 1 values (the memory estimate counts them). ``min_deadline_slots``: the smallest
    D it runs with (vfw's valley delta needs 0 < delta < D). ``daemon_deadlines``: "start_by" if the
    controller plans each job's units to the job's own start-by slot (the replay keeps ``deadlines``).
    ``cap_ahead``: the controller's release binds the cap ahead on its arrival forecast
    (``controller.arrival_forecast``): follow and hold, whose nodes follow the work due; gcp and vfw,
    whose m_t is the paper's, keep the release that binds only on the work queued (the forecast's
    day-before saturation made them run at the cap through a bursty load's days, +8 to +20 % kWh).
    ``is_baseline``: follow the workload, the schedule every saving is measured against (the
    replay runs it first; the lists of policies compared with it leave it out).
    ``is_offline_lp``: LP (3) over the whole horizon, known ahead (the optimum): its least cap M is the
    LP's own bound, its memory the LP's, and its carbon-aware variant the same LP with the signal as
    slot cost. ``needs_delta``: its plan takes vfw's valley look-ahead delta, 0 < delta < D (default
    floor(D/2)); the config checks it and ``--delta`` is only for it. ``learns_costs``: its online state
    is learned from e0, e1 and beta (hold's break-even rules), so a restart under other costs starts
    the state afresh.
    """

    name: str
    deadlines: str
    plan: Callable[[np.ndarray, int, CostParams], Schedule] | None
    online: SlotRule | None = None
    online_rank: int | None = None
    carbon: str | None = None
    carbon_online: SlotRule | None = None
    work_vector: bool = False
    min_deadline_slots: int = 0
    daemon_deadlines: str | None = None
    cap_ahead: bool = False
    is_baseline: bool = False
    is_offline_lp: bool = False
    needs_delta: bool = False
    learns_costs: bool = False

    @property
    def class_deadlines(self) -> bool:
        """It plans the load split by deadline class, L_{d,t} (``deadlines`` "per_job", gcp): the replay
        needs the trace's deadline classes (k-means of its jobs, or a deadline column) and plans over
        n_slots + nu slots, nu the largest class deadline."""
        return self.deadlines == "per_job"


_GCP_RULE = SlotRule(slot_steps.gcp_slot, "gcp", ("deadlines",))

POLICY_TABLE: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy(
            follow.NAME, "none", follow.plan, SlotRule(slot_steps.follow_slot, None, ("follow",)), online_rank=4, cap_ahead=True,
            is_baseline=True,
        ),
        Policy(
            hold.NAME, "uniform", hold.plan, SlotRule(slot_steps.hold_slot, "hold", ("deadlines", "held"), follows_cluster=True), online_rank=0,
            carbon=HOLD_CARBON,
            carbon_online=SlotRule(slot_steps.hold_carbon_slot, "carbon", ("carbon", "no_signal", "deadlines", "held"), follows_cluster=True),
            work_vector=True, daemon_deadlines="start_by", cap_ahead=True, learns_costs=True,
        ),
        Policy(offline.NAME, "uniform", offline.plan, carbon=offline.NAME, is_offline_lp=True),
        Policy(gcp.UNIFORM_NAME, "uniform", gcp.plan_uniform, _GCP_RULE, online_rank=1, work_vector=True),
        Policy(
            vfw.NAME, "uniform", vfw.plan, SlotRule(slot_steps.vfw_slot, "vfw", ("deadlines", "valley")), online_rank=3, work_vector=True,
            min_deadline_slots=2, needs_delta=True,
        ),
        Policy(gcp.NAME, "per_job", None, _GCP_RULE, online_rank=2, work_vector=True),
    )
}  # fmt: skip
"""Every policy, once; the lists below (and the command line's, the config's and the controller's) derive from it.
In the replay's order: after the baseline ``follow``, ``hold`` (the default) comes first."""

UNIFORM: dict[str, Callable[[np.ndarray, int, CostParams], Schedule]] = {p.name: p.plan for p in POLICY_TABLE.values() if p.plan is not None}
"""Policies for a uniform deadline D; after the baseline ``follow``, ``hold`` (the default) comes first."""

POLICIES: tuple[str, ...] = (*UNIFORM, *(name for name, p in POLICY_TABLE.items() if p.plan is None))
"""Every policy the replay runs, in its order."""

ONLINE_POLICIES: tuple[str, ...] = tuple(
    sorted((name for name, p in POLICY_TABLE.items() if p.online is not None), key=lambda name: POLICY_TABLE[name].online_rank)
)
"""Policies the daemon can run, ``hold`` (the default) first."""

UNIFORM_DEADLINE_POLICIES: tuple[str, ...] = tuple(name for name in ONLINE_POLICIES if POLICY_TABLE[name].deadlines == "uniform")
"""Online policies that give every unit of work the one deadline D (the others: each job's own slack, or none)."""

REPLAY_COMPARED_POLICIES: tuple[str, ...] = tuple(name for name in ONLINE_POLICIES if POLICY_TABLE[name].deadlines != "per_job")
"""Online policies whose m_t through the daemon equals the replay's (gcp's replay takes k-means classes instead)."""

CARBON_AWARE: tuple[str, ...] = tuple(name for name, p in POLICY_TABLE.items() if p.carbon is not None)
"""Policies the replay also runs carbon-aware under a signal (offline's LP with weights, hold as hold+carbon)."""

WORK_VECTOR_POLICIES: tuple[str, ...] = tuple(name for name, p in POLICY_TABLE.items() if p.work_vector)
"""Policies whose slot updates a work vector of nu + 1 values."""

CLASS_DEADLINE_POLICIES: tuple[str, ...] = tuple(name for name, p in POLICY_TABLE.items() if p.class_deadlines)
"""Policies that plan on the jobs' deadline classes, L_{d,t}: a trace must give the classes for them to run."""

(BASELINE,) = (name for name, p in POLICY_TABLE.items() if p.is_baseline)
"""The policy every saving is measured against: follow the workload."""


def runs_at_deadline(name: str, deadline_slots: int) -> bool:
    """Whether policy ``name`` runs with a deadline of D slots: False below its ``min_deadline_slots``
    (vfw's valley needs D >= 2). An unknown name or a negative D is True: :func:`plan` refuses them."""
    policy = POLICY_TABLE.get(name)
    return policy is None or not 0 <= deadline_slots < policy.min_deadline_slots


def plan(
    name: str,
    load: np.ndarray,
    deadline_slots: int,
    params: CostParams,
    *,
    delta: int | None = None,
    load_by_deadline: np.ndarray | None = None,
) -> Schedule:
    """Run policy ``name`` and check the schedule before returning it.

    ``load``: L_t, shape (n_slots,). ``delta``: VFW's look-ahead (default floor(D/2)).
    ``load_by_deadline``: L_{d,t} (a LoadByDeadline, or dense of shape (nu+1, n_slots)), required by ``gcp``.
    Raises ConfigError for an unknown policy, a negative deadline or a missing
    input, the policy's InfeasibleError/SolverError, and ScheduleError if the
    schedule breaks C1/C2.
    """
    if name not in POLICIES:
        raise ConfigError(f"unknown policy {name!r}; expected one of: {', '.join(POLICIES)}")
    if int(deadline_slots) != deadline_slots or deadline_slots < 0:
        raise ConfigError(f"deadline D must be a whole number of slots >= 0, got {deadline_slots!r}")
    deadline_slots = int(deadline_slots)
    policy = POLICY_TABLE[name]
    if policy.class_deadlines:
        if load_by_deadline is None:
            raise ConfigError(f"{name} needs each job's deadline class: give a SWIM trace (not a load curve)")
        if not isinstance(load_by_deadline, LoadByDeadline):
            load_by_deadline = LoadByDeadline.from_dense(load_by_deadline)
        horizon = load_by_deadline.n_slots + load_by_deadline.max_deadline
    else:
        horizon = np.shape(load)[-1] + deadline_slots
    if horizon > MAX_SLOTS:
        raise ConfigError(f"{name}: a horizon of {horizon:,} slots is more than the {MAX_SLOTS:,} planned at once")
    if policy.class_deadlines:
        schedule = gcp.plan_classes(load_by_deadline, params)
        released, due = gcp.class_deadline_curve(load_by_deadline)
    else:
        load = np.asarray(load, dtype=float)
        if policy.needs_delta:
            schedule = UNIFORM[name](load, deadline_slots, params, delta=delta)
        else:
            schedule = UNIFORM[name](load, deadline_slots, params)
        released = pad_to_horizon(load, deadline_slots)
        due = deadline_curve(released, deadline_slots)
    check_schedule(schedule, released, due, params.max_servers)
    return schedule


def smallest_max_servers(
    name: str,
    load: np.ndarray,
    deadline_slots: int,
    params: CostParams,
    *,
    delta: int | None = None,
    load_by_deadline: np.ndarray | None = None,
) -> float:
    """The least cap M under which policy ``name`` has a schedule, in servers.

    offline: the LP's exact bound (:func:`autoscaler.core.policies.offline.smallest_max_servers`).
    follow: the peak of L_t. gcp, gcp-u and vfw never change a decision for a cap they stay
    under, and raise InfeasibleError as soon as a decision would pass it: their least cap is
    the peak m_t of an uncapped run.
    """
    policy = POLICY_TABLE.get(name)  # an unknown name: plan() below refuses it
    if policy is not None and policy.is_offline_lp:
        return offline.smallest_max_servers(load, deadline_slots)
    if policy is not None and policy.deadlines == "none":  # nothing is deferred: m_t = L_t
        return float(np.max(load, initial=0.0))
    uncapped = plan(name, load, deadline_slots, replace(params, max_servers=None), delta=delta, load_by_deadline=load_by_deadline)
    return float(uncapped.capacity.max(initial=0.0))
