"""`autoscaler compare`: every policy and every baseline on the same cluster twin and the same jobs.

The product's policies run through the daemon's own slot loop (:class:`~autoscaler.app.daemon.SlotRunner`
on a shadow store, a simulated clock and :class:`~autoscaler.adapters.twin.TwinCluster`), the way
``run --replay --dry-run`` does, except that a job enters the store at the daemon's first poll at or
after its submit time, as a live daemon sees it (a job cannot start before it is submitted), and one
already due is released there (``SlotRunner.release_between_slots``). The
baselines an operator would run instead (``fixed``, ``managed``, ``managed-dampened``, ``custom-rules``,
:mod:`autoscaler.core.baselines`) play on the twin directly; ``bound`` is the offline LP with the
twin's costs (:mod:`autoscaler.core.twin_bound`). Each (run, deadline) is one task; tasks run in
worker processes, each given the inputs once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import numpy as np

from autoscaler.core.baselines import BASELINES as BASELINE_NAMES
from autoscaler.core.baselines import MANAGED_DAMPEN_S, nodes_over_time
from autoscaler.core.compare import TwinFigures, cumulative_use, twin_figures
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job
from autoscaler.core.policies import ONLINE_POLICIES, POLICY_TABLE
from autoscaler.core.readable import count_text
from autoscaler.core.twin import ClusterTwin, TwinConfig

BOUND = "bound"
DEFAULT_RUNS = (*ONLINE_POLICIES, *BASELINE_NAMES, BOUND)
"""What compare runs unless told: every policy the daemon runs, every baseline, and the bound."""


@dataclass(frozen=True)
class CompareInputs:
    """What every task needs, given to each worker once: the trace's jobs (submit times from the
    trace's start; ``deadline_s`` = submit + length, the deadline at D = 0: :meth:`jobs_at` adds D), its window in slots, the settings (the controller's and the power model), the
    twin, the node range, the carbon signal per slot (None: no kgCO2), fixed's size (None: the
    smallest that meets every deadline) and managed-dampened's wait, s."""

    jobs: tuple[Job, ...]
    window_slots: int
    settings: object
    twin: TwinConfig
    min_nodes: int
    max_nodes: int
    g_per_kwh: np.ndarray | None = None
    fixed_nodes: int | None = None
    managed_dampen_s: float = MANAGED_DAMPEN_S

    def jobs_at(self, deadline_slots: int) -> tuple[Job, ...]:
        """The jobs with D slots of slack: deadline = submit + length + D x slot_s."""
        slack_s = deadline_slots * self.settings.slot_s
        return tuple(dataclasses.replace(job, deadline_s=job.deadline_s + slack_s) for job in self.jobs)


@dataclass(frozen=True)
class RunResult:
    """One task's result: the figures, the nodes up over time (times_s, nodes), the kWh (and
    kgCO2eq) used up to the end of each slot (None for the bound); ``note``: what an operator should
    know of it. A run that could not finish has ``figures`` None and says why in ``error``."""

    name: str
    deadline_slots: int
    figures: TwinFigures | None
    nodes: tuple[np.ndarray, np.ndarray] | None = None
    cumulative_kwh: np.ndarray | None = None
    cumulative_co2_kg: np.ndarray | None = None
    note: str | None = None
    error: str | None = None


class QueueNotDrained(ConfigError):
    """A policy's slot loop still had jobs queued at twice its horizon (a cap it cannot drain under)."""


BOUND_NOTE = (
    "the offline LP (3) with the twin's costs, fractional nodes and every job known in advance: "
    "no run that meets every deadline can do better"
)

BOUND_SLOTS_PER_WINDOW = 10
"""The bound's LP runs over at most this many windows (work of jobs running past them counts at its
busy cost only, which keeps it a bound): a job 5 sigma longer than estimated is not an LP of millions of slots."""


def check_runs(names: Sequence[str]) -> list[str]:
    """The run names, in compare's order, checked: ConfigError naming --policy and the choices, or a name given twice."""
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"--policy: {', '.join(repeated)} given more than once; give each run once")
    unknown = [name for name in names if name not in DEFAULT_RUNS]
    if unknown or not names:
        raise ConfigError(f"--policy: expected a comma list of {', '.join(DEFAULT_RUNS)} or 'all', got {', '.join(unknown) or 'nothing'}")
    return [name for name in DEFAULT_RUNS if name in names]


def policy_on_twin(inputs: CompareInputs, policy: str, deadline_slots: int) -> ClusterTwin:
    """``policy`` through the daemon's slot loop on a fresh twin; returns the twin after every job has
    ended and every node is gone. The controller counts the twin's ``provision_s`` in its release
    margin (``ControllerConfig.due_margin_slots``). A job is submitted at the daemon's first poll at or
    after its submit time (``polls_between_slots``; with ``release_poll_s`` 0, the first slot start), and
    released there if it is due; the loop runs until the horizon (window + D) and on while jobs are queued, at most as long
    again (``replay_daemon.replay_end_slot``; ConfigError beyond)."""
    from autoscaler.adapters.twin import TwinCluster
    from autoscaler.app import compose
    from autoscaler.app.replay_daemon import replay_end_slot

    settings = inputs.settings
    jobs = inputs.jobs_at(deadline_slots)
    # The daemon plans with the nodes the steps can use: EMR runs at most step_concurrency steps at
    # once, so nodes beyond them idle (a 2-day load at 500 nodes and 256 steps: hold asked for all 500
    # through its peaks, 244 of them idle, +39 % kWh against managed scaling).
    config = compose.controller_config(
        settings,
        policy=policy,
        deadline_slots=deadline_slots,
        max_nodes=usable_nodes(jobs, inputs.max_nodes, inputs.twin.step_concurrency),
        price_per_node_hour=inputs.twin.price_per_node_hour,
    )
    # The daemon is told how long the twin's nodes take to boot, as an operator sets provision_s for EMR.
    config = dataclasses.replace(config, provision_s=inputs.twin.provision_s)
    slot_s = config.slot_s
    with contextlib.ExitStack() as stack:
        store = compose.replay_store(None, stack)
        clock = compose.replay_clock(0.0)
        cluster = TwinCluster(clock, inputs.twin)
        runner = compose.runner(settings, config, store, cluster, clock, dry_run=True, retention_s=None)
        horizon = inputs.window_slots + deadline_slots
        submitted = 0
        for slot in range(max(replay_end_slot(horizon), drain_end_slot(horizon, jobs, inputs.twin, inputs.max_nodes, slot_s))):
            clock.time_s = slot * slot_s
            arriving = submitted
            while submitted < len(jobs) and jobs[submitted].submit_s <= clock.time_s:
                submitted += 1
            if submitted > arriving:
                store.submit_many(list(jobs[arriving:submitted]))
            # Jobs a poll of the slot before put in the store are queued too: the runner reads them at its next slot.
            if slot >= horizon and submitted == len(jobs) and (runner.queue is None or not runner.queue.queued_count) and not runner.unread:
                break
            runner.run_slot()
            submitted = polls_between_slots(runner, store, clock, jobs, submitted, (slot + 1) * slot_s, settings.release_poll_s)
        else:
            raise QueueNotDrained(
                f"{runner.queue.queued_count if runner.queue else 0:,} jobs still queued at slot {slot:,}, past the horizon of "
                f"{horizon:,} slots and twice the slots their work takes at the cap: {inputs.max_nodes:,} nodes (--max-nodes) "
                f"and {inputs.twin.step_concurrency} steps at once (--step-concurrency) cannot run them"
            )
        cluster.finish()
        return cluster.twin


def polls_between_slots(runner, store, clock, jobs: Sequence[Job], submitted: int, boundary_s: float, poll_s: float) -> int:
    """The daemon's polls between a slot and the next boundary (``boundary_s``), as ``run`` makes them
    every ``poll_s`` (``release_poll_s``; 0: none): at each poll time (a multiple of ``poll_s``) before
    the boundary by which jobs were submitted, those jobs enter ``store`` and the runner releases the
    ones that cannot wait (``SlotRunner.release_between_slots``). ``jobs[submitted:]`` are the jobs
    not yet in the store, by submit time; returns the new count submitted. While the runner holds
    jobs back for EMR's step limit (``SlotRunner.holds_for_steps``) it polls at every multiple of
    ``poll_s``, submitted jobs or not, as ``run`` does, so that steps that ended make room."""
    if poll_s <= 0:
        return submitted
    while True:
        poll_at_s = math.inf
        if submitted < len(jobs):
            poll_at_s = math.ceil(jobs[submitted].submit_s / poll_s) * poll_s
            if poll_at_s < jobs[submitted].submit_s:  # rounded below it (63 s at polls of 0.7 s: 62.99999999999999)
                poll_at_s += poll_s
        if getattr(runner, "holds_for_steps", False):
            poll_at_s = min(poll_at_s, (math.floor(clock.time_s / poll_s + 1e-9) + 1) * poll_s)
        if poll_at_s >= boundary_s:
            break
        first = submitted
        while submitted < len(jobs) and jobs[submitted].submit_s <= poll_at_s:
            submitted += 1
        clock.time_s = max(clock.time_s, poll_at_s)
        if submitted > first:
            store.submit_many(list(jobs[first:submitted]))
        runner.release_between_slots()
    return submitted


def usable_nodes(jobs: Sequence[Job], max_nodes: int, step_concurrency: int) -> int:
    """The most nodes the jobs can keep busy at once: ``max_nodes``, or fewer when EMR's step
    concurrency binds first (at most that many steps running, each on its w nodes)."""
    widest = max((job.nodes for job in jobs), default=1)
    return max(1, min(max_nodes, step_concurrency * widest))


def drain_end_slot(horizon: int, jobs: Sequence[Job], twin: TwinConfig, max_nodes: int, slot_s: float) -> int:
    """One past the last slot compare lets a policy's loop decide: the horizon, then as long again or
    twice the node-slots of the jobs' true work (each job its true length, ``TwinConfig.true_length_s``,
    in whole slots, at least one, on w nodes: the paper's job-slots model holds a node a slot per job)
    over the usable nodes (``usable_nodes``), whichever is longer. A cluster capped below the load
    drains for as long as the work needs (EMR managed scaling, which releases every job at once, runs
    to the end); only a loop that stops releasing is cut."""
    node_slots = sum(max(1, math.ceil(twin.true_length_s(job.name, job.submitted_length_s, job.job_id) / slot_s)) * job.nodes for job in jobs)
    cap = usable_nodes(jobs, max_nodes, twin.step_concurrency)
    return horizon + max(horizon, 2 * math.ceil(node_slots / cap))


def run_task(inputs: CompareInputs, name: str, deadline_slots: int) -> RunResult:
    """One run of compare: a policy (the slot loop), a baseline, or the bound, at D slots. A policy
    that cannot drain its queue gives a result with its ``error``, not an exception."""
    slot_s = inputs.settings.slot_s
    jobs = inputs.jobs_at(deadline_slots)
    if name == BOUND:
        return _bound(inputs, jobs, deadline_slots)
    note = None
    if name in BASELINE_NAMES:
        from autoscaler.core.baselines import run_baseline, smallest_fixed_nodes

        fixed_nodes = None
        if name == "fixed":
            fixed_nodes, meets = inputs.fixed_nodes, True
            if fixed_nodes is None:
                fixed_nodes, meets = smallest_fixed_nodes(jobs, inputs.twin, max_nodes=inputs.max_nodes, start_s=0.0)
            note = f"{count_text(fixed_nodes, 'node')} always on" + ("" if meets else f": even --max-nodes {inputs.max_nodes:,} misses a deadline")
        dampen_s = None
        if name == "managed-dampened":
            dampen_s = inputs.managed_dampen_s
            note = f"a step asks for a node once it has waited {inputs.managed_dampen_s:g} s"
        twin = run_baseline(
            name, jobs, inputs.twin, min_nodes=inputs.min_nodes, max_nodes=inputs.max_nodes, start_s=0.0, fixed_nodes=fixed_nodes, dampen_s=dampen_s
        )
    else:
        try:
            twin = policy_on_twin(inputs, name, deadline_slots)
        except QueueNotDrained as exc:
            return RunResult(name, deadline_slots, None, error=str(exc))
    n_slots = max(1, math.ceil(twin.now_s / slot_s))
    g = None if inputs.g_per_kwh is None else _padded(inputs.g_per_kwh, n_slots)
    figures = twin_figures(name, twin, deadline_slots, slot_s, g)
    kwh, kg = cumulative_use(twin, slot_s, n_slots, g)
    return RunResult(name, deadline_slots, figures, nodes_over_time(twin), kwh, kg, note)


def _bound(inputs: CompareInputs, jobs: tuple[Job, ...], deadline_slots: int) -> RunResult:
    """The twin's lower bound over the jobs' whole true work: the LP over the slots their runs cover
    (at most :data:`BOUND_SLOTS_PER_WINDOW` windows), and the work past those at its busy cost alone.
    Slots the carbon signal does not cover count no CO2, as in every run's kgCO2."""
    from autoscaler.core.errors import InfeasibleError
    from autoscaler.core.policies.offline import smallest_max_servers
    from autoscaler.core.twin_bound import twin_load, twin_lower_bound

    slot_s, twin = inputs.settings.slot_s, inputs.twin
    true_s = np.array([twin.true_length_s(job.name, job.submitted_length_s, job.job_id) for job in jobs])
    ends = np.array([job.submit_s for job in jobs]) + true_s
    needed = max(inputs.window_slots, math.ceil(float(ends.max(initial=0.0)) / slot_s))
    n_slots = min(needed, BOUND_SLOTS_PER_WINDOW * inputs.window_slots)
    load = twin_load(jobs, twin, slot_s, 0.0, n_slots)
    weights = None
    if inputs.g_per_kwh is not None:
        weights = np.nan_to_num(_padded(inputs.g_per_kwh, n_slots + deadline_slots), nan=0.0)
    cap = usable_nodes(jobs, inputs.max_nodes, twin.step_concurrency)
    flags = "--max-nodes" if cap == inputs.max_nodes else "--max-nodes and --step-concurrency"

    def raise_to(nodes: int) -> str:
        # The flag that binds is the one to raise: the steps at once when they are fewer than the nodes.
        if cap == inputs.max_nodes:
            return f"--max-nodes {nodes:,} or more"
        steps = math.ceil(nodes / max((job.nodes for job in jobs), default=1))  # each step runs on its w nodes
        if nodes <= inputs.max_nodes:
            return f"--step-concurrency {steps:,} or more"
        return f"--max-nodes {nodes:,} or more and --step-concurrency {steps:,} or more"

    try:
        bound = twin_lower_bound(load, deadline_slots, slot_s, twin, weights, max_nodes=cap)
        note = f"{BOUND_NOTE} within the cap of {count_text(cap, 'usable node')} ({flags})"
    except InfeasibleError:
        needed = math.ceil(smallest_max_servers(load, deadline_slots) - 1e-9)
        bound = twin_lower_bound(load, deadline_slots, slot_s, twin, weights)
        note = (
            f"{BOUND_NOTE}; the deadlines need at least {count_text(needed, 'node')}, more than the cap of {cap:,} "
            f"({flags}): no run within it meets them all, so this bound is without the cap and a run that "
            f"misses deadlines may fall below it; give {raise_to(needed)} (a least cap by LP (3), with nodes "
            "that appear at once: on the twin, whose nodes boot and whose jobs run on whole nodes, a run may need more)"
        )
    beyond_h = max(0.0, float(true_s.sum()) / 3600.0 - float(load.sum()) * slot_s / 3600.0)
    beyond_kwh = beyond_h * twin.busy_power_w / 1000.0
    co2 = bound.co2_kg
    if co2 is not None and beyond_h > 0:
        covered = inputs.g_per_kwh[~np.isnan(inputs.g_per_kwh)]
        co2 += beyond_kwh * (float(covered.min()) / 1000.0 if len(covered) else 0.0)
    figures = TwinFigures(
        BOUND, deadline_slots, bound.node_hours + beyond_h, (bound.node_hours + beyond_h) * twin.price_per_node_hour,
        bound.energy_kwh + beyond_kwh, co2, None, bound.busy_node_hours + beyond_h,
        None, None, None, None, None, None, None, None, None, None, None,
    )  # fmt: skip
    return RunResult(BOUND, deadline_slots, figures, note=note)


def _padded(values: np.ndarray, n: int) -> np.ndarray:
    """``values`` cut or padded with NaN (not covered) to length n."""
    out = np.full(n, np.nan)
    out[: min(n, len(values))] = values[:n]
    return out


def skipped(name: str, deadline_slots: int) -> str | None:
    """Why a policy cannot run at D slots (vfw needs D >= 2), else None."""
    policy = POLICY_TABLE.get(name)
    if policy is not None and deadline_slots < policy.min_deadline_slots:
        return f"{name} left out at D = {deadline_slots}: it needs D >= {policy.min_deadline_slots}"
    return None


_INPUTS: CompareInputs | None = None


def _init_worker(inputs: CompareInputs, log_level: int) -> None:
    from autoscaler.app.logs import configure_logging

    global _INPUTS
    _INPUTS = inputs
    configure_logging(inputs.settings.log_format, level=log_level)


def _task_in_worker(name: str, deadline_slots: int) -> RunResult:
    return run_task(_INPUTS, name, deadline_slots)


def compare(
    inputs: CompareInputs,
    names: Sequence[str],
    deadlines: Sequence[int],
    workers: int | None = None,
    on_done: Callable[[RunResult], None] | None = None,
    log_level: int = logging.ERROR,
) -> dict[tuple[str, int], RunResult]:
    """Every (name, D) of ``names`` x ``deadlines``; {(name, D): RunResult}, in that order. ``workers``:
    processes (None: the machine's cores, at most the tasks; 1: in this process). ``on_done`` is called
    as each task ends (a progress bar). The slot loop logs at ``log_level`` and above (a slot line is
    INFO, an overload WARNING). Errors of a task (ConfigError, InfeasibleError) are raised."""
    from autoscaler.app.logs import configure_logging

    tasks = [(name, d) for d in deadlines for name in names if skipped(name, d) is None]
    workers = min(len(tasks), workers or os.cpu_count() or 1)
    results: dict[tuple[str, int], RunResult] = {}
    if workers <= 1:
        configure_logging(inputs.settings.log_format, level=log_level)
        for name, d in tasks:
            results[(name, d)] = run_task(inputs, name, d)
            if on_done:
                on_done(results[(name, d)])
    else:
        with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(inputs, log_level)) as pool:
            # The slow runs first (the slot loop, the bound's LPs), so the pool ends together.
            order = sorted(tasks, key=lambda task: task[0] in BASELINE_NAMES)
            futures = {pool.submit(_task_in_worker, name, d): (name, d) for name, d in order}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                if on_done:
                    on_done(results[futures[future]])
    return {task: results[task] for task in tasks}
