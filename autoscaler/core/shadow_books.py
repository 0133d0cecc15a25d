"""Shadow mode's books: what the cluster ran beside EMR managed scaling, and the same figures of what a
policy would have run instead. Pure.

``run --shadow`` watches a cluster it never changes (``autoscaler.app.shadow_run``). Its jobs are the
cluster's own steps (:class:`ClusterStep`, every step ListSteps shows), each turned into a job by
:func:`step_job`; its *actual* figures are integrated here (:class:`ActualBooks`) from what EMR says:

* node-seconds: the TASK group's nodes, max(requested, running), sampled at each poll and held until
  the next (a step function: exact when every change is polled; managed scaling evaluates every 10 s,
  the default poll). Nodes are billed from the request, as the cluster twin bills them
  (``autoscaler.core.twin``); the twin's 60 s minimum per node is not applied (a count has no nodes);
* busy node-seconds: each step's run, EMR's StartDateTime to EndDateTime (to now while it runs), on
  one node: EMR does not say how many nodes a step's containers took;
* energy: the twin's power rule, idle power over every node-second and the busy power's extra over
  every busy node-second (``TwinConfig.idle_power_w``, ``busy_power_w``), so the actual and the
  counterfactual are priced alike; $: node-hours x ``price_per_node_hour``; kgCO2eq: each slot's
  energy x the carbon signal's g/kWh in that slot (None without a signal).

Times are Unix seconds (the cluster's clock); the books start at ``start_s``, a slot boundary.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from numbers import Real

import numpy as np

from autoscaler.core.errors import ConfigError
from autoscaler.core.learned import planned, runs_ended_by
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.twin import TwinBill, TwinConfig, energy_wh_between

FINAL_STEP_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED", "INTERRUPTED"})
"""EMR step states a step never leaves: its run is known in full."""

SHADOW_TENANT = "shadow"
"""The tenant every shadowed step is given: EMR does not say whose a step is."""


@dataclass(frozen=True)
class ClusterStep:
    """One EMR step as ListSteps or DescribeStep gives it: id, name, state, and its Timeline's
    CreationDateTime, StartDateTime and EndDateTime as Unix seconds (None where EMR does not say yet)."""

    step_id: str
    name: str
    state: str
    created_s: float
    start_s: float | None = None
    end_s: float | None = None

    @property
    def ended(self) -> bool:
        """Whether the step is in a state it never leaves (:data:`FINAL_STEP_STATES`)."""
        return self.state in FINAL_STEP_STATES

    @property
    def run_s(self) -> float | None:
        """How long it ran, s: EndDateTime - StartDateTime once ended; 0 for a step that ended without
        starting (cancelled while pending); None while it has not ended."""
        if not self.ended:
            return None
        if self.start_s is None or self.end_s is None:
            return 0.0
        return max(0.0, self.end_s - self.start_s)


def step_job(step: ClusterStep, *, start_s: float, slack_s: float, past_runs: list[tuple[float, float]] = (), quantile: float = 0.9) -> Job:
    """The job an ended step is to the counterfactual: submitted at its CreationDateTime (at
    ``start_s`` for a step created before the shadow started), true length its run
    (:attr:`ClusterStep.run_s`, ``Job.prior_length_s``, which the twin runs), planned at the
    ``quantile`` of ``past_runs`` ((start_s, end_s) of the runs of steps of the same name) that ended
    by its submission, as ``submit`` plans a job on its name's past runs, or at its true length when
    none had (a perfect estimate: the first run of each name flatters the counterfactual); due
    ``slack_s`` after submission + planned length (compare's deadline at D: ``slack_s`` = D x slot_s).
    Tenant :data:`SHADOW_TENANT`, one node. Raises ConfigError for a step not ended or a negative slack."""
    if step.run_s is None:
        raise ConfigError(f"step {step.step_id!r} is {step.state}: only an ended step has a length to play")
    if isinstance(slack_s, bool) or not isinstance(slack_s, Real) or not math.isfinite(slack_s) or slack_s < 0:
        raise ConfigError(f"shadow deadline: expected a finite slack >= 0 s, got {slack_s!r}")
    submit_s = max(float(step.created_s), float(start_s))
    true_s = step.run_s
    job = Job(step.step_id, step.name or step.step_id, SHADOW_TENANT, submit_s, submit_s + true_s + slack_s, true_s, StepSpec(), length_source="its run")
    runs_s = runs_ended_by(past_runs, submit_s)
    learned = planned(job, runs_s, quantile)
    if learned.length_s == true_s:
        return learned
    return Job(
        learned.job_id, learned.name, learned.tenant, submit_s, submit_s + learned.length_s + slack_s, learned.length_s, StepSpec(),
        prior_length_s=true_s, length_source=learned.length_source,
    )  # fmt: skip


@dataclass(frozen=True)
class UseFigures:
    """What a cluster used over a window: node-hours billed, $ (``cost_usd``), kWh, and kgCO2eq
    (``co2_kg``; None without a carbon signal)."""

    node_hours: float
    cost_usd: float
    energy_kwh: float
    co2_kg: float | None

    def minus(self, other: UseFigures) -> UseFigures:
        """These figures less ``other``'s, each (kgCO2eq None unless both have it)."""
        co2 = None if self.co2_kg is None or other.co2_kg is None else self.co2_kg - other.co2_kg
        return UseFigures(self.node_hours - other.node_hours, self.cost_usd - other.cost_usd, self.energy_kwh - other.energy_kwh, co2)


@dataclass(frozen=True)
class ShadowFigures:
    """The running comparison at ``until_s`` (Unix s, a slot's end): the cluster as it ran
    (``actual``) and the policy's counterfactual (``shadow``) over the same window from the books'
    start; ``difference`` is shadow - actual (negative: the policy would have used less)."""

    until_s: float
    actual: UseFigures
    shadow: UseFigures

    @property
    def difference(self) -> UseFigures:
        return self.shadow.minus(self.actual)

    def percent(self, figure: str) -> float | None:
        """``figure`` (a field of UseFigures) of the shadow against the actual in %: -10 is 10 % less;
        None when the actual's is 0 or not known."""
        actual, shadow = getattr(self.actual, figure), getattr(self.shadow, figure)
        if actual is None or shadow is None or actual == 0:
            return None
        return 100.0 * (shadow / actual - 1.0)

    def to_dict(self) -> dict:
        return {"until_s": self.until_s, "actual": asdict(self.actual), "shadow": asdict(self.shadow), "difference": asdict(self.difference)}


def slot_co2_kg(power_intervals, start_s: float, slot_s: float, g_per_kwh: np.ndarray) -> float:
    """kgCO2eq of the power drawn over ``power_intervals`` ((start_s, end_s, power_w) each): each slot's
    Wh from ``start_s`` x its ``g_per_kwh`` ((n_slots,), NaN: not covered, counted as 0)."""
    values = np.asarray(g_per_kwh, dtype=float)
    used_wh = energy_wh_between(power_intervals, start_s + slot_s * np.arange(len(values) + 1))
    return float(np.nansum(used_wh * values) / 1e6)


def twin_use(bill: TwinBill, start_s: float, slot_s: float, price_per_node_hour: float, g_per_kwh: np.ndarray | None) -> UseFigures:
    """A twin's bill as UseFigures (node-hours with the twin's 60 s minimum per node), kgCO2eq over the
    slots of ``g_per_kwh`` from ``start_s`` (None: no signal)."""
    co2 = None if g_per_kwh is None else slot_co2_kg(bill.power_intervals, start_s, slot_s, g_per_kwh)
    return UseFigures(bill.billed_node_s / 3600.0, bill.billed_node_s / 3600.0 * price_per_node_hour, bill.energy_wh / 1000.0, co2)


@dataclass
class ActualBooks:
    """The cluster's own use from ``start_s`` (Unix s), from polls of its TASK group (:meth:`nodes`)
    and its steps' runs (:meth:`run`); see the module's docstring for the rules. ``config`` gives the
    power and the price."""

    start_s: float
    config: TwinConfig
    _changes: list[tuple[float, int]] = field(default_factory=list)  # (time_s, nodes) at each change, in time order
    _runs: dict[str, tuple[float, float | None]] = field(default_factory=dict)  # step id -> (start_s, end_s or None)
    _closed_s: float | None = None  # before it, what was used is in _closed (and no longer in _changes and _runs)
    _closed: UseFigures | None = None

    def nodes(self, now_s: float, nodes: int) -> None:
        """The TASK group had ``nodes`` (a whole number >= 0) at ``now_s``; held until the next poll.
        Raises ConfigError for a count that is not a whole number >= 0 or a time before the last one."""
        if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 0:
            raise ConfigError(f"shadow: TASK nodes must be a whole number >= 0, got {nodes!r}")
        if self._changes and now_s < self._changes[-1][0]:
            raise ConfigError(f"shadow: a poll at {now_s!r} s is before the last one at {self._changes[-1][0]!r} s")
        if not self._changes or self._changes[-1][1] != nodes:
            self._changes.append((float(now_s), int(nodes)))

    def run(self, step_id: str, start_s: float | None, end_s: float | None) -> None:
        """Step ``step_id`` ran from ``start_s`` to ``end_s`` (None: still running; a step never started
        adds nothing). A later call for the same step replaces the earlier."""
        if start_s is not None:
            self._runs[step_id] = (float(start_s), None if end_s is None else float(end_s))

    def power_intervals(self, until_s: float) -> list[tuple[float, float, float]]:
        """(start_s, end_s, power_w) of the nodes and runs within [start_s, until_s] not yet closed (:meth:`close`)."""
        config = self.config
        intervals = []
        from_s = self.start_s if self._closed_s is None else self._closed_s
        for (time_s, nodes), following in zip(self._changes, [*self._changes[1:], (until_s, 0)]):
            begin, end = max(time_s, from_s), min(following[0], until_s)
            if end > begin and nodes:
                intervals.append((begin, end, nodes * config.idle_power_w))
        extra_w = config.busy_power_w - config.idle_power_w
        for start_s, end_s in self._runs.values():
            begin, end = max(start_s, from_s), min(until_s if end_s is None else end_s, until_s)
            if end > begin:
                intervals.append((begin, end, extra_w))
        return intervals

    def close(self, before_s: float, slot_s: float, g_per_kwh: np.ndarray | None = None) -> None:
        """Fold what was used before ``before_s`` into totals and forget the polls and runs that ended
        before it, so that a shadow's books stay the size of what is under way, however long it runs.
        Every later :meth:`use` must be at or after ``before_s``, with the same signal (``g_per_kwh``,
        from ``start_s``) over the slots before it."""
        from_s = self.start_s if self._closed_s is None else self._closed_s
        if before_s <= from_s:
            return
        self._closed = self.use(before_s, slot_s, g_per_kwh)
        self._closed_s = float(before_s)
        last = max((i for i, (time_s, _) in enumerate(self._changes) if time_s <= before_s), default=None)
        if last is not None:
            self._changes = [(before_s, self._changes[last][1]), *self._changes[last + 1 :]]
        self._runs = {step_id: run for step_id, run in self._runs.items() if run[1] is None or run[1] > before_s}

    def use(self, until_s: float, slot_s: float, g_per_kwh: np.ndarray | None = None) -> UseFigures:
        """UseFigures from ``start_s`` to ``until_s``; kgCO2eq over the slots of ``g_per_kwh`` ((n_slots,)
        from ``start_s``; None: no signal)."""
        from_s = self.start_s if self._closed_s is None else self._closed_s
        node_s = 0.0
        for (time_s, nodes), following in zip(self._changes, [*self._changes[1:], (until_s, 0)]):
            node_s += nodes * max(0.0, min(following[0], until_s) - max(time_s, from_s))
        intervals = self.power_intervals(until_s)
        energy_wh = sum((end - begin) * power_w for begin, end, power_w in intervals) / 3600.0
        co2 = None if g_per_kwh is None else slot_co2_kg(intervals, self.start_s, slot_s, g_per_kwh)
        use = UseFigures(node_s / 3600.0, node_s / 3600.0 * self.config.price_per_node_hour, energy_wh / 1000.0, co2)
        if self._closed is None:
            return use
        co2 = None if use.co2_kg is None or self._closed.co2_kg is None else use.co2_kg + self._closed.co2_kg
        return UseFigures(use.node_hours + self._closed.node_hours, use.cost_usd + self._closed.cost_usd, use.energy_kwh + self._closed.energy_kwh, co2)
