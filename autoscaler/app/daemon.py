"""The slot loop: observe, decide, act, record, the same for the daemon, its dry run and a replay.

One slot, in order (every step safe to repeat after a crash):

1. **observe**: the jobs submitted since the last slot (read from the store by their arrival
   order, ``Job.seq``), our EMR steps (their names carry job ids) and the TASK group;
2. **decide**: ``controller.tick`` on the active jobs, kept in memory between slots in EDF order
   (:class:`~autoscaler.core.edf.JobQueue`), and the policy state; pure;
3. **act**: record the intent (the jobs to release and the nodes, one small transaction: a store
   that cannot write stops the slot before EMR is touched), resize the TASK group to the
   decision's nodes (a resize that fails after botocore's retries is logged and asked again next
   slot, and the jobs due are released anyway), then release the chosen jobs as EMR steps,
   skipping any that already has one;
4. **record**: one store transaction: the job states read from EMR, the released jobs, the policy
   state and the decision (with its reason), the retention pruning of old finished jobs, and the
   intent settled. A slot writes at most twice (intent, record), so syncs at most twice.

A crash before 4 leaves the slot undecided: the restart reads the store afresh, decides the slot
again, and finds the steps added before the crash (they are newer than the newest recorded one),
so no job is submitted twice and none is lost. Any failure part-way makes the next slot start
afresh in the same way.

The runner is the same in every mode; only its adapters differ (:mod:`autoscaler.app.compose` wires
them): EMR and the SQLite store for ``run``; a simulated cluster seeded from EMR and a shadow of
the store for ``run --dry-run`` (:mod:`autoscaler.adapters.shadow`); the simulated cluster, a
simulated clock and a temporary store for ``run --replay``.

Over 600 lines, one module: the slot's phases share the runner's state between slots (the queue,
the adds in doubt, the policy state), so each phase is a method of the one runner.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from autoscaler.core import defaults
from autoscaler.core.controller import CarbonWindow, ControllerConfig, Decision, PolicyState, SignalUnavailable, start_by_slot, tick
from autoscaler.core.edf import JobQueue, edf_key, release_by_slot
from autoscaler.core.energy.power import TABLE_III, PowerModel
from autoscaler.core.errors import ActuationError
from autoscaler.core.learned import RATIO_TOLERANCE, WORK_FACTOR_STEP, LengthErrors
from autoscaler.core.model import Job, JobState
from autoscaler.core.ports import Clock, Cluster, JobStore, SignalFeed, StepStatus, TaskGroup, Telemetry, step_states_to_job_states
from autoscaler.core.readable import utc_text
from autoscaler.core.release import MAX_ACTIVE_STEPS, active_step_room

log = structlog.get_logger("autoscaler")

DUE_RELEASE_PASSES = 10
"""Extra tries, within a slot, for a due job whose step could not be added: each looks for the step,
then adds it if absent. Under sustained throttling botocore's retry quota runs dry and calls fail
at once; these few calls are what stands between a due job and its deadline."""

MAX_TRANSIENT_RELEASE_FAILURES = 3
"""Steps that may fail to be added (after botocore's retries) in one slot before only the jobs due
are tried: a few failures are throttling, many mean AWS is unreachable."""

RECENT_STEPS = 256
"""Recorded step ids handed to the step listing after a start: EMR lists newest first and the
listing stops at the first recorded one, so a few of the newest are enough."""

EARLIER_STEP_SLACK_S = 3600.0
"""A step created this long before its job was submitted is another, earlier job's with the same id
(a store started afresh on a cluster whose step history has the id), never this job's: it is not
taken as this job's release. An hour covers EMR's clock against the daemon's (a stepped wall clock)."""

UNKNOWN_STEPS_NAMED = 50
"""Job ids named in the ``steps_unknown_to_store`` log line; the rest are counted."""

DEFAULT_RETENTION_S = defaults.RETENTION_DAYS * 86400.0
"""Finished jobs and decisions older than this are pruned from the store (30 days)."""


@dataclass(frozen=True)
class Observation:
    """What a slot saw before deciding.

    ``steps``: our steps seen on the cluster, by job id. ``states``: job states that changed
    since the store last recorded them ({job id: 'released' | 'running' | 'done' | 'failed'}).
    ``found``: steps found for jobs with no step id recorded (added just before a crash),
    {job id: (released_s, step id)}, released_s when EMR created the step (the slot's time where
    the cluster does not say, or says a time after it). ``group``: the TASK group, None when it could not be read.
    ``runs``: {job id: (run_start_s, run_end_s)} of the steps seen completed this slot (EMR's step start
    and end), what learned lengths are drawn from; ``overran``: those of them that ended after their
    job's deadline, {job id: tenant}.
    """

    now_s: float
    steps: dict[str, StepStatus]
    states: dict[str, str]
    found: dict[str, tuple[float, str]]
    group: TaskGroup | None
    runs: dict[str, tuple[float, float]] = field(default_factory=dict)
    overran: dict[str, str] = field(default_factory=dict)


@dataclass
class SlotRunner:
    """Runs one slot against the adapters (see the module's docstring for the four steps).

    ``dry_run`` only labels the log lines: a dry run is this runner on a shadow store and a
    simulated cluster, which change nothing real. ``on_decision``: called with each slot's
    decision record (``Decision.to_json`` plus ``nodes_running`` and ``dry_run``), e.g. to
    write ``--decisions-out``. ``retention_s``: finished jobs released (or submitted) longer ago,
    and decisions of slots that long ago, are pruned at each record (None: keep everything).
    ``carbon_feed``: the ``[carbon]`` signal (:class:`~autoscaler.adapters.carbon_feed.CarbonFeed`)
    whose window each slot hands to ``tick`` when ``config.carbon`` (hold+carbon); a slot without a
    usable signal is hold's decision, logged (``carbon_signal_fallback``) and counted.
    ``length_errors``: how far finished runs were off their planned lengths; each job joining the
    queue gets its start margin from it (``Job.start_margin_s``), and each run seen finished is
    recorded in it (rebuilt from the store's newest runs whenever the store is read afresh).
    """

    config: ControllerConfig
    store: JobStore
    cluster: Cluster
    clock: Clock
    policy_name: str = defaults.POLICY
    dry_run: bool = False
    power_model: PowerModel = TABLE_III
    telemetry: Telemetry | None = None
    on_decision: Callable[[dict], None] | None = None
    retention_s: float | None = DEFAULT_RETENTION_S
    carbon_feed: SignalFeed | None = None
    length_errors: LengthErrors = field(default_factory=LengthErrors)
    _queue: JobQueue | None = None  # the active jobs, between slots; None: read the store afresh
    _fresh: bool = True  # the next slot lists every step added since the newest recorded one
    _state: PolicyState | None = None
    _seq: int = 0  # the newest job read from the store
    _uncertain: dict = field(default_factory=dict)  # job id -> when its add failed (Unix s)
    _earlier_steps: set = field(default_factory=set)  # step ids of earlier jobs with a queued job's id, logged
    _degraded: bool = False  # this slot could not read or change something on EMR
    _margin_ratios: dict = field(default_factory=dict)  # learned? -> the length-error ratio queued jobs' margins were last widened to
    _work_factors: dict = field(default_factory=dict)  # learned? -> the work factor queued jobs were last given
    _nodes: int = 0  # the nodes the last decided slot asked for
    _held_for_steps: list = field(default_factory=list)  # job ids the slot chose and EMR's step limit held back, in order

    @property
    def queue(self) -> JobQueue | None:
        """The active jobs as the last slot left them (None before the first slot)."""
        return self._queue

    @property
    def unread(self) -> bool:
        """Whether the store holds jobs submitted after the newest this runner has read (its next
        slot reads them): a queue that looks empty may not be."""
        return self.store.max_seq() > self._seq

    def run_slot(self) -> Decision | None:
        """Decide and act for the current slot; None if it was already decided.

        Any failure part-way (AWS down, a store error) makes the next slot read the store afresh
        and list every step added since the newest recorded one, so steps added before the
        failure are found, not added twice.
        """
        try:
            decision = self._run_slot()
        except Exception:
            self._queue = None
            self._state = None
            self._fresh = True
            if self.telemetry is not None:
                self.telemetry.slot_failed()
            raise
        if self.telemetry is not None and decision is None:
            self.telemetry.slot_ok()
        return decision

    def _run_slot(self) -> Decision | None:
        self._degraded = False
        self.cluster.start_slot()
        now_s = self.clock.now_s()
        started = time.perf_counter()
        fresh = self._fresh
        if self._queue is None:
            self._load()
        if self.config.slot_of(now_s) <= self._state.last_slot:
            return None
        observation = self._observe(now_s, fresh)
        carbon = self._carbon_window(now_s) if self.config.carbon else None
        decide_started = time.perf_counter()
        decision, new_state = tick(now_s, self._queue, self._state, self.config, carbon)
        solve_ms = (time.perf_counter() - decide_started) * 1000
        decision = dataclasses.replace(decision, solve_ms=solve_ms)
        if decision.warning:
            log.warning("worse_than_follow", slot=decision.slot, policy=self.policy_name, detail=decision.warning)
        group = observation.group
        if decision.release or (group is not None and group.requested != decision.nodes):
            # What is about to be done is written first: a store that cannot write (a full disk)
            # stops the slot here, before EMR is touched, and the restart can see what was meant.
            withdrawn = self.store.record_intent(decision.slot, list(decision.release), decision.nodes)
            decision = self._withdraw(decision, withdrawn)
        released, refused, group = self._act(decision, observation)
        self._record(decision, new_state, observation, released, refused)
        self._held_for_steps = list(decision.held_for_steps)
        self._fresh = False
        self._after(decision, group, released, started, observation.overran)
        return decision

    def start(self) -> None:
        """Read the active jobs and the policy state now, before the first slot, so that a store
        whose rows cannot be read stops the start (StoreError) rather than failing every slot."""
        self._load()

    def release_between_slots(self) -> list[str]:
        """Release, now, the jobs submitted since the slot was decided that cannot wait for the next
        one: those already due by the controller's own rule (``release_by_slot`` at or before the
        decided slot: their start-by slot, less the slots a new node takes to boot, has come).
        Returns their job ids as released, in EDF order.

        A live daemon decides at slot boundaries, so a job submitted just after one would otherwise
        wait up to a slot for its step, where EMR managed scaling sees the step the moment it is
        added: with lengths off by lognormal(0, 1) and a 30-minute deadline, that wait was most of
        the jobs hold ran past their deadline beyond managed scaling's. Jobs not due join the queue
        for the next slot. The TASK group is not resized here: a released job takes a free node or
        waits in EMR's queue, and the next slot's decision counts it (raising the group between
        slots cost +25 % kWh on a flat load on a node boundary with lengths off by lognormal(0, 1) at
        30 min: hold keeps a node once on while the switching cost says so).

        Safe to repeat and to stop part-way, as a slot is: the intent is written first, a step EMR
        refuses fails its job, one whose add failed otherwise is looked for at the next slot, and
        the released jobs are recorded in one transaction (``JobStore.commit_release``). Nothing is
        done before the first slot, nor when the slot of now is not decided yet (its slot will see
        the jobs). Any failure makes the next slot read the store afresh, as a failed slot does.
        """
        if self._queue is None or self._state is None:
            return []
        now_s = self.clock.now_s()
        slot = self.config.slot_of(now_s)
        if slot != self._state.last_slot:
            return []
        try:
            return self._release_between(now_s, slot)
        except Exception:
            self._queue = None
            self._state = None
            self._fresh = True
            raise

    @property
    def holds_for_steps(self) -> bool:
        """Whether the last slot left jobs it chose queued for EMR's step limit (``Decision.held_for_steps``):
        then each poll between slots looks for steps that ended and adds the next of them."""
        return bool(self._held_for_steps)

    def _release_between(self, now_s: float, slot: int) -> list[str]:
        added = self._read_submitted()
        urgent = sorted((job for job in added if release_by_slot(job, self.config) <= slot), key=lambda job: edf_key(job, self.config))
        if self._held_for_steps:
            urgent = self._topped_up(urgent)
        else:
            # EMR holds at most MAX_ACTIVE_STEPS steps PENDING and RUNNING: the rest wait for the next slot.
            urgent = urgent[: active_step_room(self._queue)]
        if not urgent:
            return []
        withdrawn = self._withdrawn(self.store.record_intent(slot, [job.job_id for job in urgent], self._nodes))
        urgent = [job for job in urgent if job.job_id not in withdrawn]
        released: dict[str, tuple[float, str]] = {}
        refused: list[str] = []
        for job in urgent:
            self._add_step(job, now_s, released, refused)
        self.store.commit_release(slot, released, states=dict.fromkeys(refused, JobState.FAILED))
        self._settle_queue(released, refused)
        late = [job.job_id for job in urgent if job.job_id in released and start_by_slot(job, self.config) < slot]
        log.info(
            "released_between_slots",
            slot=slot,
            policy=self.policy_name,
            jobs_released=len(released),
            job_ids=list(released)[:UNKNOWN_STEPS_NAMED],
            late=len(late),
            dry_run=self.dry_run,
        )
        if self.telemetry is not None:
            self.telemetry.released_between_slots(list(released), late)
        return list(released)

    # -- 1. observe ---------------------------------------------------------------------------

    def _carbon_window(self, now_s: float) -> CarbonWindow | SignalUnavailable:
        """The signal for the slot of ``now_s``, or why there is none (logged and counted here)."""
        slot = self.config.slot_of(now_s)
        if self.carbon_feed is None:
            window, missing = None, SignalUnavailable("not_given", "the runner was given no [carbon] feed")
        else:
            window = self.carbon_feed.window(now_s, self.config.slot_s, self.config.deadline_slots, self.config.epoch_s)
            missing = self.carbon_feed.fallback
        if window is not None:
            if self.telemetry is not None:
                self.telemetry.carbon_signal(window.value_now, window.unit)
            return window
        log.warning("carbon_signal_fallback", slot=slot, reason=missing.reason, detail=missing.detail, dry_run=self.dry_run)
        if self.telemetry is not None:
            self.telemetry.carbon_signal(None, fallback=missing.reason)
        return missing

    def _load(self) -> None:
        """Read the active jobs and the policy state afresh (first slot, or after a failure)."""
        # The watermark first: a job submitted between the two reads is then read again by the
        # next jobs_after (adding it twice replaces it), never skipped.
        self._seq = self.store.max_seq()
        jobs = self.store.active_jobs()
        errors = dataclasses.replace(self.length_errors)  # empty, with the same quantile and window
        for length_s, run_s, learned in self.store.recent_runs(errors.runs):
            errors.record(length_s, run_s, learned)
        self.length_errors = errors
        self._queue = JobQueue.of([errors.with_margin(job, self.config.slot_s) for job in jobs], self.config.slot_s, self.config.epoch_s)
        self._margin_ratios = self._pool_ratios()
        self._work_factors = {learned: errors.work_factor(learned) for learned in (False, True)}
        saved = self.store.load_state()
        self._state = PolicyState.from_json(saved) if saved else PolicyState()

    def _observe(self, now_s: float, fresh: bool) -> Observation:
        """The new submissions into the queue, then our steps and the TASK group. The queue takes
        the states the steps show (the store is told at record)."""
        self._read_submitted()
        steps = self._recent_steps() if fresh else self._reconcile()
        if fresh:
            self._uncertain.clear()
        states = {
            job_id: state
            for job_id, state in step_states_to_job_states(steps.values()).items()
            if (job := self._queue.get(job_id)) is not None and job.state != state
        }
        # Steps found for jobs the store has no step id for (added just before a crash): released
        # when EMR created the step, which may be slots before this restart found it. Never later
        # than now: a replay's simulated clock is not EMR's (moto stamps steps with the wall time).
        found = {
            job_id: (now_s if status.created_s is None else min(now_s, status.created_s), status.step_id)
            for job_id, status in steps.items()
            if (job := self._queue.get(job_id)) is not None and job.step_id is None
        }
        if fresh:
            self._report_unknown_steps(steps)
        # Read before the queue forgets the jobs that are done: their runs, and which ran past the deadline.
        runs = {
            job_id: run
            for job_id, status in steps.items()
            if (run := status.run) is not None and (job := self._queue.get(job_id)) is not None and job.run_end_s is None
        }
        overran: dict[str, str] = {}
        for job_id, (start_s, end_s) in runs.items():
            job = self._queue.get(job_id)
            self.length_errors.record(job.length_s, end_s - start_s, job.prior_length_s is not None)
            if end_s > job.deadline_s:
                overran[job_id] = job.tenant
        if runs:
            self._widen_margins()
        # In the steps' order, never a set's: the order the queue takes the changes in is the order its
        # running jobs, and so the runs seen next, are read in; a set's order changed with the hash seed.
        for job_id in dict.fromkeys([*states, *found]):
            released_s, step_id = found.get(job_id, (None, None))
            # When a RUNNING step started: what it still needs in the slot is counted from then.
            run_start_s = steps[job_id].start_s if states.get(job_id) == JobState.RUNNING and job_id in steps else None
            self._queue.update(job_id, states.get(job_id, JobState.RELEASED), released_s=released_s, step_id=step_id, run_start_s=run_start_s)
        try:
            group = self.cluster.task_group()
        except ActuationError as error:
            # The group's size is unknown: hold it (no resize) and still release the jobs due.
            log.error("task_group_unknown", slot=self.config.slot_of(now_s), error=str(error))
            self._degraded = True
            group = None
        return Observation(now_s=now_s, steps=steps, states=states, found=found, group=group, runs=runs, overran=overran)

    def _read_submitted(self) -> list[Job]:
        """The jobs submitted since the newest read, into the queue with their start margins; returned as queued.
        Jobs stamped in a slot after the clock's (``jobs_submitted_ahead``, logged) wait for that slot."""
        added = []
        for job in self.store.jobs_after(self._seq):
            self._seq = max(self._seq, job.seq or 0)
            job = self.length_errors.with_margin(job, self.config.slot_s)
            self._queue.add(job)
            added.append(job)
        self._say_ahead(added)
        return added

    def _say_ahead(self, added: list[Job]) -> None:
        """Log the jobs stamped in a slot after the clock's: ``submit`` stamps a job on the daemon's
        clock (``submit_time``), so such a job came by another clock, and the slots will not see it
        before its submit slot."""
        now_s = self.clock.now_s()
        slot = self.config.slot_of(now_s)
        ahead = [job for job in added if self.config.slot_of(job.submit_s) > slot]
        if ahead:
            log.warning(
                "jobs_submitted_ahead",
                jobs=len(ahead),
                job_ids=[job.job_id for job in ahead][:UNKNOWN_STEPS_NAMED],
                most_ahead_s=round(max(job.submit_s for job in ahead) - now_s, 3),
                detail="stamped ahead of the daemon's clock (a wall clock stepped forward, or a submitter on another "
                "clock); each waits for its submit slot",
            )

    def _widen_margins(self) -> None:
        """Queued jobs take a wider start margin once the runs seen since they joined say lengths
        err further (``LengthErrors.with_margin``); a margin never narrows while a job waits. They take
        their work factor afresh (``LengthErrors.job_work_factor``) once the pool's mean ratio
        (``LengthErrors.work_factor``) has moved by more than ``WORK_FACTOR_STEP`` from the one last
        applied, up or down.

        A job's margin is drawn when it joins the queue, from the runs finished by then. One held for
        hours would otherwise keep the room of a morning's few runs: on FB-2009 with lengths off by
        lognormal(0, 1), the jobs hold sent out later than follow or managed scaling and that then
        overran were such jobs, released after start-by slots planned on a p99.9 of a few hundred
        runs. O(queued jobs) when a pool's ratio rises or its factor moves, nothing otherwise."""
        risen = {
            learned: ratio
            for learned, ratio in self._pool_ratios().items()
            if ratio > max(self._margin_ratios.get(learned, 1.0), 1.0 + RATIO_TOLERANCE)
        }
        moved = {
            learned: factor
            for learned in (False, True)
            if abs((factor := self.length_errors.work_factor(learned)) - self._work_factors.get(learned, 1.0))
            > WORK_FACTOR_STEP * self._work_factors.get(learned, 1.0)
        }
        if not risen and not moved:
            return
        self._margin_ratios.update(risen)
        self._work_factors.update(moved)
        for job in list(self._queue.queued()):
            learned = job.prior_length_s is not None
            if learned in risen or learned in moved:
                margin_s = max(self.length_errors.margin_s(job), job.start_margin_s)
                factor = self.length_errors.job_work_factor(job, self.config.slot_s)
                if margin_s != job.start_margin_s or factor != job.work_factor:
                    self._queue.add(dataclasses.replace(job, start_margin_s=margin_s, work_factor=factor))

    def _pool_ratios(self) -> dict[bool, float]:
        """{learned?: the length-error ratio of that pool}, for the pools with enough runs to have one."""
        return {learned: ratio for learned in (False, True) if (ratio := self.length_errors.ratio(learned)) is not None}

    def _report_unknown_steps(self, steps: dict[str, StepStatus]) -> None:
        """Log and count our steps (named ``{prefix}<job id>``) for jobs the store does not hold, as
        after a restore from an older backup: they are left alone, never released again, so what
        ran on EMR outside the store's knowledge is said, at start-up and after each failure."""
        candidates = [job_id for job_id in steps if self._queue.get(job_id) is None]
        if candidates:
            # Rare (start-up, after a failure): the whole store is read only when a step is in doubt.
            stored = {job.job_id for job in self.store.all_jobs()}
            candidates = [job_id for job_id in candidates if job_id not in stored]
        if candidates:
            log.warning(
                "steps_unknown_to_store",
                count=len(candidates),
                job_ids=sorted(candidates)[:UNKNOWN_STEPS_NAMED],
                detail="EMR has steps of ours for jobs this store does not hold (restored from an older backup?); they are left alone",
                dry_run=self.dry_run,
            )
        if self.telemetry is not None:
            self.telemetry.steps_unknown(len(candidates))

    def _topped_up(self, urgent: list[Job]) -> list[Job]:
        """The jobs to add between slots while the last slot held jobs back for EMR's step limit: the
        newly submitted due ones (``urgent``), then the held ones in the slot's order, as many as the
        steps PENDING and RUNNING now leave room for (listed now: the ended ones' states are recorded
        by the next slot). A failed listing adds none of the held."""
        try:
            active = self._of_these_jobs(self.cluster.steps(active_only=True))
        except ActuationError as error:
            log.warning("steps_unknown", error=str(error))
            return urgent[: active_step_room(self._queue)]
        room = max(0, MAX_ACTIVE_STEPS - len(active))
        chosen = urgent[:room]
        taken = {job.job_id for job in chosen}
        # Read the held ones only until the room is full: a backlog holds thousands, and a poll comes
        # every release_poll_s.
        at = 0
        while at < len(self._held_for_steps) and len(chosen) < room:
            job = self._queue.get(self._held_for_steps[at])
            at += 1
            if job is not None and job.state == JobState.QUEUED and job.job_id not in taken:
                chosen.append(job)
                taken.add(job.job_id)
        del self._held_for_steps[:at]
        return chosen

    def _reconcile(self) -> dict[str, StepStatus]:
        """Our steps by job id, after the first slot: pending and running steps, and the final state
        of the released jobs that left that list; a call that fails here only leaves those states
        unknown for a slot (the jobs keep their nodes, never scale in on a guess). Jobs whose add
        failed (``_uncertain``) are looked for among the steps added since before they were tried."""
        steps: dict[str, StepStatus] = {}
        if self._uncertain:
            try:
                steps.update(self._recent_steps(min(self._uncertain.values())))
                self._uncertain.clear()
            except ActuationError as error:
                log.warning("steps_unknown", waiting=sorted(self._uncertain), error=str(error))
                self._degraded = True
        try:
            active = self.cluster.steps(active_only=True)
        except ActuationError as error:
            log.warning("steps_unknown", error=str(error))
            self._degraded = True
            return steps
        steps.update(self._of_these_jobs(active))
        for job in self._queue.running():
            if job.step_id and job.job_id not in steps:
                try:
                    steps[job.job_id] = dataclasses.replace(self.cluster.step_status(job.step_id), job_id=job.job_id)
                except ActuationError as error:
                    log.warning("step_state_unknown", job_id=job.job_id, error=str(error))
        return steps

    def _recent_steps(self, attempted_s: float = math.inf) -> dict[str, StepStatus]:
        """Steps added after the newest recorded one. The first slot after a start must find any
        step added just before a crash; it fails if it cannot list them.

        A step added but not recorded is newer than every step recorded before the slot that
        added it (``attempted_s``; any, after a crash), and EMR lists newest first: the listing
        stops at the first of the recorded ones."""
        before_s = None if attempted_s == math.inf else attempted_s
        recorded = self.store.recent_step_ids(RECENT_STEPS, released_before_s=before_s)
        return self._of_these_jobs(self.cluster.steps(newer_than=recorded))

    def _of_these_jobs(self, statuses: list[StepStatus]) -> dict[str, StepStatus]:
        """Steps by job id, without those of an earlier job with the same id: a step created more than
        ``EARLIER_STEP_SLACK_S`` before a queued job was submitted is not its step (logged once each)."""
        steps: dict[str, StepStatus] = {}
        for status in statuses:
            job = self._queue.get(status.job_id) if self._queue is not None else None
            earlier = (
                job is not None and job.step_id is None and status.created_s is not None
                and status.created_s < job.submit_s - EARLIER_STEP_SLACK_S
            )  # fmt: skip
            if not earlier:
                steps[status.job_id] = status
            elif status.step_id not in self._earlier_steps:
                self._earlier_steps.add(status.step_id)
                log.warning(
                    "step_of_an_earlier_job", job_id=status.job_id, step_id=status.step_id,
                    step_created=utc_text(status.created_s), job_submitted=utc_text(job.submit_s), policy=self.policy_name,
                )  # fmt: skip
        return steps

    # -- 3. act -------------------------------------------------------------------------------

    def _act(self, decision: Decision, observation: Observation) -> tuple[dict[str, tuple[float, str]], list[str], TaskGroup | None]:
        """Resize, then release. Returns ({job id: (released_s, step id)} of the jobs whose step is
        on the cluster now, including those found at observe; the job ids EMR refused; the TASK
        group as EMR holds it after the resize: requested = the decision's nodes once EMR took the
        request, the observed group otherwise)."""
        group = observation.group
        if group is not None and group.requested != decision.nodes:
            try:
                self.cluster.resize(decision.nodes)
                group = dataclasses.replace(group, requested=decision.nodes)
            except ActuationError as error:
                # The jobs due still go out, on the nodes there are; the next slot finds the
                # group at its old size and asks again. Nothing is scaled on a guess.
                log.error("resize_failed", slot=decision.slot, nodes=decision.nodes, requested=group.requested, error=str(error))
                self._degraded = True
        released = dict(observation.found)
        refused = self._release(decision, observation.steps, released, observation.now_s)
        return released, refused, group

    def _release(self, decision: Decision, steps: dict, released: dict, now_s: float) -> list[str]:
        """Add the decision's steps in EDF order into ``released``. A step EMR refuses outright
        fails that job alone (returned); any other failure leaves that job queued and releasing
        goes on (after ``MAX_TRANSIENT_RELEASE_FAILURES`` in one slot, for the jobs due only),
        and a due job gets more tries (``_release_due_again``). What was added is recorded, so
        the next slot neither loses nor repeats it."""
        refused: list[str] = []
        transient = 0
        for job_id in decision.release:
            job = self._queue.get(job_id)
            existing = steps.get(job_id)
            if existing:
                released[job_id] = (now_s, existing.step_id)
                continue
            if job_id in self._uncertain:
                continue  # its earlier add may have gone through; not released until that is known
            if transient >= MAX_TRANSIENT_RELEASE_FAILURES and start_by_slot(job, self.config) > decision.slot:
                continue  # AWS is failing: only jobs due now are tried
            if not self._add_step(job, now_s, released, refused):
                transient += 1  # the others go on, unless AWS is down
        self._release_due_again(decision, released, now_s)
        return refused

    def _add_step(self, job: Job, now_s: float, released: dict, refused: list[str]) -> bool:
        """Add ``job``'s step into ``released``; a step EMR refuses outright goes into ``refused``.
        False on any other failure: the step may have been added before the answer was lost, so it
        is looked for (``_uncertain``) before the job is released again."""
        try:
            released[job.job_id] = (now_s, self.cluster.add_step(job))
        except ActuationError as error:
            log.error("release_failed", job_id=job.job_id, error=str(error), permanent=error.permanent)
            if error.permanent:
                refused.append(job.job_id)
                return True
            self._uncertain.setdefault(job.job_id, now_s)
            return False
        return True

    def _release_due_again(self, decision: Decision, released: dict, now_s: float) -> None:
        """Jobs due this slot whose add failed get up to ``DUE_RELEASE_PASSES`` more tries: look for
        their step first (the failed call may have added it), add it only if it is not there.
        Their deadline is at stake; the others wait for the next slot."""
        for _ in range(DUE_RELEASE_PASSES):
            due = [
                job_id
                for job_id in decision.release
                if job_id in self._uncertain and start_by_slot(self._queue.get(job_id), self.config) <= decision.slot
            ]
            if not due:
                return
            try:
                found = self._recent_steps(min(self._uncertain[job_id] for job_id in due))
            except ActuationError as error:
                log.warning("steps_unknown", waiting=due, error=str(error))
                self._degraded = True
                continue
            for job_id in due:
                if job_id in found:
                    released[job_id] = (now_s, found[job_id].step_id)
                    del self._uncertain[job_id]
                    continue
                try:
                    released[job_id] = (now_s, self.cluster.add_step(self._queue.get(job_id)))
                    del self._uncertain[job_id]
                except ActuationError as error:
                    log.error("release_failed", job_id=job_id, error=str(error), permanent=error.permanent)

    # -- 4. record ----------------------------------------------------------------------------

    def _record(self, decision: Decision, new_state: PolicyState, observation: Observation, released: dict, refused: list[str]) -> None:
        """One store transaction for the slot; then the queue takes what was released."""
        states = dict(observation.states) | {job_id: JobState.FAILED for job_id in refused}
        prune_before_s = None if self.retention_s is None else observation.now_s - self.retention_s
        self.store.commit_slot(
            decision.slot,
            new_state.to_json(),
            released,
            decision.to_json(),
            states=states,
            runs=observation.runs,
            prune_before_s=prune_before_s,
            prune_decisions_before_slot=None if prune_before_s is None else self.config.slot_of(prune_before_s),
        )
        self._settle_queue(released, refused)
        self._state = new_state
        self._nodes = decision.nodes

    def _withdraw(self, decision: Decision, withdrawn: list[str]) -> Decision:
        """The decision without the jobs cancelled since the slot read them (``JobStore.record_intent``)."""
        gone = self._withdrawn(withdrawn)
        return dataclasses.replace(decision, release=tuple(job_id for job_id in decision.release if job_id not in gone)) if gone else decision

    def _withdrawn(self, withdrawn: list[str]) -> set[str]:
        """Take the cancelled jobs out of the queue; their ids. A cancelled job's work counted in the
        plans made before its cancel was seen (at most until the slot that would have released it)."""
        for job_id in withdrawn:
            self._queue.update(job_id, JobState.CANCELLED)
        if withdrawn:
            log.info("jobs_cancelled", job_ids=withdrawn, policy=self.policy_name, dry_run=self.dry_run)
        return set(withdrawn)

    def _settle_queue(self, released: dict, refused: list[str]) -> None:
        """The queue takes what the store recorded: refused jobs failed, queued jobs released."""
        for job_id in refused:
            self._queue.update(job_id, JobState.FAILED)
        for job_id, (released_s, step_id) in released.items():
            job = self._queue.get(job_id)
            if job is not None and job.state == JobState.QUEUED:
                self._queue.update(job_id, JobState.RELEASED, released_s=released_s, step_id=step_id)

    # -- afterwards: log, metrics, decision record ----------------------------------------------

    def _slot_energy_wh(self, decision: Decision) -> float:
        """The slot's energy as modelled for the log line (eq. (13)-(14) at u = running jobs / nodes);
        ``autoscaler report`` measures it from CloudWatch once the metrics are in."""
        if decision.nodes == 0:
            return 0.0
        u = min(decision.running, decision.nodes) / decision.nodes
        return float(decision.nodes * self.power_model.power_w(u, u, u, u) * self.config.slot_s / 3600)

    def _follow_energy_wh(self, decision: Decision) -> float:
        """What "follow the workload" would have used in the slot: L_t busy nodes (eq. (13)-(14))."""
        return float(decision.load * self.power_model.power_w(1.0, 1.0, 1.0, 1.0) * self.config.slot_s / 3600)

    def _after(self, decision: Decision, group: TaskGroup | None, released: dict, started: float, overran: dict[str, str] | None = None) -> None:
        overran = overran or {}
        energy_wh = self._slot_energy_wh(decision)
        log.info(
            "slot",
            slot=decision.slot,
            policy=self.policy_name,
            m_t=round(decision.capacity, 4),
            x_t=round(decision.assigned, 4),
            nodes_requested=decision.nodes,
            nodes_running=group.running if group is not None else None,
            jobs_released=len(decision.release),
            late=len(decision.late),
            queue_depth=decision.queue_depth,
            at_risk=decision.at_risk,
            overloaded=decision.overloaded,
            missed=len(decision.missed),
            overran=len(overran),
            **({"overran_jobs": list(overran)[:UNKNOWN_STEPS_NAMED]} if overran else {}),
            **({"held_for_steps": len(decision.held_for_steps)} if decision.held_for_steps else {}),
            reason=decision.reason,
            why=decision.why,
            **({"carbon_mode": decision.carbon_mode, "carbon_value": decision.carbon_value} if decision.carbon_mode else {}),
            energy_wh_modelled=round(energy_wh, 3),
            solve_ms=round(decision.solve_ms, 3),
            slot_ms=round((time.perf_counter() - started) * 1000, 3),
            dry_run=self.dry_run,
        )
        if self.telemetry is not None:
            sent = [job_id for job_id in decision.release if job_id in released]
            late = [job_id for job_id in decision.late if job_id in released]
            self.telemetry.slot_done(
                decision,
                decision.solve_ms,
                energy_wh,
                self._follow_energy_wh(decision),
                sent,
                late,
                healthy=not self._degraded and not self._uncertain,
                group=group,
                queued=self._queue.queued_count,
                overran_by_tenant=_counts(overran.values()),
            )
        if decision.overloaded or decision.missed:
            log.warning(
                "overload" if decision.overloaded else "deadlines_missed",
                slot=decision.slot,
                nodes_wanted=decision.nodes_wanted,
                max_nodes=self.config.max_nodes,
                nodes_by_tenant=decision.nodes_by_tenant,
                missed_by_tenant=decision.missed_by_tenant,
            )
        if self.on_decision is not None:
            try:
                self.on_decision(decision_line(decision, group, self.dry_run))
            except OSError as error:
                # The slot was decided, acted on and recorded; only its copy in the file is lost.
                log.error("decisions_out_failed", slot=decision.slot, path=str(getattr(self.on_decision, "path", "")), error=str(error))


def decision_line(decision: Decision, group: TaskGroup | None = None, dry_run: bool = False) -> dict:
    """One slot's line of ``--decisions-out``: ``Decision.to_json`` with the operator's names first
    (``slot``, ``m_t``, ``x_t``, ``nodes``, ``released`` job ids, ``reason``, ``why``), then EMR's
    observed TASK group (``nodes_running``, None when unknown) and whether it was a dry run."""
    record = decision.to_json()
    head = {
        "slot": decision.slot,
        "m_t": decision.capacity,
        "x_t": decision.assigned,
        "nodes": decision.nodes,
        "released": list(decision.release),
        "reason": decision.reason,
        "why": decision.why,
    }
    return head | record | {"nodes_running": group.running if group is not None else None, "dry_run": dry_run}


class DecisionsFile:
    """Appends one JSON line per slot to a file, flushed at once (``--decisions-out``).

    Opened for appending, so a restarted daemon goes on where it stopped; a line is written
    whole with one ``write`` call. A file that does not end in a newline was cut short mid-line (a
    run stopped mid-write): its torn line is ended with a newline first, so that it stays a line of
    its own that ``explain --decisions`` skips, not the start of this run's first line. Raises
    OSError when the file cannot be opened.
    """

    def __init__(self, path) -> None:
        self.path = path
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        if self._file.tell() > 0 and not _ends_in_newline(path):
            self._file.write("\n")
            self._file.flush()

    def __call__(self, record: dict) -> None:
        self._file.write(json.dumps(record, allow_nan=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "DecisionsFile":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _ends_in_newline(path) -> bool:
    with open(path, "rb") as file:
        file.seek(-1, 2)
        return file.read(1) == b"\n"


def next_boundary_s(now_s: float, slot_s: float, epoch_s: float) -> float:
    """The first slot boundary epoch_s + k * slot_s after ``now_s`` (Unix seconds)."""
    return epoch_s + (math.floor((now_s - epoch_s) / slot_s) + 1) * slot_s


def run_slots(
    run_slot: Callable[[], object],
    clock: Clock,
    slot_s: float,
    epoch_s: float,
    misfire_grace_s: float,
    stop: threading.Event,
    between: Callable[[], object] | None = None,
    poll_s: float = 0.0,
) -> None:
    """Run ``run_slot`` at once (to decide the slot the daemon starts in), then at every slot
    boundary epoch_s + k * slot_s on ``clock``, until ``stop`` is set; returns after the slot under
    way when it is.

    Waits are on ``clock``, which for the daemon follows the monotonic clock
    (:class:`~autoscaler.adapters.clock.WallClock`): a step of the wall clock moves no boundary
    (APScheduler's triggers wait on the wall clock, and after a step back of 600 s ran no slot for
    600 s). Each wake-up asks the clock for a wall-clock step (``wall_jump_s``, logged) when it
    has one. A boundary the loop reaches more than ``misfire_grace_s`` late (the slot before ran
    long) is dropped, and the ones it passed coalesced: the next run is at the next boundary. A
    failed slot is logged (``slot_failed``) and the next boundary tried. ``between`` (the runner's
    ``release_between_slots``), when given with ``poll_s`` > 0, runs every ``poll_s`` between
    boundaries; a failure is logged (``release_between_failed``).
    """
    run = _logged(run_slot, "slot_failed")
    run_between = _logged(between, "release_between_failed") if between is not None and poll_s > 0 else None
    wall_jump_s = getattr(clock, "wall_jump_s", None)
    run()
    boundary_s = next_boundary_s(clock.now_s(), slot_s, epoch_s)
    poll_at_s = clock.now_s() + poll_s if run_between is not None else math.inf
    while not stop.is_set():
        now_s = clock.now_s()
        left_s = boundary_s - now_s
        if left_s > 0:
            if poll_at_s <= now_s:
                run_between()
                poll_at_s = clock.now_s() + poll_s
                continue
            stop.wait(min(left_s, poll_at_s - now_s))
            continue
        if wall_jump_s is not None:
            wall_jump_s()
        now_s = clock.now_s()
        if now_s - boundary_s <= misfire_grace_s:
            run()
        else:
            log.warning("slot_skipped", boundary_s=boundary_s, late_s=round(now_s - boundary_s, 3), misfire_grace_s=misfire_grace_s)
        boundary_s = next_boundary_s(max(now_s, clock.now_s()), slot_s, epoch_s)
        if run_between is not None:
            poll_at_s = clock.now_s() + poll_s


def run_forever(runner: SlotRunner, slot_s: float, misfire_grace_s: float, daily_report=None, release_poll_s: float = 0.0) -> None:
    """Run ``runner.run_slot`` at once and then at every slot boundary on the runner's clock
    (:func:`run_slots`), and ``runner.release_between_slots`` every ``release_poll_s`` in between
    (0: never), until SIGTERM or SIGINT, which lets the current slot finish before
    returning; the signal is logged (``stopping``) then. ``daily_report``, if given, runs every day at 00:10 UTC (wall time: APScheduler's
    cron, on a thread of its own)."""
    stop = threading.Event()
    received: list[str] = []
    wake_read, wake_write = os.pipe()

    def on_signal(signum, _frame) -> None:
        # The handler only takes note and writes a byte: it runs between two bytecodes of the main
        # thread, which may be in the middle of a log line's write (a log call here failed, reentrant,
        # and the signal was lost) or inside stop.wait() holding the event's lock (stop.set() here
        # waited for that lock in the same thread for ever: Ctrl-C and SIGTERM then did nothing).
        # The relay thread sets the stop.
        if not received:  # a second signal while the slot finishes changes nothing
            received.append(signal.Signals(signum).name)
            os.write(wake_write, b"\0")

    def relay() -> None:
        try:
            os.read(wake_read, 1)  # a signal's byte, or the end once run_forever returns
        finally:
            os.close(wake_read)
        stop.set()

    threading.Thread(target=relay, name="signal-relay", daemon=True).start()
    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGTERM, signal.SIGINT)}
    reports = _report_scheduler(daily_report) if daily_report is not None else None
    try:
        run_slots(runner.run_slot, runner.clock, slot_s, runner.config.epoch_s, misfire_grace_s, stop, runner.release_between_slots, release_poll_s)
    finally:
        if received:
            log.info("stopping", signal=received[0])
        if reports is not None:
            reports.shutdown(wait=True)
        for number, handler in previous.items():
            signal.signal(number, handler)
        os.close(wake_write)  # the relay, if still waiting, reads the end, closes its side and returns


def _report_scheduler(daily_report):
    """The daily report every day at 00:10 UTC on an APScheduler background thread (started)."""
    from apscheduler.schedulers.background import BackgroundScheduler

    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.add_job(_logged(daily_report, "report_failed"), "cron", hour=0, minute=10, coalesce=True, misfire_grace_time=3600, id="report")
    scheduler.start()
    return scheduler


def _logged(function, failure_event: str):
    def run() -> None:
        try:
            function()
        except Exception as exc:  # a failed slot (or report) is logged and retried at its next run
            log.error(failure_event, error=str(exc), error_type=type(exc).__name__)

    return run



def _counts(values) -> dict[str, int]:
    """{value: how often it occurs}, in order of first occurrence."""
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts
