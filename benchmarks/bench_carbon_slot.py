"""What a carbon-aware daemon slot costs with an archive of forecasts as issued, printed as a table.

The ``[carbon]`` feed reads its source and forecast every ``refresh_s``. This runs the daemon's slot
loop (SQLite store on disk, the in-memory cluster, a simulated clock; Workload A's first jobs
submitted as they arrive, hold at D slots) with ``[carbon] source`` a half-hourly signal and
``forecast`` an archive CSV (``issued,time,value``) built from it: an issue every 30 minutes, each a
day ahead in half hours (48 points), so a year is about 0.9 million lines. Before the slot
``--change-at`` the archive is rewritten (a provider's new issue appended); the read that follows
runs off the slot, and the loop waits for it before the next slot (a real slot is 300 s later).

Printed: each slot's wall time (ms) and what the feed did in it (read the source again, found the
files unchanged, or started a background read), and the background read's own time. Figures only;
nothing is asserted. Usage::

    python benchmarks/bench_carbon_slot.py [--signal CSV] [--slots 12] [--deadline-slots 144] [--change-at 6]

``--signal``: any signal the daemon's ``[carbon] source`` reads, in gCO2eq/kWh (a CSV ``time,value``,
half-hourly, such as the French grid's 2020 series ``Time,Carbon Intensity``); default: a synthetic
year (a daily cosine with noise). ``--change-at`` is a slot in 0..slots-1; the feed reads again every
2 slots (``refresh_s`` 600 s), so the read of the change shows at the first even slot after it, if
there is one.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import random
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import structlog
from rich.console import Console
from rich.table import Table

from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
from autoscaler.adapters.health import Telemetry
from autoscaler.adapters.signal_source import load_signal
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app import compose
from autoscaler.app.config import Settings
from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.app.traces import open_trace
from autoscaler.core.energy.signal import Signal, utc_text
from autoscaler.core.errors import AutoscalerError
from autoscaler.core.workload import read_swim

SLOT_S = 300.0
HALF_HOUR = timedelta(minutes=30)


def synthetic_year(path: Path) -> None:
    """A year of half-hour values from 2020-01-01: 300 +- 150 g over the day, 5 % noise."""
    rng = random.Random(1)
    start = datetime(2020, 1, 1)
    with path.open("w") as out:
        out.write("time,value\n")
        for i in range(366 * 48):
            moment = start + i * HALF_HOUR
            hour = moment.hour + moment.minute / 60
            out.write(f"{moment:%Y-%m-%dT%H:%M:%S},{(300 - 150 * math.cos(2 * math.pi * hour / 24)) * (1 + rng.gauss(0, 0.05)):.2f}\n")


def write_archive(signal: Signal, path: Path, issues: int | None = None, seed: int = 2) -> int:
    """Issues at every point of ``signal`` (the first ``issues``), each the next 48 values with an
    error that grows with the lead, times in UTC; returns the lines written."""
    rng = random.Random(seed)
    times = [utc_text(t) for t in signal.times_s]
    count = len(times) - 48 if issues is None else min(issues, len(times) - 48)
    lines = 0
    with path.open("w") as out:
        out.write("issued,time,value\n")
        for i in range(count):
            for lead in range(1, 49):
                out.write(f"{times[i]},{times[i + lead]},{signal.values[i + lead] * (1 + rng.gauss(0, 0.03 * math.sqrt(lead))):.2f}\n")
                lines += 1
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--signal", type=Path, default=None, metavar="CSV", help="a half-hourly signal CSV time,value in gCO2eq/kWh (default: a synthetic year)")
    parser.add_argument("--slots", type=int, default=12, metavar="N", help="slots run (default %(default)s)")
    parser.add_argument("--deadline-slots", type=int, default=144, metavar="D", help="hold+carbon's D in slots of 300 s (default %(default)s: 12 h)")
    parser.add_argument("--change-at", type=int, default=6, metavar="K", help="the archive is rewritten before slot K (default %(default)s)")
    args = parser.parse_args(argv)
    if args.slots < 1 or args.deadline_slots < 1:
        parser.error("--slots and --deadline-slots: expected whole numbers >= 1")
    if not 0 <= args.change_at < args.slots:
        parser.error(f"--change-at {args.change_at}: expected a slot in 0..{args.slots - 1} (--slots {args.slots})")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    console = Console()
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        signal_path = args.signal or folder / "signal.csv"
        if args.signal is None:
            synthetic_year(signal_path)
        try:
            signal = load_signal(str(signal_path), unit="gCO2eq/kWh", unit_name="the unit (gCO2eq/kWh)")
        except AutoscalerError as error:
            parser.error(f"--signal {signal_path}: {error}; give a CSV time,value in gCO2eq/kWh")
        if signal.times_s.size < 3 * 48:
            parser.error(f"--signal {signal_path}: {signal.times_s.size} points; expected at least three days of half hours")
        archive = folder / "issued.csv"
        lines = write_archive(signal, archive, issues=signal.times_s.size - 48 - 1)
        t0_s = math.floor(float(signal.times_s[signal.times_s.size // 2]) / SLOT_S) * SLOT_S
        signal_file = str(signal_path)
        settings = Settings(
            cluster={"id": "j-BENCH", "max_nodes": 100},
            store_path=folder / "jobs.db",
            policy="hold",
            deadline_slots=args.deadline_slots,
            slot_s=SLOT_S,
            carbon={"source": signal_file, "unit": "gCO2eq/kWh", "forecast": str(archive), "refresh_s": 2 * SLOT_S},
        )
        with open_trace(None) as (path, _):
            trace = read_swim(path)
        jobs = trace_jobs(trace, args.deadline_slots, SLOT_S, args.slots * SLOT_S)
        jobs = sorted((dataclasses.replace(j, submit_s=j.submit_s + t0_s, deadline_s=j.deadline_s + t0_s) for j in jobs), key=lambda j: j.submit_s)
        clock = SimulatedClock(t0_s)
        table = Table(title=f"a carbon-aware slot, forecast archive of {lines:,} lines ({archive.stat().st_size / 1e6:.1f} MB), D = {args.deadline_slots} slots")
        for column in ("slot", "ms", "the feed"):
            table.add_column(column, justify="right" if column != "the feed" else "left")
        started = time.perf_counter()
        with SqliteJobStore(settings.store_path) as users, compose.daemon_runner(settings, dry_run=False, clock=clock, telemetry=Telemetry(SLOT_S, clock=clock.now_s), cluster=FakeCluster(clock)) as runner:
            console.print(f"start-up (the first read of both files): {time.perf_counter() - started:.2f} s")
            feed = runner.carbon_feed
            submitted = 0
            for slot in range(args.slots):
                clock.time_s = t0_s + slot * SLOT_S
                first = submitted
                while submitted < len(jobs) and jobs[submitted].submit_s < clock.time_s + SLOT_S:
                    submitted += 1
                users.submit_many(jobs[first:submitted])
                if slot == args.change_at:
                    write_archive(signal, archive)  # one issue more: the file changed
                read_before, parsed_before = feed.last_read_s, feed.parsed["forecast"]
                began = time.perf_counter()
                runner.run_slot()
                took_ms = (time.perf_counter() - began) * 1000
                if feed.reading:
                    waited = time.perf_counter()
                    feed.join()
                    what = f"the changed archive read in the background: {time.perf_counter() - waited + took_ms / 1000:.2f} s"
                elif feed.parsed["forecast"] != parsed_before:
                    what = "the changed archive read in the slot"
                else:
                    what = "read again (unchanged: not parsed)" if feed.last_read_s != read_before else ""
                table.add_row(str(slot), f"{took_ms:,.0f}", what)
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
