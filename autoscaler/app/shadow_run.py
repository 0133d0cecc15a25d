"""``run --shadow``: beside EMR managed scaling, slot by slot, what the policy would have done and what
it would have used instead. It changes nothing on the cluster.

Every poll (``--shadow-poll-s``, 10 s by default: managed scaling's evaluation interval) reads the
TASK group into the actual books (:class:`autoscaler.core.shadow_books.ActualBooks`); every slot reads
the cluster's steps (every step, whoever added it) and plays the counterfactual: the configured
policy through the daemon's own slot loop (:class:`~autoscaler.app.daemon.SlotRunner` on a shadow
store, a simulated clock and the cluster twin, as ``autoscaler compare`` plays a policy,
``compare.policy_on_twin``), fed the cluster's steps as jobs (``shadow_books.step_job``).

The counterfactual is *settled*, never guessed: a step's true length is known only once it ended, so
the counterfactual plays a slot only when every step created before that slot's end has ended. It
runs behind the cluster by as long as the oldest step still pending or running; each slot it plays is
published once (:class:`ShadowSlot`): its m_t, nodes and releases, and the running figures of both,
from the start to that slot's end. A step that never ends holds the counterfactual back; the lag is
published (``autoscaler_shadow_lag_seconds``).

The cluster is read through :class:`~autoscaler.adapters.emr_read_only.ReadOnlyEmr`, whose client
refuses every EMR write before it is sent.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from autoscaler.core import defaults
from autoscaler.core.model import Job
from autoscaler.core.shadow_books import ActualBooks, ClusterStep, ShadowFigures, step_job, twin_use
from autoscaler.core.twin import TwinConfig

log = structlog.get_logger("autoscaler")

POLL_S = 10.0
"""Seconds between reads of the TASK group: EMR managed scaling evaluates every 5-10 s
(``autoscaler.core.baselines.MANAGED_INTERVAL_S``), so a change it makes is seen within one poll."""

RECENT_STEPS = 256
"""Known step ids handed to the step listing: EMR lists newest first and the listing stops at the
first known one, so the newest few are enough."""

KEPT_S = 3 * 86400.0
"""Slots played are kept this long (Unix s from their end): the daily report needs yesterday's and the
slot before it; older ones go, so a shadow left running for months holds three days."""

DRAIN_SLOTS = 10_000
"""At the end, the counterfactual plays on at most this many slots to run its queue dry."""


@dataclass(frozen=True)
class ShadowSlot:
    """One slot the counterfactual played: the slot (of ``slot_s`` from the epoch), what the policy
    decided in it (``decision``: the daemon's ``decision_line``: m_t, nodes, released step ids, reason,
    why) and the running figures at its end (``figures``)."""

    slot: int
    decision: dict
    figures: ShadowFigures
    released: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """The slot's line of ``--decisions-out``: slot, m_t, x_t, nodes, ``released`` (the step ids
        released at the slot's start and between it and the next), reason, why, and the figures."""
        decision = self.decision
        head = {key: decision.get(key) for key in ("m_t", "x_t", "nodes", "reason", "why")}
        return {"slot": self.slot, **head, "released": list(self.released), **self.figures.to_dict()}


class _Releases:
    """The counterfactual runner's telemetry: only which jobs it released, at a slot or between slots."""

    def __init__(self) -> None:
        self.released: list[str] = []

    def slot_done(self, decision, solve_ms, energy_wh, follow_wh, released=None, late=None, **_details) -> None:
        self.released.extend(decision.release if released is None else released)

    def released_between_slots(self, released, late) -> None:
        self.released.extend(released)

    def slot_ok(self) -> None:
        pass

    def slot_failed(self) -> None:
        pass

    def carbon_signal(self, value, unit="", fallback="") -> None:
        pass

    def steps_unknown(self, count) -> None:
        pass


class Counterfactual:
    """The policy on the cluster twin, fed jobs as they settle: ``compare.policy_on_twin``'s loop,
    one slot at a time. ``start_s``: a slot boundary (Unix s), where the twin starts empty."""

    def __init__(self, settings, policy: str | None, deadline_slots: int | None, twin: TwinConfig, start_s: float) -> None:
        from autoscaler.adapters.shadow import ShadowStore
        from autoscaler.adapters.twin import TwinCluster
        from autoscaler.app import compose
        from autoscaler.app.compare import usable_nodes

        config = compose.controller_config(
            settings,
            policy=policy,
            deadline_slots=deadline_slots,
            max_nodes=usable_nodes((), settings.cluster.max_nodes, twin.step_concurrency),
            price_per_node_hour=twin.price_per_node_hour,
        )
        self.config = dataclasses.replace(config, provision_s=twin.provision_s)
        self.settings = settings
        self.twin_config = twin
        self.slot_s = self.config.slot_s
        self.start_s = float(start_s)
        self.store = ShadowStore(None)
        self.clock = compose.replay_clock(self.start_s)
        self.cluster = TwinCluster(self.clock, twin)
        self._decisions: list[dict] = []
        self._releases = _Releases()
        self.runner = compose.runner(
            settings, self.config, self.store, self.cluster, self.clock, dry_run=True, retention_s=None, on_decision=self._decisions.append,
            telemetry=self._releases,
        )  # fmt: skip
        self.next_slot = self.config.slot_of(self.start_s)
        self.jobs: list[Job] = []  # by submit time
        self.submitted = 0

    def add(self, job: Job) -> None:
        """A settled job. One submitted before the slot the counterfactual plays next (EMR listed its
        step only after that slot was played: ListSteps is eventually consistent) joins at that slot's
        start, due by its deadline or, if later, its planned length from there, and is logged
        (``shadow_step_seen_late``): the past is not replayed."""
        slot_start_s = self.slot_start_s(self.next_slot)
        if job.submit_s < slot_start_s:
            log.warning("shadow_step_seen_late", step_id=job.job_id, created_s=job.submit_s, joins_at_s=slot_start_s)
            job = dataclasses.replace(job, submit_s=slot_start_s, deadline_s=max(job.deadline_s, slot_start_s + job.length_s))
        at = bisect.bisect_right([j.submit_s for j in self.jobs[self.submitted :]], job.submit_s) + self.submitted
        self.jobs.insert(at, job)

    def slot_start_s(self, slot: int) -> float:
        return self.config.epoch_s + slot * self.slot_s

    def play(self) -> tuple[dict | None, tuple[str, ...]]:
        """Play the next slot: submit the jobs due by its start, decide it, then the polls before the
        next boundary (``compare.polls_between_slots``). Returns its decision line (None: it was
        already decided) and the job ids released in it, at its start and between slots."""
        from autoscaler.app.compare import polls_between_slots

        slot = self.next_slot
        self.clock.time_s = self.slot_start_s(slot)
        self._submit_until(self.clock.time_s)
        self._decisions.clear()
        self._releases.released.clear()
        self.runner.run_slot()
        self.submitted = polls_between_slots(
            self.runner, self.store, self.clock, self.jobs, self.submitted, self.slot_start_s(slot + 1), self.settings.release_poll_s
        )
        self.next_slot += 1
        return (self._decisions[-1] if self._decisions else None), tuple(self._releases.released)

    def _submit_until(self, time_s: float) -> None:
        first = self.submitted
        while self.submitted < len(self.jobs) and self.jobs[self.submitted].submit_s <= time_s:
            self.submitted += 1
        if self.submitted > first:
            self.store.submit_many(list(self.jobs[first : self.submitted]))

    def drained(self) -> bool:
        """Every job added is submitted and none is queued."""
        queue = self.runner.queue
        return self.submitted == len(self.jobs) and (queue is None or not queue.queued_count)

    def finish(self) -> None:
        """Play on until every job added is released (at most :data:`DRAIN_SLOTS` slots), then run the
        twin to its end, as compare ends a policy's run."""
        for _ in range(DRAIN_SLOTS):
            self.clock.time_s = self.slot_start_s(self.next_slot)
            self._submit_until(self.clock.time_s)
            if self.drained():
                break
            self.play()
        self.cluster.finish()


@dataclass
class ShadowRun:
    """Shadow mode's loop state: the read-only cluster (``cluster``: ReadOnlyEmr or any object with
    ``task_group``, ``cluster_steps`` and ``cluster_step``), the clock, the settings, the policy and D
    of the counterfactual (None: the config's), the twin's settings (price, power, boot), the carbon
    signal per slot (``g_per_kwh_at(slot_start_s)`` -> g/kWh or None; None: no kgCO2) and
    ``on_slot``, called with each :class:`ShadowSlot` as it is played (metrics, CloudWatch, a file)."""

    cluster: object
    clock: object
    settings: object
    twin: TwinConfig
    policy: str | None = None
    deadline_slots: int | None = None
    g_per_kwh_at: Callable[[float], float | None] | None = None
    on_slot: Callable[[ShadowSlot], None] | None = None
    start_s: float | None = None

    def __post_init__(self) -> None:
        slot_s = self.settings.slot_s
        now_s = self.clock.now_s()
        if self.start_s is None:
            self.start_s = math.floor(now_s / slot_s) * slot_s
        self.counterfactual = Counterfactual(self.settings, self.policy, self.deadline_slots, self.twin, self.start_s)
        d = self.counterfactual.config.deadline_slots
        self.slack_s = d * slot_s
        self.books = ActualBooks(self.start_s, self.twin)
        self.steps: dict[str, ClusterStep] = {}
        self._open: set[str] = set()  # steps not ended
        self._fed: dict[str, float] = {}  # step id -> created_s of the steps fed to the counterfactual
        self._runs_by_name: dict[str, list[tuple[float, float]]] = {}
        self._g: list[float] = []
        self._listed = False
        self.slots: list[ShadowSlot] = []
        self.quantile = self.settings.jobs.length_quantile

    # -- reading the cluster ----------------------------------------------------------------------

    def poll(self) -> None:
        """Read the TASK group into the actual books (max of requested and running: nodes booting are
        billed from the request, nodes draining until they go). Raises ActuationError."""
        group = self.cluster.task_group()
        self.books.nodes(self.clock.now_s(), max(group.requested, group.running))

    def _read_steps(self) -> None:
        if not self._listed:
            listed = self.cluster.cluster_steps()
            self._listed = True
            # Steps that ended before the shadow started ran nothing it counts; their runs teach lengths.
            for step in listed:
                if step.ended and step.end_s is not None and step.end_s <= self.start_s:
                    self._learn(step)
                else:
                    self._see(step)
            return
        newest = sorted(self.steps.values(), key=lambda s: (s.created_s, s.step_id))[-RECENT_STEPS:]
        for step in self.cluster.cluster_steps(newer_than=frozenset(s.step_id for s in newest)):
            if step.step_id not in self.steps:
                self._see(step)
        if self._open:
            active = {step.step_id: step for step in self.cluster.cluster_steps(active_only=True)}
            for step_id in sorted(self._open):
                self._see(active[step_id] if step_id in active else self.cluster.cluster_step(step_id))

    def _see(self, step: ClusterStep) -> None:
        if step.created_s is None:
            step = dataclasses.replace(step, created_s=self.clock.now_s())
        self.steps[step.step_id] = step
        self.books.run(step.step_id, step.start_s, step.end_s)
        if step.ended:
            self._open.discard(step.step_id)
        else:
            self._open.add(step.step_id)

    def _learn(self, step: ClusterStep) -> None:
        if step.start_s is not None and step.end_s is not None and step.state == "COMPLETED":
            runs = self._runs_by_name.setdefault(step.name, [])
            runs.append((step.start_s, step.end_s))
            del runs[: max(0, len(runs) - 2 * defaults.LEARNED_RUNS)]  # a learned length reads the newest few

    def _forget(self) -> None:
        """Keep of the steps fed to the counterfactual only the newest :data:`RECENT_STEPS` (where the
        next listing stops) and, against a listing that shows an old one again, the ids of those
        created within :data:`KEPT_S`: what is held stays the size of a few days, not of the cluster's history."""
        fed = [self.steps[step_id] for step_id in self._fed if step_id in self.steps]
        if len(fed) > 2 * RECENT_STEPS:
            for step in sorted(fed, key=lambda s: (s.created_s, s.step_id))[:-RECENT_STEPS]:
                del self.steps[step.step_id]
        horizon_s = self.clock.now_s() - KEPT_S
        self._fed = {step_id: created_s for step_id, created_s in self._fed.items() if created_s >= horizon_s or step_id in self.steps}

    # -- the slot ---------------------------------------------------------------------------------

    def settled_s(self) -> float:
        """Up to when the counterfactual can be played: the slot boundary at or before now, and no later
        than the creation of the oldest step not ended (Unix s)."""
        slot_s = self.settings.slot_s
        bound = math.floor(self.clock.now_s() / slot_s) * slot_s
        for step_id in self._open:
            bound = min(bound, max(self.start_s, self.steps[step_id].created_s))
        return bound

    def run_slot(self) -> list[ShadowSlot]:
        """Poll, read the steps, feed the ended ones to the counterfactual and play every slot that has
        settled; returns the slots played (each also handed to ``on_slot``). Raises ActuationError when
        EMR cannot be read (nothing is played then)."""
        self.poll()
        self._read_steps()
        for step in sorted((s for s in self.steps.values() if s.ended and s.step_id not in self._fed), key=lambda s: (s.created_s, s.step_id)):
            self._fed[step.step_id] = step.created_s
            if step.start_s is None:
                continue  # ended without running (cancelled while pending): it used no node
            past = self._runs_by_name.get(step.name, [])
            self.counterfactual.add(step_job(step, start_s=self.start_s, slack_s=self.slack_s, past_runs=past, quantile=self.quantile))
            self._learn(step)
        self._forget()
        played = []
        settled_s = self.settled_s()
        counterfactual = self.counterfactual
        while counterfactual.slot_start_s(counterfactual.next_slot + 1) <= settled_s:
            slot = counterfactual.next_slot
            decision, released = counterfactual.play()
            end_s = counterfactual.slot_start_s(slot + 1)
            shadow_slot = ShadowSlot(slot, decision or {}, self.figures(end_s), released)
            self.books.close(end_s, self.settings.slot_s, self._signal(end_s))
            played.append(shadow_slot)
            self.slots.append(shadow_slot)
            if self.on_slot is not None:
                self.on_slot(shadow_slot)
        if played and self.slots[0].figures.until_s < played[-1].figures.until_s - KEPT_S:
            self.slots = [s for s in self.slots if s.figures.until_s >= played[-1].figures.until_s - KEPT_S]
        return played

    def lag_s(self) -> float:
        """How far the counterfactual is behind now, s (0 when it has played every slot before now's)."""
        return max(0.0, self.clock.now_s() - self.counterfactual.slot_start_s(self.counterfactual.next_slot))

    def _signal(self, until_s: float):
        """The carbon signal per slot from the start to ``until_s``, (n_slots,), NaN where none; None without a signal."""
        import numpy as np

        if self.g_per_kwh_at is None:
            return None
        slot_s = self.settings.slot_s
        n_slots = max(0, math.ceil((until_s - self.start_s) / slot_s - 1e-9))
        while len(self._g) < n_slots:
            value = self.g_per_kwh_at(self.start_s + len(self._g) * slot_s)
            self._g.append(float("nan") if value is None else float(value))
        return np.array(self._g[:n_slots])

    def figures(self, until_s: float) -> ShadowFigures:
        """The running comparison from the start to ``until_s`` (at most the counterfactual's clock's next boundary)."""
        twin = self.counterfactual.cluster.twin
        if until_s > twin.now_s:
            twin.advance(until_s)
        g = self._signal(until_s)
        shadow = twin_use(twin.bill(), self.start_s, self.settings.slot_s, self.twin.price_per_node_hour, g)
        actual = self.books.use(until_s, self.settings.slot_s, g)
        return ShadowFigures(until_s, actual, shadow)

    def finish(self) -> ShadowFigures:
        """At the end of a watch (a test, a stop): the counterfactual runs its jobs to their end and the
        figures compare the whole of both: the cluster to now, the counterfactual to its last node.
        Steps still pending or running are left out of the counterfactual (their length is not known)."""
        self.counterfactual.finish()
        twin = self.counterfactual.cluster.twin
        until_s = max(self.clock.now_s(), twin.now_s)
        g = self._signal(until_s)
        shadow = twin_use(twin.bill(), self.start_s, self.settings.slot_s, self.twin.price_per_node_hour, g)
        return ShadowFigures(until_s, self.books.use(self.clock.now_s(), self.settings.slot_s, g), shadow)


class ShadowLoop:
    """What ``daemon.run_forever`` drives in shadow mode: ``run_slot`` at every slot boundary (the
    shadow's slot, counted healthy or failed in ``telemetry``) and a poll of the TASK group every
    ``poll_s`` in between (a poll that fails is logged, ``shadow_poll_failed``, and the next tried)."""

    def __init__(self, shadow: ShadowRun, telemetry=None, metrics=None) -> None:
        self.shadow, self.telemetry, self.metrics = shadow, telemetry, metrics
        self.clock = shadow.clock
        self.config = shadow.counterfactual.config

    def run_slot(self) -> None:
        try:
            self.shadow.run_slot()
        except Exception:
            if self.telemetry is not None:
                self.telemetry.slot_failed()
            raise
        if self.telemetry is not None:
            self.telemetry.slot_ok()
        if self.metrics is not None:
            self.metrics.lagging(self.shadow.lag_s())

    def release_between_slots(self) -> None:
        from autoscaler.core.errors import ActuationError

        try:
            self.shadow.poll()
        except ActuationError as error:
            log.warning("shadow_poll_failed", error=str(error))


def carbon_at(settings, clock, deadline_slots: int) -> Callable[[float], float | None] | None:
    """The g/kWh of ``[carbon] source`` in the slot starting at a time, for the shadow's kgCO2eq: None
    without a source, or with a price signal; a slot the signal does not give is None (not counted)."""
    from autoscaler.adapters.carbon_feed import carbon_feed, check_sources

    if not settings.carbon.source:
        return None
    feed = carbon_feed(settings.carbon, clock)
    check_sources(settings.carbon, feed)

    def value(slot_start_s: float) -> float | None:
        window = feed.window(slot_start_s, settings.slot_s, deadline_slots)
        if window is None or window.unit != "gCO2eq/kWh":
            return None
        return float(window.value_now)

    return value


def shadow_watch(settings, *, deadline_slots: int | None, twin: TwinConfig, telemetry=None, decisions=None, cluster=None, clock=None, session=None) -> ShadowLoop:
    """Shadow mode wired: the cluster of ``settings`` read through ReadOnlyEmr (checked now, as the
    daemon's start-up checks it: ClusterError, OutageError), the wall clock, the config's policy at
    ``deadline_slots`` (None: the config's D), ``twin`` (price, power, boot), kgCO2eq by ``[carbon]
    source`` when it is in gCO2eq/kWh, the Prometheus metrics on ``telemetry``'s registry, CloudWatch
    per slot played, and ``decisions`` (a ``DecisionsFile``) given one JSON line per slot played.
    ``cluster``: a read-only cluster to use instead (tests)."""
    from autoscaler.adapters.clock import WallClock
    from autoscaler.adapters.cloudwatch_reader import cloudwatch_client
    from autoscaler.adapters.emr_read_only import ReadOnlyEmr
    from autoscaler.adapters.shadow_publish import ShadowMetrics, ShadowPublisher
    from autoscaler.app import compose

    clock = clock or WallClock()
    if cluster is None:
        checked = compose.emr_cluster(settings, startup_wait_s=settings.startup_wait_s, session=session)  # DescribeCluster and ListInstanceGroups: reads
        cluster = ReadOnlyEmr(checked.client, checked.cluster_id, new_client=checked.new_client)
    policy = settings.policy
    metrics = ShadowMetrics(telemetry.registry, policy) if telemetry is not None else None
    publisher = ShadowPublisher(cloudwatch_client(settings.cluster.region, settings.cluster.endpoint_url, session), settings.cluster.id, policy)
    previous: dict[str, ShadowFigures] = {}

    def on_slot(shadow_slot: ShadowSlot) -> None:
        figures = shadow_slot.figures
        before = previous.get("figures")
        previous["figures"] = figures
        difference = figures.difference
        # The metrics and the file first: whoever reads the log line finds them there already.
        if metrics is not None:
            metrics.slot_played(shadow_slot)
        if decisions is not None:
            decisions(shadow_slot.to_dict())
        log.info(
            "shadow_slot",
            slot=shadow_slot.slot,
            policy=policy,
            m_t=round(shadow_slot.decision.get("m_t") or 0.0, 4),
            nodes=shadow_slot.decision.get("nodes"),
            released=len(shadow_slot.released),
            **({"released_steps": list(shadow_slot.released[:50])} if shadow_slot.released else {}),
            node_hours_actual=round(figures.actual.node_hours, 4),
            node_hours_shadow=round(figures.shadow.node_hours, 4),
            kwh_difference=round(difference.energy_kwh, 6),
            usd_difference=round(difference.cost_usd, 4),
            kg_co2_difference=None if difference.co2_kg is None else round(difference.co2_kg, 6),
        )
        actual, shadow = figures.actual, figures.shadow
        if before is not None:
            actual, shadow = actual.minus(before.actual), shadow.minus(before.shadow)
        try:
            publisher.publish(actual, shadow, figures.until_s)
        except Exception as error:  # a dashboard's datapoint is lost; the shadow goes on
            log.error("shadow_publish_failed", slot=shadow_slot.slot, error=str(error))

    config = compose.controller_config(settings, deadline_slots=deadline_slots)
    shadow = ShadowRun(
        cluster, clock, settings, twin, policy=policy, deadline_slots=deadline_slots,
        g_per_kwh_at=carbon_at(settings, clock, config.deadline_slots), on_slot=on_slot,
    )  # fmt: skip
    return ShadowLoop(shadow, telemetry, metrics)


def shadow_daily_report(shadow: ShadowRun, settings, session=None) -> str:
    """Yesterday (UTC, by the shadow's clock) as the shadow played it: the section of
    :mod:`autoscaler.app.shadow_report`, logged (``shadow_report``) and emailed when ``[report]
    email_to`` is set; returns the Markdown. Raises DeliveryError when the email fails."""
    from autoscaler.adapters.mail import build_report_message
    from autoscaler.app.reporting import mail_sender
    from autoscaler.app.shadow_report import markdown, shadow_window
    from autoscaler.core.readable import utc_text

    today_s = math.floor(shadow.clock.now_s() / 86400.0) * 86400.0
    window = shadow_window(list(shadow.slots), today_s - 86400.0, today_s)
    policy = shadow.counterfactual.config.policy_name
    text = markdown(window, policy, shadow.lag_s())
    figures = window.figures
    log.info(
        "shadow_report",
        since=utc_text(window.since_s),
        slots=window.slots,
        released=window.released,
        **(
            {}
            if figures is None
            else {
                "node_hours_actual": round(figures.actual.node_hours, 3),
                "node_hours_shadow": round(figures.shadow.node_hours, 3),
                "kwh_saved": round(-figures.difference.energy_kwh, 4),
                "usd_saved": round(-figures.difference.cost_usd, 3),
            }
        ),
    )
    options = settings.report
    if options.email_to and options.email_from:
        message = build_report_message(options.email_from, options.email_to, f"Shadow report: {policy}, {utc_text(window.since_s, layout='text')}", text, [])
        mail_sender(settings, session).send(message)
    return text
