"""Write synthetic workloads for benchmarks/bench_policies.py: shapes the Facebook samples do not have.

SWIM traces (.tsv, the six columns ``autoscaler replay`` reads) for job-level loads, and load
curves (.csv, ``slot,released``) for exact levels. Every file is deterministic (fixed seeds).

First set (``traces``): diurnal-3d was used while hold's rule was developed; the others were first
run once with an earlier version of the rule, which changed after (see policies/hold.py).

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

Fresh set, written after hold's rule was fixed and never used to choose it (``fresh_traces``):

* ``weekly-7d.tsv``: a week, weekdays' daily peak 45 jobs per slot, the weekend's 15.
* ``diurnal-bursty-2d.tsv``: two days of a daily cycle with bursts of 20-80 jobs on top.
* ``long-jobs.tsv``: a day of 10 jobs per slot of which 30 % run 5 minutes to 6 hours.
* ``random-walk.csv``: a day of a load wandering around 30 servers (steps of sd 2, pulled back).
* ``sawtooth.csv``: a day of ramps from 5 to 60 servers over 36 slots, then a drop.
* ``square-12.csv``: 30 servers with 12-slot valleys at 5 every 24 slots (shorter than 2*beta/e0).
* ``noisy-boundary.csv``: a day of 3 servers plus noise of sd 0.05 (a node boundary).

Job lengths: 92 % of jobs take 1-60 s (map only), 8 % take 5 minutes to 6 hours (log-uniform),
given through the shuffle size (the §V-A model makes such a job last about 1.01 s per MB shuffled).

Run: .venv/bin/python benchmarks/make_traces.py OUT_DIR [--set first|fresh|all]
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


def _jobs_tsv(arrivals_per_slot: np.ndarray, rng: np.random.Generator, long_share: float = 0.08) -> str:
    """SWIM lines for Poisson arrivals with the given mean jobs per slot, shape (n_slots,);
    ``long_share`` of the jobs run 5 minutes to 6 hours."""
    counts = rng.poisson(np.maximum(arrivals_per_slot, 0.0))
    lines = []
    previous_s = 0.0
    for slot, count in enumerate(counts):
        for submit_s in np.sort(rng.uniform(slot * SLOT_S, (slot + 1) * SLOT_S, int(count))):
            long_job = rng.random() < long_share
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


def fresh_traces() -> dict[str, str]:
    """File name -> content of the workloads made after hold's rule was fixed."""
    out: dict[str, str] = {}
    rng = np.random.default_rng(21)
    t = np.arange(7 * DAY_SLOTS)
    peak = np.where((t // DAY_SLOTS) % 7 < 5, 45.0, 15.0)
    out["weekly-7d.tsv"] = _jobs_tsv(2 + peak * (1 - np.cos(2 * np.pi * t / DAY_SLOTS)) / 2, rng)

    rng = np.random.default_rng(22)
    t = np.arange(2 * DAY_SLOTS)
    rate = 4 + 30 * (1 - np.cos(2 * np.pi * (t - 30) / DAY_SLOTS)) / 2
    for start in np.flatnonzero(rng.random(t.shape[0]) < 1 / 15):
        rate[start : start + rng.integers(1, 4)] += rng.uniform(20, 80)
    out["diurnal-bursty-2d.tsv"] = _jobs_tsv(rate, rng)

    out["long-jobs.tsv"] = _jobs_tsv(np.full(DAY_SLOTS, 10.0), np.random.default_rng(23), long_share=0.3)

    rng = np.random.default_rng(24)
    walk = np.empty(DAY_SLOTS)
    level = 30.0
    for i in range(DAY_SLOTS):
        level = max(0.0, level + rng.normal(0.0, 2.0) + 0.05 * (30.0 - level))
        walk[i] = level
    out["random-walk.csv"] = _curve_csv(np.round(walk, 3))
    out["sawtooth.csv"] = _curve_csv(5 + 55 * (np.arange(DAY_SLOTS) % 36) / 35)
    out["square-12.csv"] = _curve_csv(np.where((np.arange(DAY_SLOTS) // 12) % 2 == 0, 30.0, 5.0))
    out["noisy-boundary.csv"] = _curve_csv(np.round(np.maximum(0.0, 3.0 + np.random.default_rng(25).normal(0.0, 0.05, DAY_SLOTS)), 4))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="folder to write the traces into (created if missing)")
    parser.add_argument("--set", choices=["first", "fresh", "all"], default="all", help="which traces to write")
    args = parser.parse_args()
    chosen = {"first": traces(), "fresh": fresh_traces(), "all": {**traces(), **fresh_traces()}}[args.set]
    for path in write_all_atomic({args.out_dir / name: content for name, content in chosen.items()}):
        print(path)


if __name__ == "__main__":
    main()
