"""Forecast archives: each reader on a small document worked by hand, and bad input named."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from autoscaler.core.energy.forecast_archive import (
    ForecastArchive,
    IssuedForecast,
    archive_in_grams,
    read_forecast,
    read_forecast_csv,
    read_forecast_documents,
    read_forecast_lines,
    read_issued_document,
)
from autoscaler.core.energy.signal import GRAMS_PER_POUND, Signal
from autoscaler.core.errors import ConfigError, TraceError


def unix(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


NOON = unix("2026-06-01T12:00:00")


def watttime(generated_at: str | None, values=(800.0, 820.0, 840.0), first: str = "2026-06-01T12:00:00+00:00") -> str:
    meta = {"region": "CAISO_NORTH", "signal_type": "co2_moer", "units": "lbs_co2_per_mwh"}
    if generated_at is not None:
        meta["generated_at"] = generated_at
    start = unix(first.replace("+00:00", ""))
    data = [{"point_time": datetime.fromtimestamp(start + 300 * i, tz=timezone.utc).isoformat(), "value": v} for i, v in enumerate(values)]
    return json.dumps({"data": data, "meta": meta})


def electricity_maps(updated_at: str | None, values=(300, 280)) -> str:
    document = {
        "zone": "DE",
        "forecast": [{"carbonIntensity": v, "datetime": f"2026-06-01T{13 + i:02d}:00:00.000Z"} for i, v in enumerate(values)],
    }
    if updated_at is not None:
        document["updatedAt"] = updated_at
    return json.dumps(document)


UK = json.dumps(
    {
        "data": [
            {"from": "2026-06-01T12:00Z", "to": "2026-06-01T12:30Z", "intensity": {"forecast": 180, "actual": 175, "index": "moderate"}},
            {"from": "2026-06-01T12:30Z", "to": "2026-06-01T13:00Z", "intensity": {"forecast": 170, "actual": None, "index": "moderate"}},
            {"from": "2026-06-01T13:00Z", "to": "2026-06-01T13:30Z", "intensity": {"forecast": 150, "index": "low"}},
        ]
    }
)


# -- one document --------------------------------------------------------------------------------


def test_watttime_forecast_is_issued_at_generated_at():
    issue = read_issued_document(watttime("2026-06-01T11:55:00+00:00"), "wt.json")
    assert issue.issued_s == NOON - 300
    assert issue.signal.values.tolist() == [800.0, 820.0, 840.0] and issue.signal.unit == "lbs/MWh"
    assert issue.signal.times_s.tolist() == [NOON, NOON + 300, NOON + 600]


def test_electricity_maps_forecast_is_issued_at_updated_at():
    issue = read_issued_document(electricity_maps("2026-06-01T12:56:53.251Z"), "em.json")
    assert issue.issued_s == pytest.approx(NOON + 56 * 60 + 53.251)
    assert issue.signal.values.tolist() == [300.0, 280.0] and issue.signal.unit == "gCO2eq/kWh"
    assert issue.signal.times_s.tolist() == [NOON + 3600, NOON + 7200]


def test_uk_forecast_is_issued_at_its_first_half_hour_and_reads_the_forecast_not_the_actual():
    issue = read_issued_document(UK, "uk.json")
    assert issue.issued_s == NOON  # the first point's from: the API carries no issue time
    assert issue.signal.values.tolist() == [180.0, 170.0, 150.0]  # 175 is the actual, known only later


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (watttime(None), r"^wt\.json: meta\.generated_at: expected the time the forecast was issued"),
        (watttime("yesterday"), r"^wt\.json: meta\.generated_at: .*expected an ISO-8601 time"),
        (watttime("2026-06-01T11:55:00"), r"^wt\.json: meta\.generated_at: .*no zone"),
        (electricity_maps(None), r"^wt\.json: updatedAt: expected the time the forecast was issued"),
        (json.dumps({"history": [{"datetime": "2026-06-01T12:00:00Z", "carbonIntensity": 1}]}), r"got a history document"),
        (json.dumps({"rows": []}), r"JSON of no known shape"),
    ],
)
def test_a_document_without_a_good_issue_time_is_refused_naming_the_field(text, expected):
    with pytest.raises(TraceError, match=expected):
        read_issued_document(text, "wt.json")


# -- archives ------------------------------------------------------------------------------------


def test_json_lines_are_sorted_by_issue_time_and_a_bad_line_is_named():
    later, earlier = watttime("2026-06-01T12:05:00Z", values=(1.0, 2.0)), watttime("2026-06-01T11:55:00Z", values=(3.0, 4.0))
    archive = read_forecast_lines(f"{later}\n\n{earlier}\n", "a.jsonl")
    assert archive.issued_s.tolist() == [NOON - 300, NOON + 300]
    assert [issue.signal.values.tolist() for issue in archive.issues] == [[3.0, 4.0], [1.0, 2.0]]
    assert [issue.signal.source for issue in archive.issues] == ["a.jsonl:3", "a.jsonl:1"]
    bad = watttime("2026-06-01T12:10:00Z").replace('"value": 820.0', '"value": "high"')
    with pytest.raises(TraceError, match=r"^a\.jsonl:2: data\[1\]: value: expected a number") as info:
        read_forecast_lines(f"{earlier}\n{bad}\n", "a.jsonl")
    assert info.value.line == 2
    with pytest.raises(TraceError, match=r"^a\.jsonl:2: meta\.generated_at"):
        read_forecast_lines(f"{earlier}\n{watttime(None)}\n", "a.jsonl")
    with pytest.raises(TraceError, match=r"^a\.jsonl:1: not JSON"):
        read_forecast_lines("{oops\n", "a.jsonl")


def test_documents_of_a_folder_are_sorted_by_issue_time_not_by_name():
    documents = [("f/a.json", electricity_maps("2026-06-01T12:30:00Z", (5, 6))), ("f/b.json", electricity_maps("2026-06-01T12:10:00Z", (7, 8)))]
    archive = read_forecast_documents(documents, "f")
    assert [issue.signal.source for issue in archive.issues] == ["f/b.json", "f/a.json"]
    assert archive.issued_s.tolist() == [NOON + 600, NOON + 1800]
    with pytest.raises(TraceError, match=r"^f/c\.json: updatedAt"):
        read_forecast_documents([*documents, ("f/c.json", electricity_maps(None))], "f")


def test_long_csv_groups_points_by_issue():
    text = (
        "issued,time,value\n"
        "2026-06-01T12:00:00Z,2026-06-01T12:00:00Z,10\n"
        "2026-06-01T13:00:00Z,2026-06-01T13:00:00Z,30\n"
        "2026-06-01T12:00:00Z,2026-06-01T13:00:00Z,11\n"
        "2026-06-01T13:00:00Z,2026-06-01T14:00:00Z,31\n"
    )
    archive = read_forecast_csv(text, "long.csv", "gCO2eq/kWh")
    assert archive.issued_s.tolist() == [NOON, NOON + 3600] and archive.unit == "gCO2eq/kWh" and archive.notes == ()
    assert [issue.signal.values.tolist() for issue in archive.issues] == [[10.0, 11.0], [30.0, 31.0]]
    assert [issue.signal.times_s.tolist() for issue in archive.issues] == [[NOON, NOON + 3600], [NOON + 3600, NOON + 7200]]


def test_long_csv_with_naive_times_reads_them_as_utc_with_a_note():
    text = "Issued,Time,Value\n2026-06-01 12:00:00,2026-06-01 12:00:00,10\n2026-06-01 12:00:00,2026-06-01 13:00:00,11\n"
    archive = read_forecast_csv(text, "n.csv", "gCO2eq/kWh")
    assert archive.issued_s.tolist() == [NOON] and archive.issues[0].signal.times_s.tolist() == [NOON, NOON + 3600]
    assert archive.notes == ("n.csv: times carry no zone: read as UTC",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("issued,time\n", r"^c\.csv:1: expected the header 'issued,time,value'"),
        ("issued,time,value\n2026-06-01T12:00Z,2026-06-01T12:00Z\n", r"^c\.csv:2: expected 3 columns"),
        ("issued,time,value\nsoon,2026-06-01T12:00Z,1\n", r"^c\.csv:2: expected an ISO-8601 time"),
        ("issued,time,value\n2026-06-01T12:00Z,2026-06-01T12:00Z,x\n", r"^c\.csv:2: .*expected a number"),
        ("issued,time,value\n2026-06-01T12:00Z,2026-06-01T12:00Z,1\n2026-06-01T12:00Z,2026-06-01 13:00,1\n", r"^c\.csv:3: .*has no zone but line 2"),
        (
            "issued,time,value\n2026-06-01T12:00Z,2026-06-01T13:00Z,1\n2026-06-01T12:00Z,2026-06-01T12:00Z,1\n",
            r"^c\.csv:3: time 2026-06-01T12:00Z is before line 2's 2026-06-01T13:00Z in the forecast issued 2026-06-01T12:00Z: "
            r"within an issue each time is after the one before$",
        ),
        ("issued,time,value\n2026-06-01T12:00Z,2026-06-01T12:00Z,-1\n", r"^c\.csv:2: .*expected a value >= 0"),
        ("", r"^c\.csv: empty file"),
    ],
)
def test_long_csv_bad_input_is_named_by_its_line(text, expected):
    with pytest.raises(TraceError, match=expected):
        read_forecast_csv(text, "c.csv", "gCO2eq/kWh")


def test_a_row_issued_at_its_own_time_is_a_forecast_of_the_interval_it_starts():
    text = "issued,time,value\n2026-06-01T12:00Z,2026-06-01T12:00Z,10\n2026-06-01T12:00Z,2026-06-01T12:30Z,11\n"
    archive = read_forecast_csv(text, "now.csv", "gCO2eq/kWh")
    assert archive.issued_s.tolist() == [NOON] and archive.issues[0].signal.times_s.tolist() == [NOON, NOON + 1800]


def test_a_row_issued_after_the_time_it_forecasts_is_refused_naming_the_line_and_both_times():
    text = "issued,time,value\n2026-06-01T12:00Z,2026-06-01T12:00Z,10\n2026-06-01T13:00Z,2026-06-01T12:30Z,11\n"
    with pytest.raises(TraceError) as info:
        read_forecast_csv(text, "late.csv", "gCO2eq/kWh")
    assert info.value.line == 3
    assert str(info.value) == (
        "late.csv:3: issued 2026-06-01T13:00Z, after the time it forecasts, 2026-06-01T12:30Z: a forecast is issued at or before "
        "its time (a value given after its time is a measurement, not a forecast); are the columns issued and time swapped? "
        "Leave out the rows for times before their issue"
    )


def test_a_row_issued_after_its_time_by_a_dst_offset_is_named_with_utc_and_the_offsets():
    # Paris, 2026-03-29: summer time from 01:00 UTC. The issue, 03:00 local, still written with the winter offset.
    text = "issued,time,value\n2026-03-29T03:00+01:00,2026-03-29T03:00+02:00,10\n2026-03-29T03:00+01:00,2026-03-29T03:30+02:00,11\n"
    with pytest.raises(TraceError) as info:
        read_forecast_csv(text, "paris.csv", "gCO2eq/kWh")
    assert info.value.line == 2
    assert str(info.value).startswith(
        "paris.csv:2: issued 2026-03-29T03:00+01:00 (2026-03-29T02:00:00Z), after the time it forecasts, "
        "2026-03-29T03:00+02:00 (2026-03-29T01:00:00Z): a forecast is issued at or before its time"
    )
    assert str(info.value).endswith("the two times carry the offsets +01:00 and +02:00: are they mislabelled across a DST change?")


DST_HINT = "the UTC offsets may be mislabelled across a DST change (a summer time written with the winter offset, or the other way round)"


def test_an_issue_that_steps_back_an_hour_at_the_end_of_summer_time_is_refused_suggesting_mislabelled_offsets():
    # Paris, 2026-10-25: summer time (+02:00) ends at 01:00 UTC, 03:00 local, and 02:00-03:00 local comes twice.
    # The file writes +01:00 from the first 02:00 on, an hour early: its line 6 goes back to line 4's instant.
    text = (
        "issued,time,value\n"
        "2026-10-25T01:00+02:00,2026-10-25T01:00+02:00,50\n"  # 2026-10-24T23:00Z
        "2026-10-25T01:00+02:00,2026-10-25T01:30+02:00,51\n"  # 23:30Z
        "2026-10-25T01:00+02:00,2026-10-25T02:00+01:00,52\n"  # 01:00Z, meant 00:00Z
        "2026-10-25T01:00+02:00,2026-10-25T02:30+01:00,53\n"  # 01:30Z, meant 00:30Z
        "2026-10-25T01:00+02:00,2026-10-25T02:00+01:00,54\n"  # 01:00Z: the second 02:00, rightly +01:00
    )
    with pytest.raises(TraceError) as info:
        read_forecast_csv(text, "paris.csv", "gCO2eq/kWh")
    assert info.value.line == 6
    assert str(info.value) == (
        "paris.csv:6: time 2026-10-25T02:00+01:00 (2026-10-25T01:00:00Z) is before line 5's 2026-10-25T02:30+01:00 "
        "(2026-10-25T01:30:00Z) in the forecast issued 2026-10-25T01:00+02:00 (2026-10-24T23:00:00Z): within an issue each "
        f"time is after the one before; {DST_HINT}"
    )


def test_two_rows_of_one_issue_and_time_in_utc_are_refused_naming_both_spellings():
    # 02:00+02:00 and 01:00+01:00 are one instant (00:00Z): the two rows forecast one time of one issue.
    text = "issued,time,value\n2026-10-25T02:00+02:00,2026-10-25T03:00+01:00,10\n2026-10-25T01:00+01:00,2026-10-25T03:00+01:00,12\n"
    with pytest.raises(TraceError) as info:
        read_forecast_csv(text, "paris.csv", "gCO2eq/kWh")
    assert info.value.line == 3
    assert str(info.value) == (
        "paris.csv:3: time 2026-10-25T03:00+01:00 (2026-10-25T02:00:00Z) is the same instant as line 2's 2026-10-25T03:00+01:00 "
        "(2026-10-25T02:00:00Z) in the forecast issued 2026-10-25T01:00+01:00 (2026-10-25T00:00:00Z), which line 2 writes "
        f"2026-10-25T02:00+02:00 (2026-10-25T00:00:00Z): within an issue each time is after the one before; {DST_HINT}"
    )


def test_naive_local_times_that_repeat_the_hour_when_summer_time_ends_are_refused_saying_they_are_read_as_utc():
    text = "issued,time,value\n2026-10-25 00:00,2026-10-25 02:00,1\n2026-10-25 00:00,2026-10-25 02:30,2\n2026-10-25 00:00,2026-10-25 02:00,3\n"
    with pytest.raises(TraceError) as info:
        read_forecast_csv(text, "local.csv", "gCO2eq/kWh")
    assert str(info.value) == (
        "local.csv:4: time 2026-10-25 02:00 is before line 3's 2026-10-25 02:30 in the forecast issued 2026-10-25 00:00: within an "
        "issue each time is after the one before; these times carry no zone and are read as UTC: if they are local times, the hour "
        "repeated when summer time ends comes twice (give them in UTC or with their offsets)"
    )


def test_an_archive_ordered_across_both_dst_changes_with_its_offsets_is_read():
    # Paris's half hours over each change, with the offsets right: one issue each, times increasing in UTC.
    spring = ["2026-03-29T01:30+01:00", "2026-03-29T03:00+02:00", "2026-03-29T03:30+02:00"]
    autumn = ["2026-10-25T02:30+02:00", "2026-10-25T02:00+01:00", "2026-10-25T02:30+01:00", "2026-10-25T03:00+01:00"]
    rows = [f"{spring[0]},{t},1" for t in spring] + [f"{autumn[0]},{t},2" for t in autumn]
    archive = read_forecast_csv("issued,time,value\n" + "\n".join(rows) + "\n", "paris.csv", "gCO2eq/kWh")
    spring_s, autumn_s = unix("2026-03-29T00:30:00"), unix("2026-10-25T00:30:00")
    assert archive.issued_s.tolist() == [spring_s, autumn_s]
    assert archive.issues[0].signal.times_s.tolist() == [spring_s, spring_s + 1800, spring_s + 3600]
    assert archive.issues[1].signal.times_s.tolist() == [autumn_s, autumn_s + 1800, autumn_s + 3600, autumn_s + 5400]


def test_an_empty_archive_mixed_units_and_one_issue_time_twice_are_refused():
    with pytest.raises(TraceError, match=r"^e\.jsonl: empty forecast archive"):
        read_forecast_lines("\n\n", "e.jsonl")
    with pytest.raises(TraceError, match=r"^m\.jsonl: m\.jsonl:2 .* is in gCO2eq/kWh, the archive's other issues in lbs/MWh"):
        read_forecast_lines(f"{watttime('2026-06-01T11:00Z')}\n{electricity_maps('2026-06-01T12:00Z')}\n", "m.jsonl")
    signal = Signal([NOON, NOON + 60], [1.0, 2.0], "$/kWh", "p")
    with pytest.raises(TraceError, match=r"both issued at 2026-06-01T12:00:00Z"):
        ForecastArchive("d", "$/kWh", (IssuedForecast(NOON, signal), IssuedForecast(NOON, signal)))
    with pytest.raises(ConfigError, match="unknown signal unit"):
        ForecastArchive("d", "kg", (IssuedForecast(NOON, signal),))


def test_an_archive_in_lbs_is_converted_to_grams():
    archive = archive_in_grams(read_forecast_lines(watttime("2026-06-01T11:00Z", values=(1000.0, 2000.0)), "w.jsonl"))
    assert archive.unit == "gCO2eq/kWh"
    assert archive.issues[0].signal.values.tolist() == pytest.approx([GRAMS_PER_POUND, 2 * GRAMS_PER_POUND])


# -- telling the forms apart ---------------------------------------------------------------------


def test_read_forecast_tells_an_archive_from_a_plain_signal():
    one = read_forecast(watttime("2026-06-01T11:55:00Z"), "wt.json")
    assert isinstance(one, ForecastArchive) and one.issued_s.tolist() == [NOON - 300]
    lines = read_forecast(f"{watttime('2026-06-01T11:55:00Z')}\n{watttime('2026-06-01T12:00:00Z')}\n", "two.json")
    assert isinstance(lines, ForecastArchive) and len(lines.issues) == 2
    long_csv = read_forecast("issued,time,value\n2026-06-01T12:00Z,2026-06-01T12:00Z,1\n2026-06-01T12:00Z,2026-06-01T13:00Z,2\n", "l.csv", "gCO2eq/kWh")
    assert isinstance(long_csv, ForecastArchive)
    # No issue time: a plain signal, read as --carbon is.
    for text, unit in ((watttime(None), None), (UK, None), (electricity_maps(None), None), ("time,value\n2026-06-01T12:00Z,1\n2026-06-01T13:00Z,2\n", "$/kWh")):
        assert isinstance(read_forecast(text, "plain", unit), Signal)
    with pytest.raises(ConfigError, match="needs its unit"):
        read_forecast("issued,time,value\n2026-06-01T12:00Z,2026-06-01T12:00Z,1\n", "l.csv")


# -- a forecast of one point ---------------------------------------------------------------------

ONE_POINT = "one forecast point; expected at least 2 (a point's value holds until the next point's time: one point covers no slot)"


@pytest.mark.parametrize(
    ("text", "unit"),
    [
        ("issued,time,value\n2026-06-01T12:00Z,2026-06-01T13:00Z,10\n", "gCO2eq/kWh"),  # an archive of one row
        ("time,value\n2026-06-01T13:00Z,10\n", "gCO2eq/kWh"),  # a series without issue times
        (electricity_maps("2026-06-01T12:56:53Z", values=(300,)), None),  # one document, issued, of one point
        (json.dumps({"data": [json.loads(UK)["data"][0]]}), None),  # UK Carbon Intensity, one half hour: a series
    ],
)
def test_a_forecast_of_one_point_is_refused_saying_two_are_needed(text, unit):
    with pytest.raises(TraceError) as info:
        read_forecast(text, "one", unit)
    assert str(info.value) == f"one: {ONE_POINT}"


def test_an_archive_whose_every_issue_has_one_point_is_refused_and_one_of_two_points_is_enough():
    one_each = [("f/a.json", electricity_maps("2026-06-01T12:10:00Z", (5,))), ("f/b.json", electricity_maps("2026-06-01T12:30:00Z", (7,)))]
    with pytest.raises(TraceError) as info:
        read_forecast_documents(one_each, "f")
    assert str(info.value) == (
        "f: 2 issues of one point each; expected an issue of at least 2 points (a point's value holds until the next point's "
        "time: one point covers no slot)"
    )
    enough = read_forecast_documents([*one_each, ("f/c.json", electricity_maps("2026-06-01T12:50:00Z", (8, 9)))], "f")
    assert [issue.signal.times_s.size for issue in enough.issues] == [1, 1, 2]
