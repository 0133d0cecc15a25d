"""Generalized Capacity Provisioning, GCP (paper: deferral, §IV, Algorithm 2 and GCP-OPT (7)).

Each slot, the capacity m_{t-1} of the slot before runs the unassigned work y in
earliest-deadline-first order, the vector shifts one slot towards its deadlines,
the new arrivals L_t join it, and GCP-OPT chooses m_t..m_{t+nu}; only m_t is used,
with x_t = m_t.

GCP-OPT has a fixed total sum_j m_{t+j} = sum_j y_j, so its operating term is a
constant and it minimises the switching |m_t - m_{t-1}| + sum_j |m_{t+j} - m_{t+j-1}|
subject to prefix lower bounds. :func:`solve_gcp_opt` solves it exactly in
O(nu) with a concave majorant; :class:`GcpOptProblem` is the same problem in
cvxpy, built once with Parameters and re-solved, used as the reference. Only m_t
is used, and it is the majorant's first slope, so each slot costs a few numpy
passes over y (:func:`first_capacity`), nu + 1 values: a run costs
(nu + 1) x (n_slots + nu) value updates, and its memory is the K rows of L_{d,t}
that have work (:class:`~autoscaler.core.model.LoadByDeadline`), never (nu + 1) x n_slots.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from autoscaler.core.errors import ConfigError, InfeasibleError, ScheduleError, SolverError
from autoscaler.core.model import CostParams, LoadByDeadline, Schedule

_TOL = 1e-9

NAME = "gcp"
"""What GCP with each job's deadline class is called in every output."""

UNIFORM_NAME = "gcp-u"
"""What GCP with the one deadline D for every unit of work is called in every output."""


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
    first_capacity(prefix_work, max_servers)  # raises InfeasibleError above M
    return _upper_hull_slopes(np.concatenate([[0.0], prefix_work]))


def first_capacity(prefix_work: np.ndarray, max_servers: float | None = None, policy: str = NAME) -> float:
    """m_t of GCP-OPT (7): the first slope of the majorant, s_max = max_j Y_j/(j+1), in a few numpy passes.

    ``prefix_work``: Y, shape (nu+1,) (non-decreasing or not: a dip never raises the maximum).
    Equals ``solve_gcp_opt(prefix_work, ...)[0]`` (up to the last bit where two ratios tie)
    without building the rest of the majorant, which only m_t's successors would use.
    Raises InfeasibleError, its message starting with ``policy``, when s_max exceeds M.
    """
    prefix_work = np.asarray(prefix_work, dtype=float)
    return _max_rate(prefix_work, np.arange(1, prefix_work.shape[0] + 1, dtype=float), 0, max_servers, policy)


def _max_rate(prefix_work: np.ndarray, divisors: np.ndarray, offset: int, max_servers: float | None, policy: str) -> float:
    """max_j Y_j/(j+1) over a span of Y starting at index ``offset`` (``divisors``: offset+1, offset+2, ...)."""
    per_slot = prefix_work / divisors
    j = int(np.argmax(per_slot))
    s_max = float(per_slot[j])
    if s_max <= 0.0:
        return 0.0
    if max_servers is not None and s_max > max_servers * (1 + 1e-12) + _TOL:
        raise InfeasibleError(
            f"{policy}: {prefix_work[j]:.6g} servers' worth of work is due within {offset + j + 1} slot(s), "
            f"more than M = {max_servers:g} servers can run",
            "infeasible",
        )
    return s_max


def flat_capacity(prefix_work: np.ndarray) -> np.ndarray:
    """r_t = max_j Y_j/(j+1): the lowest capacity that, held flat from this slot on, runs every
    queued unit by its deadline; the first slope of GCP-OPT (7)'s majorant, so GCP's m_t.

    ``prefix_work``: Y_j, the work due within j+1 slots, shape (..., nu+1), in servers' worth;
    returns shape (...), in servers. Used by ``policies.hold`` for many queues at once.
    """
    prefix_work = np.asarray(prefix_work, dtype=float)
    return (prefix_work / np.arange(1, prefix_work.shape[-1] + 1, dtype=float)).max(axis=-1)


def binding_deadline(unassigned: np.ndarray) -> tuple[float, int]:
    """What sets GCP's m_t = max_j Y_j/(j+1): (Y_j, j+1) at the maximum, the work (servers' worth)
    due within how many slots; (0.0, 0) when nothing is queued.

    ``unassigned``: y at the decision, shape (nu+1,) (``GcpState.unassigned`` after :func:`gcp_step`).
    For explaining a decision; it changes no number.
    """
    prefix = np.cumsum(np.asarray(unassigned, dtype=float))
    if prefix.size == 0 or prefix[-1] <= 0.0:
        return 0.0, 0
    j = int(np.argmax(prefix / np.arange(1, prefix.shape[0] + 1, dtype=float)))
    return float(prefix[j]), j + 1


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
    remaining = np.array(unassigned, dtype=float)
    if remaining.ndim != 1:
        raise ConfigError(f"gcp: expected y of shape (nu+1,), got {remaining.shape}")
    _run_edf_in_place(remaining, float(capacity))
    return remaining


def _run_edf_in_place(remaining: np.ndarray, spare: float) -> tuple[float, int]:
    """EDF on y in place, with the arithmetic of the entry-by-entry loop but in numpy passes.

    Returns (work run, how many leading entries were run in full and are now 0). The spare
    capacity before entry i is the left fold s - y_0 - ... - y_{i-1}; entry i is run in full
    while that is > 0 before it and >= 0 after it (a - b >= 0 exactly when a >= b), and the
    first entry where it is not takes what spare is left. The fold goes a block at a time,
    doubling, so a slot costs the entries it runs, not all nu + 1.
    """
    if spare <= 0:
        return 0.0, 0
    start, size, left = 0, 64, spare
    n = remaining.shape[0]
    while start < n:
        block = remaining[start : start + size]
        fold = np.subtract.accumulate(np.concatenate(([left], block)))
        # The fold never increases, so both tests hold on a leading run.
        done = min(int(np.count_nonzero(fold[1:] >= 0.0)), int(np.count_nonzero(fold[:-1] > 0.0)))
        block[:done] = 0.0
        if done < block.shape[0]:
            # Entry ``done`` takes what is left (nothing when the fold reached 0 exactly): all of it is run.
            if fold[done] > 0:
                block[done] -= fold[done]
            return spare, start + done
        left = float(fold[-1])
        start += size
        size *= 2
    return spare - left, n


class _WorkVector:
    """y, the unassigned work by slots to its deadline (index 0: due in this slot), through the
    slots of Algorithm 2.

    y sits in a buffer twice its length, so the shift by one slot moves an offset and copies
    nothing but once every nu + 1 slots; and y is zero outside the span [lead, end), which is
    all EDF, the prefix sums and the maximum look at. A slot costs the span of pending work
    (at most nu + 1 values; D + 1 for GCP-U), with the arithmetic of the dense vector.
    """

    def __init__(self, unassigned: np.ndarray, max_servers: float | None, solve=None, policy: str = NAME) -> None:
        self._policy = policy
        n = unassigned.shape[0]
        self._n = n
        self._buffer = np.zeros(2 * n)
        self._buffer[:n] = unassigned
        self._base = 0
        nonzero = np.flatnonzero(unassigned)
        self._lead = int(nonzero[0]) if nonzero.size else 0
        self._end = int(nonzero[-1]) + 1 if nonzero.size else 0
        self._divisors = np.arange(1, n + 1, dtype=float)
        self._max_servers = max_servers
        self._solve = solve

    @property
    def values(self) -> np.ndarray:
        """y, shape (nu+1,) (a view)."""
        return self._buffer[self._base : self._base + self._n]

    def step(self, previous_capacity: float, arrivals: np.ndarray | None, arrival_deadlines: np.ndarray | None) -> float:
        """One slot: EDF with m_{t-1}, the shift, this slot's arrivals, then m_t (returned).

        ``arrivals``: L_{d,t} for d = 0..nu (shape (nu+1,)) or, with ``arrival_deadlines``
        (shape (K,), increasing), for those d only; None when nothing arrives.
        Raises ScheduleError if work due in the last slot was left undone.
        """
        y = self.values
        if self._lead < self._end:
            run, done = _run_edf_in_place(y[self._lead : self._end], previous_capacity)
            self._lead += done
            # Work left at index 0 was due in the last slot and not run; the tolerance, relative
            # to the work there was (what is left plus what ran), is only summed when some is left.
            if self._lead == 0 and y[0] > 1e-9 and y[0] > 1e-9 * max(1.0, float(np.sum(y[: self._end])) + run):
                raise ScheduleError(f"{self._policy}: {y[0]:.6g} servers' worth of work missed its deadline")
        self._shift()
        y = self.values
        if arrivals is not None:
            if arrival_deadlines is None:
                y += arrivals
                landed = np.flatnonzero(arrivals)
            else:
                y[arrival_deadlines] += arrivals
                landed = arrival_deadlines[np.flatnonzero(arrivals)]
            if landed.size:
                if self._lead >= self._end:
                    self._lead, self._end = int(landed[0]), int(landed[-1]) + 1
                else:
                    self._lead = min(self._lead, int(landed[0]))
                    self._end = max(self._end, int(landed[-1]) + 1)
        if self._solve is not None:
            first = float(self._solve(np.cumsum(y), previous_capacity)[0])
        elif self._lead < self._end:
            # Y is 0 before the span and flat after it, where Y_j/(j+1) only falls: the span holds the maximum.
            span = slice(self._lead, self._end)
            first = _max_rate(np.cumsum(y[span]), self._divisors[span], self._lead, self._max_servers, self._policy)
        else:
            first = 0.0
        # m_t never below what falls due now, whatever rounding the solver left.
        return max(first, float(y[0]))

    def _shift(self) -> None:
        """y_i <- y_{i+1}, y_nu <- 0: the entry due in the last slot leaves."""
        if self._base == self._n:
            # Out of room: move y to the buffer's start (the entry leaving is left behind).
            n = self._n
            self._buffer[: n - 1] = self._buffer[self._base + 1 : self._base + n]
            self._buffer[n - 1 :] = 0.0
            self._base = 0
        else:
            self._base += 1
        self._lead = max(self._lead - 1, 0)
        self._end = max(self._end - 1, 0)


def gcp_step(
    state: GcpState,
    arrivals: np.ndarray,
    params: CostParams,
    solve=None,
) -> tuple[float, GcpState]:
    """One slot of GCP (Algorithm 2): returns (m_t, new state); x_t = m_t.

    ``arrivals``: L_t split by deadline, L_{d,t} for d = 0..nu, shape (nu+1,).
    ``solve``: a GCP-OPT solver taking (prefix_work, previous_capacity); the exact
    one (:func:`first_capacity`) when None. Raises ScheduleError if last slot's
    capacity left due work undone, InfeasibleError when m_t would exceed M.
    """
    unassigned = np.array(state.unassigned, dtype=float)
    arrivals = np.asarray(arrivals, dtype=float)
    if unassigned.ndim != 1 or arrivals.shape != unassigned.shape:
        raise ConfigError(f"gcp: expected arrivals L_(d,t) of shape {unassigned.shape}, one per deadline, got {arrivals.shape}")
    work = _WorkVector(unassigned, params.max_servers, solve)
    m_t = work.step(state.previous_capacity, arrivals, None)
    return m_t, GcpState(unassigned=tuple(work.values.tolist()), previous_capacity=m_t)


def plan_uniform(load: np.ndarray, deadline_slots: int, params: CostParams, solver: str = "exact") -> Schedule:
    """GCP-U: GCP with every job's deadline D (paper: deferral, §VI-B), run as GCP with one class,
    so GCP with all classes at one deadline equals GCP-U by construction.

    ``load``: L_t, shape (n_slots,); returns a Schedule over n_slots + D slots.
    ``solver``: "exact" (the O(nu) majorant) or a cvxpy solver name such as "CLARABEL".
    Memory is O(n_slots + D); time is (D + 1) x (n_slots + D) value updates.
    """
    # Every job's deadline is D: the whole load is the one row d = D of L_{d,t}.
    load = np.asarray(load, dtype=float)
    by_deadline = LoadByDeadline(deadlines=np.array([int(deadline_slots)], dtype=np.int64), load=load[np.newaxis, :])
    return replace(plan_classes(by_deadline, params, solver, policy=UNIFORM_NAME), policy=UNIFORM_NAME)


def plan_classes(
    load_by_deadline: LoadByDeadline | np.ndarray, params: CostParams, solver: str = "exact", policy: str = NAME
) -> Schedule:
    """GCP with per-job deadlines (paper: deferral, §IV, Algorithm 2 with nu = the largest deadline).

    ``load_by_deadline``: L_{d,t} as a :class:`LoadByDeadline` (K rows of n_slots), or dense,
    shape (nu+1, n_slots); returns a Schedule over n_slots + nu slots. Memory: y, nu + 1 values,
    besides the K rows; time: (nu + 1) x (n_slots + nu) value updates. ``policy`` names the
    policy in errors. Raises InfeasibleError when some m_t would exceed M.
    """
    if not isinstance(load_by_deadline, LoadByDeadline):
        load_by_deadline = LoadByDeadline.from_dense(load_by_deadline)
    max_deadline = load_by_deadline.max_deadline
    n_slots = load_by_deadline.n_slots
    deadlines = load_by_deadline.deadlines
    load = np.asarray(load_by_deadline.load, dtype=float)
    horizon = n_slots + max_deadline
    solve = None
    if solver != "exact":
        solve = GcpOptProblem(max_deadline + 1, params, solver=solver).solve
    work = _WorkVector(np.zeros(max_deadline + 1), params.max_servers, solve, policy)
    capacity = np.zeros(horizon)
    previous = 0.0
    started = time.perf_counter()
    for t in range(horizon):
        previous = capacity[t] = work.step(previous, load[:, t] if t < n_slots else None, deadlines)
    return Schedule.online(NAME, capacity, (time.perf_counter() - started) * 1000)


def class_deadline_curve(load_by_deadline: LoadByDeadline | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(L_t, l'_t) over the horizon n_slots + nu: l'_t = sum_d L_{d,t-d} (paper: deferral, §IV)."""
    if not isinstance(load_by_deadline, LoadByDeadline):
        load_by_deadline = LoadByDeadline.from_dense(load_by_deadline)
    load = np.asarray(load_by_deadline.load, dtype=float)
    n_slots = load_by_deadline.n_slots
    horizon = n_slots + load_by_deadline.max_deadline
    released = np.zeros(horizon)
    due = np.zeros(horizon)
    released[:n_slots] = load.sum(axis=0)
    for row, d in enumerate(load_by_deadline.deadlines.tolist()):
        due[d : d + n_slots] += load[row]
    return released, due
