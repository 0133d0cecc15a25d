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

Unseen set (``unseen_traces``, seeds 31-36), written after hold's rule and every default were fixed
and never used to tune anything: the headline figures (benchmarks/bench_spread.py's spread) come
from these. Shapes an operator lives with, SWIM traces only. The lengths are the ones
above unless said, each set exactly through the §V-A model (``estimate_length_s``); "nodes" is the
node-seconds of the jobs submitted or running in a slot over 300 s, one node per job.

* ``week-weekends-7d.tsv``: Monday to Sunday, about 90,000 jobs; weekdays follow a daily cosine from
  a fifth of the 15:00 peak at 03:00 (about 90 jobs per slot at the peak), Saturday and Sunday the
  same at 40 %. Also the input of bench_spread.py's measure of compare's time.
* ``multi-day-drift-4d.tsv``: four days; 07:00-21:00 a daytime hump peaking at 14:00 at 40 jobs
  per slot on day 1, the whole daytime 10 % higher each day (x1.1, 1.21, 1.331); 1 job per slot at
  night, and a batch window 01:00-04:00 of 6 jobs per slot lasting 15-90 minutes (log-uniform).
* ``saturating-2d.tsv``: two days of a daily cosine of 3-23 jobs per slot (about 35 nodes at its
  peak), and each day 10:00-14:00 a surge of jobs lasting 1-20 minutes (uniform) that needs 290
  nodes more on its 3-hour plateau (ramps of 30 minutes each side): over 3x the default
  --max-nodes of 100 for about 3 hours a day.
* ``bursty-heavy-1d.tsv``: a day of 2 jobs per slot, and 5 bursts (starts at least 2 hours apart)
  of 2,000-6,000 jobs of 1-60 s each, submitted within 2-10 minutes.
* ``flat-boundary-1d.tsv``: a day of 24 jobs per slot lasting 60-240 s, each slot's lengths scaled
  to sum to 12 nodes x 300 s x (1 + e), e ~ N(0, 0.01): a load sitting on the 12-node boundary.
* ``wide-jobs-1d.tsv``: a day of 4 jobs per slot and 0.2-1.8 (daily cosine) wide jobs per
  slot: 9-96 map blocks of 128 MiB (uniform), so ``--containers-per-node 8`` runs each on 2-12
  nodes, lasting 5-60 minutes (log-uniform). Run it with that flag (``UNSEEN_COMPARE_FLAGS``).

The one- to four-day files are committed in benchmarks/traces/unseen/; the week (about 3 MB) is
written there on demand (by this script or by bench_spread.py) and checked against
``UNSEEN_WEEK_SHA256``, so every machine runs the same jobs.

Run: .venv/bin/python benchmarks/make_traces.py OUT_DIR [--set first|fresh|unseen|all]
"""

from __future__ import annotations

import argparse
import hashlib
import math
from pathlib import Path

import numpy as np

from autoscaler.adapters.files import write_all_atomic
from autoscaler.core.model import LengthModel
from autoscaler.core.workload import estimate_length_s

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


UNSEEN_DIR = Path(__file__).resolve().parent / "traces" / "unseen"
"""Where the unseen set is kept (the week is written there on demand, not committed)."""

UNSEEN_WEEK = "week-weekends-7d.tsv"
UNSEEN_WEEK_SHA256 = "bacacee2a947115955b64635eabaf7a282a4e54994b84b849a3bb892276afda0"
"""sha256 of the week's text as ``unseen_traces`` writes it: a numpy whose draws differ is caught."""

UNSEEN_COMPARE_FLAGS = {"wide-jobs-1d.tsv": ("--containers-per-node", "8")}
"""compare flags a trace of the unseen set is run with: the shape it claims needs them."""



def _swim_text(submit_s: np.ndarray, map_bytes: np.ndarray, shuffle_bytes: np.ndarray) -> str:
    """SWIM lines of jobs given as arrays of shape (n_jobs,), written in submit order as job0, job1, ...;
    submit times cut to the second (so a job stays in its slot), sizes to the byte, no reduce output."""
    order = np.argsort(submit_s, kind="stable")
    submit = np.floor(submit_s[order]).astype(np.int64)
    gaps = np.diff(submit, prepend=0)
    sizes = np.round(np.stack([map_bytes[order], shuffle_bytes[order]], axis=1)).astype(np.int64)
    return "".join(
        f"job{i}\t{t}\t{g}\t{m}\t{s}\t0\n" for i, (t, g, (m, s)) in enumerate(zip(submit.tolist(), gaps.tolist(), sizes.tolist()))
    )


def _sizes_for(length_s: np.ndarray, map_bytes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(map input bytes, shuffle bytes) of jobs that last ``length_s`` under the §V-A model, shape (n_jobs,).

    Without ``map_bytes``: a job of at most 60 s is map only (0.81 s per MiB read), a longer one
    reads 1 MiB and shuffles what makes up its length. With ``map_bytes``, the shuffle is found by
    bisection of ``estimate_length_s`` (it rises with the shuffle); a length below the map's own
    time keeps no shuffle, so such a job lasts its map time."""
    length_s = np.asarray(length_s, dtype=float)
    if map_bytes is None:
        short = length_s <= 60.0
        map_bytes = np.where(short, length_s / 0.81 * MIB, 1.0 * MIB)
        low = np.where(short, 0.0, 1.0 * MIB)
        high = np.where(short, 0.0, length_s * MIB)
    else:
        low, high = np.zeros_like(length_s), length_s * MIB
    for _ in range(60):
        middle = (low + high) / 2
        longer = estimate_length_s(map_bytes, middle, 0.0) > length_s
        high, low = np.where(longer, middle, high), np.where(longer, low, middle)
    return map_bytes, low


def _arrivals(rate_per_slot: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Submit times in s of Poisson arrivals with the given mean jobs per slot, shape (n_slots,), uniform in each slot."""
    counts = rng.poisson(np.maximum(rate_per_slot, 0.0))
    slots = np.repeat(np.arange(len(counts)), counts)
    return (slots + rng.random(slots.size)) * SLOT_S


def _usual_lengths(n: int, rng: np.random.Generator) -> np.ndarray:
    """The set's usual lengths, shape (n,): 92 % 1-60 s, 8 % 5 minutes to 6 hours (log-uniform)."""
    long_job = rng.random(n) < 0.08
    return np.where(long_job, _log_uniform(300.0, 6 * 3600.0, n, rng), rng.uniform(1.0, 60.0, n))


def _log_uniform(low: float, high: float, n: int, rng: np.random.Generator) -> np.ndarray:
    return np.exp(rng.uniform(math.log(low), math.log(high), n))


def _usual_jobs(rate_per_slot: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(submit s, length s) of Poisson arrivals at ``rate_per_slot`` with the usual lengths."""
    submit_s = _arrivals(rate_per_slot, rng)
    return submit_s, _usual_lengths(submit_s.size, rng)


def _jobs_of(*parts: tuple[np.ndarray, np.ndarray]) -> str:
    """SWIM text of (submit s, length s) parts together."""
    submit_s = np.concatenate([part[0] for part in parts])
    map_bytes, shuffle_bytes = _sizes_for(np.concatenate([part[1] for part in parts]))
    return _swim_text(submit_s, map_bytes, shuffle_bytes)


def _hour(t: np.ndarray) -> np.ndarray:
    """Hour of the day of slot t, 0 <= h < 24."""
    return (t % DAY_SLOTS) * 24.0 / DAY_SLOTS


def unseen_traces() -> dict[str, str]:
    """File name -> content of the unseen set (see the module's docstring)."""
    out: dict[str, str] = {}

    rng = np.random.default_rng(31)
    t = np.arange(7 * DAY_SLOTS)
    shape = (0.6 - 0.4 * np.cos(2 * np.pi * (_hour(t) - 3.0) / 24.0)) * np.where(t // DAY_SLOTS >= 5, 0.4, 1.0)
    out[UNSEEN_WEEK] = _jobs_of(_usual_jobs(90_000 * shape / shape.sum(), rng))

    rng = np.random.default_rng(32)
    t = np.arange(4 * DAY_SLOTS)
    hump = np.clip(np.sin(np.pi * (_hour(t) - 7.0) / 14.0), 0.0, None) ** 1.5 * (_hour(t) >= 7.0)
    daytime = 40.0 * hump * 1.1 ** (t // DAY_SLOTS)
    batch_window = (_hour(t) >= 1.0) & (_hour(t) < 4.0)
    batch_s = _arrivals(np.where(batch_window, 6.0, 0.0), rng)
    out["multi-day-drift-4d.tsv"] = _jobs_of(
        _usual_jobs(np.maximum(daytime, 1.0), rng), (batch_s, _log_uniform(15 * 60.0, 90 * 60.0, batch_s.size, rng))
    )

    rng = np.random.default_rng(33)
    t = np.arange(2 * DAY_SLOTS)
    base = 3.0 + 20.0 * (1 - np.cos(2 * np.pi * (_hour(t) - 3.0) / 24.0)) / 2
    plateau = np.clip(np.minimum(_hour(t) - 10.0, 14.0 - _hour(t)) / 0.5, 0.0, 1.0)
    surge_mean_s = (60.0 + 20 * 60.0) / 2
    surge_s = _arrivals(290.0 * SLOT_S / surge_mean_s * plateau, rng)
    out["saturating-2d.tsv"] = _jobs_of(_usual_jobs(base, rng), (surge_s, rng.uniform(60.0, 20 * 60.0, surge_s.size)))

    rng = np.random.default_rng(34)
    starts_s: list[float] = []
    while len(starts_s) < 5:
        start_s = float(rng.uniform(0.0, DAY_SLOTS * SLOT_S - 600.0))
        if all(abs(start_s - other) >= 2 * 3600.0 for other in starts_s):
            starts_s.append(start_s)
    bursts = [start_s + rng.uniform(0.0, rng.uniform(120.0, 600.0), int(rng.integers(2000, 6001))) for start_s in starts_s]
    burst_s = np.concatenate(bursts)
    out["bursty-heavy-1d.tsv"] = _jobs_of(_usual_jobs(np.full(DAY_SLOTS, 2.0), rng), (burst_s, rng.uniform(1.0, 60.0, burst_s.size)))

    rng = np.random.default_rng(35)
    lengths = rng.uniform(60.0, 240.0, (DAY_SLOTS, 24))
    lengths *= (12 * SLOT_S * (1.0 + rng.normal(0.0, 0.01, DAY_SLOTS)) / lengths.sum(axis=1))[:, None]
    submit_s = (np.arange(DAY_SLOTS)[:, None] + rng.random((DAY_SLOTS, 24))) * SLOT_S
    out["flat-boundary-1d.tsv"] = _jobs_of((submit_s.ravel(), lengths.ravel()))

    rng = np.random.default_rng(36)
    t = np.arange(DAY_SLOTS)
    narrow_s, narrow_length_s = _usual_jobs(np.full(DAY_SLOTS, 4.0), rng)
    wide_s = _arrivals(0.2 + 1.6 * (1 - np.cos(2 * np.pi * (_hour(t) - 3.0) / 24.0)) / 2, rng)
    blocks = rng.integers(9, 97, wide_s.size)
    wide_map, wide_shuffle = _sizes_for(_log_uniform(5 * 60.0, 3600.0, wide_s.size, rng), blocks * LengthModel().block_bytes)
    narrow_map, narrow_shuffle = _sizes_for(narrow_length_s)
    out["wide-jobs-1d.tsv"] = _swim_text(
        np.concatenate([narrow_s, wide_s]), np.concatenate([narrow_map, wide_map]), np.concatenate([narrow_shuffle, wide_shuffle])
    )
    return out


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="folder to write the traces into (created if missing)")
    parser.add_argument("--set", choices=["first", "fresh", "unseen", "all"], default="all", help="which traces to write (default: all of them)")
    args = parser.parse_args()
    sets = {"first": traces, "fresh": fresh_traces, "unseen": unseen_traces}
    chosen = {name: content for key, make in sets.items() if args.set in (key, "all") for name, content in make().items()}
    for path in write_all_atomic({args.out_dir / name: content for name, content in chosen.items()}):
        print(path)


if __name__ == "__main__":
    main()
