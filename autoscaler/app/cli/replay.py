"""``autoscaler replay`` and ``autoscaler sweep``: a recorded trace through the policies, at one
deadline or over a range of them, with their costs against follow the workload."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from autoscaler.adapters.files import write_all_atomic
from autoscaler.app.cli.arguments import (
    add_containers_argument,
    add_model_arguments,
    add_signal_arguments,
    cost_and_length_model,
    costs_text,
    deadline_slots,
    deadline_text,
    derived_costs,
    parse_deadlines,
    positive_int,
    with_flagged_notes,
)
from autoscaler.app.cli.trace_inputs import load_workload, note_shadowed_file, signal_inputs, signal_needs, wanted_slots
from autoscaler.app.traces import TRACE_NAMES_HELP
from autoscaler.app.traces import label as trace_label
from autoscaler.core import defaults
from autoscaler.core.budget import Estimate, WorkloadSize, over_budget
from autoscaler.core.errors import ConfigError
from autoscaler.core.policies import BASELINE, CLASS_DEADLINE_POLICIES, POLICIES, POLICY_TABLE, gcp, runs_at_deadline, vfw


def add_parsers(commands) -> None:
    """The replay and sweep commands."""
    replay = commands.add_parser(
        "replay",
        help="replay a recorded trace through provisioning policies and compare their costs",
        description="Replay a SWIM trace (or a slot,released CSV load curve) through the policies, "
        "print each one's cost and saving against 'follow the workload', and optionally write "
        "a PNG, CSV and JSON of the schedules.",
    )
    replay.add_argument(
        "--trace",
        default=None,
        help="SWIM trace (.tsv, 6 tab-separated columns) or load curve (.csv with header slot,released): "
        f"{TRACE_NAMES_HELP} (default: A)",
    )
    replay.add_argument(
        "--policy",
        default="all",
        help=f"policy, comma list or 'all'; one of: {', '.join(POLICIES)} (follow is always run as the baseline)",
    )
    replay.add_argument(
        "--deadline", "-D", type=deadline_text, default=str(defaults.DEADLINE_SLOTS),
        help="uniform deadline D: slots (12), or a duration (6h, 90m, 1h30m, 1d) that is a whole number of slots of --slot-s",
    )  # fmt: skip
    add_model_arguments(replay)
    add_containers_argument(replay)
    add_signal_arguments(replay)
    replay.add_argument("--delta", type=positive_int, default=None, help="VFW look-ahead delta in slots, 0 < delta < D (default: floor(D/2))")
    replay.add_argument("--format", choices=["table", "json", "csv"], default="table", help="stdout format")
    replay.add_argument("--out", type=Path, default=None, help="folder for replay.png, replay.json, slots.csv, summary.csv")
    replay.set_defaults(handler=_run_replay)

    sweep = commands.add_parser(
        "sweep",
        help="savings of every policy over a range of deadlines, on one or more traces (Fig. 9 and 11)",
        description="Run the policies at every deadline D on each trace and print the savings against "
        "'follow the workload'; with --out, write fig9.png (saving against D) and fig11.png (VFW saving "
        "against delta at one D), plus sweep.json.",
    )
    sweep.add_argument(
        "--trace", action="append", default=None, help=f"trace or load curve, repeatable: {TRACE_NAMES_HELP} (default: A)"
    )
    sweep.add_argument(
        "--deadlines", default="1-12",
        help="deadlines D: a range of slots 'A-B', or a comma list of slots and durations (1h,2h,6h,12h: whole numbers of slots of --slot-s)",
    )  # fmt: skip
    sweep.add_argument("--policy", default="hold,offline,gcp-u,vfw", help="comma list of uniform-deadline policies")
    sweep.add_argument("--delta-deadline", type=positive_int, default=12, help="the D at which VFW's delta is swept")
    add_model_arguments(sweep)
    add_signal_arguments(sweep)
    sweep.add_argument("--format", choices=["table", "json"], default="table", help="stdout format")
    sweep.add_argument("--out", type=Path, default=None, help="folder for fig9.png, fig11.png and sweep.json")
    sweep.set_defaults(handler=_run_sweep)


def _run_replay(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.app import render
    from autoscaler.core import budget
    from autoscaler.core.energy.power import power_model
    from autoscaler.core.replay import parse_policy_list, place_signal, replay, to_dict

    names = parse_policy_list(args.policy)
    args.deadline = deadline_slots(args.deadline, args.slot_s)
    signals = signal_needs(args)
    if signals:  # checked before the signal files are read; without them the trace's estimate below is the first check
        _check_memory(budget.signal_estimate(signals), args.memory_budget_mb, "replay", "the signal files", _SIGNAL_REMEDY)
    carbon_signal, forecast, start_s = signal_inputs(args)
    slow: list[str] = []

    def check_size(size) -> None:
        run = [n for n in names if n not in CLASS_DEADLINE_POLICIES or size.n_deadlines is not None]
        estimate = budget.replay_estimate(size, run, args.deadline, files=args.out is not None, signals=signals)
        _check_memory(estimate, args.memory_budget_mb, "replay", _size_cause(size, args.window))
        slow.extend(estimate.slow_policies())

    params, length_model = cost_and_length_model(args)
    costs = derived_costs(args)
    every = args.policy.strip() == "all"
    if every:
        for name in [n for n in names if not runs_at_deadline(n, args.deadline)]:
            names.remove(name)
            err.print(f"note: {name} left out of 'all': it needs D >= {POLICY_TABLE[name].min_deadline_slots}", highlight=False)
    note_shadowed_file(args.trace, "--trace", err)
    with err.status("reading the trace"):
        workload, assignment = load_workload(
            args.trace,
            slot_s=args.slot_s,
            window_slots=args.window,
            skip_bad_lines=args.skip_bad_lines,
            skip_flag="--skip-bad-lines",
            length_model=length_model,
            deadline_classes=any(n in CLASS_DEADLINE_POLICIES for n in names),
            classes_optional=every,
            check_size=check_size,
            containers_per_node=args.containers_per_node,
        )
    for note in slow:
        err.print(f"note: {note}", highlight=False)
    for warning in workload.notes:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if every and workload.active_by_deadline is None:
        for name in [n for n in names if n in CLASS_DEADLINE_POLICIES]:
            names.remove(name)
            err.print(f"note: {name} left out of 'all': it needs a SWIM trace with at least 10 distinct jobs or a deadline column", highlight=False)
    placed = None
    if carbon_signal is not None:
        classes = any(n in CLASS_DEADLINE_POLICIES for n in names)
        placed = with_flagged_notes(place_signal(
            carbon_signal, args.slot_s, workload.n_slots + args.deadline, wanted_slots(workload, args.deadline, classes),
            start_s=start_s, forecast=forecast,
        ))  # fmt: skip
        for note in placed.notes:
            err.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    with err.status("running policies") as status:
        result = replay(
            workload, names, args.deadline, params, progress=lambda n: status.update(f"running {n}"), delta=args.delta,
            signal=placed, power=power_model(args.power_model), boot_s=args.boot_s,
        )  # fmt: skip
    err.print(render.workload_summary(result), style="dim", highlight=False)
    err.print(costs_text(costs), style="dim", markup=False, highlight=False)
    for name, policy in result.policies.items():
        if policy.note:
            err.print(f"note: {policy.note}", markup=False, highlight=False)
        if policy.worse_than_follow:
            aware = f" (the abstract cost of eq. 2: {policy.schedule.policy} minimises the signal's)" if policy.carbon_aware else ""
            err.print(
                f"warning: {name} costs more than follow on this replay ({policy.cost.total:,.1f} against "
                f"{result.policies[BASELINE].cost.total:,.1f}, saving {policy.saving_pct:.2f} %, D = {args.deadline}){aware}",
                markup=False,
                highlight=False,
            )
    if args.delta is not None and not any(POLICY_TABLE[n].needs_delta for n in names):
        takes = " or ".join(n for n, p in POLICY_TABLE.items() if p.needs_delta)
        err.print(f"note: --delta is only used by {takes}, which was not run", highlight=False)
    document = to_dict(result)
    document["objective"] = costs.to_dict()
    if assignment is not None:
        document["classes"] = [vars(c) for c in assignment.classes]
    if args.format == "json":
        sys.stdout.write(render.json_text(document) + "\n")
    elif args.format == "csv":
        sys.stdout.write(render.summary_csv(result))
    else:
        out.print(render.summary_table(result))
        if (risk := render.risk_table(result)) is not None:
            out.print(risk)
        if assignment is not None:
            out.print(render.class_table(assignment))
    if args.out is not None:
        written = write_all_atomic(
            {
                args.out / "replay.png": render.schedule_png(result),
                args.out / "replay.json": render.json_text(document, indent=1) + "\n",
                args.out / "slots.csv": render.slots_csv(result),
                args.out / "summary.csv": render.summary_csv(result),
            }
        )
        err.print("wrote " + ", ".join(str(p) for p in written), highlight=False)
    return 0


def _run_sweep(args: argparse.Namespace, out: Console, err: Console) -> int:
    from dataclasses import asdict

    from rich.progress import Progress

    from autoscaler.app import render
    from autoscaler.core.policies import UNIFORM
    from autoscaler.core.replay import require_deadline_within_window
    from autoscaler.core.sweep import solves_needed, sweep

    deadlines = parse_deadlines(args.deadlines, args.slot_s)
    from autoscaler.core import budget

    signals = signal_needs(args)
    if signals:  # checked before the signal files are read; without them the trace's estimate below is the first check
        _check_memory(budget.signal_estimate(signals), args.memory_budget_mb, "sweep", "the signal files", _SIGNAL_REMEDY)
    carbon_signal, forecast, start_s = signal_inputs(args)
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    unknown = [p for p in policies if p not in UNIFORM or p == BASELINE]
    if unknown or not policies:
        raise ConfigError(f"--policy: expected a comma list of {', '.join(n for n in UNIFORM if n != BASELINE)}, got {args.policy!r}")
    if args.delta_deadline < 2:
        raise ConfigError(f"--delta-deadline: VFW needs D >= 2, got {args.delta_deadline}")
    params, length_model = cost_and_length_model(args)
    costs = derived_costs(args)

    def check_size(size) -> None:
        # One schedule at a time, at the longest D; gcp with classes once a trace.
        run = [BASELINE, *policies, vfw.NAME] + ([gcp.NAME] if size.n_deadlines is not None else [])
        estimate = budget.replay_estimate(size, run, max(deadlines), signals=signals)
        _check_memory(estimate, args.memory_budget_mb, "sweep", _size_cause(size, args.window))

    workloads = {}
    given: dict[str, str] = {}
    for trace in args.trace or [None]:
        note_shadowed_file(trace, "--trace", err)
        name = trace_label(trace)
        if name in given:
            raise ConfigError(f"--trace: {given[name]!r} and {trace!r} are the same trace ({name}); give each trace once")
        given[name] = trace
        workload, _ = load_workload(
            trace,
            slot_s=args.slot_s,
            window_slots=args.window,
            skip_bad_lines=args.skip_bad_lines,
            skip_flag="--skip-bad-lines",
            length_model=length_model,
            deadline_classes=True,
            classes_optional=True,
            check_size=check_size,
        )
        workloads[name] = workload
    shortest = min(w.n_slots for w in workloads.values())
    require_deadline_within_window(max(deadlines), shortest, "--deadlines: D")
    err.print(costs_text(costs), style="dim", markup=False, highlight=False)
    signals = None
    if carbon_signal is not None:
        from autoscaler.core.replay import place_signal

        longest = max(deadlines)
        signals = {}
        for name, workload in workloads.items():
            signals[name] = with_flagged_notes(place_signal(
                carbon_signal, args.slot_s, workload.n_slots + longest, workload.n_slots + 3 * longest, start_s=start_s, forecast=forecast
            ))
            for note in signals[name].notes:
                err.print(f"note: {name}: {note}", markup=False, highlight=False, soft_wrap=True)
    from autoscaler.core.energy.power import power_model

    total = solves_needed(len(workloads), deadlines, policies, args.delta_deadline)
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("sweeping", total=total)
        result = sweep(
            workloads, deadlines, policies, params, args.delta_deadline, advance=lambda: progress.advance(task),
            signals=signals, power=power_model(args.power_model), boot_s=args.boot_s,
        )  # fmt: skip
    document = asdict(result)
    document["objective"] = costs.to_dict()
    if signals is None:
        # Without a signal the document is what it always was.
        for key in ("signal_unit", "signal_cut_by_deadline", "blind_cut_by_deadline", "signals"):
            document.pop(key)
    for trace, by_policy in result.by_deadline.items():
        for name, by_d in by_policy.items():
            worse = [d for d, saving in by_d.items() if saving < -100 * 1e-9]
            if worse:
                err.print(
                    f"warning: {trace}: {name} costs more than follow at D = {', '.join(map(str, worse))} "
                    f"(down to {min(by_d[d] for d in worse):.2f} %)",
                    markup=False,
                    highlight=False,
                )
    if args.format == "json":
        sys.stdout.write(render.json_text(document) + "\n")
    else:
        out.print(render.sweep_table(result))
        if signals is not None:
            out.print(render.sweep_signal_table(result))
    if args.out is not None:
        fig9, fig11 = render.sweep_pngs(result)
        written = write_all_atomic(
            {
                args.out / "fig9.png": fig9,
                args.out / "fig11.png": fig11,
                args.out / "sweep.json": render.json_text(document, indent=1) + "\n",
            }
        )
        err.print("wrote " + ", ".join(str(p) for p in written), highlight=False)
    return 0


_SLOTS_REMEDY = "use a longer --slot-s, a shorter --window or fewer policies (--policy)"
_SIGNAL_REMEDY = "give a signal cut to the days the replay reads (a day before --start to its end)"


def _check_memory(estimate: Estimate, budget_mb: float, command: str, cause: str, remedy: str = _SLOTS_REMEDY) -> None:
    """ConfigError when ``estimate`` (:mod:`autoscaler.core.budget`) exceeds --memory-budget-mb
    (``budget_mb`` MiB), naming the figure and its parts. ``cause``: what made the run this large, as
    the operator gave it (``_size_cause``); ``remedy``: what to change."""
    excess = over_budget(estimate, budget_mb)
    if excess is not None:
        raise ConfigError(f"{command}: {cause}; {excess} (--memory-budget-mb); {remedy}, or raise --memory-budget-mb")


def _size_cause(size: WorkloadSize, window_slots: int | None) -> str:
    """What made the run this large, in the options' terms: "--slot-s 1 makes 86,400 slots of 1 s"."""
    if window_slots is not None:
        text = f"--window {window_slots} makes {size.n_slots:,} slots of {size.slot_s:g} s"
    elif size.curve:
        text = f"the load curve has {size.n_slots:,} slots"
    else:
        text = f"--slot-s {size.slot_s:g} makes {size.n_slots:,} slots of {size.slot_s:g} s"
    if size.n_deadlines is not None:
        text += f" and {size.n_deadlines:,} distinct job deadlines up to {size.max_deadline:,} slots"
    return text
