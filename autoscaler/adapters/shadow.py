"""A dry run's shadow of the job store: the real store's jobs, with the dry run's own states.

``run --dry-run`` is the live slot loop on two shadows: this store and a simulated cluster
seeded from EMR (:func:`shadow_cluster`). The shadow reads the jobs submitted to the real store,
but every state it records (released, running, done), its policy state and its decisions stay in
memory, so slot after slot it decides what the live daemon would have, from its own decisions,
and the real store and cluster are never written.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import deque

from autoscaler.adapters.fakes import FakeCluster
from autoscaler.core import defaults
from autoscaler.core.errors import ActuationError, StoreError
from autoscaler.core.learned import runs_ended_by
from autoscaler.core.model import FINISHED_STATES, Job, JobState
from autoscaler.core.ports import Clock, Cluster, JobStore

FINAL_STATES = FINISHED_STATES


class ShadowStore:
    """The JobStore port over a real store (``real``; None: an empty one), read-only.

    At the first read it copies the real store's active jobs and policy state; afterwards it
    reads only the jobs submitted since (by ``Job.seq``), which join its queue as queued whatever
    the real daemon has done with them. ``commit_slot`` keeps states, releases, the policy state
    and the decision in memory. Jobs that finish in the shadow are forgotten.
    """

    def __init__(self, real: JobStore | None) -> None:
        self._real = real
        self._jobs: dict[str, Job] | None = None
        self._arrivals: list[int] = []  # seqs of the jobs read, in order
        self._arrival_ids: list[str] = []
        self._seq = 0
        self._state: dict | None = None
        self._last_slot: int | None = None
        self._decisions: dict[int, dict] = {}
        self._recent: list[tuple[float, str]] = []  # (released_s, step id), oldest first
        self._intents: dict[int, dict] = {}
        self._finishing: set[str] = set()  # ids given a final state since the last commit: they leave at it
        self._runs: dict[tuple[str, str], list[tuple[float, float]]] = {}  # (tenant, name) -> runs recorded here
        # (end_s, length_s, run_s, learned) of the newest runs recorded here
        self._planned_runs: deque[tuple[float, float, float, bool]] = deque(maxlen=defaults.LENGTH_ERROR_RUNS)

    # -- reads -------------------------------------------------------------------------------

    def _sync(self) -> dict[str, Job]:
        if self._jobs is None:
            # The watermark before the jobs: one submitted between the reads is read again, not skipped.
            self._seq = max(self._seq, self._real.max_seq() if self._real is not None else 0)
            jobs = self._real.active_jobs() if self._real is not None else []
            self._jobs = {}
            for job in jobs:
                self._remember(job)
            self._state = self._real.load_state() if self._real is not None else None
            self._last_slot = self._real.last_slot() if self._real is not None else None
            self._recent = sorted((job.released_s, job.step_id) for job in jobs if job.step_id and job.released_s is not None)
        elif self._real is not None:
            for job in self._real.jobs_after(self._seq):
                self._seq = max(self._seq, job.seq or 0)
                # New to the shadow: queued, whatever the real daemon has done with it since.
                self._remember(dataclasses.replace(job, state=JobState.QUEUED, released_s=None, step_id=None))
        return self._jobs

    def submit_many(self, jobs: list[Job]) -> int:
        """Add jobs to the shadow alone (a dry replay's trace), queued, in order; returns how many."""
        self._sync()
        for job in jobs:
            self._seq += 1
            self._remember(dataclasses.replace(job, state=JobState.QUEUED, seq=self._seq))
        return len(jobs)

    def all_jobs(self) -> list[Job]:
        """The jobs active in the shadow (finished ones are forgotten)."""
        return self.active_jobs()

    def job(self, job_id: str) -> Job | None:
        """The job ``job_id`` if it is active in the shadow, else None (finished ones are forgotten)."""
        return self._sync().get(job_id)

    def _remember(self, job: Job) -> None:
        if job.state in FINAL_STATES:
            return
        self._jobs[job.job_id] = job
        self._arrivals.append(job.seq or 0)
        self._arrival_ids.append(job.job_id)

    def active_jobs(self) -> list[Job]:
        """The jobs active in the shadow, in arrival order."""
        return sorted(self._sync().values(), key=lambda job: (job.seq or 0, job.submit_s))

    def jobs_after(self, seq: int) -> list[Job]:
        """Jobs read after arrival number ``seq`` and still active in the shadow, in arrival order."""
        jobs = self._sync()
        start = bisect.bisect_right(self._arrivals, seq)
        return [jobs[job_id] for job_id in self._arrival_ids[start:] if job_id in jobs]

    def max_seq(self) -> int:
        self._sync()
        return self._seq

    def load_state(self) -> dict | None:
        self._sync()
        return self._state

    def last_slot(self) -> int | None:
        self._sync()
        return self._last_slot

    def recent_step_ids(self, limit: int = 256, released_before_s: float | None = None) -> frozenset[str]:
        self._sync()
        recent = [step for released_s, step in self._recent if released_before_s is None or released_s < released_before_s]
        return frozenset(recent[-limit:])

    def decisions(self, first_slot: int | None = None, last_slot: int | None = None) -> list[dict]:
        return [
            self._decisions[slot]
            for slot in sorted(self._decisions)
            if (first_slot is None or slot >= first_slot) and (last_slot is None or slot <= last_slot)
        ]

    def decision(self, slot: int) -> dict | None:
        return self._decisions.get(slot)

    def run_lengths_s(self, tenant: str, name: str, ended_by_s: float, limit: int = defaults.LEARNED_RUNS) -> list[float]:
        """The real store's runs of the name and those the shadow recorded, newest ``limit``, oldest first."""
        real = self._real.run_lengths_s(tenant, name, ended_by_s, limit) if self._real is not None else []
        # The real store's are earlier than any the shadow ran (a dry run starts from it): they come first.
        return (real + runs_ended_by(self._runs.get((tenant, name), []), ended_by_s, limit))[-limit:]

    def recent_runs(self, limit: int = defaults.LENGTH_ERROR_RUNS) -> list[tuple[float, float, bool]]:
        """The real store's newest runs and those the shadow recorded, newest ``limit``, oldest first."""
        real = self._real.recent_runs(limit) if self._real is not None else []
        here = [(length_s, run_s, learned) for _, length_s, run_s, learned in sorted(self._planned_runs, key=lambda run: run[0])]
        return (real + here)[-limit:]

    def set_runs(self, runs: dict[str, tuple[float, float]]) -> None:
        """What ``SqliteJobStore.set_runs`` writes, kept in memory."""
        self._record_runs(self._sync(), runs)

    def set_states(self, updates: dict[str, str]) -> None:
        """What ``SqliteJobStore.set_states`` writes, kept in memory; a job done or failed stays until the next commit."""
        self._set_states(self._sync(), updates)

    def _record_runs(self, jobs: dict[str, Job], runs: dict[str, tuple[float, float]]) -> None:
        for job_id, (start_s, end_s) in runs.items():
            if not (end_s >= start_s):
                raise StoreError(f"shadow store: job {job_id!r}: a run's end {end_s!r} is before its start {start_s!r}")
        for job_id, (start_s, end_s) in runs.items():
            job = jobs.get(job_id)
            if job is not None:
                jobs[job_id] = dataclasses.replace(job, run_start_s=float(start_s), run_end_s=float(end_s))
                self._runs.setdefault((job.tenant, job.name), []).append((float(start_s), float(end_s)))
                self._planned_runs.append((float(end_s), job.length_s, float(end_s) - float(start_s), job.prior_length_s is not None))

    # -- the slot's record, in memory ----------------------------------------------------------

    def record_intent(self, slot: int, job_ids: list[str], nodes: int) -> list[str]:
        """What ``SqliteJobStore.record_intent`` writes, kept in memory (time: the wall clock's). A dry
        run decides on its own copy of each job, so a cancel in the real store withdraws nothing: []."""
        import time

        self._intents[int(slot)] = {"slot": int(slot), "job_ids": list(job_ids), "nodes": int(nodes), "recorded_s": time.time()}
        return []

    def pending_intent(self) -> dict | None:
        """The newest intent no ``commit_slot`` has settled, or None."""
        return self._intents[max(self._intents)] if self._intents else None

    def commit_release(self, slot: int, released: dict[str, tuple[float, str]], *, states: dict[str, str] | None = None) -> None:
        """What ``SqliteJobStore.commit_release`` would write, kept in memory."""
        jobs = self._sync()
        self._set_states(jobs, states or {})
        self._mark_released(jobs, released)
        for settled in [s for s in self._intents if s <= int(slot)]:
            del self._intents[settled]

    def _set_states(self, jobs: dict[str, Job], states: dict[str, str]) -> None:
        """The shadow's jobs take ``states``, {job id: state}; unknown ids are ignored. Those given a
        final state leave at the next commit."""
        for job_id, job_state in states.items():
            if job_id in jobs:
                jobs[job_id] = dataclasses.replace(jobs[job_id], state=job_state)
                if job_state in FINAL_STATES:
                    self._finishing.add(job_id)

    def _mark_released(self, jobs: dict, released: dict[str, tuple[float, str]]) -> None:
        """Released jobs as the SQL store marks them; then finished jobs leave the shadow."""
        for job_id, (released_s, step_id) in released.items():
            job = jobs.get(job_id)
            if job is not None and (job.state == JobState.QUEUED or job.step_id is None):
                jobs[job_id] = dataclasses.replace(
                    job, state=JobState.RELEASED if job.state == JobState.QUEUED else job.state, released_s=released_s, step_id=step_id
                )
                self._recent.append((released_s, step_id))
        # Only a job given a final state since the last commit can have one: the sweep reads those
        # alone, not every job (a backlog of days made it most of a dry run's time).
        for job_id in self._finishing:
            job = jobs.get(job_id)
            if job is not None and job.state in FINAL_STATES:
                del jobs[job_id]
        self._finishing.clear()
        del self._recent[: max(0, len(self._recent) - 4096)]

    def commit_slot(
        self,
        slot: int,
        state: dict,
        released: dict[str, tuple[float, str]],
        decision: dict,
        states: dict[str, str] | None = None,
        runs: dict[str, tuple[float, float]] | None = None,
        prune_before_s: float | None = None,
        prune_decisions_before_slot: int | None = None,
    ) -> None:
        """What ``SqliteJobStore.commit_slot`` would write, kept in memory (pruning: the shadow's decisions only)."""
        jobs = self._sync()
        self._set_states(jobs, states or {})
        # A run counts only for a job done (as the SQL store's run_lengths_s asks state = 'done').
        self._record_runs(jobs, {job_id: run for job_id, run in (runs or {}).items() if job_id in jobs and jobs[job_id].state == JobState.DONE})
        self._mark_released(jobs, released)
        self._state = state
        self._last_slot = int(slot)
        self._decisions[int(slot)] = decision
        for settled in [s for s in self._intents if s <= int(slot)]:
            del self._intents[settled]
        if prune_decisions_before_slot is not None:
            for old in [s for s in self._decisions if s < prune_decisions_before_slot]:
                del self._decisions[old]


def shadow_cluster(cluster: Cluster, store: JobStore, clock: Clock) -> FakeCluster:
    """A simulated cluster that starts as ``cluster`` is now: its TASK group's requested nodes, and
    its running steps of jobs in ``store``, each finishing at the job's release time plus its
    estimated length. Reads the cluster once; raises ActuationError naming what failed."""
    try:
        group = cluster.task_group()
        steps = cluster.steps(active_only=True)
    except ActuationError as error:
        raise ActuationError(f"dry run: cannot read the cluster to start its shadow from: {error}", permanent=error.permanent) from error
    jobs = {job.job_id: job for job in store.active_jobs()}
    now_s = clock.now_s()
    running = [
        (step.job_id, step.step_id, jobs[step.job_id].released_s or now_s, jobs[step.job_id].length_s)
        for step in steps
        if step.job_id in jobs
    ]
    return FakeCluster.seeded(clock, group.requested, running)
