"""The slot controller: one pure function called once per slot.

    decision, new_state = tick(now_s, jobs, state, config)

It decides the capacity m_t with the configured policy and which queued jobs to
release, in earliest-deadline-first order. It reads no clock, store or cloud:
the live daemon, the dry run and the trace replay all call it with their own
adapters (paper: deferral, §IV Algorithm 2; §V-B for long jobs).

Work model. As in the paper's simulation (§VI-A), a job of estimated length
T_J submitted in slot s counts one unit of work in each slot it would run,
s .. ceil((s + T_J)/tau) - 1, each unit with the job's deadline (D slots for
``hold``, ``gcp-u`` and ``vfw``, the job's own slack for ``gcp``). The policy turns these units into
m_t exactly as ``autoscaler replay`` does, so a replay through the controller
gives the same m_t. Dispatch is then physical: a job is released as a whole
(non-preemptive) and holds a node until it finishes; queued jobs are released
by earliest start-by slot (deadline minus length), and a job due (its start-by
slot has come, or is within ``ControllerConfig.release_margin_slots``) is released
even when the policy's nodes are used up, the nodes being raised to fit
(deadline-safe rounding), up to the configured maximum.

Restarts. The policy's state describes the slots decided one after another. When
slots went undecided (the daemon down, a run skipped), the policy changed, or no
slot was decided yet, ``tick`` rebuilds the policy's work from the active jobs
alone (``rebuild_future``): each counts its remaining work, handed to the policy
at the flattest rate that keeps it on time, so work of finished jobs or of slots
gone by never piles on the slot decided.

Cost. The jobs come as an :class:`~autoscaler.core.edf.JobQueue` (EDF order and release live in
``autoscaler.core.edf``) kept by the caller between slots; a slot reads only the jobs that arrived
(``PolicyState.counted_seq``), those released or missed, and O(log n) of the queue, and its state
does not grow with the queue. Every decision says which rule bound it (``Decision.reason``, one of
``REASONS``, and ``Decision.why``); :func:`explain` gives the lines for one slot.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from autoscaler.core.edf import (
    QUEUED,
    Dispatch,
    JobQueue,
    as_queue,
    demand_vector,
    dispatch,
    fair_release,
    job_length_slots,
    release_by_slot,
    start_by_slot,
)
from autoscaler.core.errors import ConfigError, StoreError
from autoscaler.core.fairshare import dynamic_drf_step
from autoscaler.core.model import DEFAULT_MAX_NODES, MIB, CostParams, Job, require_positive
from autoscaler.core.policies.carbon import NAME as CARBON_NAME
from autoscaler.core.policies.carbon import CarbonDecision, CarbonState, carbon_step, window_slots
from autoscaler.core.policies.gcp import GcpState, binding_deadline, gcp_step, solve_gcp_opt
from autoscaler.core.policies.hold import HoldState, forced_capacity, hold_step, leading_rule
from autoscaler.core.policies.vfw import VfwState, default_delta, step_bounds, vfw_step
from autoscaler.core.readable import count_text, duration_text

__all__ = [
    "CONTROLLER_POLICIES",
    "REASONS",
    "SIGNAL_FALLBACKS",
    "CarbonWindow",
    "SignalUnavailable",
    "ControllerConfig",
    "Decision",
    "FollowWatch",
    "PolicyState",
    "arrive_tenants",
    "demand_vector",
    "dispatch",
    "explain",
    "fair_release",
    "job_units",
    "rebuild_future",
    "release_by_slot",
    "start_by_slot",
    "tick",
]
"""What other modules import from here; EDF order and release live in ``autoscaler.core.edf``."""

CONTROLLER_POLICIES = ("hold", "gcp-u", "gcp", "vfw", "follow")
"""Policies the daemon can run; ``hold`` is the default."""

UNIFORM_DEADLINE_POLICIES = ("hold", "gcp-u", "vfw")
"""Policies that give every unit of work the one deadline D (the others: each job's own slack, or none)."""

REASONS = ("idle", "follow", "deadlines", "held", "valley", "carbon", "no_signal", "due_jobs", "running", "min_nodes", "max_nodes", "overloaded")
"""What bound a slot's m_t or nodes (``Decision.reason``), the first that applies of, from last to first:

* ``overloaded``: jobs are queued and the nodes wanted (ceil(m_t), or the running jobs plus those due)
  exceed ``max_nodes``: not all can be on time, so the free nodes went first to the jobs that can
  still meet their deadlines, then to the overdue, each shared among tenants by dynamic DRF share;
* ``max_nodes``: ceil(m_t) is above ``max_nodes`` (nothing queued): nodes capped;
* ``due_jobs``: nodes raised above ceil(m_t) for jobs due: at (or past) their start-by slot, or
  within ``release_margin_slots`` of it;
* ``running``: nodes kept above ceil(m_t) for jobs still running;
* ``min_nodes``: nodes raised to ``min_nodes``;
* ``idle``: m_t = 0 and no job queued or running: no nodes;
* the policy's own rule for m_t: ``follow`` (m_t = L_t); ``deadlines`` (the lowest m_t that meets
  the queued work's deadlines: for gcp, gcp-u and hold r_t = max_j Y_j/(j+1), GCP-OPT (7)'s first
  slope; for vfw outside a valley, LOPT (4)); ``held`` (hold kept servers on above r_t through a
  valley); ``valley`` (vfw fills a valley, VOPT (5)); ``carbon`` (hold+carbon's window LP placed
  m_t by the signal: ``ControllerConfig.carbon``); ``no_signal`` (hold+carbon had no usable signal
  for the slot: hold's carbon-blind decision). hold+carbon under a flat signal is hold and gives
  hold's own ``deadlines`` or ``held``.
"""

REASON_WORDS = {
    "idle": "nothing to run",
    "follow": "following the load",
    "deadlines": "forced by deadlines",
    "held": "held through a valley",
    "valley": "filling a valley",
    "carbon": "placed by the carbon signal",
    "no_signal": "carbon signal unavailable: hold's decision",
    "due_jobs": "raised for due jobs",
    "running": "kept for running jobs",
    "min_nodes": "raised to min_nodes",
    "max_nodes": "capped at max_nodes",
    "overloaded": "overloaded: shared by DRF",
}
"""Each reason code in a few words, for ``explain``."""

SIGNAL_FALLBACKS = ("unreadable", "stale", "not_covering", "not_given")
"""Why a slot of hold+carbon had no signal (``SignalUnavailable.reason``): the source could not be
read (and never was); the last good read is older than ``max_staleness_s``; the signal does not
cover the slot decided; no signal was handed to ``tick`` at all."""


@dataclass(frozen=True, eq=False)
class CarbonWindow:
    """The cost signal as known in one slot, for hold+carbon (``tick``'s ``carbon_window``).

    ``values``: shape (3D+1,), the signal's mean over slots t..t+3D (the actual value, then the
    forecast, else persistence), in ``unit``; ``reference``: its mean over the last day, the level
    of weight 1 (:func:`autoscaler.core.policies.carbon.carbon_step`). ``value_now``: values[0].
    ``source``: the file or URL it came from; ``forecast_slots`` and ``persisted_slots``: how many
    of values[1:] came from the forecast source and from persistence (the rest are actual values).
    """

    values: np.ndarray
    reference: float
    unit: str
    value_now: float
    source: str = ""
    forecast_slots: int = 0
    persisted_slots: int = 0


@dataclass(frozen=True)
class SignalUnavailable:
    """Why hold+carbon has no signal for a slot: ``reason`` one of :data:`SIGNAL_FALLBACKS`;
    ``detail`` in words (the read error, the signal's age, the slot not covered)."""

    reason: str
    detail: str

    def __post_init__(self) -> None:
        if self.reason not in SIGNAL_FALLBACKS:
            raise ConfigError(f"signal fallback reason: expected one of {', '.join(SIGNAL_FALLBACKS)}, got {self.reason!r}")


@dataclass(frozen=True)
class ControllerConfig:
    """What the controller needs to know; times in seconds, deadlines in slots.

    ``tenants_n``: n, the number of tenants dynamic DRF divides the cluster for (a tenant
    arriving beyond n shares only what the first n left). ``node_disk_bytes_s`` and
    ``node_network_bytes_s``: one node's disk and network rates, which put a demand vector's
    CPU seconds, disk bytes and network bytes on one scale (defaults: the §V-A rates of
    ``LengthModel``, 100 MB/s disk, 10 MB/s network).

    ``release_margin_slots``: g >= 0, how many slots before its start-by slot s (``start_by_slot``:
    the slot of deadline - length) a queued job becomes *due*. A due job is released even beyond the
    policy's nodes (up to ``max_nodes``, earliest start-by first); a job not due yet is released only
    onto the policy's free nodes. So, nodes allowing, a job goes out by the first slot decided among
    s-g .. s (``release_by_slot``: s - g), or earlier on the policy's nodes, and g slots in a row may
    go undecided (the daemon down, a slot skipped) without it becoming late; a job submitted with less
    slack than g (submit slot > s - g) is due in its first slot. Late and missed still count from s
    itself (``autoscaler.core.lateness``), and ``Decision.at_risk`` too; overload (``Decision.overloaded``)
    is judged on the jobs at or past s, so a job released early takes a node only if one is free
    below ``max_nodes`` and never changes the DRF split. The margin moves releases, never m_t.
    g = 0 is the rule without a margin: a job is due in its start-by slot exactly.

    ``carbon``: run ``hold`` as hold+carbon (:mod:`autoscaler.core.policies.carbon`), deferring work
    inside its deadline into the slots where a cost signal (``tick``'s ``carbon_window``) is low;
    only ``hold`` has a carbon-aware variant (ConfigError for another policy).
    """

    policy: str = "hold"
    deadline_slots: int = 2
    slot_s: float = 300.0
    epoch_s: float = 0.0
    min_nodes: int = 0
    max_nodes: int = DEFAULT_MAX_NODES
    max_deadline_slots: int = 288
    cost: CostParams = field(default_factory=CostParams)
    delta: int | None = None
    tenants_n: int = 10
    node_disk_bytes_s: float = 100.0 * MIB
    node_network_bytes_s: float = 10.0 * MIB
    release_margin_slots: int = 1
    carbon: bool = False

    def __post_init__(self) -> None:
        margin = self.release_margin_slots
        if isinstance(margin, bool) or not isinstance(margin, int) or margin < 0:
            raise ConfigError(f"release_margin_slots must be a whole number of slots >= 0, got {margin!r}")
        if self.policy not in CONTROLLER_POLICIES:
            raise ConfigError(f"policy: expected one of {', '.join(CONTROLLER_POLICIES)}, got {self.policy!r}")
        if self.carbon and self.policy != "hold":
            raise ConfigError(
                f"carbon: only policy 'hold' has a carbon-aware variant ({CARBON_NAME}), got policy {self.policy!r}: "
                "set policy = \"hold\" or remove [carbon] source"
            )
        if not (0 <= self.min_nodes <= self.max_nodes):
            raise ConfigError(f"nodes: expected 0 <= min_nodes <= max_nodes, got {self.min_nodes} and {self.max_nodes}")
        if self.deadline_slots < 0 or self.max_deadline_slots < 1:
            raise ConfigError("deadline_slots must be >= 0 and max_deadline_slots >= 1")
        if self.tenants_n < 1:
            raise ConfigError(f"tenants_n must be >= 1 (the tenants dynamic DRF plans for), got {self.tenants_n}")
        for name in ("slot_s", "node_disk_bytes_s", "node_network_bytes_s"):
            require_positive(name, getattr(self, name))
        if self.policy == "vfw" and not (0 < self.vfw_delta < self.deadline_slots):
            raise ConfigError(
                f"vfw needs 0 < delta < deadline_slots, got delta = {self.vfw_delta} with deadline_slots = {self.deadline_slots}"
            )

    @property
    def policy_key(self) -> str:
        """What the saved policy state depends on; a restart with another key starts it afresh."""
        key = f"{self.policy}/D={self.deadline_slots}/nu={self.nu}/delta={self.vfw_delta}/slot_s={self.slot_s:g}"
        if self.policy == "hold":
            # hold's learned rules (and so its state's shape) follow from beta/e0; its costs from e1 too.
            key += f"/e0={self.cost.e0:g}/e1={self.cost.e1:g}/beta={self.cost.beta:g}"
            if self.carbon:
                key += "/carbon"
        return key

    @property
    def policy_name(self) -> str:
        """The policy as outputs name it: ``hold+carbon`` for hold with ``carbon``, else ``policy``."""
        return CARBON_NAME if self.carbon else self.policy

    @property
    def vfw_delta(self) -> int:
        return self.delta if self.delta is not None else default_delta(self.deadline_slots)

    @property
    def nu(self) -> int:
        """Largest deadline the policy's work vector holds."""
        return self.deadline_slots if self.policy in UNIFORM_DEADLINE_POLICIES else self.max_deadline_slots

    def slot_of(self, time_s: float) -> int:
        return math.floor((time_s - self.epoch_s) / self.slot_s)


@dataclass(frozen=True)
class FollowWatch:
    """The cost (eq. 2) of the policy's schedule m_t, x_t and of follow the workload (m_t = x_t = L_t)
    over the slots decided so far, to tell when the policy has cost more than not deferring at all.

    Both are compared as if every server were switched off after the last slot (the replay's rule).
    """

    policy_cost: float = 0.0
    follow_cost: float = 0.0
    last_capacity: float = 0.0
    last_load: float = 0.0
    worse: bool = False

    def step(self, capacity: float, work: float, load: float, params: CostParams) -> "FollowWatch":
        policy = self.policy_cost + params.e0 * capacity + params.e1 * work + params.beta * abs(capacity - self.last_capacity)
        follow = self.follow_cost + (params.e0 + params.e1) * load + params.beta * abs(load - self.last_load)
        ended_policy, ended_follow = policy + params.beta * capacity, follow + params.beta * load
        worse = ended_policy > ended_follow * (1 + 1e-9) + 1e-12
        return FollowWatch(policy, follow, capacity, load, worse)


UNKNOWN_SEQ = -1
"""``PolicyState.counted_seq`` of a state saved before the watermark existed: which jobs it counted
is not known, so every job is taken as counted iff its submit slot is decided (the rule for jobs
without a seq)."""


@dataclass(frozen=True)
class PolicyState:
    """What the controller carries between slots, persisted with the queue in one transaction.
    Its size does not grow with the queue.

    ``last_slot``: the slot last decided (-1 before the first). ``gcp``: GCP's unassigned
    work y and m_{t-1}. ``hold``: hold's queues, capacities and its rules' costs. ``future``: units of already-submitted jobs still to arrive,
    {slot: [units by deadline, shape (nu+1,)]}. ``tenants``: dynamic DRF's agents in arrival
    order, with their normalised demand vectors ``tenant_demands`` (k, 3) and dominant shares
    ``dominant_shares`` (k,), which never decrease.

    Which jobs the policy's work already counts (each job once, in the first slot decided at or
    after its submit slot): ``counted_seq``, the highest ``Job.seq`` seen (every job with a seq up
    to it is counted), except ``uncounted``, the ids of such jobs whose submit slot is still to
    come; a job without a seq is counted iff its submit slot is <= ``last_slot``.
    ``UNKNOWN_SEQ`` (a state saved before the watermark): that rule for every job.
    ``released_due``: ids the last decision released in their start-by slot; one still queued now
    (its release failed) has missed it. ``carbon``: hold+carbon's state (its own queue and the hold
    it runs beside), for hold with ``ControllerConfig.carbon``; then ``hold`` is None.
    """

    last_slot: int = -1
    gcp: GcpState | None = None
    future: dict[int, tuple[float, ...]] = field(default_factory=dict)
    counted_seq: int = 0
    vfw: VfwState | None = None
    policy_key: str = ""
    tenants: tuple[str, ...] = ()
    tenant_demands: tuple[tuple[float, ...], ...] = ()
    dominant_shares: tuple[float, ...] = ()
    uncounted: frozenset[str] = frozenset()
    hold: HoldState | None = None
    follow_watch: FollowWatch = field(default_factory=FollowWatch)
    released_due: frozenset[str] = frozenset()
    carbon: CarbonState | None = None

    def to_json(self) -> dict:
        return {
            "last_slot": self.last_slot,
            "unassigned": list(self.gcp.unassigned) if self.gcp else None,
            "previous_capacity": self.gcp.previous_capacity if self.gcp else 0.0,
            "future": {str(k): list(v) for k, v in sorted(self.future.items())},
            "counted_seq": self.counted_seq,
            "uncounted": sorted(self.uncounted),
            "released_due": sorted(self.released_due),
            "vfw": dataclasses.asdict(self.vfw) if self.vfw else None,
            "policy_key": self.policy_key,
            "tenants": list(self.tenants),
            "tenant_demands": [list(d) for d in self.tenant_demands],
            "dominant_shares": list(self.dominant_shares),
            "hold": self.hold.to_json() if self.hold else None,
            "follow_watch": dataclasses.asdict(self.follow_watch),
            "carbon": self.carbon.to_json() if self.carbon else None,
        }

    @classmethod
    def from_json(cls, document: dict) -> "PolicyState":
        """The state :meth:`to_json` wrote, or one written before the watermark: its ``counted`` and
        ``missed`` id lists are not needed (``UNKNOWN_SEQ``; missed jobs follow from the slots decided)."""
        unassigned = document.get("unassigned")
        return cls(
            last_slot=int(document["last_slot"]),
            gcp=GcpState(tuple(unassigned), float(document["previous_capacity"])) if unassigned is not None else None,
            future={int(k): tuple(float(u) for u in v) for k, v in document.get("future", {}).items()},
            counted_seq=int(document["counted_seq"]) if document.get("counted_seq") is not None else UNKNOWN_SEQ,
            uncounted=frozenset(str(i) for i in document.get("uncounted", ())),
            released_due=frozenset(str(i) for i in document.get("released_due", ())),
            vfw=_vfw_state(document.get("vfw")),
            policy_key=str(document.get("policy_key", "")),
            tenants=tuple(str(t) for t in document.get("tenants", ())),
            tenant_demands=tuple(tuple(float(v) for v in d) for d in document.get("tenant_demands", ())),
            dominant_shares=tuple(float(x) for x in document.get("dominant_shares", ())),
            hold=HoldState.from_json(document["hold"]) if document.get("hold") else None,
            follow_watch=FollowWatch(**document["follow_watch"]) if document.get("follow_watch") else FollowWatch(),
            carbon=CarbonState.from_json(document["carbon"]) if document.get("carbon") else None,
        )


@dataclass(frozen=True)
class Decision:
    """What one slot decided.

    ``capacity``: the policy's m_t (servers, fractional). ``assigned``: x_t, the work the policy runs
    (x_t = m_t, except that nodes ``hold`` keeps on may have less to run). ``nodes``: task nodes to run,
    ceil(m_t) clamped to [min, max] and raised for due jobs. ``release``: job ids to
    release now, EDF order. ``late``: ids released after their start-by slot.
    ``at_risk``: queued jobs whose start-by slot is within one slot and were not released.
    ``queue_depth``: jobs queued after the release; ``running``: jobs holding a node after it.
    ``rounding_node_slots``: nodes - m_t.
    ``nodes_wanted``: the policy's ceil(m_t), or the running jobs plus those due, whichever is more.
    ``overloaded``: jobs are queued and ``nodes_wanted`` exceeds ``max_nodes``, so free nodes went
    to tenants by dynamic DRF share. ``missed``: jobs that
    missed their start-by slot in this slot (held past it, or found past it), counted once;
    ``missed_by_tenant`` counts them per tenant. ``nodes_by_tenant``: nodes held by each tenant's
    running and just-released jobs. ``load``: L_t, the units of work that arrived for this slot
    (what "follow the workload" would have run), kept for the energy report.
    ``worse_than_follow``: the policy's m_t, x_t have cost more than follow over the slots decided
    since its state began (:class:`FollowWatch`); ``warning`` says so, in the slot it first happens.
    ``reason``: which rule bound m_t or the nodes, one of ``REASONS`` ("" in logs written before
    decisions explained themselves); ``why``: that, in one sentence with its figures.
    ``solve_ms``: wall time of the decision, filled in by the daemon (``tick`` reads no clock).

    hold+carbon only (``ControllerConfig.carbon``; carbon-blind decisions and older logs keep the
    defaults): ``carbon_mode``, how the slot was decided (``autoscaler.core.policies.carbon.MODES``:
    "carbon", "flat", "no_signal"; "" when carbon-blind); ``carbon_value`` and ``carbon_unit``: the
    signal now (None when there was none); ``carbon_weight_now`` and ``carbon_weight_min``: the
    relative cost w of this slot and the window's cheapest (1 = the day's mean);
    ``carbon_cheapest_in_slots``: slots from now to that cheapest slot; ``carbon_fallback``: why
    there was no signal (``SIGNAL_FALLBACKS``), "" otherwise.
    """

    slot: int
    capacity: float
    assigned: float
    nodes: int
    release: tuple[str, ...]
    late: tuple[str, ...]
    at_risk: int
    queue_depth: int
    running: int
    rounding_node_slots: float
    overloaded: bool = False
    nodes_wanted: int = 0
    missed: tuple[str, ...] = ()
    missed_by_tenant: dict[str, int] = field(default_factory=dict)
    nodes_by_tenant: dict[str, int] = field(default_factory=dict)
    load: float = 0.0
    worse_than_follow: bool = False
    warning: str = ""
    reason: str = ""
    why: str = ""
    solve_ms: float = 0.0
    carbon_mode: str = ""
    carbon_value: float | None = None
    carbon_unit: str = ""
    carbon_weight_now: float | None = None
    carbon_weight_min: float | None = None
    carbon_cheapest_in_slots: int | None = None
    carbon_fallback: str = ""

    def __post_init__(self) -> None:
        if self.reason and self.reason not in REASONS:
            raise ConfigError(f"decision reason: expected one of {', '.join(REASONS)}, got {self.reason!r}")

    def to_json(self) -> dict:
        """The decision as JSON-ready values (lists, plain ints, floats and strings), for the decision log."""
        return {
            "slot": int(self.slot),
            "capacity": float(self.capacity),
            "assigned": float(self.assigned),
            "nodes": int(self.nodes),
            "release": list(self.release),
            "late": list(self.late),
            "at_risk": int(self.at_risk),
            "queue_depth": int(self.queue_depth),
            "running": int(self.running),
            "rounding_node_slots": float(self.rounding_node_slots),
            "overloaded": bool(self.overloaded),
            "nodes_wanted": int(self.nodes_wanted),
            "missed": list(self.missed),
            "missed_by_tenant": {str(t): int(n) for t, n in self.missed_by_tenant.items()},
            "nodes_by_tenant": {str(t): int(n) for t, n in self.nodes_by_tenant.items()},
            "load": float(self.load),
            "worse_than_follow": bool(self.worse_than_follow),
            "warning": str(self.warning),
            "reason": str(self.reason),
            "why": str(self.why),
            "solve_ms": float(self.solve_ms),
            "carbon_mode": str(self.carbon_mode),
            "carbon_value": None if self.carbon_value is None else float(self.carbon_value),
            "carbon_unit": str(self.carbon_unit),
            "carbon_weight_now": None if self.carbon_weight_now is None else float(self.carbon_weight_now),
            "carbon_weight_min": None if self.carbon_weight_min is None else float(self.carbon_weight_min),
            "carbon_cheapest_in_slots": None if self.carbon_cheapest_in_slots is None else int(self.carbon_cheapest_in_slots),
            "carbon_fallback": str(self.carbon_fallback),
        }

    @classmethod
    def from_json(cls, document: dict) -> "Decision":
        """A decision from :meth:`to_json`, or from a log written as ``dataclasses.asdict(decision) |
        {"solve_ms": ...}`` before ``assigned`` was named so (its ``work``; x_t = m_t where neither
        is there). Fields a log lacks take their defaults; keys it does not know are ignored.

        Raises StoreError naming the field when ``slot``, ``capacity`` or ``nodes`` is missing or a
        field has the wrong type.
        """
        if not isinstance(document, dict):
            raise StoreError(f"decision log: expected an object per slot, got {type(document).__name__}")
        for name in ("slot", "capacity", "nodes"):
            if name not in document:
                raise StoreError(f"decision log: a decision has no {name!r} (keys: {', '.join(sorted(map(str, document)))})")
        where = f"decision log, slot {document['slot']!r}"

        def read(name: str, kind, default, optional: bool = False):
            value = document.get(name, default)
            if optional and value is None:
                return None
            try:
                if kind is tuple:
                    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
                        raise TypeError
                    return tuple(str(v) for v in value)
                if kind is dict:
                    return {str(k): int(v) for k, v in dict(value).items()}
                if kind is bool:
                    if not isinstance(value, bool):
                        raise TypeError
                    return value
                if kind is str:
                    return str(value)
                if isinstance(value, bool) or value is None:
                    raise TypeError
                number = kind(value)
                if kind is int and number != value:
                    raise ValueError
                return number
            except (TypeError, ValueError):
                raise StoreError(f"{where}: {name!r} must be {_KIND_WORDS[kind]}, got {value!r}") from None

        capacity = read("capacity", float, None)
        reason = read("reason", str, "")
        if reason and reason not in REASONS:
            raise StoreError(f"{where}: 'reason' must be one of {', '.join(REASONS)}, got {reason!r}")
        return cls(
            slot=read("slot", int, None),
            capacity=capacity,
            assigned=read("assigned", float, document.get("work", capacity)),
            nodes=read("nodes", int, None),
            release=read("release", tuple, ()),
            late=read("late", tuple, ()),
            at_risk=read("at_risk", int, 0),
            queue_depth=read("queue_depth", int, 0),
            running=read("running", int, 0),
            rounding_node_slots=read("rounding_node_slots", float, 0.0),
            overloaded=read("overloaded", bool, False),
            nodes_wanted=read("nodes_wanted", int, 0),
            missed=read("missed", tuple, ()),
            missed_by_tenant=read("missed_by_tenant", dict, {}),
            nodes_by_tenant=read("nodes_by_tenant", dict, {}),
            load=read("load", float, 0.0),
            worse_than_follow=read("worse_than_follow", bool, False),
            warning=read("warning", str, ""),
            reason=reason,
            why=read("why", str, ""),
            solve_ms=read("solve_ms", float, 0.0),
            carbon_mode=read("carbon_mode", str, ""),
            carbon_value=read("carbon_value", float, None, optional=True),
            carbon_unit=read("carbon_unit", str, ""),
            carbon_weight_now=read("carbon_weight_now", float, None, optional=True),
            carbon_weight_min=read("carbon_weight_min", float, None, optional=True),
            carbon_cheapest_in_slots=read("carbon_cheapest_in_slots", int, None, optional=True),
            carbon_fallback=read("carbon_fallback", str, ""),
        )


_KIND_WORDS = {int: "a whole number", float: "a number", bool: "true or false", str: "text", tuple: "a list of job ids", dict: "an object of counts"}


def _vfw_state(document: dict | None) -> VfwState | None:
    if document is None:
        return None
    return VfwState(
        recent_load=tuple(document["recent_load"]),
        recent_cum=tuple(document["recent_cum"]),
        run_so_far=float(document["run_so_far"]),
        valley=int(document["valley"]),
        previous_capacity=float(document["previous_capacity"]),
    )


def job_units(job: Job, config: ControllerConfig, first_slot: int) -> tuple[int, int, int]:
    """(first slot, one past the last slot, deadline index) of a job's units (paper's active-job model)."""
    submit_slot = config.slot_of(job.submit_s)
    start = max(first_slot, submit_slot)
    end_position = math.ceil((job.submit_s - config.epoch_s + job.length_s) / config.slot_s)
    end = max(start + 1, min(end_position, start + 10 * config.max_deadline_slots + 1))
    if config.policy in UNIFORM_DEADLINE_POLICIES:
        deadline = config.deadline_slots
    else:
        deadline = max(0, min(config.slot_of(job.deadline_s) - submit_slot, config.max_deadline_slots))
    return start, end, deadline


def tick(
    now_s: float,
    jobs: JobQueue | Iterable[Job],
    state: PolicyState,
    config: ControllerConfig,
    carbon_window: CarbonWindow | SignalUnavailable | None = None,
) -> tuple[Decision, PolicyState]:
    """Decide slot floor((now_s - epoch_s)/slot_s): returns (the decision, the state to save).

    ``jobs``: every job not yet done or failed, as a :class:`~autoscaler.core.edf.JobQueue` on the
    config's slots (read, never changed: the caller applies the decision with ``JobQueue.update``)
    or any iterable of jobs (built into one, O(n log n)). Jobs not yet counted
    (``PolicyState.counted_seq``) whose submit slot has come join the policy's work now. In the
    first slot, after undecided slots and after a policy change (``rebuild_cause``) the policy's
    work is rebuilt from the active jobs instead (``rebuild_future``) and the policy starts from no
    queued work (hold keeping what it learned of the load across undecided slots). On a JobQueue a
    slot costs O(log n + jobs arrived + released + missed), n the queued jobs, and a rebuild the
    whole queue once.

    ``carbon_window``: for hold with ``config.carbon`` (hold+carbon), the signal over slots t..t+3D
    (:class:`CarbonWindow`), or why there is none (:class:`SignalUnavailable`; None: "not_given"),
    in which case the slot is hold's carbon-blind decision (``reason`` "no_signal"). Ignored
    without ``config.carbon``.

    Raises ConfigError if the slot is not after ``state.last_slot``, the queue is on other slots or
    the window is not (3D+1,) finite values >= 0.
    """
    queue = as_queue(jobs, config)
    slot = config.slot_of(now_s)
    if slot <= state.last_slot:
        raise ConfigError(f"slot {slot} was already decided (last decided: {state.last_slot})")
    nu = config.nu
    arrived, counted_seq, uncounted = _arrivals(queue, state, slot, config)
    cause = rebuild_cause(state, slot, config)
    if cause is None:
        future = _with_units(state.future, arrived, slot, config)
    else:
        # The saved work no longer describes the jobs: slots went undecided (jobs finished,
        # arrived and came due meanwhile) or the policy changed (its work vector has another
        # shape). The policy's work is rebuilt from the active jobs' remaining work, spread to
        # their deadlines (``rebuild_future``); every active job is counted once, now. Tenants'
        # shares are irrevocable and survive; across downtime hold keeps what it learned of the
        # load (``HoldState.restarted``) and the cost watch goes on; a new policy starts afresh.
        gap = cause == "gap"
        state = PolicyState(
            last_slot=state.last_slot,
            tenants=state.tenants,
            tenant_demands=state.tenant_demands,
            dominant_shares=state.dominant_shares,
            released_due=state.released_due,
            hold=state.hold.restarted() if gap and state.hold is not None else None,
            carbon=state.carbon.restarted() if gap and state.carbon is not None else None,
            follow_watch=state.follow_watch if gap else FollowWatch(),
        )
        future = rebuild_future(queue.jobs(), slot, config)
    arrivals = np.array(future.pop(slot, (0.0,) * (nu + 1)))
    for s in [s for s in future if s < slot]:  # none after a rebuild; kept for states saved before it
        del future[s]
    gcp_state = state.gcp or GcpState.empty(nu)
    vfw_state = state.vfw
    hold_state = state.hold
    carbon_state = state.carbon
    carbon: CarbonDecision | None = None
    work = None
    load = float(arrivals.sum())
    if config.policy == "follow":
        capacity = load
        policy_reason = _follow_reason(load)
    elif config.policy == "hold" and config.carbon:
        before_carbon = carbon_state or CarbonState.empty(config.deadline_slots, config.cost)
        params = replace(config.cost, max_servers=None)
        window = carbon_window if isinstance(carbon_window, CarbonWindow) else None
        carbon, carbon_state = carbon_step(
            before_carbon,
            load,
            config.deadline_slots,
            params,
            None if window is None else window.values,
            None if window is None else window.reference,
        )
        capacity, work = carbon.capacity, carbon.assigned
        missing = None if window is not None else carbon_window or SignalUnavailable("not_given", "no signal was handed to the slot")
        policy_reason = _carbon_reason(before_carbon, carbon_state, carbon, load, window, missing, params, config)
    elif config.policy == "hold":
        # The daemon clamps nodes to max_nodes itself, as for gcp; hold never asks beyond max(r_t, m_{t-1}).
        before = hold_state or HoldState.empty(config.deadline_slots, config.cost)
        params = replace(config.cost, max_servers=None)
        capacity, work, hold_state = hold_step(before, load, config.deadline_slots, params)
        policy_reason = _hold_reason(before, hold_state, load, capacity, work, params)
    elif config.policy == "vfw":
        before = vfw_state or VfwState.empty(config.deadline_slots)
        capacity, vfw_state = vfw_step(before, load, config.deadline_slots, config.vfw_delta)
        policy_reason = _vfw_reason(before, vfw_state, capacity, config)
    else:
        capacity, gcp_state = gcp_step(gcp_state, arrivals, replace(config.cost, max_servers=None))
        policy_reason = _gcp_reason(gcp_state, capacity, config.policy)
    tenants, tenant_demands, dominant_shares = arrive_tenants(state, arrived, slot, config)
    dispatched = dispatch(
        slot,
        capacity,
        queue,
        config,
        dict(zip(tenants, dominant_shares)),
        last_slot=state.last_slot,
        arrived=arrived,
        released_due=state.released_due,
    )
    decision = Decision(
        slot=slot,
        capacity=capacity,
        assigned=capacity if work is None else work,
        nodes=dispatched.nodes,
        release=dispatched.release,
        late=dispatched.late,
        at_risk=dispatched.at_risk,
        queue_depth=dispatched.queue_depth,
        running=dispatched.running,
        rounding_node_slots=dispatched.nodes - capacity,
        overloaded=dispatched.overloaded,
        nodes_wanted=dispatched.nodes_wanted,
        missed=dispatched.missed,
        missed_by_tenant=dispatched.missed_by_tenant,
        nodes_by_tenant=dispatched.nodes_by_tenant,
        load=load,
    )
    reason, why = _node_reason(dispatched, queue, config, policy_reason)
    if cause in ("gap", "policy"):
        was = f"{count_text(slot - state.last_slot - 1, 'slot')} went undecided" if cause == "gap" else "the policy changed"
        why += f"; {was}, so the policy's work was rebuilt from the {count_text(len(queue), 'active job')}"
    decision = replace(decision, reason=reason, why=why)
    if carbon is not None:
        decision = _with_carbon(decision, carbon, carbon_window, reason, policy_reason)
    watch = state.follow_watch.step(decision.capacity, decision.assigned, decision.load, config.cost)
    if watch.worse:
        decision = replace(decision, worse_than_follow=True)
        if not state.follow_watch.worse:
            decision = replace(
                decision,
                warning=f"{config.policy_name} has cost {watch.policy_cost + config.cost.beta * watch.last_capacity:.6g} "
                f"over its slots so far (servers switched off after the last), more than follow the workload "
                f"would have ({watch.follow_cost + config.cost.beta * watch.last_load:.6g}); its deferral is not paying here",
            )
    released_due = frozenset(job_id for job_id in dispatched.release if start_by_slot(queue.get(job_id), config) == slot)
    return decision, PolicyState(
        last_slot=slot,
        gcp=gcp_state,
        future=future,
        counted_seq=counted_seq,
        vfw=vfw_state,
        policy_key=config.policy_key,
        tenants=tenants,
        tenant_demands=tenant_demands,
        dominant_shares=dominant_shares,
        uncounted=uncounted,
        hold=hold_state,
        follow_watch=watch,
        released_due=released_due,
        carbon=carbon_state,
    )


def _arrivals(queue: JobQueue, state: PolicyState, slot: int, config: ControllerConfig) -> tuple[list[Job], int, frozenset[str]]:
    """(jobs counted for the first time in ``slot``, the new ``counted_seq``, the new ``uncounted``).

    A job with a seq above ``state.counted_seq`` is seen now: counted if its submit slot has come,
    else kept in ``uncounted`` until it does. A job without a seq is counted in the first slot
    decided at or after its submit slot: now iff its submit slot is in (``state.last_slot``, ``slot``].
    Cost: O(log n + the jobs returned + uncounted).
    """
    since = None if state.last_slot < 0 else state.last_slot + 1
    if state.counted_seq < 0:  # UNKNOWN_SEQ: the no-seq rule for every job, once
        top = queue.max_seq()
        later = frozenset(j.job_id for j in queue.submitted_in(slot + 1, None) if j.seq is not None)
        return queue.submitted_in(since, slot), 0 if top is None else top, later
    found = {j.job_id: j for j in queue.submitted_in(since, slot) if j.seq is None}
    counted_seq = state.counted_seq
    later: set[str] = set()
    for job_id in state.uncounted:
        job = queue.get(job_id)
        if job is not None:
            if config.slot_of(job.submit_s) <= slot:
                found[job_id] = job
            else:
                later.add(job_id)
    for job in queue.arrived_after(state.counted_seq):
        counted_seq = max(counted_seq, job.seq)
        if config.slot_of(job.submit_s) <= slot:
            found[job.job_id] = job
        else:
            later.add(job.job_id)
    return list(found.values()), counted_seq, frozenset(later)


def _with_units(future: dict[int, tuple[float, ...]], jobs: list[Job], slot: int, config: ControllerConfig) -> dict[int, tuple[float, ...]]:
    """``future`` with one unit per slot each of ``jobs`` would run from ``slot`` on (``job_units``)."""
    empty = (0.0,) * (config.nu + 1)
    touched: dict[int, list[float]] = {}
    for job in jobs:
        start, end, deadline = job_units(job, config, slot)
        for s in range(start, end):
            units = touched.get(s)
            if units is None:
                units = touched[s] = list(future.get(s, empty))
            units[deadline] += 1.0
    return {**future, **{s: tuple(units) for s, units in touched.items()}}


def rebuild_cause(state: PolicyState, slot: int, config: ControllerConfig) -> str | None:
    """Why ``tick`` rebuilds the policy's work from the active jobs in ``slot`` (``rebuild_future``):
    "start" (no slot decided yet), "policy" (``config.policy_key`` is not the state's), "gap" (a slot
    between ``state.last_slot`` and ``slot`` went undecided), or None (the slot after the last one)."""
    if state.last_slot < 0:
        return "start"
    if state.policy_key != config.policy_key:
        return "policy"
    return "gap" if slot > state.last_slot + 1 else None


def rebuild_future(jobs: Iterable[Job], slot: int, config: ControllerConfig) -> dict[int, tuple[float, ...]]:
    """The policy's work rebuilt from the active jobs alone in ``slot``: {slot >= ``slot``: units by
    deadline index, shape (nu+1,)}, as ``PolicyState.future`` holds it (``tick`` after downtime, a
    policy change, and at the first slot).

    Each job submitted by ``slot`` counts its remaining work, in slots of one unit each, and no more:

    * submitted in ``slot``: as in any slot (``job_units``), so a slot decided on time counts the
      same whether the state was rebuilt or not;
    * submitted earlier and running: one unit in each slot it still runs, ``slot`` up to the slot of
      released_s + length_s (none if that has passed; the job keeps its node anyway);
    * submitted earlier and queued: ell = ceil(length_s/slot_s) units (``job_length_slots``), the
      k-th due by max(start-by slot, ``slot``) + k, its real deadline (not the margin's);
    * done and failed jobs are not active and count nothing, nor does work of slots gone by.

    The older jobs' units are not piled on ``slot``. gcp, which holds each unit with its own
    deadline, is handed all of them now, each with the slots to its due slot (at most nu, gcp's
    horizon), and runs them at its flat rate, max_j Y_j/(j+1). The other policies give a unit they
    hold the one deadline D (hold, gcp-u, vfw) or run it at once (follow), so each unit must reach
    them by its latest slot, its due slot minus D (minus 0 for follow); they are handed over in that
    order at the flattest rate that is on time: the slopes of the least concave majorant of the
    count of units latest by each slot (GCP-OPT (7)'s shape, ``solve_gcp_opt``), non-increasing from
    rho = max_h (units latest by ``slot`` + h)/(h+1), in fractions of a unit. So no slot is handed
    more than rho, and a policy that runs what it holds at its flat rate (gcp-u, hold's r_t) asks for
    at most rho; for follow rho is the remaining work over the slots to its due slots, the largest
    such ratio over every horizon. Cost: O(n + u log u) for n active jobs with u units, once per
    rebuild.
    """
    now: list[Job] = []
    due_slots: list[int] = []
    longest = 10 * config.max_deadline_slots + 1  # job_units' cut
    for job in jobs:
        submit_slot = config.slot_of(job.submit_s)
        if submit_slot > slot:
            continue
        if submit_slot == slot:
            now.append(job)
        elif job.state == QUEUED:
            first = max(start_by_slot(job, config), slot)
            due_slots.extend(range(first, first + min(job_length_slots(job.length_s, config.slot_s), longest)))
        else:
            released_s = config.epoch_s + slot * config.slot_s if job.released_s is None else job.released_s
            end = math.ceil((released_s - config.epoch_s + job.length_s) / config.slot_s)
            due_slots.extend(range(slot, min(end, slot + longest)))
    future = _with_units({}, now, slot, config)
    if not due_slots:
        return future
    uniform = config.policy in UNIFORM_DEADLINE_POLICIES
    due = np.sort(np.array(due_slots, dtype=np.int64))
    if config.policy == "gcp":
        latest = np.zeros_like(due)  # gcp holds each unit with its own deadline: all of it goes now
    else:
        latest = np.maximum(due - (config.deadline_slots if uniform else 0), slot) - slot  # sorted, as due is
    on_time = np.cumsum(np.bincount(latest))  # units latest by each slot from now
    handed = np.cumsum(solve_gcp_opt(on_time.astype(float), 0.0))  # >= on_time: the majorant
    whole = np.round(handed)
    handed = np.where(np.abs(handed - whole) <= 1e-9 * on_time[-1], whole, handed)  # no rounding dust
    # Unit i (latest order) is [i, i+1) on the axis of work handed over, slot h hands [handed[h-1],
    # handed[h]); cut the axis at both sets of edges: each piece is part of one unit in one slot,
    # never after the unit's latest slot (on_time, below the majorant, has reached i+1 there).
    n = due.shape[0]
    edges = np.union1d(np.arange(n + 1, dtype=float), np.minimum(handed, n))
    low, high = edges[:-1], edges[1:]
    unit = np.minimum(low.astype(np.int64), n - 1)
    given = np.minimum(np.searchsorted(handed, low, side="right"), latest[unit])
    index = np.full(unit.shape[0], config.deadline_slots) if uniform else np.clip(due[unit] - slot - given, 0, config.nu)
    units = np.zeros((int(given.max()) + 1, config.nu + 1))
    np.add.at(units, (given, index), high - low)
    empty = (0.0,) * (config.nu + 1)
    for offset in np.flatnonzero(units.sum(axis=1)):
        s = slot + int(offset)
        future[s] = tuple(float(a + b) for a, b in zip(future.get(s, empty), units[offset]))
    return future


def _follow_reason(load: float) -> tuple[str, str]:
    return "follow", f"follow runs m_t = L_t = {load:.4g}, the work that arrived for this slot"


def _gcp_reason(after: GcpState, capacity: float, policy: str) -> tuple[str, str]:
    work, slots = binding_deadline(np.array(after.unassigned))
    return "deadlines", (
        f"{policy} runs m_t = {capacity:.4g} = max_j Y_j/(j+1), the flat rate that meets every queued deadline "
        f"(GCP-OPT (7)'s first slope): {work:.4g} units of work are due within {count_text(slots, 'slot')}"
    )


def _hold_reason(
    before: HoldState, after: HoldState, load: float, capacity: float, assigned: float, params: CostParams
) -> tuple[str, str]:
    forced, work, slots = forced_capacity(before, load)
    due = f"{work:.4g} units of work are due within {count_text(slots, 'slot')}" if slots else "no unit of work is queued in the policy"
    if capacity <= forced * (1 + 1e-12) + 1e-12:
        return "deadlines", f"hold runs m_t = r_t = {capacity:.4g} = max_j Y_j/(j+1), what the deadlines force: {due}"
    how = "inside a hold its guard allowed" if after.holding else "by its rules' hold level"
    return "held", (
        f"hold keeps m_t = {capacity:.4g} on (m_{{t-1}} = {before.capacity:.4g}) where the deadlines force r_t = {forced:.4g} "
        f"({due}): a valley held {how}, leading rule '{leading_rule(after, params)}'; x_t = {assigned:.4g} of it runs queued work"
    )


def _carbon_reason(
    before: CarbonState,
    after: CarbonState,
    step: CarbonDecision,
    load: float,
    window: CarbonWindow | None,
    missing: SignalUnavailable | None,
    params: CostParams,
    config: ControllerConfig,
) -> tuple[str, str]:
    """hold+carbon's rule for m_t in words: the signal now against the day's mean and the window's
    cleanest slot ("carbon"); hold's own reason when the signal is flat; "no_signal" and why not."""
    _, hold_why = hold_words = _hold_reason(before.hold, after.hold, load, step.capacity, step.assigned, params)
    span = duration_text(window_slots(config.deadline_slots) * config.slot_s)
    if window is None:
        assert missing is not None
        return "no_signal", f"{CARBON_NAME}: no signal for this slot ({missing.reason}: {missing.detail}), so hold's carbon-blind decision: {hold_why}"
    now = f"{window.value_now:.4g} {window.unit} now"
    if step.mode == "flat":
        return hold_words[0], f"{CARBON_NAME}: the signal is flat over the next {span} ({now}), so hold's decision: {hold_why}"
    word = "cheapest" if window.unit.startswith("$") else "cleanest"
    if step.cheapest_in_slots == 0:
        where = f"this slot is the {word} in the next {span}"
    else:
        where = f"the {word} slot in the next {span} is in {duration_text(step.cheapest_in_slots * config.slot_s)} ({step.weight_min:.2f}x)"
    queued = float(before.queue[1:].sum()) + load
    ahead = window.values.shape[0] - 1
    known = ahead - window.forecast_slots - window.persisted_slots
    return "carbon", (
        f"{CARBON_NAME}: {now}, {step.weight_now:.2f}x the day's mean; {where}; runs {step.assigned:.4g} of {queued:.4g} queued "
        f"(m_t = {step.capacity:.4g}); the {count_text(ahead, 'slot')} ahead: {known} known, {window.forecast_slots} forecast, "
        f"{window.persisted_slots} by persistence"
    )


def _with_carbon(
    decision: Decision, step: CarbonDecision, carbon_window: CarbonWindow | SignalUnavailable | None, reason: str, policy_reason: tuple[str, str]
) -> Decision:
    """``decision`` with hold+carbon's fields; when a node rule bound the slot, its why keeps the carbon words too."""
    window = carbon_window if isinstance(carbon_window, CarbonWindow) else None
    fallback = ""
    if window is None:
        fallback = carbon_window.reason if isinstance(carbon_window, SignalUnavailable) else "not_given"
    why = decision.why if reason == policy_reason[0] else f"{decision.why}; {policy_reason[1]}"
    used = step.mode == "carbon"
    return replace(
        decision,
        why=why,
        carbon_mode=step.mode,
        carbon_value=None if window is None else float(window.value_now),
        carbon_unit="" if window is None else window.unit,
        carbon_weight_now=step.weight_now if used else None,
        carbon_weight_min=step.weight_min if used else None,
        carbon_cheapest_in_slots=step.cheapest_in_slots if used else None,
        carbon_fallback=fallback,
    )


def _vfw_reason(before: VfwState, after: VfwState, capacity: float, config: ControllerConfig) -> tuple[str, str]:
    need_now, allowed = step_bounds(before, after, config.deadline_slots, config.vfw_delta)
    if after.valley > 0:
        return "valley", (
            f"vfw fills a valley (slot {after.valley} of {config.vfw_delta + 1}, VOPT (5)): m_t = {capacity:.4g} of the "
            f"{allowed:.4g} units released and not yet run, {need_now:.4g} of them due now"
        )
    return "deadlines", (
        f"vfw runs m_t = {capacity:.4g} (LOPT (4)): {need_now:.4g} units released {config.deadline_slots} slots ago are due now, "
        f"and it runs no more than the {allowed:.4g} released by {count_text(config.vfw_delta, 'slot')} ago, spread over "
        f"{config.deadline_slots + 1} slots"
    )


def _node_reason(dispatched: Dispatch, queue: JobQueue, config: ControllerConfig, policy_reason: tuple[str, str]) -> tuple[str, str]:
    """The rule that bound the nodes (``REASONS``, first to last), else the policy's own for m_t."""
    capacity, nodes = dispatched.capacity, dispatched.nodes
    wanted = math.ceil(capacity - 1e-9)
    running_before = dispatched.running - len(dispatched.release)
    if dispatched.overloaded:
        free = config.max_nodes - running_before
        released = Counter(queue.get(job_id).tenant for job_id in dispatched.release)
        shares = ", ".join(f"{tenant} {count}" for tenant, count in sorted(released.items(), key=lambda kv: (-kv[1], kv[0])))
        held = ", ".join(f"{tenant} {count}" for tenant, count in sorted(dispatched.nodes_by_tenant.items(), key=lambda kv: (-kv[1], kv[0])))
        return "overloaded", (
            f"{dispatched.nodes_wanted} nodes wanted (ceil(m_t) = {wanted}; {running_before} running and {dispatched.due} due), "
            f"more than max_nodes = {config.max_nodes}: the {count_text(max(free, 0), 'free node')} went by dynamic DRF share"
            + (f", released now: {shares}" if shares else ", none free")
            + (f"; nodes held: {held}" if held else "")
            + (
                f"; not all can be on time: the jobs that can still meet their deadlines went first "
                f"({len(dispatched.release) - dispatched.overdue_released} released), then the overdue "
                f"({dispatched.overdue_released} of {dispatched.overdue} released)"
                if dispatched.overdue
                else ""
            )
        )
    if wanted > config.max_nodes:
        return "max_nodes", f"m_t = {capacity:.4g} wants {count_text(wanted, 'node')}, capped at max_nodes = {config.max_nodes}"
    if nodes > max(wanted, config.min_nodes):
        beyond = dispatched.release[max(0, dispatched.policy_nodes - running_before) :]
        if beyond:
            first = queue.get(beyond[0])
            early = any(start_by_slot(queue.get(job_id), config) > dispatched.slot for job_id in beyond)
            margin = count_text(config.release_margin_slots, "slot")
            when = f"due (their start-by slot within {margin}, or passed)" if early else "at (or past) their start-by slot"
            return "due_jobs", (
                f"nodes raised from {dispatched.policy_nodes} (ceil(m_t), m_t = {capacity:.4g}) to {nodes} for "
                f"{count_text(len(beyond), 'job')} {when}, first {first.job_id!r} (start-by slot {start_by_slot(first, config)})"
            )
        return "running", (
            f"nodes kept at {nodes}, above the {dispatched.policy_nodes} of m_t = {capacity:.4g}, for {count_text(running_before, 'job')} still running"
        )
    if nodes > wanted:
        return "min_nodes", f"m_t = {capacity:.4g} needs {count_text(wanted, 'node')}; min_nodes keeps {config.min_nodes} on"
    if nodes == 0 and capacity <= 0 and dispatched.queue_depth == 0:
        return "idle", "m_t = 0 and no job is queued or running: no nodes"
    return policy_reason


def explain(decision: Decision) -> str:
    """A few lines on one decision for an operator (``autoscaler explain --slot N``): m_t, x_t and
    nodes, the jobs released, late and missed, and the rule that bound it (``Decision.why``)."""
    lines = [
        f"slot {decision.slot}: m_t = {decision.capacity:.4g} servers, x_t = {decision.assigned:.4g}, L_t = {decision.load:.4g}; "
        f"{count_text(decision.nodes, 'node')}" + (f" ({decision.nodes_wanted} wanted)" if decision.nodes_wanted > decision.nodes else ""),
        f"released {count_text(len(decision.release), 'job')}{_ids(decision.release)}; late {len(decision.late)}{_ids(decision.late)}; "
        f"missed their start-by slot {len(decision.missed)}{_ids(decision.missed)}",
        f"after it: {count_text(decision.queue_depth, 'job')} queued ({decision.at_risk} with their start-by slot now or next), {decision.running} running",
    ]
    lines.append(f"why ({REASON_WORDS.get(decision.reason, 'not recorded')}): {decision.why or 'not recorded'}")
    if decision.carbon_mode:
        if decision.carbon_value is None:
            signal = f"none ({decision.carbon_fallback or 'not recorded'}): hold's carbon-blind decision"
        else:
            signal = f"{decision.carbon_value:.4g} {decision.carbon_unit} now"
            if decision.carbon_mode == "carbon":
                ahead = decision.carbon_cheapest_in_slots
                signal += (
                    f", w_t = {decision.carbon_weight_now:.3g}, the window's lowest w = {decision.carbon_weight_min:.3g} "
                    + ("in this slot" if not ahead else f"{count_text(ahead, 'slot')} ahead")
                )
            else:
                signal += ", flat over the window: hold's decision"
        lines.append(f"{CARBON_NAME} ({decision.carbon_mode}): signal {signal}")
    if decision.warning:
        lines.append(f"warning: {decision.warning}")
    return "\n".join(lines)


def _ids(job_ids: tuple[str, ...], shown: int = 5) -> str:
    if not job_ids:
        return ""
    more = f", ... ({len(job_ids) - shown} more)" if len(job_ids) > shown else ""
    return f" ({', '.join(job_ids[:shown])}{more})"



def arrive_tenants(
    state: PolicyState, jobs: Iterable[Job], slot: int, config: ControllerConfig
) -> tuple[tuple[str, ...], tuple[tuple[float, ...], ...], tuple[float, ...]]:
    """Dynamic DRF over tenants: each tenant arrives with its first job submitted by ``slot``.

    ``jobs``: the jobs not seen before (``tick`` passes those counted in this slot: a tenant's
    first job is among them, since every earlier job's tenant has arrived already).

    Returns (tenants, normalised demand vectors, dominant shares) in arrival order. A tenant's
    demand vector is its first job's (``demand_vector``); newcomers arrive in submit order, one
    linear-time step each (paper: dynamic DRF note, §4), with n = ``config.tenants_n``, or k
    once more than n have come (the late ones share what is left, which may be nothing).
    """
    tenants = list(state.tenants)
    demands = [np.array(d) for d in state.tenant_demands]
    shares = np.array(state.dominant_shares, dtype=float)
    present = set(tenants)
    for job in sorted(jobs, key=lambda j: (j.submit_s, j.job_id)):
        if job.tenant in present or config.slot_of(job.submit_s) > slot:
            continue
        vector = demand_vector(job, config)
        demands.append(vector / vector.max())
        tenants.append(job.tenant)
        present.add(job.tenant)
        _, shares = dynamic_drf_step(np.array(demands), shares, max(config.tenants_n, len(tenants)))
    return tuple(tenants), tuple(tuple(float(v) for v in d) for d in demands), tuple(float(x) for x in shares)
