"""``autoscaler serve`` under load: N AddJobFlowSteps calls at once from the real boto3 client, each
signed (SigV4) and each one step, against ``autoscaler serve`` started as an operator starts it (its
own process, a store on disk). Printed: how many calls answered, how many steps were stored, lost
(an id answered but not stored) and duplicated (one id answered twice, or a step stored twice), and
the latency percentiles (s). Figures only; nothing is asserted. Usage::

    python benchmarks/bench_serve_load.py [--calls 1000] [--steps-per-call 1]

The calls are released together by a barrier from ``--calls`` threads over one client whose
connection pool holds them all; botocore's standard retries are on, as a pipeline has them.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
from botocore.config import Config
from rich.console import Console
from rich.table import Table

KEY, SECRET = "AKIALOADTESTCALLER01", "load-test-secret-0123456789"
CLUSTER = "j-LOADTEST0001"


def start_serve(folder: Path) -> tuple[subprocess.Popen, str]:
    """``autoscaler serve`` on a free port of 127.0.0.1, with one caller; its process and URL."""
    (folder / "caller.secret").write_text(SECRET)
    config = folder / "serve.toml"
    config.write_text(
        f'store_path = "{folder / "jobs.db"}"\n[cluster]\nid = "{CLUSTER}"\nregion = "us-east-1"\nendpoint_url = "http://127.0.0.1:9"\n'
        f'[serve]\nport = 0\n[[serve.callers]]\naccess_key_id = "{KEY}"\nsecret_file = "{folder / "caller.secret"}"\n'
        'tenants = ["load"]\nlength_s = 300\n'
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "autoscaler", "serve", "--config", str(config)], stderr=subprocess.PIPE, text=True, cwd=folder
    )
    for line in process.stderr:
        found = re.search(r"on (https?://\S+)", line)
        if found:
            threading.Thread(target=process.stderr.read, daemon=True).start()  # keep draining its log
            return process, found.group(1)
    raise SystemExit(f"autoscaler serve ended before it listened (exit {process.wait()})")


def load(url: str, calls: int, steps_per_call: int) -> tuple[list[list[str]], list[float], list[str]]:
    """``calls`` AddJobFlowSteps at once; the ids each answered, each call's latency (s), the errors."""
    client = boto3.client(
        "emr", endpoint_url=url, region_name="us-east-1", aws_access_key_id=KEY, aws_secret_access_key=SECRET,
        config=Config(max_pool_connections=calls, retries={"mode": "standard", "max_attempts": 5}, read_timeout=120),
    )  # fmt: skip
    barrier = threading.Barrier(calls)
    steps = [
        {"Name": f"load-{i}", "ActionOnFailure": "CONTINUE", "HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["true"]}}
        for i in range(steps_per_call)
    ]

    def one(_: int):
        barrier.wait()
        started = time.perf_counter()
        try:
            ids = client.add_job_flow_steps(JobFlowId=CLUSTER, Steps=steps)["StepIds"]
            return ids, time.perf_counter() - started, None
        except Exception as error:  # counted and shown: a lost call is what this measures
            return None, time.perf_counter() - started, f"{type(error).__name__}: {error}"

    with ThreadPoolExecutor(max_workers=calls) as pool:
        results = list(pool.map(one, range(calls)))
    return [r[0] for r in results if r[0] is not None], [r[1] for r in results], [r[2] for r in results if r[2] is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="AddJobFlowSteps calls sent at once")
    parser.add_argument("--steps-per-call", type=int, default=1, help="steps in each call")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        process, url = start_serve(Path(folder))
        try:
            started = time.perf_counter()
            answered, latencies, errors = load(url, args.calls, args.steps_per_call)
            wall = time.perf_counter() - started
        finally:
            process.terminate()
            process.wait(timeout=60)
        with sqlite3.connect(Path(folder) / "jobs.db") as db:
            stored = Counter(row[0] for row in db.execute("SELECT job_id FROM jobs"))
    ids = Counter(i for call in answered for i in call)
    table = Table(title=f"autoscaler serve: {args.calls:,} AddJobFlowSteps calls at once, {args.steps_per_call} step(s) each")
    for column in ("calls answered", "errors", "steps stored", "lost", "duplicated", "p50 s", "p90 s", "p99 s", "max s", "wall s"):
        table.add_column(column, justify="right")
    ordered = sorted(latencies)
    lost = sum(1 for i in ids if i not in stored)
    duplicated = sum(n - 1 for n in ids.values() if n > 1) + sum(n - 1 for n in stored.values() if n > 1)
    table.add_row(
        f"{len(answered):,}", f"{len(errors):,}", f"{sum(stored.values()):,}", f"{lost:,}", f"{duplicated:,}",
        f"{statistics.median(ordered):.2f}", f"{ordered[int(0.9 * (len(ordered) - 1))]:.2f}",
        f"{ordered[int(0.99 * (len(ordered) - 1))]:.2f}", f"{ordered[-1]:.2f}", f"{wall:.1f}",
    )  # fmt: skip
    Console(width=160).print(table)
    for error in errors[:5]:
        print("error:", error)


if __name__ == "__main__":
    main()
