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
exact concave-majorant solver answers them.
"""

from __future__ import annotations

import time

import numpy as np

from autoscaler.cost import pad_to_horizon
from autoscaler.errors import ConfigError, InfeasibleError
from autoscaler.model import CostParams, Schedule
from autoscaler.policies.gcp import GcpOptProblem, solve_gcp_opt


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
    cum_released = np.cumsum(released)

    def cum_delayed(t: int, delay: int) -> float:
        # sum_{j<=t} L_{j-delay}: what the delay-shifted curve has released by slot t.
        return float(cum_released[t - delay]) if t >= delay else 0.0

    def delayed(t: int, delay: int) -> float:
        return float(released[t - delay]) if t >= delay else 0.0

    problems: dict[int, GcpOptProblem] = {}
    capacity = np.zeros(horizon)
    run_so_far = 0.0
    valley = 0
    valley_slots = 0
    started = time.perf_counter()
    for t in range(horizon):
        gap = released[t] - delayed(t, delta)
        gap_before = released[t - 1] - delayed(t - 1, delta) if t > 0 else 0.0
        crossing = (gap_before > 0 and gap <= 0) or (gap_before < 0 and gap >= 0)
        if valley == 0 and crossing:
            level = delayed(t, delta)
            area = float(sum(released[k] - level for k in range(max(0, t - delta), t + 1)))
            area -= max(0, delta - t) * level  # l^delta is 0 before slot delta
            if area < 0:
                valley = 1
        elif 0 < valley <= delta:
            valley += 1
        else:
            valley = 0
        window_end = min(t + deadline_slots, horizon - 1)
        final = t >= horizon - 1 - deadline_slots
        in_valley = valley > 0 or final
        valley_slots += int(valley > 0)
        need_now = cum_delayed(t, deadline_slots) - run_so_far
        total = (float(cum_released[t]) if in_valley else cum_delayed(t, delta)) - run_so_far
        if final:
            # VOPT over [t, T] must leave nothing: every deadline is at most T.
            total = float(cum_released[-1]) - run_so_far
        width = window_end - t + 1
        prefix = np.full(width, max(need_now, 0.0))
        prefix[-1] = max(total, prefix[0])
        if total < need_now - 1e-9 * max(1.0, total):
            raise InfeasibleError(
                f"vfw: slot {t} must run {need_now:.6g} but only {total:.6g} is allowed (delta = {delta})", "infeasible"
            )
        if solver == "exact":
            m = solve_gcp_opt(prefix, capacity[t - 1] if t else 0.0, params.max_servers)
        else:
            if width not in problems:
                problems[width] = GcpOptProblem(width, params, solver=solver)
            m = problems[width].solve(prefix, capacity[t - 1] if t else 0.0)
        capacity[t] = max(float(m[0]), need_now, 0.0)
        run_so_far += capacity[t]
    elapsed_ms = (time.perf_counter() - started) * 1000
    return Schedule(
        policy="vfw",
        capacity=capacity,
        assigned=capacity.copy(),
        solve_ms_per_slot=elapsed_ms / max(1, horizon),
        notes={"delta": delta, "valley_slots": valley_slots},
    )
