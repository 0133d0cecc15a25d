"""hold+carbon's window LP (:mod:`autoscaler.core.policies.carbon`): one slot's plan over the next
3D+1 slots, of which only the first is played."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from autoscaler.core.errors import InfeasibleError, SolverError
from autoscaler.core.model import CostParams

NAME = "hold+carbon"
"""What the carbon-aware hold is called in every output."""


def solve_window(queue: np.ndarray, arrivals: float, previous: float, weights: np.ndarray, params: CostParams) -> tuple[float, float]:
    """Solve the window LP of the module docstring; returns (m_0, x_0), servers.

    ``queue``: y, shape (D+1,); ``arrivals``: the work taken to be released in each of the next 2D
    slots; ``previous``: m_{t-1}; ``weights``: w over the window, shape (3D+1,). Written through the
    backlog b_k (work released and not run after slot k) so every row touches two neighbouring slots:
    variables m, b and u >= |m_k - m_{k-1}|, 3*(3D+1) in all. Raises InfeasibleError (under M),
    SolverError (anything else HiGHS reports).
    """
    n = weights.shape[0]
    d = queue.shape[0] - 1
    released = np.zeros(n)
    released[0] = float(queue.sum())
    k = n - d - 1  # slots of forecast arrivals
    released[1 : k + 1] = arrivals
    due = np.zeros(n)
    due[: d + 1] = queue
    due[d + 1 :] += arrivals  # released in t+j, 1 <= j <= k, due in t+j+D
    scale = float(max(released.max(), previous, 1e-300))
    released, due, previous_scaled = released / scale, due / scale, previous / scale
    max_backlog = np.maximum(np.cumsum(released) - np.cumsum(due), 0.0)
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
