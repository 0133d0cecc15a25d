"""The energy report's "% reduction": against follow, named in the heading, and only where follow's
figure is a base a percentage can be taken of; no provisioning is what the schedules are measured
against, not a schedule with a reduction of its own; counts are written "1 slot", "2 slots".

Every figure is worked by hand from Table III (idle 60.30 W, busy 93.87 W) on one-hour slots, start-up
energy 0, so a slot's Wh is its nodes' watts."""

from __future__ import annotations

import numpy as np

from autoscaler.app.energy_report import markdown, table_rows
from autoscaler.core.energy.accounting import EnergyReport, modelled_schedule, schedules_report
from autoscaler.core.energy.power import TABLE_III

HOUR_S = 3600.0
START_S = 1_590_969_600.0  # 2020-06-01T00:00:00Z


def quiet_day() -> EnergyReport:
    """Two slots with one job-hour of work, as on a quiet day. follow: 1 busy node in slot 0 (93.87 Wh).
    No provisioning: 4 nodes on in both slots, 1 busy in slot 0 (93.87 + 3 x 60.30 + 4 x 60.30 =
    515.97 Wh). The run: 2 nodes on in both slots, 1 busy in slot 0 (93.87 + 60.30 + 2 x 60.30 = 274.77 Wh)."""
    work = np.array([1.0, 0.0])

    def schedule(name: str, nodes: list[float]):
        return modelled_schedule(name, np.array(nodes), work, HOUR_S, TABLE_III, boot_s=0.0)

    return EnergyReport(
        "EMR cluster j-TEST",
        START_S,
        HOUR_S,
        (schedule("no provisioning", [4.0, 4.0]), schedule("follow", [1.0, 0.0]), schedule("run", [2.0, 2.0])),
        TABLE_III,
        0.0,
    )


def test_report_names_its_baseline_and_gives_no_provisioning_no_reduction_of_its_own():
    header, rows = table_rows(quiet_day())
    assert header == ["metric", "no provisioning (modelled)", "follow (modelled)", "run (modelled)", "% reduction vs follow"]
    table = {row[0]: row[1:] for row in rows}
    # The run used 274.77 Wh, 2.93 times follow's 93.87: -192.71 % says more about follow's small day than the run.
    assert table["Energy (kWh)"] == ["0.52", "0.09", "0.27", "n/a"]
    # 8, 1 and 4 node-slots: 4 is more than twice 1.
    assert table["Node-slots"] == ["8", "1", "4", "n/a"]
    # 4, 1 and 2 nodes started: 2 is twice 1, -100 %, the last a percentage is shown for.
    assert table["Nodes started"] == ["4", "1", "2", "-100.00"]
    # No node started in any schedule drew start-up energy (boot_s = 0): no base at all.
    assert table["of which starting nodes (kWh)"] == ["0", "0", "0", "n/a"]


def test_report_says_how_far_apart_schedules_are_where_a_percentage_would_mislead():
    text = markdown(quiet_day())
    # follow against no provisioning: 515.97 - 93.87 = 422.10 Wh saved, 81.81 % of 515.97.
    assert "- follow: 0.42 kWh saved against no provisioning (81.81 % less)." in text
    # The run against follow: 93.87 - 274.77 = -180.90 Wh, 2.93 times; against no provisioning 241.20 Wh, 46.75 %.
    assert "- run: -0.18 kWh saved against follow (2.93 times follow's 0.09 kWh; 46.75 % less than no provisioning)." in text
    assert (
        "Note: % reduction vs follow is n/a where follow's figure is 0 or less than 1/2 of the schedule's: a "
        "percentage of so small a base says little; the figures beside it say how far apart they are."
    ) in text
    assert "-192.71" not in text and "-449.67" not in text


def test_report_without_follows_energy_says_so():
    work = np.zeros(2)
    follow = modelled_schedule("follow", np.zeros(2), work, HOUR_S, TABLE_III, boot_s=0.0)
    run = modelled_schedule("run", np.ones(2), work, HOUR_S, TABLE_III, boot_s=0.0)
    text = markdown(EnergyReport("idle", START_S, HOUR_S, (follow, run), TABLE_III, 0.0))
    # The run kept one idle node on for two hours: 120.60 Wh, where follow used none.
    assert "- run: -0.12 kWh saved against follow (follow used none)." in text


def test_report_counts_one_slot_and_one_node_in_the_singular():
    report = schedules_report("t", np.array([1.0]), {"p": (np.array([1.0]), np.array([1.0]))}, HOUR_S, boot_s=0.0)
    text = " ".join(markdown(report).split())
    assert "1 slot of 1 h, 0 h to 1 h;" in text
    assert "no provisioning keeps 1 node on in 1 slot." in text
    report = schedules_report("t", np.array([2.0, 1.0]), {"p": (np.array([2.0, 1.0]), np.array([2.0, 1.0]))}, HOUR_S, boot_s=0.0)
    text = " ".join(markdown(report).split())
    assert "2 slots of 1 h, 0 h to 2 h;" in text and "no provisioning keeps 2 nodes on in all 2 slots." in text

