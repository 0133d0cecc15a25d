"""Hold: scale out when the deadlines force it, scale in lazily, with a hold time learned from the load.

The deferral paper's online algorithms (VFW §III, GCP §IV) set x_t = m_t: they never keep a server
on with nothing to run. The offline optimum, LP (3), does: at D = 0 its whole saving over follow
comes from servers held on through short valleys. Hold separates the two directions.

Each slot t, with y the queued work by slots to its deadline (uniform deadline D):

1. **Scale out only when forced.** r_t = max_j Y_j/(j+1) (Y the prefix sums of y) is the lowest
   capacity that, held flat, runs every queued unit by its deadline: GCP-OPT (7)'s first slope,
   which is GCP-U's m_t (:func:`autoscaler.core.policies.gcp.flat_capacity`).
2. **Scale in lazily.** m_t = max(r_t, min(m_{t-1}, H_t)): a server is never switched on for the
   hold level H_t, only kept; if r_t >= m_{t-1} this is m_t = r_t.
3. **Held servers work early.** x_t = min(m_t, queued work), earliest deadline first; with e1 = 0
   it costs nothing and makes later slots lighter.

**Why hold at all (ski rental).** Switching a server off and on again costs 2*beta; keeping it idle
costs e0 per slot. Holding it through a valley of g slots pays exactly when g < 2*beta/e0, the
break-even W = ceil(2*beta/e0) slots (24 at the paper's e0 = 1, beta = 12). Online the valley's
length is unknown: holding each capacity level for W slots after it was last needed is the
deterministic 2-competitive rule, and holding it with the survival function
F(g) = (e - e^{g/W})/(e - 1) (the randomized rule, in expectation over fractional levels) is
e/(e-1)-competitive. A level is "last needed" g slots ago when the need curve was at or above it then;
H_t = sum over levels of F(age of the level), computed on the staircase of the need's running maxima.

**What failed, and why a fixed rule cannot work.** A hold level taken as the 0.8-quantile of L over
the last W slots gets 0.90-0.92 of the offline saving on Workloads A and B at D = 2, but on a
three-day diurnal load (benchmarks/make_traces.py, diurnal-3d) it falls below GCP-U at D >= 4 (0.90
against 0.93 at D = 4, 0.92 against 0.965 at D = 8). There the offline optimum idles no server at all
for D >= 4: its saving over GCP-U comes from deferral only, since a level left behind by a slow
decline never returns within W slots, and every held slot is waste (the quantile rule idled 2,846
server-slots to save 561 of switching at D = 8). Noise peaks in raw L, which deferral absorbs,
keep levels "needed", and the quantile lags the decline. On A and B the opposite holds: levels
return within W slots often, and holding pays. Measured, the best fixed hold time tau (hold a level
tau slots after its last need) is 3-6 slots on the diurnal load and 10-16 on A and B; the need
itself is best taken from raw L on some loads and from L smoothed over the D+1 slots a unit may
wait on others. So neither the time, the quantile nor the smoothing can be fixed in advance.

**The rule: learn the hold time from the load.** Hold runs a small set of ski-rental rules side by
side on the same load, each as a full shadow policy with its own queue (steps 1-3 above, its own
H_t), and costs what each would have paid: eq. (2) with its servers switched off now, i.e. 2*beta
per server switched on (charging the switch-off when it happens instead would favour the rules
still holding by beta/e0 slots at every valley). The set follows from beta/e0 and D only:

* deterministic holds tau = round(W*j/8), j = 0..8 (every eighth of the break-even),
* the randomized survival F above with break-even W, W/2 and W/4,

each on two need curves, raw L_t and L averaged over the last D+1 slots (the flat capacity a unit
can be spread over; that average schedule is itself feasible), plus "no hold" (GCP-U). Their
mixture, weighted by exp(-(cost_k - min cost)/(beta * mean L)) (exponential weights, Hedge: a
rule that has cost one more restart of the mean load than the best has weight 1/e), is run as one
more shadow, and the policy holds at the mixture's level as far as the guard below lets it. The
costs are summed since the state began; nothing is
forecast, and no constant is fitted to a trace (the grids above are the only choices;
benchmarks/bench_policies.py reports traces it was not tuned on).

**The guard: hold risks only what it can pay for.** The mixture is within Hedge's regret of its best
rule, and "no hold" is one of the rules, but that bound is in restarts of the mean load times the log
of the rule count: on valleys exactly W slots long (the ski-rental worst case, where any shorter hold
pays both the idle slots and the restart) the mixture's shadow fell 1.5 restarts of the mean load
behind GCP-U's before the old fall-back (engaging at one restart behind) did, and the policy kept
that loss: 305 on valleys-24 at D = 1, where the offline optimum saves 317 and GCP-U nothing. So the
policy costs itself (eq. 2, switched off now) against the GCP-U shadow,
G'_t = cost_hold - cost_gcpu + 2*beta*max(g_t - m_t, 0), g_t the shadow's m_t (the last term is what
scaling up to it would cost; e1 is counted on work released, the same for both). Each slot:

* the fall-back level m_f = max(r_t, min(m_{t-1}, g_t)) follows the shadow down and never scales out
  beyond r_t; it never raises G' (below);
* the mixture's level is played when its G' is no more than m_f's; otherwise only inside a hold: one
  begins when one more slot of it fits the budget B_t, which becomes its allowance, and it ends (the
  policy falls back, switching the held servers off) when G' would pass that allowance;
* B_t = min(2*beta*max L over the last W slots, min(beta*mean L, S_t)^+ + V_t^+), S_t GCP-U's saving
  over follow so far (its queued work charged e0 a unit) and V_t the mixture's shadow's lead over the
  GCP-U shadow: hold risks up to a restart of the mean load of what deferral has saved, plus what
  holding has been seen to earn.

A server the fall-back switches off is not switched on again unless r_t forces it (m_t <= max(r_t,
m_{t-1}) always), so the guard cannot make the cluster flap. What learning costs now: at D = 0 GCP-U
saves nothing over follow, so the first valleys are not held until a rule has been seen to earn; on
Workloads A and B the guard changes no schedule; on valleys-24 hold costs at most GCP-U's cost plus
beta*mean L and no more than follow; on bursty it is below GCP-U at D = 6 and 7 only (0.824 against
0.845 of the offline saving at D = 6); on square-12 at D = 1-5 (12-slot valleys) it gets 0.47-0.82 of
the offline saving, against 0.69-0.86 without the guard, the price of not holding the first valleys
(benchmarks/bench_policies.py).

**Guarantees.** Every deadline is met: m_t >= r_t, and r_t covers all queued work at a flat rate,
so the due work y_0 <= r_t runs now (C1), and x_t <= queued work (C2). m_t <= max(r_t, m_{t-1}), so
hold never scales out beyond what the deadlines force. With one deadline D, EDF is FIFO and the queue
is the newest work, so Y_j = max(0, A_{t-D+j} - C) (A cumulative arrivals, C work done);
C + max_j (A_j' - C)/(j+1) is non-decreasing in C and hold runs at least r_t, so by induction hold has
done at least as much work as the GCP-U shadow at every slot, and its r_t <= g_t. Hence:

* under a server cap M hold is feasible whenever GCP-U is: r_t <= g_t <= M, and m_t <= max(r_t, m_{t-1}) <= M;
* cost(hold) <= cost(GCP-U) + max_t B_t <= cost(GCP-U) + 2*beta*max_t L_t (eq. 2, every server
  switched off after the horizon). The fall-back never raises G': m_f <= g_t; if m_{t-1} <= g_{t-1}, G'
  changes by e0*(m_f - g_t) + 2*beta*((fall of m) - (fall of g)) <= 0, since m only falls onto g_t; if
  m_{t-1} > g_{t-1} it lands on g_t or below with no switch-on. A mixture level is played only if it
  does not raise G' or keeps it within an allowance <= B_t; and after the horizon g = 0, so G' is the
  cost difference. With e0 = 0 (hold for ever) or beta = 0 (no hold) hold costs at most GCP-U's: its
  switch-ons are the running maximum of r_t <= g_t, its servers r_t <= g_t.

Not guaranteed: cost(hold) <= cost(follow). S_t is GCP-U's saving so far, not its final one, and
GCP-U may itself cost more than follow; hold exceeds GCP-U by at most the budget it spent, at most
beta*mean L beyond what the mixture had been seen to earn. Tested: valleys at the break-even for
several D and beta (hold <= follow, and <= GCP-U + 2*beta*max L), and random loads (hold <= GCP-U +
2*beta*max L).

**In the daemon under "node-seconds"** (``ControllerConfig.work_model``; the paper's job-slots keep
the rule above slot for slot, as ``autoscaler replay`` plans): each job is planned to the slot it is
due in, its start-by slot less its nodes' lead time; the books follow the cluster (the work released
ahead of x_t onto whole nodes is taken off the queue, :meth:`HoldState.with_work_done`); and
``keep_busy``: m_t = max(r_t, min(m_{t-1}, queued work)), every server with queued work kept and
none kept idle. With e0 and e1 the same in every slot, work run early on a node that is on costs what
it would later, while the learned hold level, played on an empty queue, kept the 12-hour mean
load's nodes idle for hours after the last job (diurnal-bursty-2d at 12 h); with a restart worth 1.1
idle slots under objective energy, holding idle nodes pays for one-slot valleys at most. Measured on
the cluster twin (``autoscaler compare``, docs/results.md, "What an operator pays").

The known future (units of already-submitted jobs in later slots, which the daemon holds) was tried
with an earlier version of this rule as a certain lower bound on the need within W slots: on A, B,
six days resampled from their hours and diurnal-3d it changed no schedule (long jobs' known units
stay below the level the recent load already holds), so it is not used.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from autoscaler.core.cost import pad_to_horizon
from autoscaler.core.errors import ConfigError, InfeasibleError, ScheduleError
from autoscaler.core.model import CostParams, Schedule
from autoscaler.core.policies.gcp import flat_capacity

NAME = "hold"
"""What the lazy scale-in policy is called in every output."""

RAW, SMOOTHED, NO_HOLD = 0, 1, 2
"""Need curves an expert rule holds on: raw L_t, L averaged over D+1 slots, or none (GCP-U)."""

_THRESHOLD_STEPS = 8
_RANDOMIZED_SCALES = (1.0, 0.5, 0.25)


MAX_BREAK_EVEN_SLOTS = 2016
"""Longest hold learned: a week of 5-minute slots. The state keeps W slots of load history and each
rule is costed over W+1 ages, so a larger 2*beta/e0 is cut to this (holding a week is then the longest rule)."""


def break_even_slots(params: CostParams) -> int | None:
    """W = ceil(2*beta/e0), at most MAX_BREAK_EVEN_SLOTS: holding an idle server longer than W slots
    costs more than a restart.

    None when e0 = 0 (an idle server is free: hold for ever); 0 when beta = 0 (a restart is free).
    """
    if params.e0 == 0:
        return None
    ratio = 2.0 * params.beta / params.e0
    return MAX_BREAK_EVEN_SLOTS if not ratio < MAX_BREAK_EVEN_SLOTS else int(math.ceil(ratio - 1e-9))


@dataclass(frozen=True, eq=False)
class Experts:
    """The ski-rental rules hold learns among, for a break-even of W slots.

    ``need``: which need curve each rule holds on (RAW, SMOOTHED, NO_HOLD), shape (E,).
    ``survival``: F_k(g), the share of a level last needed g slots ago that rule k keeps,
    shape (E, W+1). ``labels``: one name per rule, for reports.
    """

    need: np.ndarray
    survival: np.ndarray
    labels: tuple[str, ...]


@lru_cache(maxsize=64)
def experts(window_slots: int, break_even: float) -> Experts:
    """The rule set for a break-even of ``break_even`` = 2*beta/e0 slots, W = ``window_slots`` = ceil of it."""
    ages = np.arange(window_slots + 1, dtype=float)
    rules: list[tuple[int, np.ndarray, str]] = []
    for need, name in ((RAW, "L"), (SMOOTHED, "mean L")):
        for tau in sorted({round(window_slots * j / _THRESHOLD_STEPS) for j in range(_THRESHOLD_STEPS + 1)}):
            rules.append((need, (ages <= tau).astype(float), f"{name}, hold {tau} slots"))
        for scale in _RANDOMIZED_SCALES:
            horizon = break_even * scale
            # Ages past the horizon survive 0; clipped first, so a horizon of a tiny fraction of a
            # slot (a boot of a second) overflows no exponential.
            survival = np.where(ages < horizon, (math.e - np.exp(np.minimum(ages, horizon) / max(horizon, 1e-12))) / (math.e - 1), 0.0)
            survival[0] = 1.0  # a level needed now is kept whatever the rule
            rules.append((need, survival, f"{name}, randomized, break-even {horizon:g} slots"))
    rules.append((NO_HOLD, np.zeros(window_slots + 1), "no hold (GCP-U)"))
    need = np.array([r[0] for r in rules])
    survival = np.array([r[1] for r in rules])
    need.setflags(write=False)
    survival.setflags(write=False)
    return Experts(need=need, survival=survival, labels=tuple(r[2] for r in rules))


@dataclass(frozen=True, eq=False)
class HoldState:
    """What hold carries between slots.

    Rows of ``queue`` and ``previous``: the E expert rules, then the mixture of them (its own
    shadow), then the policy itself. ``queue``: unassigned work by slots to its deadline, shape
    (E+2, D+1), in servers' worth. ``previous``: each row's m_{t-1}, shape (E+2,). ``cost``: what
    each rule, the mixture, the policy and follow have cost so far, shape (E+3,): eq. (2) with every
    server that is on switched off now (each switch-on is charged 2*beta). ``recent_load``: L of the last slots, newest
    first, shape (max(W, D)+1,). ``recent_smoothed``: the D+1-slot mean of L, newest first, shape
    (W+1,). ``load_sum`` and ``slots``: sum of L and slots seen (the mean load). ``holding``: True
    while the policy is inside a hold the guard allowed; ``allowance``: that hold's ceiling on G'. With e0 = 0 or beta = 0 nothing is learned
    (one row, no costs).
    """

    queue: np.ndarray
    previous: np.ndarray
    cost: np.ndarray
    recent_load: np.ndarray
    recent_smoothed: np.ndarray
    load_sum: float = 0.0
    slots: int = 0
    holding: bool = False
    allowance: float = 0.0

    @classmethod
    def empty(cls, deadline_slots: int, params: CostParams, queue_slots: int | None = None) -> "HoldState":
        """A state for D and beta/e0 whose queue holds work due within ``queue_slots`` slots (None: D;
        the daemon plans each job to its own start-by slot, up to ``max_deadline_slots``)."""
        shapes = _shapes(deadline_slots, params.e0, params.beta, deadline_slots if queue_slots is None else queue_slots)
        return cls(**{name: np.zeros(shape) for name, shape in shapes.items()})

    @property
    def capacity(self) -> float:
        """m_{t-1} of the policy."""
        return float(self.previous[-1])

    def restarted(self) -> "HoldState":
        """This state with every row's queue emptied and its servers off (``queue`` and ``previous``
        zero, no hold under way), what it learned kept: the rules' costs, the load history and the
        mean load. For work rebuilt from the jobs after slots went undecided: the queues held work
        of jobs that may have finished since, while the load it learned from still describes the
        cluster (a skipped slot would otherwise cost hold all it has learned)."""
        return HoldState(
            queue=np.zeros_like(self.queue),
            previous=np.zeros_like(self.previous),
            cost=self.cost,
            recent_load=self.recent_load,
            recent_smoothed=self.recent_smoothed,
            load_sum=self.load_sum,
            slots=self.slots,
        )

    def with_work_done(self, units: float) -> "HoldState":
        """This state with ``units`` (server-slots; math.inf: all) more of the policy's own queued work
        run, earliest deadline first, as EDF runs it: what the cluster ran beyond the policy's x_t (the
        daemon releases whole jobs onto whole nodes, ceil(m_t) of them), so that its r_t follows the
        work still queued. The rules' and the mixture's shadow queues are left as they are."""
        if units <= 0.0 or not self.queue.size:
            return self
        queue = self.queue.copy()
        queue[-1] = run_earliest(queue[-1], units)
        return dataclasses.replace(self, queue=queue)

    def to_json(self) -> dict:
        return {
            "queue": self.queue.tolist(),
            "previous": self.previous.tolist(),
            "cost": self.cost.tolist(),
            "recent_load": self.recent_load.tolist(),
            "recent_smoothed": self.recent_smoothed.tolist(),
            "load_sum": self.load_sum,
            "slots": self.slots,
            "holding": self.holding,
            "allowance": self.allowance,
        }

    @classmethod
    def from_json(cls, document: dict) -> "HoldState":
        """Rebuild a state saved by :meth:`to_json`; :func:`hold_step` checks that it fits D and beta/e0."""
        previous = np.array(document["previous"], dtype=float)
        return cls(
            queue=np.array(document["queue"], dtype=float).reshape(previous.shape[0], -1),
            previous=previous,
            cost=np.array(document["cost"], dtype=float).reshape(-1),
            recent_load=np.array(document["recent_load"], dtype=float),
            recent_smoothed=np.array(document["recent_smoothed"], dtype=float),
            load_sum=float(document["load_sum"]),
            slots=int(document["slots"]),
            holding=bool(document.get("holding", False)),
            allowance=float(document.get("allowance", 0.0)),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HoldState):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]


def run_earliest(queue: np.ndarray, units: float) -> np.ndarray:
    """``queue`` (work by slots to its deadline, shape (K+1,)) after ``units`` of it run, earliest
    deadline first (math.inf: all of it); what is left of each prefix is max(Y_j - units, 0)."""
    return np.diff(np.maximum(np.cumsum(queue) - units, 0.0), prepend=0.0)


@lru_cache(maxsize=64)
def _shapes(deadline_slots: int, e0: float, beta: float, queue_slots: int) -> dict[str, tuple[int, ...]]:
    """Shapes of HoldState's arrays for D, beta/e0 and the queue's deadlines (0..queue_slots >= D)."""
    params = CostParams(e0=e0, beta=beta)
    window = break_even_slots(params)
    n_experts = len(experts(window, _break_even(params)).labels) if window else 0
    rows = n_experts + 2 if n_experts else 1
    window = window or 0
    return {
        "queue": (rows, max(queue_slots, deadline_slots) + 1),
        "previous": (rows,),
        "cost": (n_experts + 3 if n_experts else 0,),
        "recent_load": (max(window, deadline_slots) + 1,),
        "recent_smoothed": (window + 1,),
    }


def _break_even(params: CostParams) -> float:
    """2*beta/e0 in slots, cut like :func:`break_even_slots` (the randomized rules' horizon)."""
    return min(2.0 * params.beta / params.e0, float(MAX_BREAK_EVEN_SLOTS)) if params.e0 > 0 else math.inf


def _hold_levels(history: np.ndarray, survival: np.ndarray) -> np.ndarray:
    """H for each rule: sum over the need's level bands of F(age); ``history`` newest first, shape (W+1,)."""
    running_max = np.maximum.accumulate(history)
    bands = np.diff(running_max, prepend=0.0)  # levels (max over g-1 slots, max over g slots] were needed g slots ago
    return survival @ bands


def hold_step(
    state: HoldState, load: float, deadline_slots: int, params: CostParams, keep_busy: bool = False
) -> tuple[float, float, HoldState]:
    """One slot of hold: returns (m_t, x_t, new state), servers; x_t <= m_t.

    ``keep_busy`` (the daemon under "node-seconds"): no server is switched off while it has queued
    work to run, m_t >= min(m_{t-1}, the queued work): with e0 and e1 the same in every slot, work run
    early on a server that is on costs what it would cost later, and a server switched off now may
    have to be switched on again for it (on a 12 h deadline, the nights' rises). Like the hold level
    it only keeps servers on, never switches one on, so m_t <= max(r_t, m_{t-1}) still holds.

    ``load``: L_t, the work released in this slot (servers' worth), due within D slots; or the work
    by slots to its deadline, L_{d,t} for d = 0..K, shape (K+1,), for a state whose queue holds
    deadlines up to K (``HoldState.empty(..., queue_slots=K)``): the daemon's plan, where each job's
    units are due by its own start-by slot. D still sets the need's smoothing (the D+1-slot mean).
    Slots before the first have L = 0. Raises InfeasibleError when the deadlines need more than
    ``params.max_servers`` (M), ConfigError for a negative or non-finite L_t (or a vector of
    another length than the queue's), and ScheduleError if the state was made for another D or beta/e0.
    """
    queue_slots = state.queue.shape[-1] - 1 if state.queue.ndim == 2 else deadline_slots
    _check_shapes(state, deadline_slots, params, queue_slots)
    arrivals = _arrivals(load, queue_slots, deadline_slots)
    load = float(arrivals.sum())
    prefix = np.cumsum(_advance_queue(state.queue, arrivals), axis=1)
    forced = _forced_by_deadlines(prefix, params)
    window = break_even_slots(params)
    recent_load = np.concatenate([[load], state.recent_load[:-1]])
    slots = state.slots + 1
    load_sum = state.load_sum + load
    # One restart of the mean load: the unit the weights and the guard's budget count cost in.
    restart = params.beta * load_sum / slots
    hold, recent_smoothed = _hold_targets(state, recent_load, deadline_slots, params, window, restart)
    capacity = np.maximum(forced, np.minimum(state.previous, hold))
    assigned = np.minimum(capacity, prefix[:, -1])
    cost, holding, allowance = state.cost, state.holding, state.allowance
    step_cost: np.ndarray | None = None  # eq. (2) of this slot, each row; learned only with a window
    if window:
        switched_on = np.maximum(capacity - state.previous, 0.0)
        step_cost = params.e0 * capacity + params.e1 * assigned + 2 * params.beta * switched_on
        follow_cost = state.cost[-1] + (params.e0 + params.e1) * load + 2 * params.beta * max(load - state.recent_load[0], 0.0)
        fallback, holding, allowance = _guard(
            state, capacity, assigned, step_cost, prefix, forced, recent_load, follow_cost, restart, params
        )
        if fallback is not None:
            _play(fallback, capacity, assigned, step_cost, prefix, state.previous, params)
    if keep_busy:
        # The servers kept are those with queued work to run: none is kept idle, none switched on.
        kept = max(float(forced[-1]), min(float(state.previous[-1]), float(prefix[-1, -1])))
        if kept != capacity[-1]:
            _play(kept, capacity, assigned, step_cost, prefix, state.previous, params)
    if step_cost is not None:
        cost = np.concatenate([state.cost[:-1] + step_cost, [follow_cost]])
    # EDF: x_t runs the earliest deadlines first; what is left of each prefix is max(Y_j - x_t, 0).
    left = np.maximum(prefix - assigned[:, None], 0.0)
    new_state = HoldState(
        queue=np.diff(left, axis=1, prepend=0.0),
        previous=capacity,
        cost=cost,
        recent_load=recent_load,
        recent_smoothed=recent_smoothed,
        load_sum=load_sum,
        slots=slots,
        holding=holding,
        allowance=allowance,
    )
    return float(capacity[-1]), float(assigned[-1]), new_state


def _check_shapes(state: HoldState, deadline_slots: int, params: CostParams, queue_slots: int) -> None:
    """Raise ScheduleError if ``state`` was made for another D or beta/e0 (its arrays' shapes)."""
    for name, shape in _shapes(deadline_slots, params.e0, params.beta, max(queue_slots, deadline_slots)).items():
        if getattr(state, name).shape != shape:
            raise ScheduleError(
                f"hold: the state's {name} has shape {getattr(state, name).shape}, "
                f"not {shape} as D = {deadline_slots} and 2*beta/e0 need"
            )


def _arrivals(load, queue_slots: int, deadline_slots: int) -> np.ndarray:
    """L_t by slots to its deadline, shape (queue_slots+1,): a number is all due within D
    (``deadline_slots``). ConfigError for a negative or non-finite L_t, or a vector of another length."""
    arrivals = np.asarray(load, dtype=float)
    if arrivals.ndim == 0:
        arrivals = np.zeros(queue_slots + 1)
        arrivals[deadline_slots] = float(load)
    if arrivals.shape != (queue_slots + 1,) or not (np.all(np.isfinite(arrivals)) and np.all(arrivals >= 0)):
        raise ConfigError(f"hold: L_t must be a finite number >= 0 or {queue_slots + 1} of them by deadline, got {load!r}")
    return arrivals


def _advance_queue(queue: np.ndarray, arrivals: np.ndarray) -> np.ndarray:
    """Every row's queue one slot on (each unit a slot closer to its deadline) with ``arrivals`` added,
    shape of ``queue``."""
    advanced = np.empty_like(queue)
    advanced[:, :-1] = queue[:, 1:]
    advanced[:, -1] = 0.0
    advanced += arrivals
    return advanced


def _forced_by_deadlines(prefix: np.ndarray, params: CostParams) -> np.ndarray:
    """r_t of every row, shape (rows,), from its queue's prefix sums ``prefix``, shape (rows, K+1)
    (GCP-OPT (7)'s first slope); InfeasibleError when the policy's is more than M."""
    forced = flat_capacity(prefix)
    if params.max_servers is not None and forced[-1] > params.max_servers * (1 + 1e-12) + 1e-9:
        raise InfeasibleError(
            f"hold: {forced[-1]:.6g} servers are needed to meet the deadlines, more than M = {params.max_servers:g}",
            "infeasible",
        )
    return forced


def _hold_targets(
    state: HoldState, recent_load: np.ndarray, deadline_slots: int, params: CostParams, window: int | None, restart: float
) -> tuple[np.ndarray, np.ndarray]:
    """(H_t of every row, shape (rows,), the new D+1-slot means of L, shape (W+1,)): each rule's hold
    level on its need curve, and the mixture's (and the policy's) by the rules' exponential weights
    (``restart``: the cost unit they count in); every server kept (inf) when e0 = 0, none when beta = 0."""
    if window is None:  # e0 = 0: idle servers are free, so none is ever switched off
        return np.full(state.queue.shape[0], np.inf), state.recent_smoothed
    if window == 0:  # beta = 0: restarts are free, so no idle server is kept
        return np.zeros(state.queue.shape[0]), state.recent_smoothed
    rules = experts(window, _break_even(params))
    n_rules = len(rules.labels)
    recent_smoothed = np.concatenate([[float(recent_load[: deadline_slots + 1].mean())], state.recent_smoothed[:-1]])
    by_need = np.stack([_hold_levels(recent_load[: window + 1], rules.survival), _hold_levels(recent_smoothed, rules.survival)])
    rule_hold = np.where(rules.need == RAW, by_need[0], np.where(rules.need == SMOOTHED, by_need[1], 0.0))
    rule_cost = state.cost[:n_rules]
    weights = np.exp(-(rule_cost - rule_cost.min()) / restart) if restart > 0 else np.ones_like(rule_cost)
    mixed = float(weights @ rule_hold) / float(weights.sum())
    return np.concatenate([rule_hold, [mixed, mixed]]), recent_smoothed


def _guard(
    state: HoldState,
    capacity: np.ndarray,
    assigned: np.ndarray,
    step_cost: np.ndarray,
    prefix: np.ndarray,
    forced: np.ndarray,
    recent_load: np.ndarray,
    follow_cost: float,
    restart: float,
    params: CostParams,
) -> tuple[float | None, bool, float]:
    """The guard (module docstring) on the policy's m_t, the mixture's level ``capacity[-1]``: (the
    fall-back level m_f to play instead, or None to play the mixture's; whether a hold is under way;
    its allowance). Every row's ``capacity``, ``assigned`` and ``step_cost`` (eq. 2 this slot), shape
    (rows,); ``prefix``, shape (rows, K+1); ``forced``, r_t of each row; ``recent_load``, L newest
    first; ``follow_cost``, follow's cost so far; ``restart``, a restart of the mean load. Only with a
    break-even window (e0 > 0, beta > 0)."""
    window = break_even_slots(params)
    n_rules = len(experts(window, _break_even(params)).labels)
    no_hold = n_rules - 1
    # Hold's regret against the GCP-U shadow, G' = regret(m_t), may rise above what falling back would
    # leave it at only within an allowance <= the budget, fixed when a hold begins.
    gcp_u = float(capacity[no_hold])
    gcp_u_cost = state.cost[no_hold] + step_cost[no_hold] + params.e1 * (prefix[no_hold, -1] - assigned[no_hold])
    # GCP-U's saving over follow so far, its queued work charged e0 a unit (what it must still pay).
    saving = follow_cost - gcp_u_cost - params.e0 * (prefix[no_hold, -1] - assigned[no_hold])
    # The mixture's shadow's lead over the GCP-U shadow: what holding has been seen to earn.
    lead = gcp_u_cost - (state.cost[n_rules] + step_cost[n_rules] + params.e1 * (prefix[n_rules, -1] - assigned[n_rules]))
    budget = min(2 * params.beta * float(recent_load[: window + 1].max()), max(0.0, min(restart, saving)) + max(0.0, lead))

    def regret(m_t: float) -> float:
        own = state.cost[-2] + params.e0 * m_t + params.e1 * prefix[-1, -1] + 2 * params.beta * max(m_t - state.previous[-1], 0.0)
        return own - gcp_u_cost + 2 * params.beta * max(gcp_u - m_t, 0.0)

    fallback = max(forced[-1], min(state.previous[-1], gcp_u))  # follow the GCP-U shadow down, never up beyond r_t
    wanted, safe = regret(capacity[-1]), regret(fallback)
    if wanted > safe:  # the mixture's level risks more than never holding: only within an allowance
        if state.holding and wanted <= state.allowance:
            return None, True, state.allowance
        if not state.holding and safe + params.e0 * (capacity[-1] - fallback) < budget:
            return None, True, budget
        return fallback, False, 0.0
    return None, False, 0.0


def _play(
    m_t: float,
    capacity: np.ndarray,
    assigned: np.ndarray,
    step_cost: np.ndarray | None,
    prefix: np.ndarray,
    previous: np.ndarray,
    params: CostParams,
) -> None:
    """Set the policy's row (the last) of ``capacity`` to ``m_t``, of ``assigned`` to the x_t it runs
    (EDF, at most its queued work) and of ``step_cost`` (None: not kept) to eq. (2) for them."""
    capacity[-1] = m_t
    assigned[-1] = min(m_t, float(prefix[-1, -1]))
    if step_cost is not None:
        step_cost[-1] = params.e0 * m_t + params.e1 * assigned[-1] + 2 * params.beta * max(m_t - float(previous[-1]), 0.0)


def forced_capacity(state: HoldState, load, deadline_slots: int | None = None) -> tuple[float, float, int]:
    """r_t of the slot :func:`hold_step` is about to decide from ``state`` with L_t = ``load`` (a
    number due within D, ``deadline_slots``, or the work by deadline as hold_step takes it), and
    what sets it: (r_t, Y_j, j+1), the work (servers' worth) due within j+1 slots at the maximum of
    Y_j/(j+1); (0.0, 0.0, 0) when nothing is queued. The policy's own queue; hold_step computes the
    same r_t. For explaining a decision; it changes no number.
    """
    arrivals = np.asarray(load, dtype=float)
    if arrivals.ndim == 0:
        arrivals = np.zeros(state.queue.shape[-1])
        arrivals[state.queue.shape[-1] - 1 if deadline_slots is None else deadline_slots] = float(load)
    queue = np.concatenate([state.queue[-1, 1:], [0.0]]) + arrivals
    prefix = np.cumsum(queue)
    if prefix[-1] <= 0.0:
        return 0.0, 0.0, 0
    rates = prefix / np.arange(1, prefix.shape[0] + 1, dtype=float)
    j = int(np.argmax(rates))
    return float(rates[j]), float(prefix[j]), j + 1


def leading_rule(state: HoldState, params: CostParams) -> str:
    """The rule with the least cost so far (what hold's weights lean on most), or why nothing is learned."""
    window = break_even_slots(params)
    if not window:
        return "hold for ever (e0 = 0)" if window is None else "no hold (beta = 0)"
    labels = experts(window, _break_even(params)).labels
    return labels[int(np.argmin(state.cost[: len(labels)]))]


def plan(load: np.ndarray, deadline_slots: int, params: CostParams) -> Schedule:
    """Hold over the horizon window + D, built from :func:`hold_step` slot by slot.

    ``load``: L_t, shape (n_slots,); returns a Schedule over n_slots + D slots with x_t <= m_t.
    Raises InfeasibleError when M is too small for a deadline.
    """
    released = pad_to_horizon(load, deadline_slots)
    state = HoldState.empty(deadline_slots, params)
    capacity = np.zeros(released.shape[0])
    assigned = np.zeros(released.shape[0])
    started = time.perf_counter()
    for t, value in enumerate(released):
        capacity[t], assigned[t], state = hold_step(state, value, deadline_slots, params)
    elapsed_ms = (time.perf_counter() - started) * 1000
    return Schedule(
        policy=NAME,
        capacity=capacity,
        assigned=assigned,
        solve_ms_per_slot=elapsed_ms / max(1, released.shape[0]),
        notes={
            "leading_rule": leading_rule(state, params),
            "holding": state.holding,
            "break_even_slots": break_even_slots(params),
        },
    )
