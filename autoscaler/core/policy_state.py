"""What the controller carries from one slot to the next (:class:`PolicyState`), saved with the
queue in one transaction, and the running comparison with follow (:class:`FollowWatch`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from autoscaler.core.model import CostParams
from autoscaler.core.policies.carbon import CarbonState
from autoscaler.core.policies.gcp import GcpState
from autoscaler.core.policies.hold import HoldState
from autoscaler.core.policies.vfw import VfwState

__all__ = ["UNKNOWN_SEQ", "FollowWatch", "PolicyState"]


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
    work y and m_{t-1}. ``hold``: hold's queues, capacities and its rules' costs. ``future``: units still to arrive one slot at a time (the
    work handed over after a rebuild, ``rebuild_future``), {slot: [units by deadline, shape (nu+1,)]}.
    ``flow``: the units per slot of the jobs counted so far that are still running their course, by
    deadline index (nu+1,) as of ``last_slot``, and ``flow_ends``: {slot: the units that leave the
    flow from that slot on}; so a job adds two entries however long it runs (``slot_work.flow_at``).
    ``tenants``: dynamic DRF's agents in arrival
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
    ``last_nodes``: the task nodes the last decision asked for (None: not known, as after downtime);
    under node-seconds no more jobs than that can be holding a node now. ``recent_arrivals``: L, the
    work that arrived in each slot decided, newest first, for a day and D+1 slots
    (``controller.arrival_forecast``).
    """

    last_slot: int = -1
    gcp: GcpState | None = None
    future: dict[int, tuple[float, ...]] = field(default_factory=dict)
    flow: tuple[float, ...] = ()
    flow_ends: dict[int, tuple[float, ...]] = field(default_factory=dict)
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
    last_nodes: int | None = None
    recent_arrivals: tuple[float, ...] = ()

    def to_json(self) -> dict:
        return {
            "last_slot": self.last_slot,
            "unassigned": list(self.gcp.unassigned) if self.gcp else None,
            "previous_capacity": self.gcp.previous_capacity if self.gcp else 0.0,
            "future": {str(k): list(v) for k, v in sorted(self.future.items())},
            "flow": list(self.flow),
            "flow_ends": {str(k): list(v) for k, v in sorted(self.flow_ends.items())},
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
            "last_nodes": self.last_nodes,
            "recent_arrivals": list(self.recent_arrivals),
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
            flow=tuple(float(u) for u in document.get("flow", ())),
            flow_ends={int(k): tuple(float(u) for u in v) for k, v in document.get("flow_ends", {}).items()},
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
            last_nodes=int(document["last_nodes"]) if document.get("last_nodes") is not None else None,
            recent_arrivals=tuple(float(x) for x in document.get("recent_arrivals", ())),
        )


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
