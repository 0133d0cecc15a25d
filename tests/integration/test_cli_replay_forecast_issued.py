"""`autoscaler replay --forecast ARCHIVE`: forecasts read as issued, end to end through the CLI, and a
signal with naive times (France's 2020 series' shape) read as UTC."""

from __future__ import annotations

import json
from datetime import timedelta

from test_cli_replay_carbon import FIRST, HALF_HOURS, SMALL, daily_cycle, run_json, write_signal

from autoscaler.app.cli import main


def iso(j: int) -> str:
    """Half-hour j's start, ISO-8601 UTC."""
    return (FIRST + timedelta(minutes=30 * j)).isoformat().replace("+00:00", "Z")


def write_long_csv(path, issues) -> None:
    """``issues``: (issue half-hour, value of half-hour j) pairs, each forecasting every half-hour from its own on."""
    lines = ["issued,time,value"]
    for issued, value in issues:
        lines.extend(f"{iso(issued)},{iso(j)},{value(j)}" for j in range(issued, HALF_HOURS))
    path.write_text("\n".join(lines) + "\n")


def test_an_archive_of_the_actual_values_issued_before_the_start_is_the_perfect_forecast(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    archive = tmp_path / "issued.csv"
    # Issued at the signal's first point, a day before the trace starts: known in every slot.
    write_long_csv(archive, [(0, daily_cycle)])
    argv = ["--policy", "hold", *SMALL, "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh"]
    issued = run_json([*argv, "--forecast", str(archive)], capsys)
    perfect = run_json([*argv, "--forecast", "perfect"], capsys)
    assert issued["signal"]["forecast"] == f"as issued: {archive}"
    assert issued["policies"]["hold"]["m"] == perfect["policies"]["hold"]["m"]
    assert issued["policies"]["hold"]["co2_g"] == perfect["policies"]["hold"]["co2_g"]


def test_an_issue_made_after_the_replay_is_never_read(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    archive = tmp_path / "issued.csv"
    # The second issue (a flat 5 gCO2eq/kWh, unlike any actual value) is issued at half-hour 150,
    # after the replay's slots (it starts at half-hour 48 and reads at most 4 h + 3 h ahead).
    write_long_csv(archive, [(0, daily_cycle), (150, lambda j: 5.0)])
    argv = ["--policy", "hold", *SMALL, "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh"]
    issued = run_json([*argv, "--forecast", str(archive)], capsys)
    perfect = run_json([*argv, "--forecast", "perfect"], capsys)
    assert issued["policies"]["hold"]["m"] == perfect["policies"]["hold"]["m"]
    # The same late values as a plain series are read from the start, and a note says so.
    plain = write_signal(tmp_path / "plain.csv", value=lambda j: 5.0)
    assert main(["replay", *argv, "--forecast", str(plain), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["signal"]["forecast"] == str(plain)
    assert "has no issue times, so it is used as if known from the start (look-ahead" in captured.err


def test_a_folder_and_json_lines_of_provider_forecasts_replay(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    folder = tmp_path / "forecasts"
    folder.mkdir()
    lines = []
    for day in range(4):
        # Electricity Maps forecasts, one a day at 00:00, hourly values for the next 48 h.
        document = {
            "zone": "FR",
            "forecast": [{"datetime": iso(48 * day + 2 * h), "carbonIntensity": daily_cycle(48 * day + 2 * h)} for h in range(48)],
            "updatedAt": iso(48 * day),
        }
        # File names that sort against the issue times: the archive must sort by issue time.
        (folder / f"{9 - day}.json").write_text(json.dumps(document))
        lines.append(json.dumps(document))
    (folder / "README.txt").write_text("not a forecast")
    jsonl = tmp_path / "forecasts.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")
    argv = ["--policy", "hold", *SMALL, "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh"]
    from_folder = run_json([*argv, "--forecast", str(folder)], capsys)
    from_lines = run_json([*argv, "--forecast", str(jsonl)], capsys)
    assert from_folder["signal"]["forecast"] == f"as issued: {folder}"
    assert from_lines["signal"]["forecast"] == f"as issued: {jsonl}"
    # The same issues in two forms: the same schedule.
    assert from_folder["policies"]["hold"]["m"] == from_lines["policies"]["hold"]["m"]


def test_a_forecast_archive_with_a_bad_line_is_refused_naming_the_file_and_line(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    archive = tmp_path / "bad.jsonl"
    archive.write_text(json.dumps({"zone": "FR", "forecast": [{"datetime": iso(0), "carbonIntensity": 1}]}) + "\n")
    assert main(["replay", *SMALL, "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh", "--forecast", str(archive)]) == 2
    err = capsys.readouterr().err
    assert f"--forecast: {archive}:1: updatedAt: expected the time the forecast was issued" in err and "Traceback" not in err


def test_a_signal_with_naive_times_and_a_named_value_column_replays_as_utc(tmp_path, capsys):
    # France's 2020 series' shape: header Time,Carbon Intensity, naive UTC times.
    path = tmp_path / "fr.csv"
    rows = [f"{iso(j).replace('T', ' ').replace('Z', '')},{daily_cycle(j)}" for j in range(HALF_HOURS)]
    path.write_text("Time,Carbon Intensity\n" + "\n".join(rows) + "\n")
    zoned = write_signal(tmp_path / "zoned.csv")
    argv = ["--policy", "hold", *SMALL, "--carbon-unit", "gCO2eq/kWh"]
    assert main(["replay", *argv, "--carbon", str(path), "--objective", "paper", "--format", "json"]) == 0
    captured = capsys.readouterr()
    naive = json.loads(captured.out)
    assert f"note: {path}: times carry no zone: read as UTC" in captured.err
    assert f"{path}: times carry no zone: read as UTC" in naive["signal"]["notes"]
    same = run_json([*argv, "--carbon", str(zoned)], capsys)
    assert naive["signal"]["start"] == same["signal"]["start"] == "2020-06-02T00:00:00Z"
    assert naive["policies"]["hold"]["co2_g"] == same["policies"]["hold"]["co2_g"]


def test_an_archive_row_issued_after_its_time_is_refused_naming_the_flag_the_file_and_the_line(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    archive = tmp_path / "swapped.csv"
    # The columns swapped: the second row is "issued" at half-hour 3 for half-hour 2.
    archive.write_text(f"issued,time,value\n{iso(2)},{iso(2)},300\n{iso(3)},{iso(2)},310\n")
    assert main(["replay", *SMALL, "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh", "--forecast", str(archive)]) == 2
    err = capsys.readouterr().err
    assert f"--forecast: {archive}:3: issued 2020-06-01T01:30:00Z, after the time it forecasts, 2020-06-01T01:00:00Z: " in err
    assert "are the columns issued and time swapped?" in err and "Traceback" not in err


def test_a_forecast_of_one_point_is_refused_naming_the_flag_and_what_is_expected(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    argv = ["replay", *SMALL, "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh", "--forecast"]
    archive, series = tmp_path / "one-row.csv", tmp_path / "one-point.csv"
    archive.write_text(f"issued,time,value\n{iso(0)},{iso(48)},300\n")
    series.write_text(f"time,value\n{iso(48)},300\n")
    for path in (archive, series):
        assert main([*argv, str(path)]) == 2
        err = capsys.readouterr().err
        assert f"autoscaler: error: --forecast: {path}: one forecast point; expected at least 2 (a point's value holds" in err
        assert "Traceback" not in err
