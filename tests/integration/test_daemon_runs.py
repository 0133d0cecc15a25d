"""The daemon records each finished step's run (EMR's start and end) with its state, in the slot's one
store transaction, and says which jobs ended after their deadline: in the slot's log line and in the
``autoscaler_jobs_overran`` counter, by tenant. On the in-memory cluster a step runs from its release
for its planned length, so every time here is worked out by hand."""

from __future__ import annotations

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
