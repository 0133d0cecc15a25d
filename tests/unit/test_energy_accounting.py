"""Energy of schedules: hand-computed cases of whole nodes, start-up energy and the Table IV report."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from autoscaler.errors import ConfigError
from energy.accounting import (
    EnergyReport,
    counterfactual_schedules,
    modelled_schedule,
    schedules_report,
    whole_nodes,
)
from energy.power import TABLE_III, PowerModel
from energy.report import energy_png, markdown, slots_csv, table_rows

SLOT_S = 300.0
IDLE_W, PEAK_W = 60.30, 60.30 + 25.70 + 7.21 + 0.66  # Table III, with every u = 1


def test_whole_nodes_round_up_but_not_solver_noise():
    np.testing.assert_array_equal(whole_nodes(np.array([0.0, 0.2, 1.0, 1.0 + 1e-12, 2.5, -1e-12])), [0, 1, 1, 1, 3, 0])


def test_a_hand_computed_schedule():
    # m = (1.5, 2, 0), x = (1.5, 1, 0): nodes (2, 2, 0). Slot 0: u = 0.75 on 2 nodes; slot 1: u = 0.5 on 2.
    # With proportional I/O every alpha sees u, so P(u) = 60.30 + (25.70 + 7.21 + 0 + 0.66) u.
    # Start-up: 2 nodes in slot 0, each 300 s at 60.30 W.
    energy = modelled_schedule("p", np.array([1.5, 2.0, 0.0]), np.array([1.5, 1.0, 0.0]), SLOT_S, TABLE_III, boot_s=300.0)
    alphas = 25.70 + 7.21 + 0.66
    expected = np.array([2 * (60.30 + alphas * 0.75), 2 * (60.30 + alphas * 0.5), 0.0]) * SLOT_S / 3600
    expected[0] += 2 * 60.30 * 300.0 / 3600
    np.testing.assert_allclose(energy.slot_energy_wh, expected, rtol=1e-12)
    assert energy.boot_energy_wh == pytest.approx(2 * 60.30 * 300.0 / 3600)
    assert (energy.node_slots, energy.switch_ons, energy.source) == (4.0, 2.0, "modelled")


def test_start_up_is_charged_per_node_started_only():
    model = PowerModel(name="flat", alpha_cpu=0.0, alpha_disk=0.0, alpha_net=0.0, gamma_cpu=100.0)
    nodes = np.array([3.0, 1.0, 4.0, 4.0])
    energy = modelled_schedule("p", nodes, nodes, 3600.0, model, boot_s=36.0)
    # 3 started, then 3 more: 6 starts of 36 s at 100 W = 6 Wh; running: 12 node-hours at 100 W.
    assert energy.switch_ons == 6.0
    assert energy.boot_energy_wh == pytest.approx(6.0)
    assert energy.energy_wh == pytest.approx(1200.0 + 6.0)


def test_counterfactuals_follow_the_load_and_keep_every_node_on():
    schedules = counterfactual_schedules(np.array([2.0, 0.0, 5.0]), 4)
    np.testing.assert_array_equal(schedules["follow"][0], [2, 0, 5])
    np.testing.assert_array_equal(schedules["no provisioning"][0], [4, 4, 4])
    np.testing.assert_array_equal(schedules["no provisioning"][1], [2, 0, 4])
    with pytest.raises(ConfigError, match="load"):
        counterfactual_schedules(np.array([1.0, np.nan]), 4)


def test_bad_boot_time_and_over_assigned_work_are_errors_not_reports():
    with pytest.raises(ConfigError, match="boot_s"):
        modelled_schedule("p", np.ones(2), np.ones(2), SLOT_S, boot_s=-1.0)
    with pytest.raises(ConfigError, match="exceeds capacity"):
        # x may not exceed m; whole nodes do not hide it (2.5 > 2 nodes' worth of m = 2).
        modelled_schedule("p", np.array([2.0]), np.array([2.5]), SLOT_S)


def test_report_compares_each_schedule_with_follow():
    load = np.array([2.0, 0.0, 2.0, 0.0])
    smooth = (np.array([1.0, 1.0, 1.0, 1.0]), np.array([1.0, 1.0, 1.0, 1.0]))
    report = schedules_report("t", load, {"smooth": smooth}, SLOT_S, boot_s=600.0)
    assert [e.schedule for e in report.schedules] == ["no provisioning", "follow", "smooth"]
    follow, smooth_energy = report.get("follow"), report.get("smooth")
    # Same work (4 node-slots at u = 1); follow starts 4 nodes, smooth 1: 3 starts saved.
    assert follow.node_slots == smooth_energy.node_slots == 4
    assert report.saved_wh("smooth") == pytest.approx(3 * IDLE_W * 600.0 / 3600)
    assert report.reduction_percent("smooth") == pytest.approx(100 * report.saved_wh("smooth") / follow.energy_wh)
    # No provisioning: 2 nodes on in all 4 slots, half busy on average.
    assert report.get("no provisioning").node_slots == 8
    header, rows = table_rows(report)
    assert header == ["metric", "no provisioning (modelled)", "% reduction", "follow (modelled)", "smooth (modelled)", "% reduction"]
    energy_row = dict(zip(header, rows[0], strict=True))
    assert float(energy_row["follow (modelled)"]) == pytest.approx(follow.energy_wh / 1000, abs=0.005)


def test_report_files_carry_every_slot_and_a_png():
    report = schedules_report("t", np.array([1.0, 3.0]), {"p": (np.array([2.0, 2.0]), np.array([1.0, 2.0]))}, SLOT_S)
    rows = list(csv.reader(io.StringIO(slots_csv(report))))
    assert rows[0][:4] == ["slot", "start", "no provisioning energy_wh", "no provisioning nodes"]
    assert len(rows) == 1 + report.n_slots
    total = sum(float(r[rows[0].index("p energy_wh")]) for r in rows[1:])
    assert total == pytest.approx(report.get("p").energy_wh, rel=1e-5)
    assert energy_png(report).startswith(b"\x89PNG\r\n\x1a\n")
    text = markdown(report)
    assert "| Energy (kWh) |" in text and "p: " in text and "modelled" in text


def test_a_report_needs_its_baseline_and_equal_lengths():
    a = modelled_schedule("follow", np.ones(2), np.ones(2), SLOT_S)
    b = modelled_schedule("p", np.ones(3), np.ones(3), SLOT_S)
    with pytest.raises(ConfigError, match="same slots"):
        EnergyReport("t", 0.0, SLOT_S, (a, b), TABLE_III, 300.0)
    with pytest.raises(ConfigError, match="baseline"):
        EnergyReport("t", 0.0, SLOT_S, (b,), TABLE_III, 300.0)
