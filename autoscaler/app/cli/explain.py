"""``autoscaler explain``: one past slot's decision, from the store's decision log or a
--decisions-out file, in words or as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console

from autoscaler.app.cli.arguments import HelpFormatter, add_store_arguments, non_negative_int, open_store
from autoscaler.core.errors import AutoscalerError, ConfigError


def add_parsers(commands) -> None:
    """The explain command."""
    explain = commands.add_parser(
        "explain",
        help="why a past slot's capacity and nodes are what they are",
        description="Print one slot's decision from the store's decision log (or a --decisions-out file): m_t, x_t, "
        "nodes, the jobs released, late and missed, and which rule bound m_t and the nodes, in words; under hold+carbon "
        "also the signal the slot saw (or why it had none).",
        formatter_class=HelpFormatter,
    )
    add_store_arguments(explain)
    explain.add_argument("--slot", type=non_negative_int, default=None, help="the slot (default: the last decided)")
    explain.add_argument("--decisions", type=Path, default=None, metavar="FILE", help="read a --decisions-out file instead of the store")
    explain.add_argument("--format", choices=["text", "json"], default="text", help="stdout format")
    explain.set_defaults(handler=_run_explain)


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
        store, _ = open_store(args, must_exist=True)
        with store:
            last = store.last_slot()
            if last is None:
                raise ConfigError(f"{store.path}: no slot decided yet in this store")
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
