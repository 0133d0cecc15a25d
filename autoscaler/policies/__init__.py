"""Provisioning policies. Each maps L_t (n_slots,) and D to a Schedule over n_slots + D slots."""

from __future__ import annotations

from typing import Callable

import numpy as np

from autoscaler.cost import check_schedule, deadline_curve, pad_to_horizon
from autoscaler.errors import ConfigError
from autoscaler.model import CostParams, Schedule
from autoscaler.policies import follow, gcp, offline

Policy = Callable[[np.ndarray, int, CostParams], Schedule]

POLICIES: dict[str, Policy] = {
    "follow": follow.plan,
    "offline": offline.plan,
    "gcp-u": gcp.plan_uniform,
}


def plan(name: str, load: np.ndarray, deadline_slots: int, params: CostParams) -> Schedule:
    """Run policy ``name`` on L_t and check the schedule before returning it.

    Raises ConfigError for an unknown policy or a negative deadline, the policy's
    InfeasibleError/SolverError, and ScheduleError if the schedule breaks C1/C2.
    """
    if name not in POLICIES:
        raise ConfigError(f"unknown policy {name!r}; expected one of: {', '.join(POLICIES)}")
    if int(deadline_slots) != deadline_slots or deadline_slots < 0:
        raise ConfigError(f"deadline D must be a whole number of slots >= 0, got {deadline_slots!r}")
    schedule = POLICIES[name](np.asarray(load, dtype=float), int(deadline_slots), params)
    released = pad_to_horizon(load, deadline_slots)
    check_schedule(schedule, released, deadline_curve(released, deadline_slots), params.max_servers)
    return schedule
