"""`autoscaler run --replay TRACE`: the live slot loop, driven from a recorded trace with a simulated clock.

Jobs enter the store at their trace submit times (idempotently, so a restarted replay
resumes where the store left off), the same :class:`~autoscaler.app.daemon.SlotRunner` decides
each slot, and the cluster is the in-memory fake, the cluster twin (``--cluster twin``), or EMR
(moto) when the config names an endpoint. At the end the capacity m_t of every slot is compared
with what ``autoscaler replay`` computes for the same policy and D, and the twin's bill is printed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
from autoscaler.adapters.twin import TwinCluster
from autoscaler.app.config import Settings
from autoscaler.app.daemon import DecisionsFile, SlotRunner
from autoscaler.app.traces import open_trace
from autoscaler.core import defaults
from autoscaler.core.controller import ControllerConfig, Decision
from autoscaler.core.energy.accounting import whole_nodes
from autoscaler.core.energy.signal import Signal
from autoscaler.core.errors import ConfigError
from autoscaler.core.lateness import LATE_HELP, slots_late
from autoscaler.core.learned import LENGTH_SOURCES, check_quantile, planned, quantile_label
from autoscaler.core.model import Job, JobState, StepSpec, Workload
from autoscaler.core.policies import REPLAY_COMPARED_POLICIES, plan
from autoscaler.core.ports import Cluster, JobStore
from autoscaler.core.readable import count_text
from autoscaler.core.recurring import repeat_days
from autoscaler.core.replay import require_deadline_within_window
from autoscaler.core.slot_work import node_seconds_active
from autoscaler.core.twin import TwinBill, TwinConfig
from autoscaler.core.workload import estimate_demand_vector, estimate_length_s, job_nodes, read_swim, workload_from_trace


def trace_jobs(
    trace, deadline_slots: int, slot_s: float, window_s: float, tenants: int = 1, containers_per_node: int | None = None,
    max_nodes: int | None = None, names: dict[str, str] | None = None,
) -> list[Job]:  # fmt: skip
    """The trace's jobs inside the window as daemon jobs: deadline = submit + length + D slots.

    A length running past the window is cut at the window's end, as ``autoscaler replay``
    clips its curves, so both see the same work. The trace has no tenants: with ``tenants``
    > 1 its jobs are dealt to tenant-1 .. tenant-K in submit order, like K teams sharing the
    cluster; each job carries its estimated demand vector (CPU s, disk bytes, network bytes).
    With ``containers_per_node`` each job runs on w nodes (``autoscaler.core.workload.job_nodes``:
    its §V-A mappers or reducers, whichever are more, over the containers a node holds); None: one
    node each. Raises ConfigError naming the job when its w is above ``max_nodes`` (it could never start).
    A job is named by ``names`` (job id -> name, a recurring load's: ``autoscaler.core.recurring``),
    else by its id; its length comes from the size model (``length_source`` "size model").
    """
    sizes = np.array([(j.map_input_bytes, j.shuffle_bytes, j.reduce_output_bytes) for j in trace.jobs], dtype=float).reshape(-1, 3)
    lengths = estimate_length_s(sizes[:, 0], sizes[:, 1], sizes[:, 2])
    demands = estimate_demand_vector(sizes[:, 0], sizes[:, 1], sizes[:, 2])
    widths = job_nodes(sizes[:, 0], sizes[:, 2], containers_per_node)
    if max_nodes is not None:
        inside = [i for i, j in enumerate(trace.jobs) if j.submit_s < window_s and widths[i] > max_nodes]
        if inside:
            first = trace.jobs[inside[0]]
            raise ConfigError(
                f"--containers-per-node {containers_per_node}: job {first.job_id!r} needs {int(widths[inside[0]]):,} nodes at once "
                f"({count_text(len(inside), 'job')} of the trace above --max-nodes {max_nodes:,}), more than the cluster may have; "
                "give more containers per node or a larger --max-nodes"
            )
    return [
        Job(
            job_id=j.job_id,
            name=(names or {}).get(j.job_id, j.job_id),
            tenant="trace" if tenants == 1 else f"tenant-{i % tenants + 1}",
            submit_s=j.submit_s,
            deadline_s=j.submit_s + min(float(length), window_s - j.submit_s) + deadline_slots * slot_s,
            length_s=min(float(length), window_s - j.submit_s),
            step=StepSpec(args=("true",)),
            demand_vector=tuple(float(v) for v in demand),
            nodes=int(width),
            length_source="size model",
        )
        for i, (j, length, demand, width) in enumerate(zip(trace.jobs, lengths, demands, widths))
        if j.submit_s < window_s
    ]


def within_window(job: Job, window_s: float) -> Job:
    """``job`` with a planned length that runs past the window's end (``window_s``, s from the trace's
    start) cut there, as ``trace_jobs`` cuts the length it is submitted with: a learned length of a
    run on an earlier day, which the window did not cut, would otherwise plan the last day's job past
    the end its submitted length and its deadline were cut to, and count it late."""
    left_s = window_s - job.submit_s
    return job if job.length_s <= left_s else dataclasses.replace(job, length_s=max(0.0, left_s))


TWIN_FLAGS = {
    "provision_s": "--provision-s",
    "decommission_timeout_s": "--decommission-timeout-s",
    "length_error_sigma": "--length-error",
    "length_jitter_sigma": "--length-jitter",
    "seed": "--seed",
    "step_concurrency": "--step-concurrency",
    "price_per_node_hour": "--price-per-node-hour",
}
"""TwinConfig's fields and the run flags that set them."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TwinFlags:
    """The cluster twin's flags as the command line gave them (``run --replay``, ``compare``), each None
    unless given, so the twin's defaults (autoscaler.core.twin) live in one place. The first seven are
    TwinConfig's fields (``TWIN_FLAGS`` names their flags); ``carbon`` is the source (a file or URL) of a
    carbon signal for the bill's kgCO2 (--carbon), ``carbon_unit`` the unit of a CSV one (--carbon-unit)."""

    provision_s: float | None = None
    decommission_timeout_s: float | None = None
    length_error_sigma: float | None = None
    length_jitter_sigma: float | None = None
    seed: int | None = None
    step_concurrency: int | None = None
    price_per_node_hour: float | None = None
    carbon: str | None = None
    carbon_unit: str | None = None

    def config_fields(self) -> dict[str, float | int | None]:
        """TwinConfig's fields as given (None: not given)."""
        return {name: getattr(self, name) for name in TWIN_FLAGS}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplayRequest:
    """What ``autoscaler run --replay`` is asked to run, as its flags gave it; None: not given (the
    config's value, else the default).

    ``trace``: 'A', 'B', 'default' or a SWIM file's path (--replay). ``speedup``: simulated seconds per
    real second. ``deadline_slots``: D, slots (--deadline). ``tenants``: the tenants the trace's jobs are
    dealt to in turn (1: none). ``containers_per_node``: N, jobs run on ceil(max(mappers, reducers) / N)
    nodes (None: one each). ``days``: how many days the trace's day is repeated (None: 1). ``lengths``:
    "learned" or "submitted" (None: learned), ``length_quantile``: the quantile of past runs a learned
    length is. ``store``: the store file, kept; ``keep_store``: keep the temporary one; ``dry_run``: no
    store at all. ``decisions_out``: a file to append one JSON line per slot to. ``cluster``: "twin" or
    "instant" (None: the twin, or EMR when the config's endpoint is on this machine). ``twin``: the
    twin's flags."""

    trace: str
    speedup: float
    policy: str | None = None
    deadline_slots: int | None = None
    max_nodes: int | None = None
    tenants: int = 1
    containers_per_node: int | None = None
    days: int | None = None
    lengths: str | None = None
    length_quantile: float | None = None
    store: Path | None = None
    keep_store: bool = False
    dry_run: bool = False
    decisions_out: Path | None = None
    cluster: str | None = None
    twin: TwinFlags = dataclasses.field(default_factory=TwinFlags)


def replay_through_daemon(request: ReplayRequest, settings: Settings, out: Console, err: Console) -> int:
    """Run the replay; prints a comparison table and returns 0 (1 if the capacities differ, 128 + the
    signal's number when a SIGTERM stopped it).

    The store is ``request.store`` (kept), else a temporary folder's, removed at exit unless
    ``request.keep_store``; with ``request.dry_run`` there is none: a shadow store in memory. Raises
    ConfigError naming the flag for an input it cannot run, before any slot; for a store that is not
    this replay's; for a queue that cannot drain. TraceError for a trace or --carbon that cannot be read."""
    twin, carbon, config = _replay_config(request, settings)
    trace = _replay_trace(request, settings, config, twin, err)
    with contextlib.ExitStack() as stack:
        loop = _open_replay(request, settings, config, twin, trace, stack)
        run = _run_slots(loop, trace, request.speedup, err)
        if run.signal_name:
            err.print(
                f"run --replay: stopped by {run.signal_name} after slot {run.last_slot} of {loop.horizon} (the horizon); {loop.kept}",
                highlight=False,
            )
            return 128 + run.signal_number
        outcome = _replay_outcome(loop, trace.jobs)
    status = _print_outcome(trace, loop, outcome, run.elapsed_s, out, err)
    if outcome.bill is not None:
        out.print(twin_bill_table(outcome.bill, twin, carbon, loop.config.slot_s))
    if loop.store_path is not None and (request.store is not None or request.keep_store):
        err.print(f"store: {loop.store_path}", highlight=False)
    return status


def _replay_config(request: ReplayRequest, settings: Settings) -> tuple[TwinConfig | None, Signal | None, ControllerConfig]:
    """(the twin's config, the --carbon signal in gCO2eq/kWh, the controller's config) of a replay,
    checked before any work: the first two as :func:`_twin_inputs` (None, None off the twin), the last
    ``settings`` with the request's policy, D, max nodes and tenants (and the twin's price per node-hour).
    Raises ConfigError naming the flag for a value out of range or flags that do not go together;
    TraceError for a --carbon that cannot be read."""
    from autoscaler.app import compose

    twin, carbon = _twin_inputs(request, settings)
    config = compose.controller_config(
        settings, policy=request.policy, deadline_slots=request.deadline_slots, max_nodes=request.max_nodes, tenants=request.tenants,
        price_per_node_hour=twin.price_per_node_hour if twin is not None else None,
    )  # fmt: skip
    if request.dry_run and (request.store is not None or request.keep_store):
        raise ConfigError("run --replay --dry-run keeps no store; leave out --store and --keep-store")
    return twin, carbon, config


@dataclasses.dataclass(frozen=True)
class _ReplayTrace:
    """A replay's trace as it is submitted. ``name``: the trace file's name (titles, messages).
    ``jobs``: the window's jobs, shape (n_jobs,), in submit order (``trace_jobs``); the slot loop puts
    each learned length in place as it submits the job. ``workload``: the window's curves as
    ``autoscaler replay`` computes them, ``window_slots`` slots. ``lengths``: "learned" or "submitted";
    ``quantile``: the quantile of a name's past runs a learned length is."""

    name: str
    jobs: list[Job]
    workload: Workload
    lengths: str
    quantile: float

    @property
    def window_slots(self) -> int:
        return self.workload.n_slots


def _replay_trace(request: ReplayRequest, settings: Settings, config: ControllerConfig, twin: TwinConfig | None, err: Console) -> _ReplayTrace:
    """The trace of ``request.trace`` (--replay), its day repeated ``request.days`` times, as the
    daemon's jobs with D = ``config.deadline_slots`` (``trace_jobs``). Prints to ``err`` the workload's
    warnings, the objective's costs and a note when the twin's nodes boot slower than the config's
    provision_s counts. Raises ConfigError for a .csv load curve (it has no jobs), a bad
    --days/--lengths/--length-quantile (``replay_length_inputs``), a D longer than the window, a job
    wider than the max nodes; TraceError for a trace that cannot be read."""
    from autoscaler.app.cli.arguments import costs_text

    slot_s, deadline_slots = config.slot_s, config.deadline_slots
    with open_trace(request.trace, "--replay") as (path, _):
        if path.suffix.lower() == ".csv":
            raise ConfigError(
                f"{path}: run --replay needs a SWIM trace of jobs (6 tab-separated columns) to submit; a .csv load curve "
                "has no jobs (autoscaler replay --trace reads it)"
            )
        trace = read_swim(path)
    days, lengths, quantile = replay_length_inputs(request, settings)
    day_s = round(86400 / slot_s) * slot_s  # the window of one day's trace, as workload_from_trace takes it
    trace, names = repeat_days(trace, days, day_s)
    workload = workload_from_trace(
        trace, slot_s=slot_s, window_slots=None if days == 1 else days * round(86400 / slot_s), containers_per_node=request.containers_per_node
    )
    for warning in workload.notes:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    err.print(costs_text(settings.derived_costs(twin.price_per_node_hour if twin is not None else None)), style="dim", markup=False, highlight=False)
    window_slots = workload.n_slots
    require_deadline_within_window(deadline_slots, window_slots, "--deadline: D" if request.deadline_slots is not None else "deadline_slots: D")
    jobs = sorted(
        trace_jobs(trace, deadline_slots, slot_s, window_slots * slot_s, request.tenants, request.containers_per_node, config.max_nodes, names),
        key=lambda j: j.submit_s,
    )
    if twin is not None and config.provision_s < twin.provision_s:
        err.print(
            f"note: the twin's nodes take {twin.provision_s:g} s to be usable and the config's provision_s is "
            f"{config.provision_s:g} s, so the release margin does not count the boot and jobs released due onto a "
            f"booting node may finish after their deadline; provision_s = {twin.provision_s:g} in the config counts it "
            "(autoscaler compare does)", highlight=False, markup=False, soft_wrap=True,
        )  # fmt: skip
    return _ReplayTrace(path.name, jobs, workload, lengths, quantile)


@dataclasses.dataclass(frozen=True)
class _ReplayLoop:
    """A replay's slot loop, ready to run. ``store_path``: None for a dry run's shadow store; ``kept``:
    where the slots decided are, for a replay that stops early (``_kept``). ``config``: the
    controller's, its max nodes capped at the twin's steps at once when those bind (``max_nodes`` is
    the cap the request or the config gave). Slots run from ``first_slot`` (after the slots a resumed
    store decided) to ``horizon`` (the window and D), and on to at most ``end_slot`` while jobs are
    queued; ``check`` refuses a queue that cannot drain by then."""

    store: JobStore
    store_path: Path | None
    kept: str
    clock: SimulatedClock
    cluster: Cluster
    runner: SlotRunner
    config: ControllerConfig
    max_nodes: int
    first_slot: int
    horizon: int
    end_slot: int
    check: _DrainCheck


def _open_replay(
    request: ReplayRequest, settings: Settings, config: ControllerConfig, twin: TwinConfig | None, trace: _ReplayTrace, stack: contextlib.ExitStack,
) -> _ReplayLoop:  # fmt: skip
    """The replay's decisions file, store, clock, cluster and slot runner, entered on ``stack`` (they
    close with it): a store the replay started before resumes after its last slot. Raises ConfigError
    for a store that is not this replay's or whose in-memory cluster is gone; StoreError (and the
    lock's error when another holds the store)."""
    from autoscaler.app import compose

    decisions_file = stack.enter_context(DecisionsFile(request.decisions_out)) if request.decisions_out is not None else None
    store_path = _store_path(request, stack)
    store = compose.replay_store(store_path, stack)
    kept = _kept(store_path, request)
    saved = store.load_state()
    first_slot = int(saved["last_slot"]) + 1 if saved else 0
    clock = compose.replay_clock(first_slot * config.slot_s)
    cluster = compose.replay_cluster(settings, clock, twin)
    _refuse_other_store(store, store_path, bool(saved), cluster, trace)
    # On the twin, fewer steps at once than nodes bound the work as the nodes would (one-node jobs;
    # a step of w nodes takes w of them), and the daemon plans on them: nodes beyond idle.
    max_nodes = config.max_nodes
    cap, cap_flag = max_nodes, "--max-nodes"
    if twin is not None and twin.step_concurrency < max_nodes and all(job.nodes == 1 for job in trace.jobs):
        cap, cap_flag = twin.step_concurrency, "--step-concurrency"
        config = dataclasses.replace(config, max_nodes=cap)
    runner = compose.runner(settings, config, store, cluster, clock, dry_run=request.dry_run, on_decision=decisions_file, retention_s=None)
    horizon = trace.window_slots + config.deadline_slots
    end_slot = replay_end_slot(horizon)
    check = _DrainCheck(trace.jobs, end_slot, horizon, cap, config.slot_s, cap_flag)
    return _ReplayLoop(store, store_path, kept, clock, cluster, runner, config, max_nodes, first_slot, horizon, end_slot, check)


def _store_path(request: ReplayRequest, stack: contextlib.ExitStack) -> Path | None:
    """Where a replay's store is: None for a dry run (a shadow store in memory), ``request.store``,
    else replay.db in a new temporary folder, removed with ``stack`` unless ``request.keep_store``."""
    if request.dry_run:
        return None
    if request.store is not None:
        return request.store
    folder = tempfile.mkdtemp(prefix="autoscaler-replay-")
    if not request.keep_store:
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
    return Path(folder) / "replay.db"


def _refuse_other_store(store, store_path: Path | None, resumed: bool, cluster, trace: _ReplayTrace) -> None:
    """ConfigError unless ``store`` is this replay's to run in: with no replay's state, empty; with one
    (``resumed``), holding only the trace's jobs, on a cluster that outlived the replay (EMR)."""
    if resumed and _foreign_jobs(store, trace.jobs):
        raise ConfigError(
            f"{store_path}: holds jobs that are not in {trace.name} and a daemon's decisions (a daemon's store?); "
            "run --replay writes the trace's jobs and its decisions into its store: give a new --store, or none "
            "for a temporary one"
        )
    if resumed and isinstance(cluster, (FakeCluster, TwinCluster)):
        raise ConfigError(
            f"{store_path}: this replay store was started before, and the in-memory cluster it used is gone; "
            "give a new --store (only a replay against an EMR endpoint can resume)"
        )
    if not resumed and store.max_seq():
        raise ConfigError(
            f"{store_path}: holds {count_text(store.max_seq(), 'job')} and no replay's state (a daemon's store?); "
            "run --replay writes the trace's jobs and its decisions into its store: give a new --store, or none "
            "for a temporary one"
        )


@dataclasses.dataclass(frozen=True)
class _SlotsRun:
    """How a replay's slot loop ended: ``last_slot``, the last slot it decided (first slot - 1 if
    none); the signal that stopped it, ``signal_name`` None and ``signal_number`` 0 when none did;
    ``elapsed_s``, the wall time it took."""

    last_slot: int
    signal_name: str | None
    signal_number: int
    elapsed_s: float


def _run_slots(loop: _ReplayLoop, trace: _ReplayTrace, speedup: float, err: Console) -> _SlotsRun:
    """Decide slot after slot from ``loop.first_slot``, until the horizon and on until no job is queued,
    one slot per slot_s / ``speedup`` s of wall time (a progress bar on ``err``), each job submitted in
    the slot its submit time is in (``_submit_arrivals``). Stops after the slot it is in at a SIGTERM.
    Raises ConfigError when jobs are still queued at ``loop.end_slot`` or the queue cannot drain by then
    (``_DrainCheck``); on Ctrl-C prints the last slot decided and raises KeyboardInterrupt."""
    slot_s, store = loop.config.slot_s, loop.store
    submitted = 0
    started = time.perf_counter()
    stop = _StopSignal()
    with stop, Progress(console=err, transient=True) as progress:
        task = progress.add_task(f"replaying {len(trace.jobs)} jobs", total=loop.horizon, completed=loop.first_slot)
        slot = loop.first_slot
        try:
            # Until the horizon, and on until every job is released; long jobs may run on past it.
            while True:
                loop.clock.time_s = slot * slot_s
                submitted = _submit_arrivals(loop, trace, submitted, slot)
                queued = _queued(loop.runner, store)
                if slot >= loop.horizon and not queued:
                    break
                if slot >= loop.end_slot:
                    raise ConfigError(
                        f"run --replay: {queued:,} jobs still queued at slot {slot:,}, twice the horizon of {loop.horizon:,} "
                        f"slots; were jobs submitted to {loop.store_path} while it ran? {loop.kept}"
                    )
                loop.check(slot, submitted, store.active_jobs)
                loop.runner.run_slot()
                progress.advance(task)
                slot += 1
                if stop.sleep(slot_s / speedup):
                    break
        except KeyboardInterrupt:
            err.print(f"run --replay: interrupted after slot {slot - 1}; {loop.kept}", highlight=False)
            raise
    return _SlotsRun(slot - 1, stop.signal_name, stop.signal_number, time.perf_counter() - started)


def _submit_arrivals(loop: _ReplayLoop, trace: _ReplayTrace, submitted: int, slot: int) -> int:
    """Submit to the store the trace's jobs after the first ``submitted`` whose submit time is before
    slot ``slot``'s end, each planned at a learned length (``trace.lengths`` "learned") as
    `autoscaler submit` plans it; returns how many of the trace's jobs are submitted now."""
    jobs, slot_s = trace.jobs, loop.config.slot_s
    arriving = submitted
    while submitted < len(jobs) and jobs[submitted].submit_s < (slot + 1) * slot_s:
        submitted += 1
    if submitted > arriving:
        if trace.lengths == "learned":
            # As `autoscaler submit` plans a job: on the runs its name ended by now.
            for i in range(arriving, submitted):
                jobs[i] = within_window(
                    planned(jobs[i], loop.store.run_lengths_s(jobs[i].tenant, jobs[i].name, loop.clock.time_s), trace.quantile),
                    trace.window_slots * slot_s,
                )
        loop.store.submit_many(jobs[arriving:submitted])
    return submitted


@dataclasses.dataclass(frozen=True)
class _ReplayOutcome:
    """What a replay did, read back at its end. ``decisions``: one a slot, in slot order;
    ``final_state``: the store's state after the last slot ({} if none); ``jobs``: the trace's jobs as
    the decisions released them (``_released_as_decided``); ``late``: {job id: slots late}
    (autoscaler.core.lateness); ``bill``: the twin's (None off the twin); ``overran``: ids of the jobs
    that ended after their deadline (``overran_jobs``; None: not known)."""

    decisions: list[Decision]
    final_state: dict
    jobs: list[Job]
    late: dict[str, int]
    bill: TwinBill | None
    overran: set[str] | None


def _replay_outcome(loop: _ReplayLoop, jobs: list[Job]) -> _ReplayOutcome:
    """The replay's decisions, state, lateness and bill, from its store and cluster (the twin runs its
    jobs to their end, and the runs that end after the last slot are recorded in the store)."""
    store = loop.store
    decisions = [Decision.from_json(record) for record in store.decisions()]
    final_state = store.load_state() or {}
    # The trace's jobs as the decisions released them (the store holds the same; reading it back costs more).
    stored_jobs = _released_as_decided(jobs, decisions, loop.config.slot_s)
    last_slot = store.last_slot()
    late = {job.job_id: slots_late(job, loop.config, loop.clock.time_s, last_slot) for job in stored_jobs}
    bill = None
    if isinstance(loop.cluster, TwinCluster):
        bill = loop.cluster.finish()
        _record_last_runs(loop.cluster, store)
    return _ReplayOutcome(decisions, final_state, stored_jobs, late, bill, overran_jobs(bill, store, jobs))


def _print_outcome(trace: _ReplayTrace, loop: _ReplayLoop, outcome: _ReplayOutcome, elapsed_s: float, out: Console, err: Console) -> int:
    """Print to ``out`` the daemon's table, compared with ``autoscaler replay``'s m_t where the policy
    is (``_compare_with_replay``), and the tenants' table; returns 0, or 1 when the m_t differ."""
    capacity = np.array([d.capacity for d in outcome.decisions])
    table = _daemon_table(trace, loop, outcome, capacity, elapsed_s, err)
    status = _compare_with_replay(table, trace, loop.config, capacity, err)
    out.print(table)
    out.print(_tenant_table(outcome.jobs, outcome.late, outcome.decisions, outcome.final_state, outcome.overran))
    return status


def _daemon_table(
    trace: _ReplayTrace, loop: _ReplayLoop, outcome: _ReplayOutcome, capacity: np.ndarray, elapsed_s: float, err: Console,
) -> Table:  # fmt: skip
    """The replay's measures: jobs released, late and overran, lengths planned, overloaded slots, the
    m_t (``capacity``, shape (n_slots,), servers) and the nodes run, and the cost against follow's
    (eq. 2; a warning on ``err`` when it is higher)."""
    config, decisions, jobs, late = loop.config, outcome.decisions, trace.jobs, outcome.late
    nodes = np.array([d.nodes for d in decisions], dtype=float)
    whole = whole_nodes(capacity)
    below, above = np.maximum(whole - nodes, 0.0), np.maximum(nodes - whole, 0.0)
    table = Table(
        title=f"{trace.name} through the daemon: {config.policy}, D = {config.deadline_slots}, {len(decisions):,} slots in {elapsed_s:.1f} s",
        caption=LATE_HELP if any(late.values()) else None,
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("jobs released", f"{sum(len(d.release) for d in decisions):,}")
    table.add_row("jobs late (missed their deadline)", f"{sum(1 for n in late.values() if n):,}")
    overran = outcome.overran
    table.add_row("jobs overran (ended after their deadline)", f"{len(overran):,}" if overran is not None else "not known (no run times)")
    learned = sum(1 for job in jobs if job.prior_length_s is not None)
    table.add_row(
        f"lengths planned ({trace.lengths})",
        f"{learned:,} learned ({quantile_label(trace.quantile)} of the name's past runs), {len(jobs) - learned:,} as submitted",
    )
    table.add_row("slots overloaded (nodes wanted > max nodes)", f"{sum(d.overloaded for d in decisions):,} (max nodes {loop.max_nodes:,})")
    table.add_row("capacity m_t, server-slots (sum of m_t)", f"{capacity.sum():,.1f}")
    rounding_pct = 100 * (whole.sum() / capacity.sum() - 1) if capacity.sum() > 0 else 0.0
    table.add_row("m_t rounded up to whole nodes, node-slots", f"{whole.sum():,.0f} (+{rounding_pct:.2f} %)")
    if below.any():
        table.add_row("  fewer nodes than that: max nodes", f"-{below.sum():,.0f} in {count_text(int((below > 0).sum()), 'slot')}")
    if above.any():
        table.add_row("  more nodes than that: due jobs, min nodes", f"+{above.sum():,.0f} in {count_text(int((above > 0).sum()), 'slot')}")
    table.add_row("node-slots run", f"{nodes.sum():,.0f}")
    watch = outcome.final_state.get("follow_watch") or {}
    if watch:
        beta = config.cost.beta
        ended = watch["policy_cost"] + beta * watch["last_capacity"], watch["follow_cost"] + beta * watch["last_load"]
        table.add_row("cost of m_t, x_t (eq. 2) against follow", f"{ended[0]:,.1f} against {ended[1]:,.1f}")
        if watch["worse"]:
            err.print(f"warning: {config.policy} cost more than follow on this replay ({ended[0]:,.1f} against {ended[1]:,.1f})", highlight=False)
    return table


def _compare_with_replay(table: Table, trace: _ReplayTrace, config: ControllerConfig, capacity: np.ndarray, err: Console) -> int:
    """Add to ``table`` the largest difference between the daemon's m_t (``capacity``, shape (n_slots,))
    and what ``autoscaler replay`` plans for the same policy and D, or why it is not compared; returns
    1 (with the difference on ``err``) when they differ by more than 1e-6, else 0."""
    policy, deadline_slots, workload = config.policy, config.deadline_slots, trace.workload
    if policy not in REPLAY_COMPARED_POLICIES:
        table.add_row(
            "max |m_t - autoscaler replay's m_t|",
            "not compared: gcp here gives each job its own deadline; replay's gcp takes k-means classes of the trace",
        )
        return 0
    # The replay is priced as the daemon decided: under the configured e0, e1 and beta, uncapped
    # (the controller caps nodes, never the policy's m_t).
    # Under "node-seconds" the daemon plans each job's node time, not replay's one unit a job and slot.
    active = workload.active if config.work_model == "job-slots" else node_seconds_active(trace.jobs, config, len(workload.active))
    expected = plan(policy, active, deadline_slots, dataclasses.replace(config.cost, max_servers=None)).capacity
    n = min(len(expected), len(capacity))
    if policy == "vfw":
        # Replay knows the horizon's end and runs VOPT over [t, T] in its last D+1 slots;
        # a daemon has no end, so those slots are left out of the comparison.
        n = min(n, len(expected) - deadline_slots - 1)
    difference = float(np.abs(capacity[:n] - expected[:n]).max(initial=0.0))
    label = "max |m_t - autoscaler replay's m_t|"
    if config.work_model != "job-slots":
        label = f"max |m_t - {policy} planned on the jobs' node time| (autoscaler replay plans job-slots)"
    # Under node-seconds hold's books follow the work the cluster ran (whole jobs on whole nodes,
    # ahead of its x_t: HoldState.with_work_done), which a plan of the curve cannot know.
    follows_cluster = policy == "hold" and config.work_model != "job-slots"
    table.add_row(label, f"{difference:.3g}" + (" (not compared: hold's books follow the work the cluster ran)" if follows_cluster else ""))
    status = 0 if difference <= 1e-6 or follows_cluster else 1
    if status:
        err.print(
            f"run --replay: the daemon's m_t differs from autoscaler replay's by up to {difference:.3g} "
            f"({policy}, D = {deadline_slots}, e0 = {config.cost.e0:g}, e1 = {config.cost.e1:g}, beta = {config.cost.beta:g})",
            highlight=False, markup=False, soft_wrap=True,
        )
    return status


def replay_length_inputs(request: ReplayRequest, settings: Settings | None) -> tuple[int, str, float]:
    """(--days, --lengths, the quantile: --length-quantile, else the config's ``[jobs] length_quantile``)
    of a replay, checked: ConfigError naming the flag."""
    days = request.days or 1
    lengths = request.lengths or "learned"
    if lengths not in LENGTH_SOURCES:
        raise ConfigError(f"--lengths: expected one of {', '.join(LENGTH_SOURCES)}, got {lengths!r}")
    given = request.length_quantile
    if given is not None and lengths == "submitted":
        raise ConfigError("--length-quantile is the quantile of learned lengths; --lengths submitted plans none (leave one of them out)")
    if given is not None:
        return days, lengths, check_quantile(given, "--length-quantile")
    return days, lengths, settings.jobs.length_quantile if settings is not None else defaults.LENGTH_QUANTILE


def _twin_inputs(request: ReplayRequest, settings: Settings):
    """(the TwinConfig, the --carbon signal) of a replay on the twin, (None, None) on the instant
    cluster or EMR; checked before any work. The twin is the default, unless the config names an
    endpoint on this machine (EMR in moto: :func:`replay_on_emr`). Raises ConfigError naming the flag:
    a twin flag with ``--cluster instant`` or on EMR, a value out of range, a --carbon that is a
    price; TraceError for a --carbon that cannot be read."""
    chosen = request.cluster
    if chosen == "instant" or (chosen is None and replay_on_emr(settings)):
        flags = request.twin.config_fields()
        carbon_flags = {"--carbon": request.twin.carbon, "--carbon-unit": request.twin.carbon_unit}
        given = [TWIN_FLAGS[name] for name, value in flags.items() if value is not None] + [flag for flag, value in carbon_flags.items() if value is not None]
        if given:
            where = "--cluster instant" if chosen == "instant" else f"EMR at {settings.cluster.endpoint_url} (the config's endpoint_url)"
            raise ConfigError(f"{', '.join(given)}: for the cluster twin only, and this replay runs on {where}; leave them out or give --cluster twin")
        return None, None
    return twin_inputs(request.twin, settings)


def replay_on_emr(settings: Settings | None) -> bool:
    """Whether a replay without --cluster runs on EMR: the config's endpoint_url is on this machine (moto)."""
    from urllib.parse import urlparse

    endpoint = settings.cluster.endpoint_url if settings is not None else None
    return bool(endpoint) and urlparse(endpoint).hostname in ("127.0.0.1", "localhost", "::1")


def twin_inputs(flags: TwinFlags, settings: Settings | None):
    """(the TwinConfig of ``flags`` and the settings' power model, the --carbon signal in
    gCO2eq/kWh or None), checked before any work: ConfigError naming the flag and the value, a
    --carbon that is a price or a --carbon-unit without --carbon; TraceError for an unreadable --carbon."""
    from autoscaler.app import compose

    twin = compose.twin_config(settings, **flags.config_fields())
    source, unit = flags.carbon, flags.carbon_unit
    if source is None:
        if unit is not None:
            raise ConfigError("--carbon-unit without --carbon: give the signal with --carbon SOURCE")
        return twin, None
    from autoscaler.adapters.signal_source import load_signal
    from autoscaler.core.energy.signal import in_grams

    signal = load_signal(source, unit, unit_name="--carbon-unit", flag="--carbon")
    if signal.unit not in ("gCO2eq/kWh", "lbs/MWh"):
        raise ConfigError(f"--carbon {signal.source}: its unit is {signal.unit}; the twin's bill needs a carbon intensity (gCO2eq/kWh or lbs/MWh)")
    return twin, in_grams(signal)


def twin_bill_table(bill, twin, carbon, slot_s: float) -> Table:
    """The twin's bill as a table: node-hours billed and by state, $, kWh, kgCO2 (with ``carbon``: a
    Signal in gCO2eq/kWh whose first time is the replay's time 0), jobs killed and run again, jobs
    that finished after their deadline, wait from submit to start, peak nodes, scale events."""
    from autoscaler.core.signal_slots import covered_means

    table = Table(
        title=(
            f"the cluster twin's bill: provision {twin.provision_s:g} s, decommission timeout {twin.decommission_timeout_s:g} s, "
            f"length error sigma {twin.length_error_sigma:g} (seed {twin.seed}), {twin.step_concurrency} steps at once, "
            f"${twin.price_per_node_hour:g}/node-hour"
        )
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    hours = {state: seconds / 3600.0 for state, seconds in bill.state_node_s.items()}
    table.add_row("node-hours billed (per second, 60 s minimum)", f"{bill.billed_node_s / 3600:,.2f}")
    table.add_row("  booting, idle, busy node-hours", f"{hours['booting']:,.2f}, {hours['idle']:,.2f}, {hours['busy']:,.2f}")
    table.add_row("utilisation (busy node-hours / billed)", f"{100 * bill.utilisation:.1f} %")
    table.add_row("cost, $", f"{bill.cost_usd:,.2f}")
    table.add_row("energy, kWh", f"{bill.energy_wh / 1000:,.3f}")
    if carbon is not None:
        end_s = max((job[5] for job in bill.jobs if job[5] is not None), default=0.0)
        n_slots = max(1, math.ceil(max(end_s, max((i[1] for i in bill.power_intervals), default=0.0)) / slot_s))
        values = covered_means(carbon, float(carbon.times_s[0]), slot_s, n_slots)
        kg, uncovered = bill.carbon_kg(0.0, slot_s, values)
        table.add_row("CO2, kg" + (f" (over the slots --carbon covers; {uncovered:,} slots used energy outside it)" if uncovered else ""), f"{kg:,.3f}")
    ended = [job for job in bill.jobs if job[5] is not None]
    # The replay submits a job at the start of the slot its submit time is in, so its wait runs from there.
    waits = np.array([job[4] - math.floor(job[2] / slot_s) * slot_s for job in ended]) if ended else np.zeros(1)
    table.add_row("jobs run", f"{len(bill.jobs):,}")
    table.add_row("jobs finished after their deadline", f"{sum(1 for job in ended if job[5] > job[6] + 1e-9):,}")
    table.add_row("wait from submit (its slot's start) to start, p50 / p95, s", f"{np.percentile(waits, 50):,.0f} / {np.percentile(waits, 95):,.0f}")
    table.add_row("jobs killed at the decommission timeout (runs), run again (jobs)", f"{bill.jobs_killed:,}, {bill.jobs_rerun:,}")
    table.add_row("peak nodes, scale events", f"{bill.peak_nodes:,}, {bill.scale_events:,}")
    return table


def replay_end_slot(horizon: int) -> int:
    """One past the last slot a replay may decide: its horizon, and as long again for the
    jobs still queued at its end (all late by then: every deadline is within the horizon)."""
    return 2 * horizon


def node_slots(job: Job, slot_s: float) -> int:
    """Node-slots a released job holds: its length in slots, at least the one it is released in, on
    each of its w nodes (``Job.nodes``)."""
    return max(1, math.ceil(job.length_s / slot_s)) * job.nodes


def deadline_nodes_needed(jobs: list[Job], slot_s: float) -> int:
    """A lower bound on the nodes that meet every deadline: the most node-slots due by a slot,
    over the slots from the first submission to it (the prefix density; jobs hold whole nodes
    and cannot be split, so more may be needed)."""
    if not jobs:
        return 0
    first_slot = min(math.floor(job.submit_s / slot_s) for job in jobs)
    due = sorted((math.ceil(job.deadline_s / slot_s), node_slots(job, slot_s)) for job in jobs)
    work = 0
    needed = 0.0
    for deadline_slot, held in due:
        work += held
        needed = max(needed, work / max(1, deadline_slot - first_slot))
    return math.ceil(needed - 1e-9)


def check_drain(
    waiting: list[Job], running: list[Job], slot: int, end_slot: int, horizon: int, max_nodes: int, slot_s: float, deadline_cap: int,
    cap_flag: str = "--max-nodes",
) -> None:
    """Raise ConfigError when the jobs not yet released (``waiting``) cannot all be released by
    ``end_slot`` on ``max_nodes`` nodes.

    Jobs hold their w nodes for ``node_slots``; ``running`` ones hold theirs until they end. For
    the slots from now, and from each later submit slot r on, the node-slots of the jobs that
    can only run there must fit in max_nodes x the slots to ``end_slot``. The message names
    --max-nodes, the least cap that could release every job in time, and ``deadline_cap``, a
    lower bound on the cap that meets every deadline; ``cap_flag`` is the flag that set the cap
    (--step-concurrency on a twin that runs fewer steps at once than --max-nodes).
    """
    busy = sum(max(0, math.ceil((job.released_s + job.length_s) / slot_s) - slot) * job.nodes for job in running if job.released_s is not None)
    by_release: dict[int, list[int]] = {}
    for job in waiting:
        by_release.setdefault(max(slot, math.floor(job.submit_s / slot_s)), []).append(node_slots(job, slot_s))
    windows = []  # (first slot, jobs, node-slots) of every window [r, end_slot)
    jobs_from = work_from = 0
    for release in sorted(by_release, reverse=True):
        jobs_from += len(by_release[release])
        work_from += sum(by_release[release])
        if release > slot:
            windows.append((release, jobs_from, work_from))
    windows.append((slot, jobs_from, work_from + busy))
    _refuse_if_short(windows, len(running) if busy else 0, slot, end_slot, horizon, max_nodes, deadline_cap, cap_flag)


class _DrainCheck:
    """``check_drain`` slot after slot at the cost of the jobs in the store: the windows that
    start at a later submit slot hold only jobs not yet submitted, so they are checked once,
    before the first slot; each slot then checks the window from now."""

    def __init__(self, jobs: list[Job], end_slot: int, horizon: int, max_nodes: int, slot_s: float, cap_flag: str = "--max-nodes") -> None:
        self._cap_flag = cap_flag
        self._held = [node_slots(job, slot_s) for job in jobs]
        self._left = list(itertools.accumulate(reversed(self._held)))[::-1] + [0]  # node-slots of jobs[i:]
        self._end, self._horizon, self._max_nodes, self._slot_s = end_slot, horizon, max_nodes, slot_s
        self._held_by_id = {job.job_id: held for job, held in zip(jobs, self._held)}
        self.deadline_cap = deadline_nodes_needed(jobs, slot_s)
        self._first_slot: int | None = None
        self._jobs = jobs

    def __call__(self, slot: int, submitted: int, active_jobs) -> None:
        """Check slot ``slot`` with ``jobs[:submitted]`` in the store; ``active_jobs()`` lists the
        store's active jobs, asked for only when the trace's work might not fit any more."""
        if self._first_slot is None:
            self._first_slot = slot
            active = active_jobs()
            check_drain(
                [job for job in active if job.state == JobState.QUEUED] + self._jobs[submitted:],
                [job for job in active if job.state != JobState.QUEUED],
                slot, self._end, self._horizon, self._max_nodes, self._slot_s, self.deadline_cap, self._cap_flag,
            )  # fmt: skip
            return
        if self._left[0] <= self._max_nodes * (self._end - slot):
            return  # all of the trace's node-slots fit in what is left, whatever has run
        active = active_jobs()
        queued = [job for job in active if job.state == JobState.QUEUED]
        running = [job for job in active if job.state != JobState.QUEUED and job.released_s is not None]
        busy = sum(max(0, math.ceil((job.released_s + job.length_s) / self._slot_s) - slot) * job.nodes for job in running)
        work = sum(self._held_by_id.get(job.job_id, node_slots(job, self._slot_s)) for job in queued) + self._left[submitted] + busy
        count = len(queued) + len(self._jobs) - submitted
        _refuse_if_short([(slot, count, work)], len(running) if busy else 0, slot, self._end, self._horizon, self._max_nodes, self.deadline_cap, self._cap_flag)


def _refuse_if_short(
    windows: list[tuple[int, int, int]], running: int, slot: int, end_slot: int, horizon: int, max_nodes: int, deadline_cap: int,
    cap_flag: str = "--max-nodes",
) -> None:
    """ConfigError when some window [first, end_slot) holds more node-slots than max_nodes can run."""
    needed = max(math.ceil(work / max(1, end_slot - first)) for first, _, work in windows)
    if needed <= max_nodes:
        return
    first, count, work = max(windows, key=lambda window: window[2] / max(1, end_slot - window[0]))
    when = "before its first slot" if slot == 0 else f"at slot {slot}"
    if first == slot:
        what = f"{count:,} jobs not yet released" + (f" and {running:,} running" if running else "") + f" hold {work:,} node-slots"
    else:
        what = f"{count:,} jobs submitted from slot {first:,} on hold {work:,} node-slots"
    raise ConfigError(
        f"run --replay: under {cap_flag} {max_nodes:,} the queue cannot drain ({when}): {what}, more than "
        f"{max_nodes:,} {'node(s)' if cap_flag == '--max-nodes' else 'step(s) at once'} x the {end_slot - first:,} slots from slot {first:,} to {end_slot:,} (the horizon of "
        f"{horizon:,} slots and as long again for late jobs); fewer than {cap_flag} {needed:,} cannot release them all "
        f"by then (a lower bound: jobs hold whole nodes for whole slots, so a few more may be needed), and meeting every "
        f"deadline takes at least {cap_flag} {deadline_cap:,}"
    )


class _StopSignal:
    """Within ``with``: SIGTERM asks the replay to stop after the slot it is in (the store keeps
    every slot decided). The previous handler is put back on leaving."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self.signal_number = 0
        self._previous = None

    def __enter__(self) -> "_StopSignal":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._stop)
        return self

    def __exit__(self, *exc_info) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)

    def _stop(self, signum, _frame) -> None:
        self.signal_name = signal.Signals(signum).name
        self.signal_number = signum

    def sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, less if a stop is asked for; True if one was."""
        until = time.monotonic() + seconds
        while not self.signal_name and (left := until - time.monotonic()) > 0:
            time.sleep(min(left, 0.2))
        return self.signal_name is not None


def _kept(store_path, request: ReplayRequest) -> str:
    """Where the slots decided so far are, for a replay that stops early."""
    if store_path is None:
        return "a dry run keeps no store"
    if request.store is None and not request.keep_store:
        return "its temporary store is removed (keep one with --store or --keep-store)"
    return f"the slots decided are in {store_path}"


def _foreign_jobs(store, jobs: list[Job]) -> bool:
    """Whether the store holds a job the trace does not (a daemon's store, not a replay's)."""
    ids = {job.job_id for job in jobs}
    return any(job.job_id not in ids for job in store.jobs_after(0))


def _queued(runner: SlotRunner, store) -> int:
    """Jobs queued: the runner's queue once it has run a slot, else the store's."""
    if runner.queue is not None:
        return runner.queue.queued_count
    return sum(job.state == JobState.QUEUED for job in store.active_jobs())


def _released_as_decided(jobs: list[Job], decisions: list[Decision], slot_s: float) -> list[Job]:
    """The replay's jobs with what its decisions did to them: released at the start of the slot that
    released them, or still queued; what lateness (``autoscaler.core.lateness``) needs."""
    released_in = {job_id: d.slot for d in decisions for job_id in d.release}
    return [
        dataclasses.replace(job, state=JobState.RELEASED, released_s=released_in[job.job_id] * slot_s) if job.job_id in released_in else job
        for job in jobs
    ]


def _record_last_runs(cluster: TwinCluster, store) -> None:
    """The runs that ended after the replay's last slot (the twin ran them to their end), into the store
    with their jobs done, as the next slot of a daemon would: the store then holds every run of the replay."""
    # The finished twin is read as it is: its time is past the clock's now, which cluster.steps() would replay to.
    runs = {step.job_id: (step.start_s, step.end_s) for step in cluster.twin.steps.values() if step.end_s is not None}
    if runs:
        # Runs before states: the shadow store (a dry run) keeps a run only for a job it still holds.
        store.set_runs(runs)
        store.set_states(dict.fromkeys(runs, JobState.DONE))


def overran_jobs(bill, store, jobs: list[Job]) -> set[str] | None:
    """Job ids of the replay's jobs that ended after their deadline: from the twin's bill (every run,
    to the end), else from the run times the store recorded; None when neither says (no job ran)."""
    if bill is not None:
        return {job[1] for job in bill.jobs if job[5] is not None and job[5] > job[6]}
    ids = {job.job_id for job in jobs}
    stored = [job for job in store.all_jobs() if job.job_id in ids and job.run_end_s is not None]
    return {job.job_id for job in stored if job.overran} if stored else None


def _tenant_table(jobs: list[Job], late: dict[str, int], decisions: list[Decision], state: dict, overran: set[str] | None = None) -> Table:
    """Per tenant: jobs, late jobs (``late``: {job id: slots late}, see autoscaler.core.lateness), jobs that
    overran (``overran``: job ids that ended after their deadline; None: not known), node-slots held in
    overloaded slots, dominant share."""
    overloaded_node_slots: dict[str, int] = {}
    for decision in decisions:
        if decision.overloaded:
            for tenant, nodes in decision.nodes_by_tenant.items():
                overloaded_node_slots[tenant] = overloaded_node_slots.get(tenant, 0) + nodes
    shares = dict(zip(state.get("tenants", []), state.get("dominant_shares", [])))
    table = Table(title="tenants (dynamic DRF shares divide the nodes in overloaded slots)")
    for column in ("tenant", "jobs", "late (missed deadline)", "overran (ended after deadline)", "node-slots when overloaded", "dominant share"):
        table.add_column(column, justify="left" if column == "tenant" else "right")
    counts: dict[str, int] = {}
    missed: dict[str, int] = {}
    for job in jobs:
        counts[job.tenant] = counts.get(job.tenant, 0) + 1
        missed[job.tenant] = missed.get(job.tenant, 0) + (late.get(job.job_id, 0) > 0)
    arrival = {tenant: i for i, tenant in enumerate(state.get("tenants", []))}
    for tenant in sorted(counts, key=lambda t: (arrival.get(t, len(arrival)), t)):
        share = shares.get(tenant)
        table.add_row(
            tenant,
            f"{counts[tenant]:,}",
            f"{missed.get(tenant, 0):,}",
            "" if overran is None else f"{sum(1 for job in jobs if job.tenant == tenant and job.job_id in overran):,}",
            f"{overloaded_node_slots.get(tenant, 0):,}",
            "" if share is None else f"{share:.4f}",
        )
    return table
