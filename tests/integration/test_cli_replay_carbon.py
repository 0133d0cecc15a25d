"""`autoscaler replay` and `sweep` with a carbon or price signal, end to end: files and a URL on
127.0.0.1, figures recomputed from the JSON by hand, and nothing changed without a signal."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pytest
from local_http import serving

from autoscaler.app.cli import main
from autoscaler.core.cost import schedule_cost
from autoscaler.core.model import CostParams
from autoscaler.core.policies import plan

FIRST = datetime(2020, 6, 1, tzinfo=timezone.utc)
HALF_HOURS = 4 * 48
"""Four days of half-hourly values."""

SMALL = ["--window", "48", "--deadline", "1h"]
"""Four hours of Workload A with D = 12 slots: hold+carbon's window LP stays small."""

IDLE_W, BUSY_W = 60.30, 25.70 + 7.21 + 0.66
"""Table III: gamma_cpu, and the alphas a node at full load adds (disk and network proportional to CPU)."""

OLD_POLICY_KEYS = {
    "cost", "operating_cost", "switching_cost", "saving_pct", "peak_servers", "mean_servers",
    "solve_ms_per_slot", "note", "worse_than_follow", "m", "x",
}  # fmt: skip
OLD_TOP_KEYS = {"trace", "slot_s", "params", "workload", "policies"}


def daily_cycle(j: int) -> float:
    """gCO2eq/kWh of half-hour j: 300 +- 150, lowest at 03:00 UTC, highest at 15:00."""
    return round(300.0 + 150.0 * math.sin(2 * math.pi * ((j / 2) % 24 - 9) / 24), 3)


def write_signal(path: Path, value=daily_cycle, n: int = HALF_HOURS) -> Path:
    lines = ["time,value"]
    for j in range(n):
        lines.append(f"{(FIRST + timedelta(minutes=30 * j)).isoformat().replace('+00:00', 'Z')},{value(j)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def per_slot(first_half_hour: int, n_slots: int) -> np.ndarray:
    """The signal in 5-minute slots from half-hour ``first_half_hour``: six slots per half-hour."""
    return np.array([daily_cycle(first_half_hour + t // 6) for t in range(n_slots)])


def modelled_wh(m: list[float], x: list[float], slot_s: float = 300.0, boot_s: float = 300.0) -> np.ndarray:
    """Table III energy per slot on whole nodes, by hand: n_t nodes idle plus x_t servers' worth busy,
    plus boot_s of idle power per node started (noise of 1e-6 of the peak is not a node)."""
    m, x = np.array(m), np.array(x)
    nodes = np.ceil(m - 1e-6 * max(1.0, m.max()))
    started = np.maximum(np.diff(nodes, prepend=0.0), 0.0)
    return (IDLE_W * nodes + BUSY_W * np.minimum(x, nodes)) * slot_s / 3600 + IDLE_W * started * boot_s / 3600


def run_json(argv: list[str], capsys) -> dict:
    # The paper's costs (e0 = 1, e1 = 0, beta = 12), which the figures below are worked by.
    assert main(["replay", *argv, "--objective", "paper", "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_gives_energy_and_grams_per_policy_that_the_schedules_and_the_signal_recompute(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    document = run_json(["--policy", "follow,offline,hold,gcp-u", *SMALL, "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh"], capsys)
    signal = document["signal"]
    # The signal covers a day before the trace and the replay, so the trace starts a day in.
    assert signal["start"] == "2020-06-02T00:00:00Z"
    assert signal["history_slots"] == 288 and signal["forecast"] == "blend"
    assert signal["unit"] == "gCO2eq/kWh" and signal["source"] == str(source)
    assert len(signal["values"]) == 48 + 12
    np.testing.assert_allclose(signal["values"], per_slot(48, 60), rtol=1e-12)
    policies = document["policies"]
    follow = policies["follow"]
    for name, p in policies.items():
        s = per_slot(48, len(p["m"]))
        wh = modelled_wh(p["m"], p["x"])
        assert p["energy_wh"] == pytest.approx(wh.sum(), rel=1e-9), name
        assert p["co2_g"] == pytest.approx(float(np.dot(wh, s)) / 1000.0, rel=1e-9), name
        assert p["co2_saving_pct"] == pytest.approx(100 * (1 - p["co2_g"] / follow["co2_g"]), abs=1e-7), name
        assert p["energy_saving_pct"] == pytest.approx(100 * (1 - p["energy_wh"] / follow["energy_wh"]), abs=1e-7), name
    assert follow["co2_saving_pct"] == 0.0 and follow["energy_saving_pct"] == 0.0
    assert policies["hold"]["schedule"] == "hold+carbon" and policies["hold"]["note"] == "carbon-aware: hold+carbon"
    assert "no carbon-aware variant" in policies["gcp-u"]["note"] and not policies["gcp-u"]["carbon_aware"]
    assert {n for n, p in policies.items() if "carbon_blind" in p} == {"offline", "hold"}
    # The carbon-blind schedules are the policies' own, costed under the same signal.
    params = CostParams()
    load = np.array(document["workload"]["active"])
    for name in ("offline", "hold"):
        blind = plan(name, load, 12, params)
        wh = modelled_wh(blind.capacity.tolist(), blind.assigned.tolist())
        assert policies[name]["carbon_blind"]["co2_g"] == pytest.approx(float(np.dot(wh, per_slot(48, wh.size))) / 1000, rel=1e-6)
        assert policies[name]["carbon_blind"]["energy_wh"] == pytest.approx(wh.sum(), rel=1e-6)
    # The abstract cost is still eq. 2 of the schedule reported.
    for name, p in policies.items():
        m, x = np.array(p["m"]), np.array(p["x"])
        assert p["cost"] == pytest.approx(schedule_cost(m, x, params).total, rel=1e-6), name


def test_without_a_signal_the_document_is_what_it_was_with_energy_beside(capsys):
    document = run_json(["--policy", "all", "--window", "48", "--deadline", "3"], capsys)
    assert set(document) == OLD_TOP_KEYS | {"classes", "energy", "objective"}
    assert document["energy"] == {"power_model": "table-iii", "boot_s": 300.0}
    assert document["params"] == {"e0": 1.0, "e1": 0.0, "beta": 12.0, "deadline": 3, "max_servers": None}
    params = CostParams()
    load = np.array(document["workload"]["active"])
    for name, p in document["policies"].items():
        assert set(p) == OLD_POLICY_KEYS | {"energy_wh", "energy_saving_pct"}, name
        if name == "gcp":
            continue  # needs the per-class load, which the JSON does not carry
        schedule = plan(name, load, 3, params)
        assert p["m"] == [round(float(v), 9) + 0.0 for v in schedule.capacity], name
        assert p["cost"] == schedule_cost(schedule.capacity, schedule.assigned, params).total, name
        assert p["energy_wh"] == pytest.approx(modelled_wh(p["m"], p["x"]).sum(), rel=1e-9), name
    # A deadline given as a duration is the same replay.
    again = run_json(["--policy", "all", "--window", "48", "--deadline", "15m"], capsys)
    for name, p in again["policies"].items():
        assert {k: v for k, v in p.items() if k != "solve_ms_per_slot"} == {
            k: v for k, v in document["policies"][name].items() if k != "solve_ms_per_slot"
        }, name


def test_a_price_per_node_hour_on_a_load_curve_by_hand(tmp_path, capsys):
    # L = [2, 0] in hours, D = 1, beta = 0: follow runs 2 nodes at $1.00, the carbon-aware LP the same
    # work an hour later at $0.25: $2.00 against $0.50, a 75 % cut.
    curve = tmp_path / "curve.csv"
    curve.write_text("slot,released\n0,2\n1,0\n")
    price = tmp_path / "price.csv"
    price.write_text("time,value\n" + "".join(f"2020-06-01T0{h}:00:00Z,{v}\n" for h, v in enumerate([1.0, 0.25, 0.5, 1.0, 0.25])))
    argv = ["--trace", str(curve), "--slot-s", "3600", "--deadline", "1h", "--objective", "paper", "--beta", "0", "--policy", "offline",
            "--carbon", str(price), "--carbon-unit", "$/node-hour", "--start", "2020-06-01T00:00Z"]  # fmt: skip
    assert main(["replay", *argv, "--format", "json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert "co2_g" not in document["policies"]["follow"]
    assert document["policies"]["follow"]["cost_usd"] == pytest.approx(2.0)
    assert document["policies"]["offline"]["cost_usd"] == pytest.approx(0.5)
    assert document["policies"]["offline"]["cost_saving_pct"] == pytest.approx(75.0)
    assert document["signal"]["history_slots"] == 0
    assert "the blend has no yesterday" in " ".join(captured.err.split())  # a note on stderr, and in the JSON's signal.notes
    assert main(["replay", *argv]) == 0
    table = capsys.readouterr().out
    assert "cost cut" in table and "75.00 %" in table and "kgCO2eq" not in table


def test_table_csv_and_files_carry_the_signal(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    argv = ["replay", "--policy", "offline,gcp-u", *SMALL, "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    for column in ("kWh", "kgCO2eq", "CO2 cut"):
        assert column in captured.out
    assert "gcp-u has no carbon-aware variant" in captured.err
    out = tmp_path / "out"
    assert (out / "replay.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    document = json.loads((out / "replay.json").read_text())
    slots = list(csv.DictReader((out / "slots.csv").open()))
    assert [float(r["signal"]) for r in slots] == pytest.approx(document["signal"]["values"])
    summary = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["policy"] for r in summary] == ["follow", "offline", "gcp-u"]
    for row in summary:
        assert float(row["co2_g"]) == pytest.approx(document["policies"][row["policy"]]["co2_g"])
        assert float(row["energy_wh"]) == pytest.approx(document["policies"][row["policy"]]["energy_wh"])
    assert main([*argv, "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split(",")
    assert header[-3:] == ["energy_wh", "co2_g", "co2_saving_pct"]


def test_lbs_per_mwh_and_a_perfect_forecast(tmp_path, capsys):
    source = write_signal(tmp_path / "lbs.csv", value=lambda j: 1000.0)
    document = run_json(["--policy", "hold", *SMALL, "--carbon", str(source), "--carbon-unit", "lbs/MWh", "--forecast", "perfect"], capsys)
    assert document["signal"]["unit"] == "gCO2eq/kWh" and document["signal"]["source_unit"] == "lbs/MWh"
    assert document["signal"]["forecast"] == "perfect"
    assert document["signal"]["values"] == pytest.approx([453.59237] * (48 + 12))
    follow = document["policies"]["follow"]
    assert follow["co2_g"] == pytest.approx(follow["energy_wh"] / 1000 * 453.59237)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--start", "2020-07-01T00:00Z"], ["grid.csv", "2020-07-01T00:00:00Z"]),
        (["--start", "2020-05-31T22:00Z"], ["grid.csv", "2020-05-31T22:00:00Z", "before the first point"]),
        (["--start", "2020-06-01"], ["--start", "no zone"]),
        (["--start", "9999-12-31T23:00:00Z"], ["grid.csv", "9999-12-31T23:00:00Z", "past year 9999"]),
        (["--deadline", "7m"], ["--deadline 7m is 1.4 slots of 300 s; give a multiple of 5m or a number of slots"]),
    ],
)
def test_bad_signal_input_is_one_clear_line(tmp_path, capsys, argv, words):
    source = write_signal(tmp_path / "grid.csv")
    assert main(["replay", "--policy", "offline", "--window", "48", "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh", *argv]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("autoscaler: error: ") and "Traceback" not in err
    for word in words:
        assert word in err


def test_signal_flags_need_a_signal_and_a_csv_needs_its_unit(tmp_path, capsys):
    assert main(["replay", "--window", "48", "--start", "2020-06-01T00:00Z"]) == 2
    assert "--start without --carbon" in capsys.readouterr().err
    source = write_signal(tmp_path / "grid.csv")
    assert main(["replay", "--window", "48", "--carbon", str(source)]) == 2
    assert "needs its unit" in capsys.readouterr().err


@pytest.fixture()
def served(tmp_path) -> Iterator[str]:
    body = write_signal(tmp_path / "served.csv").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            if self.path.split("?", 1)[0] != "/grid.csv":
                self.send_error(404, "Not Found")
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as base:
        yield base


def test_a_signal_from_a_url_is_the_file_it_serves(served, tmp_path, capsys):
    argv = ["--policy", "offline,gcp-u", *SMALL, "--carbon-unit", "gCO2eq/kWh"]
    from_url = run_json([*argv, "--carbon", f"{served}/grid.csv?token=secret"], capsys)
    from_file = run_json([*argv, "--carbon", str(write_signal(tmp_path / "grid.csv"))], capsys)
    assert from_url["signal"]["source"] == f"{served}/grid.csv?..."  # the query (a token) is never shown
    assert from_url["signal"]["values"] == from_file["signal"]["values"]
    for name in ("follow", "offline", "gcp-u"):
        assert from_url["policies"][name]["co2_g"] == pytest.approx(from_file["policies"][name]["co2_g"], rel=1e-9)
    assert main(["replay", *argv, "--carbon", f"{served}/missing.csv"]) == 2
    assert "HTTP 404" in capsys.readouterr().err


def test_sweep_under_a_signal_agrees_with_replay(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    signal_args = ["--carbon", str(source), "--carbon-unit", "gCO2eq/kWh"]
    argv = ["sweep", "--window", "48", "--deadlines", "30m,1h", "--policy", "hold,offline,gcp-u", "--delta-deadline", "2", "--objective", "paper"]
    assert main([*argv, *signal_args, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    trace = "Workload A (embedded)"
    cuts = document["signal_cut_by_deadline"][trace]
    assert sorted(cuts) == ["gcp-u", "hold", "offline"] and sorted(cuts["offline"]) == ["12", "6"]
    assert sorted(document["blind_cut_by_deadline"][trace]) == ["hold", "offline"]
    assert document["signals"][trace]["start"] == "2020-06-02T00:00:00Z"
    replayed = run_json(["--policy", "hold,offline,gcp-u", "--window", "48", "--deadline", "1h", *signal_args], capsys)["policies"]
    for name in ("hold", "offline", "gcp-u"):
        assert cuts[name]["12"] == pytest.approx(replayed[name]["co2_saving_pct"], abs=1e-6), name
        assert document["by_deadline"][trace][name]["12"] == pytest.approx(replayed[name]["saving_pct"], abs=1e-6), name
    for name in ("hold", "offline"):
        assert document["blind_cut_by_deadline"][trace][name]["12"] == pytest.approx(
            100 * (1 - replayed[name]["carbon_blind"]["co2_g"] / replayed["follow"]["co2_g"]), abs=1e-6
        )
    assert main([*argv, *signal_args]) == 0
    assert "CO2 cut against follow" in capsys.readouterr().out
    # Without a signal the sweep's document has none of it.
    assert main([*argv, "--format", "json"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"deadlines", "policies", "delta_deadline", "by_deadline", "gcp_classes", "vfw_by_delta", "objective"}


def test_six_hours_on_workload_a_under_a_daily_cycle(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    document = run_json(["--trace", "default", "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh", "--deadline", "6h",
                         "--policy", "follow,offline,hold"], capsys)  # fmt: skip
    assert document["params"]["deadline"] == 72
    policies = document["policies"]
    for name in ("offline", "hold"):
        # Awareness moves work into the clean hours: fewer grams than the same policy blind, and than follow.
        assert policies[name]["co2_g"] < policies[name]["carbon_blind"]["co2_g"] < policies["follow"]["co2_g"], name
    print({name: (round(p["energy_wh"] / 1000, 2), round(p["co2_g"] / 1000, 3), round(p["co2_saving_pct"], 2)) for name, p in policies.items()})


def test_a_forecast_file_of_the_actual_values_is_the_perfect_forecast(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    forecast = write_signal(tmp_path / "forecast.csv")
    argv = ["--policy", "hold", *SMALL, "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh"]
    from_file = run_json([*argv, "--forecast", str(forecast)], capsys)
    perfect = run_json([*argv, "--forecast", "perfect"], capsys)
    persistence = run_json([*argv, "--forecast", "persistence"], capsys)
    assert from_file["signal"]["forecast"] == str(forecast) and perfect["signal"]["forecast"] == "perfect"
    assert from_file["policies"]["hold"]["m"] == perfect["policies"]["hold"]["m"]
    assert from_file["policies"]["hold"]["co2_g"] == perfect["policies"]["hold"]["co2_g"]
    # Under a daily cycle persistence is yesterday's value, which here is today's: the same again.
    assert persistence["policies"]["hold"]["co2_g"] == pytest.approx(perfect["policies"]["hold"]["co2_g"], rel=1e-6)


def test_the_png_gains_a_panel_for_the_signal(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    argv = ["replay", "--policy", "offline", "--window", "48", "--out"]
    assert main([*argv, str(tmp_path / "blind")]) == 0
    assert main([*argv, str(tmp_path / "aware"), "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh"]) == 0
    capsys.readouterr()

    def height_px(folder: str) -> int:
        return int.from_bytes((tmp_path / folder / "replay.png").read_bytes()[20:24], "big")  # IHDR height

    # Each panel is 1.9 in at 110 dpi, plus 0.8 in of titles: two panels, then three.
    assert height_px("blind") == round((1.9 * 2 + 0.8) * 110)
    assert height_px("aware") == round((1.9 * 3 + 0.8) * 110)


def test_a_long_signal_counts_against_the_memory_budget_before_it_is_read(tmp_path, capsys):
    """Issue 20, finding 13: the signal's memory is part of --memory-budget-mb."""
    from autoscaler.core.budget import BASE_BYTES, SIGNAL_BYTES_PER_SOURCE_BYTE, format_bytes

    # 40 days of 1-minute points, about 1.6 MB: the replay of four hours alone needs about BASE_BYTES.
    lines = ["time,value"] + [f"{(FIRST + timedelta(minutes=j)).strftime('%Y-%m-%dT%H:%M:%SZ')},{300 + j % 7}" for j in range(40 * 1440)]
    source = tmp_path / "minutes.csv"
    source.write_text("\n".join(lines) + "\n")
    signal_bytes = int(SIGNAL_BYTES_PER_SOURCE_BYTE * source.stat().st_size)
    budget_mb = (BASE_BYTES + signal_bytes / 2) / 2**20  # room for the replay, not for the signal besides
    argv = ["replay", "--policy", "offline", *SMALL, "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh"]
    assert main([*argv, "--memory-budget-mb", f"{budget_mb:.3f}"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--memory-budget-mb" in err
    assert f"the --carbon signal {source} ({format_bytes(source.stat().st_size)}) {format_bytes(signal_bytes)}" in err
    assert main([*argv, "--memory-budget-mb", "2048", "--format", "json"]) == 0


# -- the carbon messages name the flag to change (issue 20) ---------------------------------------------


def write_watttime(path: Path, n: int = HALF_HOURS) -> Path:
    data = [{"point_time": (FIRST + timedelta(minutes=30 * j)).isoformat(), "value": 900.0 + j % 48} for j in range(n)]
    path.write_text(json.dumps({"data": data, "meta": {"units": "lbs_co2_per_mwh"}}))
    return path


def write_electricity_maps(path: Path, first_half_hour: int, n: int) -> Path:
    items = [{"datetime": (FIRST + timedelta(minutes=30 * j)).isoformat(), "carbonIntensity": 200.0} for j in range(first_half_hour, first_half_hour + n)]
    path.write_text(json.dumps({"forecast": items}))
    return path


def test_a_csv_signal_without_its_unit_names_carbon_unit(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    assert main(["replay", *SMALL, "--carbon", str(source)]) == 2
    err = capsys.readouterr().err
    assert "a CSV signal needs its unit: give --carbon-unit" in err and "Traceback" not in err


def test_a_forecast_that_cannot_be_read_is_named_as_the_forecast(tmp_path, capsys):
    source = write_signal(tmp_path / "grid.csv")
    assert main(["replay", *SMALL, "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh", "--forecast", str(tmp_path / "none.csv")]) == 2
    assert f"--forecast: {tmp_path / 'none.csv'}: no such file" in capsys.readouterr().err


def test_a_csv_forecast_beside_a_watttime_signal_needs_its_unit_not_lbs_by_default(tmp_path, capsys):
    source = write_watttime(tmp_path / "watttime.json")
    forecast = write_signal(tmp_path / "forecast.csv", value=lambda j: 250.0)
    assert main(["replay", *SMALL, "--carbon", str(source), "--forecast", str(forecast)]) == 2
    err = capsys.readouterr().err
    assert "--forecast" in err and "give --carbon-unit" in err and "Traceback" not in err
    # Told the unit, the forecast is read in it.
    document = run_json(["--policy", "hold", *SMALL, "--carbon", str(source), "--carbon-unit", "lbs/MWh", "--forecast", str(forecast)], capsys)
    assert document["signal"]["forecast"] == str(forecast)


def test_an_electricity_maps_forecast_beside_a_watttime_signal_is_read_in_its_own_unit(tmp_path, capsys):
    source = write_watttime(tmp_path / "watttime.json")
    forecast = write_electricity_maps(tmp_path / "em.json", 48, 48)
    document = run_json(["--policy", "hold", *SMALL, "--carbon", str(source), "--forecast", str(forecast)], capsys)
    assert document["signal"]["unit"] == "gCO2eq/kWh" and document["signal"]["source_unit"] == "lbs/MWh"
    assert document["signal"]["forecast"] == str(forecast)


def test_each_policy_has_its_risk_against_follow_day_by_day_as_recomputed_from_its_schedule(tmp_path, capsys):
    # Two days: Workload A's first 6 hours, and the same again a day later; D = 2 h.
    from autoscaler.app.traces import SHIPPED

    trace_a = Path(__file__).parents[2] / "autoscaler" / "data" / SHIPPED["A"].file_name
    lines = [line.split("\t") for line in trace_a.read_text().splitlines() if float(line.split("\t")[1]) < 6 * 3600]
    two_days = [line for shift in (0, 86_400) for line in (["\t".join([f"{r[0]}-{shift}", f"{float(r[1]) + shift:g}", *r[2:]]) for r in lines])]
    trace = tmp_path / "two-days.tsv"
    trace.write_text("\n".join(two_days) + "\n")
    source = write_signal(tmp_path / "grid.csv")
    document = run_json(
        ["--trace", str(trace), "--window", "576", "--deadline", "2h", "--policy", "follow,hold", "--carbon", str(source), "--carbon-unit", "gCO2eq/kWh"], capsys
    )
    policies = document["policies"]

    def grams_by_day(p: dict) -> np.ndarray:
        wh = modelled_wh(p["m"], p["x"])
        grams = wh * per_slot(48, wh.size) / 1000.0
        return np.array([grams[:288].sum(), grams[288:576].sum(), grams[576:].sum()])

    follow, hold = grams_by_day(policies["follow"]), grams_by_day(policies["hold"])
    assert follow[0] > 0 and follow[1] > 0
    # The window is two days; what runs after it (the D slots where deferred work runs) is day 2's.
    follow, hold = np.array([follow[0], follow[1] + follow[2]]), np.array([hold[0], hold[1] + hold[2]])
    cut = 1 - hold / follow
    risk = policies["hold"]["signal_risk"]
    assert risk["days"] == follow.size
    assert risk["expected_cut"] == pytest.approx(cut.mean(), rel=1e-6)
    assert risk["worst_day_regret"] == pytest.approx(-cut.min(), rel=1e-6)
    assert risk["days_above_follow"] == int((cut < 0).sum()) and risk["worst_tenth_cut"] == pytest.approx(cut.min(), rel=1e-6)
    assert "signal_risk" not in policies["follow"]
