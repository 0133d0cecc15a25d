"""hold+carbon on a real grid series: the CO2 it keeps of the carbon-aware offline LP's cut, over days
spread over a year, against follow and against carbon-blind hold.

Signal: a real carbon-intensity series (default: the French grid, 2020, 30-minute points; any
``time,value`` CSV, with or without zones, naive times read as UTC), repeated onto 5-minute slots.
Days: ``--days`` start dates (default: 12, every 31 days from 2020-01-10, so every weekday and
season is met), each with the 11 days before it as history (the forecast's error is learned there).
Loads: Workload A (one day) and a multi-day load of our own (the diurnal load of bench_replay.py
over three days, a different draw per day). Deadlines: 1, 2, 6 and 12 hours. Forecast: hold+carbon's
default, and ``perfect`` (the actual series) beside it; with ``--forecast-error E``, also a forecast
drawn with a mean absolute error of about E (:func:`erred_forecast`), what a provider's forecast of
that quality would give.

Per case: kg CO2eq of follow, hold (carbon-blind), the carbon-aware offline LP (3) (e0_t = s_t /
mean s) and hold+carbon; emissions are autoscaler.core.energy.accounting.modelled_schedule's Wh per slot (Table III,
whole nodes) times the actual s_t, over the trace and the D slots after it (the real next day).
"kept" = (follow - hold+carbon) / (follow - offline+carbon). "over hold" = hold+carbon / hold - 1.
The risk table gives, per load, D and run, over the days: the expected cut against follow, the
worst-day regret (the most a day emitted above follow), the days above follow and the mean cut on
the worst 10 % of days (:mod:`autoscaler.core.carbon_risk`).

Figures only; nothing here asserts anything. Usage::

    python benchmarks/bench_carbon_real.py [--quick] [--signal FILE] [--days 2020-01-10,...]
        [--deadlines 12,24,72,144] [--loads A,diurnal-3d] [--workers 2] [--json out.json]
        [--forecast-error 0.05]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
from rich import box
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from scipy.optimize import brentq
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_replay import diurnal_load, environment_table, load_workload_a  # noqa: E402

from autoscaler.core import defaults
from autoscaler.core.carbon_risk import WORST_SHARE, risk_against_follow
from autoscaler.core.energy.accounting import modelled_schedule
from autoscaler.core.energy.power import power_model
from autoscaler.core.model import CostParams
from autoscaler.core.objective import derive_costs
from autoscaler.core.policies import carbon, follow, hold, offline
from autoscaler.core.slot_signal import SlotSignal
from autoscaler.core.twin import PRICE_PER_NODE_HOUR

SLOT_S = 300.0
SLOTS_PER_DAY = 288
HISTORY_DAYS = 11
DEFAULT_SIGNAL = Path(__file__).resolve().parents[2] / "shared" / "grid" / "fr_ci_2020.csv"
DEFAULT_DAYS = tuple((datetime(2020, 1, 10) + timedelta(days=31 * k)).strftime("%Y-%m-%d") for k in range(12))
LOADS = ("A", "diurnal-3d")


def read_series(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(Unix seconds, values) of a two-column CSV with a header; naive times are UTC."""
    times, values = [], []
    with path.open(newline="") as handle:
        rows = csv.reader(handle)
        next(rows)
        for row in rows:
            if not row:
                continue
            moment = datetime.fromisoformat(row[0].strip().replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            times.append(moment.timestamp())
            values.append(float(row[1]))
    return np.asarray(times), np.asarray(values)


def on_slots(times_s: np.ndarray, values: np.ndarray, start_s: float, n_slots: int) -> np.ndarray:
    """The step series' value at the start of each 5-minute slot from start_s (last value before it)."""
    starts = start_s + SLOT_S * np.arange(n_slots)
    index = np.searchsorted(times_s, starts, side="right") - 1
    if index.min() < 0 or starts[-1] > times_s[-1] + 3600:
        covered = " to ".join(str(datetime.fromtimestamp(t, timezone.utc)) for t in (times_s[0], times_s[-1]))
        raise SystemExit(
            f"--days: the signal does not cover {n_slots} slots from {datetime.fromtimestamp(start_s, timezone.utc)} "
            f"(a day, its {HISTORY_DAYS} days of history before it and the window after it); it covers {covered}"
        )
    return values[index]


def load_of(name: str, seed: int) -> np.ndarray:
    if name == "A":
        return load_workload_a()
    if name == "diurnal-3d":
        return diurnal_load(3 * SLOTS_PER_DAY, seed)
    raise SystemExit(f"--loads: unknown load {name!r}; expected one of {', '.join(LOADS)}")


def co2_kg(schedule, intensity: np.ndarray) -> float:
    energy = modelled_schedule(schedule.policy, schedule.capacity, schedule.assigned, SLOT_S)
    return float(energy.slot_energy_wh @ intensity[: energy.slot_energy_wh.shape[0]]) / 1e6


def cost_params(objective: str) -> CostParams:
    """e0, e1, beta of ``objective`` as ``autoscaler replay`` derives them by default (Table III, 300 s boot)."""
    if objective == "paper":
        return CostParams()
    model = power_model("table-iii")
    costs = derive_costs(
        objective, slot_s=SLOT_S, idle_power_w=model.idle_power_w, busy_power_w=model.peak_power_w, boot_s=defaults.BOOT_S,
        price_per_node_hour=PRICE_PER_NODE_HOUR,
    )  # fmt: skip
    return CostParams(e0=costs.e0, e1=costs.e1, beta=costs.beta)


ERRED = "hold+carbon erred"
"""The run on the drawn forecast of ``--forecast-error`` (:func:`erred_forecast`)."""

ERROR_POINT_SLOTS = 6
"""The drawn forecast's error changes every 30 minutes (6 slots), the step of the French series."""

ERROR_CORRELATION = 0.9
"""Correlation of the drawn forecast's log error from one 30-minute point to the next."""


def log_error_sigma(mean_abs_error: float) -> float:
    """sigma such that exp(e) - 1, e ~ N(0, sigma^2), has mean absolute value ``mean_abs_error``:
    E|exp(e) - 1| = exp(sigma^2 / 2) * (2 Phi(sigma) - 1), solved by brentq (0: 0)."""
    if mean_abs_error <= 0.0:
        return 0.0
    return float(brentq(lambda s: math.exp(s * s / 2.0) * (2.0 * norm.cdf(s) - 1.0) - mean_abs_error, 1e-12, 10.0))


def erred_forecast(actual: np.ndarray, mean_abs_error: float, seed: int) -> np.ndarray:
    """``actual`` (shape (n,)) times exp(e): e an AR(1) series of correlation ERROR_CORRELATION per
    30-minute point, normal with :func:`log_error_sigma`, so that the mean absolute relative error
    is ``mean_abs_error`` in expectation. A stand-in for a provider's forecast of that quality: one
    value per slot whatever the lead (a plain series, not an archive of issues)."""
    rng = np.random.default_rng(seed)
    points = -(-actual.shape[0] // ERROR_POINT_SLOTS)
    sigma = log_error_sigma(mean_abs_error)
    shocks = rng.normal(0.0, sigma, points)
    error = np.empty(points)
    error[0] = shocks[0]
    for i in range(1, points):
        error[i] = ERROR_CORRELATION * error[i - 1] + math.sqrt(1.0 - ERROR_CORRELATION**2) * shocks[i]
    return actual * np.exp(np.repeat(error, ERROR_POINT_SLOTS)[: actual.shape[0]])


def measure(case: tuple[str, str, int, str, int, str, float]) -> dict:
    """One (load, day, D): kg CO2 of each run, and hold+carbon's per-slot ms."""
    load_name, day, deadline_slots, signal_path, seed, objective, forecast_error = case
    times_s, values = read_series(Path(signal_path))
    load = load_of(load_name, seed)
    params = cost_params(objective)
    start_s = datetime.fromisoformat(day).replace(tzinfo=timezone.utc).timestamp()
    history = HISTORY_DAYS * SLOTS_PER_DAY
    horizon = load.shape[0] + deadline_slots
    n_values = history + horizon + carbon.window_slots(deadline_slots)
    slot_values = on_slots(times_s, values, start_s - history * SLOT_S, n_values)
    intensity = slot_values[history:]
    signals = {
        "hold+carbon": SlotSignal(slot_values, history, SLOTS_PER_DAY),
        "hold+carbon perfect": SlotSignal(slot_values, history, SLOTS_PER_DAY, forecast=np.concatenate([np.full(history, np.nan), intensity])),
    }
    if forecast_error > 0:
        erred = erred_forecast(slot_values, forecast_error, seed)
        signals[ERRED] = SlotSignal(slot_values, history, SLOTS_PER_DAY, forecast=erred)
    kg = {
        "follow": co2_kg(follow.plan(load, deadline_slots, params), intensity),
        "hold": co2_kg(hold.plan(load, deadline_slots, params), intensity),
        "offline+carbon": co2_kg(offline.plan(load, deadline_slots, params, slot_cost=intensity[:horizon] / intensity[:horizon].mean()), intensity),
    }
    ms = {}
    for name, signal in signals.items():
        schedule = carbon.plan(load, deadline_slots, params, signal)
        kg[name] = co2_kg(schedule, intensity)
        ms[name] = schedule.solve_ms_per_slot
    result = {"load": load_name, "day": day, "deadline_slots": deadline_slots, "kg": kg, "ms_per_slot": ms}
    if forecast_error > 0:
        result["forecast_error"] = float(np.mean(np.abs(erred[history:] / intensity - 1.0)))
    return result


def kept(result: dict, name: str) -> float:
    """(follow - name) / (follow - offline+carbon): the share of the carbon-aware offline cut ``name`` keeps."""
    kg = result["kg"]
    cut = kg["follow"] - kg["offline+carbon"]
    return (kg["follow"] - kg[name]) / cut if cut > 0 else math.nan


def above_follow(rows: list[dict], name: str) -> int:
    """How many of ``rows`` ``name`` emitted more than follow in."""
    return sum(r["kg"][name] > r["kg"]["follow"] for r in rows)


def over_hold(rows: list[dict], name: str) -> list[float]:
    """kg(name) / kg(hold) - 1 in each of ``rows``."""
    return [r["kg"][name] / r["kg"]["hold"] - 1 for r in rows]


def spread(rows: list[dict], name: str) -> str:
    """min / median / max of ``name``'s kept over ``rows`` (a minus sign, not a hyphen)."""
    values = np.array([kept(r, name) for r in rows])
    return " / ".join(f"{v:.2f}".replace("-", "−") for v in (np.nanmin(values), np.nanmedian(values), np.nanmax(values)))


def summary_table(results: list[dict], signal_name: str) -> Table:
    erred = any(ERRED in r["kg"] for r in results)
    table = Table(
        title=f"hold+carbon on {signal_name}: kept of the carbon-aware offline cut against follow",
        caption="kept: min / median / max over days; > follow, > hold+0.5 %: runs emitting more; worst over hold: max of kg/kg(hold) - 1"
        + ("; erred: hold+carbon on a forecast drawn with --forecast-error (its measured mean absolute error in brackets)" if erred else ""),
        box=box.SIMPLE_HEAD,
    )
    headers = [
        "load", "D", "runs", "hold kept", "hold > follow", "kept", "kept, perfect", "> follow", "> hold+0.5 %", "worst over hold",
        "perfect > hold+0.5 %", "ms/slot",
    ]  # fmt: skip
    if erred:
        headers += ["kept, erred", "erred > follow", "erred > hold+0.5 %"]
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    keys = sorted({(r["load"], r["deadline_slots"]) for r in results}, key=lambda k: (LOADS.index(k[0]) if k[0] in LOADS else 9, k[1]))
    for load_name, deadline_slots in keys:
        rows = [r for r in results if r["load"] == load_name and r["deadline_slots"] == deadline_slots]
        over = over_hold(rows, "hold+carbon")
        cells = [
            load_name,
            f"{deadline_slots * SLOT_S / 3600:g} h",
            str(len(rows)),
            spread(rows, "hold"),
            str(above_follow(rows, "hold")),
            spread(rows, "hold+carbon"),
            spread(rows, "hold+carbon perfect"),
            str(above_follow(rows, "hold+carbon")),
            str(sum(o > 0.005 for o in over)),
            f"{max(over):+.1%}",
            str(sum(o > 0.005 for o in over_hold(rows, "hold+carbon perfect"))),
            f"{np.mean([r['ms_per_slot']['hold+carbon'] for r in rows]):.1f}",
        ]
        if erred:
            error = np.mean([r["forecast_error"] for r in rows])
            cells += [
                f"{spread(rows, ERRED)} ({error:.1%})",
                str(above_follow(rows, ERRED)),
                str(sum(o > 0.005 for o in over_hold(rows, ERRED))),
            ]
        table.add_row(*cells)
    return table


def risk_table(results: list[dict], signal_name: str) -> Table:
    """Per load, D and run, the risk against follow over the days replayed
    (:func:`autoscaler.core.carbon_risk.risk_against_follow`): each case is one day's load, its
    emissions over the trace and the D slots after it, against follow's over the same slots."""
    table = Table(
        title=f"risk against follow (no deferral) on {signal_name}, over the days replayed",
        caption="expected cut: mean of 1 - kg/kg(follow); worst-day regret: max of kg/kg(follow) - 1; days above follow; "
        f"worst 10 %: the mean cut over the worst ceil({WORST_SHARE:.0%} of the days) by cut",
        box=box.SIMPLE_HEAD,
    )
    for header in ("load", "D", "run", "days", "expected cut", "worst-day regret", "days above follow", "worst 10 % cut"):
        table.add_column(header, justify="right", no_wrap=True)
    names = [n for n in ("hold", "hold+carbon", "hold+carbon perfect", ERRED) if all(n in r["kg"] for r in results)]
    keys = sorted({(r["load"], r["deadline_slots"]) for r in results}, key=lambda k: (LOADS.index(k[0]) if k[0] in LOADS else 9, k[1]))
    for load_name, deadline_slots in keys:
        rows = [r for r in results if r["load"] == load_name and r["deadline_slots"] == deadline_slots]
        for name in names:
            risk = risk_against_follow([r["kg"][name] for r in rows], [r["kg"]["follow"] for r in rows])
            table.add_row(
                load_name, f"{deadline_slots * SLOT_S / 3600:g} h", name, str(risk.days), f"{risk.expected_cut:+.1%}", f"{risk.worst_day_regret:+.1%}",
                f"{risk.days_above_follow} ({risk.share_above_follow:.0%})", f"{risk.worst_tenth_cut:+.1%}",
            )  # fmt: skip
        table.add_section()
    return table


def markdown_table(results: list[dict]) -> str:
    """docs/concepts.md's table: per load and D, kept (min / median / max) of hold, hold+carbon and
    hold+carbon with a perfect forecast (and with the drawn forecast, when run), runs above follow,
    and hold+carbon's worst against hold."""
    erred = any(ERRED in r["kg"] for r in results)
    head = "| load | D | hold | hold+carbon | hold+carbon, perfect forecast |"
    rule = "|---|---|---|---|---|"
    if erred:
        error = np.mean([r["forecast_error"] for r in results])
        head += f" hold+carbon, forecast {error:.1%} off |"
        rule += "---|"
    lines = [head + " above follow: hold, hold+carbon | hold+carbon against hold: worst |", rule + "---|---|"]
    keys = sorted({(r["load"], r["deadline_slots"]) for r in results}, key=lambda k: (LOADS.index(k[0]) if k[0] in LOADS else 9, k[1]))
    for load_name, deadline_slots in keys:
        rows = [r for r in results if r["load"] == load_name and r["deadline_slots"] == deadline_slots]
        worst = max(over_hold(rows, "hold+carbon"))
        cells = [f"{deadline_slots * SLOT_S / 3600:g} h", spread(rows, "hold"), spread(rows, "hold+carbon"), spread(rows, "hold+carbon perfect")]
        if erred:
            cells.append(spread(rows, ERRED))
        cells += [f"{above_follow(rows, 'hold')}, {above_follow(rows, 'hold+carbon')} of {len(rows)}", f"{worst:+.1%}".replace("-", "−")]
        lines.append("| " + " | ".join([load_name, *cells]) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--signal", default=str(DEFAULT_SIGNAL), help="a time,value CSV carbon series (default: %(default)s)")
    parser.add_argument("--days", default=",".join(DEFAULT_DAYS), help="start dates, a comma list (default: 12 days 31 apart in 2020)")
    parser.add_argument("--deadlines", default="12,24,72,144", help="deadlines D in 5-minute slots, a comma list (default %(default)s)")
    parser.add_argument("--loads", default=",".join(LOADS), help=f"loads, a comma list of {', '.join(LOADS)} (default: both)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default %(default)s)")
    parser.add_argument("--objective", default="energy", choices=["energy", "paper"], help="eq. (2)'s costs (default %(default)s, as replay)")
    parser.add_argument(
        "--forecast-error", type=float, default=0.0,
        help="also run hold+carbon on a forecast drawn with this mean absolute relative error, e.g. 0.05 (default: none)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="Workload A only, 8 of the days")
    parser.add_argument("--json", help="also write every case's figures to this JSON file")
    parser.add_argument("--from-json", help="print the tables of a JSON file written by --json, without running anything")
    parser.add_argument("--markdown", action="store_true", help="also print docs/concepts.md's Markdown table")
    args = parser.parse_args(argv)
    if not args.from_json and not Path(args.signal).is_file():
        parser.error(
            f"--signal {args.signal}: no such file; give a time,value CSV carbon series in gCO2eq/kWh "
            "(the default is France's 2020 series, fr_ci_2020.csv, in a folder shared/grid beside the repository's)"
        )
    if not (math.isfinite(args.forecast_error) and 0.0 <= args.forecast_error < 1.0):
        parser.error(f"--forecast-error {args.forecast_error}: expected a mean absolute relative error in [0, 1), e.g. 0.05")
    days = args.days.split(",")
    for day in days:
        try:
            datetime.fromisoformat(day)
        except ValueError:
            parser.error(f"--days {args.days}: {day!r} is not a date; expected a comma list of YYYY-MM-DD")
    loads = args.loads.split(",")
    unknown = [name for name in loads if name not in LOADS]
    if unknown:
        parser.error(f"--loads {args.loads}: unknown load {unknown[0]!r}; expected a comma list of {', '.join(LOADS)}")
    if args.workers < 1:
        parser.error(f"--workers {args.workers}: expected a whole number >= 1")
    try:
        deadlines = [int(d) for d in args.deadlines.split(",")]
    except ValueError:
        deadlines = []
    if not deadlines or min(deadlines) < 1:
        parser.error(f"--deadlines {args.deadlines}: expected a comma list of whole numbers of slots >= 1, e.g. 12,24,72,144")
    if args.from_json and not Path(args.from_json).is_file():
        parser.error(f"--from-json {args.from_json}: no such file; give a JSON file written by --json")
    if args.quick:
        loads, days = ["A"], days[:: max(1, len(days) // 8)][:8]
    cases = [(name, day, d, args.signal, seed, args.objective, args.forecast_error) for name in loads for seed, day in enumerate(days) for d in deadlines]
    cases.sort(key=lambda c: -c[2] * (3 if c[0] != "A" else 1))  # longest first
    console = Console(width=max(250, Console().width))
    if args.from_json:
        results = json.loads(Path(args.from_json).read_text())
        console.print(summary_table(results, Path(args.signal).name))
        console.print(risk_table(results, Path(args.signal).name))
        if args.markdown:
            print(markdown_table(results))
        return 0
    console.print(environment_table())
    results = []
    started = time.perf_counter()
    with Progress(console=console, transient=True) as progress, ProcessPoolExecutor(max_workers=args.workers) as pool:
        task = progress.add_task(f"{len(cases)} cases", total=len(cases))
        for future in as_completed([pool.submit(measure, case) for case in cases]):
            results.append(future.result())
            progress.advance(task)
    console.print(summary_table(results, Path(args.signal).name))
    console.print(risk_table(results, Path(args.signal).name))
    console.print(f"{len(cases)} cases in {time.perf_counter() - started:,.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.markdown:
        print(markdown_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
