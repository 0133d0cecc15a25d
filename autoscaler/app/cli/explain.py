"""``autoscaler explain``: one past slot's decision, from the store's decision log or a
--decisions-out file, in words or as JSON."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rich.console import Console

from autoscaler.adapters.files import require_regular_file
from autoscaler.app.cli.arguments import add_store_arguments, non_negative_int, open_store, settings_or_none
from autoscaler.core import defaults
from autoscaler.core.errors import AutoscalerError, ConfigError
from autoscaler.core.intake import parse_duration_s, parse_past_time
from autoscaler.core.readable import duration_text, utc_text

SLOT_FORMS = (
    "a slot number (a whole number >= 0), an ISO-8601 time with a timezone like '2026-12-05T21:00Z', "
    "or a duration ago like '10m', '2h' or '1d'"
)


def slot_or_time(text: str) -> int | str:
    """An argparse type for explain's --slot: a whole number is a slot (returned as an int); a time with a
    timezone or a duration ago with its unit ('10m', '2h', '1d', as report --since reads it) is checked
    and returned as text, for :func:`slot_at`, which needs the clock and slot_s."""
    stripped = text.strip()
    if re.fullmatch(r"[+-]?\d+", stripped):
        return non_negative_int(stripped)
    if re.search(r"[dhms]\Z", stripped):
        if parse_duration_s(stripped) is not None:
            return stripped
        if stripped.startswith("-") and parse_duration_s(stripped[1:].strip()) is not None:
            raise argparse.ArgumentTypeError(f"{text!r} is negative; a duration here counts back from now: write {stripped[1:].strip()!r}")
    try:
        moment = datetime.fromisoformat(stripped)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {SLOT_FORMS}, got {text!r}") from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise argparse.ArgumentTypeError(f"the time {text!r} has no timezone; expected one such as 'Z' or '+01:00' at its end")
    return stripped


def slot_at(text: str, now_s: float, slot_s: float) -> int:
    """The slot holding the time ``text`` (see :func:`slot_or_time`), counted from the Unix epoch as the
    daemon counts them: floor(t / slot_s). Raises ConfigError for a time before the epoch (slot 0)."""
    time_s = parse_past_time(text, now_s, "--slot")
    if not time_s >= 0:
        raise ConfigError(f"--slot: {text!r} is {utc_text(time_s)}, before slot 0 (1970-01-01T00:00Z); expected a time after it")
    return math.floor(time_s / slot_s)


def add_parsers(commands) -> None:
    """The explain command."""
    explain = commands.add_parser(
        "explain",
        help="why a past slot's capacity and nodes are what they are",
        description="Print one slot's decision from the store's decision log (or a --decisions-out file): m_t, x_t, "
        "nodes, the jobs released, late and missed, and which rule bound m_t and the nodes, in words; under hold+carbon "
        "also the signal the slot saw (or why it had none).",
    )
    add_store_arguments(explain)
    explain.add_argument(
        "--slot", type=slot_or_time, default=None,
        help="the slot: its number, or a time in it, with a timezone (2026-12-05T21:00Z) or a duration ago (10m, 2h, 1d), "
        f"taken to the slot that holds it by the config's slot_s (else {defaults.SLOT_S:g} s) (default: the last decided)",
    )  # fmt: skip
    explain.add_argument("--decisions", type=Path, default=None, metavar="FILE", help="read a --decisions-out file instead of the store")
    explain.add_argument("--format", choices=["text", "json"], default="text", help="stdout format")
    explain.set_defaults(handler=_run_explain)


def _run_explain(args: argparse.Namespace, out: Console, err: Console) -> int:
    from autoscaler.app.daemon import decision_line
    from autoscaler.core.controller import Decision, explain

    if isinstance(args.slot, str):
        import time

        settings = settings_or_none(args.config)
        slot_s = settings.slot_s if settings is not None else defaults.SLOT_S
        asked = args.slot
        args.slot = slot_at(asked, time.time(), slot_s)
        err.print(
            f"note: --slot {asked} is in slot {args.slot:,} ({utc_text(args.slot * slot_s)} to {utc_text((args.slot + 1) * slot_s)}, "
            f"slots of {duration_text(slot_s)})",
            markup=False, highlight=False, soft_wrap=True,
        )  # fmt: skip
    if args.decisions is not None:
        require_regular_file(args.decisions, "--decisions")
        scan = scan_decisions(args.decisions, args.slot)
        if scan.torn_line is not None:
            err.print(
                f"note: {args.decisions}:{scan.torn_line}: the last line is cut short (no newline at its end, as when "
                "a daemon is stopped mid-write); skipped",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        for number in scan.torn_lines_within:
            err.print(
                f"note: {args.decisions}:{number}: a line cut short (a run stopped mid-write), followed by a later "
                "run's lines; skipped",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        if scan.last_slot is None:
            raise ConfigError(f"{args.decisions}: no decisions in this file (expected one JSON line per slot, as --decisions-out writes)")
        slot = scan.slot
        record = scan.record
        where = f"{args.decisions} (slots {scan.first_slot:,} to {scan.last_slot:,})"
        if scan.times > 1:
            err.print(f"note: slot {slot:,} is in {args.decisions} {scan.times} times (runs appended to one file); showing the last", highlight=False)
    else:
        store, _ = open_store(args, must_exist=True)
        with store:
            last = store.last_slot()
            if last is None:
                raise ConfigError(
                    f"{store.path}: no slot decided yet in this store (a run --dry-run records nothing here: give it "
                    "--decisions-out FILE and read that with explain --decisions FILE)"
                )
            slot = args.slot if args.slot is not None else last
            # Past the last slot there is nothing to look up (and past 2**63 - 1, SQLite cannot look).
            record = store.decision(slot) if slot <= last else None
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


MAX_DECISION_LINE_CHARS = 16 * 1024 * 1024
"""The longest line ``explain --decisions`` reads: far past a slot's decision (a few KiB with a thousand
job ids), short enough that a file that is no decisions file cannot fill memory as one line."""


@dataclass(frozen=True)
class DecisionScan:
    """What :func:`scan_decisions` kept of a --decisions-out file: one slot's line and the range of slots."""

    slot: int | None
    """The slot asked for, or the largest in the file (None: the file has no decisions)."""
    record: dict | None
    """That slot's last line, parsed (None: not in the file)."""
    times: int
    """Lines of that slot (several when runs appended to one file)."""
    first_slot: int | None
    last_slot: int | None
    """The smallest and largest slot in the file (None: no decisions)."""
    torn_line: int | None
    """The number of a last line cut short and skipped, else None."""
    torn_lines_within: tuple[int, ...] = ()
    """The numbers of lines cut short that a later run's lines follow (skipped)."""


def scan_decisions(path: Path, slot: int | None) -> DecisionScan:
    """Read a --decisions-out file line by line, keeping only ``slot``'s last line (None: the largest
    slot's), so memory stays one line however long the file.

    A last line with no newline at its end that is not JSON was cut short by a writer stopped
    mid-append: it is skipped and its number returned as ``torn_line``. A run appending to such a
    file ends the torn line with a newline before its own lines (:class:`DecisionsFile`), so a torn
    line can also sit within the file; the reader cannot tell that newline from one written with a
    whole line, so it takes as torn a line that is not JSON, starts with ``{`` (as every line the
    writer writes does) and is followed by a good line: skipped, its number in
    ``torn_lines_within``. Such a line with no good line after it is an error. Raises ConfigError naming
    the file and line for a line that is not a JSON object with a whole 'slot' >= 0, a line longer
    than :data:`MAX_DECISION_LINE_CHARS`, a file that is not UTF-8 text, or one that cannot be read.
    """
    expected = "expected one JSON object per line with a whole 'slot' >= 0, as --decisions-out writes"
    chosen, record, times, first, last, torn = slot, None, 0, None, None, None
    number, pending, torn_within = 0, None, []
    try:
        with path.open(encoding="utf-8") as file:
            while line := file.readline(MAX_DECISION_LINE_CHARS + 1):
                number += 1
                whole = line.endswith("\n")
                if not whole and len(line) > MAX_DECISION_LINE_CHARS:
                    raise ConfigError(f"{path}:{number}: longer than {MAX_DECISION_LINE_CHARS:,} characters; {expected}")
                if not line.strip():
                    continue
                try:
                    parsed = json.loads(line)
                except (json.JSONDecodeError, RecursionError) as error:
                    if not whole:  # the last line (readline stops short of a newline only at the end)
                        torn = number
                        break
                    why = error.msg if isinstance(error, json.JSONDecodeError) else "nested too deep"
                    if pending is None and line.startswith("{"):
                        pending = (number, why)  # torn if a good line follows
                        continue
                    bad, why = pending if pending is not None else (number, why)
                    raise ConfigError(f"{path}:{bad}: not a JSON line ({why}); {expected}") from None
                found = parsed.get("slot") if isinstance(parsed, dict) else None
                if isinstance(found, bool) or not isinstance(found, int) or found < 0:
                    if pending is not None:
                        raise ConfigError(f"{path}:{pending[0]}: not a JSON line ({pending[1]}); {expected}")
                    raise ConfigError(f"{path}:{number}: {expected}; got {line.rstrip()[:60]!r}")
                if pending is not None:
                    torn_within.append(pending[0])
                    pending = None
                first = found if first is None else min(first, found)
                last = found if last is None else max(last, found)
                if slot is None and (chosen is None or found > chosen):
                    chosen, times = found, 0
                if found == chosen:
                    record, times = parsed, times + 1
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file ({expected})") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the decisions file: {error.strerror or error}") from None
    if pending is not None:
        raise ConfigError(f"{path}:{pending[0]}: not a JSON line ({pending[1]}); {expected}")
    return DecisionScan(slot=chosen, record=record, times=times, first_slot=first, last_slot=last, torn_line=torn, torn_lines_within=tuple(torn_within))
