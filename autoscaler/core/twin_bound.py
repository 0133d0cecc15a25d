"""The best any policy could do on the cluster twin: LP (3) of the deferral paper priced in the
twin's node-hours, $, kWh and kgCO2 (issue 21, the lower bound beside the baselines). Pure.

Why it is a lower bound. Take any run of the twin in which every job starts within D slots
(D x ``slot_s`` seconds) of its submission and runs to its end, as a job due at
submit + length + D slots must (``autoscaler.app.replay_jobs.trace_jobs``). Let m_t be the
average number of usable (idle or busy) nodes in slot t and x_t the slots' worth of the jobs'
completed runs done in slot t. Then

* 0 <= x_t <= m_t, and the work done by the end of slot t is at most the work released by then,
  L_t being what each job would do in slot t if it ran from the instant it was submitted
  (:func:`twin_load`): no run can get ahead of that (C2);
* the work released by slot t is done by slot t + D (C1), since a job started d <= D slots late
  runs d slots behind its earliest profile;
* each node that becomes usable first booted ``provision_s`` seconds, billed and at idle power.
  Averaging over a slot does not add variation, so sum_t |m_t - m_{t-1}| (with m = 0 before the
  first slot and after the last) is at most twice the nodes that became usable: a restart is one
  switch on and one off, which is why beta below is half a boot per switch.

So (m, x) is feasible for LP (3) over n_slots + D slots (:func:`autoscaler.core.policies.offline.plan`),
and its price there is at most the twin's bill: billed node-hours >= sum_t m_t slot_s/3600 +
restarts x provision_s/3600, and energy >= idle_power_w x all node time + (busy_power_w -
idle_power_w) x busy time. The LP's minimum is therefore at most what any such run is billed.

What the bound leaves out, each of which can only lower it:

* the 60 s minimum bill per node (``autoscaler.core.twin.MIN_BILLED_S``);
* whole nodes and whole jobs: servers are fractional (the LP relaxation) and a job's work is
  divisible across slots and nodes, where the twin runs it on its w nodes at once from start to end;
* a job is counted from the instant it is submitted, a little earlier than a real cluster can
  start it: the daemon releases it at a slot's tick and a node takes ``provision_s`` to boot;
* runs killed by a decommission timeout and run again, whose work is done twice on the twin;
* with a carbon signal, each boot's energy is priced at the horizon's lowest intensity (the
  slot it falls in is not known to the LP).

And what it counts that a run may not: work past the window's end is clipped (:func:`twin_load`),
so a window must cover the jobs' runs for the bound to be compared with the twin's whole bill.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from autoscaler.core.cost import schedule_cost, weighted_operating_cost
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import MAX_SLOTS, CostParams, Job
from autoscaler.core.policies.offline import plan
from autoscaler.core.twin import TwinConfig
from autoscaler.core.workload import workload_from_curve

__all__ = ["TwinBound", "twin_load", "twin_lower_bound"]

S_PER_HOUR = 3600.0


@dataclass(frozen=True)
class TwinBound:
    """The least any schedule meeting a uniform deadline of ``deadline_slots`` could be billed on
    the twin (:func:`twin_lower_bound`); each figure is minimised on its own.

    ``node_hours``: node-hours billed, usable node time plus ``provision_s`` per restart.
    ``cost_usd``: ``node_hours`` x ``price_per_node_hour``. ``energy_kwh``: idle power over all node
    time (booting included) plus busy's extra over the busy time. ``co2_kg``: that energy weighted
    by each slot's gCO2/kWh, None without a signal. ``busy_node_hours``: the work itself,
    sum_t L_t x slot_s / 3600, the same under every policy.
    """

    deadline_slots: int
    node_hours: float
    cost_usd: float
    energy_kwh: float
    co2_kg: float | None
    busy_node_hours: float


def twin_load(jobs: Sequence[Job], config: TwinConfig, slot_s: float, start_s: float, n_slots: int) -> np.ndarray:
    """L_t, shape (n_slots,), in server-slots: the work each job would do in slot t if it ran on
    its w nodes (``Job.nodes``) from its ``submit_s`` for its true length (``config.true_length_s(name,
    submitted_length_s, job_id)``), w server-slots a slot it runs whole.

    Slot t is [start_s + t slot_s, start_s + (t+1) slot_s), s. A job is released in the slot of its
    submission, floor((submit_s - start_s) / slot_s), and is spread over the slots its run covers,
    the slots ``autoscaler.core.workload.workload_from_trace`` counts it active in, each holding
    the part of the run that falls in it (workload's curves count a whole unit per slot touched,
    which is not the work done). Work past the window's end is clipped as there, and jobs
    submitted at or after it are left out: without clipping, sum(L) = sum(w x true length) / slot_s.

    Raises ConfigError for a ``slot_s`` that is not a finite number > 0, an ``n_slots`` that is not
    a whole number in 1..MAX_SLOTS, a ``start_s`` that is not finite, a job submitted before
    ``start_s`` or whose submit time or length is not a finite number (>= 0 for the length).
    """
    slot_s = _positive_seconds("slot_s", slot_s)
    if isinstance(n_slots, bool) or not isinstance(n_slots, Integral) or not 1 <= n_slots <= MAX_SLOTS:
        raise ConfigError(f"twin_load: n_slots must be a whole number in 1..{MAX_SLOTS:,}, got {n_slots!r}")
    if isinstance(start_s, bool) or not isinstance(start_s, Real) or not math.isfinite(start_s):
        raise ConfigError(f"twin_load: start_s must be a finite number (s), got {start_s!r}")
    n_slots = int(n_slots)
    begin = np.empty(len(jobs))
    length = np.empty(len(jobs))
    width = np.array([job.nodes for job in jobs], dtype=float)
    for i, job in enumerate(jobs):
        if not (isinstance(job.submit_s, Real) and math.isfinite(job.submit_s)) or job.submit_s < start_s:
            raise ConfigError(f"twin_load: job {job.job_id!r} has submit_s {job.submit_s!r}, expected a finite time >= start_s {start_s!r}")
        if not (isinstance(job.length_s, Real) and math.isfinite(job.length_s) and job.length_s >= 0):
            raise ConfigError(f"twin_load: job {job.job_id!r} has length_s {job.length_s!r}, expected a finite number >= 0 (s)")
        begin[i] = (job.submit_s - start_s) / slot_s
        length[i] = config.true_length_s(job.name, job.submitted_length_s, job.job_id) / slot_s
    # Positions in slots, the run [begin, end) cut at the window's end; empty runs add nothing.
    end = np.minimum(begin + length, n_slots)
    keep = (begin < n_slots) & (end > begin)
    begin, end, width = begin[keep], end[keep], width[keep]
    first = np.floor(begin).astype(np.int64)
    last = np.maximum(first, np.ceil(end).astype(np.int64) - 1)
    one_slot = first == last
    # A run within one slot puts all of it there; a longer one its head and tail in its first and
    # last slots and a whole unit in each slot between, the latter through a difference array
    # (+1, -1 in whole numbers: exact).
    partial = np.zeros(n_slots)
    partial += np.bincount(first[one_slot], weights=(end[one_slot] - begin[one_slot]) * width[one_slot], minlength=n_slots)
    many = ~one_slot
    partial += np.bincount(first[many], weights=(first[many] + 1 - begin[many]) * width[many], minlength=n_slots)
    partial += np.bincount(last[many], weights=(end[many] - last[many]) * width[many], minlength=n_slots)
    # w is a whole number, so the difference array stays exact.
    steps = np.bincount(first[many] + 1, weights=width[many], minlength=n_slots + 1) - np.bincount(last[many], weights=width[many], minlength=n_slots + 1)
    return partial + np.cumsum(steps)[:n_slots]


def twin_lower_bound(
    load: np.ndarray,
    deadline_slots: int,
    slot_s: float,
    config: TwinConfig,
    g_per_kwh: np.ndarray | None = None,
    max_nodes: float | None = None,
) -> TwinBound:
    """The twin's costs minimised by LP (3) of the deferral paper over n_slots + D slots, every unit
    of work released in slot t done by slot t + D (see the module's docstring for why no run of the
    twin meeting that is billed less, and what the bound leaves out).

    ``load``: L_t, shape (n_slots,), server-slots (:func:`twin_load`). The node-hour LP prices a
    server-slot at e0 = slot_s/3600 node-h (e1 = 0) and a switch on or off at beta =
    provision_s/7200 node-h: LP (3) charges |m_t - m_{t-1}| both ways, so a restart (on and off)
    bills one boot. The energy LP prices e0 = idle_w slot_s/3600 Wh, e1 = (busy_w - idle_w)
    slot_s/3600 Wh and beta = idle_w provision_s/7200 Wh (a booting node draws idle power).
    ``g_per_kwh``: gCO2/kWh per slot, shape (n_slots + D,) or (n_slots,) (the D slots after the
    window then count no CO2, as ``TwinBill.carbon_kg`` counts energy its signal does not cover),
    finite and >= 0: the energy LP with slot t's operating cost weighted by it and each boot
    priced at the horizon's lowest intensity, so at none when an (n_slots,) signal is padded and
    D > 0 (paper: deferral, eq. (3); its slot-weighted form in
    :func:`autoscaler.core.policies.offline.solve_offline`). Returns a TwinBound; with no work
    every figure is 0 and nothing is solved.

    ``max_nodes``: the cap M on usable nodes (m_t <= M in every slot, LP (3)'s M), None: none. Under
    a cap the bound holds for the runs that meet every deadline within it; InfeasibleError when the
    deadlines need more than M (:func:`autoscaler.core.policies.offline.smallest_max_servers` says
    how many): no run within the cap meets them all, and a run that misses some is not bounded.

    Raises ConfigError for a load that is not 1-D, empty, or has a value that is not finite and
    >= 0; a ``deadline_slots`` that is not a whole number >= 0 (or n_slots + D past MAX_SLOTS); a
    bad ``slot_s``; a ``g_per_kwh`` of another shape or with a NaN, infinite or negative value.
    Raises SolverError (with the solver's status) when an LP is not solved to optimality: a
    bound is never made up. (LP (3) without a cap M is always feasible.)
    """
    slot_s = _positive_seconds("slot_s", slot_s)
    curve = workload_from_curve(load, slot_s=slot_s, source="twin_lower_bound load").released
    if isinstance(deadline_slots, bool) or not isinstance(deadline_slots, Integral) or deadline_slots < 0:
        raise ConfigError(f"twin_lower_bound: deadline_slots must be a whole number >= 0 (slots), got {deadline_slots!r}")
    deadline_slots = int(deadline_slots)
    horizon = curve.shape[0] + deadline_slots
    if horizon > MAX_SLOTS:
        raise ConfigError(f"twin_lower_bound: n_slots + deadline_slots = {horizon:,} slots, more than the {MAX_SLOTS:,} planned at once")
    signal = None if g_per_kwh is None else _signal(g_per_kwh, curve.shape[0], horizon)
    busy_node_hours = float(curve.sum()) * slot_s / S_PER_HOUR
    idle_w, extra_w = config.idle_power_w, config.busy_power_w - config.idle_power_w
    busy_energy_wh = config.busy_power_w * busy_node_hours
    if not curve.any():
        return TwinBound(deadline_slots, 0.0, 0.0, 0.0, None if signal is None else 0.0, 0.0)
    cap = None if max_nodes is None else float(max_nodes)
    hours = CostParams(e0=slot_s / S_PER_HOUR, e1=0.0, beta=config.provision_s / (2 * S_PER_HOUR), max_servers=cap)
    energy = CostParams(
        e0=idle_w * slot_s / S_PER_HOUR, e1=extra_w * slot_s / S_PER_HOUR, beta=idle_w * config.provision_s / (2 * S_PER_HOUR), max_servers=cap
    )
    schedule = plan(curve, deadline_slots, hours)
    node_hours = schedule_cost(schedule.capacity, schedule.assigned, hours).total
    # The energy LP is the node-hour LP times idle_w (the same beta/e0) plus busy's extra over the
    # work, sum x = sum L for every feasible schedule: one solve minimises both.
    energy_wh = schedule_cost(schedule.capacity, schedule.assigned, energy).total
    co2_kg = None
    if signal is not None:
        carbon = CostParams(e0=energy.e0, e1=energy.e1, beta=energy.beta * float(signal.min()))
        weighted = plan(curve, deadline_slots, carbon, slot_cost=signal)
        operating_mg = weighted_operating_cost(weighted.capacity, weighted.assigned, carbon, signal)
        switching_mg = schedule_cost(weighted.capacity, weighted.assigned, carbon).switching
        co2_kg = (operating_mg + switching_mg) / 1e6  # Wh x g/kWh = mg
    node_hours = max(node_hours, busy_node_hours)  # the solver's last digits: never below the work itself
    return TwinBound(
        deadline_slots=deadline_slots,
        node_hours=node_hours,
        cost_usd=node_hours * config.price_per_node_hour,
        energy_kwh=max(energy_wh, busy_energy_wh) / 1000.0,
        co2_kg=co2_kg,
        busy_node_hours=busy_node_hours,
    )


def _positive_seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} must be a finite number > 0 (seconds), got {value!r}")
    return float(value)


def _signal(g_per_kwh: object, n_slots: int, horizon: int) -> np.ndarray:
    """gCO2/kWh over the horizon, shape (horizon,): as given, or the window's padded with zeros."""
    try:
        values = np.asarray(g_per_kwh, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"g_per_kwh must be an array of numbers (gCO2/kWh), got {type(g_per_kwh).__name__}: {exc}") from None
    if values.shape not in ((horizon,), (n_slots,)):
        raise ConfigError(f"g_per_kwh must have shape ({horizon},) (n_slots + D) or ({n_slots},) (n_slots), one gCO2/kWh per slot, got {values.shape}")
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
    if bad.size:
        t = int(bad[0])
        raise ConfigError(f"g_per_kwh must be a finite number >= 0 (gCO2/kWh) in every slot, got {float(values[t])!r} at slot {t}")
    return np.concatenate([values, np.zeros(horizon - values.shape[0])])
