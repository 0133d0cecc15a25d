"""hold+carbon's window LP (:mod:`autoscaler.core.policies.carbon`): one slot's plan over the next
3D+1 slots, of which only the first is played.

:func:`solve_window` solves it on a coarser grid past the queue's deadlines (:func:`window_groups`:
slots 0..D one by one, then blocks that end where the signal changes), :func:`solve_window_exact`
slot by slot, the reference. Up to D = FAR_BLOCKS_MAX / 2 slots the grid is the slots themselves
and the two solve the same LP the same way: the same (m_0, x_0). Past it, the grid plan's cost,
re-evaluated slot by slot, was within 0.0002 % of the slot LP's optimum on Workload A's windows at
D = 144 under the French grid's 2020 intensity, and the schedules within 0.015 % of CO2
(benchmarks/bench_carbon_lp.py)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from autoscaler.core.errors import InfeasibleError, SolverError
from autoscaler.core.model import CostParams

if TYPE_CHECKING:
    import scipy.sparse as sp
# scipy is imported where a plan is solved, not here: the CLI's start and --help do without it.

NAME = "hold+carbon"
"""What the carbon-aware hold is called in every output."""

FAR_BLOCKS_MAX = 24
"""Past slot D (slots D+1..3D: the forecast arrivals' deadlines) no block is longer than
ceil(2D / FAR_BLOCKS_MAX) slots; slots 0..D (the queue's) are always kept one by one. Up to
D = FAR_BLOCKS_MAX / 2 every group is one slot and the LP is the slot LP."""

SIGNAL_CUTS_MAX = 48
"""Past slot D a block also ends where w changes: at the SIGNAL_CUTS_MAX largest changes at most.
The slot LP's plan changes m_t where w changes (a vertex of the LP), and m_0 follows where it does:
on Workload A at D = 144 under the French grid's 30-minute intensity, uniform hour blocks moved
those changes by up to 6 slots and m_0 by up to 5 % (0.8 % CO2 over a day); cut at the signal's
changes, the grid LP keeps them (benchmarks/bench_carbon_lp.py)."""


HIGHS_OPTIONS = {"presolve": False, "simplex_dual_edge_weight_strategy": "dantzig"}
"""linprog's HiGHS options for the grid LP where it is coarser than the slots. On its ~550 dual
simplex iterations at D = 144, Dantzig's pricing took about 30 % less time than HiGHS's default
(steepest edge), and presolve, which finds little to remove here, another 1-2 ms."""


def window_groups(weights: np.ndarray, deadline_slots: int) -> np.ndarray:
    """Lengths of the window's slot groups, slots, shape (n_groups,), summing to n = weights.shape[0].

    ``weights``: w over the window, shape (3D+1,). Slots 0..D one by one; each of the stretches
    D+1..2D (work both released and due at the forecast rate) and 2D+1..3D (due only) cut where w
    changes (the SIGNAL_CUTS_MAX largest changes over both) and every ceil(2D / FAR_BLOCKS_MAX)
    slots. Released and due work are constant per slot inside a block, so a block's plan (one m,
    its work spread evenly over its slots) is a plan of its slots that meets every deadline and
    release in them.
    """
    n = weights.shape[0]
    d = int(deadline_slots)
    block = -(-2 * d // FAR_BLOCKS_MAX)
    if block <= 1 or n <= d + 1:
        return np.ones(n, dtype=np.int64)
    stretches = [(first, end) for first, end in ((d + 1, min(n, 2 * d + 1)), (2 * d + 1, n)) if end > first]
    inner = np.concatenate([np.arange(first + 1, end) for first, end in stretches])
    step = np.abs(weights[inner] - weights[inner - 1])
    changes = inner[step > 0.0]
    if changes.shape[0] > SIGNAL_CUTS_MAX:
        changes = changes[np.argsort(-step[step > 0.0], kind="stable")[:SIGNAL_CUTS_MAX]]
    starts = [np.arange(d + 1)]
    for first, end in stretches:
        cuts = np.unique(np.concatenate([[first], changes[(changes > first) & (changes < end)], [end]]))
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            count = -(-(hi - lo) // block)
            starts.append(lo + (np.arange(count) * (hi - lo)) // count)
    return np.diff(np.concatenate(starts + [[n]])).astype(np.int64)


@lru_cache(maxsize=16)
def _constraints(lengths: tuple[int, ...]) -> sp.csc_matrix:
    """A_ub of the grouped LP (it depends on the group lengths only), shape (4g, 3g)."""
    import scipy.sparse as sp
    g = len(lengths)
    identity = sp.identity(g, format="csr")
    shift = sp.eye(g, k=-1, format="csr")  # (shift @ v)_j = v_{j-1}
    zero = sp.csr_matrix((g, g))
    span = sp.diags(np.asarray(lengths, dtype=float), format="csr")
    x_of_b = shift - identity  # X_j - R_j = B_{j-1} - B_j
    return sp.vstack(
        [
            sp.hstack([zero, -x_of_b, zero]),  # X_j >= 0
            sp.hstack([-span, x_of_b, zero]),  # X_j <= l_j * M_j
            sp.hstack([identity - shift, zero, -identity]),  # M_j - M_{j-1} <= U_j
            sp.hstack([shift - identity, zero, -identity]),  # M_{j-1} - M_j <= U_j
        ],
        format="csc",
    )


def _released_and_due(queue: np.ndarray, arrivals: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Work released and work due in each slot of the window, shape (n,) each."""
    d = queue.shape[0] - 1
    released = np.zeros(n)
    released[0] = float(queue.sum())
    k = n - d - 1  # slots of forecast arrivals
    released[1 : k + 1] = arrivals
    due = np.zeros(n)
    due[: d + 1] = queue
    due[d + 1 :] += arrivals  # released in t+j, 1 <= j <= k, due in t+j+D
    return released, due


def window_plan(
    queue: np.ndarray, arrivals: float, previous: float, weights: np.ndarray, params: CostParams
) -> tuple[np.ndarray, np.ndarray]:
    """The window LP's plan on the grid of :func:`window_groups`, spread back over the slots:
    (m, x), servers, shape (3D+1,) each, m constant and x even inside a block.

    Arguments as :func:`solve_window_exact`. Each group j has one capacity M_j, its backlog B_j at
    its end, and U_j >= |M_j - M_{j-1}|; its work X_j = R_j + B_{j-1} - B_j (R_j: released in it)
    lies in [0, l_j*M_j], B_j in [0, the most that may still be queued after its last slot]; it costs
    sum of w over it times e0*M_j, the mean w times e1*X_j, and beta*U_j. Every plan of the grid is a
    plan of the slots; conversely averaging any plan of the slots over each block (M_j the block's
    largest m) is a plan of the grid, so this LP is infeasible exactly when the slot LP is. Raises
    InfeasibleError (under M), SolverError (anything else HiGHS reports).
    """
    n = weights.shape[0]
    d = queue.shape[0] - 1
    released, due = _released_and_due(queue, arrivals, n)
    scale = float(max(released.max(), previous, 1e-300))
    released, due, previous_scaled = released / scale, due / scale, previous / scale
    lengths = window_groups(weights, d)
    g = lengths.shape[0]
    ends = np.cumsum(lengths)
    starts = ends - lengths
    released_g = np.add.reduceat(released, starts)
    weight_sum = np.add.reduceat(weights, starts)
    weight_mean = weight_sum / lengths
    max_backlog = np.maximum(np.cumsum(released) - np.cumsum(due), 0.0)[ends - 1]
    first = np.zeros(g)
    first[0] = previous_scaled
    b_ub = np.concatenate([released_g, -released_g, first, -first])
    # e1 * sum_j wbar_j X_j = const + e1 * sum_j (wbar_{j+1} - wbar_j) B_j
    backlog_cost = np.append(weight_mean[1:], 0.0) - weight_mean
    cost = np.concatenate([weight_sum * params.e0, params.e1 * backlog_cost, np.full(g, params.beta)])
    bounds = np.zeros((3 * g, 2))
    bounds[:g, 1] = np.inf if params.max_servers is None else params.max_servers / scale
    bounds[g : 2 * g, 1] = max_backlog
    bounds[2 * g :, 1] = np.inf
    a_ub = _constraints(tuple(lengths.tolist()))
    # On the slot grid, the slot LP's options too: the same LP, solved the same way, gives the same plan.
    options = HIGHS_OPTIONS if g < n else {}
    from scipy.optimize import linprog

    result = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs", options=options)
    if result.status == 2:
        raise InfeasibleError(f"{NAME}: no plan of the window meets every deadline under M = {params.max_servers}", "infeasible")
    if result.status != 0:
        raise SolverError(f"{NAME}: HiGHS did not solve the window LP over {n} slots: {result.message}", str(result.status))
    capacity_g = result.x[:g]
    backlog_g = result.x[g : 2 * g]
    assigned_g = released_g + np.concatenate([[0.0], backlog_g[:-1]]) - backlog_g
    capacity = np.repeat(capacity_g, lengths) * scale
    assigned = np.repeat(assigned_g / lengths, lengths) * scale
    return np.maximum(capacity, 0.0), np.maximum(assigned, 0.0)


def solve_window(queue: np.ndarray, arrivals: float, previous: float, weights: np.ndarray, params: CostParams) -> tuple[float, float]:
    """(m_0, x_0), servers, of the window LP solved on the grid of :func:`window_groups`
    (:func:`window_plan`); arguments, errors as :func:`solve_window_exact`."""
    capacity, assigned = window_plan(queue, arrivals, previous, weights, params)
    return float(capacity[0]), float(assigned[0])


def solve_window_exact(queue: np.ndarray, arrivals: float, previous: float, weights: np.ndarray, params: CostParams) -> tuple[float, float]:
    """Solve the window LP of the module docstring slot by slot; returns (m_0, x_0), servers.

    ``queue``: y, shape (D+1,); ``arrivals``: the work taken to be released in each of the next 2D
    slots; ``previous``: m_{t-1}; ``weights``: w over the window, shape (3D+1,). Written through the
    backlog b_k (work released and not run after slot k) so every row touches two neighbouring slots:
    variables m, b and u >= |m_k - m_{k-1}|, 3*(3D+1) in all. Raises InfeasibleError (under M),
    SolverError (anything else HiGHS reports). The reference for :func:`solve_window` (39-52 ms per
    slot at D = 144).
    """
    n = weights.shape[0]
    released, due = _released_and_due(queue, arrivals, n)
    scale = float(max(released.max(), previous, 1e-300))
    released, due, previous_scaled = released / scale, due / scale, previous / scale
    max_backlog = np.maximum(np.cumsum(released) - np.cumsum(due), 0.0)
    import scipy.sparse as sp
    from scipy.optimize import linprog

    identity = sp.identity(n, format="csr")
    shift = sp.eye(n, k=-1, format="csr")  # (shift @ v)_k = v_{k-1}
    zero = sp.csr_matrix((n, n))
    # x_k = released_k + b_{k-1} - b_k
    x_of_b = shift - identity
    first = np.zeros(n)
    first[0] = previous_scaled
    rows = [
        (sp.hstack([zero, -x_of_b, zero]), released),  # x_k >= 0
        (sp.hstack([-identity, x_of_b, zero]), -released),  # x_k <= m_k
        (sp.hstack([identity - shift, zero, -identity]), first),  # m_k - m_{k-1} <= u_k
        (sp.hstack([shift - identity, zero, -identity]), -first),  # m_{k-1} - m_k <= u_k
    ]
    a_ub = sp.vstack([r[0] for r in rows], format="csc")
    b_ub = np.concatenate([r[1] for r in rows])
    cost = np.concatenate([weights * params.e0, params.e1 * (x_of_b.T @ weights), np.full(n, params.beta)])
    m_bound = (0, None if params.max_servers is None else params.max_servers / scale)
    bounds = [m_bound] * n + [(0, float(b)) for b in max_backlog] + [(0, None)] * n
    result = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if result.status == 2:
        raise InfeasibleError(f"{NAME}: no plan of the window meets every deadline under M = {params.max_servers}", "infeasible")
    if result.status != 0:
        raise SolverError(f"{NAME}: HiGHS did not solve the window LP over {n} slots: {result.message}", str(result.status))
    m0 = float(result.x[0]) * scale
    x0 = float(released[0] - result.x[n]) * scale
    return max(m0, 0.0), max(x0, 0.0)
