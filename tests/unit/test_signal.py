"""Cost-signal readers and slot resampling, on small series whose means are worked out by hand."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from autoscaler.core.energy.signal import (
    Signal,
    plausibility_notes,
    read_csv,
    read_electricity_maps,
    read_signal,
    read_uk_carbon,
    read_watttime,
    resample,
    to_grams_per_kwh,
)
from autoscaler.core.errors import ConfigError, TraceError


def unix(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


MIDNIGHT = unix("2026-01-01T00:00:00")

QUARTER_HOURLY = """time,value
2026-01-01T00:00:00Z,100
2026-01-01T00:15:00Z,200
2026-01-01T00:30:00Z,300
2026-01-01T00:45:00Z,400
"""

HOURLY = """Time,Value
2026-01-01T00:00:00+00:00,100
2026-01-01T01:00:00+00:00,300
2026-01-01T02:00:00+00:00,500
"""


# --- CSV ---------------------------------------------------------------------------------------


def test_csv_reads_utc_seconds_and_values():
    signal = read_csv(QUARTER_HOURLY, "q.csv", "gCO2eq/kWh")
    assert signal.times_s.tolist() == [MIDNIGHT, MIDNIGHT + 900, MIDNIGHT + 1800, MIDNIGHT + 2700]
    assert signal.values.tolist() == [100, 200, 300, 400]
    assert (signal.unit, signal.source) == ("gCO2eq/kWh", "q.csv")


def test_csv_offsets_are_converted_to_utc():
    signal = read_csv("time,value\n2026-01-01T01:00:00+01:00,5\n2026-01-01T00:30:00-00:30,6\n", "o.csv", "$/kWh")
    assert signal.times_s.tolist() == [MIDNIGHT, MIDNIGHT + 3600]


def test_csv_a_naive_time_after_a_zoned_one_is_refused_naming_the_line():
    text = "time,value\n2026-01-01T00:00:00Z,1\n2026-01-01T00:30:00,2\n"
    with pytest.raises(TraceError, match=r"^n\.csv:3: .*has no zone but line 2's time has one") as info:
        read_csv(text, "n.csv", "gCO2eq/kWh")
    assert info.value.line == 3


def test_csv_a_zoned_time_after_naive_ones_is_refused_naming_the_line():
    text = "Time,Carbon Intensity\n2019-12-20 00:00:00,42\n2019-12-20 00:30:00,43\n2019-12-20T01:00:00+01:00,44\n"
    with pytest.raises(TraceError, match=r"^m\.csv:4: .*has a zone but line 2's time has none") as info:
        read_csv(text, "m.csv", "gCO2eq/kWh")
    assert info.value.line == 4


def test_csv_every_time_naive_is_read_as_utc_with_a_note():
    # France's 2020 series' shape: header Time,Carbon Intensity, times with no zone.
    text = "Time,Carbon Intensity\n2026-01-01 00:00:00,42.5\n2026-01-01 00:30:00,40\n2026-01-01 01:00:00,41\n"
    signal = read_csv(text, "fr.csv", "gCO2eq/kWh")
    assert signal.times_s.tolist() == [MIDNIGHT, MIDNIGHT + 1800, MIDNIGHT + 3600]
    assert signal.values.tolist() == [42.5, 40.0, 41.0]
    assert signal.notes == ("fr.csv: times carry no zone: read as UTC",)
    assert plausibility_notes(signal) == signal.notes  # shown where the value warnings are
    # The same file with zones has no note.
    assert read_csv(text.replace(":00,", ":00Z,"), "z.csv", "gCO2eq/kWh").notes == ()


@pytest.mark.skipif(not Path("/work/shared/grid/fr_ci_2020.csv").is_file(), reason="the French 2020 series is not on this machine")
def test_the_french_2020_series_reads_as_utc():
    path = Path("/work/shared/grid/fr_ci_2020.csv")
    text = path.read_text()
    signal = read_signal(text, str(path), "gCO2eq/kWh")
    lines = text.splitlines()
    # Its first and last points as written, read by hand: 2019-12-20 00:00 UTC is 1,576,800,000 s.
    first_time, first_value = lines[1].split(",")
    assert first_time == "2019-12-20 00:00:00" and signal.times_s[0] == 1_576_800_000.0
    assert signal.values[0] == float(first_value) and signal.values[-1] == float(lines[-1].split(",")[1])
    assert signal.times_s.size == len([line for line in lines[1:] if line.strip()])
    assert signal.median_interval_s == 1800.0
    assert signal.notes == (f"{path}: times carry no zone: read as UTC",)


@pytest.mark.parametrize(
    "header",
    ["timestamp,value", "time,value,extra", "value,time", "2026-01-01T00:00:00Z,1"],
)
def test_csv_wrong_header_is_refused(header):
    with pytest.raises(TraceError, match=r"^h\.csv:1: expected the header 'time,value'"):
        read_csv(header + "\n2026-01-01T00:00:00Z,1\n", "h.csv", "gCO2eq/kWh")


def test_csv_third_column_is_refused():
    with pytest.raises(TraceError, match=r"^c\.csv:2: expected 2 columns"):
        read_csv("time,value\n2026-01-01T00:00:00Z,1,2\n", "c.csv", "gCO2eq/kWh")


def test_csv_blank_lines_are_skipped_and_lines_still_counted():
    text = "time,value\n\n2026-01-01T00:00:00Z,1\n\n2026-01-01T00:00:00Z,2\n"
    with pytest.raises(TraceError, match=r"^b\.csv:5: .*duplicate time.*line 3") as info:
        read_csv(text, "b.csv", "gCO2eq/kWh")
    assert info.value.line == 5


def test_csv_decreasing_time_names_both_times():
    text = "time,value\n2026-01-01T01:00:00Z,1\n2026-01-01T00:00:00Z,2\n"
    with pytest.raises(TraceError, match=r"d\.csv:3: .*decreasing time: 2026-01-01T00:00:00Z is not after 2026-01-01T01:00:00Z"):
        read_csv(text, "d.csv", "gCO2eq/kWh")


@pytest.mark.parametrize(
    "unit, value, fragment",
    [
        ("gCO2eq/kWh", "-1", "expected a value >= 0"),
        ("gCO2eq/kWh", "nan", "expected a finite value"),
        ("gCO2eq/kWh", "inf", "expected a finite value"),
        ("gCO2eq/kWh", "5000.1", "above 5000 gCO2eq/kWh"),
        # 5,000 g/kWh = 5,000,000 g/MWh / 453.59237 g/lb = 11,023.1 lbs/MWh.
        ("lbs/MWh", "11024", "above 11023.1 lbs/MWh"),
        ("$/kWh", "100.5", "above 100 \\$/kWh"),
        ("$/node-hour", "1000.5", "above 1000 \\$/node-hour"),
        ("gCO2eq/kWh", "abc", "expected a number"),
    ],
)
def test_csv_bad_values_are_refused_with_line_and_time(unit, value, fragment):
    text = f"time,value\n2026-01-01T00:00:00Z,1\n2026-01-01T00:30:00Z,{value}\n"
    with pytest.raises(TraceError, match=rf"^v\.csv:3: 2026-01-01T00:30:00Z: .*{fragment}"):
        read_csv(text, "v.csv", unit)


def test_values_at_the_ceilings_are_accepted():
    text = "time,value\n2026-01-01T00:00:00Z,5000\n2026-01-01T00:30:00Z,0\n"
    assert read_csv(text, "ok.csv", "gCO2eq/kWh").values.tolist() == [5000, 0]
    assert read_csv(text.replace("5000", "11023"), "ok.csv", "lbs/MWh").values[0] == 11023


def test_csv_empty_series_is_refused():
    with pytest.raises(TraceError, match=r"^e\.csv: empty series"):
        read_csv("time,value\n", "e.csv", "gCO2eq/kWh")
    with pytest.raises(TraceError, match=r"^e\.csv: empty file"):
        read_csv("\n\n", "e.csv", "gCO2eq/kWh")


def test_unknown_unit_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown signal unit 'kg/kWh'"):
        read_csv(QUARTER_HOURLY, "q.csv", "kg/kWh")


# --- DST -----------------------------------------------------------------------------------------


def test_berlin_spring_forward_sorts_as_utc():
    # 29 March 2026, last Sunday of March: 02:00 CET becomes 03:00 CEST.
    text = "time,value\n2026-03-29T01:00:00+01:00,10\n2026-03-29T01:30:00+01:00,20\n2026-03-29T03:00:00+02:00,30\n2026-03-29T03:30:00+02:00,40\n"
    signal = read_csv(text, "berlin.csv", "gCO2eq/kWh")
    start = unix("2026-03-29T00:00:00")
    assert signal.times_s.tolist() == [start, start + 1800, start + 3600, start + 5400]
    assert resample(signal, start, 7200, 1).tolist() == [25.0]


def test_berlin_fall_back_repeated_local_hour_sorts_as_utc():
    # 25 October 2026: 03:00 CEST becomes 02:00 CET, so the local clock shows 02:00 and 02:30 twice.
    text = "time,value\n2026-10-25T02:00:00+02:00,10\n2026-10-25T02:30:00+02:00,20\n2026-10-25T02:00:00+01:00,30\n2026-10-25T02:30:00+01:00,40\n"
    signal = read_csv(text, "berlin.csv", "gCO2eq/kWh")
    start = unix("2026-10-25T00:00:00")
    assert np.diff(signal.times_s).tolist() == [1800, 1800, 1800]
    assert signal.times_s[0] == start
    # Slot 01:00-02:00 UTC holds the second 02:00 and 02:30 (CET): (30 + 40) / 2.
    assert resample(signal, start + 3600, 3600, 1).tolist() == [35.0]


def test_berlin_fall_back_written_in_local_clock_order_is_refused():
    # Sorted by the local clock the CET 02:00 would come before the CEST 02:30: 01:00Z after 00:30Z is fine,
    # but CEST 02:30 (00:30Z) after CET 02:00 (01:00Z) goes back in time.
    text = "time,value\n2026-10-25T02:00:00+02:00,10\n2026-10-25T02:00:00+01:00,30\n2026-10-25T02:30:00+02:00,20\n"
    with pytest.raises(TraceError, match=r"berlin\.csv:4: .*decreasing time: 2026-10-25T00:30:00Z is not after 2026-10-25T01:00:00Z"):
        read_csv(text, "berlin.csv", "gCO2eq/kWh")


def test_uk_series_across_the_october_change():
    # 25 October 2026 in the UK: 02:00 BST becomes 01:00 GMT; the 01:30 local clock shows twice.
    document = {
        "data": [
            {"from": "2026-10-25T01:00+01:00", "to": "2026-10-25T01:30+01:00", "intensity": {"forecast": 100, "actual": 110}},
            {"from": "2026-10-25T01:30+01:00", "to": "2026-10-25T01:00Z", "intensity": {"forecast": 120, "actual": 130}},
            {"from": "2026-10-25T01:00Z", "to": "2026-10-25T01:30Z", "intensity": {"forecast": 140, "actual": None}},
            {"from": "2026-10-25T01:30Z", "to": "2026-10-25T02:00Z", "intensity": {"forecast": 160, "actual": None}},
        ]
    }
    signal = read_uk_carbon(json.dumps(document), "uk.json")
    start = unix("2026-10-25T00:00:00")
    assert signal.times_s.tolist() == [start, start + 1800, start + 3600, start + 5400]
    assert signal.values.tolist() == [110, 130, 140, 160]


# --- JSON formats --------------------------------------------------------------------------------

WATTTIME = {
    "data": [
        {"point_time": "2026-01-01T00:00:00+00:00", "value": 1000},
        {"point_time": "2026-01-01T00:05:00+00:00", "value": 500.0},
    ],
    "meta": {"region": "CAISO_NORTH", "signal_type": "co2_moer", "units": "lbs_co2_per_mwh"},
}


def test_watttime_reads_lbs_per_mwh():
    signal = read_watttime(json.dumps(WATTTIME), "wt.json")
    assert signal.unit == "lbs/MWh"
    assert signal.times_s.tolist() == [MIDNIGHT, MIDNIGHT + 300]
    assert signal.values.tolist() == [1000, 500]


def test_watttime_other_units_are_refused_by_name():
    document = {**WATTTIME, "meta": {"units": "kg_co2_per_mwh"}}
    with pytest.raises(TraceError, match=r"^wt\.json: meta.units is 'kg_co2_per_mwh'"):
        read_watttime(json.dumps(document), "wt.json")


def test_watttime_naive_and_bad_items_name_the_item():
    document = {"data": [{"point_time": "2026-01-01T00:00:00", "value": 1}]}
    with pytest.raises(TraceError, match=r"data\[0\]: point_time: .*no zone"):
        read_watttime(json.dumps(document), "wt.json")
    document = {"data": [{"point_time": "2026-01-01T00:00:00Z", "value": "1"}]}
    with pytest.raises(TraceError, match=r"data\[0\]: value: expected a number, got '1'"):
        read_watttime(json.dumps(document), "wt.json")
    document = {"data": [{"point_time": "2026-01-01T00:00:00Z", "value": True}]}
    with pytest.raises(TraceError, match="expected a number, got True"):
        read_watttime(json.dumps(document), "wt.json")
    document = {"data": [{"point_time": "2026-01-01T00:00:00Z"}]}
    with pytest.raises(TraceError, match=r"data\[0\]: expected an object with 'point_time', 'value'"):
        read_watttime(json.dumps(document), "wt.json")


def test_lbs_per_mwh_to_grams_per_kwh_by_hand():
    # 1000 lbs/MWh * 453.59237 g/lb / 1000 kWh/MWh = 453.59237 g/kWh; 500 lbs/MWh -> 226.796185.
    grams = to_grams_per_kwh(read_watttime(json.dumps(WATTTIME), "wt.json"))
    assert grams.unit == "gCO2eq/kWh"
    assert grams.values == pytest.approx([453.59237, 226.796185], rel=1e-12)
    assert grams.times_s.tolist() == [MIDNIGHT, MIDNIGHT + 300]


def test_to_grams_per_kwh_keeps_grams_and_refuses_prices():
    signal = read_csv(QUARTER_HOURLY, "q.csv", "gCO2eq/kWh")
    assert to_grams_per_kwh(signal) is signal
    with pytest.raises(ConfigError, match=r"q\.csv: \$/node-hour is a price"):
        to_grams_per_kwh(read_csv(QUARTER_HOURLY, "q.csv", "$/node-hour"))


@pytest.mark.parametrize("key", ["history", "forecast"])
def test_electricity_maps_history_and_forecast(key):
    document = {
        "zone": "DE",
        key: [
            {"zone": "DE", "carbonIntensity": 420, "datetime": "2026-01-01T00:00:00.000Z", "isEstimated": False},
            {"zone": "DE", "carbonIntensity": 380, "datetime": "2026-01-01T01:00:00.000Z", "isEstimated": True},
        ],
    }
    signal = read_electricity_maps(json.dumps(document), "em.json")
    assert (signal.unit, signal.times_s.tolist(), signal.values.tolist()) == ("gCO2eq/kWh", [MIDNIGHT, MIDNIGHT + 3600], [420, 380])


def test_electricity_maps_null_intensity_is_refused_not_filled():
    document = {"history": [{"datetime": "2026-01-01T00:00:00Z", "carbonIntensity": None}]}
    with pytest.raises(TraceError, match=r"history\[0\] \(2026-01-01T00:00:00Z\): carbonIntensity: expected a number, got None"):
        read_electricity_maps(json.dumps(document), "em.json")


def test_uk_takes_actual_else_forecast_and_refuses_neither():
    document = {
        "data": [
            {"from": "2026-01-01T00:00Z", "to": "2026-01-01T00:30Z", "intensity": {"forecast": 200, "actual": 210, "index": "moderate"}},
            {"from": "2026-01-01T00:30Z", "to": "2026-01-01T01:00Z", "intensity": {"forecast": 190, "actual": None, "index": "moderate"}},
        ]
    }
    assert read_uk_carbon(json.dumps(document), "uk.json").values.tolist() == [210, 190]
    document["data"][1]["intensity"]["forecast"] = None
    with pytest.raises(TraceError, match=r"data\[1\] \(2026-01-01T00:30:00Z\): neither intensity.actual nor intensity.forecast"):
        read_uk_carbon(json.dumps(document), "uk.json")


def test_json_negative_value_names_item_and_time():
    document = {"data": [{"point_time": "2026-01-01T00:00:00Z", "value": 1}, {"point_time": "2026-01-01T00:05:00Z", "value": -3}]}
    with pytest.raises(TraceError, match=r"^wt\.json: data\[1\] \(2026-01-01T00:05:00Z\): expected a value >= 0"):
        read_watttime(json.dumps(document), "wt.json")


def test_bad_json_names_the_line():
    with pytest.raises(TraceError, match=r"^x\.json:2: not JSON"):
        read_signal('{"data":\n ]', "x.json")


# --- detection -----------------------------------------------------------------------------------


def test_read_signal_detects_each_format():
    assert read_signal(json.dumps(WATTTIME), "a").unit == "lbs/MWh"
    assert read_signal(json.dumps({"forecast": [{"datetime": "2026-01-01T00:00Z", "carbonIntensity": 1}]}), "b").unit == "gCO2eq/kWh"
    uk = {"data": [{"from": "2026-01-01T00:00Z", "to": "2026-01-01T00:30Z", "intensity": {"forecast": 7, "actual": None}}]}
    assert read_signal(json.dumps(uk), "c").values.tolist() == [7]
    assert read_signal(QUARTER_HOURLY, "d", "$/node-hour").unit == "$/node-hour"


def test_read_signal_unit_rules():
    with pytest.raises(ConfigError, match="a CSV signal needs its unit"):
        read_signal(QUARTER_HOURLY, "q.csv")
    # Asked for in gCO2eq/kWh, WattTime's lbs/MWh is converted; any other mismatch is refused.
    pounds = read_signal(json.dumps(WATTTIME), "wt.json", "lbs/MWh")
    grams = read_signal(json.dumps(WATTTIME), "wt.json", "gCO2eq/kWh")
    assert pounds.unit == "lbs/MWh" and grams.unit == "gCO2eq/kWh"
    assert grams.values.tolist() == pytest.approx((pounds.values * 453.59237 / 1000).tolist())
    with pytest.raises(ConfigError, match=r"WattTime JSON is in lbs/MWh, not \$/kWh: leave the unit out"):
        read_signal(json.dumps(WATTTIME), "wt.json", "$/kWh")


def test_read_signal_unknown_json_and_empty_data():
    with pytest.raises(TraceError, match="JSON of no known shape"):
        read_signal('{"points": []}', "x.json")
    with pytest.raises(TraceError, match=r"^x\.json: empty series"):
        read_signal('{"data": []}', "x.json")


def test_signal_constructed_directly_is_checked():
    with pytest.raises(TraceError, match=r"point 1 \(1970-01-01T00:00:00Z\): duplicate time"):
        Signal(np.array([0.0, 0.0]), np.array([1.0, 2.0]), "gCO2eq/kWh", "direct")
    with pytest.raises(TraceError, match="empty series"):
        Signal(np.array([]), np.array([]), "gCO2eq/kWh", "direct")
    with pytest.raises(TraceError, match="one length"):
        Signal(np.array([0.0, 1.0]), np.array([1.0]), "gCO2eq/kWh", "direct")


# --- resample -----------------------------------------------------------------------------------


def test_quarter_hourly_to_five_minute_slots():
    signal = read_csv(QUARTER_HOURLY, "q.csv", "gCO2eq/kWh")
    assert resample(signal, MIDNIGHT, 300, 12).tolist() == [100] * 3 + [200] * 3 + [300] * 3 + [400] * 3


def test_quarter_hourly_to_one_hour_and_straddling_slots():
    signal = read_csv(QUARTER_HOURLY, "q.csv", "gCO2eq/kWh")
    assert resample(signal, MIDNIGHT, 3600, 1).tolist() == [250.0]  # (100 + 200 + 300 + 400) / 4
    # 00:10-00:20: 5 min at 100, 5 min at 200 -> 150; 00:20-00:30: 200.
    assert resample(signal, MIDNIGHT + 600, 600, 2).tolist() == pytest.approx([150.0, 200.0])
    # 00:05-00:50 as one slot: 10*100 + 15*200 + 15*300 + 5*400 = 10500 over 45 min.
    assert resample(signal, MIDNIGHT + 300, 2700, 1).tolist() == pytest.approx([10500 / 45])


def test_two_half_hours_make_a_mean_of_their_values():
    signal = read_csv("time,value\n2026-01-01T00:00:00Z,100\n2026-01-01T00:30:00Z,300\n", "h.csv", "gCO2eq/kWh")
    assert resample(signal, MIDNIGHT, 3600, 1).tolist() == [200.0]


def test_hourly_to_one_hour_and_five_minute_slots():
    signal = read_csv(HOURLY, "hourly.csv", "gCO2eq/kWh")
    assert resample(signal, MIDNIGHT, 3600, 3).tolist() == [100, 300, 500]
    assert resample(signal, MIDNIGHT + 1800, 3600, 2).tolist() == [200.0, 400.0]
    assert resample(signal, MIDNIGHT + 3300, 300, 3).tolist() == [100, 300, 300]


def test_last_value_holds_for_the_median_interval():
    signal = read_csv(HOURLY, "hourly.csv", "gCO2eq/kWh")
    assert resample(signal, MIDNIGHT + 7200, 3600, 1).tolist() == [500]
    with pytest.raises(
        TraceError,
        match=r"^hourly\.csv: does not cover the window .*missing from 2026-01-01T03:00:00Z to 2026-01-01T03:05:00Z \(after the last point",
    ):
        resample(signal, MIDNIGHT + 7200, 300, 13)


def test_window_before_the_first_point_is_named():
    signal = read_csv(HOURLY, "hourly.csv", "gCO2eq/kWh")
    with pytest.raises(TraceError, match=r"missing from 2025-12-31T23:55:00Z to 2026-01-01T00:00:00Z \(before the first point\)"):
        resample(signal, MIDNIGHT - 300, 300, 2)


def test_window_missing_on_both_sides_names_both():
    signal = read_csv(HOURLY, "hourly.csv", "gCO2eq/kWh")
    with pytest.raises(TraceError, match=r"before the first point\) and from 2026-01-01T03:00:00Z to 2026-01-01T04:00:00Z"):
        resample(signal, MIDNIGHT - 3600, 3600, 5)


GAPPY = """time,value
2026-01-01T00:00:00Z,10
2026-01-01T00:15:00Z,20
2026-01-01T00:30:00Z,30
2026-01-01T01:15:00Z,40
2026-01-01T01:30:00Z,50
2026-01-01T01:45:00Z,60
2026-01-01T02:00:00Z,70
"""


def test_gap_inside_the_window_is_refused_with_its_times():
    # Steps 15, 15, 45, 15, 15, 15 min: median 15, so the 45-minute step is more than 2 x 15.
    signal = read_csv(GAPPY, "gappy.csv", "gCO2eq/kWh")
    with pytest.raises(TraceError, match=r"^gappy\.csv: gap of 2700 s from 2026-01-01T00:30:00Z to 2026-01-01T01:15:00Z"):
        resample(signal, MIDNIGHT, 3600, 2)
    with pytest.raises(TraceError, match="gap of 2700 s"):
        resample(signal, MIDNIGHT + 3540, 60, 1)  # 00:59-01:00 lies wholly inside the gap


def test_gap_outside_the_window_does_not_matter():
    signal = read_csv(GAPPY, "gappy.csv", "gCO2eq/kWh")
    assert resample(signal, MIDNIGHT + 4500, 900, 4).tolist() == [40, 50, 60, 70]
    assert resample(signal, MIDNIGHT, 900, 2).tolist() == [10, 20]


def test_a_step_of_exactly_twice_the_median_is_not_a_gap():
    text = "time,value\n2026-01-01T00:00:00Z,10\n2026-01-01T00:15:00Z,20\n2026-01-01T00:45:00Z,30\n2026-01-01T01:00:00Z,40\n"
    signal = read_csv(text, "ok.csv", "gCO2eq/kWh")
    assert resample(signal, MIDNIGHT, 1800, 2).tolist() == [15.0, 25.0]


def test_single_point_cannot_be_resampled():
    signal = read_csv("time,value\n2026-01-01T00:00:00Z,10\n", "one.csv", "gCO2eq/kWh")
    with pytest.raises(TraceError, match=r"^one\.csv: one point only"):
        resample(signal, MIDNIGHT, 300, 1)


@pytest.mark.parametrize(
    "start_s, slot_s, n_slots, fragment",
    [(MIDNIGHT, 0, 1, "slot_s"), (MIDNIGHT, -300, 1, "slot_s"), (MIDNIGHT, 300, 0, "n_slots"), (MIDNIGHT, 300, 1.5, "n_slots"), (float("nan"), 300, 1, "start_s")],
)
def test_resample_bad_arguments(start_s, slot_s, n_slots, fragment):
    signal = read_csv(HOURLY, "hourly.csv", "gCO2eq/kWh")
    with pytest.raises(ConfigError, match=fragment):
        resample(signal, start_s, slot_s, n_slots)


def test_resample_matches_a_fine_grid_average():
    # An independent method: sample the step function every second and average per slot.
    rng = np.random.default_rng(7)
    times_s = MIDNIGHT + np.cumsum(rng.integers(600, 1200, size=40)).astype(float)
    values = rng.uniform(0, 800, size=40)
    signal = Signal(times_s, values, "gCO2eq/kWh", "random")
    start_s, slot_s, n_slots = times_s[0] + 137.0, 420.0, 60
    seconds = start_s + np.arange(slot_s * n_slots) + 0.5
    sampled = values[np.searchsorted(times_s, seconds, side="right") - 1]
    expected = sampled.reshape(n_slots, int(slot_s)).mean(axis=1)
    assert resample(signal, start_s, slot_s, n_slots) == pytest.approx(expected, rel=1e-9)


def test_resample_takes_numpy_scalars():
    signal = read_csv(HOURLY, "hourly.csv", "gCO2eq/kWh")
    assert resample(signal, np.int64(MIDNIGHT), np.float64(3600), np.int64(2)).tolist() == [100, 300]


# -- issue 20: a field over the csv module's limit, and times at the calendar's end -------------------


def test_a_csv_field_over_128_kib_is_a_trace_error_naming_the_line_of_the_stray_quote():
    # One stray quote on line 3 opens a field that swallows the rest of a year of half-hour points.
    rows = "".join(f"2026-01-{1 + i // 48 % 28:02d}T{i % 48 // 2:02d}:{30 * (i % 2):02d}:00Z,{i}\n" for i in range(3, 17_520))
    text = 'time,value\n2026-01-01T00:00:00Z,1\n2026-01-01T00:30:00Z,"2\n' + rows
    assert len(text) > 128 * 1024
    with pytest.raises(TraceError, match=r'^s\.csv:3: a field runs past 131,072 characters: an unclosed quote \(\"\) on this line\?'):
        read_csv(text, "s.csv", "gCO2eq/kWh")


def test_times_at_the_end_of_year_9999_read_and_a_window_past_them_is_refused_in_words():
    text = "time,value\n9999-12-31T23:00:00Z,100\n9999-12-31T23:30:00Z,200\n"
    signal = read_csv(text, "end.csv", "gCO2eq/kWh")
    last_s = unix("9999-12-31T23:00:00")
    assert resample(signal, last_s, 1800.0, 2).tolist() == [100.0, 200.0]
    with pytest.raises(TraceError, match=r"^end\.csv: does not cover the window 9999-12-31T23:00:00Z to .*past year 9999"):
        resample(signal, last_s, 1800.0, 3)


def test_a_time_past_year_9999_in_utc_is_refused_in_words():
    # 23:30 at -01:00 is 00:30 on 10000-01-01 in UTC.
    with pytest.raises(TraceError, match=r"^late\.csv:3: .*9999-12-31T23:30:00-01:00.*after 9999-12-31T23:59:59Z"):
        read_csv("time,value\n9999-12-31T22:00:00Z,1\n9999-12-31T23:30:00-01:00,2\n", "late.csv", "gCO2eq/kWh")


# -- a stray quote that swallows less than the csv module's limit ----------------------------------


def test_a_stray_quote_in_the_deploy_carbon_csv_is_a_short_error_naming_its_line_and_the_quote():
    from pathlib import Path

    lines = (Path(__file__).parents[2] / "deploy" / "carbon-daily.csv").read_text().splitlines(keepends=True)
    assert lines[51].startswith("2026-06-01T01:00:00Z,")
    lines[51] = '2026-06-01T01:00:00Z,"275.2\n'
    text = "".join(lines)
    with pytest.raises(TraceError) as error:
        read_csv(text, "quote2.csv", "gCO2eq/kWh")
    message = str(error.value)
    assert message.startswith("quote2.csv:52: ") and 'unclosed quote (")' in message
    # The field runs to the end of the file (193 lines): the message echoes its first line and counts the rest.
    assert len(lines) == 193 and message.endswith("got '275.2' and 141 lines after it")
    assert len(message) < 300


def test_echo_text_cuts_a_long_value_to_its_start_and_length():
    from autoscaler.core.readable import ECHO_MAX_CHARS, echo_text

    assert echo_text("abc") == "'abc'"
    assert echo_text("x" * 1000) == repr("x" * ECHO_MAX_CHARS) + "... (1,000 characters)"
