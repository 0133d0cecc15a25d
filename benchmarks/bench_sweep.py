"""Wall time of `autoscaler sweep` on Workloads A and B (D = 1..12, hold, offline, GCP-U, VFW, GCP classes).

Prints figures; asserts nothing. Run: .venv/bin/python benchmarks/bench_sweep.py [TRACE ...]
"""

from __future__ import annotations

import argparse
import time

from autoscaler.app.cli import load_workload
from autoscaler.app.traces import label as trace_label
from autoscaler.core.model import CostParams, LengthModel
from autoscaler.core.sweep import sweep

TRACES = ["A", "B"]
"""The shipped Workloads A and B, by name (autoscaler.app.traces)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", default=TRACES, help="SWIM traces: A, B or paths (default: A and B)")
    args = parser.parse_args()
    started = time.perf_counter()
    workloads = {}
    for trace in args.traces:
        workloads[trace_label(trace)], _ = load_workload(
            trace, slot_s=300.0, window_slots=None, skip_bad_lines=False, length_model=LengthModel(), deadline_classes=True
        )
    loaded = time.perf_counter()
    sweep(workloads, list(range(1, 13)), ["hold", "offline", "gcp-u", "vfw"], CostParams(), 12)
    done = time.perf_counter()
    print(f"traces: {len(workloads)}; read + k-means: {loaded - started:.2f} s; sweep: {done - loaded:.2f} s; total: {done - started:.2f} s")


if __name__ == "__main__":
    main()
