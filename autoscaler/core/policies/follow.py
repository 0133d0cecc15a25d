"""Follow the workload: x_t = m_t = L_t (paper: deferral, §VI-A, the naive baseline)."""

from __future__ import annotations

import time

import numpy as np

from autoscaler.core.cost import pad_to_horizon
from autoscaler.core.errors import InfeasibleError
from autoscaler.core.model import CostParams, Schedule

NAME = "follow"
"""What follow the workload, the baseline, is called in every output."""


def plan(load: np.ndarray, deadline_slots: int, params: CostParams) -> Schedule:
    """Run each slot's work in that slot; shapes (n_slots,) -> (n_slots + D,).

    Raises InfeasibleError when some L_t exceeds the cap M.
    """
    started = time.perf_counter()
    released = pad_to_horizon(load, deadline_slots)
    if params.max_servers is not None and released.max(initial=0.0) > params.max_servers:
        t = int(np.argmax(released > params.max_servers))
        raise InfeasibleError(
            f"follow: L_{t} = {released[t]:g} exceeds the server cap M = {params.max_servers:g}", "infeasible"
        )
    elapsed_ms = (time.perf_counter() - started) * 1000
    return Schedule(
        policy=NAME,
        capacity=released.copy(),
        assigned=released.copy(),
        solve_ms_per_slot=elapsed_ms / max(1, released.shape[0]),
    )
