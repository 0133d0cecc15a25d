"""Write synthetic workloads for benchmarks/bench_policies.py: shapes the Facebook samples do not have.

SWIM traces (.tsv, the six columns ``autoscaler replay`` reads) for job-level loads, and load
curves (.csv, ``slot,released``) for exact levels. Every file is deterministic (fixed seeds).

* ``diurnal-3d.tsv``: three days, arrivals follow a daily cosine from 5 to 40 jobs per slot.
* ``diurnal-5d.tsv``: five days, each day's peak scaled by 0.6-1.2, a midday dip, Poisson noise.
* ``bursty.tsv``: a day of 3 jobs per slot, plus bursts of 30-150 jobs lasting 1-4 slots (one per
  ~20 slots on average).
* ``flat.tsv``: a day of 20 jobs per slot (Poisson).
* ``on-off.tsv``: two days alternating 4 hours busy (40 jobs per slot) and 4 hours idle (1 per slot).
* ``flat-3.csv``: a day of exactly 3.0 servers of load, a load on a node boundary.
* ``alternating-2.9-3.1.csv``: a day alternating 2.9 and 3.1, around a node boundary.
* ``valleys-24.csv``: a day of 30 servers with 24-slot valleys down to 5 every 48 slots: valleys as
  long as the break-even 2*beta/e0 at the paper's costs, where holding and switching off cost the same.

Job lengths: 92 % of jobs take 1-60 s (map only), 8 % take 5 minutes to 6 hours (log-uniform),
given through the shuffle size (the §V-A model makes such a job last about 1.01 s per MB shuffled).

Run: .venv/bin/python benchmarks/make_traces.py OUT_DIR
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from autoscaler.adapters.files import write_all_atomic

SLOT_S = 300.0
DAY_SLOTS = 288
MIB = 1024 * 1024


def _jobs_tsv(arrivals_per_slot: np.ndarray, rng: np.random.Generator) -> str:
    """SWIM lines for Poisson arrivals with the given mean jobs per slot, shape (n_slots,)."""
    counts = rng.poisson(np.maximum(arrivals_per_slot, 0.0))
    lines = []
    previous_s = 0.0
    for slot, count in enumerate(counts):
        for submit_s in np.sort(rng.uniform(slot * SLOT_S, (slot + 1) * SLOT_S, int(count))):
            long_job = rng.random() < 0.08
            if long_job:
                length_s = math.exp(rng.uniform(math.log(300.0), math.log(6 * 3600.0)))
                sizes = (1.0 * MIB, length_s / 1.01 * MIB, 0.0)
            else:
                sizes = (rng.uniform(1.0, 60.0) / 0.81 * MIB, 0.0, 0.0)
            lines.append(
                f"job{len(lines)}\t{submit_s:.0f}\t{submit_s - previous_s:.0f}\t{sizes[0]:.0f}\t{sizes[1]:.0f}\t{sizes[2]:.0f}\n"
            )
            previous_s = submit_s
    return "".join(lines)


def _curve_csv(load: np.ndarray) -> str:
    return "slot,released\n" + "".join(f"{t},{v:g}\n" for t, v in enumerate(load))


def traces() -> dict[str, str]:
    """File name -> content of every synthetic workload."""
    out: dict[str, str] = {}
    t = np.arange(3 * DAY_SLOTS)
    daily = (1 - np.cos(2 * np.pi * t / DAY_SLOTS)) / 2
    out["diurnal-3d.tsv"] = _jobs_tsv(5 + 35 * daily, np.random.default_rng(1))

    rng = np.random.default_rng(2)
    t = np.arange(5 * DAY_SLOTS)
    phase = 2 * np.pi * (t - 40) / DAY_SLOTS
    peak = np.repeat(rng.uniform(0.6, 1.2, 5), DAY_SLOTS)
    shape = np.clip(np.sin(phase), 0, None) ** 1.5 * (1 - 0.35 * np.exp(-(((t % DAY_SLOTS) - 150) / 12.0) ** 2))
    out["diurnal-5d.tsv"] = _jobs_tsv(4 + 45 * peak * shape, rng)

    rng = np.random.default_rng(3)
    rate = np.full(DAY_SLOTS, 3.0)
    for start in np.flatnonzero(rng.random(DAY_SLOTS) < 1 / 20):
        rate[start : start + rng.integers(1, 5)] += rng.uniform(30, 150)
    out["bursty.tsv"] = _jobs_tsv(rate, rng)

    out["flat.tsv"] = _jobs_tsv(np.full(DAY_SLOTS, 20.0), np.random.default_rng(4))
    busy = (np.arange(2 * DAY_SLOTS) // 48) % 2 == 0
    out["on-off.tsv"] = _jobs_tsv(np.where(busy, 40.0, 1.0), np.random.default_rng(5))

    out["flat-3.csv"] = _curve_csv(np.full(DAY_SLOTS, 3.0))
    out["alternating-2.9-3.1.csv"] = _curve_csv(np.where(np.arange(DAY_SLOTS) % 2 == 0, 2.9, 3.1))
    out["valleys-24.csv"] = _curve_csv(np.where((np.arange(DAY_SLOTS) // 24) % 2 == 0, 30.0, 5.0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="folder to write the traces into (created if missing)")
    args = parser.parse_args()
    for path in write_all_atomic({args.out_dir / name: content for name, content in traces().items()}):
        print(path)


if __name__ == "__main__":
    main()
