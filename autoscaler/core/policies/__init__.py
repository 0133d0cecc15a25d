"""Provisioning policies. Each maps L_t (n_slots,) and D to a Schedule over n_slots + D slots.

Online policies: ``hold`` (the default: lazy scale-in, x_t <= m_t), ``gcp-u`` and ``vfw``
(x_t = m_t); ``offline`` is LP (3), the optimum; ``follow`` the baseline.

``gcp`` instead takes the load split by deadline, L_{d,t} (a LoadByDeadline: the rows of
the (nu+1, n_slots) matrix that have work), and schedules over n_slots + nu slots.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from autoscaler.core.cost import check_schedule, deadline_curve, pad_to_horizon
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import MAX_SLOTS, CostParams, LoadByDeadline, Schedule
from autoscaler.core.policies import follow, gcp, hold, offline, vfw

UNIFORM: dict[str, Callable[[np.ndarray, int, CostParams], Schedule]] = {
    "follow": follow.plan,
    "hold": hold.plan,
    "offline": offline.plan,
    "gcp-u": gcp.plan_uniform,
    "vfw": vfw.plan,
}
"""Policies for a uniform deadline D; after the baseline ``follow``, ``hold`` (the default) comes first."""

POLICIES: tuple[str, ...] = (*UNIFORM, "gcp")


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
