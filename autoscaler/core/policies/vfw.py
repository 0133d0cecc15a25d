"""Valley Filling with Workload, VFW(delta) (paper: deferral, §III, Algorithm 1, LOPT (4), VOPT (5)).

Each slot t decides m_t (and x_t = m_t) by optimising over [t, t+D]:

* outside valleys, LOPT (4): run no more than the delta-delayed curve l^delta
  has released, so some work accumulates;
* inside a valley, VOPT (5): run up to everything released, filling the valley
  with the accumulated work;
* in the last D+1 slots, VOPT over [t, T], so all accumulated work runs.

A valley starts at a slot where L and l^delta cross (d_t = L_t - l^delta_t
changes sign, or reaches 0 from either side) and the area
A = sum_{k=t}^{t+delta} (l^delta_k - l^delta_t) is negative; it lasts delta+1
slots (Algorithm 1, lines 6-15). l^delta over [t, t+delta] is L over
[t-delta, t], so the test only uses work already released.

LOPT and VOPT have the shape of GCP-OPT: a fixed total over the window and a
lower bound on the prefix sums (only at the first slot, from C1), so the same
exact concave-majorant solver answers them; only m_t is used, the majorant's
first slope (:func:`~autoscaler.core.policies.gcp.first_capacity`), O(D) numpy work a slot.

Known behaviour: VFW flaps on a flat load with a little noise. On L alternating 2.9/3.1
(benchmarks/make_traces.py) m_t changes in 285-288 of 288 slots at D = 2, 4 and 8, and
rounded up to whole nodes that is a node switched on or off almost every slot. Not from
rounding (m_t is fractional), and the valley test only at D = 2: with delta = 1 its area is
A = L_t - L_{t-1}, negative at every down-step, so valleys (144 slots of 288) toggle LOPT and
VOPT with the noise. At D >= 4 no valley is found and the flapping is LOPT (4) itself: it charges
no switching after its window, so its optimum (unique when the prefix bound is only at the first
slot) runs the least flat rate now and leaves the window's end as high as it can; re-solved every
slot, that defers work until the deadline nearly binds (C1 slack at most 0.1 server) and m_t
copies the wiggle of L_{t-D}. It is what (4)-(5) prescribe, so it is kept; keeping m_{t-1}
where the budget allows would be another policy (the idea ``hold`` builds on). The same myopia makes
VFW cost more than follow on some loads (bursty.tsv: -5.7 % at D = 4); ``autoscaler replay``
and the daemon say so (``worse_than_follow``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from autoscaler.core.cost import pad_to_horizon
from autoscaler.core.errors import ConfigError, InfeasibleError
from autoscaler.core.model import CostParams, Schedule
from autoscaler.core.policies.gcp import GcpOptProblem, first_capacity

NAME = "vfw"
"""What valley filling with a look-ahead window is called in every output."""


def default_delta(deadline_slots: int) -> int:
    """delta = floor(D/2), the paper's "delta = D/2" rounded down so that 0 < delta < D holds for D >= 2."""
    return deadline_slots // 2


def plan(
    load: np.ndarray,
    deadline_slots: int,
    params: CostParams,
    delta: int | None = None,
    solver: str = "exact",
) -> Schedule:
    """VFW(delta) over the horizon window + D; ``load`` is L_t, shape (n_slots,).

    ``delta`` defaults to :func:`default_delta`. ``solver``: "exact" or a cvxpy
    solver name (each window length's problem is built once and re-solved).
    Raises ConfigError unless 0 < delta < D (so D >= 2), InfeasibleError when M
    is too small for a deadline.
    """
    if delta is None:
        delta = default_delta(deadline_slots)
    if not (0 < delta < deadline_slots):
        raise ConfigError(
            f"vfw: delta must satisfy 0 < delta < D, got delta = {delta} with D = {deadline_slots}"
            + (" (VFW needs D >= 2)" if deadline_slots < 2 else "")
        )
    released = pad_to_horizon(load, deadline_slots)
    horizon = released.shape[0]
    problems: dict[int, GcpOptProblem] = {}

    def solve(prefix: np.ndarray, previous: float) -> np.ndarray:
        if solver == "exact":
            return np.array([first_capacity(prefix, params.max_servers, NAME)])
        if prefix.shape[0] not in problems:
            problems[prefix.shape[0]] = GcpOptProblem(prefix.shape[0], params, solver=solver)
        return problems[prefix.shape[0]].solve(prefix, previous)

    state = VfwState.empty(deadline_slots)
    capacity = np.zeros(horizon)
    valley_slots = 0
    started = time.perf_counter()
    for t in range(horizon):
        capacity[t], state = vfw_step(state, float(released[t]), deadline_slots, delta, solve, slots_left=horizon - t)
        valley_slots += int(state.valley > 0)
    elapsed_ms = (time.perf_counter() - started) * 1000
    return Schedule.online(NAME, capacity, elapsed_ms, {"delta": delta, "valley_slots": valley_slots})


@dataclass(frozen=True)
class VfwState:
    """What VFW carries between slots: the last D+1 values of L_t and of its running sum
    (oldest first, the current slot last), the work run so far, the valley counter and m_{t-1}."""

    recent_load: tuple[float, ...]
    recent_cum: tuple[float, ...]
    run_so_far: float = 0.0
    valley: int = 0
    previous_capacity: float = 0.0

    @classmethod
    def empty(cls, deadline_slots: int) -> "VfwState":
        return cls(recent_load=(0.0,) * (deadline_slots + 1), recent_cum=(0.0,) * (deadline_slots + 1))


def vfw_step(
    state: VfwState,
    load: float,
    deadline_slots: int,
    delta: int,
    solve=None,
    slots_left: int | None = None,
) -> tuple[float, VfwState]:
    """One slot of VFW(delta) (Algorithm 1): returns (m_t, new state); x_t = m_t.

    ``load``: L_t of this slot. ``solve(prefix, previous)``: a GCP-OPT-shaped solver
    returning m_t.. (only m_t is read; the exact first slope when None). ``slots_left``: slots to the horizon's end including
    this one, when known (a replay); in the last D+1 of them VOPT runs everything over
    [t, T]. A daemon has no end, so it passes None and that phase never starts.
    Slots before the first are L = 0 (l^delta and l^D are 0 there).
    """
    solve = solve or (lambda prefix, previous: np.array([first_capacity(prefix)]))
    recent = state.recent_load[1:] + (load,)
    cum = state.recent_cum[1:] + (state.recent_cum[-1] + load,)
    now = deadline_slots  # index of slot t in the recent tuples

    def delayed(back: int) -> float:  # L_{t-back}
        return recent[now - back]

    def cum_delayed(back: int) -> float:  # sum_{j<=t} L_{j-back}
        return cum[now - back]

    gap = load - delayed(delta)
    gap_before = recent[now - 1] - recent[now - 1 - delta]
    crossing = (gap_before > 0 and gap <= 0) or (gap_before < 0 and gap >= 0)
    valley = state.valley
    if valley == 0 and crossing:
        level = delayed(delta)
        area = sum(recent[k] - level for k in range(now - delta, now + 1))
        if area < 0:
            valley = 1
    elif 0 < valley <= delta:
        valley += 1
    else:
        valley = 0
    final = slots_left is not None and slots_left <= deadline_slots + 1
    run_so_far = state.run_so_far
    need_now = cum_delayed(deadline_slots) - run_so_far
    total = (cum[now] if (valley > 0 or final) else cum_delayed(delta)) - run_so_far
    width = deadline_slots + 1 if slots_left is None else min(deadline_slots + 1, slots_left)
    prefix = np.full(width, max(need_now, 0.0))
    prefix[-1] = max(total, prefix[0])
    if total < need_now - 1e-9 * max(1.0, total):
        raise InfeasibleError(f"vfw: this slot must run {need_now:.6g} but only {total:.6g} is allowed (delta = {delta})", "infeasible")
    m = solve(prefix, state.previous_capacity)
    capacity = max(float(m[0]), need_now, 0.0)
    return capacity, VfwState(recent, cum, run_so_far + capacity, valley, capacity)


def step_bounds(before: VfwState, after: VfwState, deadline_slots: int, delta: int) -> tuple[float, float]:
    """What bound the m_t :func:`vfw_step` chose going from ``before`` to ``after`` (no horizon's
    end, as in the daemon): (work due now, released D slots ago and not yet run; the most it may run
    over [t, t+D]: everything released inside a valley (``after.valley > 0``, VOPT (5)), what the
    delta-delayed curve has released outside one (LOPT (4))). Servers' worth; for explaining a
    decision, it changes no number.
    """
    need_now = after.recent_cum[0] - before.run_so_far
    allowed = (after.recent_cum[deadline_slots] if after.valley > 0 else after.recent_cum[deadline_slots - delta]) - before.run_so_far
    return float(need_now), float(allowed)
