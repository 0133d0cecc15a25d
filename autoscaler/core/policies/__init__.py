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
    the ``PolicyState`` field holding its state (None: it keeps none), and the reason codes its step gives."""

    step: Callable[[object, slot_steps.SlotInput], slot_steps.SlotStep]
    state_field: str | None
    reasons: tuple[str, ...]


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


_GCP_RULE = SlotRule(slot_steps.gcp_slot, "gcp", ("deadlines",))

POLICY_TABLE: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("follow", "none", follow.plan, SlotRule(slot_steps.follow_slot, None, ("follow",)), online_rank=4, cap_ahead=True),
        Policy(
            "hold", "uniform", hold.plan, SlotRule(slot_steps.hold_slot, "hold", ("deadlines", "held")), online_rank=0,
            carbon=HOLD_CARBON, carbon_online=SlotRule(slot_steps.hold_carbon_slot, "carbon", ("carbon", "no_signal", "deadlines", "held")),
            work_vector=True, daemon_deadlines="start_by", cap_ahead=True,
        ),
        Policy("offline", "uniform", offline.plan, carbon="offline"),
        Policy("gcp-u", "uniform", gcp.plan_uniform, _GCP_RULE, online_rank=1, work_vector=True),
        Policy("vfw", "uniform", vfw.plan, SlotRule(slot_steps.vfw_slot, "vfw", ("deadlines", "valley")), online_rank=3, work_vector=True, min_deadline_slots=2),
        Policy("gcp", "per_job", None, _GCP_RULE, online_rank=2, work_vector=True),
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
    if name == "gcp":
        if load_by_deadline is None:
            raise ConfigError("gcp needs each job's deadline class: give a SWIM trace (not a load curve)")
        if not isinstance(load_by_deadline, LoadByDeadline):
            load_by_deadline = LoadByDeadline.from_dense(load_by_deadline)
        horizon = load_by_deadline.n_slots + load_by_deadline.max_deadline
    else:
        horizon = np.shape(load)[-1] + deadline_slots
    if horizon > MAX_SLOTS:
        raise ConfigError(f"{name}: a horizon of {horizon:,} slots is more than the {MAX_SLOTS:,} planned at once")
    if name == "gcp":
        schedule = gcp.plan_classes(load_by_deadline, params)
        released, due = gcp.class_deadline_curve(load_by_deadline)
    else:
        load = np.asarray(load, dtype=float)
        if name == "vfw":
            schedule = vfw.plan(load, deadline_slots, params, delta=delta)
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
    if name == "offline":
        return offline.smallest_max_servers(load, deadline_slots)
    if name == "follow":
        return float(np.max(load, initial=0.0))
    uncapped = plan(name, load, deadline_slots, replace(params, max_servers=None), delta=delta, load_by_deadline=load_by_deadline)
    return float(uncapped.capacity.max(initial=0.0))
