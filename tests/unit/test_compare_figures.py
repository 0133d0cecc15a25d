"""compare's row of figures from a finished twin, by hand (autoscaler.core.compare)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autoscaler.core.compare import against, cumulative_use, released_late, strongest_managed, twin_figures
from autoscaler.core.twin import ClusterTwin, TwinConfig

SLOT_S = 300.0


def test_a_job_released_in_its_start_by_slot_is_in_time_and_one_slot_later_is_late():
    # deadline 1,000 s, 100 s long: it must start by 900 s, in slot 3 (900-1,200 s).
    assert not released_late(900.0, 1000.0, 100.0, SLOT_S)
    assert not released_late(1199.0, 1000.0, 100.0, SLOT_S)
    assert released_late(1200.0, 1000.0, 100.0, SLOT_S)


def two_jobs_on_one_node() -> ClusterTwin:
    """One node usable at once; two 600 s jobs submitted at 0: the second starts at 600, ends at 1,200."""
    config = TwinConfig(provision_s=0.0, idle_power_w=50.0, busy_power_w=100.0, price_per_node_hour=0.36)
    twin = ClusterTwin(config)
    twin.resize(0.0, 1)
    twin.add_step(0.0, "s-a", "a", 600.0, submit_s=0.0, deadline_s=700.0)
    twin.add_step(0.0, "s-b", "b", 600.0, submit_s=0.0, deadline_s=1000.0)
    twin.finish(0.0)
    return twin


def test_the_figures_of_two_jobs_on_one_node_by_hand():
    figures = twin_figures("fixed", two_jobs_on_one_node(), 0, SLOT_S)
    # The node is up 0-1,200 s and busy all of it: 1/3 node-hour, 100 W for 1/3 h.
    assert figures.node_hours == pytest.approx(1200 / 3600)
    assert figures.busy_node_hours == pytest.approx(1200 / 3600)
    assert figures.cost_usd == pytest.approx(0.36 / 3)
    assert figures.energy_kwh == pytest.approx(100.0 * 1200 / 3600 / 1000)
    assert figures.jobs == 2
    # b must start by 400 s (slot 1) and was added at 0: in time; it ends at 1,200, after its 1,000 s deadline.
    assert figures.jobs_released_late == 0
    assert figures.jobs_finished_after_deadline == 1
    # Waits 0 and 600 s: median 300, 95th percentile 0 + 0.95 x 600.
    assert figures.wait_p50_s == pytest.approx(300.0)
    assert figures.wait_p95_s == pytest.approx(570.0)
    # One resize (0 -> 1); the end of the run, when finish removes every node, is not a scale event.
    assert (figures.peak_nodes, figures.scale_events, figures.jobs_killed) == (1, 1, 0)
    assert figures.co2_kg is None


def test_kg_co2_weighs_each_slots_energy_by_its_signal():
    # 100 W through slots 0-3 (1,200 s): 8.33 Wh a slot; 100 g/kWh in the first two, 400 in the others.
    figures = twin_figures("fixed", two_jobs_on_one_node(), 0, SLOT_S, np.array([100.0, 100.0, 400.0, 400.0]))
    wh_per_slot = 100.0 * SLOT_S / 3600
    assert figures.co2_kg == pytest.approx(wh_per_slot * (100 + 100 + 400 + 400) / 1e6)


def test_cumulative_kwh_ends_at_the_bills_energy():
    twin = two_jobs_on_one_node()
    used, kg = cumulative_use(twin, SLOT_S, 5)
    assert kg is None
    assert used[-1] == pytest.approx(twin.bill().energy_wh / 1000)
    assert np.all(np.diff(used) >= -1e-12)
    assert used[1] == pytest.approx(2 * 100.0 * SLOT_S / 3600 / 1000)


def test_against_is_a_percentage_of_the_reference():
    assert against(110.0, 100.0) == pytest.approx(10.0)
    assert against(90.0, 100.0) == pytest.approx(-10.0)
    assert against(1.0, 0.0) is None


def booted_before_zero() -> ClusterTwin:
    """A node asked for at -330 s (usable at 0, as fixed starts), one 600 s job at 0."""
    config = TwinConfig(provision_s=330.0, idle_power_w=50.0, busy_power_w=100.0)
    twin = ClusterTwin(config, now_s=-330.0)
    twin.resize(-330.0, 1)
    twin.add_step(0.0, "s-a", "a", 600.0, submit_s=0.0, deadline_s=700.0)
    twin.finish(0.0)
    return twin


def test_energy_before_the_traces_start_is_counted_in_kwh_and_kg():
    twin = booted_before_zero()
    boot_wh = 50.0 * 330 / 3600
    assert twin.bill().energy_wh == pytest.approx(boot_wh + 100.0 * 600 / 3600)
    # A flat 400 g/kWh: kg is the bill's kWh x 0.4, the boot before 0 included.
    figures = twin_figures("fixed", twin, 0, SLOT_S, np.full(4, 400.0))
    assert figures.co2_kg == pytest.approx(twin.bill().energy_wh / 1000 * 0.4)
    assert figures.co2_uncovered_slots == 0
    used, kg = cumulative_use(twin, SLOT_S, 3, np.full(4, 400.0))
    assert used[0] == pytest.approx((boot_wh + 100.0 * 300 / 3600) / 1000)
    assert used[-1] == pytest.approx(twin.bill().energy_wh / 1000)
    assert kg[-1] == pytest.approx(figures.co2_kg)


def test_a_signal_that_stops_early_leaves_the_rest_out_and_counts_the_slots():
    figures = twin_figures("fixed", two_jobs_on_one_node(), 0, SLOT_S, np.array([100.0, 100.0, np.nan, np.nan]))
    assert figures.co2_kg == pytest.approx(2 * 100.0 * SLOT_S / 3600 * 100 / 1e6)
    assert figures.co2_uncovered_slots == 2


def test_the_reference_is_the_managed_variant_with_the_least_kwh_among_those_that_finished():
    row = twin_figures("managed", two_jobs_on_one_node(), 0, SLOT_S)

    def named(name: str, kwh: float):
        return dataclasses.replace(row, name=name, energy_kwh=kwh)

    managed, dampened, hold = named("managed", 72.5), named("managed-dampened", 68.8), named("hold", 61.0)
    assert strongest_managed([hold, managed, dampened]) is dampened  # hold is no reference, however low
    assert strongest_managed([hold, named("managed", 60.0), dampened]).name == "managed"
    assert strongest_managed([managed, None, hold]) is managed  # the dampened run did not finish
    assert strongest_managed([named("managed-dampened", 72.5), managed]) is managed  # a tie: managed
    assert strongest_managed([hold, None]) is None


def test_why_jobs_overran_is_read_off_each_steps_own_times():
    """One node usable at once, four jobs of 600 s true length:
    "long" has 500 s from submission to deadline: too long whatever runs it;
    "held" is submitted at 0, deadline 1,000, but added at 600 (it needed 600 s from 400): held;
    "queued" is added at 0 with deadline 1,100 but waits for the node until 1,200: waited;
    "fine" is added at 1,800, runs 1,800-2,400, deadline 3,000: in time."""
    from autoscaler.core.compare import overran_causes

    twin = ClusterTwin(TwinConfig(provision_s=0.0))
    twin.resize(0.0, 1)
    twin.add_step(0.0, "s-long", "long", 600.0, submit_s=0.0, deadline_s=500.0)  # runs 0-600
    twin.add_step(0.0, "s-queued", "queued", 600.0, submit_s=0.0, deadline_s=1100.0)  # runs 600-1,200
    twin.advance(600.0)
    twin.add_step(600.0, "s-held", "held", 600.0, submit_s=0.0, deadline_s=1000.0)  # runs 1,200-1,800
    twin.advance(1800.0)
    twin.add_step(1800.0, "s-fine", "fine", 600.0, submit_s=1800.0, deadline_s=3000.0)
    twin.finish(1800.0)
    ends = {step.job_id: step.end_s for step in twin.steps.values()}
    assert ends == {"long": 600.0, "queued": 1200.0, "held": 1800.0, "fine": 2400.0}
    assert overran_causes(twin.steps.values()) == (1, 1, 1)
    row = twin_figures("x", twin, 0, SLOT_S)
    assert (row.jobs_finished_after_deadline, row.overran_too_long, row.overran_held, row.overran_waited) == (3, 1, 1, 1)
