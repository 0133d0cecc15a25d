"""The daemon records each finished step's run (EMR's start and end) with its state, in the slot's one
store transaction, and says which jobs ended after their deadline: in the slot's log line and in the
``autoscaler_jobs_overran`` counter, by tenant. On the in-memory cluster a step runs from its release
for its planned length, so every time here is worked out by hand."""

from __future__ import annotations

import dataclasses

from structlog.testing import capture_logs

from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
from autoscaler.adapters.health import Telemetry
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.daemon import SlotRunner
from autoscaler.core.controller import ControllerConfig
from autoscaler.core.model import Job, StepSpec


def test_finished_runs_are_stored_and_a_run_past_its_deadline_is_logged_and_counted(tmp_path):
    clock = SimulatedClock(0.0)
    cluster = FakeCluster(clock)
    telemetry = Telemetry(300.0, clock=clock.now_s)
    config = ControllerConfig(policy="follow", deadline_slots=0, slot_s=300.0, max_nodes=10)
    jobs = [
        Job("fits", "etl", "ads", 0.0, 600.0, 300.0, StepSpec(args=("true",))),  # runs 0..300, deadline 600
        Job("overruns", "etl", "ads", 0.0, 450.0, 600.0, StepSpec(args=("true",))),  # runs 0..600, deadline 450
    ]
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        store.submit_many(jobs)
        runner = SlotRunner(config=config, store=store, cluster=cluster, clock=clock, telemetry=telemetry)
        with capture_logs() as logs:
            for slot in range(3):
                clock.time_s = slot * 300.0
                runner.run_slot()
        stored = {job.job_id: job for job in store.all_jobs()}
        learned_from = store.run_lengths_s("ads", "etl", 600.0)

    assert (stored["fits"].state, stored["fits"].run_start_s, stored["fits"].run_end_s) == ("done", 0.0, 300.0)
    assert (stored["overruns"].state, stored["overruns"].run_start_s, stored["overruns"].run_end_s) == ("done", 0.0, 600.0)
    assert not stored["fits"].overran and stored["overruns"].overran
    assert learned_from == [300.0, 600.0]
    slot_lines = [line for line in logs if line["event"] == "slot"]
    assert [line["overran"] for line in slot_lines] == [0, 0, 1]  # "fits" ends in slot 1, in time; "overruns" is seen ended in slot 2
    assert slot_lines[2]["overran_jobs"] == ["overruns"] and "overran_jobs" not in slot_lines[1]
    assert telemetry.registry.get_sample_value("autoscaler_jobs_overran_total", {"tenant": "ads"}) == 1.0


def test_a_restarted_runner_gives_new_jobs_the_margin_the_stored_runs_show(tmp_path):
    """20 done runs of 3 x their 100-s length in the store: a runner started on it (a restart) reads
    them back, so a new 200-s job gets (3 - 1) x 200 = 400 s of start margin."""
    clock = SimulatedClock(10_000.0)
    config = ControllerConfig(policy="hold", deadline_slots=12, slot_s=300.0, max_nodes=10)
    old = [Job(f"old{i}", "etl", "ads", 0.0, 5000.0, 100.0, StepSpec(args=("true",))) for i in range(20)]
    new = Job("new", "etl", "ads", 10_000.0, 20_000.0, 200.0, StepSpec(args=("true",)))
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        store.submit_many(old)
        store.commit_slot(1, {}, {}, {"slot": 1}, states={j.job_id: "done" for j in old}, runs={j.job_id: (1000.0, 1300.0) for j in old})
        store.submit_many([new])
        runner = SlotRunner(config=config, store=store, cluster=FakeCluster(clock), clock=clock)
        runner.run_slot()
        assert runner.length_errors.ratio() == 3.0
        assert runner.queue.get("new").start_margin_s == 400.0


class _SlowerCluster(FakeCluster):
    """The in-memory cluster, with each job's step running ``factor`` times its planned length."""

    def __init__(self, clock, factor: dict[str, float]) -> None:
        super().__init__(clock)
        self.factor = factor

    def add_step(self, job: Job) -> str:
        return super().add_step(dataclasses.replace(job, length_s=job.length_s * self.factor.get(job.job_id, 1.0)))


def test_a_waiting_job_takes_the_wider_margin_that_runs_finished_after_it_joined_show(tmp_path):
    """20 stored runs at 2 x their length: "held" (300 s, deadline far off) joins with (2 - 1) x 300 =
    300 s of margin. 20 jobs due at once then run 6 x their 100 s: once they are seen done (600 s on,
    slot 2), the pool's p99.9 (its largest of 40) is 6, and "held", still queued, is given
    (6 - 1) x 300 = 1,500 s, as a job joining then would be."""
    clock = SimulatedClock(10_000.0)
    config = ControllerConfig(policy="hold", deadline_slots=12, slot_s=300.0, max_nodes=50)
    old = [Job(f"old{i}", "etl", "ads", 0.0, 5000.0, 100.0, StepSpec(args=("true",))) for i in range(20)]
    held = Job("held", "etl", "ads", 10_000.0, 200_000.0, 300.0, StepSpec(args=("true",)))
    quick = [Job(f"quick{i}", "etl", "ads", 10_000.0, 10_400.0, 100.0, StepSpec(args=("true",))) for i in range(20)]
    cluster = _SlowerCluster(clock, {job.job_id: 6.0 for job in quick})
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        store.submit_many(old)
        store.commit_slot(1, {}, {}, {"slot": 1}, states={j.job_id: "done" for j in old}, runs={j.job_id: (1000.0, 1200.0) for j in old})
        store.submit_many([held, *quick])
        runner = SlotRunner(config=config, store=store, cluster=cluster, clock=clock)
        runner.run_slot()
        assert runner.queue.get("held").start_margin_s == 300.0
        assert {job.job_id for job in runner.queue.running()} == {job.job_id for job in quick}
        margins = []
        for slot in (1, 2):
            clock.time_s = 10_000.0 + slot * 300.0
            runner.run_slot()
            margins.append(runner.queue.get("held").start_margin_s)
        assert runner.length_errors.ratio() == 6.0
    assert margins == [300.0, 1500.0]
