"""The composition root: wires the store, the cluster and the clock to the controller, and runs the slot loop.

One slot, in order (every step safe to repeat after a crash):
1. reconcile: read our EMR steps (their names carry job ids) and set job states from them;
2. decide: ``controller.tick`` on the store's active jobs and saved policy state;
3. resize the TASK group to the decision's nodes (never below what running jobs hold);
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
from dataclasses import dataclass

import structlog

from autoscaler.adapters.emr import step_states_to_job_states
from autoscaler.errors import ActuationError
from autoscaler.controller import ControllerConfig, Decision, PolicyState, tick
from autoscaler.ports import Clock, Cluster, JobStore, StepStatus
from energy.power import TABLE_III, PowerModel

log = structlog.get_logger("autoscaler")


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
    _reconciled: bool = False

    def _release(self, decision: Decision, jobs: list, steps: dict, released: dict, now_s: float) -> list[str]:
        """Add the decision's steps in EDF order into ``released``. A step EMR refuses outright
        fails that job alone (returned); any other failure stops releasing for this slot, and
        what was added is still committed, so the next slot neither loses nor repeats it."""
        refused: list[str] = []
        by_id = {job.job_id: job for job in jobs}
        for job_id in decision.release:
            existing = steps.get(job_id)
            if existing:
                released[job_id] = (now_s, existing.step_id)
                continue
            try:
                released[job_id] = (now_s, self.cluster.add_step(by_id[job_id]))
            except ActuationError as error:
                log.error("release_failed", job_id=job_id, error=str(error), permanent=error.permanent)
                if not error.permanent:
                    self._reconciled = False
                    break
                refused.append(job_id)
        return refused

    def _slot_energy_wh(self, decision: Decision) -> float:
        """The slot's energy as modelled for the log line (eq. (13)-(14) at u = running jobs / nodes);
        ``autoscaler report`` measures it from CloudWatch once the metrics are in."""
        if decision.nodes == 0:
            return 0.0
        u = min(decision.running, decision.nodes) / decision.nodes
        return float(decision.nodes * self.power_model.power_w(u, u, u, u) * self.config.slot_s / 3600)

    def _reconcile(self, known: dict) -> dict:
        """Our steps by job id. The first slot after a start (or after a failed commit) lists
        every step, so a step added just before a crash is found; later slots list only
        pending and running steps and ask for the final state of the released jobs that
        left that list."""
        if not self._reconciled:
            steps = {s.job_id: s for s in self.cluster.steps()}
            self._reconciled = not self.dry_run
            return steps
        steps = {s.job_id: s for s in self.cluster.steps(active_only=True)}
        for job in known.values():
            if job.state in ("released", "running") and job.step_id and job.job_id not in steps:
                steps[job.job_id] = StepStatus(job.job_id, job.step_id, self.cluster.step_state(job.step_id))
        return steps

    def run_slot(self) -> Decision | None:
        """Decide and act for the current slot; None if it was already decided.

        Any failure part-way (AWS down, a store error) makes the next slot list every
        step again, so steps added before the failure are found, not added twice.
        """
        try:
            return self._run_slot()
        except Exception:
            self._reconciled = False
            raise

    def _run_slot(self) -> Decision | None:
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
        group = self.cluster.task_group()
        # Steps found for jobs the store has no step id for (added just before a crash): record them.
        released: dict[str, tuple[float, str]] = {
            job_id: (now_s, steps[job_id].step_id)
            for job_id, job in known.items()
            if job.step_id is None and job_id in steps
        }
        if not self.dry_run:
            if group.requested != decision.nodes:
                self.cluster.resize(decision.nodes)
            refused = self._release(decision, jobs, steps, released, now_s)
            if refused:
                self.store.set_states({job_id: "failed" for job_id in refused})
            self.store.commit_slot(
                decision.slot, new_state.to_json(), released, dataclasses.asdict(decision) | {"solve_ms": solve_ms}
            )
        log.info(
            "slot",
            slot=decision.slot,
            policy=self.policy_name,
            m_t=round(decision.capacity, 4),
            x_t=round(decision.work, 4),
            nodes_requested=decision.nodes,
            nodes_running=group.running,
            jobs_released=len(decision.release),
            late=len(decision.late),
            queue_depth=decision.queue_depth,
            at_risk=decision.at_risk,
            overloaded=decision.overloaded,
            missed=len(decision.missed),
            energy_wh_modelled=round(self._slot_energy_wh(decision), 3),
            solve_ms=round(solve_ms, 3),
            slot_ms=round((time.perf_counter() - started) * 1000, 3),
            dry_run=self.dry_run,
        )
        if decision.overloaded or decision.missed:
            log.warning(
                "overload",
                slot=decision.slot,
                nodes_wanted=math.ceil(decision.capacity - 1e-9),
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

    def stop(signum, _frame) -> None:
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
