"""Command line: ``autoscaler replay`` (more subcommands join as they are built).

Results go to stdout; progress, notes and errors go to stderr, so that
``--format json`` output can be piped. An input or parameter error prints one
line naming the input and exits with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
from pathlib import Path

import numpy as np
from rich.console import Console

from autoscaler.adapters.files import write_all_atomic
from autoscaler.app.traces import TRACE_NAMES_HELP, open_trace, shadowed_file, shipped
from autoscaler.app.traces import label as trace_label
from autoscaler.core.budget import DEFAULT_MEMORY_BUDGET_MB
from autoscaler.core.errors import AutoscalerError, ConfigError
from autoscaler.core.intake import SAME_DEADLINE_RULE, parse_duration_s
from autoscaler.core.lateness import LATE_HELP
from autoscaler.core.model import DEFAULT_MAX_NODES, JOB_STATES, MAX_SLOTS, MIB, CostParams, LengthModel, Workload
from autoscaler.core.policies import POLICIES
from autoscaler.core.readable import count_text, number_text


def _number(convert, noun: str, minimum: float, strict: bool, maximum: float = math.inf):
    """An argparse type: ``convert`` the text, then require a finite value above (``strict``) or at
    ``minimum``, and at most ``maximum``."""
    bound = f"{'>' if strict else '>='} {number_text(minimum)}" + (f" and <= {number_text(maximum)}" if math.isfinite(maximum) else "")

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        if not math.isfinite(value) or value < minimum or (strict and value == minimum) or value > maximum:
            raise argparse.ArgumentTypeError(f"expected {'a finite number' if convert is float else noun} {bound}, got {text!r}")
        return value

    return parse


_positive_float = _number(float, "a number", 0, strict=True)
_non_negative_float = _number(float, "a number", 0, strict=False)
_non_negative_int = _number(int, "a whole number", 0, strict=False)
_positive_int = _number(int, "a whole number", 1, strict=False)
_boot_s = _number(float, "a number of seconds", 0.0, strict=False, maximum=3600.0)
_agent_count = _number(int, "a whole number", 1, strict=False, maximum=10_000_000)

_DEADLINE_FORMS = "a whole number of slots >= 0 like 12, or a duration like 6h, 90m, 1h30m, 1d"


def _deadline_text(text: str) -> str:
    """An argparse type for --deadline: a whole number of slots or a duration, kept as text until
    --slot-s is known (:func:`deadline_slots` turns it into slots)."""
    stripped = text.strip()
    if re.fullmatch(r"\d+", stripped) or (re.search(r"[dhms]\Z", stripped) and parse_duration_s(stripped) is not None):
        return stripped
    raise argparse.ArgumentTypeError(f"expected {_DEADLINE_FORMS}, got {text!r}")


def _compact_duration(seconds: float) -> str:
    """Seconds in the duration grammar --deadline reads: 300 -> '5m', 5400 -> '1h30m', 90 -> '1m30s'."""
    parts = []
    rest = float(seconds)
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        whole = math.floor(rest / size + 1e-9)
        if whole:
            parts.append(f"{whole}{unit}")
            rest -= whole * size
    if rest > 1e-9 or not parts:
        parts.append(f"{rest:g}s")
    return "".join(parts)


def deadline_slots(text: str, slot_s: float, flag: str = "--deadline") -> int:
    """D in slots: a bare whole number is slots; a duration (6h, 90m, 1h30m, 1d, 600s) is divided by
    ``slot_s`` and must come out a whole number of slots. Raises ConfigError naming ``flag``, the
    duration, the slots it makes and the slot length otherwise."""
    stripped = str(text).strip()
    if re.fullmatch(r"\d+", stripped):
        return int(stripped)
    seconds = parse_duration_s(stripped) if re.search(r"[dhms]\Z", stripped) else None
    if seconds is None:
        raise ConfigError(f"{flag}: expected {_DEADLINE_FORMS}, got {text!r}")
    slots = seconds / slot_s
    whole = round(slots)
    if abs(slots - whole) > 1e-9 * max(1.0, slots):
        raise ConfigError(
            f"{flag} {stripped} is {slots:.4g} slots of {slot_s:g} s; give a multiple of {_compact_duration(slot_s)} or a number of slots"
        )
    return int(whole)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except None ones: their help line already says what happens."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False:
            return action.help or ""
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autoscaler",
        description="Deadline-aware, energy-saving capacity provisioning for Hadoop/EMR clusters.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    replay = commands.add_parser(
        "replay",
        help="replay a recorded trace through provisioning policies and compare their costs",
        description="Replay a SWIM trace (or a slot,released CSV load curve) through the policies, "
        "print each one's cost and saving against 'follow the workload', and optionally write "
        "a PNG, CSV and JSON of the schedules.",
        formatter_class=_HelpFormatter,
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
        "--deadline", "-D", type=_deadline_text, default="2",
        help="uniform deadline D: slots (12), or a duration (6h, 90m, 1h30m, 1d) that is a whole number of slots of --slot-s",
    )  # fmt: skip
    _add_model_arguments(replay)
    _add_signal_arguments(replay)
    replay.add_argument("--delta", type=_positive_int, default=None, help="VFW look-ahead delta in slots, 0 < delta < D (default: floor(D/2))")
    replay.add_argument("--format", choices=["table", "json", "csv"], default="table", help="stdout format")
    replay.add_argument("--out", type=Path, default=None, help="folder for replay.png, replay.json, slots.csv, summary.csv")
    replay.set_defaults(handler=_run_replay)

    sweep = commands.add_parser(
        "sweep",
        help="savings of every policy over a range of deadlines, on one or more traces (Fig. 9 and 11)",
        description="Run the policies at every deadline D on each trace and print the savings against "
        "'follow the workload'; with --out, write fig9.png (saving against D) and fig11.png (VFW saving "
        "against delta at one D), plus sweep.json.",
        formatter_class=_HelpFormatter,
    )
    sweep.add_argument(
        "--trace", action="append", default=None, help=f"trace or load curve, repeatable: {TRACE_NAMES_HELP} (default: A)"
    )
    sweep.add_argument(
        "--deadlines", default="1-12",
        help="deadlines D: a range of slots 'A-B', or a comma list of slots and durations (1h,2h,6h,12h: whole numbers of slots of --slot-s)",
    )  # fmt: skip
    sweep.add_argument("--policy", default="hold,offline,gcp-u,vfw", help="comma list of uniform-deadline policies")
    sweep.add_argument("--delta-deadline", type=_positive_int, default=12, help="the D at which VFW's delta is swept")
    _add_model_arguments(sweep)
    _add_signal_arguments(sweep)
    sweep.add_argument("--format", choices=["table", "json"], default="table", help="stdout format")
    sweep.add_argument("--out", type=Path, default=None, help="folder for fig9.png, fig11.png and sweep.json")
    sweep.set_defaults(handler=_run_sweep)

    submit = commands.add_parser(
        "submit",
        help="queue a job with a deadline for the daemon to release as an EMR step",
        description="Queue a job. Give its length (--length-s) or its three SWIM sizes (--sizes) to estimate it "
        "from, and its step: --command (run with command-runner.jar) or --jar with --args. "
        "With --id the submission is idempotent: the same id and content again changes nothing, and the "
        f"same id with other content is refused, saying what differs. For the deadline, {SAME_DEADLINE_RULE}.",
        formatter_class=_HelpFormatter,
    )
    _add_store_arguments(submit)
    submit.add_argument("--id", dest="job_id", default=None, help="client job id ([A-Za-z0-9._-], up to 64); makes resubmission safe")
    submit.add_argument("--name", required=True, help="job name")
    submit.add_argument("--tenant", required=True, help="tenant the job belongs to")
    submit.add_argument(
        "--deadline", required=True,
        help="a duration from now (90m, 2h, 1h30m, 600) or an ISO-8601 time with zone; retried with the same --id, "
        "the same duration keeps the first submission's deadline",
    )  # fmt: skip
    length_or_sizes = submit.add_mutually_exclusive_group(required=True)
    length_or_sizes.add_argument("--length-s", type=_positive_float, help="estimated run time in seconds")
    length_or_sizes.add_argument(
        "--sizes", type=_non_negative_float, nargs=3, metavar=("MAP_IN", "SHUFFLE", "REDUCE_OUT"),
        help="map input, shuffle and reduce output bytes; the length is estimated from them (§V-A)",
    )
    submit.add_argument("--jar", help="jar to run (a path on the cluster or s3://...); its arguments follow --args")
    submit.add_argument("--main-class", default=None, help="main class for --jar")
    submit.add_argument(
        "--command", nargs=argparse.REMAINDER, default=None,
        help="last option: everything after it is the command for command-runner.jar, dashes included "
        "(--command spark-submit --deploy-mode cluster app.py)",
    )  # fmt: skip
    submit.add_argument(
        "--args", nargs=argparse.REMAINDER, default=[],
        help="last option: everything after it is the arguments for --jar, dashes included",
    )  # fmt: skip
    submit.set_defaults(handler=_run_submit)

    jobs = commands.add_parser(
        "jobs",
        help="list the queued, released, running, done, failed and late jobs",
        description=f"List the jobs of the store with their state, and whether each is late. A job is {LATE_HELP}.",
        formatter_class=_HelpFormatter,
    )
    _add_store_arguments(jobs)
    jobs.add_argument(
        "--state", choices=["queued", "released", "running", "done", "failed", "late"], default=None,
        help="only jobs in this state, or only the late ones (in any state)",
    )  # fmt: skip
    jobs.add_argument("--format", choices=["table", "json"], default="table", help="stdout format")
    jobs.add_argument("--by-tenant", action="store_true", help="one row per tenant: jobs by state, late jobs (missed deadlines), dominant share")
    jobs.set_defaults(handler=_run_jobs)

    run = commands.add_parser(
        "run",
        help="run the daemon: every slot, decide capacity, resize the TASK group and release jobs",
        description="Run the slot loop against the EMR cluster of --config. --dry-run runs the same loop on a "
        "shadow of the store and a simulated cluster that starts from EMR's TASK group and follows the dry "
        "run's own decisions: it logs what the daemon would do, slot after slot, and changes nothing on the "
        "cluster or in the store. --replay TRACE drives the same slot loop from a recorded trace with a "
        "simulated clock against an in-memory cluster, and checks its capacity against `autoscaler replay`. "
        "Settings come from --config and AUTOSCALER_* variables in every mode. With [carbon] source set and policy "
        "hold, run and run --dry-run decide as hold+carbon on that signal; run --replay is carbon-blind (it ignores [carbon]).",
        formatter_class=_HelpFormatter,
    )
    run.add_argument("--config", type=Path, default=None, help="TOML config (fields also from AUTOSCALER_* variables)")
    run.add_argument("--dry-run", action="store_true", help="decide every slot as the daemon would, change nothing (with --replay: keep no store at all)")
    run.add_argument("--decisions-out", type=Path, default=None, metavar="FILE", help="append one JSON line per slot: slot, m_t, nodes, released job ids, reason")
    run.add_argument("--replay", default=None, metavar="TRACE", help=f"replay a SWIM trace through the daemon, carbon-blind: {TRACE_NAMES_HELP}")
    run.add_argument("--speedup", type=_positive_float, default=1e9, help="replay: simulated seconds per real second")
    run.add_argument("--policy", choices=["hold", "gcp-u", "gcp", "vfw", "follow"], default=None, help="replay: policy (default: the config's, else hold)")
    run.add_argument("--deadline", "-D", type=_non_negative_int, default=None, help="replay: deadline D in slots for every job (default: the config's, else 2)")
    run.add_argument("--store", type=Path, default=None, help="replay: job store file, kept (default: a temporary one, removed at exit)")
    run.add_argument("--keep-store", action="store_true", help="replay: keep the temporary store and print where it is")
    run.add_argument("--max-nodes", type=_positive_int, default=None, help=f"replay: most task nodes (default: the config's cluster.max_nodes, else {DEFAULT_MAX_NODES})")
    run.add_argument("--tenants", type=_positive_int, default=1, help="replay: deal the trace's jobs to this many tenants in turn (fair shares under overload)")
    run.set_defaults(handler=_run_daemon)

    explain = commands.add_parser(
        "explain",
        help="why a past slot's capacity and nodes are what they are",
        description="Print one slot's decision from the store's decision log (or a --decisions-out file): m_t, x_t, "
        "nodes, the jobs released, late and missed, and which rule bound m_t and the nodes, in words; under hold+carbon "
        "also the signal the slot saw (or why it had none).",
        formatter_class=_HelpFormatter,
    )
    _add_store_arguments(explain)
    explain.add_argument("--slot", type=_non_negative_int, default=None, help="the slot (default: the last decided)")
    explain.add_argument("--decisions", type=Path, default=None, metavar="FILE", help="read a --decisions-out file instead of the store")
    explain.add_argument("--format", choices=["text", "json"], default="text", help="stdout format")
    explain.set_defaults(handler=_run_explain)

    store = commands.add_parser(
        "store",
        help="back up, restore or check the job store file",
        description="backup DEST: copy the store to a new file with SQLite's online backup API, consistent while a "
        "daemon writes. restore SRC: replace the store with the backup SRC (checked first), while no daemon runs "
        "on it and nothing else has it open; the replaced files are kept beside it. check: read the whole store "
        "with SQLite's quick_check. Each prints the jobs and the last slot of the store it made or read.",
        formatter_class=_HelpFormatter,
    )
    store_actions = store.add_subparsers(dest="store_action", required=True, metavar="ACTION")
    store_backup = store_actions.add_parser("backup", help="copy the store to a new file", formatter_class=_HelpFormatter)
    _add_store_arguments(store_backup)
    store_backup.add_argument("dest", type=Path, metavar="DEST", help="the backup file to write (refused if it exists)")
    store_backup.add_argument("--force", action="store_true", help="replace DEST if it exists")
    store_restore = store_actions.add_parser("restore", help="replace the store with a backup", formatter_class=_HelpFormatter)
    _add_store_arguments(store_restore)
    store_restore.add_argument("source", type=Path, metavar="SRC", help="the backup file to restore (a store written by store backup)")
    store_check = store_actions.add_parser("check", help="check the whole store file and summarise it", formatter_class=_HelpFormatter)
    _add_store_arguments(store_check)
    store.set_defaults(handler=_run_store)

    report = commands.add_parser(
        "report",
        help="energy used and saved: the schedule run against follow the workload and no provisioning",
        description="Energy report shaped like the deferral paper's Table IV and Fig. 13. With --config: the "
        "daemon's slots between --since and --until (default: the last full UTC day), measured from the TASK "
        "nodes' CloudWatch metrics where they exist and modelled from the decision log where not, against "
        "'follow the workload' and 'no provisioning' (all max_nodes on), modelled. With --replay TRACE: every "
        "schedule modelled from a replay of the trace. The report says which numbers are measured.",
        formatter_class=_HelpFormatter,
    )
    report.add_argument("--config", type=Path, default=None, help="TOML config: the store, cluster, and [report] email settings")
    report.add_argument("--replay", nargs="?", const="default", default=None, metavar="TRACE", help=f"model a replay of TRACE instead of the daemon's slots: {TRACE_NAMES_HELP} (alone: A)")
    report.add_argument("--since", default=None, help="start: ISO-8601 time with a zone, or a duration ago like '24h' (default: the start of yesterday, UTC)")
    report.add_argument("--until", default=None, help="end: ISO-8601 time with a zone, or a duration ago (default: the start of today, UTC)")
    report.add_argument("--power-model", default=None, help="power model: table-iii (the paper's Table III) or ccf-aws (default: the config's, else table-iii)")
    report.add_argument("--boot-s", type=_boot_s, default=None, help="seconds a started node draws idle power before it works, 0 to 3600 (default: the config's, else 300)")
    report.add_argument("--out", type=Path, default=None, help="folder for energy.md, energy-slots.csv and energy.png")
    report.add_argument("--format", choices=["markdown", "json"], default="markdown", help="stdout format")
    report.add_argument("--no-measure", action="store_true", help="model the actual schedule from the decision log; do not read CloudWatch")
    report.add_argument("--publish", action="store_true", help="publish EnergyWh and SavedWh to CloudWatch, with a signal also Co2Grams and Co2SavedGrams (or CostDollars and CostSavedDollars) (with --config, not --replay)")
    report.add_argument("--email", action="store_true", help="send the report with its PNG by the config's [report] email settings")
    report.add_argument("--carbon", default=None, metavar="SOURCE", help="carbon or price signal, a file or http(s) URL: CSV time,value, WattTime, Electricity Maps or UK Carbon Intensity JSON; adds gCO2eq or $ per schedule, slot and tenant (default: the config's [carbon] source, else none)")
    report.add_argument("--carbon-unit", default=None, choices=["gCO2eq/kWh", "lbs/MWh", "$/kWh", "$/node-hour"], help="the signal's unit, needed for CSV (default: the config's [carbon] unit)")
    replay_group = report.add_argument_group("with --replay")
    replay_group.add_argument("--policy", default=REPORT_POLICIES, help="policies to compare, a comma list or 'all' (follow is always the baseline)")
    replay_group.add_argument("--deadline", "-D", type=_deadline_text, default="2", help="uniform deadline D: slots (12), or a duration (6h, 90m) that is a whole number of slots of --slot-s")
    replay_group.add_argument("--slot-s", type=_positive_float, default=300.0, help="slot length in seconds")
    replay_group.add_argument("--window", type=_positive_int, default=None, help="slots in the window (default: the trace's 24 h)")
    replay_group.add_argument("--start", default=None, help="ISO-8601 time with a zone where the trace's first slot is placed in the signal (default with --carbon: a day after the signal's first point when it covers that day and the replay, else its first point, as replay places it)")
    report.set_defaults(handler=_run_report)

    drf = commands.add_parser(
        "drf",
        help="dynamic dominant resource fairness shares as agents arrive one by one",
        description="Read agents' demand vectors (a CSV: agent, then one column per resource, rows in arrival "
        "order) and print dynamic DRF's water level M^k and dominant shares x^k at every step k, with the "
        "linear-time algorithm. Each resource has capacity 1; at step k at most k/n of each is handed out.",
        formatter_class=_HelpFormatter,
    )
    drf.add_argument("--demands", type=Path, required=True, help="CSV with header agent,RESOURCE,...; one row per agent")
    drf.add_argument("--n", type=_agent_count, default=None, help="total agents n that will arrive, at most 10,000,000 (default: the row count)")
    drf.add_argument("--format", choices=["table", "json"], default="table", help="stdout format")
    drf.add_argument("--ratios", action="store_true", help="also the competitive ratios against the offline LP optimum at every step (one LP pair per step)")
    drf.add_argument("--yarn-out", type=Path, default=None, help="write the final shares as a YARN fair-scheduler allocation XML")
    drf.add_argument("--plot", type=Path, default=None, help="write a PNG of the competitive ratios per step (implies --ratios)")
    drf.set_defaults(handler=_run_drf)
    return parser


def _add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=None, help="TOML config; its store_path and known_tenants are used")
    parser.add_argument("--store", type=Path, default=None, help="job store file (default: the config's store_path, else autoscaler.db)")


def _open_store(args: argparse.Namespace, must_exist: bool = False):
    from autoscaler.adapters.sqlite_store import SqliteJobStore

    settings = _settings_or_none(args.config)
    path = args.store or (settings.store_path if settings else Path("autoscaler.db"))
    if must_exist and not Path(path).exists():
        from autoscaler.adapters.sqlite_store import marker_path

        if marker_path(path).exists():
            # It was there: opening it says when it was made and how to restore it.
            SqliteJobStore(path, read_only=True)
        raise ConfigError(f"{path}: no job store here (give --store or --config with its store_path)")
    # Commands that only read (jobs, explain, store backup) open it read-only: they change no file.
    return SqliteJobStore(path, read_only=must_exist), settings


def _settings_or_none(path: Path | None):
    from autoscaler.app.config import load_settings

    return load_settings(path) if path is not None else None


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Cost, slot and job-length options shared by replay and sweep."""
    parser.add_argument("--e0", type=_non_negative_float, default=1.0, help="operating cost per server-slot, idle part")
    parser.add_argument("--e1", type=_non_negative_float, default=0.0, help="operating cost per server-slot at full load, load part")
    parser.add_argument("--beta", type=_non_negative_float, default=12.0, help="switching cost per server turned on or off")
    parser.add_argument("--slot-s", type=_positive_float, default=300.0, help="slot length in seconds")
    parser.add_argument("--window", type=_positive_int, default=None, help="slots in the window (default: the trace's 24 h)")
    parser.add_argument("--max-servers", type=_positive_float, default=None, help="cap M on servers on (default: none)")
    parser.add_argument("--skip-bad-lines", action="store_true", help="skip malformed trace lines (and count them) instead of stopping")
    parser.add_argument(
        "--memory-budget-mb", type=_positive_float, default=DEFAULT_MEMORY_BUDGET_MB,
        help="refuse, before allocating, a run estimated to need more memory than this (MiB)",
    )  # fmt: skip
    length = parser.add_argument_group("job-length estimate (deferral paper, §V-A)")
    length.add_argument("--block-mb", type=_positive_float, default=128.0, help="HDFS block size in MB")
    length.add_argument("--map-s-per-mb", type=_non_negative_float, default=0.8, help="f(x) = this * x")
    length.add_argument("--reduce-s-per-mb", type=_non_negative_float, default=0.9, help="g(x) = this * x")
    length.add_argument("--read-mb-s", type=_positive_float, default=100.0, help="V_i, data read rate")
    length.add_argument("--write-mb-s", type=_positive_float, default=100.0, help="V_o, data output rate")
    length.add_argument("--network-mb-s", type=_positive_float, default=10.0, help="V_n, network transfer rate")


def _add_signal_arguments(parser: argparse.ArgumentParser) -> None:
    """Energy model and carbon/price signal options shared by replay and sweep."""
    from energy.power import MODELS
    from energy.signal import UNITS

    energy = parser.add_argument_group("energy and a carbon or price signal")
    energy.add_argument("--power-model", choices=list(MODELS), default="table-iii", help="power model for kWh: the paper's Table III, or Cloud Carbon Footprint's AWS averages for 1 vCPU")
    energy.add_argument("--boot-s", type=_boot_s, default=300.0, help="seconds a started node draws idle power before it works, 0 to 3600")
    energy.add_argument(
        "--carbon", default=None, metavar="SOURCE",
        help="per-slot carbon intensity or price: a file or http(s) URL (CSV time,value; WattTime v3, Electricity Maps or "
        "UK Carbon Intensity JSON); offline and hold become carbon-aware, every policy is costed under it",
    )  # fmt: skip
    energy.add_argument("--carbon-unit", choices=list(UNITS), default=None, help="unit of a CSV --carbon (JSON names its own); lbs/MWh is converted to gCO2eq/kWh")
    energy.add_argument(
        "--forecast", default="persistence", metavar="persistence|perfect|SOURCE",
        help="what the online policy knows of later slots: persistence (the same slot a day before), perfect (the actual "
        "values), or a forecast file or URL (in the slots it covers; persistence elsewhere)",
    )  # fmt: skip
    energy.add_argument(
        "--start", default=None, metavar="TIME",
        help="ISO-8601 time with a zone of the trace's first slot in the signal (default: a day after the signal's first "
        "time when it covers that day and the replay, else its first time)",
    )  # fmt: skip


def _signal_inputs(args: argparse.Namespace):
    """(the --carbon Signal or None, the forecast: 'persistence', 'perfect' or a Signal, start Unix seconds or None)."""
    from autoscaler.adapters.signal_source import load_signal
    from energy.signal import parse_time_s

    if args.carbon is None:
        given = [flag for flag, value in (("--carbon-unit", args.carbon_unit), ("--start", args.start)) if value is not None]
        if args.forecast != "persistence":
            given.append("--forecast")
        if given:
            raise ConfigError(f"{', '.join(given)} without --carbon: give the signal with --carbon SOURCE")
        return None, "persistence", None
    start_s = None
    if args.start is not None:
        try:
            start_s = parse_time_s(args.start)
        except ValueError as exc:
            raise ConfigError(f"--start: {exc}") from None
    signal = load_signal(args.carbon, args.carbon_unit)
    forecast = args.forecast
    if forecast.strip().lower() in ("persistence", "perfect") and forecast not in ("persistence", "perfect"):
        raise ConfigError(f"--forecast {forecast!r}: the forms are persistence, perfect (lower case) or a file or URL")
    if not forecast.strip():
        raise ConfigError("--forecast: expected persistence, perfect or a file or URL, got an empty value")
    if forecast not in ("persistence", "perfect"):
        # A CSV forecast is in the signal's own unit; a JSON one names its unit, which must agree.
        forecast = load_signal(forecast, args.carbon_unit or signal.unit)
    return signal, forecast, start_s


def _model(args: argparse.Namespace) -> tuple[CostParams, LengthModel]:
    params = CostParams(e0=args.e0, e1=args.e1, beta=args.beta, max_servers=args.max_servers)
    length_model = LengthModel(
        block_bytes=args.block_mb * MIB,
        map_s_per_mb=args.map_s_per_mb,
        reduce_s_per_mb=args.reduce_s_per_mb,
        read_mb_s=args.read_mb_s,
        write_mb_s=args.write_mb_s,
        network_mb_s=args.network_mb_s,
    )
    return params, length_model


def parse_deadlines(text: str, slot_s: float = 300.0) -> list[int]:
    """'1-12' (slots), or '2,4,8' or '1h,2h,6h' (each slots or a duration, :func:`deadline_slots` at
    ``slot_s``) -> whole numbers of slots >= 0; ConfigError naming --deadlines and what is wrong otherwise."""
    forms = "a range like 1-12 or a list like 2,4,8 of whole numbers >= 0 (slots), or of durations like 1h,2h,6h"
    span = re.fullmatch(r"\s*(-?\d+)\s*-\s*(-?\d+)\s*", text)
    if span:
        low, high = int(span.group(1)), int(span.group(2))
        if low < 0 or high < 0:
            raise ConfigError(f"--deadlines: {text!r} has a negative deadline; expected {forms}")
        if low > high:
            raise ConfigError(f"--deadlines: the range {text!r} runs backwards ({low} > {high}); write it smaller first: {high}-{low}")
        if high - low > 10_000:
            raise ConfigError(f"--deadlines: {text!r} is {high - low + 1:,} deadlines to sweep; expected at most 10,001")
        return list(range(low, high + 1))
    parts = text.split(",")
    if len(parts) > 1 and not all(part.strip() for part in parts):
        raise ConfigError(f"--deadlines: {text!r} has an empty item; expected {forms}")
    both = " (a range or a list, not both)" if "-" in text and "," in text else ""
    values = []
    for part in (p.strip() for p in parts if p.strip()):
        if re.fullmatch(r"-?\d+", part):
            values.append(int(part))
        elif not both and re.search(r"[dhms]\Z", part) and parse_duration_s(part) is not None:
            values.append(deadline_slots(part, slot_s, "--deadlines"))
        else:
            raise ConfigError(f"--deadlines: expected {forms}{both}, got {text!r}")
    if not values:
        raise ConfigError(f"--deadlines: expected {forms}, got {text!r}")
    if min(values) < 0:
        raise ConfigError(f"--deadlines: {text!r} has a negative deadline ({min(values)}); expected {forms}")
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ConfigError(f"--deadlines: {text!r} gives D = {', '.join(map(str, repeated))} more than once; give each deadline once")
    return values


def load_workload(
    trace: str | None,
    *,
    slot_s: float,
    window_slots: int | None,
    skip_bad_lines: bool,
    length_model: LengthModel,
    deadline_classes: bool = False,
    classes_optional: bool = False,
    flag: str = "--trace",
    check_size=None,
):
    """Read the trace into workload curves: ``trace`` is a name or a path as :func:`open_trace`
    reads it (None: Workload A); ``flag`` names the option in errors.

    With ``deadline_classes`` (and a SWIM trace without a deadline column) each job
    gets a k-means class deadline (§VI-A) and the workload carries L_{d,t}; with
    ``classes_optional`` a trace too small for k-means gets no classes instead of an error.
    ``check_size``: called with a :class:`~autoscaler.core.budget.WorkloadSize` once the input is
    read and before the curves are built, to refuse a run too large (it raises).
    Returns (Workload, DeadlineAssignment or None).
    """
    from autoscaler.core import workload
    from autoscaler.core.budget import WorkloadSize
    from autoscaler.core.classes import assign_deadlines, job_length_slots

    assignment = None
    with open_trace(trace, flag) as (path, source):
        if path.name.lower().endswith((".csv", ".csv.gz")):
            load = workload.read_load_curve(path)
            if window_slots is not None:
                # The window cuts a longer curve and pads a shorter one with empty slots.
                load = np.pad(load[:window_slots], (0, max(0, window_slots - load.shape[0])))
            if check_size is not None:
                check_size(WorkloadSize(n_slots=load.shape[0], slot_s=slot_s, curve=True))
            result = workload.workload_from_curve(load, slot_s=slot_s, source=source)
        else:
            parsed = workload.read_swim(path, skip_bad_lines=skip_bad_lines)
            deadlines = None
            window = window_slots or max(1, round(workload.TRACE_DAY_S / slot_s))
            if deadline_classes and parsed.jobs[0].deadline_slots is None:
                try:
                    assignment = assign_deadlines(parsed, job_length_slots(parsed, slot_s, window, length_model))
                    deadlines = assignment.deadline_slots
                except ConfigError:
                    if not classes_optional:
                        raise
            if check_size is not None and window <= MAX_SLOTS:  # beyond, the curves refuse it themselves
                rows = (None, None)
                if deadlines is not None or parsed.jobs[0].deadline_slots is not None:
                    rows = workload.deadline_rows(parsed, slot_s, window, deadlines)
                check_size(WorkloadSize(n_slots=window, slot_s=slot_s, n_jobs=len(parsed.jobs), n_deadlines=rows[0], max_deadline=rows[1]))
            result = workload.workload_from_trace(
                parsed, slot_s=slot_s, window_slots=window_slots, length_model=length_model, deadline_slots=deadlines
            )
            result = _with_source(result, source)
    return result, assignment


def _note_shadowed_file(trace: str | None, flag: str, err: Console) -> None:
    """Say so when a trace name (A, B, default) is also a file here: the name wins."""
    path = shadowed_file(trace)
    if path is not None:
        err.print(
            f"note: {flag} {trace} is the embedded {shipped(trace).title}; the file {trace} here is not read "
            f"(give ./{trace} to read it)",
            markup=False,
            highlight=False,
        )


def _with_source(w: Workload, source: str) -> Workload:
    from dataclasses import replace

    return replace(w, source=source)


def _run_replay(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.app import render
    from autoscaler.core import budget
    from autoscaler.core.replay import parse_policy_list, place_signal, replay, to_dict
    from energy.power import power_model

    names = parse_policy_list(args.policy)
    args.deadline = deadline_slots(args.deadline, args.slot_s)
    carbon_signal, forecast, start_s = _signal_inputs(args)
    slow: list[str] = []

    def check_size(size) -> None:
        run = [n for n in names if n != "gcp" or size.n_deadlines is not None]
        estimate = budget.replay_estimate(size, run, args.deadline, files=args.out is not None)
        budget.check_memory(estimate, args.memory_budget_mb, "replay", budget.describe(size, args.window))
        slow.extend(estimate.slow_policies())

    params, length_model = _model(args)
    every = args.policy.strip() == "all"
    if every and args.deadline < 2:
        names.remove("vfw")
        err.print("note: vfw left out of 'all': it needs D >= 2", highlight=False)
    _note_shadowed_file(args.trace, "--trace", err)
    with err.status("reading the trace"):
        workload, assignment = load_workload(
            args.trace,
            slot_s=args.slot_s,
            window_slots=args.window,
            skip_bad_lines=args.skip_bad_lines,
            length_model=length_model,
            deadline_classes="gcp" in names,
            classes_optional=every,
            check_size=check_size,
        )
    for note in slow:
        err.print(f"note: {note}", highlight=False)
    for warning in workload.notes:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if every and workload.active_by_deadline is None:
        names.remove("gcp")
        err.print("note: gcp left out of 'all': it needs a SWIM trace with at least 10 distinct jobs or a deadline column", highlight=False)
    placed = None
    if carbon_signal is not None:
        placed = place_signal(
            carbon_signal, args.slot_s, workload.n_slots + args.deadline, _wanted_slots(workload, args.deadline, "gcp" in names),
            start_s=start_s, forecast=forecast,
        )  # fmt: skip
        for note in placed.notes:
            err.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    with err.status("running policies") as status:
        result = replay(
            workload, names, args.deadline, params, progress=lambda n: status.update(f"running {n}"), delta=args.delta,
            signal=placed, power=power_model(args.power_model), boot_s=args.boot_s,
        )  # fmt: skip
    err.print(f"[dim]{render.workload_summary(result)}[/dim]", highlight=False)
    for name, policy in result.policies.items():
        if policy.note:
            err.print(f"note: {policy.note}", markup=False, highlight=False)
        if policy.worse_than_follow:
            aware = f" (the abstract cost of eq. 2: {policy.schedule.policy} minimises the signal's)" if policy.carbon_aware else ""
            err.print(
                f"warning: {name} costs more than follow on this replay ({policy.cost.total:,.1f} against "
                f"{result.policies['follow'].cost.total:,.1f}, saving {policy.saving_pct:.2f} %, D = {args.deadline}){aware}",
                markup=False,
                highlight=False,
            )
    if args.delta is not None and "vfw" not in names:
        err.print("note: --delta is only used by vfw, which was not run", highlight=False)
    document = to_dict(result)
    if assignment is not None:
        document["classes"] = [vars(c) for c in assignment.classes]
    if args.format == "json":
        sys.stdout.write(render.json_text(document) + "\n")
    elif args.format == "csv":
        sys.stdout.write(render.summary_csv(result))
    else:
        out.print(render.summary_table(result))
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


def _wanted_slots(workload: Workload, deadline: int, with_gcp: bool) -> int:
    """The slots a replay's policies may read of a signal: every slot scheduled (gcp: the window plus
    its largest class deadline) and the look-ahead of the last one (hold+carbon reads t..t+2D)."""
    wanted = workload.n_slots + 3 * deadline
    if with_gcp and workload.active_by_deadline is not None:
        from autoscaler.core.model import LoadByDeadline

        by_deadline = workload.active_by_deadline
        nu = by_deadline.max_deadline if isinstance(by_deadline, LoadByDeadline) else np.shape(by_deadline)[0] - 1
        wanted = max(wanted, workload.n_slots + int(nu))
    return wanted


def _run_sweep(args: argparse.Namespace, out: Console, err: Console) -> int:
    from dataclasses import asdict

    from rich.progress import Progress

    from autoscaler.app import render
    from autoscaler.core.policies import UNIFORM
    from autoscaler.core.sweep import solves_needed, sweep

    deadlines = parse_deadlines(args.deadlines, args.slot_s)
    carbon_signal, forecast, start_s = _signal_inputs(args)
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    unknown = [p for p in policies if p not in UNIFORM or p == "follow"]
    if unknown or not policies:
        raise ConfigError(f"--policy: expected a comma list of {', '.join(n for n in UNIFORM if n != 'follow')}, got {args.policy!r}")
    if args.delta_deadline < 2:
        raise ConfigError(f"--delta-deadline: VFW needs D >= 2, got {args.delta_deadline}")
    params, length_model = _model(args)
    from autoscaler.core import budget

    def check_size(size) -> None:
        # One schedule at a time, at the longest D; gcp with classes once a trace.
        run = ["follow", *policies, "vfw"] + (["gcp"] if size.n_deadlines is not None else [])
        estimate = budget.replay_estimate(size, run, max(deadlines))
        budget.check_memory(estimate, args.memory_budget_mb, "sweep", budget.describe(size, args.window))

    workloads = {}
    given: dict[str, str] = {}
    for trace in args.trace or [None]:
        _note_shadowed_file(trace, "--trace", err)
        name = trace_label(trace)
        if name in given:
            raise ConfigError(f"--trace: {given[name]!r} and {trace!r} are the same trace ({name}); give each trace once")
        given[name] = trace
        workload, _ = load_workload(
            trace,
            slot_s=args.slot_s,
            window_slots=args.window,
            skip_bad_lines=args.skip_bad_lines,
            length_model=length_model,
            deadline_classes=True,
            classes_optional=True,
            check_size=check_size,
        )
        workloads[name] = workload
    shortest = min(w.n_slots for w in workloads.values())
    if max(deadlines) > shortest:
        raise ConfigError(f"--deadlines: D = {max(deadlines)} is longer than the window ({shortest} slots)")
    signals = None
    if carbon_signal is not None:
        from autoscaler.core.replay import place_signal

        longest = max(deadlines)
        signals = {}
        for name, workload in workloads.items():
            signals[name] = place_signal(
                carbon_signal, args.slot_s, workload.n_slots + longest, workload.n_slots + 3 * longest, start_s=start_s, forecast=forecast
            )
            for note in signals[name].notes:
                err.print(f"note: {name}: {note}", markup=False, highlight=False, soft_wrap=True)
    from energy.power import power_model

    total = solves_needed(len(workloads), deadlines, policies, args.delta_deadline)
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("sweeping", total=total)
        result = sweep(
            workloads, deadlines, policies, params, args.delta_deadline, advance=lambda: progress.advance(task),
            signals=signals, power=power_model(args.power_model), boot_s=args.boot_s,
        )  # fmt: skip
    document = asdict(result)
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


def _run_submit(args: argparse.Namespace, out: Console, err: Console) -> int:
    import time

    from autoscaler.core.intake import build_job
    from autoscaler.core.readable import utc_text

    if (args.command is None) == (args.jar is None):
        raise ConfigError("submit: give the step as --command ... (last) or as --jar JAR [--args ...]")
    if args.command is not None and not args.command:
        raise ConfigError("submit: --command needs the command after it")
    store, settings = _open_store(args)
    with store:
        job = build_job(
            job_id=args.job_id,
            name=args.name,
            tenant=args.tenant,
            now_s=time.time(),
            deadline=args.deadline,
            length_s=args.length_s,
            sizes=tuple(args.sizes) if args.sizes else None,
            jar=args.jar,
            args=list(args.args),
            command=args.command,
            main_class=args.main_class,
            known_tenants=set(settings.known_tenants) if settings and settings.known_tenants else None,
        )
        added = store.submit(job)
        if not added:
            job = next(j for j in store.all_jobs() if j.job_id == job.job_id)
    out.print(f"{'queued' if added else 'already queued'}: {job.job_id}", highlight=False)
    kept = "" if added else " (the first submission's)"
    err.print(f"deadline {utc_text(job.deadline_s)}{kept}", highlight=False)
    return 0


def _run_jobs(args: argparse.Namespace, out: Console, err: Console) -> int:
    import time

    from rich.table import Table

    from autoscaler.core.controller import ControllerConfig
    from autoscaler.core.lateness import slots_late

    store, settings = _open_store(args, must_exist=True)
    with store:
        jobs = store.all_jobs()
        saved = store.load_state()
        last_slot = store.last_slot()
    config = settings.controller_config(0.0) if settings else ControllerConfig()
    now_s = time.time()
    late = {job.job_id: slots_late(job, config, now_s, last_slot) for job in jobs}

    if args.by_tenant:
        if args.state:
            raise ConfigError("jobs: --by-tenant counts jobs in every state; leave out --state")
        return _print_tenants(jobs, late, saved or {}, args.format, out)
    if args.state == "late":
        jobs = [job for job in jobs if late[job.job_id]]
    elif args.state:
        jobs = [job for job in jobs if job.state == args.state]
    if args.format == "json":
        rows = [{**dataclasses.asdict(job), "shown_state": job.state, "late": late[job.job_id] > 0, "slots_late": late[job.job_id]} for job in jobs]
        sys.stdout.write(json.dumps(rows) + "\n")
        return 0
    n_late = sum(1 for job in jobs if late[job.job_id])
    table = Table(title=f"{count_text(len(jobs), 'job')}, {n_late:,} late", caption=LATE_HELP if n_late else None)
    for column in ["id", "name", "tenant", "state", "late", "submitted (UTC)", "deadline (UTC)", "length s", "step"]:
        table.add_column(column, no_wrap=True)
    for job in jobs:
        behind = late[job.job_id]
        shown_late = "" if not behind else f"by {count_text(behind, 'slot')}"
        table.add_row(job.job_id, job.name, job.tenant, job.state, shown_late, _utc(job.submit_s), _utc(job.deadline_s), f"{job.length_s:,.0f}", job.step_id or "")
    out.print(table)
    return 0



def _print_tenants(jobs: list, late: dict[str, int], saved_state: dict, fmt: str, out: Console) -> int:
    """Per tenant: jobs by state, late jobs (``late``: {job id: slots late}, see autoscaler.core.lateness), dominant share."""
    from rich.table import Table

    shares = dict(zip(saved_state.get("tenants", []), saved_state.get("dominant_shares", [])))
    rows = {}
    for job in jobs:
        row = rows.setdefault(job.tenant, {"tenant": job.tenant, "jobs": 0, **{s: 0 for s in JOB_STATES}, "missed": 0})
        row["jobs"] += 1
        row[job.state] += 1
        row["missed"] += late[job.job_id] > 0
    for tenant, row in rows.items():
        row["dominant_share"] = shares.get(tenant)
    if fmt == "json":
        sys.stdout.write(json.dumps(list(rows.values())) + "\n")
        return 0
    table = Table(title=f"{count_text(len(rows), 'tenant')} (in order of arrival; shares once the daemon has run)", caption=LATE_HELP)
    for column in ["tenant", "jobs", *JOB_STATES, "late (missed deadline)", "dominant share"]:
        table.add_column(column, justify="left" if column == "tenant" else "right")
    arrival = {tenant: i for i, tenant in enumerate(saved_state.get("tenants", []))}
    for tenant in sorted(rows, key=lambda t: (arrival.get(t, len(arrival)), t)):
        row = rows[tenant]
        share = "" if row["dominant_share"] is None else f"{row['dominant_share']:.4f}"
        table.add_row(tenant, f"{row['jobs']:,}", *(f"{row[s]:,}" for s in JOB_STATES), f"{row['missed']:,}", share)
    out.print(table)
    return 0


def _utc(seconds: float) -> str:
    import datetime

    try:
        return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, ValueError, OSError):
        return f"{seconds:.0f} s"


def _run_daemon(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.app import compose
    from autoscaler.app.logs import configure_logging

    if args.decisions_out is not None:
        compose.require_folder(args.decisions_out, "--decisions-out")
        compose.require_writable(args.decisions_out, "--decisions-out")
    if args.replay is not None:
        from autoscaler.app.replay_daemon import replay_through_daemon

        settings = compose.settings(args.config, cluster_required=False)
        configure_logging(settings.log_format)
        _note_shadowed_file(args.replay, "--replay", err)
        return replay_through_daemon(args, settings, out, err)
    if args.config is None:
        raise ConfigError("run: --config FILE is required (or --replay TRACE for a simulated run)")
    for flag, value in (("--store", args.store), ("--policy", args.policy), ("--deadline", args.deadline), ("--max-nodes", args.max_nodes), ("--tenants", args.tenants if args.tenants != 1 else None), ("--keep-store", args.keep_store or None)):
        if value is not None:
            raise ConfigError(f"run: {flag} is for --replay; a live run takes it from the config")
    import structlog

    from autoscaler.adapters.health import Telemetry, serve
    from autoscaler.app.daemon import DecisionsFile, run_forever

    settings = compose.settings(args.config)
    configure_logging(settings.log_format)
    decisions = DecisionsFile(args.decisions_out) if args.decisions_out is not None else None  # checked above
    telemetry = Telemetry(settings.slot_s)
    try:
        with compose.daemon_runner(settings, dry_run=args.dry_run, telemetry=telemetry, on_decision=decisions) as runner:
            server = serve(telemetry, settings.health_host, settings.health_port)
            structlog.get_logger("autoscaler").info("serving", healthz=f"http://{settings.health_host}:{server.server_port}/healthz", metrics=f"http://{settings.health_host}:{server.server_port}/metrics")
            daily = None
            if settings.report.daily and not args.dry_run:
                from autoscaler.app.reporting import daily_report, mail_sender

                if settings.report.email_to:
                    mail_sender(settings)  # a missing SMTP password stops the daemon now, not at 00:10
                daily = lambda: daily_report(settings)  # noqa: E731
            try:
                run_forever(runner, settings.slot_s, settings.misfire_grace_s, daily)
            finally:
                server.shutdown()
    finally:
        if decisions is not None:
            decisions.close()
    return 0


def _run_explain(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.app.daemon import decision_line
    from autoscaler.core.controller import Decision, explain

    if args.decisions is not None:
        records = _read_decision_lines(args.decisions)
        if not records:
            raise ConfigError(f"{args.decisions}: no decisions in this file (expected one JSON line per slot, as --decisions-out writes)")
        by_slot: dict[int, dict] = {}
        seen: dict[int, int] = {}
        for slot_number, record in records:
            by_slot[slot_number] = record
            seen[slot_number] = seen.get(slot_number, 0) + 1
        slot = args.slot if args.slot is not None else max(by_slot)
        record = by_slot.get(slot)
        where = f"{args.decisions} (slots {min(by_slot):,} to {max(by_slot):,})"
        if seen.get(slot, 0) > 1:
            err.print(f"note: slot {slot:,} is in {args.decisions} {seen[slot]} times (runs appended to one file); showing the last", highlight=False)
    else:
        store, _ = _open_store(args, must_exist=True)
        with store:
            last = store.last_slot()
            if last is None:
                raise ConfigError(f"{store.path}: no slot decided yet in this store")
            slot = args.slot if args.slot is not None else last
            record = store.decision(slot)
            first = store.decisions()[0]["slot"] if record is None else None
        where = f"{store.path} (slots {first:,} to {last:,})" if record is None else str(store.path)
    if record is None:
        raise ConfigError(f"slot {slot:,}: no decision recorded for it in {where}")
    try:
        decision = Decision.from_json(record)
    except AutoscalerError as error:
        raise ConfigError(f"{args.decisions or where}: slot {slot:,}: {error}") from None
    if args.format == "json":
        sys.stdout.write(json.dumps(decision_line(decision), allow_nan=False) + "\n")
        return 0
    out.print(explain(decision), markup=False, highlight=False, soft_wrap=True)
    return 0


def _read_decision_lines(path: Path) -> list[tuple[int, dict]]:
    """(slot, record) of each line of a --decisions-out file; a line that is not a decision is named with its number."""
    expected = "expected one JSON object per line with a whole 'slot' >= 0, as --decisions-out writes"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file ({expected})") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the decisions file: {error.strerror or error}") from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as error:
            why = error.msg if isinstance(error, json.JSONDecodeError) else "nested too deep"
            raise ConfigError(f"{path}:{number}: not a JSON line ({why}); {expected}") from None
        slot = record.get("slot") if isinstance(record, dict) else None
        if isinstance(slot, bool) or not isinstance(slot, int) or slot < 0:
            raise ConfigError(f"{path}:{number}: {expected}; got {line[:60]!r}")
        records.append((slot, record))
    return records


def _run_store(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.adapters.sqlite_store import check_store, restore_store

    settings = _settings_or_none(args.config)
    path = args.store or (settings.store_path if settings else Path("autoscaler.db"))
    if args.store_action == "backup":
        store, _ = _open_store(args, must_exist=True)
        with store, err.status("backing up the store"):
            summary = store.backup(args.dest, force=args.force)
        out.print(f"backed up {path} to {args.dest}: {summary.text()}", markup=False, highlight=False, soft_wrap=True)
    elif args.store_action == "restore":
        with err.status("restoring the store"):
            result = restore_store(args.source, path)
        out.print(f"restored {path} from {args.source}: {result.summary.text()}", markup=False, highlight=False, soft_wrap=True)
        if result.kept:
            err.print(f"the replaced store is kept as {', '.join(map(str, result.kept))}", markup=False, highlight=False, soft_wrap=True)
    else:
        with err.status("checking the store"):
            summary = check_store(path)
        out.print(f"{path}: ok (quick_check of every page): {summary.text()}", markup=False, highlight=False, soft_wrap=True)
    return 0


REPORT_POLICIES = "gcp-u,vfw"
"""The policies ``autoscaler report --replay`` compares by default, as the paper's Table IV."""


def _run_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.app import reporting
    from autoscaler.app.logs import configure_logging

    settings = _settings_or_none(args.config)
    configure_logging(settings.log_format if settings else "auto")  # warnings to stderr, never into --format json's stdout
    if args.start is not None and args.replay is None:
        raise ConfigError("report: --start places a --replay's trace in time; the daemon's slots have their own")
    signal = reporting.report_signal(args.carbon, args.carbon_unit, settings)
    if args.replay is not None:
        if args.publish:
            raise ConfigError("report: --publish is for the daemon's measured slots, not a --replay")
        start_s = 0.0
        if args.start is not None:
            from energy.signal import parse_time_s

            try:
                start_s = parse_time_s(args.start)
            except ValueError as error:
                raise ConfigError(f"report: --start: {error}") from None
        params, length_model = CostParams(), LengthModel()
        args.deadline = deadline_slots(args.deadline, args.slot_s)
        names = [n for n in _policy_names(args.policy) if n != "follow"]
        chosen = args.policy.strip() not in ("all", REPORT_POLICIES)
        if not chosen and args.deadline < 2 and "vfw" in names:
            names.remove("vfw")
            err.print("note: vfw left out: it needs D >= 2", highlight=False)
        options = reporting.energy_options(args, settings)
        _note_shadowed_file(args.replay, "--replay", err)
        with err.status("replaying the trace"):
            workload, _ = load_workload(
                args.replay,
                flag="--replay",
                slot_s=args.slot_s,
                window_slots=args.window,
                skip_bad_lines=False,
                length_model=length_model,
                deadline_classes="gcp" in names,
                classes_optional=not chosen,
            )
            if "gcp" in names and workload.active_by_deadline is None:
                names.remove("gcp")
                err.print("note: gcp left out: it needs a SWIM trace with at least 10 distinct jobs or a deadline column", highlight=False)
            placed = None
            if signal is not None:
                from autoscaler.core.replay import place_signal

                placed = place_signal(
                    signal, args.slot_s, workload.n_slots + args.deadline, _wanted_slots(workload, args.deadline, "gcp" in names),
                    start_s=start_s if args.start is not None else None,
                )  # fmt: skip
                start_s = placed.start_s
                for note in placed.notes:
                    err.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
            report = reporting.replay_report(workload, names, args.deadline, params, options, start_s, signal=placed)
        if signal is not None:
            from energy.signal import utc_text

            where = "--start" if args.start is not None else "one day after the signal's first point when it covers that day, as replay places it"
            report = dataclasses.replace(
                report,
                notes=(
                    *report.notes,
                    f"The trace's first slot is placed at {utc_text(start_s)} ({where}). The policies decide by the "
                    "signal as replay --carbon does: offline with the slot cost, hold as hold+carbon; the others carbon-blind.",
                ),
            )
    else:
        if settings is None:
            raise ConfigError("report: --config FILE is required (or --replay TRACE for a modelled replay)")
        options = reporting.energy_options(args, settings)
        report = reporting.live_report(settings, options, args.since, args.until, measure=not args.no_measure)
    if signal is not None:
        from energy.accounting import with_signal

        report = with_signal(report, signal)
    return reporting.deliver(report, args, settings, out, err)


def _policy_names(text: str) -> list[str]:
    from autoscaler.core.replay import parse_policy_list

    return parse_policy_list(text)


def read_demands_csv(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    """Read a demand CSV: (resources, agents, demands ``(n_agents, n_resources)``) in arrival order.

    Header ``agent,R1,R2,...``; then per row an agent name and one number >= 0 per resource, not all
    zero. Blank lines are skipped. Raises TraceError naming the file and line for a wrong header,
    a wrong column count, an empty or duplicate agent, a non-numeric, negative, non-finite or
    all-zero demand, or a file without agents.
    """
    import csv

    from autoscaler.core.errors import TraceError

    name = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet may write a BOM
    except UnicodeDecodeError:
        raise TraceError(name, None, "not UTF-8 text") from None
    except OSError as exc:
        raise TraceError(name, None, f"cannot read: {exc.strerror or exc}") from None
    resources: list[str] | None = None
    agents: list[str] = []
    first_line: dict[str, int] = {}
    rows: list[list[float]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [field.strip() for field in next(csv.reader([line]))]
        if resources is None:
            if len(fields) < 2 or fields[0].lower() != "agent" or not all(fields[1:]) or len(set(fields[1:])) != len(fields) - 1:
                raise TraceError(name, line_no, f"expected a header 'agent,RESOURCE,...' with distinct, non-empty resource names, got {line!r}")
            resources = fields[1:]
            continue
        if len(fields) != len(resources) + 1:
            raise TraceError(name, line_no, f"expected {len(resources) + 1} columns (agent, {', '.join(resources)}), got {len(fields)}")
        agent = fields[0]
        if not agent:
            raise TraceError(name, line_no, "empty agent name")
        if agent in first_line:
            raise TraceError(name, line_no, f"duplicate agent {agent!r} (first on line {first_line[agent]})")
        values = []
        for resource, field in zip(resources, fields[1:]):
            try:
                value = float(field)
            except ValueError:
                raise TraceError(name, line_no, f"agent {agent!r}, {resource}: expected a number >= 0, got {field!r}") from None
            if not math.isfinite(value) or value < 0:
                raise TraceError(name, line_no, f"agent {agent!r}, {resource}: expected a finite number >= 0, got {field!r}")
            values.append(value)
        if not any(values):
            raise TraceError(name, line_no, f"agent {agent!r}: demand vector is all zero")
        first_line[agent] = line_no
        agents.append(agent)
        rows.append(values)
    if resources is None or not rows:
        raise TraceError(name, None, "no agents (expected a header 'agent,RESOURCE,...' and one row per agent)")
    return resources, agents, np.array(rows)


def _run_drf(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rich.progress import Progress
    from rich.table import Table

    from autoscaler.app import render
    from autoscaler.core import fairshare

    resources, agents, demands = read_demands_csv(args.demands)
    n = len(agents) if args.n is None else args.n
    if n < len(agents):
        raise ConfigError(f"--n: {args.demands} has {len(agents)} agents, more than n = {n}")
    drf = fairshare.DynamicDRF(n, len(resources))
    steps = []
    for agent, row in zip(agents, demands):
        level = drf.arrive(row, agent)
        steps.append({"k": drf.k, "agent": agent, "M": level, "x": drf.shares.tolist()})
    ratios = None
    if args.ratios or args.plot is not None:
        normalized = drf.demands
        ratios = []
        with Progress(console=err, transient=True) as progress:
            task = progress.add_task("offline LPs", total=len(steps))
            for step in steps:
                k = step["k"]
                ratios.append(dataclasses.asdict(fairshare.competitive_ratios(normalized[:k], np.array(step["x"]), n)))
                progress.advance(task)
    files: dict[Path, str | bytes] = {}
    if args.yarn_out is not None:
        files[args.yarn_out] = fairshare.yarn_allocation_xml(agents, drf.shares, n)
    if args.plot is not None:
        files[args.plot] = render.ratios_png(ratios, n, args.demands.name)
    if args.format == "json":
        document: dict = {"resources": resources, "agents": agents, "n": n, "steps": steps}
        if ratios is not None:
            document["ratios"] = ratios
        sys.stdout.write(json.dumps(document) + "\n")
    else:
        table = Table(title=f"dynamic DRF: {len(agents)} of n = {n} agents, resources {', '.join(resources)} (capacity 1 each)")
        for column in ("k", "agent", "M^k", "min x", "sum x"):
            table.add_column(column, justify="left" if column == "agent" else "right")
        names = ("maxmin_capped", "maxmin_full", "maxsum_capped", "maxsum_full")
        if ratios is not None:
            for column in ("maxmin k/n", "maxmin full", "maxsum k/n", "maxsum full"):
                table.add_column(column, justify="right")
        for i, step in enumerate(steps):
            cells = [str(step["k"]), step["agent"], f"{step['M']:.6g}", f"{min(step['x']):.6g}", f"{sum(step['x']):.6g}"]
            if ratios is not None:
                cells += [f"{ratios[i][name]:.4f}" for name in names]
            table.add_row(*cells)
        out.print(table)
        shares = Table(title="final dominant shares (weight = n * x; equal split = 1)")
        shares.add_column("agent")
        shares.add_column("x", justify="right")
        shares.add_column("weight", justify="right")
        for agent, share in zip(agents, drf.shares):
            shares.add_row(agent, f"{share:.6g}", f"{share * n:.4g}")
        out.print(shares)
    if files:
        written = write_all_atomic(files)
        err.print("wrote " + ", ".join(str(p) for p in written), highlight=False)
    return 0


def _check_out_folder(folder: Path | None) -> None:
    """Refuse an --out that cannot be a folder before any work is done."""
    if folder is not None and folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out: {folder} exists and is not a folder")


_DASH_VALUE_OPTIONS = ("--deadline", "--deadlines", "--since", "--until")
"""Options whose value may begin with a dash and a digit ('-1h', '12-1' is fine, '-1-12' is not)."""


def _attach_dash_values(argv: list[str]) -> list[str]:
    """'--deadline -1h' as '--deadline=-1h': argparse takes '-1h' for an unknown option and says only
    'expected one argument'; attached, the value reaches the check that says what is wrong with it.
    Everything from --command, --args or '--' on is left as it is (it is the job's own command line)."""
    attached: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--command", "--args", "--"):
            return attached + argv[i:]
        if argv[i] in _DASH_VALUE_OPTIONS and i + 1 < len(argv) and re.match(r"-\d", argv[i + 1]):
            attached.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        attached.append(argv[i])
        i += 1
    return attached


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_attach_dash_values(sys.argv[1:] if argv is None else list(argv)))
    out = Console()
    if not out.is_terminal:
        # Piped or redirected: rich would assume 80 columns and squeeze the tables.
        out = Console(width=240)
    err = Console(stderr=True)
    if not err.is_terminal:
        err = Console(stderr=True, width=200)
    try:
        _check_out_folder(getattr(args, "out", None))
        return args.handler(args, out, err)
    except KeyboardInterrupt:
        err.print("autoscaler: interrupted; no output files were changed", highlight=False)
        return 130
    except AutoscalerError as exc:
        # 2 for bad input or a wrong setting (a restart cannot mend it); 75 (EX_TEMPFAIL) for an AWS
        # outage that outlasted the start-up wait. deploy/autoscaler.service restarts on 75, not 2.
        err.print(f"autoscaler: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        return exc.exit_status
    except OSError as exc:
        err.print(f"autoscaler: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
