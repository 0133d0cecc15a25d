"""What the commands' flags share: the argparse types that check a number or a deadline as it is
read, the help formatter, the store, cost model, job-length and signal option groups, and the
conversions of a deadline given as slots or as a duration."""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
from pathlib import Path

from autoscaler.core import defaults
from autoscaler.core.budget import DEFAULT_MEMORY_BUDGET_MB
from autoscaler.core.errors import ConfigError
from autoscaler.core.intake import parse_duration_s
from autoscaler.core.model import MIB, CostParams, LengthModel
from autoscaler.core.readable import number_text
from autoscaler.core.twin import STEP_CONCURRENCY


def _number(convert, noun: str, minimum: float, strict: bool, maximum: float = math.inf):
    """An argparse type: ``convert`` the text, then require a finite value above (``strict``) or at
    ``minimum``, and at most ``maximum``."""
    bound = f"{'>' if strict else '>='} {number_text(minimum)}" + (f" and <= {number_text(maximum)}" if math.isfinite(maximum) else "")

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun} {bound}, got {text!r}") from None
        if isinstance(value, int) and abs(value) > sys.float_info.max:
            # Every whole number the commands take is used beside floats; past this one it cannot be.
            raise argparse.ArgumentTypeError(f"expected {noun} {bound} that fits a float (below 1.8e308), got {text!r}")
        if not math.isfinite(value) or value < minimum or (strict and value == minimum) or value > maximum:
            raise argparse.ArgumentTypeError(f"expected {'a finite number' if convert is float else noun} {bound}, got {text!r}")
        return value

    return parse


positive_float = _number(float, "a number", 0, strict=True)
non_negative_float = _number(float, "a number", 0, strict=False)
non_negative_int = _number(int, "a whole number", 0, strict=False)
positive_int = _number(int, "a whole number", 1, strict=False)
boot_seconds = _number(float, "a number of seconds", 0.0, strict=False, maximum=3600.0)
agent_count = _number(int, "a whole number", 1, strict=False, maximum=10_000_000)
cost_value = _number(float, "a number", 0, strict=False, maximum=defaults.MAX_COST)


def step_concurrency(text: str) -> int:
    """An argparse type for ``--step-concurrency``: a whole number, or an error naming EMR's range (the
    range itself is checked by TwinConfig, whose error ``flagged`` names by the flag)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number in 1..{STEP_CONCURRENCY} (EMR's StepConcurrencyLevel), got {text!r}") from None


def flagged(error: ConfigError, flags: dict[str, str]) -> ConfigError:
    """``error`` with the field its message starts with named by the flag that set it too: the core
    names fields ("provision_s: expected ..."), the command line its flags ("--provision-s
    (provision_s): expected ..."). ``flags``: {field: flag} of the values the command line gave;
    ``error`` itself when its message starts with none of them."""
    field, colon, rest = str(error).partition(": ")
    if not colon or field not in flags:
        return error
    return ConfigError(f"{flags[field]} ({field}): {rest}")


FIELD_FLAGS = {
    "days": "--days",
    "policy": "--policy",
    "max_servers": "--max-servers",
    "start_s": "--start",
    "forecast": "--forecast",
    "window_slots": "--window",
    "slot_s": "--slot-s",
    # Only replay and sweep take the length model's rates; compare, run --replay and report --replay
    # use the defaults, so the hint sends every command's user to replay's flags.
    "block_bytes": "autoscaler replay's --block-mb",
    "network_mb_s": "--network-mb-s",
}
"""The flag that sets each field a core message or note marks (`days`, `start_s` ...): every command
that can print one spells the field with the same flag."""

_MARKED = re.compile(r"(?<![`:])`(\w+)`(?!`)")
"""A field marked in single backticks: not ``a literal`` in double ones, nor a role (:func:`x`)."""


COMMAND_FIELD_FLAGS = {"run": {"window_slots": "window (run --replay replays the trace's first day; --days repeats that day)"}}
"""Where a command sets a field otherwise than by :data:`FIELD_FLAGS`' flag (``run --replay`` has no
--window: it replays the first day, --days times)."""

COMMAND_SENTENCES = {
    "run": (
        (
            re.compile(r"give `window_slots` ([\d,]+) \(slots of [\d.e+]+ s\) to replay all of it\."),
            r"replay or compare it with --window \1 (run --replay replays the trace's first day; --days repeats that day).",
        ),
    ),
}
"""Sentences a command says otherwise, before the marks are named (``run --replay`` cannot take the
--window it would be told to give)."""


def in_flags(text: str, command: str | None = None) -> str:
    """``text`` with each field the core marked (`window_slots`) named by its flag (--window), as the
    user of ``command`` typed it; a mark of a field not in :data:`FIELD_FLAGS` is left as it is."""
    flags = FIELD_FLAGS | COMMAND_FIELD_FLAGS.get(command, {})
    for pattern, replacement in COMMAND_SENTENCES.get(command, ()):
        text = pattern.sub(replacement, text)
    return _MARKED.sub(lambda mark: flags.get(mark.group(1), mark.group(0)), text)


def with_flagged_notes(result):
    """``result`` (a Workload or a ReplaySignal: a frozen dataclass with ``notes``) with its notes
    :func:`in_flags`, so they read the same on stderr and in the JSON written from it."""
    return dataclasses.replace(result, notes=tuple(in_flags(note) for note in result.notes))


_DEADLINE_FORMS = "a whole number of slots >= 0 like 12, or a duration like 6h, 90m, 1h30m, 1d"


def deadline_text(text: str) -> str:
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


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except None ones: their help line already says what happens."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default is None or action.default is False:
            return action.help or ""
        return super()._get_help_string(action)


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=None, help="TOML config; its store_path and known_tenants are used")
    parser.add_argument("--store", type=Path, default=None, help="job store file (default: the config's store_path, else autoscaler.db)")


def open_store(args: argparse.Namespace, must_exist: bool = False):
    from autoscaler.adapters.sqlite_store import SqliteJobStore

    settings = settings_or_none(args.config)
    path = args.store or (settings.store_path if settings else Path("autoscaler.db"))
    flag = "--store" if args.store else "store_path"
    if must_exist and not Path(path).exists():
        from autoscaler.adapters.sqlite_store import marker_path

        if marker_path(path).exists():
            # It was there: opening it says when it was made and how to restore it.
            SqliteJobStore(path, read_only=True, flag=flag)
        raise ConfigError(f"{path}: no job store here (give --store or --config with its store_path)")
    # Commands that only read (jobs, explain, store backup) open it read-only: they change no file.
    return SqliteJobStore(path, read_only=must_exist, flag=flag), settings


def settings_or_none(path: Path | None):
    if path is None:
        return None  # the config module (pydantic-settings) is not imported for nothing
    from autoscaler.app.config import load_settings

    return load_settings(path)


def add_objective_argument(parser, default: str | None = None, what: str = "", paper_costs: str = "--e0, --e1, --beta") -> None:
    """``--objective``: what eq. (2)'s e0, e1 and beta are priced in (autoscaler.core.objective);
    ``paper_costs``: where this command takes the paper's e0, e1 and beta from."""
    from autoscaler.core.objective import OBJECTIVES

    parser.add_argument(
        "--objective", choices=list(OBJECTIVES), default=default,
        help="what the policies minimise: energy (Wh, from the power model and the boot time), cost ($ per node-hour, a "
        f"restart billed max(boot, 60 s)), carbon (energy weighted by the signal) or paper ({paper_costs} as given)" + what,
    )  # fmt: skip


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Cost, slot and job-length options shared by replay and sweep."""
    from autoscaler.core.objective import DEFAULT_OBJECTIVE

    add_objective_argument(parser, DEFAULT_OBJECTIVE)
    parser.add_argument("--restart-penalty", type=cost_value, default=defaults.RESTART_PENALTY, help="added to each restart (a server off, then on), in the objective's unit (Wh or $); not with --objective paper")
    parser.add_argument("--e0", type=cost_value, default=None, help=f"with --objective paper: operating cost per server-slot, idle part (default {defaults.E0:g})")
    parser.add_argument("--e1", type=cost_value, default=None, help=f"with --objective paper: operating cost per server-slot at full load, load part (default {defaults.E1:g})")
    parser.add_argument("--beta", type=cost_value, default=None, help=f"with --objective paper: switching cost per server turned on or off (default {defaults.BETA:g})")
    parser.add_argument("--slot-s", type=positive_float, default=defaults.SLOT_S, help="slot length in seconds")
    parser.add_argument("--window", type=positive_int, default=None, help="slots in the window (default: the trace's 24 h)")
    parser.add_argument("--max-servers", type=positive_float, default=None, help="cap M on servers on (default: none)")
    parser.add_argument("--skip-bad-lines", action="store_true", help="skip malformed trace lines (and count them) instead of stopping")
    parser.add_argument(
        "--memory-budget-mb", type=positive_float, default=DEFAULT_MEMORY_BUDGET_MB,
        help="refuse, before allocating, a run estimated to need more memory than this (MiB)",
    )  # fmt: skip
    length = parser.add_argument_group("job-length estimate (deferral paper, §V-A)")
    length.add_argument("--block-mb", type=positive_float, default=defaults.BLOCK_MB, help="HDFS block size in MB")
    length.add_argument("--map-s-per-mb", type=non_negative_float, default=defaults.MAP_S_PER_MB, help="f(x) = this * x")
    length.add_argument("--reduce-s-per-mb", type=non_negative_float, default=defaults.REDUCE_S_PER_MB, help="g(x) = this * x")
    length.add_argument("--read-mb-s", type=positive_float, default=defaults.READ_MB_S, help="V_i, data read rate")
    length.add_argument("--write-mb-s", type=positive_float, default=defaults.WRITE_MB_S, help="V_o, data output rate")
    length.add_argument("--network-mb-s", type=positive_float, default=defaults.NETWORK_MB_S, help="V_n, network transfer rate")


def add_signal_arguments(parser: argparse.ArgumentParser) -> None:
    """Energy model and carbon/price signal options shared by replay and sweep."""
    from autoscaler.core.energy.power import MODELS
    from autoscaler.core.energy.signal import UNITS

    energy = parser.add_argument_group("energy and a carbon or price signal")
    energy.add_argument("--power-model", choices=list(MODELS), default="table-iii", help="power model for kWh: the paper's Table III, or Cloud Carbon Footprint's AWS averages for 1 vCPU")
    energy.add_argument("--boot-s", type=boot_seconds, default=defaults.BOOT_S, help="seconds a started node draws idle power before it works, 0 to 3600")
    energy.add_argument(
        "--carbon", default=None, metavar="SOURCE",
        help="per-slot carbon intensity or price: a file or http(s) URL (CSV time,value; WattTime v3, Electricity Maps or "
        "UK Carbon Intensity JSON); offline and hold become carbon-aware, every policy is costed under it",
    )  # fmt: skip
    energy.add_argument("--carbon-unit", choices=list(UNITS), default=None, help="unit of a CSV --carbon (JSON names its own); lbs/MWh is converted to gCO2eq/kWh")
    energy.add_argument(
        "--forecast", default="blend", metavar="blend|persistence|perfect|SOURCE",
        help="what the online policy knows of later slots: blend (default: yesterday, last week, the latest value and the "
        "day's mean, blended by their recent errors, with an error band that hedges the deferral), persistence (the same "
        "slot a day before), perfect (the actual values), or a forecast file, folder or URL, in the slots it covers (the "
        "blend elsewhere). Forecasts as issued are "
        "read without look-ahead, each slot from the newest issued by its start: a folder of provider documents, JSON lines "
        "(.jsonl), CSV issued,time,value, or one WattTime (meta.generated_at) or Electricity Maps (updatedAt) forecast; "
        "a series without issue times (CSV time,value) is used as if known from the start",
    )  # fmt: skip
    energy.add_argument(
        "--start", default=None, metavar="TIME",
        help="ISO-8601 time with a zone of the trace's first slot in the signal (default: a day after the signal's first "
        "time when it covers that day and the replay, else its first time)",
    )  # fmt: skip


def derived_costs(args: argparse.Namespace):
    """The costs of ``--objective`` (autoscaler.core.objective.DerivedCosts) from --slot-s, --power-model,
    --boot-s, --restart-penalty and, under paper, --e0, --e1, --beta; the price is the twin's default
    $ per node-hour. Raises ConfigError naming the flags for --e0, --e1 or --beta under another
    objective, or --restart-penalty under paper."""
    from autoscaler.core.energy.power import power_model
    from autoscaler.core.objective import derive_costs
    from autoscaler.core.twin import PRICE_PER_NODE_HOUR

    given = {flag: value for flag, value in (("--e0", args.e0), ("--e1", args.e1), ("--beta", args.beta)) if value is not None}
    if given and args.objective != "paper":
        raise ConfigError(
            f"{', '.join(given)}: only with --objective paper; under --objective {args.objective} e0, e1 and beta are derived "
            "from the power model, --boot-s and the price (add --objective paper to give them by hand)"
        )
    if args.objective == "carbon" and args.carbon is None:
        raise ConfigError("--objective carbon weights the energy by a carbon signal: give it with --carbon SOURCE, or use --objective energy")
    if args.objective == "paper" and args.restart_penalty:
        raise ConfigError("--restart-penalty: not with --objective paper, where beta is given as it is (use --beta)")
    model = power_model(args.power_model)
    return derive_costs(
        args.objective,
        slot_s=args.slot_s,
        idle_power_w=model.idle_power_w,
        busy_power_w=model.peak_power_w,
        boot_s=args.boot_s,
        price_per_node_hour=PRICE_PER_NODE_HOUR,
        restart_penalty=args.restart_penalty,
        given=CostParams(
            e0=defaults.E0 if args.e0 is None else args.e0,
            e1=defaults.E1 if args.e1 is None else args.e1,
            beta=defaults.BETA if args.beta is None else args.beta,
        ),
    )


def costs_text(costs) -> str:
    """The note replay, sweep, compare and run --replay print on stderr: the objective and its derivation."""
    return f"objective {costs.objective} ({costs.unit}):\n" + "\n".join(f"  {line}" for line in costs.derivation)


def cost_and_length_model(args: argparse.Namespace) -> tuple[CostParams, LengthModel]:
    """(the costs of --objective with --max-servers as the cap, the job-length model of the flags)."""
    params = derived_costs(args).cost_params(max_servers=args.max_servers)
    length_model = LengthModel(
        block_bytes=args.block_mb * MIB,
        map_s_per_mb=args.map_s_per_mb,
        reduce_s_per_mb=args.reduce_s_per_mb,
        read_mb_s=args.read_mb_s,
        write_mb_s=args.write_mb_s,
        network_mb_s=args.network_mb_s,
    )
    return params, length_model


def parse_deadlines(text: str, slot_s: float = defaults.SLOT_S, flag: str = "--deadlines") -> list[int]:
    """'1-12' (slots), or '2,4,8' or '1h,2h,6h' (each slots or a duration, :func:`deadline_slots` at
    ``slot_s``) -> whole numbers of slots >= 0; ConfigError naming ``flag`` and what is wrong otherwise."""
    forms = "a range like 1-12 or a list like 2,4,8 of whole numbers >= 0 (slots), or of durations like 1h,2h,6h"
    span = re.fullmatch(r"\s*(-?\d+)\s*-\s*(-?\d+)\s*", text)
    if span:
        low, high = int(span.group(1)), int(span.group(2))
        if low < 0 or high < 0:
            raise ConfigError(f"{flag}: {text!r} has a negative deadline; expected {forms}")
        if low > high:
            raise ConfigError(f"{flag}: the range {text!r} runs backwards ({low} > {high}); write it smaller first: {high}-{low}")
        if high - low > 10_000:
            raise ConfigError(f"{flag}: {text!r} is {high - low + 1:,} deadlines to sweep; expected at most 10,001")
        return list(range(low, high + 1))
    parts = text.split(",")
    if len(parts) > 1 and not all(part.strip() for part in parts):
        raise ConfigError(f"{flag}: {text!r} has an empty item; expected {forms}")
    both = " (a range or a list, not both)" if "-" in text and "," in text else ""
    values = []
    for part in (p.strip() for p in parts if p.strip()):
        if re.fullmatch(r"-?\d+", part):
            values.append(int(part))
        elif not both and re.search(r"[dhms]\Z", part) and parse_duration_s(part) is not None:
            values.append(deadline_slots(part, slot_s, flag))
        else:
            raise ConfigError(f"{flag}: expected {forms}{both}, got {text!r}")
    if not values:
        raise ConfigError(f"{flag}: expected {forms}, got {text!r}")
    if min(values) < 0:
        raise ConfigError(f"{flag}: {text!r} has a negative deadline ({min(values)}); expected {forms}")
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ConfigError(f"{flag}: {text!r} gives D = {', '.join(map(str, repeated))} more than once; give each deadline once")
    return values


def add_containers_argument(parser, prefix: str = "") -> None:
    """``--containers-per-node N``: a trace's jobs run on w = ceil(max(mappers, reducers) / N) nodes
    each (``autoscaler.core.workload.job_nodes``); left out, every job is one node."""
    parser.add_argument(
        "--containers-per-node", type=positive_int, default=None, metavar="N",
        help=f"{prefix}a trace's job runs on ceil(max(its §V-A mappers, reducers) / N) nodes at once, N the YARN containers a TASK node holds "
        "(default: every job on one node)",
    )  # fmt: skip


def add_twin_arguments(group) -> None:
    """The cluster twin's flags (``run --replay``, ``compare``): each None unless given, so the twin's
    defaults (autoscaler.core.twin) live in one place; TwinConfig checks every value and names the flag."""
    group.add_argument("--provision-s", type=float, default=None, help="twin: seconds from a resize up to a usable node (default 330, EMR's 5-6 minutes)")
    group.add_argument("--decommission-timeout-s", type=float, default=None, help="twin: seconds a draining node may keep its job before the job is killed and run again (default 3600, YARN's)")
    group.add_argument("--length-error", type=float, default=None, metavar="SIGMA", help="twin: true length = submitted length x lognormal(0, SIGMA) per job name, the same on every run of a name (default 0: the submitted length)")
    group.add_argument("--length-jitter", type=float, default=None, metavar="SIGMA", help="twin: and x lognormal(0, SIGMA) per run, drawn per job id, on top of --length-error's per job name (default 0)")
    group.add_argument("--seed", type=int, default=None, help="twin: seed of --length-error's and --length-jitter's draws (default 0)")
    group.add_argument("--step-concurrency", type=step_concurrency, default=None, help=f"twin: most steps running at once, EMR's StepConcurrencyLevel 1..{STEP_CONCURRENCY} (default {STEP_CONCURRENCY})")
    group.add_argument("--price-per-node-hour", type=float, default=None, help="twin: $ per node-hour, billed per second with 60 s minimum (default 0.240: m5.xlarge EC2 0.192 + EMR 0.048, us-east-1 on demand)")
    group.add_argument("--carbon", default=None, metavar="SOURCE", help="twin: a carbon signal (file or URL) for the bill's kgCO2; the trace's start is placed at its first time; decisions stay carbon-blind")
    group.add_argument("--carbon-unit", default=None, help="twin: unit of a CSV --carbon (gCO2eq/kWh or lbs/MWh)")


def twin_flags(args: argparse.Namespace):
    """The flags of :func:`add_twin_arguments` as the command line gave them: a
    :class:`autoscaler.app.cluster_twin.TwinFlags`."""
    from autoscaler.app.cluster_twin import TwinFlags

    return TwinFlags(
        provision_s=args.provision_s, decommission_timeout_s=args.decommission_timeout_s, length_error_sigma=args.length_error,
        length_jitter_sigma=args.length_jitter, seed=args.seed, step_concurrency=args.step_concurrency,
        price_per_node_hour=args.price_per_node_hour, carbon=args.carbon, carbon_unit=args.carbon_unit,
    )  # fmt: skip
