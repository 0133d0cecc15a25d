"""Carbon- and price-aware hold: defer work into the slots where the grid is clean or power is cheap.

The deferral paper prices every server-slot the same (e0), so moving work inside its deadline can
only smooth m_t. With a per-slot cost signal s_t (a carbon intensity or a price) the operating cost of
slot t becomes w_t*(e0*m_t + e1*x_t), w_t = s_t / (a reference level of s: the whole horizon's
mean offline, the last day's mean online), while switching stays beta per server: eq. (3) with e0_t = w_t*e0 and e1_t = w_t*e1. Offline this
is still LP (3) (:func:`autoscaler.core.policies.offline.plan` with ``slot_cost``); online it is
GCP-OPT (7) with a time-varying operating cost, a small LP per slot.

**The rule (hold+carbon).** Each slot t, with y the queued work by slots to its deadline (the
newest released L_t at D slots), hold+carbon solves, over the window t..t+3D:

    min  sum_k w_k*(e0*m_k + e1*x_k) + beta*sum_k |m_k - m_{k-1}|,   m_{-1} = m_{t-1}
    s.t. every queued unit runs by its deadline (C1), no unit before it is released (C2),
         0 <= x_k <= m_k <= M,

where the work released in each of t+1..t+2D is taken as an exponentially weighted mean of L with
a time constant of a quarter of hold's break-even W = 2*beta/e0, within [1, D+1]
(:func:`arrival_time_constant`; the deadlines of that work fall inside the window, so the window
ends with nothing queued), and w_k comes from the signal as known at t: s_t itself, then the
forecast where one is given (as issued: only what was issued by t), else the blend of
:mod:`autoscaler.core.forecast` (yesterday, last week, the value now and the day's mean, weighted by
their recent errors) (:meth:`SlotSignal.forecast_at`), hedged (below), divided by the mean of the
last day's signal (:meth:`SlotSignal.reference`), so that a restart costs beta server-slots at the
day's mean. Only m_t and x_t are played (receding
horizon). The LP takes the forecast arrivals as certain; so that it does not keep servers on for
work that may not come, m_t keeps no more servers idle than hold does in the same slot
(m_t - x_t <= hold's m_t - x_t; a bound of hold's m_t itself once let it keep 1,600 server-slots idle
on Workload A under a signal with one clean hour a day, 1.0 % CO2 cut against hold's 7.4 %, now 8.4 %).

Why the forecast arrivals, and why a short memory: without them the LP sees only the queue, and a
server switched on for a clean slot pays 2*beta for one short batch, so it hardly defers (on Workload
A at a 6-hour deadline it cut follow's emissions by 0.7 %, against the carbon-aware offline LP's 22 %).
With arrivals over the next D slots at the mean L of the last D+1 it kept 0.56-0.67 of the offline
cut, over the next 2D slots 0.68-0.95, and with the true future arrivals 1.03 (the offline LP also
pays for switching). A mean over D+1 slots lags a rising load: the LP under-forecasts it, defers, and
the deferred work then has to run in dirty slots before its deadline. With the time constant at a
quarter of the break-even (6 slots at beta = 12) it keeps 0.85-1.01 on Workload A at a 6-hour
deadline over four phases of a daily cycle, and 0.80-1.08 on three-day loads
(benchmarks/bench_carbon.py). Tried and not kept: persistence of the load (yesterday's L around the
same slot, once a day has been seen): it helped the three-day diurnal load and hurt Workload A, whose
bursts do not come again the next day.

**Tried and not kept: a guard.** At a 1-hour deadline the window LP re-plans every slot from a
forecast of a bursty load and moves m_t by a server or two where hold keeps it flat (on Workload A:
5,300 of switching against hold's 2,000, for no less CO2). A guard that ran the LP's rule as a shadow
beside hold, costed both under the signal (eq. 2 with w_t, beta = 12 included) and played hold's
decision while the shadow was more than four restarts of the mean load behind, bounded that; but on
a signal whose days differ (deploy/carbon-daily.csv) it fell back early, while the mean load and so
its margin were small, and the mix of the two rules emitted more than either (-1.8 % against follow
at 6 hours, where the LP's rule alone cuts 11.4 %): judged by eq. (2) the LP's rule was behind, judged
by emissions it was far ahead. So there is no guard, and at short deadlines hold+carbon costs more
than hold in eq. (2).

**The hedge.** Each forecast value comes with an error band: the root mean square error the forecast
has made lately that far ahead (:class:`autoscaler.core.forecast.Forecast`). The LP decides by
:func:`hedged_window`: a later slot's forecast counts only where it differs from now by more than
HEDGE_BANDS = 3 bands (else it is taken as the value now), so only a gain that beats the forecast's
own recent errors moves work. When nothing is
left (every difference inside its bands) the slot is the short deferral, mode "hedged": hold at
D' = min(D, max(W, 2 h)) (:func:`short_deadline_slots`, W = 2*beta/e0 its break-even) on the same
L_t, made feasible for hold+carbon's own queue as the flat case below. Under a forecast that has been
wrong hold+carbon defers no further than energy needs: carbon-blind hold at the full D runs the work
as late as the deadlines allow, into whatever the grid is then (on real grids its worst day at 12 h
was 18.6 % above follow), while at 1-2 h no run on a real grid tried was above follow. Measured on the
French grid of 2020 (benchmarks/bench_carbon_real.py, 12 days over the year): without a hedge it
emitted up to 6.2 % more than carbon-blind hold at 6 hours (persistence: 8.4 %); with it, at most
0.4 % at any of 1, 2, 6 and 12 hours. What it cannot do is act on a forecast that is not good enough:
there the medians are hold's (docs/concepts.md, "On a real grid").

**The regret cap.** hold+carbon keeps the books of what its decisions cost under the signal, s_t
x (e0*m_t + e1*x_t + beta*|m_t - m_{t-1}|) with s_t the value of the slot decided, against what follow
(m = x = L_t) would have, over the last 3D+1 slots (:class:`CarbonState`). While its excess over
follow is more than ``max_regret`` of follow's (``[carbon] max_regret``), a slot is the short
deferral too, mode "capped". The cap looks back: work already deferred still runs where it was
planned, so a day can end above follow by more than the cap, by what was deferred before the books
crossed it; so it is off by default (:data:`DEFAULT_MAX_REGRET` says what it did when on).

**When the signal does not vary, this is hold.** hold+carbon runs hold (:mod:`autoscaler.core.policies.hold`)
beside it on the same L_t, always. When the window's signal is flat (max - min <= 1e-9 of the max),
or there is no signal for the slot (a daemon whose feed failed or went stale), it plays hold's
decision, made feasible for its own queue: m_t = max(r_t, min(hold's m_t, queued work + hold's idle
m_t - x_t)), x_t = min(m_t, queued work), r_t the flat capacity of the queue (GCP-U's). From the
first slot under a flat signal the two queues are the same, r_t <= hold's m_t and the queued work plus
hold's idle is at least hold's m_t, so the schedule is hold's, number for number: a constant signal
changes nothing.

**Guarantees.** Every deadline is met: the LP runs the work due now (C1 at k = 0 holds for the
queue whatever the forecast), and the fall-back runs at least r_t. Under a cap M, a window that the
forecast arrivals make infeasible is solved again for the queue alone, which is feasible whenever the
queue can meet its deadlines under M; otherwise InfeasibleError, as hold. A plan that runs at M now
for forecast work gives way to the queue-alone plan when that runs fewer servers. The window LP is
solved on a grid (:func:`autoscaler.core.policies.carbon_lp.window_groups`): slots 0..D one by one,
the later ones in blocks where the forecast's release and due rates are constant, so the plan played
is a plan of the slots; the grid LP is infeasible exactly when the slot LP is, so the guarantees
above hold unchanged. Up to D = 12 the grid is the slots; past it the plan's cost is never below the
slot LP's optimum, equal to it when every change of the signal past D is a block's edge, and was
within 0.0002 % of it on Workload A at D = 144. Nothing bounds the emissions against hold or follow
for sure: the hedge bounds what a forecast that has been wrong lately can move, not what a forecast
that was right lately and is wrong today moves.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np

from autoscaler.core import defaults
from autoscaler.core.cost import pad_to_horizon
from autoscaler.core.errors import ConfigError, InfeasibleError
from autoscaler.core.model import CostParams, Schedule
from autoscaler.core.policies.carbon_lp import NAME, solve_window
from autoscaler.core.policies.gcp import flat_capacity
from autoscaler.core.policies.hold import HoldState, break_even_slots, hold_step, run_earliest
from autoscaler.core.slot_signal import SlotSignal

__all__ = [
    "DEFAULT_MAX_REGRET", "NAME", "CarbonDecision", "CarbonState", "SlotSignal", "carbon_step", "plan", "short_deadline_slots", "solve_window", "window_slots",
]  # fmt: skip

FLAT_RTOL = 1e-9
"""A window whose signal varies by no more than this share of its largest value is flat."""

MODES = ("carbon", "flat", "no_signal", "hedged", "capped")
"""How a slot was decided: the window LP on the signal; hold's decision because the signal was flat;
hold's decision because there was no signal for the slot; the short deferral (hold at
:func:`short_deadline_slots`) because no slot's forecast gain over now beat its error band
(:func:`hedged_window`); the short deferral because the run emitted more than follow over the
window by more than ``max_regret`` of follow's (the regret cap)."""

DEFAULT_MAX_REGRET = defaults.CARBON_MAX_REGRET
"""The regret cap: hold+carbon defers as far as its deadline only while what it emitted over the last
3D+1 slots exceeds what follow (no deferral) would have by at most this share of follow's; beyond, it
defers no further than the short deferral (:func:`short_deadline_slots`) until it is back under.
Off (inf) by default: on the French grid of 2020 (bench_carbon_real, 96 runs) a cap of 0.01
caught none of the days above follow (the books look back: what was deferred before they cross it
still runs where it was planned), and it cut the perfect forecast's median kept where deferral
worked (the three-day load at 6 h: 0.93 to 0.76), since the books count the deferred work's cost
when it runs and may have dropped the saving made when it was deferred. The short deferral on hedged
slots is what kept every run on the blend below follow."""

HEDGE_BANDS = 3.0
"""z: a later slot's forecast difference from now counts only beyond z error bands (each band one
root mean square error of the forecast at that lead, lately). Three: a gain the forecast's errors
would reach in about one slot of a hundred if they were normal. On the French grid of 2020 (12 days
over the year, Workload A and a three-day load, deadlines 1-12 h, benchmarks/bench_carbon_real.py),
with the blend: z = 3 let hold+carbon emit at most 0.4 % more than carbon-blind hold, z = 2 up to
0.9 % (under a soft threshold z = 1 up to 10.7 %, z = 2 0.9 %, z = 3 0.3 %)."""


FORECAST_ARRIVAL_SLOTS = 2
"""The window LP takes work to be released in each of the next FORECAST_ARRIVAL_SLOTS*D slots."""


def short_deadline_slots(deadline_slots: int, params: CostParams, slot_s: float = defaults.SLOT_S, short_deferral_s: float = defaults.CARBON_SHORT_DEFERRAL_S) -> int:
    """The short deferral's deadline, slots: min(D, max(W, ``short_deferral_s`` / ``slot_s``)), W =
    ceil(2*beta/e0) hold's break-even (e0 = 0: D), at least 1.

    W is the least deferral that saves energy under eq. (2) (an idle server held longer than W slots
    costs more than a restart). ``short_deferral_s`` (``[carbon] short_deferral_s``, 2 h) is how far
    hold's own deferral went on real grids without a day above follow: on the French grid of 2020
    (benchmarks/bench_carbon_real.py, Workload A, 8 days) carbon-blind hold at D = 2 h was above
    follow on 1 day of 8 by 2.1 %, at 6 h on 2 by up to 2.7 %, at 12 h on 3 by up to 11.2 %; with the
    hedged slots at 2 h, hold+carbon was above follow on none at 2, 6 or 12 h. Under the energy
    objective W is 2 slots of 300 s, which gave up most of hold's energy saving (the median kept at
    6 h fell from 0.54 to 0.28)."""
    window = break_even_slots(params)
    if window is None:
        return max(1, int(deadline_slots))
    safe = int(round(short_deferral_s / slot_s)) if slot_s > 0 else 0
    return max(1, min(int(deadline_slots), max(window, safe)))


def window_slots(deadline_slots: int) -> int:
    """3*D + 1: the slots hold+carbon looks at: the queue's deadlines, and those of the work the next 2D slots release."""
    return (FORECAST_ARRIVAL_SLOTS + 1) * int(deadline_slots) + 1


def arrival_time_constant(deadline_slots: int, params: CostParams) -> float:
    """tau, slots: a quarter of hold's break-even W = ceil(2*beta/e0), within [1, D+1].

    A switch pays for itself over W slots, so the load that justifies one is the load of the next
    fraction of W; a longer memory lags a rising load, under-forecasts it, and the window LP then
    defers work that later has to run in dirty slots (on Workload A at a 6-hour deadline, tau = D+1
    kept 0.73-0.79 of the offline cut where tau = 6 keeps 0.94-1.01). e0 = 0 (W unbounded): D+1;
    beta = 0: 1 (the last slot's L).
    """
    window = break_even_slots(params)
    quarter = float(deadline_slots + 1) if window is None else window / 4.0
    return min(max(quarter, 1.0), float(deadline_slots + 1))


def arrival_rate(recent_load: np.ndarray, time_constant_slots: float) -> float:
    """The work taken to arrive in each later slot: an exponentially weighted mean of L, newest
    first (``recent_load``, shape (k,), k >= 1), with a time constant of ``time_constant_slots`` (>= 1)."""
    decay = 1.0 - 1.0 / time_constant_slots
    weights = decay ** np.arange(recent_load.shape[0], dtype=float)
    return float(weights @ recent_load) / float(weights.sum())


@dataclass(frozen=True, eq=False)
class CarbonState:
    """What hold+carbon carries between slots.

    ``hold``: the carbon-blind hold run beside it on the same L_t. ``short``: hold at the short
    deferral's deadline (:func:`short_deadline_slots`) on the same L_t (None: not started yet).
    ``queue``: its own unassigned work by slots to its deadline, shape (D+1,), servers' worth.
    ``previous``: its m_{t-1}. ``previous_load``: L_{t-1}, follow's m_{t-1}. ``regret``,
    ``follow_cost``: over the last 3D+1 slots (oldest first), what the played decisions cost under the
    signal (s_t x (e0*m_t + e1*x_t + beta*|m_t - m_{t-1}|), in the signal's unit times server-slots)
    less what follow's would have, and follow's (0 for a slot without a signal). ``modes``: slots
    decided in each of :data:`MODES`, in that order.
    """

    hold: HoldState
    queue: np.ndarray
    previous: float = 0.0
    modes: tuple[int, ...] = (0,) * len(MODES)
    short: HoldState | None = None
    previous_load: float = 0.0
    regret: np.ndarray | None = None
    follow_cost: np.ndarray | None = None

    @classmethod
    def empty(cls, deadline_slots: int, params: CostParams) -> "CarbonState":
        return cls(hold=HoldState.empty(deadline_slots, params), queue=np.zeros(deadline_slots + 1))

    def restarted(self) -> "CarbonState":
        """Queue emptied and servers off, what hold learned kept (see :meth:`HoldState.restarted`)."""
        return CarbonState(
            hold=self.hold.restarted(), queue=np.zeros_like(self.queue), modes=self.modes, short=None if self.short is None else self.short.restarted()
        )

    def with_work_done(self, units: float) -> "CarbonState":
        """``units`` (server-slots; math.inf: all) more of the queued work run, earliest deadline
        first, in its own queue and in the carbon-blind holds' (:meth:`HoldState.with_work_done`)."""
        if units <= 0.0:
            return self
        short = None if self.short is None else self.short.with_work_done(units)
        return dataclasses.replace(self, hold=self.hold.with_work_done(units), short=short, queue=run_earliest(self.queue, units))

    def regret_share(self) -> float:
        """What the played decisions cost over the last 3D+1 slots above follow's, as a share of
        follow's (0 before follow has cost anything)."""
        if self.regret is None or self.follow_cost is None:
            return 0.0
        follow = float(self.follow_cost.sum())
        return float(self.regret.sum()) / follow if follow > 0 else 0.0

    def to_json(self) -> dict:
        document = {"hold": self.hold.to_json(), "queue": self.queue.tolist(), "previous": self.previous, "modes": list(self.modes)}
        if self.short is not None:
            document["short"] = self.short.to_json()
        if self.regret is not None and self.follow_cost is not None:
            document |= {"previous_load": self.previous_load, "regret": self.regret.tolist(), "follow_cost": self.follow_cost.tolist()}
        return document

    @classmethod
    def from_json(cls, document: dict) -> "CarbonState":
        modes = tuple(int(v) for v in document.get("modes", ()))
        modes = modes + (0,) * (len(MODES) - len(modes)) if len(modes) <= len(MODES) else (0,) * len(MODES)
        regret, follow_cost = document.get("regret"), document.get("follow_cost")
        return cls(
            hold=HoldState.from_json(document["hold"]),
            queue=np.array(document["queue"], dtype=float).reshape(-1),
            previous=float(document["previous"]),
            modes=modes,
            short=HoldState.from_json(document["short"]) if "short" in document else None,
            previous_load=float(document.get("previous_load", 0.0)),
            regret=None if regret is None else np.array(regret, dtype=float).reshape(-1),
            follow_cost=None if follow_cost is None else np.array(follow_cost, dtype=float).reshape(-1),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CarbonState):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class CarbonDecision:
    """One slot of hold+carbon: m_t and x_t (servers), how it was decided (one of :data:`MODES`),
    and what the window looked like: the relative cost w_t of this slot and the window's cheapest
    w and its offset in slots (1.0, 1.0, 0 when no signal was used). ``regret_share``: what the run
    cost over the last 3D+1 slots above follow's, a share of follow's, before this slot;
    ``short_deadline_slots``: the short deferral's D (modes "hedged" and "capped")."""

    capacity: float
    assigned: float
    mode: str
    weight_now: float = 1.0
    weight_min: float = 1.0
    cheapest_in_slots: int = 0
    regret_share: float = 0.0
    short_deadline_slots: int = 0


def hedged_window(window: np.ndarray, band: np.ndarray | None, bands: float | None = None) -> np.ndarray:
    """The window hold+carbon decides by: each later slot's forecast kept where it differs from the
    value now by more than ``bands`` (None: :data:`HEDGE_BANDS`) error bands, else taken as the value
    now (a hard threshold), so that only a gain or a loss beyond the forecast's own recent error counts:
    w_k = f_k if |f_k - s_0| > z*band_k, else s_0. ``window``, ``band``: shape (n,), band >= 0 (None: no
    band, the window as it is). A forecast that has lately been as wrong as the differences it shows
    gives a flat window: hold's decision.

    A value that passes is kept whole, not moved towards now by its bands (a soft threshold):
    moving each value by z of its own bands reorders the slots it believes (a far
    slot, with a wider band, loses more of its gain than a near one), and on the French grid of 2020
    the soft rule emitted more than follow in 4 of 12 days on Workload A at 12 hours where this one
    does in 3, with the same or higher medians at every deadline, and stayed within 0.4 % of
    carbon-blind hold (the soft rule 0.3 %) (docs/concepts.md, "On a real grid")."""
    window = np.asarray(window, dtype=float)
    if band is None:
        return window
    band = np.asarray(band, dtype=float)
    if band.shape != window.shape or not (np.isfinite(band).all() and (band >= 0).all()):
        raise ConfigError(f"{NAME}: the band must be {window.shape[0]} finite values >= 0, got shape {band.shape}")
    z = HEDGE_BANDS if bands is None else float(bands)
    return np.where(np.abs(window - window[0]) > z * band, window, window[0])


def is_flat(window: np.ndarray) -> bool:
    """True when the signal over ``window`` (shape (n,)) varies by at most FLAT_RTOL of its largest value."""
    top = float(np.max(window))
    return bool(top - float(np.min(window)) <= FLAT_RTOL * top)


def carbon_step(
    state: CarbonState,
    load: float,
    deadline_slots: int,
    params: CostParams,
    window: np.ndarray | None,
    reference: float | None = None,
    band: np.ndarray | None = None,
    max_regret: float = DEFAULT_MAX_REGRET,
    short_slots: int | None = None,
) -> tuple[CarbonDecision, CarbonState]:
    """One slot of hold+carbon (module docstring): returns (the decision, the new state).

    ``max_regret``: the regret cap (:data:`DEFAULT_MAX_REGRET`, >= 0): while the run's cost under the
    signal over the last 3D+1 slots exceeds follow's by more than this share of it, the slot is the
    short deferral (mode "capped"), as it is when the hedge leaves the window flat (mode "hedged").
    ``short_slots``: the short deferral's D (:func:`short_deadline_slots`; None: for slots of
    ``defaults.SLOT_S``).

    ``load``: L_t, servers' worth released now, due within D slots. ``window``: the signal over slots
    t..t+3D as known now, shape (3D+1,) (:func:`window_slots`), any unit (only its ratios matter), or None when there is none
    for this slot. ``reference``: the level w = 1 stands for, in the window's unit: the signal's mean
    over the last day (:meth:`SlotSignal.reference`); None or <= 0: the window's mean. One restart
    costs beta servers-slots at that level. ``band``: the forecast's error band over the window, shape
    (3D+1,), in the window's unit (None: none); the LP decides by :func:`hedged_window`. Raises ConfigError for a bad L_t or window, InfeasibleError when the deadlines need
    more than M servers, SolverError when the LP fails otherwise.
    """
    load = float(load)
    if not (math.isfinite(load) and load >= 0):
        raise ConfigError(f"{NAME}: L_t must be a finite number >= 0, got {load!r}")
    if not (max_regret >= 0):  # inf: no cap; NaN refused
        raise ConfigError(f"{NAME}: max_regret must be a share >= 0 (inf: no cap), got {max_regret!r}")
    n = window_slots(deadline_slots)
    hold_m, hold_x, hold_state = hold_step(state.hold, load, deadline_slots, params)
    short_slots = short_deadline_slots(deadline_slots, params) if short_slots is None else max(1, min(int(short_slots), int(deadline_slots)))
    short_before = state.short or HoldState.empty(short_slots, params)
    short_m, short_x, short_state = hold_step(short_before, load, short_slots, params)
    regret_share = state.regret_share()
    queue = np.concatenate([state.queue[1:], [load]])
    prefix = np.cumsum(queue)
    forced = float(flat_capacity(prefix))
    if params.max_servers is not None and forced > params.max_servers * (1 + 1e-12) + 1e-9:
        raise InfeasibleError(
            f"{NAME}: {forced:.6g} servers are needed to meet the deadlines, more than M = {params.max_servers:g}", "infeasible"
        )
    if window is not None:
        window = np.asarray(window, dtype=float)
        if window.shape != (n,) or not (np.isfinite(window).all() and (window >= 0).all()):
            raise ConfigError(f"{NAME}: the signal window must be {n} finite values >= 0 (slots t..t+3D), got shape {window.shape}")
    hedged = None if window is None else hedged_window(window, band)
    capped = window is not None and not is_flat(window) and regret_share > max_regret
    if window is None or is_flat(hedged) or capped:
        mode = "no_signal" if window is None else "flat" if is_flat(window) else "capped" if capped else "hedged"
        # hold's m_t (at D, or at the short deadline), but idle no more than that hold's own (m - x):
        # after deferral the queue may hold less than hold's, and hold's m_t would then be idle
        # servers. With the same queue this is hold's m_t.
        ref_m, ref_x = (short_m, short_x) if mode in ("hedged", "capped") else (hold_m, hold_x)
        capacity = max(forced, min(ref_m, float(prefix[-1]) + max(ref_m - ref_x, 0.0)))
        assigned = min(capacity, float(prefix[-1]))
        short = short_slots if mode in ("hedged", "capped") else 0
        decision = CarbonDecision(capacity, assigned, mode, regret_share=regret_share, short_deadline_slots=short)
    else:
        level = float(window.mean()) if reference is None or not reference > 0 else float(reference)
        weights = hedged / level
        arrivals = arrival_rate(hold_state.recent_load[: hold_state.slots], arrival_time_constant(deadline_slots, params))
        capacity, assigned = _window_decision(queue, arrivals, state.previous, weights, params)
        # Idle servers no more than hold keeps idle (its ski-rental rule, m - x of its own slot): the
        # window LP takes the forecast arrivals as certain, and would keep servers on for work that
        # does not come. (hold's m_t itself is no bound: hold runs its servers full.)
        capacity = max(assigned, min(capacity, assigned + max(hold_m - hold_x, 0.0)))
        cheapest = int(np.argmin(weights))
        decision = CarbonDecision(capacity, assigned, "carbon", float(weights[0]), float(weights[cheapest]), cheapest, regret_share)
    left = np.maximum(prefix - decision.assigned, 0.0)
    modes = tuple(c + (MODES[i] == decision.mode) for i, c in enumerate(state.modes))
    # The books of the cap: this slot's cost under the signal, the decision's and follow's (m = x = L_t).
    value_now = 0.0 if window is None else float(window[0])
    ours = value_now * (params.e0 * decision.capacity + params.e1 * decision.assigned + params.beta * abs(decision.capacity - state.previous))
    follows = value_now * ((params.e0 + params.e1) * load + params.beta * abs(load - state.previous_load))
    regret = np.zeros(n) if state.regret is None or state.regret.shape != (n,) else state.regret
    follow_cost = np.zeros(n) if state.follow_cost is None or state.follow_cost.shape != (n,) else state.follow_cost
    return decision, CarbonState(
        hold=hold_state, queue=np.diff(left, prepend=0.0), previous=decision.capacity, modes=modes, short=short_state,
        previous_load=load, regret=np.append(regret[1:], ours - follows), follow_cost=np.append(follow_cost[1:], follows),
    )  # fmt: skip


def _window_decision(queue: np.ndarray, arrivals: float, previous: float, weights: np.ndarray, params: CostParams) -> tuple[float, float]:
    """(m_t, x_t) of the window LP. Under a cap M the forecast arrivals are not allowed to push m_t to M:
    if they make the window infeasible, or the plan with them runs at M now, the LP is solved again for
    the queue alone, and its decision is played when it runs fewer servers. (The forecast is an
    estimate: a plan that must fill M for a long stretch to fit work not yet released would otherwise
    run at the cap now, in a dirty slot, for work that may never come.)"""
    try:
        m, x = solve_window(queue, arrivals, previous, weights, params)
    except InfeasibleError:
        if arrivals == 0.0:
            raise
        m, x = solve_window(queue, 0.0, previous, weights, params)
    else:
        if params.max_servers is not None and arrivals != 0.0 and m >= params.max_servers * (1 - 1e-9):
            alone = solve_window(queue, 0.0, previous, weights, params)
            if alone[0] < m:
                m, x = alone
    total = float(queue.sum())
    # Interior noise aside, the due work runs now (C1) and no more than is queued (C2).
    x = min(max(x, float(queue[0])), total)
    m = max(m, x)
    if params.max_servers is not None:
        m = min(m, params.max_servers)
    return m, x


def plan(
    load: np.ndarray, deadline_slots: int, params: CostParams, signal: SlotSignal, max_regret: float = DEFAULT_MAX_REGRET,
    short_deferral_s: float = defaults.CARBON_SHORT_DEFERRAL_S,
) -> Schedule:  # fmt: skip
    """hold+carbon over the window + D slots, from :func:`carbon_step` slot by slot.

    ``load``: L_t, shape (n_slots,); ``signal``: the signal of the replay (slot 0 its first slot; its
    slots_per_day gives the slot's length); ``max_regret``, ``short_deferral_s``: the regret cap and
    the short deferral (:func:`carbon_step`, :func:`short_deadline_slots`).
    Returns a Schedule over n_slots + D slots with x_t <= m_t, named :data:`NAME`; its notes count
    the slots decided in each mode. Raises as :func:`carbon_step`.
    """
    released = pad_to_horizon(load, deadline_slots)
    state = CarbonState.empty(deadline_slots, params)
    capacity = np.zeros(released.shape[0])
    assigned = np.zeros(released.shape[0])
    n = window_slots(deadline_slots)
    short_slots = short_deadline_slots(deadline_slots, params, 86_400.0 / signal.slots_per_day, short_deferral_s)
    started = time.perf_counter()
    for t, value in enumerate(released):
        known = signal.forecast_at(t, n)
        decision, state = carbon_step(state, value, deadline_slots, params, known.values, signal.reference(t), known.band, max_regret, short_slots)
        capacity[t], assigned[t] = decision.capacity, decision.assigned
    elapsed_ms = (time.perf_counter() - started) * 1000
    return Schedule(
        policy=NAME,
        capacity=capacity,
        assigned=assigned,
        solve_ms_per_slot=elapsed_ms / max(1, released.shape[0]),
        notes={"slots_by_mode": dict(zip(MODES, state.modes))},
    )

