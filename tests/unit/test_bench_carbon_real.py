"""benchmarks/bench_carbon_real.py's drawn forecast (``--forecast-error``): a stand-in for a provider's
forecast of a stated quality, so its quality must be what the flag says."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import bench_carbon_real  # noqa: E402


def test_the_drawn_forecast_is_off_by_about_the_error_asked_for():
    actual = np.linspace(50.0, 400.0, 2 * 365 * 288)  # two years of 5-minute slots
    for error in (0.02, 0.05, 0.10, 0.30, 0.60):
        drawn = bench_carbon_real.erred_forecast(actual, error, seed=3)
        measured = float(np.mean(np.abs(drawn / actual - 1.0)))
        assert measured == pytest.approx(error, rel=0.05)


def test_the_log_error_sigma_gives_the_mean_absolute_error_by_quadrature():
    # E|exp(e) - 1| for e ~ N(0, sigma^2), integrated numerically: an independent check of the closed form.
    grid = np.linspace(-12.0, 12.0, 400_001)
    for error in (0.01, 0.05, 0.2, 0.9):
        sigma = bench_carbon_real.log_error_sigma(error)
        density = np.exp(-0.5 * grid**2) / np.sqrt(2 * np.pi)
        mean_abs = float(np.sum(np.abs(np.exp(sigma * grid) - 1.0) * density) * (grid[1] - grid[0]))
        assert mean_abs == pytest.approx(error, rel=1e-6)
    assert bench_carbon_real.log_error_sigma(0.0) == 0.0


def test_the_draw_changes_every_30_minutes_and_repeats_for_a_seed():
    actual = np.full(600, 100.0)
    drawn = bench_carbon_real.erred_forecast(actual, 0.05, seed=1)
    points = drawn.reshape(-1, bench_carbon_real.ERROR_POINT_SLOTS)
    assert (points == points[:, :1]).all() and np.unique(points[:, 0]).size == points.shape[0]
    assert np.array_equal(drawn, bench_carbon_real.erred_forecast(actual, 0.05, seed=1))
    assert not np.array_equal(drawn, bench_carbon_real.erred_forecast(actual, 0.05, seed=2))
    # A series that is not a whole number of points keeps its length.
    assert bench_carbon_real.erred_forecast(actual[:599], 0.05, seed=1).shape == (599,)


@pytest.fixture
def signal(tmp_path, monkeypatch) -> str:
    """A one-point signal CSV that exists (the flags are checked after --signal), run from tmp_path."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "signal.csv"
    path.write_text("time,value\n2020-01-01T00:00Z,50\n")
    return str(path)


def refusal(argv: list[str], capsys) -> str:
    """stderr of bench_carbon_real.main(argv), which must stop with exit 2."""
    with pytest.raises(SystemExit) as stopped:
        bench_carbon_real.main(argv)
    assert stopped.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan"])
def test_an_error_outside_0_to_1_is_refused_with_the_flag_named(signal, capsys, value):
    assert f"--forecast-error {float(value)}" in refusal(["--signal", signal, "--forecast-error", value], capsys)


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--deadlines", "0"),
        ("--deadlines", "-5"),
        ("--deadlines", "x"),
        ("--days", "2019-13-40"),
        ("--loads", "B"),
        ("--workers", "0"),
        ("--from-json", "no-such.json"),
    ],
)
def test_a_bad_flag_is_refused_before_any_work_with_the_flag_named(signal, capsys, flag, value):
    assert f"{flag} {value}" in refusal(["--signal", signal, flag, value], capsys)


def test_the_risk_table_reads_each_load_and_deadline_over_its_days(capsys):
    # Two days of one load at 6 h: follow 100 kg both days; hold+carbon 90 and 105.
    results = [
        {"load": "A", "day": day, "deadline_slots": 72, "kg": {"follow": 100.0, "hold": hold_kg, "hold+carbon": kg, "hold+carbon perfect": 80.0}}
        for day, hold_kg, kg in (("2020-01-10", 95.0, 90.0), ("2020-02-10", 99.0, 105.0))
    ]
    Console(width=250).print(bench_carbon_real.risk_table(results, "s.csv"))
    # Each row: load, D (two words), run (one or two words), then the figures.
    rows = {}
    for line in capsys.readouterr().out.splitlines():
        words = line.split()
        if words[:1] == ["A"]:
            run_words = 2 if words[4] == "perfect" else 1
            rows[" ".join(words[3 : 3 + run_words])] = words[3 + run_words :]
    assert rows["hold+carbon perfect"] == ["2", "+20.0%", "-20.0%", "0", "(0%)", "+20.0%"]
    # hold+carbon: cuts 10 % and -5 %: mean +2.5 %, worst day +5.0 % above follow, 1 of 2 days, worst 10 % (1 day) -5.0 %.
    assert rows["hold+carbon"] == ["2", "+2.5%", "+5.0%", "1", "(50%)", "-5.0%"]
    assert rows["hold"] == ["2", "+3.0%", "-1.0%", "0", "(0%)", "+1.0%"]
