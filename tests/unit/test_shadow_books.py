"""Shadow mode's books, by hand: the cluster's node-seconds from polls, its busy time from step runs,
a step as a job, and a counterfactual held back until the steps before it have ended."""

from __future__ import annotations

from dataclasses import astuple

import numpy as np
import pytest

from autoscaler.adapters.fakes import SimulatedClock
from autoscaler.app.config import Settings
from autoscaler.app.shadow_run import ShadowRun
from autoscaler.core.errors import ConfigError
from autoscaler.core.ports import TaskGroup
from autoscaler.core.shadow_books import ActualBooks, ClusterStep, step_job
from autoscaler.core.twin import TwinConfig

TWIN = TwinConfig(idle_power_w=60.0, busy_power_w=100.0, price_per_node_hour=0.5)


def test_actual_books_hold_each_poll_until_the_next_and_price_busy_time_at_the_busy_power():
    books = ActualBooks(1000.0, TWIN)
    books.nodes(900.0, 1)  # before the start: counted from it
    books.nodes(1600.0, 3)
    books.nodes(2200.0, 3)  # no change
    books.nodes(2800.0, 0)
    books.run("s-1", 1700.0, 2500.0)
    books.run("s-2", 2600.0, None)  # still running at 3000: counted to it, clipped to the nodes' window
    use = books.use(3000.0, 300.0)
    node_s = 600 * 1 + 1200 * 3  # 1000-1600 one node, 1600-2800 three
    busy_s = 800 + 400
    assert use.node_hours == pytest.approx(node_s / 3600)
    assert use.cost_usd == pytest.approx(node_s / 3600 * 0.5)
    assert use.energy_kwh == pytest.approx((node_s * 60 + busy_s * 40) / 3600 / 1000)
    assert use.co2_kg is None
    # At 100 g/kWh in every slot the kgCO2 is the kWh / 10; NaN (not covered) counts nothing.
    g = np.full(7, 100.0)
    assert books.use(3000.0, 300.0, g).co2_kg == pytest.approx(use.energy_kwh * 0.1)
    g[:] = np.nan
    assert books.use(3000.0, 300.0, g).co2_kg == 0.0


def test_actual_books_closed_slot_by_slot_count_what_they_count_whole_and_forget_what_ended():
    def books_of() -> ActualBooks:
        books = ActualBooks(0.0, TWIN)
        books.nodes(0.0, 2)
        books.run("s-1", 100.0, 400.0)
        books.run("s-2", 200.0, None)
        return books

    g = np.array([100.0, 200.0, np.nan, 400.0])
    whole, closed = books_of(), books_of()
    closed.close(300.0, 300.0, g)
    closed.nodes(500.0, 5)
    whole.nodes(500.0, 5)
    closed.close(600.0, 300.0, g)
    assert list(closed._runs) == ["s-2"] and len(closed._changes) == 1  # what ended before 600 s is in the totals
    assert astuple(closed.use(1000.0, 300.0, g)) == pytest.approx(astuple(whole.use(1000.0, 300.0, g)))


def test_actual_books_refuse_a_count_that_is_not_whole_and_a_poll_back_in_time():
    books = ActualBooks(0.0, TWIN)
    with pytest.raises(ConfigError, match="whole number"):
        books.nodes(10.0, 1.5)
    books.nodes(10.0, 1)
    with pytest.raises(ConfigError, match="before the last"):
        books.nodes(5.0, 2)


def test_a_step_becomes_a_job_due_its_slack_after_its_planned_length_and_runs_its_true_length():
    step = ClusterStep("s-A", "nightly", "COMPLETED", created_s=1200.0, start_s=1300.0, end_s=1900.0)
    job = step_job(step, start_s=0.0, slack_s=1800.0)
    assert (job.job_id, job.name, job.submit_s, job.length_s, job.submitted_length_s, job.deadline_s) == ("s-A", "nightly", 1200.0, 600.0, 600.0, 3600.0)
    # Planned at the p90 of its name's runs that ended by its creation (400 s and 1,000 s; not the one
    # that ended after), it still runs its own 600 s.
    learned = step_job(step, start_s=0.0, slack_s=1800.0, past_runs=[(0.0, 400.0), (100.0, 1100.0), (0.0, 5000.0)], quantile=0.9)
    assert learned.length_s == 1000.0 and learned.submitted_length_s == 600.0 and learned.deadline_s == 1200.0 + 1000.0 + 1800.0
    # A step created before the shadow started is submitted at the start.
    assert step_job(step, start_s=1500.0, slack_s=0.0).submit_s == 1500.0
    with pytest.raises(ConfigError, match="only an ended step"):
        step_job(ClusterStep("s-B", "x", "RUNNING", 0.0, 10.0), start_s=0.0, slack_s=0.0)
    with pytest.raises(ConfigError, match="slack"):
        step_job(step, start_s=0.0, slack_s=float("nan"))
    assert ClusterStep("s-C", "x", "CANCELLED", 0.0).run_s == 0.0


class EmrLike:
    """What the shadow reads, held in memory: the TASK group and the steps, set by the test."""

    def __init__(self) -> None:
        self.nodes = 0
        self.steps: dict[str, ClusterStep] = {}

    def task_group(self) -> TaskGroup:
        return TaskGroup("ig-1", self.nodes, self.nodes)

    def cluster_steps(self, newer_than=frozenset(), active_only=False):
        steps = sorted(self.steps.values(), key=lambda s: s.created_s)
        return [s for s in steps if not active_only or not s.ended]

    def cluster_step(self, step_id):
        return self.steps[step_id]


def test_the_counterfactual_plays_a_slot_only_once_every_step_created_before_its_end_has_ended():
    emr, clock = EmrLike(), SimulatedClock(3000.0)
    shadow = ShadowRun(emr, clock, Settings(deadline_slots=2), TwinConfig())
    emr.steps["s-1"] = ClusterStep("s-1", "a", "COMPLETED", 3010.0, 3010.0, 3100.0)
    emr.steps["s-2"] = ClusterStep("s-2", "b", "RUNNING", 3400.0, 3400.0)
    clock.time_s = 4200.0
    played = shadow.run_slot()
    assert [s.slot for s in played] == [10]  # 3000-3300; the slot holding s-2's creation waits for its end
    assert shadow.lag_s() == pytest.approx(900.0)
    emr.steps["s-2"] = ClusterStep("s-2", "b", "COMPLETED", 3400.0, 3400.0, 3500.0)
    assert [s.slot for s in shadow.run_slot()] == [11, 12, 13]
    assert shadow.lag_s() == 0.0
    released = [job for s in shadow.slots for job in s.released]
    assert sorted(released) == ["s-1", "s-2"]


def test_the_daily_report_counts_the_slots_that_end_in_its_day_once():
    from autoscaler.app.shadow_report import markdown, shadow_window
    from autoscaler.app.shadow_run import ShadowSlot, shadow_daily_report
    from autoscaler.core.shadow_books import ShadowFigures, UseFigures

    def slot(end_s: float, node_hours: float, released: int) -> ShadowSlot:
        actual = UseFigures(node_hours, node_hours * 0.24, node_hours * 0.08, None)
        shadow = UseFigures(node_hours / 2, node_hours * 0.12, node_hours * 0.05, None)
        return ShadowSlot(0, {}, ShadowFigures(end_s, actual, shadow), tuple(f"s-{i}" for i in range(released)))

    day = 86400.0 * 20000
    slots = [slot(day - 300, 10.0, 1), slot(day, 12.0, 2), slot(day + 300, 20.0, 3), slot(day + 86400, 30.0, 4), slot(day + 86700, 31.0, 5)]
    window = shadow_window(slots, day, day + 86400)
    assert (window.slots, window.released) == (2, 7)
    assert window.figures.actual.node_hours == pytest.approx(18.0) and window.figures.shadow.node_hours == pytest.approx(9.0)
    text = markdown(window, "hold", 600.0)
    assert "| saved by hold | 9.00 (+50.0 %) |" in text and "kgCO2eq" not in text
    assert "No slot of the window was played yet" in markdown(shadow_window(slots, day + 2 * 86400, day + 3 * 86400), "hold", 7200.0)

    from types import SimpleNamespace

    # What shadow_daily_report reads of a ShadowRun, the day after: yesterday is [day, day + 86400).
    played = SimpleNamespace(
        clock=SimulatedClock(day + 86400 + 600), slots=slots, lag_s=lambda: 300.0,
        counterfactual=SimpleNamespace(config=SimpleNamespace(policy_name="hold")),
    )  # fmt: skip
    assert shadow_daily_report(played, Settings()) == markdown(window, "hold", 300.0)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--dry-run"], "--dry-run"), (["--policy", "vfw"], "--policy"), (["--length-error", "0.5"], "--length-error"),
        (["--shadow-poll-s", "0.5"], "--shadow-poll-s"), (["--replay", "A"], "--replay is not for shadow mode"),
        (["--speedup", "5"], "--speedup is not for shadow mode"),
    ],
)  # fmt: skip
def test_run_shadow_refuses_by_name_a_flag_it_does_not_take(flags, named, tmp_path, capsys):
    from autoscaler.app.cli import main

    config = tmp_path / "config.toml"
    config.write_text('[cluster]\nid = "j-1"\nregion = "us-east-1"\n')
    assert main(["run", "--shadow", "--config", str(config), *flags]) == 2
    assert named in capsys.readouterr().err


def test_a_step_listed_after_its_slot_was_played_joins_the_next_slot_not_the_past():
    emr, clock = EmrLike(), SimulatedClock(3000.0)
    shadow = ShadowRun(emr, clock, Settings(deadline_slots=2), TwinConfig())
    clock.time_s = 3900.0
    assert [s.slot for s in shadow.run_slot()] == [10, 11, 12]
    emr.steps["s-9"] = ClusterStep("s-9", "late", "COMPLETED", 3100.0, 3100.0, 3200.0)  # EMR lists it only now
    clock.time_s = 4200.0
    assert [s.slot for s in shadow.run_slot()] == [13]
    job = shadow.counterfactual.jobs[0]
    # Its deadline, 3,100 + 100 + 600 = 3,800, is kept unless it cannot run by it from the new start.
    assert (job.submit_s, job.deadline_s) == (3900.0, 3900.0 + 100.0)


def test_a_saving_never_computed_reads_as_unknown_not_as_zero():
    # Without a carbon signal the kgCO2 saving is not known: /metrics says NaN, not "0 g saved".
    import math

    from prometheus_client import CollectorRegistry, generate_latest

    from autoscaler.adapters.shadow_publish import ShadowMetrics

    registry = CollectorRegistry()
    ShadowMetrics(registry, "hold")
    assert math.isnan(registry.get_sample_value("autoscaler_shadow_co2_saved_grams"))
    assert b"autoscaler_shadow_co2_saved_grams NaN" in generate_latest(registry)
