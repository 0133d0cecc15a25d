"""The composition root: wires the store, the cluster and the clock to the controller, and runs the slot loop.

One slot, in order (every step safe to repeat after a crash):
1. reconcile: read our EMR steps (their names carry job ids) and set job states from them;
2. decide: ``controller.tick`` on the store's active jobs and saved policy state;
3. resize the TASK group to the decision's nodes (never below what running jobs hold); a resize
   that fails after botocore's retries is logged and asked again next slot, and the jobs due are
   released anyway;
4. release the chosen jobs as EMR steps, skipping any that already has a step;
5. commit the policy state, the released jobs and the decision in one store transaction.
A crash before 5 leaves the slot undecided: the restart decides it again, and step 4
finds the steps already added, so no job is submitted twice and none is lost.
"""

from __future__ import annotations

import dataclasses
import math
import signal
import time
from dataclasses import dataclass, field

import structlog

from autoscaler.adapters.emr import step_states_to_job_states
from autoscaler.adapters.health import Telemetry
from autoscaler.controller import ControllerConfig, Decision, PolicyState, start_by_slot, tick
from autoscaler.errors import ActuationError
from autoscaler.ports import Clock, Cluster, JobStore, StepStatus
from energy.power import TABLE_III, PowerModel

log = structlog.get_logger("autoscaler")

DUE_RELEASE_PASSES = 10
"""Extra tries, within a slot, for a due job whose step could not be added: each looks for the step,
then adds it if absent. Under sustained throttling botocore's retry quota runs dry and calls fail
at once; these few calls are what stands between a due job and its deadline."""

MAX_TRANSIENT_RELEASE_FAILURES = 3
"""Steps that may fail to be added (after botocore's retries) in one slot before only the jobs due
are tried: a few failures are throttling, many mean AWS is unreachable."""


@dataclass
class SlotRunner:
    """Runs one slot against the adapters. ``dry_run`` logs the decision and changes nothing
    on the cluster or in the store."""

    config: ControllerConfig
    store: JobStore
    cluster: Cluster
    clock: Clock
    policy_name: str = "gcp-u"
    dry_run: bool = False
    power_model: PowerModel = TABLE_III
    telemetry: Telemetry | None = None
    _reconciled: bool = False
    _uncertain: dict = field(default_factory=dict)  # job id -> when its add failed (Unix s)
    _degraded: bool = False  # this slot could not read or change something on EMR

    def _release(self, decision: Decision, jobs: list, steps: dict, released: dict, now_s: float) -> list[str]:
        """Add the decision's steps in EDF order into ``released``. A step EMR refuses outright
        fails that job alone (returned); any other failure leaves that job queued and releasing
        goes on (after ``MAX_TRANSIENT_RELEASE_FAILURES`` in one slot, for the jobs due only),
        and a due job gets more tries (``_release_due_again``). What was added is committed, so
        the next slot neither loses nor repeats it."""
        refused: list[str] = []
        transient = 0
        by_id = {job.job_id: job for job in jobs}
        for job_id in decision.release:
            existing = steps.get(job_id)
            if existing:
                released[job_id] = (now_s, existing.step_id)
                continue
            if job_id in self._uncertain:
                continue  # its earlier add may have gone through; not released until that is known
            if transient >= MAX_TRANSIENT_RELEASE_FAILURES and start_by_slot(by_id[job_id], self.config) > decision.slot:
                continue  # AWS is failing: only jobs due now are tried
            try:
                released[job_id] = (now_s, self.cluster.add_step(by_id[job_id]))
            except ActuationError as error:
                log.error("release_failed", job_id=job_id, error=str(error), permanent=error.permanent)
                if error.permanent:
                    refused.append(job_id)
                    continue
                # The step may have been added before the answer was lost: it is looked for
                # before the job is released again. The others go on, unless AWS is down.
                self._uncertain.setdefault(job_id, now_s)
                transient += 1
        self._release_due_again(decision, by_id, released, now_s)
        return refused

    def _release_due_again(self, decision: Decision, by_id: dict, released: dict, now_s: float) -> None:
        """Jobs due this slot whose add failed get up to ``DUE_RELEASE_PASSES`` more tries: look for
        their step first (the failed call may have added it), add it only if it is not there.
        Their deadline is at stake; the others wait for the next slot."""
        for _ in range(DUE_RELEASE_PASSES):
            due = [
                job_id
                for job_id in decision.release
                if job_id in self._uncertain and start_by_slot(by_id[job_id], self.config) <= decision.slot
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
                    released[job_id] = (now_s, self.cluster.add_step(by_id[job_id]))
                    del self._uncertain[job_id]
                except ActuationError as error:
                    log.error("release_failed", job_id=job_id, error=str(error), permanent=error.permanent)

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

    def _reconcile(self, known: dict) -> dict:
        """Our steps by job id.

        The first slot after a start (or after an unexpected failure) must find any step added
        just before it (a crash between adding and recording): it lists the steps added since the
        newest recorded one, and the slot fails if it cannot. Later slots list pending and running
        steps and ask for the final state of the released jobs that left that list; a call that
        fails there only leaves those states unknown for a slot (the jobs keep their nodes, never
        scale in on a guess). Jobs whose add failed (``_uncertain``) are looked for the same way
        before they may be released again.
        """
        if not self._reconciled:
            steps = self._recent_steps()
            self._reconciled = not self.dry_run
            self._uncertain.clear()
            return steps
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
        steps.update((s.job_id, s) for s in active)
        for job in known.values():
            if job.state in ("released", "running") and job.step_id and job.job_id not in steps:
                try:
                    steps[job.job_id] = StepStatus(job.job_id, job.step_id, self.cluster.step_state(job.step_id))
                except ActuationError as error:
                    log.warning("step_state_unknown", job_id=job.job_id, error=str(error))
        return steps

    def _recent_steps(self, attempted_s: float = math.inf) -> dict[str, StepStatus]:
        # A step added but not recorded is newer than every step recorded before the slot that
        # added it (``attempted_s``; any, after a crash), and EMR lists newest first: the
        # listing stops at the first of those.
        recorded = frozenset(
            job.step_id for job in self.store.all_jobs() if job.step_id and job.released_s is not None and job.released_s < attempted_s
        )
        return {s.job_id: s for s in self.cluster.steps(newer_than=recorded)}

    def run_slot(self) -> Decision | None:
        """Decide and act for the current slot; None if it was already decided.

        Any failure part-way (AWS down, a store error) makes the next slot list every
        step again, so steps added before the failure are found, not added twice.
        """
        try:
            decision = self._run_slot()
        except Exception:
            self._reconciled = False
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
        known = {job.job_id: job for job in self.store.active_jobs()}
        steps = self._reconcile(known)
        updates = {
            job_id: state
            for job_id, state in step_states_to_job_states(steps.values()).items()
            if job_id in known and known[job_id].state != state
        }
        if updates and not self.dry_run:
            self.store.set_states(updates)
        jobs = [
            dataclasses.replace(job, state=updates.get(job.job_id, job.state))
            for job in known.values()
            if updates.get(job.job_id, job.state) not in ("done", "failed")
        ]
        saved = self.store.load_state()
        state = PolicyState.from_json(saved) if saved else PolicyState()
        if self.config.slot_of(now_s) <= state.last_slot:
            return None
        decide_started = time.perf_counter()
        decision, new_state = tick(now_s, jobs, state, self.config)
        solve_ms = (time.perf_counter() - decide_started) * 1000
        if decision.warning:
            log.warning("worse_than_follow", slot=decision.slot, policy=self.policy_name, detail=decision.warning)
        try:
            group = self.cluster.task_group()
        except ActuationError as error:
            # The group's size is unknown: hold it (no resize) and still release the jobs due.
            log.error("task_group_unknown", slot=decision.slot, error=str(error))
            self._degraded = True
            group = None
        # Steps found for jobs the store has no step id for (added just before a crash): record them.
        released: dict[str, tuple[float, str]] = {
            job_id: (now_s, steps[job_id].step_id)
            for job_id, job in known.items()
            if job.step_id is None and job_id in steps
        }
        if not self.dry_run:
            if group is not None and group.requested != decision.nodes:
                try:
                    self.cluster.resize(decision.nodes)
                except ActuationError as error:
                    # The jobs due still go out, on the nodes there are; the next slot finds the
                    # group at its old size and asks again. Nothing is scaled on a guess.
                    log.error("resize_failed", slot=decision.slot, nodes=decision.nodes, requested=group.requested, error=str(error))
                    self._degraded = True
            refused = self._release(decision, jobs, steps, released, now_s)
            if refused:
                self.store.set_states({job_id: "failed" for job_id in refused})
            self.store.commit_slot(
                decision.slot, new_state.to_json(), released, dataclasses.asdict(decision) | {"solve_ms": solve_ms}
            )
        energy_wh = self._slot_energy_wh(decision)
        log.info(
            "slot",
            slot=decision.slot,
            policy=self.policy_name,
            m_t=round(decision.capacity, 4),
            x_t=round(decision.work, 4),
            nodes_requested=decision.nodes,
            nodes_running=group.running if group is not None else None,
            jobs_released=len(decision.release),
            late=len(decision.late),
            queue_depth=decision.queue_depth,
            at_risk=decision.at_risk,
            overloaded=decision.overloaded,
            missed=len(decision.missed),
            energy_wh_modelled=round(energy_wh, 3),
            solve_ms=round(solve_ms, 3),
            slot_ms=round((time.perf_counter() - started) * 1000, 3),
            dry_run=self.dry_run,
        )
        if self.telemetry is not None and not self.dry_run:
            sent = [job_id for job_id in decision.release if job_id in released]
            late = [job_id for job_id in decision.late if job_id in released]
            self.telemetry.slot_done(
                decision, solve_ms, energy_wh, self._follow_energy_wh(decision), sent, late, healthy=not self._degraded and not self._uncertain
            )
        if decision.overloaded or decision.missed:
            log.warning(
                "overload",
                slot=decision.slot,
                nodes_wanted=decision.nodes_wanted,
                max_nodes=self.config.max_nodes,
                nodes_by_tenant=decision.nodes_by_tenant,
                missed_by_tenant=decision.missed_by_tenant,
            )
        return decision


def run_forever(runner: SlotRunner, slot_s: float, misfire_grace_s: float, daily_report=None) -> None:
    """Run ``runner.run_slot`` every ``slot_s`` seconds with APScheduler 3's BlockingScheduler
    (one at a time, missed runs coalesced) until SIGTERM or SIGINT, which lets the current
    slot finish before returning. ``daily_report``, if given, runs every day at 00:10 UTC."""
    from apscheduler.schedulers.blocking import BlockingScheduler

    scheduler = BlockingScheduler(timezone="UTC")
    scheduler.add_job(
        _logged(runner.run_slot, "slot_failed"),
        "interval",
        seconds=slot_s,
        max_instances=1,
        coalesce=True,
        misfire_grace_time=int(max(1, misfire_grace_s)),
        next_run_time=_now(),
        id="slot",
    )
    if daily_report is not None:
        scheduler.add_job(
            _logged(daily_report, "report_failed"), "cron", hour=0, minute=10, coalesce=True, misfire_grace_time=3600, id="report"
        )

    stopping = []

    def stop(signum, _frame) -> None:
        if stopping:  # a second signal while the slot finishes changes nothing
            return
        stopping.append(signum)
        log.info("stopping", signal=signal.Signals(signum).name)
        scheduler.shutdown(wait=True)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    scheduler.start()


def _logged(function, failure_event: str):
    def run() -> None:
        try:
            function()
        except Exception as exc:  # a failed slot (or report) is logged and retried at its next run
            log.error(failure_event, error=str(exc), error_type=type(exc).__name__)

    return run


def _now():
    import datetime

    return datetime.datetime.now(datetime.timezone.utc)
