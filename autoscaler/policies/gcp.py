"""Generalized Capacity Provisioning, GCP (paper: deferral, §IV, Algorithm 2 and GCP-OPT (7)).

Each slot, the capacity m_{t-1} of the slot before runs the unassigned work y in
earliest-deadline-first order, the vector shifts one slot towards its deadlines,
the new arrivals L_t join it, and GCP-OPT chooses m_t..m_{t+nu}; only m_t is used,
with x_t = m_t.

GCP-OPT has a fixed total sum_j m_{t+j} = sum_j y_j, so its operating term is a
constant and it minimises the switching |m_t - m_{t-1}| + sum_j |m_{t+j} - m_{t+j-1}|
subject to prefix lower bounds. :func:`solve_gcp_opt` solves it exactly in
O(nu) with a concave majorant; :class:`GcpOptProblem` is the same problem in
cvxpy, built once with Parameters and re-solved, used as the reference.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from autoscaler.errors import InfeasibleError, ScheduleError, SolverError
from autoscaler.model import CostParams, Schedule

_TOL = 1e-9


def _upper_hull_slopes(points_y: np.ndarray) -> np.ndarray:
    """Slopes, per unit step, of the least concave majorant of the points (k, points_y[k]), k = 0..n.

    ``points_y``: shape (n+1,); returns shape (n,).
    """
    hull: list[int] = []
    for k in range(points_y.shape[0]):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # Drop b when it lies on or below the chord from a to k.
            if (points_y[b] - points_y[a]) * (k - a) <= (points_y[k] - points_y[a]) * (b - a):
                hull.pop()
            else:
                break
        hull.append(k)
    slopes = np.empty(points_y.shape[0] - 1)
    for a, b in zip(hull[:-1], hull[1:]):
        slopes[a:b] = (points_y[b] - points_y[a]) / (b - a)
    return slopes


def solve_gcp_opt(prefix_work: np.ndarray, previous_capacity: float, max_servers: float | None = None) -> np.ndarray:
    """Exact solution of GCP-OPT (7) for one slot, in O(nu).

    ``prefix_work``: Y_j = sum_{k<=j} y_k, the work that must be done by slot t+j,
    shape (nu+1,); the last entry is the total, which must be done exactly.
    Returns m_t..m_{t+nu}, shape (nu+1,), in servers: the slopes of the least
    concave majorant of the points (j+1, Y_j) from the origin.

    Why it is optimal: averaging an increasing neighbour pair only moves work
    earlier and never adds switching, so some optimum is non-increasing and
    costs |m_t - m_{t-1}| + m_t - m_{t+nu}. Every feasible m has
    m_t >= s_max = max_j Y_j/(j+1) and m_{t+nu} <= r_min, the majorant's last
    slope; the majorant attains both, and m_t = s_max is optimal whether
    m_{t-1} is above or below it. When m_{t-1} > s_max other optima exist
    (any m_t up to m_{t-1}); the majorant defers the most work while staying
    smooth, which on Workloads A and B saved 0.3-1 point more than holding
    capacity at m_{t-1}. ``previous_capacity`` therefore does not change the result.
    Raises InfeasibleError when s_max exceeds M.
    """
    del previous_capacity
    prefix_work = np.maximum.accumulate(np.asarray(prefix_work, dtype=float))
    n = prefix_work.shape[0]
    if prefix_work[-1] <= 0.0:
        return np.zeros(n)
    per_slot = prefix_work / np.arange(1, n + 1, dtype=float)
    s_max = float(per_slot.max())
    if max_servers is not None and s_max > max_servers * (1 + 1e-12) + _TOL:
        j = int(np.argmax(per_slot))
        raise InfeasibleError(
            f"gcp: {prefix_work[j]:.6g} servers' worth of work is due within {j + 1} slot(s), "
            f"more than M = {max_servers:g} servers can run",
            "infeasible",
        )
    return _upper_hull_slopes(np.concatenate([[0.0], prefix_work]))


def flat_capacity(prefix_work: np.ndarray) -> np.ndarray:
    """r_t = max_j Y_j/(j+1): the lowest capacity that, held flat from this slot on, runs every
    queued unit by its deadline; the first slope of GCP-OPT (7)'s majorant, so GCP's m_t.

    ``prefix_work``: Y_j, the work due within j+1 slots, shape (..., nu+1), in servers' worth;
    returns shape (...), in servers. Used by ``policies.hold`` for many queues at once.
    """
    prefix_work = np.asarray(prefix_work, dtype=float)
    return (prefix_work / np.arange(1, prefix_work.shape[-1] + 1, dtype=float)).max(axis=-1)


def gcp_opt_objective(capacity: np.ndarray, previous_capacity: float, params: CostParams) -> float:
    """Objective of GCP-OPT (7): (e0+e1)*sum_j m_j + beta*sum_j |m_j - m_{j-1}|."""
    switching = abs(capacity[0] - previous_capacity) + np.abs(np.diff(capacity)).sum()
    return float((params.e0 + params.e1) * capacity.sum() + params.beta * switching)


class GcpOptProblem:
    """GCP-OPT (7) over nu+1 slots as a cvxpy problem, built once and re-solved.

    ``solve(prefix_work, previous_capacity)`` takes Y of shape (nu+1,) and returns
    m of shape (nu+1,). Raises InfeasibleError or SolverError with the status.
    """

    def __init__(self, n_slots: int, params: CostParams, solver: str = "CLARABEL") -> None:
        import cvxpy as cp  # imported here: the daemon's exact path never needs it, and it takes ~0.8 s

        self._cp = cp
        self.solver = solver
        self.capacity = cp.Variable(n_slots, nonneg=True)
        self.prefix_work = cp.Parameter(n_slots)
        self.previous_capacity = cp.Parameter()
        switching = cp.abs(self.capacity[0] - self.previous_capacity)
        if n_slots > 1:
            switching = switching + cp.sum(cp.abs(cp.diff(self.capacity)))
        constraints = [cp.sum(self.capacity) == self.prefix_work[n_slots - 1]]
        if n_slots > 1:
            constraints.append(cp.cumsum(self.capacity)[: n_slots - 1] >= self.prefix_work[: n_slots - 1])
        if params.max_servers is not None:
            constraints.append(self.capacity <= params.max_servers)
        objective = (params.e0 + params.e1) * cp.sum(self.capacity) + params.beta * switching
        self.problem = cp.Problem(cp.Minimize(objective), constraints)

    def solve(self, prefix_work: np.ndarray, previous_capacity: float) -> np.ndarray:
        cp = self._cp
        self.prefix_work.value = np.asarray(prefix_work, dtype=float)
        self.previous_capacity.value = float(previous_capacity)
        try:
            self.problem.solve(solver=self.solver)
        except cp.error.SolverError as exc:
            raise SolverError(f"gcp: {self.solver} failed on GCP-OPT: {exc}", "solver_error") from exc
        if self.problem.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
            raise InfeasibleError("gcp: GCP-OPT has no solution within the server cap", self.problem.status)
        if self.problem.status != cp.OPTIMAL:
            raise SolverError("gcp: GCP-OPT was not solved", str(self.problem.status))
        return np.clip(np.asarray(self.capacity.value, dtype=float), 0.0, None)


@dataclass(frozen=True)
class GcpState:
    """What GCP carries between slots: the unassigned work y by slots-to-deadline, and m_{t-1}."""

    unassigned: tuple[float, ...]
    previous_capacity: float = 0.0

    @classmethod
    def empty(cls, max_deadline_slots: int) -> "GcpState":
        return cls(unassigned=(0.0,) * (max_deadline_slots + 1))


def run_edf(unassigned: np.ndarray, capacity: float) -> np.ndarray:
    """Run ``capacity`` of work on y in earliest-deadline-first order (Algorithm 2, lines 4-16).

    ``unassigned``: y, shape (nu+1,), index = slots left before the deadline.
    Returns y' of the same shape (what is still unassigned).
    """
    remaining = np.asarray(unassigned, dtype=float).copy()
    spare = float(capacity)
    for i in range(remaining.shape[0]):
        if spare <= 0:
            break
        done = min(spare, remaining[i])
        remaining[i] -= done
        spare -= done
    return remaining


def gcp_step(
    state: GcpState,
    arrivals: np.ndarray,
    params: CostParams,
    solve=None,
) -> tuple[float, GcpState]:
    """One slot of GCP (Algorithm 2): returns (m_t, new state); x_t = m_t.

    ``arrivals``: L_t split by deadline, L_{d,t} for d = 0..nu, shape (nu+1,).
    ``solve``: a GCP-OPT solver taking (prefix_work, previous_capacity); the exact
    one when None. Raises ScheduleError if last slot's capacity left due work undone.
    """
    after = run_edf(np.asarray(state.unassigned), state.previous_capacity)
    total_work = max(1.0, float(np.sum(state.unassigned)))
    if after[0] > 1e-9 * total_work:
        raise ScheduleError(f"gcp: {after[0]:.6g} servers' worth of work missed its deadline")
    unassigned = np.concatenate([after[1:], [0.0]]) + np.asarray(arrivals, dtype=float)
    prefix_work = np.cumsum(unassigned)
    if solve is None:
        capacity = solve_gcp_opt(prefix_work, state.previous_capacity, params.max_servers)
    else:
        capacity = solve(prefix_work, state.previous_capacity)
    # m_t never below what falls due now, whatever rounding the solver left.
    m_t = max(float(capacity[0]), float(unassigned[0]))
    return m_t, GcpState(unassigned=tuple(unassigned.tolist()), previous_capacity=m_t)


def plan_uniform(load: np.ndarray, deadline_slots: int, params: CostParams, solver: str = "exact") -> Schedule:
    """GCP-U: GCP with every job's deadline D (paper: deferral, §VI-B), run as GCP with one class,
    so GCP with all classes at one deadline equals GCP-U by construction.

    ``load``: L_t, shape (n_slots,); returns a Schedule over n_slots + D slots.
    ``solver``: "exact" (the O(nu) majorant) or a cvxpy solver name such as "CLARABEL".
    """
    # Every job's deadline is D: the whole load sits in row D of L_{d,t}.
    load = np.asarray(load, dtype=float)
    load_by_deadline = np.zeros((deadline_slots + 1, load.shape[0]))
    load_by_deadline[deadline_slots] = load
    return replace(plan_classes(load_by_deadline, params, solver), policy="gcp-u")


def plan_classes(load_by_deadline: np.ndarray, params: CostParams, solver: str = "exact") -> Schedule:
    """GCP with per-job deadlines (paper: deferral, §IV, Algorithm 2 with nu = the largest deadline).

    ``load_by_deadline``: L_{d,t}, shape (nu+1, n_slots); returns a Schedule over n_slots + nu slots.
    """
    load_by_deadline = np.asarray(load_by_deadline, dtype=float)
    max_deadline = load_by_deadline.shape[0] - 1
    n_slots = load_by_deadline.shape[1]
    horizon = n_slots + max_deadline
    solve = None
    if solver != "exact":
        solve = GcpOptProblem(max_deadline + 1, params, solver=solver).solve
    state = GcpState.empty(max_deadline)
    capacity = np.zeros(horizon)
    no_arrivals = np.zeros(max_deadline + 1)
    started = time.perf_counter()
    for t in range(horizon):
        arrivals = load_by_deadline[:, t] if t < n_slots else no_arrivals
        capacity[t], state = gcp_step(state, arrivals, params, solve)
    return Schedule.online("gcp", capacity, (time.perf_counter() - started) * 1000)


def class_deadline_curve(load_by_deadline: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(L_t, l'_t) over the horizon n_slots + nu: l'_t = sum_d L_{d,t-d} (paper: deferral, §IV)."""
    load_by_deadline = np.asarray(load_by_deadline, dtype=float)
    max_deadline, n_slots = load_by_deadline.shape[0] - 1, load_by_deadline.shape[1]
    horizon = n_slots + max_deadline
    released = np.zeros(horizon)
    due = np.zeros(horizon)
    released[:n_slots] = load_by_deadline.sum(axis=0)
    for d in range(max_deadline + 1):
        due[d : d + n_slots] += load_by_deadline[d]
    return released, due
