"""compare's row of figures from a finished twin, by hand (autoscaler.core.compare)."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.core.compare import against, cumulative_kwh, released_late, twin_figures
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
    used = cumulative_kwh(twin, SLOT_S, 5)
    assert used[-1] == pytest.approx(twin.bill().energy_wh / 1000)
    assert np.all(np.diff(used) >= -1e-12)
    assert used[1] == pytest.approx(2 * 100.0 * SLOT_S / 3600 / 1000)


def test_against_is_a_percentage_of_the_reference():
    assert against(110.0, 100.0) == pytest.approx(10.0)
    assert against(90.0, 100.0) == pytest.approx(-10.0)
    assert against(1.0, 0.0) is None
