"""hold on the cluster twin with mixed deadlines: Workload A's jobs, every other one due 30 minutes
after it could finish and the rest 12 hours, through the daemon's slot loop (compare's
policy_on_twin). Prints node-hours, kWh, jobs released late and jobs that finished after their
deadline; asserts nothing. Run it on two commits to set one plan against another.

Run: .venv/bin/python benchmarks/bench_mixed_deadlines.py [--short 30m] [--long 12h]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import time

from autoscaler.app import compose
from autoscaler.app.compare import CompareInputs, policy_on_twin
from autoscaler.app.logs import configure_logging
from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.app.traces import open_trace
from autoscaler.core.compare import twin_figures
from autoscaler.core.intake import parse_duration_s
from autoscaler.core.workload import read_swim, workload_from_trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", default="30m", help="slack of the even jobs (default 30m)")
    parser.add_argument("--long", default="12h", help="slack of the odd jobs (default 12h)")
    args = parser.parse_args()
    configure_logging("json", level=logging.ERROR)
    settings = compose.settings(None, cluster_required=False)
    slot_s = settings.slot_s
    with open_trace("A") as (path, _):
        trace = read_swim(path)
    window = workload_from_trace(trace, slot_s=slot_s).n_slots
    jobs = sorted(trace_jobs(trace, 0, slot_s, window * slot_s), key=lambda j: j.submit_s)
    short_s, long_s = parse_duration_s(args.short), parse_duration_s(args.long)
    mixed = tuple(dataclasses.replace(j, deadline_s=j.deadline_s + (short_s if i % 2 == 0 else long_s)) for i, j in enumerate(jobs))
    inputs = CompareInputs(mixed, window, settings, compose.twin_config(settings), settings.cluster.min_nodes, settings.cluster.max_nodes)
    started = time.perf_counter()
    twin = policy_on_twin(inputs, "hold", settings.deadline_slots)
    figures = twin_figures("hold", twin, 0, slot_s)
    print(
        f"hold, Workload A, slack {args.short} / {args.long} (every other job), D = {settings.deadline_slots} slots: "
        f"{figures.node_hours:,.1f} node-hours, {figures.energy_kwh:,.1f} kWh, {figures.jobs_released_late:,} released late, "
        f"{figures.jobs_finished_after_deadline:,} finished after their deadline, peak {figures.peak_nodes} nodes "
        f"({time.perf_counter() - started:.1f} s)"
    )


if __name__ == "__main__":
    main()
