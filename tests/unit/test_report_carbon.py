"""The energy report in gCO2eq and $: a signal file resampled onto the report's slots, each schedule's
cost per slot and in total, slots the signal does not cover left out, and the run split by tenant.

Every figure is worked by hand from Table III (idle 60.30 W, busy 60.30 + 25.70 + 7.21 + 0.66 = 93.87 W)
on one-hour slots, so a slot's Wh is the node's watts."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

from autoscaler.adapters.cloudwatch_publish import energy_metric_data
from autoscaler.adapters.signal_source import load_signal
from autoscaler.app.energy_report import markdown, slots_csv, table_rows
from autoscaler.core.energy.accounting import EnergyReport, modelled_schedule, with_signal
from autoscaler.core.energy.power import TABLE_III
from autoscaler.core.errors import TraceError

HOUR_S = 3600.0
START_S = 1_590_969_600.0  # 2020-06-01T00:00:00Z
IDLE_W, BUSY_W = 60.30, 93.87


def write_signal(tmp_path, rows: list[tuple[str, float]], name: str = "signal.csv") -> str:
    path = tmp_path / name
    path.write_text("time,value\n" + "".join(f"{time},{value}\n" for time, value in rows))
    return str(path)


def hourly(values: list[float], first_hour: int = 0) -> list[tuple[str, float]]:
    return [(f"2020-06-01T{first_hour + h:02d}:00:00Z", v) for h, v in enumerate(values)]


def three_slot_report(nodes_by_tenant=None) -> EnergyReport:
    """Three one-hour slots. follow: 1, 2, 1 busy nodes. run: 2 nodes in each slot, busy 1, 2, 1
    (so 1 idle node in slots 0 and 2). Start-up energy 0, so each slot's Wh is its nodes' watts."""
    follow = modelled_schedule("follow", np.array([1.0, 2.0, 1.0]), np.array([1.0, 2.0, 1.0]), HOUR_S, TABLE_III, boot_s=0.0)
    run = modelled_schedule("run", np.full(3, 2.0), np.array([1.0, 2.0, 1.0]), HOUR_S, TABLE_III, boot_s=0.0)
    return EnergyReport("test", START_S, HOUR_S, (follow, run), TABLE_III, 0.0, nodes_by_tenant=nodes_by_tenant)


def test_co2_per_slot_and_totals_are_wh_times_grams_per_kwh(tmp_path):
    source = write_signal(tmp_path, hourly([100.0, 400.0, 200.0]))
    report = with_signal(three_slot_report(), load_signal(source, "gCO2eq/kWh"))

    follow_wh = [BUSY_W, 2 * BUSY_W, BUSY_W]
    grams = [100.0, 400.0, 200.0]
    assert report.get("follow").slot_energy_wh == pytest.approx(follow_wh)
    assert report.slot_cost("follow") == pytest.approx([w * g / 1000 for w, g in zip(follow_wh, grams)])
    # run: 154.17 Wh * 100 + 187.74 * 400 + 153.87 * 200, over 1000: 15.417 + 75.096 + 30.834 g.
    assert report.cost("run") == pytest.approx(15.417 + 75.096 + 30.834)
    assert report.cost("follow") == pytest.approx(9.387 + 75.096 + 18.774)
    # The run kept an idle node on in slots 0 and 2: 60.30 Wh at 100 and at 200 g/kWh.
    assert report.cost_saved("run") == pytest.approx(-(6.03 + 12.06))
    assert report.cost_reduction_percent("run") == pytest.approx(-100 * 18.09 / 103.257)

    header, rows = table_rows(report)
    co2 = next(r for r in rows if r[0] == "CO2 (kgCO2eq)")
    assert co2[1:] == ["0.10", "0.12", "-17.52"]  # follow, run, % reduction
    text = markdown(report)
    assert "- run: -0.12 kWh saved against follow" in text and "-0.018 kgCO2eq saved (17.52 % more)" in text
    assert "Note: Signal: " in text and "does not cover" not in text

    table = list(csv.DictReader(io.StringIO(slots_csv(report))))
    assert [float(r["signal gCO2eq/kWh"]) for r in table] == grams
    assert [float(r["run co2_g"]) for r in table] == pytest.approx([15.417, 75.096, 30.834])
    # The columns of a report without a signal come first, unchanged.
    assert list(table[0])[:6] == ["slot", "start", "follow energy_wh", "follow nodes", "run energy_wh", "run nodes"]


def test_a_signal_resampled_from_15_minute_points_is_their_mean(tmp_path):
    # The first hour has four quarters 100, 200, 300, 400: its mean is 250 g/kWh.
    quarters = [(f"2020-06-01T00:{m:02d}:00Z", v) for m, v in zip((0, 15, 30, 45), (100.0, 200.0, 300.0, 400.0))]
    quarters += [(f"2020-06-01T{h:02d}:{m:02d}:00Z", 100.0) for h in (1, 2) for m in (0, 15, 30, 45)]
    report = with_signal(three_slot_report(), load_signal(write_signal(tmp_path, quarters), "gCO2eq/kWh"))
    assert report.signal.values == pytest.approx([250.0, 100.0, 100.0])
    assert report.slot_cost("follow")[0] == pytest.approx(BUSY_W * 250 / 1000)


def test_lbs_per_mwh_is_converted_to_grams_per_kwh(tmp_path):
    # 1000 lbs/MWh = 453.59237 g per kWh: 1 lb = 453.59237 g, 1 MWh = 1000 kWh.
    source = write_signal(tmp_path, hourly([1000.0, 1000.0, 2000.0]))
    report = with_signal(three_slot_report(), load_signal(source, "lbs/MWh"))
    assert report.signal.unit == "gCO2eq/kWh" and report.signal.converted_from == "lbs/MWh"
    assert report.signal.values == pytest.approx([453.59237, 453.59237, 907.18474])
    assert report.cost("follow") == pytest.approx((BUSY_W + 2 * BUSY_W) * 0.45359237 + BUSY_W * 0.90718474)
    assert "converted from lbs/MWh at 453.59237 g/lb" in markdown(report)


def test_a_price_per_node_hour_costs_nodes_times_hours(tmp_path):
    # 0.5 $/node-hour, then 1 and 2: the run's 2 nodes cost 1 + 2 + 4 = 7 $, follow's 1, 2, 1 nodes 0.5 + 2 + 2 = 4.5 $.
    source = write_signal(tmp_path, hourly([0.5, 1.0, 2.0]))
    report = with_signal(three_slot_report(), load_signal(source, "$/node-hour"))
    assert report.slot_cost("run") == pytest.approx([1.0, 2.0, 4.0])
    assert report.cost("follow") == pytest.approx(4.5)
    assert report.cost_saved("run") == pytest.approx(-2.5)
    header, rows = table_rows(report)
    assert next(r for r in rows if r[0] == "Cost ($)")[1:] == ["4.50", "7", "-55.56"]
    assert "run cost_usd" in slots_csv(report) and "co2_g" not in slots_csv(report)


def test_a_price_per_kwh_costs_kwh_times_price(tmp_path):
    source = write_signal(tmp_path, hourly([0.10, 0.20, 0.10]))
    report = with_signal(three_slot_report(), load_signal(source, "$/kWh"))
    # follow: 0.09387 kWh * 0.10 + 0.18774 * 0.20 + 0.09387 * 0.10 $.
    assert report.cost("follow") == pytest.approx(0.009387 + 0.037548 + 0.009387)
    assert report.signal.cost_unit == "$"


def test_slots_past_the_signal_are_left_out_of_every_total_and_named(tmp_path):
    # Two hourly points cover 00:00 to 02:00; slot 2 (02:00 to 03:00) has no signal.
    source = write_signal(tmp_path, hourly([100.0, 400.0]))
    report = with_signal(three_slot_report(), load_signal(source, "gCO2eq/kWh"))
    assert report.signal.covered.tolist() == [True, True, False]
    assert math.isnan(report.slot_cost("run")[2])
    assert report.cost("run") == pytest.approx(15.417 + 75.096)
    assert report.cost_saved("run") == pytest.approx(-6.03)
    notes = " ".join(report.notes)
    assert "does not cover 1 of the 3 slots (the first at 2020-06-01 02:00 UTC)" in notes
    assert "covers the other 2 slots only" in notes
    rows = list(csv.DictReader(io.StringIO(slots_csv(report))))
    assert rows[2]["run co2_g"] == "" and rows[2]["signal gCO2eq/kWh"] == ""


def test_a_gap_inside_the_signal_leaves_out_the_slots_it_spans(tmp_path):
    # Points every hour from 00:00 to 05:00 except 02:00 and 03:00: the 01:00 value would hold for three
    # hours, three times the median step, so slots 1 to 3 are a gap; slots 0, 4 and 5 are covered.
    points = hourly([100.0, 200.0]) + hourly([300.0, 300.0], first_hour=4)
    six = EnergyReport(
        "six",
        START_S,
        HOUR_S,
        (modelled_schedule("follow", np.ones(6), np.ones(6), HOUR_S, TABLE_III, boot_s=0.0),),
        TABLE_III,
        0.0,
    )
    report = with_signal(six, load_signal(write_signal(tmp_path, points), "gCO2eq/kWh"))
    assert report.signal.covered.tolist() == [True, False, False, False, True, True]
    assert report.cost("follow") == pytest.approx(BUSY_W * (100 + 300 + 300) / 1000)
    assert "does not cover 3 of the 6 slots (the first at 2020-06-01 01:00 UTC)" in " ".join(report.notes)


def test_a_signal_covering_no_slot_is_refused_naming_the_source_and_the_first_slot(tmp_path):
    source = write_signal(tmp_path, [("2020-05-01T00:00:00Z", 100.0), ("2020-05-01T01:00:00Z", 100.0)])
    with pytest.raises(TraceError) as raised:
        with_signal(three_slot_report(), load_signal(source, "gCO2eq/kWh"))
    message = str(raised.value)
    assert message.startswith(f"{source}: covers none of the report's 3 slots")
    assert "first uncovered slot at 2020-06-01 00:00 UTC" in message


def test_a_tenant_gets_its_share_of_each_slot_by_node_slots_held(tmp_path):
    # Slot 0: tenant a holds 3 node-slots, b 1: 75 % and 25 % of the run's 15.417 g. Slot 1: a alone.
    # Slot 2: no breakdown: the whole 30.834 g is unattributed.
    source = write_signal(tmp_path, hourly([100.0, 400.0, 200.0]))
    report = with_signal(three_slot_report(({"a": 3, "b": 1}, {"a": 2}, {})), load_signal(source, "gCO2eq/kWh"))
    costs = report.tenant_costs()
    assert costs["a"] == pytest.approx((5.0, 0.75 * 15.417 + 75.096))
    assert costs["b"] == pytest.approx((1.0, 0.25 * 15.417))
    assert costs["unattributed"] == pytest.approx((2.0, 30.834))
    assert list(costs) == ["a", "unattributed", "b"]  # largest first
    assert sum(c for _, c in costs.values()) == pytest.approx(report.cost("run"))
    text = markdown(report)
    assert "| a | 5 | 0.087 | 71.41 % |" in text and "| b | 1 | 0.004 | 3.18 % |" in text
    rows = list(csv.DictReader(io.StringIO(slots_csv(report))))
    assert float(rows[0]["tenant b co2_g"]) == pytest.approx(0.25 * 15.417, rel=1e-5)
    assert float(rows[1]["tenant b co2_g"]) == 0.0


def test_a_report_without_a_signal_has_no_co2(tmp_path):
    report = three_slot_report(({"a": 1}, {}, {}))
    assert "CO2" not in markdown(report) and "tenant" not in markdown(report)
    assert slots_csv(report).splitlines()[0] == "slot,start,follow energy_wh,follow nodes,run energy_wh,run nodes"
    assert [r[0] for r in table_rows(report)[1]] == ["Energy (kWh)", "of which starting nodes (kWh)", "Node-slots", "Nodes started"]


def test_the_co2_metrics_are_published_only_with_a_cost():
    plain = energy_metric_data(10.0, 1.0, START_S, cluster_id="j-X")
    assert [d["MetricName"] for d in plain] == ["EnergyWh", "SavedWh"]
    co2 = energy_metric_data(10.0, 1.0, START_S, cluster_id="j-X", cost=("co2", 4.0, -0.5))
    assert [(d["MetricName"], d["Value"]) for d in co2[2:]] == [("Co2Grams", 4.0), ("Co2SavedGrams", -0.5)]
    price = energy_metric_data(10.0, 1.0, START_S, cost=("price", 0.2, 0.1))
    assert [d["MetricName"] for d in price[2:]] == ["CostDollars", "CostSavedDollars"]
