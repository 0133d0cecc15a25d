"""Cost model and schedule checks (paper: deferral, eq. (1)-(3), constraints C1/C2).

All arrays are per slot over the horizon, shape (horizon,), in servers.
"""

from __future__ import annotations

import numpy as np

from autoscaler.core.errors import ConfigError, ScheduleError
from autoscaler.core.model import CostBreakdown, CostParams, Schedule
from autoscaler.core.readable import number_text


def pad_to_horizon(load: np.ndarray, deadline_slots: int) -> np.ndarray:
    """L_t over the horizon window + D: the window's load followed by D empty slots.

    Shape (n_slots,) -> (n_slots + deadline_slots,).
    """
    return np.concatenate([np.asarray(load, dtype=float), np.zeros(deadline_slots)])


def deadline_curve(load: np.ndarray, deadline_slots: int) -> np.ndarray:
    """l_t = L_{t-D}: the work that falls due in slot t (paper: deferral, §II-D).

    ``load`` is already over the horizon, shape (horizon,); returns shape (horizon,).
    """
    load = np.asarray(load, dtype=float)
    due = np.zeros_like(load)
    if deadline_slots < load.shape[0]:
        due[deadline_slots:] = load[: load.shape[0] - deadline_slots]
    return due


def schedule_cost(capacity: np.ndarray, assigned: np.ndarray, params: CostParams) -> CostBreakdown:
    """Operating cost sum_t m_t*C(x_t/m_t) = sum_t (e0*m_t + e1*x_t) and switching cost
    beta*sum_t |m_t - m_{t-1}| with m_0 = 0 (paper: deferral, eq. 2).

    Every server is off after the horizon (m_{T+1} = 0) and that switch-off is
    charged too: eq. (2) stops at T, which would let a schedule keep servers on
    in its last slots for free, and the horizons compared here are finite.
    """
    capacity = np.asarray(capacity, dtype=float)
    assigned = np.asarray(assigned, dtype=float)
    # A sum past float64's range comes out as inf (no warning): callers refuse a cost that is not finite.
    with np.errstate(over="ignore", invalid="ignore"):
        operating = float(params.e0 * capacity.sum() + params.e1 * assigned.sum())
        switching = float(params.beta * np.abs(np.diff(capacity, prepend=0.0, append=0.0)).sum())
    return CostBreakdown(operating=operating, switching=switching)


def check_schedule(
    schedule: Schedule,
    released: np.ndarray,
    due: np.ndarray,
    max_servers: float | None = None,
    rtol: float = 1e-6,
) -> None:
    """Raise ScheduleError unless the schedule is feasible for (3)/(6) of the deferral paper.

    ``released`` is L_t and ``due`` the deadline curve (l_t, or l'_t for per-class
    deadlines), both shape (horizon,). Checks, at every t: finite values,
    0 <= x_t <= m_t (<= M), C1: sum_{j<=t} l_j <= sum_{j<=t} x_j, C2: sum_{j<=t} x_j <=
    sum_{j<=t} L_j, and that all released work is done by the horizon's end.
    The tolerance is ``rtol`` times the total work (at least ``rtol``).
    """
    m = np.asarray(schedule.capacity, dtype=float)
    x = np.asarray(schedule.assigned, dtype=float)
    released = np.asarray(released, dtype=float)
    due = np.asarray(due, dtype=float)
    name = schedule.policy
    horizon = released.shape[0]
    if m.shape != (horizon,) or x.shape != (horizon,) or due.shape != (horizon,):
        raise ScheduleError(
            f"{name}: expected capacity, assigned and due of shape ({horizon},), "
            f"got {m.shape}, {x.shape}, {due.shape}"
        )
    if not (np.isfinite(m).all() and np.isfinite(x).all()):
        raise ScheduleError(f"{name}: schedule contains NaN or infinity")
    tol = rtol * max(1.0, float(released.sum()))
    _first_violation(name, "x_t >= 0", -x, tol)
    _first_violation(name, "x_t <= m_t", x - m, tol)
    if max_servers is not None:
        _first_violation(name, f"m_t <= M = {number_text(max_servers)}", m - max_servers, tol)
    cum_x = np.cumsum(x)
    _first_violation(name, "deadline constraint C1 (cumulative x >= cumulative l)", np.cumsum(due) - cum_x, tol)
    _first_violation(name, "release constraint C2 (cumulative x <= cumulative L)", cum_x - np.cumsum(released), tol)
    unfinished = float(released.sum() - cum_x[-1]) if horizon else 0.0
    if abs(unfinished) > tol:
        raise ScheduleError(f"{name}: {unfinished:.6g} servers' worth of work is not done by the horizon's end")


def _first_violation(policy: str, what: str, excess: np.ndarray, tol: float) -> None:
    bad = np.flatnonzero(excess > tol)
    if bad.size:
        t = int(bad[0])
        raise ScheduleError(f"{policy}: {what} violated at slot {t} by {float(excess[t]):.6g}")


def slot_cost_array(slot_cost: object, horizon: int) -> np.ndarray:
    """``slot_cost`` as a float array s_t of shape (horizon,), finite and >= 0: a per-slot multiplier
    of the operating cost (a carbon intensity in gCO2/kWh, a price per kWh, ...).

    Raises ConfigError naming ``slot_cost`` when it is not numeric, has another shape, or holds a
    NaN, an infinity or a negative value (with the first such slot).
    """
    try:
        values = np.asarray(slot_cost, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"slot_cost must be an array of numbers, got {type(slot_cost).__name__}: {exc}") from exc
    if values.shape != (horizon,):
        raise ConfigError(f"slot_cost must have shape ({horizon},), one value per slot of the horizon, got {values.shape}")
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
    if bad.size:
        t = int(bad[0])
        raise ConfigError(f"slot_cost must be finite and >= 0 in every slot, got {float(values[t])!r} at slot {t}")
    return values


def weighted_operating_cost(capacity: np.ndarray, assigned: np.ndarray, params: CostParams, slot_cost: np.ndarray) -> float:
    """Signal-weighted operating cost sum_t s_t*(e0*m_t + e1*x_t), all shapes (horizon,).

    With s_t a carbon intensity in gCO2 per unit of e0/e1 (e.g. e0 in kWh per server-slot and s_t in
    gCO2/kWh) this is the schedule's emissions; with s_t = 1 it is the operating part of
    :func:`schedule_cost` (paper: deferral, eq. 2). Switching cost is not weighted. Raises ConfigError
    for a bad ``slot_cost`` (see :func:`slot_cost_array`).
    """
    capacity = np.asarray(capacity, dtype=float)
    assigned = np.asarray(assigned, dtype=float)
    weights = slot_cost_array(slot_cost, capacity.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        return float(weights @ (params.e0 * capacity + params.e1 * assigned))
