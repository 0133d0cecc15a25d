"""What one slot decided (:class:`Decision`), the rule that bound it (:data:`REASONS`), and
:func:`explain`, a decision in a few lines for an operator. The decision log holds these, one per slot."""

from __future__ import annotations

from dataclasses import dataclass, field

from autoscaler.core.errors import ConfigError, StoreError
from autoscaler.core.policies import POLICY_TABLE
from autoscaler.core.policies.carbon import NAME as CARBON_NAME
from autoscaler.core.readable import count_text

__all__ = ["NODE_REASONS", "POLICY_REASONS", "REASONS", "REASON_WORDS", "Decision", "explain"]

NODE_REASONS = ("due_jobs", "running", "min_nodes", "max_nodes", "overloaded")
"""The rules on nodes that can bind a slot after the policy's own (see :data:`REASONS`)."""

POLICY_REASONS = tuple(
    dict.fromkeys(
        reason
        for rules in ([p.online for p in POLICY_TABLE.values()], [p.carbon_online for p in POLICY_TABLE.values()])
        for rule in rules
        if rule is not None
        for reason in rule.reasons
    )
)
"""The policies' own rules for m_t, from the policy table: the policies', then their carbon variants'."""

REASONS = ("idle", *POLICY_REASONS, *NODE_REASONS)
"""What bound a slot's m_t or nodes (``Decision.reason``), the first that applies of, from last to first:

* ``overloaded``: jobs are queued and the nodes wanted (ceil(m_t), or the running jobs plus those due)
  exceed ``max_nodes``, or (under "node-seconds") the cap binds ahead: the queued work cannot all
  start by its start-by slots on the nodes the arriving work leaves spare: not all can be on time, so the free nodes went first to the jobs that can
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
  hold's own ``deadlines`` or ``held``; under a forecast whose gains are all inside its error band
  (mode "hedged"), or over its regret cap against follow (mode "capped"), it is hold at the short
  deadline min(D, max(W, ``[carbon] short_deferral_s``)), W = 2*beta/e0, and gives that hold's
  ``deadlines`` or ``held``.
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
    ``overloaded``: jobs are queued and ``nodes_wanted`` exceeds ``max_nodes``, or the cap binds ahead
    (``autoscaler.core.release``), so free nodes went to tenants by dynamic DRF share. ``missed``: jobs that
    missed their start-by slot in this slot (held past it, or found past it), counted once;
    ``missed_by_tenant`` counts them per tenant. ``nodes_by_tenant``: nodes held by each tenant's
    running and just-released jobs. ``load``: L_t, the units of work that arrived for this slot
    (what "follow the workload" would have run), kept for the energy report.
    ``worse_than_follow``: the policy's m_t, x_t have cost more than follow over the slots decided
    since its state began (:class:`FollowWatch`); ``warning`` says so, in the slot it first happens.
    ``reason``: which rule bound m_t or the nodes, one of ``REASONS`` ("" in logs written before
    decisions explained themselves); ``why``: that, in one sentence with its figures.
    ``solve_ms``: wall time of the decision, filled in by the daemon (``tick`` reads no clock).
    ``held_for_steps``: jobs the slot chose and left queued because EMR holds at most
    ``autoscaler.core.release.MAX_ACTIVE_STEPS`` steps PENDING and RUNNING, in the order they were
    chosen; the daemon adds them between slots as steps end (``SlotRunner.release_between_slots``).

    hold+carbon only (``ControllerConfig.carbon``; carbon-blind decisions and older logs keep the
    defaults): ``carbon_mode``, how the slot was decided (``autoscaler.core.policies.carbon.MODES``:
    "carbon", "flat", "no_signal", "hedged", "capped"; "" when carbon-blind); ``carbon_value`` and ``carbon_unit``: the
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
    held_for_steps: tuple[str, ...] = ()
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
            "held_for_steps": list(self.held_for_steps),
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
            held_for_steps=read("held_for_steps", tuple, ()),
            carbon_mode=read("carbon_mode", str, ""),
            carbon_value=read("carbon_value", float, None, optional=True),
            carbon_unit=read("carbon_unit", str, ""),
            carbon_weight_now=read("carbon_weight_now", float, None, optional=True),
            carbon_weight_min=read("carbon_weight_min", float, None, optional=True),
            carbon_cheapest_in_slots=read("carbon_cheapest_in_slots", int, None, optional=True),
            carbon_fallback=read("carbon_fallback", str, ""),
        )


_KIND_WORDS = {int: "a whole number", float: "a number", bool: "true or false", str: "text", tuple: "a list of job ids", dict: "an object of counts"}


def explain(decision: Decision) -> str:
    """A few lines on one decision for an operator (``autoscaler explain --slot N``): m_t, x_t and
    nodes, the jobs released, late and missed, and the rule that bound it (``Decision.why``)."""
    lines = [
        f"slot {decision.slot}: m_t = {decision.capacity:.4g} servers, x_t = {decision.assigned:.4g}, L_t = {decision.load:.4g}; "
        f"{count_text(decision.nodes, 'node')}" + (f" ({decision.nodes_wanted} wanted)" if decision.nodes_wanted > decision.nodes else ""),
        f"released {count_text(len(decision.release), 'job')}{_ids(decision.release)}; {len(decision.late)} of them late{_ids(decision.late)}; "
        f"{len(decision.missed)} missed their start-by slot{_ids(decision.missed)}"
        + (f"; {count_text(len(decision.held_for_steps), 'job')} held for EMR's step limit{_ids(decision.held_for_steps)}" if decision.held_for_steps else ""),
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
            elif decision.carbon_mode == "hedged":
                signal += ", no forecast gain beyond its error bands: the short deferral (hold at a short deadline)"
            elif decision.carbon_mode == "capped":
                signal += ", over the regret cap against follow: the short deferral (hold at a short deadline)"
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
