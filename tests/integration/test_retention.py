"""The store stays its size: finished jobs and decisions older than the retention are pruned at each slot's record."""

from __future__ import annotations

import pytest

from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.daemon import SlotRunner
from autoscaler.core.controller import ControllerConfig
from autoscaler.core.model import Job, StepSpec

SLOT_S = 300.0


def test_finished_jobs_and_decisions_older_than_the_retention_go_and_nothing_else(tmp_path):
    clock = SimulatedClock(0.0)
    config = ControllerConfig(policy="follow", deadline_slots=0, slot_s=SLOT_S, max_nodes=50)
    retention_s = 6 * SLOT_S
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        runner = SlotRunner(config=config, store=store, cluster=FakeCluster(clock), clock=clock, retention_s=retention_s)
        for slot in range(30):
            clock.time_s = slot * SLOT_S
            # two one-slot jobs a slot, and one that runs for the whole test
            jobs = [Job(f"j{slot}-{i}", "n", "t", clock.time_s, clock.time_s + 2 * SLOT_S, 200.0, StepSpec(args=("true",))) for i in range(2)]
            if slot == 0:
                jobs.append(Job("long", "n", "t", 0.0, 40 * SLOT_S, 35 * SLOT_S, StepSpec(args=("true",))))
            store.submit_many(jobs)
            runner.run_slot()
        now_s = clock.time_s
        kept = {job.job_id: job for job in store.all_jobs()}
        decided = [d["slot"] for d in store.decisions()]
    cutoff_s = now_s - retention_s
    # Every job released before the cutoff and finished is gone; the others are all there.
    for slot in range(30):
        for i in range(2):
            job_id = f"j{slot}-{i}"
            assert (job_id in kept) == (slot * SLOT_S >= cutoff_s), job_id
    assert kept["long"].state == "running"  # older than the cutoff, but not finished
    assert decided == list(range(config.slot_of(cutoff_s), 30))


def test_a_store_that_cannot_write_stops_the_slot_before_emr_is_touched(tmp_path):
    from autoscaler.core.errors import StoreError

    clock = SimulatedClock(0.0)
    calls: list = []
    cluster = FakeCluster(clock, calls=calls)
    config = ControllerConfig(policy="follow", deadline_slots=0, slot_s=SLOT_S, max_nodes=10_000)
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        # 4,000 jobs due now: the slot's intent (their ids, about 100 kB) needs pages the file does not have.
        store.submit_many([Job(f"nightly-etl-{i:06d}", "n", "t", 0.0, 2 * SLOT_S, 200.0, StepSpec(args=("true",))) for i in range(4000)])
        runner = SlotRunner(config=config, store=store, cluster=cluster, clock=clock)
        # The disk is full: SQLite may not grow the file by a page (SQLITE_FULL on the next write that needs one).
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreError, match="disk full"):
            runner.run_slot()
        assert calls == []  # no step added, no resize
        assert {job.state for job in store.all_jobs()} == {"queued"} and store.last_slot() is None


def test_a_job_submitted_while_the_runner_reads_the_store_is_not_skipped(tmp_path):
    class SubmitsBetweenReads(SqliteJobStore):
        """A submission lands right after the runner read the active jobs at its start."""

        def active_jobs(self):
            jobs = super().active_jobs()
            if not getattr(self, "_raced", False):
                self._raced = True
                self.submit(Job("late-comer", "n", "t", 0.0, 2 * SLOT_S, 200.0, StepSpec(args=("true",))))
            return jobs

    clock = SimulatedClock(0.0)
    config = ControllerConfig(policy="follow", deadline_slots=0, slot_s=SLOT_S, max_nodes=50)
    with SubmitsBetweenReads(tmp_path / "jobs.db") as store:
        store.submit(Job("first", "n", "t", 0.0, 2 * SLOT_S, 200.0, StepSpec(args=("true",))))
        runner = SlotRunner(config=config, store=store, cluster=FakeCluster(clock), clock=clock)
        decision = runner.run_slot()
    assert set(decision.release) == {"first", "late-comer"}
