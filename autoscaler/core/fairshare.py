"""Static and dynamic dominant resource fairness (DRF) for divisible demands.

Resources are normalised to capacity 1 each. Agent i demands ``D_i`` (a fraction of every
resource per task); its dominant share is ``max_r D_ir`` and its normalised demand vector is
``d_i = D_i / max_r D_ir`` (so ``max_r d_ir = 1``). Allocations are non-wasteful: agent i gets
``x_i * d_i``, and ``x_i`` is its dominant share of the allocation.

Dynamic DRF (paper: dynamic DRF note, §2, after Kash, Procaccia and Shah): n agents arrive one per
step and never leave; allocations are irrevocable. At step k,
``x_i^k = max(x_i^{k-1}, M^k)`` where ``M^k`` is the largest M with
``sum_{i<=k} d_ir * max(x_i^{k-1}, M) <= k/n`` for every resource r (``x_k^{k-1} = 0``).

Three ways to take one step, which must agree: the linear-time bisection of the note's §4
(``DynamicDRF.arrive``, ``dynamic_drf_step``), the step's LP (``dynamic_drf_step_lp``, cvxpy with
CLARABEL) and progressive filling in increments of ``step`` (``dynamic_drf_step_water_filling``,
pseudo-polynomial). ``competitive_ratios`` measures dynamic DRF against the offline optimum (§3).

Pure: numpy (and cvxpy inside the LP functions); no files, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from autoscaler.core.errors import ConfigError, SolverError

_XML_TEXT = re.compile("[\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]*")
"""XML 1.0's Char production: the text a YARN allocation file may hold."""


def normalized_demands(demands: np.ndarray, agents: list[str] | None = None) -> np.ndarray:
    """``d_ir = D_ir / max_r D_ir`` for a ``(n_agents, n_resources)`` array of demand vectors.

    Zero entries are allowed. Raises ConfigError naming the agent (its name from ``agents``, else
    its 1-based row) if a demand vector has a negative or non-finite entry or is all zero.
    """
    array = np.asarray(demands, dtype=float)
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
        raise ConfigError(f"demands: expected a non-empty (n_agents, n_resources) array, got shape {array.shape}")
    for i, row in enumerate(array):
        _check_demand_vector(row, _agent_label(agents, i))
    return array / array.max(axis=1, keepdims=True)


def _agent_label(agents: list[str] | None, index: int) -> str:
    return f"agent {agents[index]!r}" if agents is not None else f"agent {index + 1}"


def _check_demand_vector(row: np.ndarray, label: str) -> None:
    if not np.all(np.isfinite(row)):
        raise ConfigError(f"{label}: demand vector must be finite, got {row.tolist()}")
    if np.any(row < 0):
        raise ConfigError(f"{label}: demand vector must be >= 0, got {row.tolist()}")
    if not np.any(row > 0):
        raise ConfigError(f"{label}: demand vector is all zero; an agent must demand some resource")


def static_drf(demands: np.ndarray, capacity: np.ndarray | None = None, agents: list[str] | None = None) -> np.ndarray:
    """Static DRF by progressive filling: dominant shares ``(n_agents,)`` of all agents present at once.

    ``demands`` is ``(n_agents, n_resources)``; ``capacity`` ``(n_resources,)`` defaults to 1 each.
    All unfrozen agents rise at the same dominant share until some resource is full; every agent
    that uses a full resource (``d_ir > 0``) freezes; the rest keep rising (zero demands: Parkes,
    Procaccia and Shah's extension). At most ``n_resources`` rounds.

    Raises ConfigError for a bad demand vector (see ``normalized_demands``) or a capacity that is
    not finite and > 0.
    """
    d = normalized_demands(demands, agents)
    n_agents, n_resources = d.shape
    cap = np.ones(n_resources) if capacity is None else np.asarray(capacity, dtype=float)
    if cap.shape != (n_resources,) or not np.all(np.isfinite(cap)) or np.any(cap <= 0):
        raise ConfigError(f"capacity: expected {n_resources} finite numbers > 0, got {cap.tolist()}")
    shares = np.zeros(n_agents)
    active = np.ones(n_agents, dtype=bool)
    level = 0.0
    while active.any():
        used = shares[~active] @ d[~active]
        rate = d[active].sum(axis=0)
        rising = rate > 0
        limits = np.full(n_resources, np.inf)
        limits[rising] = (cap[rising] - used[rising]) / rate[rising]
        level = max(level, float(limits.min()))
        shares[active] = level
        # Ties within rounding saturate together, so agents blocked by either freeze in this round.
        full = rising & (limits <= level * (1 + 1e-12) + 1e-15)
        active &= ~(d[:, full] > 0).any(axis=1)
    return shares


class DynamicDRF:
    """Dynamic DRF state for ``n_agents`` arrivals over ``n_resources`` resources (paper: dynamic DRF note, §4).

    Each ``arrive`` takes the linear-time step: O(k * n_resources) work at step k, in O(log k)
    vectorised rounds. Arrays are preallocated, so nothing is copied between steps.
    """

    def __init__(self, n_agents: int, n_resources: int) -> None:
        if n_agents < 1 or n_resources < 1:
            raise ConfigError(f"dynamic DRF needs n_agents >= 1 and n_resources >= 1, got {n_agents} and {n_resources}")
        self.n_agents = n_agents
        self.n_resources = n_resources
        self._d = np.zeros((n_agents, n_resources))
        self._x = np.zeros(n_agents)
        self.k = 0
        self.levels: list[float] = []
        """M^k of every step so far, ``levels[k-1]`` for step k."""

    def arrive(self, demand_vector: np.ndarray, agent: str | None = None) -> float:
        """Agent k = ``self.k + 1`` arrives with ``demand_vector`` ``(n_resources,)``; returns M^k.

        Raises ConfigError naming the agent for a negative, non-finite or all-zero demand vector,
        one of the wrong length, or an arrival beyond ``n_agents``. The state is unchanged then.
        """
        label = f"agent {agent!r}" if agent is not None else f"agent {self.k + 1}"
        row = np.asarray(demand_vector, dtype=float)
        if row.shape != (self.n_resources,):
            raise ConfigError(f"{label}: expected a demand vector of {self.n_resources} resources, got shape {row.shape}")
        if self.k >= self.n_agents:
            raise ConfigError(f"{label}: arrival {self.k + 1} is more than the n = {self.n_agents} agents declared")
        _check_demand_vector(row, label)
        k = self.k + 1
        self._d[k - 1] = row / row.max()
        self._x[k - 1] = 0.0
        level = _linear_time_step(self._d[:k], self._x[:k], k / self.n_agents)
        self.k = k
        self.levels.append(level)
        return level

    @property
    def shares(self) -> np.ndarray:
        """Dominant shares ``(k,)`` of the agents present, in arrival order (non-increasing)."""
        return self._x[: self.k].copy()

    @property
    def demands(self) -> np.ndarray:
        """Normalised demand vectors ``(k, n_resources)`` of the agents present."""
        return self._d[: self.k].copy()


def _linear_time_step(d: np.ndarray, x: np.ndarray, cap: float) -> float:
    """One step in place: ``x`` ``(k,)`` holds x^{k-1} with ``x[-1] == 0`` and leaves as x^k; returns M^k.

    Because x^{k-1} is non-increasing in arrival order, some tau splits the agents: those before
    tau keep x_i^{k-1}, those from tau on sit at M^k. tau is the first agent l at whose share the
    step is feasible, ``alpha_r + x_l * beta_r <= cap`` with ``alpha_r = sum_{i<l} d_ir x_i`` and
    ``beta_r = sum_{i>=l} d_ir``. Bisection halves the unclassified agents [lo, hi] every round,
    carrying alpha over the agents before lo and beta over those after hi, so the rounds cost
    k + k/2 + ... = O(k) (paper: dynamic DRF note, §4). The last agent (x = 0) is always feasible.
    """
    k, m = d.shape
    lo, hi = 0, k - 1
    alpha = np.zeros(m)  # over agents before lo: they keep their share
    beta = np.zeros(m)  # over agents after hi: they go to M
    while lo < hi:
        l = (lo + hi) // 2
        alpha_l = alpha + x[lo:l] @ d[lo:l]
        after_l = d[l + 1 : hi + 1].sum(axis=0)
        if np.all(alpha_l + x[l] * (beta + after_l + d[l]) <= cap):
            hi = l
            beta = beta + after_l
        else:
            lo = l + 1
            alpha = alpha_l + x[l] * d[l]
    tau = lo
    beta = beta + d[tau]
    rising = beta > 0
    level = float(np.min((cap - alpha[rising]) / beta[rising]))
    # Exactly, x_tau <= M < x_{tau-1}; clamp so rounding cannot break irrevocability or the order.
    level = max(level, float(x[tau]))
    if tau > 0:
        level = min(level, float(x[tau - 1]))
    x[tau:] = level
    return level


def dynamic_drf_step(normalized: np.ndarray, previous_shares: np.ndarray, n_agents: int) -> tuple[float, np.ndarray]:
    """The linear-time step as a pure function: (M^k, x^k ``(k,)``).

    ``normalized`` is ``(k, n_resources)`` with rows d_1..d_k; ``previous_shares`` ``(k-1,)`` is
    x^{k-1} of the agents already present (non-increasing, as dynamic DRF leaves it).
    """
    d = np.asarray(normalized, dtype=float)
    x = np.append(np.asarray(previous_shares, dtype=float), 0.0)
    level = _linear_time_step(d, x, d.shape[0] / n_agents)
    return level, x


def dynamic_drf_step_lp(normalized: np.ndarray, previous_shares: np.ndarray, n_agents: int) -> tuple[float, np.ndarray]:
    """The step's LP (paper: dynamic DRF note, LP (1)), solved with cvxpy and CLARABEL: (M^k, x^k ``(k,)``).

    maximise M subject to x_i >= x_i^{k-1}, x_i >= M, sum_i d_ir x_i <= k/n. Since d >= 0, the
    least resource use for a given M is x_i = max(x_i^{k-1}, M), so the LP's M is M^k and that is
    the x returned. Raises SolverError with the status unless the solve is optimal.
    """
    import cvxpy as cp

    d = np.asarray(normalized, dtype=float)
    k = d.shape[0]
    prev = np.append(np.asarray(previous_shares, dtype=float), 0.0)
    x = cp.Variable(k)
    level = cp.Variable()
    problem = cp.Problem(cp.Maximize(level), [x >= prev, x >= level, d.T @ x <= k / n_agents])
    problem.solve(solver=cp.CLARABEL)
    if problem.status != cp.OPTIMAL:
        raise SolverError(f"dynamic DRF step {k} LP", str(problem.status))
    return float(level.value), np.maximum(prev, float(level.value))


def dynamic_drf_step_water_filling(
    normalized: np.ndarray, previous_shares: np.ndarray, n_agents: int, step: float
) -> tuple[float, np.ndarray]:
    """Progressive filling (Kash, Procaccia and Shah): raise the water level by ``step`` while feasible.

    Returns (M, x ``(k,)``) with M^k - step < M <= M^k. Takes about M^k / step rounds of
    O(k * n_resources) each: pseudo-polynomial, a reference only. Raises ConfigError unless step > 0.
    """
    if not (np.isfinite(step) and step > 0):
        raise ConfigError(f"water-filling step must be a finite number > 0, got {step!r}")
    d = np.asarray(normalized, dtype=float)
    k = d.shape[0]
    cap = k / n_agents
    prev = np.append(np.asarray(previous_shares, dtype=float), 0.0)
    rounds = 0
    while np.all(np.maximum(prev, (rounds + 1) * step) @ d <= cap):
        rounds += 1
    level = rounds * step
    return level, np.maximum(prev, level)


def run_dynamic_drf(demands: np.ndarray, n_agents: int | None = None, agents: list[str] | None = None) -> list[tuple[float, np.ndarray]]:
    """Dynamic DRF over ``demands`` ``(k, n_resources)`` in arrival order: [(M^j, x^j ``(j,)``) for j = 1..k].

    ``n_agents`` defaults to the number of rows. Raises ConfigError naming the agent (see ``arrive``).
    """
    array = np.asarray(demands, dtype=float)
    if array.ndim != 2 or array.shape[0] == 0:
        raise ConfigError(f"demands: expected a non-empty (n_agents, n_resources) array, got shape {array.shape}")
    n = array.shape[0] if n_agents is None else n_agents
    drf = DynamicDRF(n, array.shape[1])
    steps = []
    for i, row in enumerate(array):
        level = drf.arrive(row, agents[i] if agents is not None else None)
        steps.append((level, drf.shares))
    return steps


def offline_optimum(normalized: np.ndarray, capacity: float, objective: str) -> float:
    """Offline optimum over agents ``(k, n_resources)`` knowing all demands (paper: dynamic DRF note, §3).

    ``"maxmin"``: max t s.t. x_i >= t, sum_i d_ir x_i <= capacity; ``"maxsum"``: max sum_i x_i s.t.
    sum_i d_ir x_i <= capacity, x >= 0. LP with cvxpy and CLARABEL. Raises ConfigError for an
    unknown objective and SolverError with the status unless the solve is optimal.
    """
    import cvxpy as cp

    d = np.asarray(normalized, dtype=float)
    x = cp.Variable(d.shape[0], nonneg=True)
    constraints = [d.T @ x <= capacity]
    if objective == "maxmin":
        t = cp.Variable()
        problem = cp.Problem(cp.Maximize(t), constraints + [x >= t])
    elif objective == "maxsum":
        problem = cp.Problem(cp.Maximize(cp.sum(x)), constraints)
    else:
        raise ConfigError(f"objective: expected 'maxmin' or 'maxsum', got {objective!r}")
    problem.solve(solver=cp.CLARABEL)
    if problem.status != cp.OPTIMAL:
        raise SolverError(f"offline {objective} LP over {d.shape[0]} agents", str(problem.status))
    return float(problem.value)


@dataclass(frozen=True)
class StepRatios:
    """Dynamic DRF objective over the offline optimum at step k, for the k/n cap and for full capacity."""

    k: int
    maxmin_capped: float
    maxmin_full: float
    maxsum_capped: float
    maxsum_full: float


def competitive_ratios(normalized: np.ndarray, shares: np.ndarray, n_agents: int) -> StepRatios:
    """Ratios of dynamic DRF at step k (``shares`` ``(k,)``) to the offline optimum over the same k agents.

    ``normalized`` is ``(k, n_resources)``. The offline LPs are solved once at full capacity 1;
    both LPs are homogeneous in the capacity, so the optimum under the k/n cap is exactly k/n
    times that (paper: dynamic DRF note, §3).
    """
    d = np.asarray(normalized, dtype=float)
    k = d.shape[0]
    x = np.asarray(shares, dtype=float)
    maxmin_full = offline_optimum(d, 1.0, "maxmin")
    maxsum_full = offline_optimum(d, 1.0, "maxsum")
    scale = k / n_agents
    drf_min, drf_sum = float(x.min()), float(x.sum())
    return StepRatios(
        k=k,
        maxmin_capped=drf_min / (scale * maxmin_full),
        maxmin_full=drf_min / maxmin_full,
        maxsum_capped=drf_sum / (scale * maxsum_full),
        maxsum_full=drf_sum / maxsum_full,
    )


def yarn_allocation_xml(agents: list[str], shares: np.ndarray, n_agents: int) -> str:
    """A YARN fair-scheduler allocation file: one ``<queue name=agent>`` per agent, weight = n * x_i.

    An agent at its equal split 1/n gets weight 1.0; weights are proportional to dominant shares.
    Raises ConfigError for a name YARN cannot use as a leaf queue (empty, a '.', or whitespace).
    """
    import xml.etree.ElementTree as ET

    root = ET.Element("allocations")
    for agent, share in zip(agents, np.asarray(shares, dtype=float), strict=True):
        if not agent or agent != agent.strip() or "." in agent or any(c.isspace() for c in agent):
            raise ConfigError(f"agent {agent!r}: not a YARN queue name (no '.', no whitespace, not empty)")
        if not _XML_TEXT.fullmatch(agent):
            raise ConfigError(f"agent {agent!r}: holds a character an XML file cannot (a control character or a lone surrogate)")
        queue = ET.SubElement(root, "queue", name=agent)
        ET.SubElement(queue, "weight").text = f"{share * n_agents:.6g}"
    ET.indent(root)
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
