"""The offline optimum: LP (3) of the deferral paper, solved with cvxpy and Clarabel.

The cumulative constraints C1/C2 are written through the backlog
s_t = sum_{j<=t} (L_j - x_j) (work released but not yet run) so that every
constraint touches at most three neighbouring slots and the LP has O(T)
non-zeros. (cvxpy canonicalises ``cumsum`` with a helper variable too, so the
textbook form is also O(T); this one is about 1.2-1.5 times faster to solve,
see benchmarks/bench_replay.py.)
"""

from __future__ import annotations

import time

import numpy as np

from autoscaler.core.cost import deadline_curve, pad_to_horizon, slot_cost_array
from autoscaler.core.errors import InfeasibleError, SolverError
from autoscaler.core.model import CostParams, Schedule

SOLVER = "CLARABEL"

NAME = "offline"
"""What LP (3), the offline optimum, is called in every output."""


def plan(load: np.ndarray, deadline_slots: int, params: CostParams, slot_cost: np.ndarray | None = None) -> Schedule:
    """Solve min sum_t (e0*m_t + e1*x_t) + beta*sum_t |m_t - m_{t-1}| subject to C1, C2,
    all work done and 0 <= x_t <= m_t <= M (paper: deferral, eq. 3), charging the
    final switch-off beta*m_T as :func:`autoscaler.core.cost.schedule_cost` does.

    ``load``: L_t, shape (n_slots,); returns a Schedule over n_slots + D slots.
    ``slot_cost``: optional s_t, shape (n_slots + D,), finite and >= 0, weighting the operating
    cost of each slot (see :func:`solve_offline`); None solves eq. (3) as written.
    Raises ConfigError for a bad ``slot_cost``, InfeasibleError when no schedule meets every
    deadline under M, and SolverError (with the solver's status) when the solve fails for any
    other reason.
    """
    released = pad_to_horizon(load, deadline_slots)
    return solve_offline(released, deadline_curve(released, deadline_slots), params, slot_cost=slot_cost)


def solve_offline(
    released: np.ndarray,
    due: np.ndarray,
    params: CostParams,
    name: str = NAME,
    slot_cost: np.ndarray | None = None,
) -> Schedule:
    """LP (3)/(6) for a released curve L_t and a deadline curve l_t (or l'_t), shape (horizon,).

    ``slot_cost``: optional s_t >= 0, shape (horizon,), e.g. a carbon intensity (gCO2/kWh) or an
    energy price: the operating cost of slot t becomes s_t*(e0*m_t + e1*x_t) while the switching
    cost stays beta per server switched, so the LP shifts deferrable work into cheap slots. Still a
    linear program; None (the default) is eq. (3) as written, solved exactly as before. beta is in
    the units of e0*s_t: with e0 = 1 and s_t in raw gCO2/kWh (hundreds), switching becomes almost
    free beside running, so a relative signal (s_t / mean(s)) keeps eq. (3)'s trade-off. A slot
    with s_t = 0 and beta = 0 prices m_t at nothing, so its capacity is not determined by the LP.
    :func:`autoscaler.core.cost.weighted_operating_cost` gives the weighted cost of the result.
    Raises ConfigError naming ``slot_cost`` when it has another shape or a NaN, infinite or
    negative value; InfeasibleError and SolverError as :func:`plan`.
    """
    import cvxpy as cp  # imported here: only the offline LP needs it at start-up cost ~0.8 s

    started = time.perf_counter()
    horizon = released.shape[0]
    # The LP is homogeneous in the load and in the cost coefficients: solving it with the
    # peak load and the largest coefficient scaled to 1 keeps Clarabel's tolerances
    # meaningful for loads of 1e-300 or 1e15 servers alike.
    load_scale = float(released.max(initial=0.0)) or 1.0
    if slot_cost is None:
        cost_scale = max(params.e0, params.e1, params.beta) or 1.0
        weights = None
    else:
        slot_cost = slot_cost_array(slot_cost, horizon)
        # Homogeneity again, but across all the cost coefficients at once: e0*s_t, e1*s_t and beta
        # must shrink by one common factor or the trade-off between running and switching changes.
        # The signal is divided by its peak (a gCO2/kWh of 500 or a price of 1e-4 alike become
        # weights in [0, 1]) and that peak is folded into the coefficients before they are scaled.
        peak_cost = float(slot_cost.max(initial=0.0)) or 1.0
        weights = slot_cost / peak_cost
        cost_scale = max(params.e0 * peak_cost, params.e1 * peak_cost, params.beta) or 1.0
    released = released / load_scale
    due = due / load_scale
    e0, e1, beta = params.e0 / cost_scale, params.e1 / cost_scale, params.beta / cost_scale
    if weights is not None:
        e0, e1 = e0 * peak_cost, e1 * peak_cost
    # Largest backlog C1 allows after slot t: released so far minus due so far.
    max_backlog = np.cumsum(released) - np.cumsum(due)
    capacity = cp.Variable(horizon)
    backlog = cp.Variable(horizon)
    change = cp.Variable(horizon)
    # (shift @ v)_t = v_{t-1}, with v_0 = 0 before the first slot.
    import scipy.sparse as sp  # here, not at import: the CLI's start does without scipy

    shift = sp.eye(horizon, k=-1, format="csr")
    assigned = shift @ backlog + released - backlog
    constraints = [
        backlog >= 0,
        backlog <= max_backlog,
        backlog[horizon - 1] == 0,
        assigned >= 0,
        assigned <= capacity,
        change >= capacity - shift @ capacity,
        change >= shift @ capacity - capacity,
    ]
    if params.max_servers is not None:
        constraints.append(capacity <= params.max_servers / load_scale)
    if weights is None:
        operating = e0 * cp.sum(capacity) + e1 * cp.sum(assigned)
    else:
        operating = (e0 * weights) @ capacity + (e1 * weights) @ assigned
    objective = operating + beta * (cp.sum(change) + capacity[horizon - 1])
    problem = cp.Problem(cp.Minimize(objective), constraints)
    try:
        problem.solve(solver=SOLVER)
    except cp.error.SolverError as exc:
        raise SolverError(f"{name}: {SOLVER} failed on the LP over {horizon} slots: {exc}", "solver_error") from exc
    if problem.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise InfeasibleError(
            f"{name}: no schedule meets every deadline over {horizon} slots"
            + (f" with at most M = {params.max_servers:g} servers" if params.max_servers is not None else ""),
            problem.status,
        )
    if problem.status != cp.OPTIMAL:
        raise SolverError(f"{name}: {SOLVER} did not solve the LP over {horizon} slots", str(problem.status))
    # Interior-point output sits within ~1e-9 of the bounds; snap it onto them.
    x = np.clip(np.asarray(assigned.value, dtype=float).reshape(horizon), 0.0, None) * load_scale
    m = np.maximum(np.asarray(capacity.value, dtype=float) * load_scale, x)
    if params.max_servers is not None:
        m = np.minimum(m, params.max_servers)
    elapsed_ms = (time.perf_counter() - started) * 1000
    return Schedule(policy=name, capacity=m, assigned=x, solve_ms_per_slot=elapsed_ms / max(1, horizon))


def smallest_max_servers(load: np.ndarray, deadline_slots: int) -> float:
    """The least cap M for which LP (3) has a schedule: max over runs of slots i..j of
    sum_{t=i..j} L_t / (j - i + 1 + D), shape (n_slots,) -> servers.

    Work released in slots i..j is due by j + D and cannot start before i, so every M below
    that ratio is infeasible; at or above it EDF meets every deadline (Hall's condition on the
    intervals), so the bound is exact. Found by bisection on M, each test O(n_slots): some run
    has sum - M (length + D) > 0 when P_k - M k rises by more than M D somewhere, P the prefix sums.
    """
    load = np.asarray(load, dtype=float)
    if not load.any():
        return 0.0
    prefix = np.concatenate([[0.0], np.cumsum(load)])
    steps = np.arange(prefix.shape[0], dtype=float)

    def too_small(cap: float) -> bool:
        level = prefix - cap * steps
        return bool((level[1:] - np.minimum.accumulate(level[:-1])).max() > cap * deadline_slots * (1 + 1e-15))

    low, high = float(load.max()) / (1 + deadline_slots), float(load.max())
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if too_small(middle):
            low = middle
        else:
            high = middle
    return high
