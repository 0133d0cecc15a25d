"""``autoscaler report``: the energy report of the daemon's slots or of a modelled replay."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from rich.console import Console

from autoscaler.app.cli.arguments import (
    add_objective_argument,
    boot_seconds,
    deadline_slots,
    deadline_text,
    positive_float,
    positive_int,
    settings_or_none,
    with_flagged_notes,
)
from autoscaler.app.cli.trace_inputs import load_workload, note_shadowed_file, wanted_slots
from autoscaler.app.traces import TRACE_NAMES_HELP
from autoscaler.core import defaults
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import CostParams, LengthModel
from autoscaler.core.policies import BASELINE, CLASS_DEADLINE_POLICIES, POLICY_TABLE, runs_at_deadline

REPORT_POLICIES = "gcp-u,vfw"
"""The policies ``autoscaler report --replay`` compares by default, as the paper's Table IV."""


def add_parsers(commands) -> None:
    """The report command."""
    report = commands.add_parser(
        "report",
        help="energy used and saved: the schedule run against follow the workload and no provisioning",
        description="Energy report shaped like the deferral paper's Table IV and Fig. 13. With --config: the "
        "daemon's slots between --since and --until (default: the last full UTC day), measured from the TASK "
        "nodes' CloudWatch metrics where they exist and modelled from the decision log where not, against "
        "'follow the workload' and 'no provisioning' (all max_nodes on), modelled. With --replay TRACE: every "
        "schedule modelled from a replay of the trace. The report says which numbers are measured.",
    )
    report.add_argument("--config", type=Path, default=None, help="TOML config: the store, cluster, and [report] email settings")
    report.add_argument("--replay", nargs="?", const="default", default=None, metavar="TRACE", help=f"model a replay of TRACE instead of the daemon's slots: {TRACE_NAMES_HELP} (alone: A)")
    report.add_argument("--since", default=None, help="start: ISO-8601 time with a zone, or a duration ago like '24h' (default: the start of yesterday, UTC)")
    report.add_argument("--until", default=None, help="end: ISO-8601 time with a zone, or a duration ago (default: the start of today, UTC)")
    report.add_argument("--power-model", default=None, help="power model: table-iii (the paper's Table III) or ccf-aws (default: the config's, else table-iii)")
    report.add_argument("--boot-s", type=boot_seconds, default=None, help="seconds a started node draws idle power before it works, 0 to 3600 (default: the config's, else 300)")
    report.add_argument("--out", type=Path, default=None, help="folder for energy.md, energy-slots.csv and energy.png")
    report.add_argument("--format", choices=["markdown", "json"], default="markdown", help="stdout format")
    report.add_argument("--no-measure", action="store_true", help="model the actual schedule from the decision log; do not read CloudWatch")
    report.add_argument("--publish", action="store_true", help="publish EnergyWh and SavedWh to CloudWatch, with a signal also Co2Grams and Co2SavedGrams (or CostDollars and CostSavedDollars) (with --config, not --replay)")
    report.add_argument("--email", action="store_true", help="send the report with its PNG by the config's [report] email settings")
    report.add_argument("--carbon", default=None, metavar="SOURCE", help="carbon or price signal, a file or http(s) URL: CSV time,value, WattTime, Electricity Maps or UK Carbon Intensity JSON; adds gCO2eq or $ per schedule, slot and tenant (default: the config's [carbon] source, else none)")
    report.add_argument("--carbon-unit", default=None, choices=["gCO2eq/kWh", "lbs/MWh", "$/kWh", "$/node-hour"], help="the signal's unit, needed for CSV (default: the config's [carbon] unit)")
    replay_group = report.add_argument_group("with --replay")
    replay_group.add_argument("--policy", default=REPORT_POLICIES, help="policies to compare, a comma list or 'all' (follow is always the baseline)")
    replay_group.add_argument("--deadline", "-D", type=deadline_text, default=str(defaults.DEADLINE_SLOTS), help="uniform deadline D: slots (12), or a duration (6h, 90m) that is a whole number of slots of --slot-s")
    add_objective_argument(replay_group, None, " (default: the config's objective, else energy)", paper_costs="the config's e0, e1, beta")
    replay_group.add_argument("--slot-s", type=positive_float, default=defaults.SLOT_S, help="slot length in seconds")
    replay_group.add_argument("--window", type=positive_int, default=None, help="slots in the window (default: the trace's 24 h)")
    replay_group.add_argument("--start", default=None, help="ISO-8601 time with a zone where the trace's first slot is placed in the signal (default with --carbon: a day after the signal's first point when it covers that day and the replay, else its first point, as replay places it)")
    report.set_defaults(handler=_run_report)


def _run_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.app import reporting
    from autoscaler.app.logs import configure_logging

    settings = settings_or_none(args.config)
    configure_logging(settings.log_format if settings else "auto")  # warnings to stderr, never into --format json's stdout
    if args.start is not None and args.replay is None:
        raise ConfigError("report: --start places a --replay's trace in time; the daemon's slots have their own")
    signal = reporting.report_signal(args.carbon, args.carbon_unit, settings)
    if args.replay is not None:
        if args.publish:
            raise ConfigError("report: --publish is for the daemon's measured slots, not a --replay")
        start_s = 0.0
        if args.start is not None:
            from autoscaler.core.energy.signal import parse_time_s

            try:
                start_s = parse_time_s(args.start)
            except ValueError as error:
                raise ConfigError(f"report: --start: {error}") from None
        options = reporting.energy_options(args, settings)
        costs = _replay_costs(args, settings, options)
        if costs.objective == "carbon" and signal is None:
            raise ConfigError("report: --objective carbon weights the energy by a carbon signal: give --carbon SOURCE (or [carbon] source)")
        params, length_model = costs.cost_params(), LengthModel()
        args.deadline = deadline_slots(args.deadline, args.slot_s)
        names = [n for n in _policy_names(args.policy) if n != BASELINE]
        chosen = args.policy.strip() not in ("all", REPORT_POLICIES)
        if not chosen:
            for name in [n for n in names if not runs_at_deadline(n, args.deadline)]:
                names.remove(name)
                err.print(f"note: {name} left out: it needs D >= {POLICY_TABLE[name].min_deadline_slots}", highlight=False)
        note_shadowed_file(args.replay, "--replay", err)
        with err.status("replaying the trace"):
            workload, _ = load_workload(
                args.replay,
                flag="--replay",
                slot_s=args.slot_s,
                window_slots=args.window,
                skip_bad_lines=False,
                length_model=length_model,
                deadline_classes=any(n in CLASS_DEADLINE_POLICIES for n in names),
                classes_optional=not chosen,
            )
            if workload.active_by_deadline is None:
                for name in [n for n in names if n in CLASS_DEADLINE_POLICIES]:
                    names.remove(name)
                    err.print(f"note: {name} left out: it needs a SWIM trace with at least 10 distinct jobs or a deadline column", highlight=False)
            placed = None
            if signal is not None:
                from autoscaler.core.replay import place_signal

                classes = any(n in CLASS_DEADLINE_POLICIES for n in names)
                placed = with_flagged_notes(place_signal(
                    signal, args.slot_s, workload.n_slots + args.deadline, wanted_slots(workload, args.deadline, classes),
                    start_s=start_s if args.start is not None else None,
                ))  # fmt: skip
                start_s = placed.start_s
                for note in placed.notes:
                    err.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
            report = reporting.replay_report(workload, names, args.deadline, params, options, start_s, signal=placed)
        if signal is not None:
            from autoscaler.core.energy.signal import utc_text

            where = "--start" if args.start is not None else "one day after the signal's first point when it covers that day, as replay places it"
            report = dataclasses.replace(
                report,
                notes=(
                    *report.notes,
                    f"The trace's first slot is placed at {utc_text(start_s)} ({where}). The policies decide by the "
                    "signal as replay --carbon does: offline with the slot cost, hold as hold+carbon; the others carbon-blind.",
                ),
            )
        report = dataclasses.replace(report, notes=(*report.notes, _costs_note(costs)))
    else:
        if settings is None:
            raise ConfigError("report: --config FILE is required (or --replay TRACE for a modelled replay)")
        if args.objective is not None:
            raise ConfigError("report: --objective is for --replay; the daemon's slots were decided under the config's objective")
        options = reporting.energy_options(args, settings)
        report = reporting.live_report(settings, options, args.since, args.until, measure=not args.no_measure)
    if signal is not None:
        from autoscaler.core.energy.accounting import with_signal

        report = with_signal(report, signal)
    return reporting.deliver(report, args, settings, out, err)


def _policy_names(text: str) -> list[str]:
    from autoscaler.core.replay import parse_policy_list

    return parse_policy_list(text)


def _replay_costs(args: argparse.Namespace, settings, options):
    """The costs the replayed policies decide by: --objective (else the config's, else energy) from the
    report's power model, boot_s and --slot-s; under paper the config's e0, e1, beta (else the paper's).
    Raises ConfigError when the config gives e0, e1 or beta and the objective is not paper."""
    from autoscaler.app.config import with_objective
    from autoscaler.core.objective import DEFAULT_OBJECTIVE, derive_costs
    from autoscaler.core.twin import PRICE_PER_NODE_HOUR

    if settings is not None:
        settings = with_objective(settings, args.objective)
    objective = settings.objective if settings is not None else (args.objective or DEFAULT_OBJECTIVE)
    given = CostParams(e0=settings.e0, e1=settings.e1, beta=settings.beta) if settings is not None else CostParams()
    return derive_costs(
        objective,
        slot_s=args.slot_s,
        idle_power_w=options.model.idle_power_w,
        busy_power_w=options.model.peak_power_w,
        boot_s=options.boot_s,
        price_per_node_hour=PRICE_PER_NODE_HOUR,
        restart_penalty=settings.restart_penalty if settings is not None else 0.0,
        given=given,
    )


def _costs_note(costs) -> str:
    return f"The policies decide by objective {costs.objective} ({costs.unit}): " + "; ".join(costs.derivation) + "."
