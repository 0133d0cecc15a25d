"""`autoscaler run --replay TRACE`: the live slot loop, driven from a recorded trace with a simulated clock.

Jobs enter the store at their trace submit times (idempotently, so a restarted replay
resumes where the store left off), the same :class:`~autoscaler.app.daemon.SlotRunner` decides
each slot, and the cluster is the in-memory fake, the cluster twin (``--cluster twin``), or EMR
(moto) when the config names an endpoint. At the end the capacity m_t of every slot is compared
with what ``autoscaler replay`` computes for the same policy and D, and the twin's bill is printed.

The trace's jobs are made in :mod:`autoscaler.app.replay_jobs`, the queue's drain is checked in
:mod:`autoscaler.app.replay_drain`, and the twin's flags and bill are :mod:`autoscaler.app.cluster_twin`
(``compare`` shares the first and the last).

About 600 lines, one module: the replay's set-up, its run and its report share the request, the
store and the twin they were made with; the parts that stand alone are already modules of their own.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
from autoscaler.app.cluster_twin import TwinFlags, record_last_runs, replay_twin_inputs, twin_bill_table
from autoscaler.app.compare import polls_between_slots
from autoscaler.app.config import Settings
from autoscaler.app.daemon import DecisionsFile, SlotRunner
from autoscaler.app.replay_drain import DrainCheck
from autoscaler.app.replay_jobs import trace_jobs, within_window
from autoscaler.app.traces import open_trace
from autoscaler.core import defaults
from autoscaler.core.controller import ControllerConfig, Decision
from autoscaler.core.energy.accounting import whole_nodes
from autoscaler.core.energy.signal import Signal
from autoscaler.core.errors import ConfigError
from autoscaler.core.lateness import LATE_HELP, slots_late
from autoscaler.core.learned import LENGTH_SOURCES, check_quantile, planned, quantile_label
from autoscaler.core.model import Job, JobState, Workload
from autoscaler.core.policies import REPLAY_COMPARED_POLICIES, plan
from autoscaler.core.ports import Cluster, JobStore
from autoscaler.core.readable import count_text
from autoscaler.core.recurring import repeat_days
from autoscaler.core.release import MAX_ACTIVE_STEPS
from autoscaler.core.replay import require_deadline_within_window
from autoscaler.core.slot_work import node_seconds_active
from autoscaler.core.twin import TwinBill, TwinConfig
from autoscaler.core.workload import read_swim, workload_from_trace


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
    checked before any work: the first two as :func:`~autoscaler.app.cluster_twin.replay_twin_inputs`
    (None, None off the twin), the last ``settings`` with the request's policy, D, max nodes and tenants
    (and the twin's price per node-hour).
    Raises ConfigError naming the flag for a value out of range or flags that do not go together;
    TraceError for a --carbon that cannot be read."""
    from autoscaler.app import compose

    twin, carbon = replay_twin_inputs(request.twin, request.cluster, settings)
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
    from autoscaler.app.cli.arguments import costs_text, with_flagged_notes

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
    # Jobs after the first day are left out of a repeated day before the window sees them: counted here.
    beyond_day = sum(1 for job in trace.jobs if job.submit_s >= day_s) if days > 1 else 0
    trace, names = repeat_days(trace, days, day_s)
    workload = with_flagged_notes(workload_from_trace(
        trace, slot_s=slot_s, window_slots=None if days == 1 else days * round(86400 / slot_s), containers_per_node=request.containers_per_node
    ))
    for warning in workload.notes:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    left_out = []
    if workload.jobs_after_window:
        left_out.append(f"{count_text(workload.jobs_after_window, 'job')} submitted after the window's end left out")
    if beyond_day:
        left_out.append(f"{count_text(beyond_day, 'job')} submitted after the trace's first day left out (--days repeats that day)")
    if workload.clipped_jobs:
        are = "are" if workload.clipped_jobs != 1 else "is"
        left_out.append(
            f"{count_text(workload.clipped_jobs, 'job')} ran past the window's end and {are} cut there "
            "(each is submitted with its length to the end), as replay clips them"
        )
    if left_out:
        err.print(f"note: {'; '.join(left_out)}", markup=False, highlight=False, soft_wrap=True)
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
    queued; ``check`` refuses a queue that cannot drain by then. ``poll_s``: ``release_poll_s``, how
    often between slots the runner adds the jobs a slot held back for EMR's step limit (0: never)."""

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
    check: DrainCheck
    poll_s: float = 0.0


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
    narrow = all(job.nodes == 1 for job in trace.jobs)
    if twin is not None and twin.step_concurrency < max_nodes and narrow:
        cap, cap_flag = twin.step_concurrency, "--step-concurrency"
        config = dataclasses.replace(config, max_nodes=cap)
    runner = compose.runner(settings, config, store, cluster, clock, dry_run=request.dry_run, on_decision=decisions_file, retention_s=None)
    horizon = trace.window_slots + config.deadline_slots
    end_slot = replay_end_slot(horizon)
    # EMR's steps at once: the twin's, else the limit the daemon keeps to (256 PENDING and RUNNING).
    step_limit = (twin.step_concurrency if twin is not None else MAX_ACTIVE_STEPS) if narrow else None
    check = DrainCheck(trace.jobs, end_slot, horizon, cap, config.slot_s, cap_flag, step_limit)
    return _ReplayLoop(
        store, store_path, kept, clock, cluster, runner, config, max_nodes, first_slot, horizon, end_slot, check, settings.release_poll_s
    )


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
    (``DrainCheck``); on Ctrl-C prints the last slot decided and raises KeyboardInterrupt."""
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
                _polls_for_steps(loop, (slot + 1) * slot_s)
                progress.advance(task)
                slot += 1
                if stop.sleep(slot_s / speedup):
                    break
        except KeyboardInterrupt:
            err.print(f"run --replay: interrupted after slot {slot - 1}; {loop.kept}", highlight=False)
            raise
    return _SlotsRun(slot - 1, stop.signal_name, stop.signal_number, time.perf_counter() - started)


def _polls_for_steps(loop: _ReplayLoop, boundary_s: float) -> None:
    """The daemon's polls between a slot and the next boundary while the slot held jobs back for EMR's
    step limit (``compare.polls_between_slots`` with no job to submit: the replay's jobs reach the
    store per slot)."""
    polls_between_slots(loop.runner, loop.store, loop.clock, (), 0, boundary_s, loop.poll_s)


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
    # The trace's jobs as the decisions released them (the store holds the same; reading it back costs
    # more), and as the polls between slots did (read back only when any did).
    between = {}
    if _any_between(jobs, decisions):
        between = {job.job_id: job.released_s for job in store.all_jobs() if job.released_s is not None}
    stored_jobs = _released_as_decided(jobs, decisions, loop.config.slot_s, between)
    last_slot = store.last_slot()
    late = {job.job_id: slots_late(job, loop.config, loop.clock.time_s, last_slot) for job in stored_jobs}
    bill = None
    if isinstance(loop.cluster, TwinCluster):
        bill = loop.cluster.finish()
        record_last_runs(loop.cluster, store)
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
    table.add_row("jobs released", f"{sum(1 for job in outcome.jobs if job.released_s is not None):,}")
    table.add_row("jobs late (missed their deadline)", f"{sum(1 for n in late.values() if n):,}")
    overran = outcome.overran
    table.add_row("jobs overran (ended after their deadline)", f"{len(overran):,}" if overran is not None else "not known (no run times)")
    learned = sum(1 for job in jobs if job.prior_length_s is not None)
    table.add_row(
        f"lengths planned ({trace.lengths})",
        f"{learned:,} learned ({quantile_label(trace.quantile)} of the name's past runs), {len(jobs) - learned:,} as submitted",
    )
    planned = loop.config.max_nodes
    cap_text = f"max nodes {loop.max_nodes:,}" + (f"; planned with {planned:,}, the steps EMR runs at once" if planned < loop.max_nodes else "")
    table.add_row(
        "slots overloaded (the cap binds now, or ahead: the queued work cannot all start by its start-by slots)",
        f"{sum(d.overloaded for d in decisions):,} ({cap_text})",
    )
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


def replay_end_slot(horizon: int) -> int:
    """One past the last slot a replay may decide: its horizon, and as long again for the
    jobs still queued at its end (all late by then: every deadline is within the horizon)."""
    return 2 * horizon


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


def _released_as_decided(jobs: list[Job], decisions: list[Decision], slot_s: float, between: dict[str, float] | None = None) -> list[Job]:
    """The replay's jobs with what its decisions did to them: released at the start of the slot that
    released them, or between slots (``between``: {job id: released_s} as the store recorded it, for
    the jobs no decision released), or still queued; what lateness (``autoscaler.core.lateness``) needs."""
    released_s = {job_id: d.slot * slot_s for d in decisions for job_id in d.release}
    for job_id, at_s in (between or {}).items():
        released_s.setdefault(job_id, at_s)
    return [
        dataclasses.replace(job, state=JobState.RELEASED, released_s=released_s[job.job_id]) if job.job_id in released_s else job
        for job in jobs
    ]


def _any_between(jobs: list[Job], decisions: list[Decision]) -> bool:
    """Whether some job was released by no decision: then it was released between slots, or never."""
    return sum(len(d.release) for d in decisions) < len(jobs)


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
