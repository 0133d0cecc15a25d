"""``autoscaler compare``: what each policy and each baseline an operator would run instead costs, on
the cluster twin, for the same jobs: node-hours, $, kWh, kgCO2, jobs late, waits, nodes."""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from autoscaler.adapters.files import write_all_atomic
from autoscaler.app.cli.arguments import (
    add_containers_argument,
    add_objective_argument,
    add_twin_arguments,
    costs_text,
    non_negative_int,
    parse_deadlines,
    positive_int,
    twin_flags,
    with_flagged_notes,
)
from autoscaler.app.cli.trace_inputs import note_shadowed_file
from autoscaler.app.traces import TRACE_NAMES_HELP
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import DEFAULT_MAX_NODES
from autoscaler.core.readable import count_text, duration_text

DEFAULT_DEADLINES = "30m,2h,6h"


def add_parsers(commands) -> None:
    """The compare command."""
    from autoscaler.app.compare import BASELINE_NAMES, BOUND, DEFAULT_RUNS
    from autoscaler.core.baselines import MANAGED_DAMPEN_S, MANAGED_VARIANTS

    compare = commands.add_parser(
        "compare",
        help="every policy against EMR managed scaling (plain and dampened), a fixed cluster and custom rules, on the cluster twin",
        description="Run the trace's jobs through each policy (the daemon's slot loop) and each baseline an EMR "
        "operator would pick instead, on the same cluster twin (nodes usable --provision-s after the request, "
        "graceful decommission, per-second billing), and print per run and deadline: node-hours, $, kWh, "
        "kgCO2 (with --carbon), jobs released late, jobs finished after their deadline, the wait from submit "
        f"to start, peak nodes and scale events; beside them '{BOUND}', the offline LP with the twin's costs, "
        "which no policy can beat. Baselines: fixed (always on: the fewest nodes that meet every deadline, or "
        "--fixed-nodes), managed (EMR managed scaling: every job released at submission, nodes added for pending "
        "work every 10 s, idle nodes removed), managed-dampened (the same, with a step counted as pending only "
        "once it has waited --managed-dampen-s: EMR Advanced Scaling's utilization-optimized end, approximated), "
        "custom-rules (the console's default rules: +1 node when YARNMemoryAvailablePercentage < 15, -1 when > 75, "
        f"300 s period and cooldown). The (%) are against the strongest managed variant at each deadline: of "
        f"{' and '.join(MANAGED_VARIANTS)}, the one with the least kWh; the table's title names it. When jobs "
        "overran, a second table says why: longer than their deadline allowed from submission, released with "
        "less time left than they ran, or released in time and then waiting for a node (or run again). The "
        "policies start each job early enough for the p99.9 of how far finished runs overran their estimate, "
        "and plan the nodes for the mean of it ([jobs] length_error_quantile in --config; 0 turns both off).",
    )
    compare.add_argument("--trace", default=None, help=f"SWIM trace (.tsv): {TRACE_NAMES_HELP} (default: A)")
    compare.add_argument(
        "--deadline", "-D", default=DEFAULT_DEADLINES,
        help="deadlines: a comma list of durations (30m,2h,6h) or slots, each a whole number of slots of the config's slot_s, or a range of slots like 1-12; a job's deadline is its submit time + its length + D",
    )  # fmt: skip
    compare.add_argument(
        "--policy", default="all",
        help=f"comma list of runs, or 'all': {', '.join(DEFAULT_RUNS)} (policies through the daemon's slot loop; baselines {', '.join(BASELINE_NAMES)}; {BOUND})",
    )  # fmt: skip
    compare.add_argument("--window", type=positive_int, default=None, help="slots of the trace to run (default: its day, as replay, unless more than 1 %% of its jobs come later: then the whole days it spans, 2016 slots of 300 s for a week)")
    compare.add_argument("--config", type=Path, default=None, help="settings TOML (slot_s, costs, power model, cluster.min_nodes/max_nodes; default: the defaults)")
    add_objective_argument(compare, None, " (default: the config's objective, else energy); the baselines do not decide by it", paper_costs="the config's e0, e1, beta")
    compare.add_argument("--max-nodes", type=positive_int, default=None, help=f"most task nodes, every run (default: the config's cluster.max_nodes, {DEFAULT_MAX_NODES} unless set)")
    compare.add_argument("--min-nodes", type=non_negative_int, default=None, help="fewest task nodes of managed and custom-rules (default: the config's cluster.min_nodes)")
    compare.add_argument("--fixed-nodes", type=positive_int, default=None, help="fixed: this many nodes always on (default: the fewest that meet every deadline, at most --max-nodes)")
    compare.add_argument(
        "--managed-dampen-s", type=float, default=MANAGED_DAMPEN_S, metavar="SECONDS",
        help="managed-dampened: a step counts as pending work (asks for a node) only once it has waited this long, s; 0 is managed",
    )  # fmt: skip
    compare.add_argument("--workers", type=positive_int, default=None, help="processes running the runs side by side (default: the machine's cores)")
    compare.add_argument("--format", choices=["table", "json"], default="table", help="stdout format")
    compare.add_argument("--out", type=Path, default=None, help="folder for compare.json and compare.png (nodes over time of hold, managed, managed-dampened and fixed; cumulative kWh and kgCO2)")
    add_containers_argument(compare)
    add_twin_arguments(compare.add_argument_group("the cluster twin", "how the twin's EMR TASK group behaves and bills (autoscaler.core.twin)"))
    compare.set_defaults(handler=_run_compare)


def _run_compare(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.app import compare as runs
    from autoscaler.app import compose
    from autoscaler.app.cluster_twin import twin_inputs
    from autoscaler.app.config import refuse_carbon_objective, with_objective
    from autoscaler.app.render import compare_png, json_text
    from autoscaler.core.baselines import checked_dampen_s

    managed_dampen_s = checked_dampen_s(args.managed_dampen_s, "--managed-dampen-s")
    settings = with_objective(compose.settings(args.config, cluster_required=False), args.objective)
    refuse_carbon_objective(settings, "compare")
    slot_s = settings.slot_s
    deadlines = parse_deadlines(args.deadline, slot_s, "--deadline")
    if args.window is not None:
        _check_window(args.window, max(deadlines), _deadline_flag(args.deadline))
    names = runs.check_runs(runs.DEFAULT_RUNS if args.policy.strip() == "all" else [n.strip() for n in args.policy.split(",")])
    _check_out(args.out)
    max_nodes = args.max_nodes if args.max_nodes is not None else settings.cluster.max_nodes
    min_nodes = args.min_nodes if args.min_nodes is not None else settings.cluster.min_nodes
    if max_nodes < 1:
        source = "--max-nodes" if args.max_nodes is not None else "the config's cluster.max_nodes"
        raise ConfigError(f"{source}: expected at least 1 node (the widest job needs 1), got {max_nodes}")
    if min_nodes > max_nodes:
        raise ConfigError(f"--min-nodes {min_nodes} is above --max-nodes {max_nodes}")
    if args.fixed_nodes is not None and args.fixed_nodes > max_nodes:
        raise ConfigError(f"--fixed-nodes {args.fixed_nodes} is above --max-nodes {max_nodes}")
    twin, carbon = twin_inputs(twin_flags(args), settings)
    # The policies are told how long the twin's nodes take to be usable, as an operator sets
    # provision_s for EMR: their due margin and the cost of a restart both count it.
    settings = settings.model_copy(update={"provision_s": twin.provision_s})
    costs = settings.derived_costs(twin.price_per_node_hour)
    note_shadowed_file(args.trace, "--trace", err)
    inputs = _inputs(args.trace, settings, twin, carbon, min_nodes, max_nodes, args.fixed_nodes, max(deadlines), args.window, err, args.containers_per_node)
    inputs = dataclasses.replace(inputs, managed_dampen_s=managed_dampen_s)
    err.print(costs_text(costs), style="dim", markup=False, highlight=False)
    usable = runs.usable_nodes(inputs.jobs, max_nodes, twin.step_concurrency)
    if usable < max_nodes:
        err.print(
            f"note: at most {twin.step_concurrency} steps run at once (--step-concurrency, EMR's StepConcurrencyLevel), so "
            f"no run keeps more than {usable:,} of the {max_nodes:,} nodes (--max-nodes) busy; the policies plan with {usable:,}",
            highlight=False,
        )
    for d in deadlines:
        if d * slot_s < twin.provision_s:
            err.print(
                f"note: at D = {_deadline_words(d, slot_s)}, less than the {twin.provision_s:g} s a node takes to be usable, "
                "a job that comes when no node is free cannot start in time: jobs may finish after their deadline whatever runs them",
                highlight=False,
            )
    for name in names:
        for d in deadlines:
            if (why := runs.skipped(name, d)) is not None:
                err.print(f"note: {why}", highlight=False)
    total = sum(runs.skipped(name, d) is None for name in names for d in deadlines)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task(f"{len(inputs.jobs):,} jobs, {total} runs", total=total)
        results = runs.compare(inputs, names, deadlines, workers=args.workers, on_done=lambda _: progress.advance(task))
    document = _document(args, inputs, results, deadlines) | {"objective": costs.to_dict()}
    if args.format == "json":
        out.print(json_text(document, indent=2), markup=False, highlight=False, soft_wrap=True)
    else:
        for d in deadlines:
            out.print(_table(results, d, slot_s, carbon is not None))
        if (why := _overran_table(results, deadlines, slot_s)) is not None:
            out.print(why)
        if carbon is not None and (risk := _risk_table(results, deadlines, slot_s, inputs.window_slots)) is not None:
            out.print(risk)
    for result in results.values():
        f = result.figures
        if result.error is not None:
            err.print(f"warning: {result.name} at D = {_deadline_words(result.deadline_slots, slot_s)} did not finish: {result.error}", highlight=False)
        elif f is not None and f.co2_uncovered_slots:
            err.print(
                f"note: {result.name} at D = {_deadline_words(result.deadline_slots, slot_s)}: its kgCO2 is over the slots --carbon covers; "
                f"{count_text(f.co2_uncovered_slots, 'slot')} used energy outside it", highlight=False,
            )  # fmt: skip
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        write_all_atomic({
            args.out / "compare.json": json_text(document, indent=2),
            args.out / "compare.png": compare_png(results, deadlines, slot_s, carbon is not None),
        })  # fmt: skip
        err.print(f"wrote {args.out / 'compare.json'} and {args.out / 'compare.png'}", highlight=False)
    return 1 if any(result.error for result in results.values()) else 0


def _check_out(folder: Path | None) -> None:
    """Refuse, before any work, an --out whose files cannot be written: a parent that is a file, or a
    compare.json or compare.png that is a folder."""
    if folder is None:
        return
    for parent in (folder, *folder.parents):
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"--out: {parent} exists and is not a folder, so {folder} cannot be made")
            break
    for name in ("compare.json", "compare.png"):
        if (folder / name).is_dir():
            raise ConfigError(f"--out: {folder / name} is a folder; compare writes a file there")


def _deadline_words(deadline_slots: int, slot_s: float) -> str:
    """'30 min (6 slots)'."""
    return f"{duration_text(deadline_slots * slot_s)} ({count_text(deadline_slots, 'slot')})"


MAX_WINDOW_SLOTS = 105_120
"""The longest window compare runs, slots: a year of 5-minute slots (each policy runs every slot)."""

DAY_S = 86400.0
STRAGGLERS = 0.01
"""A trace whose jobs after its first day are at most this share of them is a day's trace (Workload A has 2 of 5,894)."""


def default_window_slots(submit_s: list[float], slot_s: float) -> int:
    """compare's window: the trace's day, as ``replay`` and ``run --replay`` take it, unless more than
    :data:`STRAGGLERS` of its jobs come after it; then the whole days its submit times span."""
    day_slots = round(DAY_S / slot_s)
    after_day = sum(1 for s in submit_s if s >= day_slots * slot_s)
    if after_day <= STRAGGLERS * len(submit_s):
        return day_slots
    return math.ceil((max(submit_s) + 1) / DAY_S) * day_slots


def _deadline_flag(text: str) -> str:
    """How the largest deadline is named in an error: ``--deadline: D``, or, left unset, its default."""
    return "--deadline: D" if text != DEFAULT_DEADLINES else f"--deadline (not given: its default {DEFAULT_DEADLINES}): D"


def _check_window(window_slots: int, max_deadline: int, flag: str = "--deadline: D") -> None:
    """Refuse a --window (slots) that with the largest --deadline (slots) is more than compare runs,
    or is shorter than that deadline: ConfigError naming both (``flag``: how the deadline is named).
    The flags alone tell, so this comes before the trace is read (``_run_compare``)."""
    from autoscaler.core.replay import require_deadline_within_window

    if window_slots + max_deadline > MAX_WINDOW_SLOTS:
        raise ConfigError(
            f"--window {window_slots:,} and --deadline of {max_deadline:,} slots: {window_slots + max_deadline:,} slots, "
            f"more than the {MAX_WINDOW_SLOTS:,} compare runs (a year of 5-minute slots); give a shorter --window"
        )
    require_deadline_within_window(max_deadline, window_slots, flag)


def _inputs(
    trace_text, settings, twin, carbon, min_nodes: int, max_nodes: int, fixed_nodes, max_deadline: int, window_slots: int | None, err: Console,
    containers_per_node: int | None = None,
):
    """The trace's jobs at D = 0 in its window (``window_slots``; None: :func:`default_window_slots`),
    on w nodes each with ``containers_per_node`` (else one), and everything else a worker needs
    (autoscaler.app.compare.CompareInputs)."""
    from autoscaler.app.compare import CompareInputs
    from autoscaler.app.replay_jobs import trace_jobs
    from autoscaler.app.traces import open_trace
    from autoscaler.core.replay import require_deadline_within_window
    from autoscaler.core.signal_slots import covered_means
    from autoscaler.core.workload import read_swim, workload_from_trace

    slot_s = settings.slot_s
    with open_trace(trace_text, "--trace") as (path, _):
        if path.suffix.lower() == ".csv":
            raise ConfigError(f"{path}: compare needs a SWIM trace of jobs (6 tab-separated columns); a .csv load curve has no jobs")
        trace = read_swim(path)
    given = window_slots is not None
    if window_slots is None:
        window_slots = default_window_slots([job.submit_s for job in trace.jobs], slot_s)
    if not given and window_slots + max_deadline > MAX_WINDOW_SLOTS:
        last_s = max(job.submit_s for job in trace.jobs)
        raise ConfigError(
            f"{path}: its jobs are submitted up to {last_s:,.0f} s, {window_slots:,} slots of whole days, more than the "
            f"{MAX_WINDOW_SLOTS:,} compare runs (a year of 5-minute slots); give --window, the slots from the trace's start to run"
        )
    if given:
        _check_window(window_slots, max_deadline)
    workload = with_flagged_notes(workload_from_trace(trace, slot_s=slot_s, window_slots=window_slots, containers_per_node=containers_per_node))
    window_slots = workload.n_slots
    for warning in workload.notes:
        err.print(f"warning: {warning}", highlight=False, soft_wrap=True)
    if workload.jobs_after_window:
        err.print(
            f"note: {count_text(workload.jobs_after_window, 'job')} submitted after the window's end ({window_slots:,} slots) "
            f"left out; a longer --window includes them", highlight=False,
        )  # fmt: skip
    require_deadline_within_window(max_deadline, window_slots, "--deadline: D")
    jobs = sorted(trace_jobs(trace, 0, slot_s, window_slots * slot_s, containers_per_node=containers_per_node, max_nodes=max_nodes), key=lambda job: job.submit_s)
    g_per_kwh = None
    if carbon is not None:
        # Long enough for the longest run: the horizon at the largest D and as long again.
        g_per_kwh = covered_means(carbon, float(carbon.times_s[0]), slot_s, 2 * (window_slots + max_deadline) + 1)
    return CompareInputs(tuple(jobs), window_slots, settings, twin, min_nodes, max_nodes, g_per_kwh, fixed_nodes)


def _number(value, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _against(value, reference) -> str:
    from autoscaler.core.compare import against

    if value is None or reference is None:
        return ""
    pct = against(value, reference)
    return "" if pct is None else f"{pct:+.1f}%"


def _reference(results: dict, deadline_slots: int):
    """The figures every run at D is set against: the strongest managed variant that finished
    (autoscaler.core.compare.strongest_managed), or None when none ran."""
    from autoscaler.core.compare import strongest_managed

    return strongest_managed(r.figures for (_, d), r in results.items() if d == deadline_slots)


def _table(results: dict, deadline_slots: int, slot_s: float, with_carbon: bool) -> Table:
    """One deadline's runs as a table, each figure with its difference from the strongest managed
    variant (when one ran), which the title names."""
    from autoscaler.core.baselines import MANAGED_VARIANTS

    rows = [r for (_, d), r in results.items() if d == deadline_slots]
    reference = _reference(results, deadline_slots)
    notes = [f"{r.name}: {r.note}" for r in rows if r.note] + [f"{r.name}: did not finish ({r.error})" for r in rows if r.error]
    against = ""
    if reference is not None:
        ran = [name for name in MANAGED_VARIANTS if (name, deadline_slots) in results]
        against = f"; (%) against {reference.name}" + (f", the managed variant ({' or '.join(ran)}) with the least kWh" if len(ran) > 1 else "")
    table = Table(title=f"D = {_deadline_words(deadline_slots, slot_s)}, on the cluster twin{against}")
    headers = ["run", "node-hours", "$", "kWh"] + (["kgCO2"] if with_carbon else [])
    headers += ["released late", "overran (ended after deadline)", "wait p50/p95 s", "peak nodes", "scalings"]
    for header in headers:
        table.add_column(header, justify="left" if header == "run" else "right", overflow="fold")
    worse: list[str] = []  # runs that overran more jobs than the reference
    for result in rows:
        f = result.figures
        if f is None:
            table.add_row(result.name, *(["did not finish"] + [""] * (len(headers) - 2)))
            continue

        def with_change(value, ref, digits: int = 1, is_reference: bool = reference is not None and result.name == reference.name) -> str:
            change = "" if reference is None or is_reference else _against(value, ref)
            return _number(value, digits) + (f" ({change})" if change else "")

        cells = [
            result.name,
            with_change(f.node_hours, reference.node_hours if reference else None),
            _number(f.cost_usd, 2),
            with_change(f.energy_kwh, reference.energy_kwh if reference else None),
        ]
        if with_carbon:
            cells.append(with_change(f.co2_kg, reference.co2_kg if reference else None, 2))
        waits = "" if f.wait_p50_s is None else f"{f.wait_p50_s:,.0f} / {f.wait_p95_s:,.0f}"
        overran = _number(f.jobs_finished_after_deadline, 0)
        if _overran_more(f, reference):
            overran += " *"
            worse.append(result.name)
        cells += [_number(f.jobs_released_late, 0), overran, waits, _number(f.peak_nodes, 0), _number(f.scale_events, 0)]
        table.add_row(*cells)
    if worse:
        notes.append(
            f"* more jobs overran than {reference.name}'s {reference.jobs_finished_after_deadline:,} under "
            f"{', '.join(worse)}: a saving beside it is not for the same service"
        )
    table.caption = "; ".join(notes) or None
    return table


def _overran_more(figures, reference) -> bool:
    """Whether a run that is not ``reference`` overran more jobs than it (False when either count is unknown)."""
    return (
        reference is not None
        and figures is not reference
        and figures.jobs_finished_after_deadline is not None
        and reference.jobs_finished_after_deadline is not None
        and figures.jobs_finished_after_deadline > reference.jobs_finished_after_deadline
    )


def _overran_table(results: dict, deadlines: list[int], slot_s: float) -> Table | None:
    """Why jobs overran, per run and deadline (autoscaler.core.compare.overran_causes), or None when
    no run's job overran."""
    rows = [
        (d, result)
        for d in deadlines
        for (_, at), result in results.items()
        if at == d and result.figures is not None and result.figures.jobs_finished_after_deadline
    ]
    if not rows:
        return None
    table = Table(title="Why jobs overran (ended after their deadline)")
    headers = ("D", "run", "overran", "longer than the deadline allowed", "released too late for their run", "waited for a node or a rerun")
    for header in headers:
        table.add_column(header, justify="left" if header in ("D", "run") else "right", overflow="fold")
    for d, result in rows:
        f = result.figures
        table.add_row(
            duration_text(d * slot_s), result.name, f"{f.jobs_finished_after_deadline:,}", f"{f.overran_too_long:,}", f"{f.overran_held:,}", f"{f.overran_waited:,}"
        )
    return table


def carbon_risks(results: dict, deadline_slots: int, slot_s: float, window_slots: int) -> dict:
    """Per run at ``deadline_slots``, its :class:`~autoscaler.core.carbon_risk.Risk` against follow's
    by day of the trace's window (``window_slots``; :func:`autoscaler.core.carbon_risk.risks_by_day`),
    follow's own aside; {} without follow's kgCO2 per slot, or when follow emitted nothing at all."""
    from autoscaler.core.carbon_risk import risks_by_day
    from autoscaler.core.policies import BASELINE

    at_d = {name: r.cumulative_co2_kg for (name, d), r in results.items() if d == deadline_slots and r.cumulative_co2_kg is not None}
    return risks_by_day(at_d, BASELINE, max(1, round(86_400.0 / slot_s)), window_slots)


def _risk_table(results: dict, deadlines: list[int], slot_s: float, window_slots: int) -> Table | None:
    """Carbon risk against follow by day, per deadline and run (:func:`carbon_risks`); None when
    follow did not run."""
    from autoscaler.app.render import risk_cells
    from autoscaler.core.carbon_risk import WORST_SHARE

    by_deadline = {d: carbon_risks(results, d, slot_s, window_slots) for d in deadlines}
    if not any(by_deadline.values()):
        return None
    table = Table(title="Carbon risk against follow (no deferral), by day of the compare", caption=(
        "days of the trace's window, what runs after it in its last; expected cut: mean of 1 - kgCO2/kgCO2(follow) over the days; "
        "worst-day regret: the most a day emitted above follow's; "
        f"worst 10 %: the mean cut over the worst ceil({WORST_SHARE:.0%} of the days) by cut"
    ))  # fmt: skip
    for header in ("D", "run", "days", "expected cut", "worst-day regret", "days above follow", "worst 10 % cut"):
        table.add_column(header, justify="left" if header in ("D", "run") else "right", overflow="fold")
    for d, risks in by_deadline.items():
        for name, risk in risks.items():
            table.add_row(duration_text(d * slot_s), name, *risk_cells(risk))
    return table


def _document(args: argparse.Namespace, inputs, results: dict, deadlines: list[int]) -> dict:
    """The JSON document: the inputs, one object per run and deadline (keys with their units, the
    figures raw), and per deadline the run the table's (%) are against."""
    from autoscaler.core.baselines import MANAGED_VARIANTS
    from autoscaler.core.compare import FIGURE_UNITS

    twin = inputs.twin
    slot_s = inputs.settings.slot_s
    risks = {d: carbon_risks(results, d, slot_s, inputs.window_slots) for d in deadlines}
    return {
        "trace": args.trace or "A",
        "jobs": len(inputs.jobs),
        "slot_s": slot_s,
        "window_slots": inputs.window_slots,
        "deadline_slots": deadlines,
        "deadline_s": [d * slot_s for d in deadlines],
        "min_nodes": inputs.min_nodes,
        "max_nodes": inputs.max_nodes,
        "managed_dampen_s": inputs.managed_dampen_s,
        "length_error_quantile": inputs.settings.jobs.length_error_quantile,
        "twin": {
            "provision_s": twin.provision_s,
            "decommission_timeout_s": twin.decommission_timeout_s,
            "length_error_sigma": twin.length_error_sigma,
            "seed": twin.seed,
            "step_concurrency": twin.step_concurrency,
            "price_per_node_hour_usd": twin.price_per_node_hour,
            "idle_power_w": twin.idle_power_w,
            "busy_power_w": twin.busy_power_w,
        },
        "units": FIGURE_UNITS,
        "reference": {
            "rule": f"per deadline, the managed variant ({' or '.join(MANAGED_VARIANTS)}) with the least energy_kwh among those that "
            "finished; the table's (%) are against it (null: none ran)",
            "by_deadline": [
                {"deadline_slots": d, "deadline_s": d * slot_s, "name": None if (ref := _reference(results, d)) is None else ref.name}
                for d in deadlines
            ],
        },
        "runs": [
            (r.figures.to_dict() if r.figures is not None else {"name": name, "deadline_slots": d})
            | {"deadline_s": d * slot_s, "note": r.note, "error": r.error}
            | ({"carbon_risk": dataclasses.asdict(risks[d][name])} if name in risks[d] else {})
            for (name, d), r in results.items()
        ],
    }
