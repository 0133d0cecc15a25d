"""Crashes between any two steps of a slot lose no job, release none twice and none late.

A hypothesis state machine drives the slot runner on an SQLite store on disk and the in-memory
cluster. Every call the runner makes to the cluster or the store is a point where the process may
die: a rule picks the n-th call of the next slot to crash at (a BaseException, so no handler of the
runner's catches it, as a SIGKILL would not be caught). The restarted daemon is a new runner on the
same store file and the same cluster (the cluster outlives the process), and decides the same slot
again before the clock moves on.
"""

from __future__ import annotations

from collections import Counter

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.daemon import SlotRunner
from autoscaler.core.controller import ControllerConfig, start_by_slot
from autoscaler.core.model import Job, StepSpec

SLOT_S = 300.0


class Crash(BaseException):
    """The process dies here."""


class Fuse:
    """Counts the calls made through it and raises Crash at the chosen one (None: never)."""

    def __init__(self) -> None:
        self.at: int | None = None
        self.calls = 0

    def tick(self) -> None:
        self.calls += 1
        if self.at is not None and self.calls == self.at:
            self.at = None
            raise Crash()


class Fused:
    """Any object whose method calls go through the fuse first."""

    def __init__(self, target, fuse: Fuse, methods: tuple[str, ...]) -> None:
        self._target, self._fuse, self._methods = target, fuse, methods

    def __getattr__(self, name: str):
        value = getattr(self._target, name)
        if name not in self._methods:
            return value

        def call(*args, **kwargs):
            self._fuse.tick()
            result = value(*args, **kwargs)
            self._fuse.tick()  # after the call: it happened, and then the process died
            return result

        return call


CLUSTER_CALLS = ("task_group", "resize", "add_step", "steps", "step_state")
STORE_CALLS = ("active_jobs", "jobs_after", "max_seq", "load_state", "recent_step_ids", "record_intent", "commit_slot")


class SlotsWithCrashes(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.folder = tempfile.mkdtemp(prefix="crashes-")
        self.path = f"{self.folder}/jobs.db"
        self.clock = SimulatedClock(0.0)
        self.cluster = FakeCluster(self.clock)
        self.config = ControllerConfig(policy="hold", deadline_slots=3, slot_s=SLOT_S, max_nodes=1_000)
        self.fuse = Fuse()
        self.slot = 0
        self.submitted: dict[str, Job] = {}
        self.added = Counter()  # job id -> steps added for it
        self.store = None
        self.runner = None
        self._start()

    def _start(self) -> None:
        """A (re)started daemon: a new store handle and a new runner."""
        if self.store is not None:
            self.store.close()
        self.store = SqliteJobStore(self.path)
        original_add = self.cluster.add_step
        counted = self.added

        class Counting:
            def __init__(self, cluster) -> None:
                self._cluster = cluster

            def __getattr__(self, name):
                return getattr(self._cluster, name)

            def add_step(self, job):
                step_id = original_add(job)
                counted[job.job_id] += 1
                return step_id

        self.runner = SlotRunner(
            config=self.config,
            store=Fused(self.store, self.fuse, STORE_CALLS),
            cluster=Fused(Counting(self.cluster), self.fuse, CLUSTER_CALLS),
            clock=self.clock,
            retention_s=None,
        )

    def teardown(self) -> None:
        import shutil

        self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    @rule(count=st.integers(1, 6), length_slots=st.integers(0, 3), slack_slots=st.integers(0, 3))
    def submit(self, count: int, length_slots: int, slack_slots: int) -> None:
        now_s = self.clock.now_s()
        jobs = []
        for _ in range(count):
            job_id = f"job-{len(self.submitted) + len(jobs)}"
            length_s = length_slots * SLOT_S + 60.0
            jobs.append(
                Job(job_id, job_id, "t", now_s, now_s + length_s + slack_slots * SLOT_S + SLOT_S, length_s, StepSpec(args=("true",)))
            )
        with SqliteJobStore(self.path) as users:
            users.submit_many(jobs)
        self.submitted.update((job.job_id, job) for job in jobs)

    @rule(crash_at=st.none() | st.integers(1, 60))
    def run_slot(self, crash_at: int | None) -> None:
        """Run the next slot, dying at its ``crash_at``-th call (counted from the slot's start)."""
        self.clock.time_s = self.slot * SLOT_S
        self.fuse.calls = 0
        self.fuse.at = crash_at
        try:
            self.runner.run_slot()
        except Crash:
            self._start()
            self.runner.run_slot()  # the restart decides the same slot
        self.fuse.at = None
        self.slot += 1

    @precondition(lambda self: self.slot > 0)
    @invariant()
    def nothing_lost_none_twice_none_late(self) -> None:
        with SqliteJobStore(self.path) as store:
            stored = {job.job_id: job for job in store.all_jobs()}
        assert set(self.submitted) <= set(stored), "a submitted job is missing from the store"
        assert all(n == 1 for n in self.added.values()), f"steps added twice: {[j for j, n in self.added.items() if n > 1]}"
        for job_id, job in stored.items():
            if job.step_id is not None:
                assert self.added[job_id] == 1
                assert self.config.slot_of(job.released_s) <= start_by_slot(job, self.config), f"{job_id} released late"
            elif job.state == "queued":
                assert start_by_slot(job, self.config) >= self.slot, f"{job_id} is queued past its start-by slot"
            else:
                raise AssertionError(f"{job_id} is {job.state} with no step id")
        # Every step on the cluster is a job the store knows as released (none lost between add and record).
        for status in self.cluster.steps():
            assert stored[status.job_id].step_id == status.step_id


TestSlotsWithCrashes = SlotsWithCrashes.TestCase
TestSlotsWithCrashes.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
