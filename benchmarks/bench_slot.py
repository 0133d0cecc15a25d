"""What one whole daemon slot costs as the queue and the history grow, beside ``tick`` alone, printed.

For each queue size (100, 10,000 and 100,000 queued jobs by default), a store on disk is built with
that many queued jobs (deadlines spread over the next 4 h) and ``--finished`` finished ones
(1,000,000 by default, released over the last 60 days), then the daemon's SlotRunner runs slots on
it against the in-memory cluster: observe (the new jobs, the steps), tick, act, record (one
commit, with the 30-day retention). Each slot ``--arrivals`` new jobs are submitted first (not
timed: the CLI's write). Printed per size: the first slot after a start (it reads every active
job), then the median and p95 of the next ``--slots`` slots, and of ``tick`` alone on the same
queue and state.

Then ``autoscaler run --replay default`` (the daemon loop on Workload A) beside
``autoscaler replay --trace default --policy gcp-u``, wall time of the whole command, median of
``--repeat`` runs.

Figures only; nothing is asserted. Usage::

    python benchmarks/bench_slot.py [--queued 100,10000,100000] [--finished 1000000] [--slots 40] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import NOW_S, SLOT_S, build  # noqa: E402

from autoscaler.adapters.fakes import FakeCluster, SimulatedClock  # noqa: E402
from autoscaler.adapters.sqlite_store import SqliteJobStore  # noqa: E402
from autoscaler.app.daemon import SlotRunner  # noqa: E402
from autoscaler.core.controller import ControllerConfig, tick  # noqa: E402
from autoscaler.core.model import Job, StepSpec  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(queued: int, finished: int, slots: int, arrivals: int, folder: Path) -> dict:
    path = folder / f"slot-{queued}.db"
    build_s = build(path, queued, finished)
    clock = SimulatedClock(NOW_S)
    config = ControllerConfig(policy="hold", deadline_slots=2, slot_s=SLOT_S, max_nodes=100)
    with SqliteJobStore(path) as store:
        runner = SlotRunner(config=config, store=store, cluster=FakeCluster(clock), clock=clock)
        started = time.perf_counter()
        runner.run_slot()
        first_ms = (time.perf_counter() - started) * 1000
        slot_ms, tick_ms = [], []
        for k in range(1, slots + 1):
            clock.time_s = NOW_S + k * SLOT_S
            store.submit_many(
                Job(f"new-{k}-{i}", "etl", f"tenant-{i % 4}", clock.time_s, clock.time_s + 3 * 3600.0, 600.0, StepSpec(args=("true",)))
                for i in range(arrivals)
            )
            started = time.perf_counter()
            decision = runner.run_slot()
            slot_ms.append((time.perf_counter() - started) * 1000)
            # tick alone, on the queue and state the slot left, for the next slot
            state = runner._state
            started = time.perf_counter()
            tick(clock.time_s + SLOT_S, runner.queue, state, config)
            tick_ms.append((time.perf_counter() - started) * 1000)
        assert decision is not None
        queue = runner.queue
        return {
            "queued": queued,
            "finished": finished,
            "build_s": build_s,
            "first_ms": first_ms,
            "slot_median_ms": statistics.median(slot_ms),
            "slot_p95_ms": percentile(slot_ms, 0.95),
            "tick_median_ms": statistics.median(tick_ms),
            "tick_p95_ms": percentile(tick_ms, 0.95),
            "queued_after": queue.queued_count,
            "overloaded": decision.overloaded,
        }


def command_s(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ | {"COLUMNS": "120"})
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queued", default="100,10000,100000", help="queue sizes, a comma list")
    parser.add_argument("--finished", type=int, default=1_000_000, help="finished jobs in the store")
    parser.add_argument("--slots", type=int, default=40, help="slots timed per size")
    parser.add_argument("--arrivals", type=int, default=20, help="jobs submitted before each slot")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command for the replay comparison")
    parser.add_argument("--quick", action="store_true", help="100,000 finished, 10 slots, 1 run per command")
    args = parser.parse_args(argv)
    import logging

    from autoscaler.app.logs import configure_logging

    configure_logging("json", level=logging.ERROR)  # the slots' log lines would drown the table (overload warns every slot)
    if args.quick:
        args.finished, args.slots, args.repeat = 100_000, 10, 1
    console = Console(width=150)
    table = Table(title=f"one daemon slot (hold, D = 2, max nodes 100, SQLite on disk, in-memory cluster), {args.finished:,} finished jobs in the store")
    for column in ("queued", "first slot ms", "slot median ms", "slot p95 ms", "tick median ms", "tick p95 ms", "overloaded", "store built in s"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory(prefix="bench-slot-") as folder:
        for queued in (int(n) for n in args.queued.split(",")):
            with console.status(f"{queued:,} queued: building the store and running {args.slots} slots"):
                r = measure(queued, args.finished, args.slots, args.arrivals, Path(folder))
            table.add_row(
                f"{queued:,}", f"{r['first_ms']:,.0f}", f"{r['slot_median_ms']:.1f}", f"{r['slot_p95_ms']:.1f}",
                f"{r['tick_median_ms']:.2f}", f"{r['tick_p95_ms']:.2f}", "yes" if r["overloaded"] else "no", f"{r['build_s']:.1f}",
            )  # fmt: skip
            os.remove(Path(folder) / f"slot-{queued}.db")
    console.print(table)
    exe = str(Path(sys.executable).with_name("autoscaler"))
    with console.status("timing run --replay default and replay --policy gcp-u"):
        daemon_s = command_s([exe, "run", "--replay", "default"], args.repeat)
        replay_s = command_s([exe, "replay", "--trace", "default", "--policy", "gcp-u"], args.repeat)
    console.print(
        f"run --replay default: {daemon_s:.2f} s; replay --trace default --policy gcp-u: {replay_s:.2f} s; "
        f"ratio {daemon_s / replay_s:.1f}x (median of {args.repeat}, whole commands)"
    )
    console.print(f"machine: {os.cpu_count()} cores, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
