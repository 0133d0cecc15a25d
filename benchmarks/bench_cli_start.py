"""How long the command line takes to answer, printed as a table: each command run as an operator
runs it (a new process), ``--runs`` times, in a temporary folder with a store of its own.

Printed per command: the median and the fastest wall time (s), and the modules of scipy, cvxpy and
matplotlib it loaded (none for ``--help``, ``submit`` and ``jobs``: they are imported where a plan is
made). Figures only; nothing is asserted. Usage::

    python benchmarks/bench_cli_start.py [--runs 5] [--replay]

``--replay`` adds ``run --replay default`` (Workload A through the daemon's slot loop on the cluster
twin, several seconds a run).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HEAVY = ("scipy", "cvxpy", "matplotlib")
PROBE = "import runpy, sys; sys.argv = ['autoscaler', *sys.argv[1:]]\ntry:\n    runpy.run_module('autoscaler', run_name='__main__')\nexcept SystemExit:\n    pass\nsys.stderr.write('\\nLOADED ' + ' '.join(sorted({m.split('.')[0] for m in sys.modules} & set(%r))) + '\\n')\n" % (HEAVY,)


def timed(argv: list[str], folder: Path) -> tuple[float, str]:
    """Wall seconds of one run of ``autoscaler argv`` in ``folder``, and the heavy libraries it loaded."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=folder, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"autoscaler {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    loaded = next((line[len("LOADED ") :] for line in reversed(done.stderr.splitlines()) if line.startswith("LOADED ")), "")
    return elapsed, loaded or "none"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (at least 1)")
    parser.add_argument("--replay", action="store_true", help="also time `run --replay default` (seconds a run)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs: expected at least 1, got {args.runs}")
    console = Console()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        store = str(folder / "jobs.db")
        commands = {
            "--help": ["--help"],
            "submit": ["submit", "--store", store, "--name", "etl", "--tenant", "ads", "--deadline", "2h", "--length-s", "600", "--command", "true"],
            "jobs": ["jobs", "--store", store],
            "replay --help": ["replay", "--help"],
        }
        if args.replay:
            commands["run --replay default"] = ["run", "--replay", "default"]
        table = Table(title=f"autoscaler's answer time, {args.runs} runs each (s)")
        for column in ("command", "median", "fastest", "scipy / cvxpy / matplotlib loaded"):
            table.add_column(column, justify="left" if column == "command" else "right")
        for label, argv in commands.items():
            runs = [timed(argv, folder) for _ in range(args.runs)]
            times = [elapsed for elapsed, _ in runs]
            table.add_row(label, f"{statistics.median(times):.2f}", f"{min(times):.2f}", runs[-1][1])
            console.print(f"{label}: done", style="dim")
        console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
