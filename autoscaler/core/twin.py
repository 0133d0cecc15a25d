"""The cluster twin's rules in event time: an EMR TASK group as an operator is billed for it. Pure.

Times are seconds on the caller's clock (a replay's simulated Unix seconds); nothing here reads a
clock. The rules (issue 21; AWS's EMR best practices, managed-scaling section, and the EMR
management guide):

* whole nodes; a node requested is usable ``provision_s`` later (EMR: about 5-6 minutes from the
  resize to RUNNING), and is powered and billed from the request;
* a resize down removes nodes without a job first (booting ones, newest first, then idle ones);
  a node running a job is decommissioned gracefully: it takes no new job and goes when its job
  ends, or ``decommission_timeout_s`` after the resize (YARN's
  ``yarn.resourcemanager.nodemanager-graceful-decommission-timeout-secs``, 3,600 s by default),
  when its job is killed, counted, and run again from the start on another node;
* a job runs on its w nodes (``Job.nodes``) at once for its true length: the length it was
  SUBMITTED with (``--length-s``, or the size model's; never the length it is planned at, which a
  learned estimate may have replaced) x lognormal(0, sigma) drawn from (seed, job NAME), x
  lognormal(0, jitter) drawn from (seed, job id). The same job has the same true length whatever
  releases it, and when; a recurring job (one name, run day after day) is off by the same factor on
  every run, as 3Sigma (EuroSys 2018) finds recurring jobs predictable from their history, and
  differs run to run only by the smaller jitter (default 0). A trace's job is named by its id, so
  there the draw is per job, as it always was. It starts only when w idle usable nodes are there
  (gang start: a Spark or MapReduce application given part of its containers would hold them and
  wait), and a drain timeout on any of its nodes kills the whole run: every node of it is freed and
  it runs again from the start;
* at most ``step_concurrency`` steps have started and not ended (EMR's StepConcurrencyLevel,
  1..256); a step waits (PENDING) for that and for w idle usable nodes, first added first, a step
  whose w nodes are not there passed by later ones whose nodes are (YARN gives free containers to
  the applications that can use them);
* per node state, power from the power model: booting and idle draw its idle power, busy its
  peak (u = 1 on every input, as ``autoscaler.core.energy.power.modelled_energy_wh`` counts a server at x = m);
* per-second billing with a 60 s minimum per node, at ``price_per_node_hour``.

About 600 lines, one module: the group's nodes, its steps and its bill advance on one clock and
share its events; split, each part would reach into the others' state.
"""

from __future__ import annotations

import heapq
import itertools
import math
import zlib
from collections import deque
from dataclasses import dataclass, field
from numbers import Real

import numpy as np

from autoscaler.core import defaults
from autoscaler.core.errors import ConfigError

PROVISION_S = defaults.PROVISION_S
"""Seconds from a resize up to a usable TASK node: EMR's 5-6 minutes, their middle."""

DECOMMISSION_TIMEOUT_S = 3600.0
"""YARN's graceful decommission timeout, yarn.resourcemanager.nodemanager-graceful-decommission-timeout-secs."""

EC2_M5_XLARGE_USD_PER_HOUR = 0.192
"""m5.xlarge on-demand Linux, us-east-1 (aws.amazon.com/ec2/pricing/on-demand/)."""

EMR_M5_XLARGE_USD_PER_HOUR = 0.048
"""The EMR charge for an m5.xlarge, us-east-1 (aws.amazon.com/emr/pricing/), on top of EC2's."""

PRICE_PER_NODE_HOUR = EC2_M5_XLARGE_USD_PER_HOUR + EMR_M5_XLARGE_USD_PER_HOUR
"""$0.240 per node-hour: what one m5.xlarge TASK node of EMR costs on demand in us-east-1."""

MIN_BILLED_S = 60.0
"""EC2 and EMR bill per second with a one-minute minimum per instance."""

STEP_CONCURRENCY = 256
"""EMR's largest StepConcurrencyLevel; the default here, so the nodes, not the steps, bound the work."""

MAX_PROVISION_S = 3600.0
"""A node taking longer than an hour to boot is a typing error (seconds given as minutes x 60 twice?)."""

MAX_DECOMMISSION_TIMEOUT_S = 7 * 86400.0
MAX_PRICE_PER_NODE_HOUR = 1000.0
"""The dearest EC2 instances cost tens of dollars an hour; more than this is a unit or typing error."""

MAX_LENGTH_ERROR_SIGMA = 5.0
"""lognormal(0, 5) spreads lengths over a factor of e^10 either way at 2 sigma: beyond it, no estimate."""

STATES = ("booting", "idle", "busy")


def _number(value, field_name: str, low: float, high: float, low_open: bool = False, where: str | None = None) -> float:
    """``value`` as a float, or ConfigError starting with ``field_name`` (after ``where``, when the field
    is set from it) when it is not a finite number in [low, high] ((low, high] when ``low_open``)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value > high or (value <= low if low_open else value < low):
        bound = f"> {low:g}" if low_open else f">= {low:g}"
        named = field_name if where is None else f"{where} ({field_name})"
        raise ConfigError(f"{named}: expected a finite number {bound} and <= {high:g}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class TwinConfig:
    """The twin's settings; every field is checked on construction (ConfigError naming the field and
    the value, the field first: "provision_s: expected ...", which the command line names by its flag):
    ``provision_s`` in [0, 3,600] s, ``decommission_timeout_s`` in [0, 7 days] s,
    ``length_error_sigma`` and ``length_jitter_sigma`` in [0, 5], ``step_concurrency`` a whole number in 1..256,
    ``price_per_node_hour`` in (0, 1,000] $, power in W (``idle_power_w`` for booting and idle nodes,
    ``busy_power_w`` for busy ones, busy >= idle >= 0)."""

    provision_s: float = PROVISION_S
    decommission_timeout_s: float = DECOMMISSION_TIMEOUT_S
    length_error_sigma: float = 0.0
    seed: int = 0
    length_jitter_sigma: float = 0.0
    step_concurrency: int = STEP_CONCURRENCY
    price_per_node_hour: float = PRICE_PER_NODE_HOUR
    idle_power_w: float = 60.30  # Table III: gamma_cpu (autoscaler.core.energy.power.TABLE_III.idle_power_w)
    busy_power_w: float = 93.87  # Table III at u = 1: every alpha and gamma (TABLE_III.peak_power_w)

    def __post_init__(self) -> None:
        _number(self.provision_s, "provision_s", 0.0, MAX_PROVISION_S)
        _number(self.decommission_timeout_s, "decommission_timeout_s", 0.0, MAX_DECOMMISSION_TIMEOUT_S)
        _number(self.length_error_sigma, "length_error_sigma", 0.0, MAX_LENGTH_ERROR_SIGMA)
        _number(self.length_jitter_sigma, "length_jitter_sigma", 0.0, MAX_LENGTH_ERROR_SIGMA)
        _number(self.price_per_node_hour, "price_per_node_hour", 0.0, MAX_PRICE_PER_NODE_HOUR, low_open=True)
        concurrency = self.step_concurrency
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= STEP_CONCURRENCY:
            raise ConfigError(f"step_concurrency: expected a whole number in 1..{STEP_CONCURRENCY} (EMR's StepConcurrencyLevel), got {concurrency!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed: expected a whole number >= 0, got {self.seed!r}")
        idle = _number(self.idle_power_w, "idle_power_w", 0.0, 10_000.0, where="the power model")
        if _number(self.busy_power_w, "busy_power_w", 0.0, 10_000.0, where="the power model") < idle:
            raise ConfigError(f"the power model: busy_power_w {self.busy_power_w!r} W is below idle_power_w {idle!r} W")

    def true_length_s(self, name: str, submitted_s: float, job_id: str | None = None) -> float:
        """The job's true run time, s: ``submitted_s`` (the length it was submitted with, ``Job.submitted_length_s``)
        x lognormal(0, ``length_error_sigma``) drawn from (seed, ``name``), x lognormal(0, ``length_jitter_sigma``)
        drawn from (seed, ``job_id``) (``job_id`` None: ``name``)."""
        factor = 1.0
        if self.length_error_sigma != 0.0:
            factor = float(np.random.default_rng([self.seed, zlib.crc32(name.encode())]).lognormal(0.0, self.length_error_sigma))
        if self.length_jitter_sigma != 0.0:
            run = name if job_id is None else job_id
            # A third word to the seed: the jitter of a job named by its id is not its error's draw again.
            factor *= float(np.random.default_rng([self.seed, zlib.crc32(run.encode()), 1]).lognormal(0.0, self.length_jitter_sigma))
        return float(submitted_s) * factor


@dataclass
class Node:
    """One TASK node: requested at ``requested_s``, usable from ``usable_s``, gone at ``removed_s``
    (None: still up); ``job``: the step running on it; ``draining_s``: when a resize down chose it."""

    node_id: int
    requested_s: float
    usable_s: float
    removed_s: float | None = None
    job: str | None = None
    draining_s: float | None = None
    busy_s: float = 0.0  # closed busy seconds; a job running adds to it when it ends or is killed
    busy_from_s: float | None = None


@dataclass
class StepRun:
    """One step: its job, when it was added, its estimate and true length (s), its first start and
    its end (None: not yet), how often it was killed and the node-seconds lost to that; ``width``:
    w, the nodes it runs on at once; ``run_nodes``: the nodes its current run holds (() when none)."""

    step_id: str
    job_id: str
    added_s: float
    estimate_s: float
    true_s: float
    submit_s: float
    deadline_s: float
    start_s: float | None = None
    end_s: float | None = None
    kills: int = 0
    killed_busy_s: float = 0.0
    run_nodes: tuple[int, ...] = ()
    run_start_s: float | None = None
    width: int = 1

    @property
    def node(self) -> int | None:
        """The first node its current run holds (None: not running)."""
        return self.run_nodes[0] if self.run_nodes else None

    @property
    def state(self) -> str:
        """EMR's state: PENDING until first started, RUNNING until it ends (also while a killed run
        waits to run again: YARN retries within the step), then COMPLETED."""
        if self.end_s is not None:
            return "COMPLETED"
        return "PENDING" if self.start_s is None else "RUNNING"


@dataclass
class ClusterTwin:
    """The twin's state; ``advance(now_s)`` plays every event up to ``now_s``; ``resize`` and
    ``add_step`` act at a time no earlier than the last (ConfigError otherwise)."""

    config: TwinConfig
    now_s: float = 0.0
    requested: int = 0
    nodes: dict[int, Node] = field(default_factory=dict)
    steps: dict[str, StepRun] = field(default_factory=dict)
    scale_events: int = 0
    peak_nodes: int = 0
    _events: list = field(default_factory=list)  # (time_s, order, kind, ref)
    _order: int = 0
    _waiting: deque = field(default_factory=deque)  # step ids never started, first added first
    _reruns: deque = field(default_factory=deque)  # step ids killed, to run again before new ones
    _started: int = 0  # steps started and not ended: what step_concurrency bounds
    _booting: set = field(default_factory=set)
    _idle: set = field(default_factory=set)  # usable, no job, not draining
    _busy: set = field(default_factory=set)  # running a job, not draining
    _draining: set = field(default_factory=set)  # running a job, to go when it ends or at the timeout
    _up: int = 0  # nodes not removed
    _finishing: bool = False
    _widest: int = 1  # the largest w of a step added
    runs: list = field(default_factory=list)  # (step id, node id, start_s, end_s, completed) of each node of each run ended

    # -- acting -------------------------------------------------------------------------------

    def resize(self, now_s: float, nodes: int) -> None:
        """Ask for ``nodes`` TASK nodes at ``now_s``: new nodes boot for ``provision_s``; fewer
        removes nodes without a job at once (booting newest first, then idle) and drains busy ones
        (the job started last first). Raises ConfigError for a count that is not a whole number >= 0."""
        if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 0:
            raise ConfigError(f"resize: nodes must be a whole number >= 0, got {nodes!r}")
        self.advance(now_s)
        nodes = int(nodes)
        if nodes != self.requested:
            self.scale_events += 1
        self.requested = nodes
        serving = len(self._booting) + len(self._idle) + len(self._busy)
        for _ in range(nodes - serving):
            node = Node(len(self.nodes), now_s, now_s + self.config.provision_s)
            self.nodes[node.node_id] = node
            self._booting.add(node.node_id)
            self._up += 1
            self._push(node.usable_s, "usable", node.node_id)
        surplus = serving - nodes
        for pool in (self._booting, self._idle):
            for node_id in sorted(pool, reverse=True)[: max(0, surplus)]:
                pool.discard(node_id)
                self._remove(node_id, now_s)
                surplus -= 1
        if surplus > 0:
            chosen = sorted(self._busy, key=lambda n: (self.steps[self.nodes[n].job].run_start_s, n), reverse=True)[:surplus]
            for node_id in chosen:
                self._busy.discard(node_id)
                self._draining.add(node_id)
                self.nodes[node_id].draining_s = now_s
                self._push(now_s + self.config.decommission_timeout_s, "timeout", node_id)
        self.peak_nodes = max(self.peak_nodes, self._up)
        self._dispatch(now_s)

    def add_step(
        self, now_s: float, step_id: str, job_id: str, estimate_s: float, submit_s: float, deadline_s: float, nodes: int = 1,
        *, name: str | None = None, submitted_s: float | None = None,
    ) -> None:  # fmt: skip
        """Add a step for a job planned at ``estimate_s`` seconds on ``nodes`` (w) nodes at once; its true
        length is drawn here from the length it was submitted with (``submitted_s``; None: ``estimate_s``)
        and its ``name`` (None: its job id), see :meth:`TwinConfig.true_length_s`. Raises ConfigError for
        a step id given twice, an estimate that is not a finite number >= 0 or a width that is not a
        whole number >= 1."""
        if step_id in self.steps:
            raise ConfigError(f"add_step: step id {step_id!r} given twice")
        if not (isinstance(estimate_s, Real) and math.isfinite(estimate_s) and estimate_s >= 0):
            raise ConfigError(f"add_step: job {job_id!r} has length_s {estimate_s!r}, expected a finite number >= 0")
        if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 1:
            raise ConfigError(f"add_step: job {job_id!r} has nodes {nodes!r}, expected a whole number >= 1 (w, the nodes it runs on)")
        self.advance(now_s)
        true_s = self.config.true_length_s(job_id if name is None else name, estimate_s if submitted_s is None else submitted_s, job_id)
        self.steps[step_id] = StepRun(step_id, job_id, now_s, float(estimate_s), true_s, float(submit_s), float(deadline_s), width=int(nodes))
        self._waiting.append(step_id)
        self._widest = max(self._widest, int(nodes))
        self._dispatch(now_s)

    @property
    def active_steps(self) -> int:
        """Steps added and not ended: never started (PENDING), running, or killed and to run again;
        what EMR counts against its limit of PENDING and RUNNING steps."""
        return self._started + len(self._waiting)

    def remove_idle(self, now_s: float, count: int) -> int:
        """Remove up to ``count`` idle usable nodes at ``now_s``, the newest first, and lower
        ``requested`` by as many: never a booting node nor one running a job (EMR managed scaling
        removes idle task nodes only). One scale event if any went. Returns how many went. Raises
        ConfigError for a count that is not a whole number >= 0."""
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise ConfigError(f"remove_idle: count must be a whole number >= 0, got {count!r}")
        self.advance(now_s)
        chosen = sorted(self._idle, reverse=True)[: int(count)]
        for node_id in chosen:
            self._idle.discard(node_id)
            self._remove(node_id, now_s)
        if chosen:
            self.requested = max(0, self.requested - len(chosen))
            self.scale_events += 1
        return len(chosen)

    # -- time ---------------------------------------------------------------------------------

    def advance(self, now_s: float) -> None:
        """Play every event at or before ``now_s``. Raises ConfigError if ``now_s`` is earlier than
        the last time seen (a twin's time never goes back) or not finite."""
        if not math.isfinite(now_s) or now_s < self.now_s:
            raise ConfigError(f"twin: time {now_s!r} s is before its last time {self.now_s!r} s (or not finite)")
        while self._events and self._events[0][0] <= now_s:
            time_s, _, kind, ref = heapq.heappop(self._events)
            self.now_s = time_s
            if kind == "usable":
                self._usable(ref, time_s)
            elif kind == "end":
                self._end(ref, time_s)
            else:
                self._timeout(ref, time_s)
            self._dispatch(time_s)
            if self._finishing:
                self._release_spare(time_s)
        self.now_s = now_s

    def finish(self, now_s: float) -> float:
        """Run every step to its end and remove every node, from ``now_s`` on, as a daemon would that
        asks for no more nodes but lets its jobs end: a node without a job goes as soon as no step
        waits (one node is requested if steps wait and none is up), a busy one when its job ends,
        and a draining one keeps its timeout. Returns when the last node went, s."""
        self.advance(now_s)
        self._finishing = True
        self._release_spare(self.now_s)
        while self._events or self._waiting or self._reruns:
            serving = len(self._booting) + len(self._idle) + len(self._busy)
            widest = 0
            if self._waiting or self._reruns:
                # A waiting step never starts on fewer nodes than its w: as many are asked for.
                widest = 1 if self._widest == 1 else max(self.steps[s].width for s in itertools.chain(self._waiting, self._reruns))
            if widest > serving:
                self.resize(self.now_s, widest)
            if not self._events:
                break  # cannot happen: a waiting step has a node booting, idle or busy ahead of it
            self.advance(self._events[0][0])
        for node in self.nodes.values():
            if node.removed_s is None:
                self._remove(node.node_id, self.now_s)
        self._booting.clear()
        self._idle.clear()
        self._busy.clear()
        self.requested = 0
        return self.now_s

    def _release_spare(self, time_s: float) -> None:
        """While finishing: remove the nodes without a job once no step waits for one."""
        if self._waiting or self._reruns:
            return
        for pool in (self._booting, self._idle):
            for node_id in list(pool):
                pool.discard(node_id)
                self._remove(node_id, time_s)

    # -- events -------------------------------------------------------------------------------

    def _push(self, time_s: float, kind: str, ref) -> None:
        self._order += 1
        heapq.heappush(self._events, (time_s, self._order, kind, ref))

    def _usable(self, node_id: int, time_s: float) -> None:
        if node_id in self._booting:
            self._booting.discard(node_id)
            self._idle.add(node_id)

    def _end(self, step_id: str, time_s: float) -> None:
        step = self.steps[step_id]
        if step.end_s is not None or not step.run_nodes or step.run_start_s is None:
            return
        if time_s < step.run_start_s + step.true_s:  # a run killed and started again since this event
            return
        self._free(step, time_s, completed=True)
        step.end_s = time_s
        self._started -= 1

    def _timeout(self, node_id: int, time_s: float) -> None:
        node = self.nodes[node_id]
        if node.removed_s is not None or node.job is None:
            return
        step = self.steps[node.job]
        step.kills += 1
        step.killed_busy_s += (time_s - step.run_start_s) * len(step.run_nodes)
        # The whole run goes: every node of it is freed (the draining ones removed) and it runs again.
        self._free(step, time_s, completed=False)
        self._reruns.append(step.step_id)

    def _free(self, step: StepRun, time_s: float, completed: bool) -> None:
        """End ``step``'s run at ``time_s`` on every node it holds: draining nodes go, the others idle."""
        for node_id in step.run_nodes:
            node = self.nodes[node_id]
            self._close_busy(node, time_s)
            self.runs.append((step.step_id, node_id, step.run_start_s, time_s, completed))
            node.job = None
            if node.draining_s is not None:
                self._remove(node_id, time_s)
            else:
                self._busy.discard(node_id)
                self._idle.add(node_id)
        step.run_nodes, step.run_start_s = (), None

    def _next_step(self) -> StepRun | None:
        """The step to start now: the first killed run, then the first never-started step (while
        step_concurrency allows), whose w nodes are idle; None if none fits."""
        free = len(self._idle)
        for pool, new in ((self._reruns, False), (self._waiting, True)):
            if new and self._started >= self.config.step_concurrency:
                return None
            for at, step_id in enumerate(pool):
                if self.steps[step_id].width <= free:
                    del pool[at]
                    return self.steps[step_id]
        return None

    def _dispatch(self, time_s: float) -> None:
        while self._idle and (self._reruns or (self._waiting and self._started < self.config.step_concurrency)):
            step = self._next_step()
            if step is None:
                break
            if step.start_s is None:
                step.start_s = time_s
                self._started += 1
            chosen = tuple(sorted(self._idle)[: step.width])
            for node_id in chosen:
                self._idle.discard(node_id)
                self._busy.add(node_id)
                node = self.nodes[node_id]
                node.job, node.busy_from_s = step.step_id, time_s
            step.run_nodes, step.run_start_s = chosen, time_s
            self._push(time_s + step.true_s, "end", step.step_id)

    def _close_busy(self, node: Node, time_s: float) -> None:
        node.busy_s += time_s - node.busy_from_s
        node.busy_from_s = None

    def _remove(self, node_id: int, time_s: float) -> None:
        node = self.nodes[node_id]
        node.removed_s = time_s
        self._draining.discard(node_id)
        self._up -= 1

    # -- reading ------------------------------------------------------------------------------

    @property
    def running(self) -> int:
        """Nodes usable and not removed (idle, busy or draining): what EMR counts as RUNNING."""
        return len(self._idle) + len(self._busy) + len(self._draining)

    def counts(self) -> dict[str, int]:
        """What a scaler reads now: nodes ``booting``, ``idle`` (usable, no job), ``busy`` and
        ``draining``; ``pending``, the nodes the steps that nodes would start now need (killed runs
        to run again, and never-started steps that step_concurrency lets start; w each: YARN's
        ContainerPending in nodes, :meth:`pending_nodes`); steps ``waiting`` (every step added, not
        running and not ended)."""
        return {
            "booting": len(self._booting),
            "idle": len(self._idle),
            "busy": len(self._busy),
            "draining": len(self._draining),
            "pending": self.pending_nodes()[0],
            "waiting": len(self._reruns) + len(self._waiting),
        }

    def pending_nodes(self, waited_s: float = 0.0) -> tuple[int, float | None]:
        """(nodes, counted_from_s): the nodes (w each) of the steps that nodes would start now (killed
        runs to run again, and never-started steps that step_concurrency lets start) that were added
        at least ``waited_s`` seconds ago (``added_s + waited_s <= now_s``; with 0, every one: YARN's
        ContainerPending in nodes), and when the first of the others will have waited that long, s
        (None when none waits less). A killed run counts from when its step was added."""
        free = max(0, self.config.step_concurrency - self._started)
        if waited_s == 0.0 and self._widest == 1:
            return len(self._reruns) + min(len(self._waiting), free), None
        nodes, counted_from_s = 0, None
        for step_id in self._reruns:
            step = self.steps[step_id]
            if step.added_s + waited_s <= self.now_s:
                nodes += step.width
            elif counted_from_s is None or step.added_s + waited_s < counted_from_s:
                counted_from_s = step.added_s + waited_s
        # Never-started steps wait in the order they were added, at non-decreasing times: those
        # counted are a prefix, and the first one past it is the next to be counted.
        for step_id in itertools.islice(self._waiting, free):
            step = self.steps[step_id]
            if step.added_s + waited_s > self.now_s:
                counted_from_s = step.added_s + waited_s if counted_from_s is None else min(counted_from_s, step.added_s + waited_s)
                break
            nodes += step.width
        return nodes, counted_from_s

    @property
    def next_event_s(self) -> float | None:
        """When the next queued event falls (a node usable, a run's end, a drain's timeout), s; None
        if none is queued. It may turn out to change nothing (the end of a run killed since)."""
        return self._events[0][0] if self._events else None

    def bill(self) -> TwinBill:
        """What the twin ran so far, nodes still up counted to ``now_s`` (call ``finish`` first for
        the whole bill)."""
        return TwinBill.of(self)


@dataclass(frozen=True)
class TwinBill:
    """The twin's bill: node-seconds billed (per node max(60, up)), booting, idle and busy seconds,
    busy node-seconds of runs that completed (``work_node_s``: true length x w) and of runs killed, $ (``cost_usd``), Wh by
    state and in all, kills and steps run again, peak nodes, scale events, and per step
    (step id, job id, submit_s, added_s, start_s, end_s, deadline_s, kills). ``power_intervals``:
    (start_s, end_s, power_w) of every node state, for a carbon signal's kgCO2 (:meth:`carbon_kg`)."""

    billed_node_s: float
    state_node_s: dict[str, float]
    work_node_s: float
    killed_node_s: float
    cost_usd: float
    energy_wh_by_state: dict[str, float]
    jobs_killed: int
    jobs_rerun: int
    peak_nodes: int
    scale_events: int
    nodes_requested: int
    jobs: tuple[tuple, ...]
    power_intervals: tuple[tuple[float, float, float], ...]

    @property
    def energy_wh(self) -> float:
        return sum(self.energy_wh_by_state.values())

    @property
    def busy_node_s(self) -> float:
        return self.state_node_s["busy"]

    @property
    def utilisation(self) -> float:
        """Busy node-seconds over billed node-seconds, in [0, 1] (0 when nothing was billed): how much
        of what was paid for ran jobs (w nodes each, killed runs included)."""
        return self.busy_node_s / self.billed_node_s if self.billed_node_s > 0 else 0.0

    @classmethod
    def of(cls, twin: ClusterTwin) -> TwinBill:
        config, now_s = twin.config, twin.now_s
        power = {"booting": config.idle_power_w, "idle": config.idle_power_w, "busy": config.busy_power_w}
        seconds = dict.fromkeys(STATES, 0.0)
        billed = 0.0
        intervals: list[tuple[float, float, float]] = []
        for node in twin.nodes.values():
            end_s = now_s if node.removed_s is None else node.removed_s
            boot_end_s = min(node.usable_s, end_s)
            busy_s = node.busy_s + (now_s - node.busy_from_s if node.busy_from_s is not None else 0.0)
            seconds["booting"] += boot_end_s - node.requested_s
            seconds["busy"] += busy_s
            seconds["idle"] += max(0.0, end_s - boot_end_s - busy_s)
            billed += max(MIN_BILLED_S, end_s - node.requested_s)
            # idle power over the node's whole life, and busy's extra over its busy time, is the same sum
            intervals.append((node.requested_s, end_s, config.idle_power_w))
        extra_w = config.busy_power_w - config.idle_power_w
        work = killed = 0.0
        jobs = []
        for step in twin.steps.values():
            killed += step.killed_busy_s
            if step.end_s is not None:
                work += step.true_s * step.width
                intervals.append((step.end_s - step.true_s, step.end_s, extra_w * step.width))
            elif step.run_start_s is not None:
                intervals.append((step.run_start_s, now_s, extra_w * len(step.run_nodes)))
            jobs.append((step.step_id, step.job_id, step.submit_s, step.added_s, step.start_s, step.end_s, step.deadline_s, step.kills))
        intervals.extend((start, end, extra_w) for _, _, start, end, completed in twin.runs if not completed)
        energy = {state: seconds[state] * power[state] / 3600.0 for state in STATES}
        kills = sum(step.kills for step in twin.steps.values())
        return cls(
            billed_node_s=billed,
            state_node_s=seconds,
            work_node_s=work,
            killed_node_s=killed,
            cost_usd=billed / 3600.0 * config.price_per_node_hour,
            energy_wh_by_state=energy,
            jobs_killed=kills,
            jobs_rerun=sum(1 for step in twin.steps.values() if step.kills),
            peak_nodes=twin.peak_nodes,
            scale_events=twin.scale_events,
            nodes_requested=len(twin.nodes),
            jobs=tuple(jobs),
            power_intervals=tuple(intervals),
        )

    def energy_wh_between(self, boundaries_s: np.ndarray) -> np.ndarray:
        """Wh used in each interval [boundaries_s[k], boundaries_s[k+1]), shape (len(boundaries_s) - 1,):
        :func:`energy_wh_between` of the bill's ``power_intervals``."""
        return energy_wh_between(self.power_intervals, boundaries_s)

    def carbon_kg(self, start_s: float, slot_s: float, g_per_kwh: np.ndarray) -> tuple[float, int]:
        """kgCO2eq: each slot's Wh x its ``g_per_kwh`` ((n_slots,) of slots of ``slot_s`` from
        ``start_s``, NaN where the signal does not cover the slot). Returns (kg over the covered slots,
        how many slots that used energy the signal does not cover)."""
        values = np.asarray(g_per_kwh, dtype=float)
        used = self.energy_wh_between(start_s + slot_s * np.arange(len(values) + 1))
        covered = ~np.isnan(values)
        return float(np.sum(used[covered] * values[covered]) / 1e6), int(np.sum((used > 0) & ~covered))



def energy_wh_between(power_intervals, boundaries_s: np.ndarray) -> np.ndarray:
    """Wh used in each interval [boundaries_s[k], boundaries_s[k+1]), shape (len(boundaries_s) - 1,),
    by power drawn over ``power_intervals`` ((start_s, end_s, power_w) each, overlapping ones adding
    up): the cumulative energy, piecewise linear between power changes, read at the boundaries."""
    starts = np.array([i[0] for i in power_intervals] + [i[1] for i in power_intervals], dtype=float)
    watts = np.array([i[2] for i in power_intervals] + [-i[2] for i in power_intervals], dtype=float)
    order = np.argsort(starts, kind="stable")
    times, steps = starts[order], watts[order]
    power_after = np.cumsum(steps)
    cumulative_wh = np.concatenate([[0.0], np.cumsum(power_after[:-1] * np.diff(times))]) / 3600.0
    at = np.interp(np.asarray(boundaries_s, dtype=float), times, cumulative_wh) if len(times) else np.zeros(len(boundaries_s))
    return np.diff(at)
