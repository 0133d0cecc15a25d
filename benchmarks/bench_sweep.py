"""Wall time of `autoscaler sweep` on Workloads A and B (D = 1..12, hold, offline, GCP-U, VFW, GCP classes).

Prints figures; asserts nothing. Run: .venv/bin/python benchmarks/bench_sweep.py [TRACE ...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from autoscaler.cli import load_workload
from autoscaler.model import CostParams, LengthModel
from autoscaler.sweep import sweep

TRACES = [
    Path(__file__).resolve().parents[1] / "../shared/traces/FB-2009_samples_24_times_1hr_0.tsv",
    Path(__file__).resolve().parents[1] / "../shared/traces/FB-2009_samples_24_times_1hr_1.tsv",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path, default=TRACES, help="SWIM traces (default: Workloads A and B)")
    args = parser.parse_args()
    started = time.perf_counter()
    workloads = {}
    for path in args.traces:
        workloads[path.name], _ = load_workload(
            str(path), slot_s=300.0, window_slots=None, skip_bad_lines=False, length_model=LengthModel(), deadline_classes=True
        )
    loaded = time.perf_counter()
    sweep(workloads, list(range(1, 13)), ["hold", "offline", "gcp-u", "vfw"], CostParams(), 12)
    done = time.perf_counter()
    print(f"traces: {len(workloads)}; read + k-means: {loaded - started:.2f} s; sweep: {done - loaded:.2f} s; total: {done - started:.2f} s")


if __name__ == "__main__":
    main()
