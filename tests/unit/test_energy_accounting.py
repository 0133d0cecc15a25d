"""Energy of schedules: hand-computed cases of whole nodes, start-up energy and the Table IV report."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from autoscaler.app.energy_report import energy_png, markdown, slots_csv, table_rows
from autoscaler.core.energy.accounting import (
    EnergyReport,
    counterfactual_schedules,
    measured_schedule,
    modelled_schedule,
    schedules_report,
    whole_nodes,
)
from autoscaler.core.energy.metric_queries import METRIC_NAMES, instance_metrics
from autoscaler.core.energy.power import TABLE_III, PowerModel
from autoscaler.core.errors import ConfigError, MetricsError

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
    assert header == ["metric", "no provisioning (modelled)", "follow (modelled)", "smooth (modelled)", "% reduction vs follow"]
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


# --- a run measured from CloudWatch metrics, with values out of bounds --------------------------

START_S = 1_700_000_100  # 2023-11-14 22:15 UTC, a whole 300 s slot
IDS = ["i-a", "i-b"]
NAN = np.nan


def two_nodes() -> np.ndarray:
    """Two slots of two TASK nodes, (slot, instance, metric) in ``METRIC_NAMES`` order.

    i-a: CPU 50 %, DiskRead 1.5e9 + DiskWrite 0.5e9 bytes, NetworkIn 1e6 + NetworkOut 1e6 bytes.
    i-b: CPU 100 %, DiskRead 1e9 + 0 bytes, NetworkIn 3e6 + NetworkOut 2e6 bytes. No disk operations.
    """
    a = {"CPUUtilization": 50.0, "DiskReadBytes": 1.5e9, "DiskWriteBytes": 0.5e9, "NetworkIn": 1e6, "NetworkOut": 1e6}
    b = {"CPUUtilization": 100.0, "DiskReadBytes": 1e9, "DiskWriteBytes": 0.0, "NetworkIn": 3e6, "NetworkOut": 2e6}
    raw = np.zeros((2, 2, len(METRIC_NAMES)))
    for instance, values in enumerate((a, b)):
        for name, value in values.items():
            raw[:, instance, METRIC_NAMES.index(name)] = value
    return raw


def run(raw: np.ndarray, max_hold_slots: int = 0, utilisation: float = 0.5):
    metrics = instance_metrics(raw, IDS, START_S, 300, max_hold_slots=max_hold_slots)
    return measured_schedule("p (run)", metrics, np.ones((2, 2), dtype=bool), np.full(2, utilisation), TABLE_III)


def with_cell(metric: str, slot: int, instance: int, value: float) -> np.ndarray:
    raw = two_nodes()
    raw[slot, instance, METRIC_NAMES.index(metric)] = value
    return raw


# Eq. (13), Table III, by hand. Disk bytes are normalised by their maximum over the measured cells
# (2e9, i-a's), network bytes by theirs (5e6, i-b's).
POWER_A = 60.30 + 25.70 * 0.5 + 7.21 * (2e9 / 2e9) + 0.66 * (2e6 / 5e6)  # 80.624 W
POWER_B = 60.30 + 25.70 * 1.0 + 7.21 * (1e9 / 2e9) + 0.66 * (5e6 / 5e6)  # 90.265 W
MODELLED_HALF = 60.30 + (25.70 + 7.21 + 0.0 + 0.66) * 0.5  # a node-slot without data, u = 0.5: 77.085 W


def test_the_clean_run_by_hand():
    result = run(two_nodes())
    assert result.energy.energy_wh == pytest.approx(2 * (POWER_A + POWER_B) * 300 / 3600, rel=1e-12)
    assert (result.up_count, result.counted_count, result.modelled_count, result.out_of_bounds) == (4, 4, 0, ())


def test_a_1e30_disk_read_is_the_report_without_that_cell():
    # i-b, slot 1: DiskReadBytes 1e30. Counted, it would be the disk maximum and every other u_disk ~0.
    # Out of bounds it is missing; not held, i-b's slot 1 is modelled at u = 0.5. The measured maxima
    # are unchanged (i-b's network 5e6 is still in slot 0).
    result = run(with_cell("DiskReadBytes", 1, 1, 1e30))
    expected_wh = (2 * POWER_A + POWER_B + MODELLED_HALF) * 300 / 3600
    assert result.energy.energy_wh == pytest.approx(expected_wh, rel=1e-12)
    np.testing.assert_allclose(
        result.energy.slot_energy_wh, [(POWER_A + POWER_B) * 300 / 3600, (POWER_A + MODELLED_HALF) * 300 / 3600], rtol=1e-12
    )
    assert (result.counted_count, result.modelled_count) == (3, 1)
    # The same report as if CloudWatch had sent nothing for that cell, held or not.
    for hold in (0, 1):
        bad, gap = run(with_cell("DiskReadBytes", 1, 1, 1e30), hold), run(with_cell("DiskReadBytes", 1, 1, NAN), hold)
        np.testing.assert_array_equal(bad.energy.slot_energy_wh, gap.energy.slot_energy_wh)
        assert bad.energy.metric_totals == gap.energy.metric_totals
    # Held (max_hold_slots 1): slot 1 of i-b reads slot 0's 1e9, so the run is the clean one.
    assert run(with_cell("DiskReadBytes", 1, 1, 1e30), 1).energy.energy_wh == pytest.approx(run(two_nodes()).energy.energy_wh)
    (record,) = result.out_of_bounds
    assert record.message.startswith("DiskReadBytes of i-b at 2023-11-14 22:20 UTC is 1e+30")


def test_an_absurd_cpu_and_a_negative_network_in_are_missing_and_named():
    raw = with_cell("CPUUtilization", 0, 0, 1e9)
    raw[1, 1, METRIC_NAMES.index("NetworkIn")] = -5e6
    result = run(raw)
    # i-a slot 0 and i-b slot 1 are modelled; measured: i-a slot 1, i-b slot 0 (maxima still 2e9, 5e6).
    assert result.energy.energy_wh == pytest.approx((POWER_A + POWER_B + 2 * MODELLED_HALF) * 300 / 3600, rel=1e-12)
    assert [r.message.split(", expected")[0] for r in result.out_of_bounds] == [
        "CPUUtilization of i-a at 2023-11-14 22:15 UTC is 1e+09",
        "NetworkIn of i-b at 2023-11-14 22:20 UTC is -5e+06",
    ]


def test_a_cpu_of_100_4_is_read_as_100_not_dropped():
    result = run(with_cell("CPUUtilization", 0, 1, 100.4))
    assert result.energy.energy_wh == pytest.approx(2 * (POWER_A + POWER_B) * 300 / 3600, rel=1e-12)
    assert (result.counted_count, result.clipped_count, result.out_of_bounds) == (4, 1, ())
    assert result.energy.metric_totals["CPUUtilization"] == pytest.approx(2 * 50 + 2 * 100)


def test_nothing_left_to_measure_is_refused_naming_the_window():
    raw = two_nodes()
    raw[:, :, METRIC_NAMES.index("CPUUtilization")] = [[1e9, NAN], [NAN, 250.0]]
    with pytest.raises(MetricsError) as caught:
        run(raw, max_hold_slots=1)
    message = str(caught.value)
    assert message.startswith(
        "nothing to measure from 2023-11-14 22:15 UTC to 2023-11-14 22:25 UTC: in every node-slot of the 2 TASK "
        "instances up then, a datapoint was out of bounds or missing (CPUUtilization of i-a at 2023-11-14 22:15 UTC is 1e+09"
    )
    assert "CPUUtilization of i-b at 2023-11-14 22:20 UTC is 250" in message
    assert "slot 0" not in message and "instance 0" not in message


def test_no_data_at_all_is_not_refused_but_modelled():
    # Nothing was out of bounds: CloudWatch simply has nothing yet, and the run is the model's.
    result = run(np.full((2, 2, len(METRIC_NAMES)), NAN))
    assert (result.counted_count, result.modelled_count) == (0, 4)
    assert result.energy.energy_wh == pytest.approx(4 * MODELLED_HALF * 300 / 3600)


def test_a_node_slot_that_was_down_is_neither_measured_nor_modelled():
    metrics = instance_metrics(with_cell("CPUUtilization", 1, 1, 1e9), IDS, START_S, 300, max_hold_slots=0)
    up = np.array([[True, True], [True, False]])  # i-b ended after slot 0
    result = measured_schedule("p (run)", metrics, up, np.full(2, 0.5), TABLE_III)
    assert result.energy.energy_wh == pytest.approx((2 * POWER_A + POWER_B) * 300 / 3600, rel=1e-12)
    np.testing.assert_array_equal(result.energy.nodes, [2, 1])
    with pytest.raises(ConfigError, match="up must be a bool array of shape"):
        measured_schedule("p", metrics, np.ones((2, 3), dtype=bool), np.zeros(2), TABLE_III)
