"""Time of one controller tick with a large queue: 100,000 queued jobs by default.

The queue is built once with JobQueue.of (timed), the first slot counts every job (timed: its cost
is the arrivals, all n of them), and then --slots slots are timed the way the daemon runs them:
--arrivals new jobs join the queue (store seqs after the last), tick decides, and the decision is
applied to the queue with JobQueue.update (released jobs start, some running ones finish). The
policy state's JSON round trip (to_json, dumps, loads, from_json), which the daemon does every slot,
is timed too. Deadlines are spread over a day, so a few hundred jobs fall due each slot. Two runs:
gcp (each job's own deadline: m_t is the rate the deadlines force, a few hundred nodes, EDF
release), and hold under max_nodes 100 (its one deadline D = 2 makes every queued unit due within
D slots, so the queue stays only when capped: overload, free nodes shared by DRF among tenants).
Last, the same tick on a plain list, which builds the queue every slot (what a caller without a
JobQueue pays).
Prints figures; asserts nothing.
Run: .venv/bin/python benchmarks/bench_tick.py [--jobs 100000] [--slots 5] [--arrivals 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from autoscaler.core.controller import ControllerConfig, PolicyState, tick
from autoscaler.core.edf import JobQueue
from autoscaler.core.model import Job, StepSpec

SLOT_S = 300.0
TENANTS = ("ads", "etl", "ml", "bi", "ops")


def make_jobs(n: int, first_seq: int, submit_slot: int, horizon_slots: int, rng: np.random.Generator) -> list[Job]:
    """n jobs submitted in ``submit_slot``, 1 to 20 minutes long, due within ``horizon_slots`` slots."""
    lengths = rng.uniform(60.0, 1200.0, n)
    slack = rng.integers(1, horizon_slots, n) * SLOT_S
    submit = submit_slot * SLOT_S + rng.uniform(0.0, SLOT_S, n)
    return [
        Job(
            job_id=f"j{first_seq + i}",
            name="bench",
            tenant=TENANTS[i % len(TENANTS)],
            submit_s=float(submit[i]),
            deadline_s=float(submit[i] + lengths[i] + slack[i]),
            length_s=float(lengths[i]),
            step=StepSpec(args=("true",)),
            demand_vector=(float(lengths[i]), float(rng.uniform(0, 1e9)), float(rng.uniform(0, 1e8))),
            seq=first_seq + i,
        )
        for i in range(n)
    ]


def run(n_jobs: int, slots: int, arrivals: int, policy: str, max_nodes: int, rng: np.random.Generator) -> None:
    config = ControllerConfig(
        policy=policy, deadline_slots=2, slot_s=SLOT_S, max_nodes=max_nodes, max_deadline_slots=288, tenants_n=len(TENANTS)
    )
    jobs = make_jobs(n_jobs, 1, 0, 288, rng)
    started = time.perf_counter()
    queue = JobQueue.of(jobs, SLOT_S)
    built_ms = (time.perf_counter() - started) * 1e3
    started = time.perf_counter()
    decision, state = tick(0.0, queue, PolicyState(), config)
    first_ms = (time.perf_counter() - started) * 1e3
    apply(queue, decision, 0.0)
    print(f"\n{policy}, max_nodes {max_nodes:,}, {n_jobs:,} queued jobs")
    print(f"  JobQueue.of:                         {built_ms:9.1f} ms (once)")
    print(f"  first slot (counts all {n_jobs:,} jobs):  {first_ms:9.1f} ms (once; its cost is the arrivals)")
    tick_ms, apply_ms, state_ms = [], [], []
    seq = n_jobs + 1
    for slot in range(1, slots + 1):
        for j in make_jobs(arrivals, seq, slot, 288, rng):
            queue.add(j)
        seq += arrivals
        started = time.perf_counter()
        decision, state = tick(slot * SLOT_S, queue, state, config)
        tick_ms.append((time.perf_counter() - started) * 1e3)
        started = time.perf_counter()
        apply(queue, decision, slot * SLOT_S)
        apply_ms.append((time.perf_counter() - started) * 1e3)
        started = time.perf_counter()
        state = PolicyState.from_json(json.loads(json.dumps(state.to_json())))
        state_ms.append((time.perf_counter() - started) * 1e3)
    print(
        f"  later slots ({arrivals} arrivals each), median of {slots} (max): tick {statistics.median(tick_ms):.2f} ms "
        f"({max(tick_ms):.2f}), JobQueue.update of the decision {statistics.median(apply_ms):.2f} ms ({max(apply_ms):.2f}), "
        f"state JSON round trip {statistics.median(state_ms):.2f} ms ({max(state_ms):.2f})"
    )
    print(
        f"  last slot: {decision.queue_depth:,} queued, {len(decision.release)} released, {len(decision.missed)} missed, "
        f"overloaded {decision.overloaded}, reason {decision.reason}: {decision.why[:110]}"
    )
    as_list = queue.jobs()
    started = time.perf_counter()
    tick((slots + 1) * SLOT_S, as_list, state, config)
    print(f"  the same slot on a plain list of {len(as_list):,} jobs (queue built inside): {(time.perf_counter() - started) * 1e3:.1f} ms")


def apply(queue: JobQueue, decision, now_s: float) -> None:
    """What the daemon does after a tick: released jobs run; running ones released two slots ago finish."""
    for job_id in decision.release:
        queue.update(job_id, "running", released_s=now_s)
    for job in queue.running():
        if job.released_s is not None and job.released_s <= now_s - 2 * SLOT_S:
            queue.update(job.job_id, "done")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--slots", type=int, default=5)
    parser.add_argument("--arrivals", type=int, default=50)
    args = parser.parse_args()
    for policy, max_nodes in (("gcp", 100_000), ("hold", 100)):
        run(args.jobs, args.slots, args.arrivals, policy, max_nodes, np.random.default_rng(0))


if __name__ == "__main__":
    main()
