"""`autoscaler run --replay TRACE`: the live slot loop, driven from a recorded trace with a simulated clock.

Jobs enter the store at their trace submit times (idempotently, so a restarted replay
resumes where the store left off), the same :class:`~autoscaler.daemon.SlotRunner` decides
each slot, and the cluster is the in-memory fake, or EMR (moto or real) when the config
names an endpoint. At the end the capacity m_t of every slot is compared with what
``autoscaler replay`` computes for the same policy and D.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from importlib import resources
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
from autoscaler.adapters.lock import StoreLock
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.controller import ControllerConfig
from autoscaler.daemon import SlotRunner
from autoscaler.errors import ConfigError
from autoscaler.model import CostParams, Job, StepSpec
from autoscaler.policies import plan
from autoscaler.workload import estimate_demand_vector, estimate_length_s, read_swim, workload_from_trace

DEFAULT_TRACE = "FB-2009_samples_24_times_1hr_0.tsv"


def trace_jobs(trace, deadline_slots: int, slot_s: float, window_s: float, tenants: int = 1) -> list[Job]:
    """The trace's jobs inside the window as daemon jobs: deadline = submit + length + D slots.

    A length running past the window is cut at the window's end, as ``autoscaler replay``
    clips its curves, so both see the same work. The trace has no tenants: with ``tenants``
    > 1 its jobs are dealt to tenant-1 .. tenant-K in submit order, like K teams sharing the
    cluster; each job carries its estimated demand vector (CPU s, disk bytes, network bytes).
    """
    sizes = np.array([(j.map_input_bytes, j.shuffle_bytes, j.reduce_output_bytes) for j in trace.jobs], dtype=float)
    lengths = estimate_length_s(sizes[:, 0], sizes[:, 1], sizes[:, 2])
    demands = estimate_demand_vector(sizes[:, 0], sizes[:, 1], sizes[:, 2])
    return [
        Job(
            job_id=j.job_id,
            name=j.job_id,
            tenant="trace" if tenants == 1 else f"tenant-{i % tenants + 1}",
            submit_s=j.submit_s,
            deadline_s=j.submit_s + min(float(length), window_s - j.submit_s) + deadline_slots * slot_s,
            length_s=min(float(length), window_s - j.submit_s),
            step=StepSpec(args=("true",)),
            demand_vector=tuple(float(v) for v in demand),
        )
        for i, (j, length, demand) in enumerate(zip(trace.jobs, lengths, demands))
        if j.submit_s < window_s
    ]


def replay_through_daemon(args: argparse.Namespace, settings, out: Console, err: Console) -> int:
    """Run the replay; prints a comparison table and returns 0 (1 if the capacities differ)."""
    policy = args.policy or (settings.policy if settings else "hold")
    deadline_slots = args.deadline if args.deadline is not None else (settings.deadline_slots if settings else 2)
    slot_s = settings.slot_s if settings else 300.0
    with resources.as_file(resources.files("autoscaler") / "data" / DEFAULT_TRACE) as default_path:
        path = default_path if args.replay == "default" else Path(args.replay)
        trace = read_swim(path)
    workload = workload_from_trace(trace, slot_s=slot_s)
    window_slots = workload.n_slots
    jobs = sorted(trace_jobs(trace, deadline_slots, slot_s, window_slots * slot_s, args.tenants), key=lambda j: j.submit_s)
    max_nodes = args.max_nodes if args.max_nodes is not None else (settings.cluster.max_nodes if settings else 1_000_000)
    config = ControllerConfig(
        policy=policy,
        deadline_slots=deadline_slots,
        slot_s=slot_s,
        epoch_s=0.0,
        min_nodes=settings.cluster.min_nodes if settings else 0,
        max_nodes=max_nodes,
        max_deadline_slots=settings.max_deadline_slots if settings else 288,
        tenants_n=max(args.tenants, settings.tenants_n or 0) if settings else args.tenants,
    )
    store_path = args.store or Path(tempfile.mkdtemp(prefix="autoscaler-replay-")) / "replay.db"
    with StoreLock(store_path), SqliteJobStore(store_path) as store:
        saved = store.load_state()
        first_slot = int(saved["last_slot"]) + 1 if saved else 0
        clock = SimulatedClock(first_slot * slot_s)
        cluster = _cluster(settings, clock)
        if saved and isinstance(cluster, FakeCluster):
            raise ConfigError(
                f"{store_path}: this replay store was started before, and the in-memory cluster it used is gone; "
                "give a new --store (only a replay against an EMR endpoint can resume)"
            )
        runner = SlotRunner(config=config, store=store, cluster=cluster, clock=clock, policy_name=policy)
        horizon = window_slots + deadline_slots
        submitted = 0
        started = time.perf_counter()
        with Progress(console=err, transient=True) as progress:
            task = progress.add_task(f"replaying {len(jobs)} jobs", total=horizon, completed=first_slot)
            slot = first_slot
            # Until the horizon, and on until every job is released; long jobs may run on past it.
            while slot < horizon or any(job.state == "queued" for job in store.active_jobs()):
                clock.time_s = slot * slot_s
                while submitted < len(jobs) and jobs[submitted].submit_s < (slot + 1) * slot_s:
                    store.submit(jobs[submitted])
                    submitted += 1
                runner.run_slot()
                progress.advance(task)
                slot += 1
                if slot > horizon + 100 * config.max_deadline_slots:
                    break
                time.sleep(slot_s / args.speedup)
        elapsed = time.perf_counter() - started
        decisions = store.decisions()
        final_state = store.load_state() or {}
    capacity = np.array([d["capacity"] for d in decisions])
    nodes = np.array([d["nodes"] for d in decisions])
    late = sum(len(d["late"]) for d in decisions)
    table = Table(title=f"{path.name} through the daemon: {policy}, D = {deadline_slots}, {len(decisions)} slots in {elapsed:.1f} s")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("jobs released", str(sum(len(d["release"]) for d in decisions)))
    table.add_row("jobs released late", str(late))
    table.add_row("slots overloaded (nodes wanted > max nodes)", f"{sum(d['overloaded'] for d in decisions)} (max nodes {max_nodes:,})")
    table.add_row("capacity server-slots (sum m_t)", f"{capacity.sum():.1f}")
    table.add_row("node-slots after rounding up", f"{nodes.sum():.0f}")
    table.add_row("cost of rounding", f"{100 * (nodes.sum() / max(capacity.sum(), 1e-12) - 1):.2f} %")
    watch = final_state.get("follow_watch") or {}
    if watch:
        beta = config.cost.beta
        ended = watch["policy_cost"] + beta * watch["last_capacity"], watch["follow_cost"] + beta * watch["last_load"]
        table.add_row("cost of m_t, x_t (eq. 2) against follow", f"{ended[0]:,.1f} against {ended[1]:,.1f}")
        if watch["worse"]:
            err.print(f"warning: {policy} cost more than follow on this replay ({ended[0]:,.1f} against {ended[1]:,.1f})", highlight=False)
    status = 0
    if policy in ("hold", "gcp-u", "follow", "vfw"):
        expected = plan(policy, workload.active, deadline_slots, CostParams()).capacity
        n = min(len(expected), len(capacity))
        if policy == "vfw":
            # Replay knows the horizon's end and runs VOPT over [t, T] in its last D+1 slots;
            # a daemon has no end, so those slots are left out of the comparison.
            n = min(n, len(expected) - deadline_slots - 1)
        difference = float(np.abs(capacity[:n] - expected[:n]).max(initial=0.0))
        table.add_row("max |m_t - autoscaler replay's m_t|", f"{difference:.3g}")
        status = 0 if difference <= 1e-6 else 1
    out.print(table)
    out.print(_tenant_table(jobs, decisions, final_state))
    err.print(f"store: {store_path}", highlight=False)
    return status


def _tenant_table(jobs: list[Job], decisions: list[dict], state: dict) -> Table:
    """Per tenant: jobs, deadlines missed (start-by slot passed before release), dominant share."""
    missed: dict[str, int] = {}
    overloaded_node_slots: dict[str, int] = {}
    for decision in decisions:
        for tenant, count in decision["missed_by_tenant"].items():
            missed[tenant] = missed.get(tenant, 0) + count
        if decision["overloaded"]:
            for tenant, nodes in decision["nodes_by_tenant"].items():
                overloaded_node_slots[tenant] = overloaded_node_slots.get(tenant, 0) + nodes
    shares = dict(zip(state.get("tenants", []), state.get("dominant_shares", [])))
    table = Table(title="tenants (dynamic DRF shares divide the nodes in overloaded slots)")
    for column in ("tenant", "jobs", "missed deadline", "node-slots when overloaded", "dominant share"):
        table.add_column(column, justify="left" if column == "tenant" else "right")
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.tenant] = counts.get(job.tenant, 0) + 1
    arrival = {tenant: i for i, tenant in enumerate(state.get("tenants", []))}
    for tenant in sorted(counts, key=lambda t: (arrival.get(t, len(arrival)), t)):
        share = shares.get(tenant)
        table.add_row(
            tenant,
            f"{counts[tenant]:,}",
            f"{missed.get(tenant, 0):,}",
            f"{overloaded_node_slots.get(tenant, 0):,}",
            "" if share is None else f"{share:.4f}",
        )
    return table


def _cluster(settings, clock: SimulatedClock):
    """The in-memory cluster, or EMR when the config's endpoint is on this machine (moto):
    a replay never touches a real cluster."""
    endpoint = settings.cluster.endpoint_url if settings is not None else None
    if endpoint and urlparse(endpoint).hostname in ("127.0.0.1", "localhost", "::1"):
        from autoscaler.adapters.emr import EmrCluster, emr_client

        return EmrCluster(emr_client(settings.cluster.region, settings.cluster.endpoint_url), settings.cluster.id)
    return FakeCluster(clock)
