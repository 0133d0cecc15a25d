"""Hold against EMR managed scaling on loads it was never tuned on: ``autoscaler compare`` over every
trace of make_traces.py's unseen set, and the spread of what hold saves over all of them.

Each (trace, --max-nodes, sigma) is one ``autoscaler compare --format json`` (the command itself, in a
subprocess) at every deadline, of hold, follow, every managed variant and the bound (the runs of
compare's ``DEFAULT_RUNS`` that are ``hold``, ``follow``, ``bound`` or start with ``managed``), with
``--length-error`` sigma (the twin's true length = the submitted one x lognormal(0, sigma) per job) and
the trace's own flags (``make_traces.UNSEEN_COMPARE_FLAGS``: wide-jobs-1d with --containers-per-node 8).

Per case (trace, max nodes, sigma, D): hold's kWh and node-hours against managed and against follow
in %, jobs that overran (ended after their deadline) under hold / follow / managed, and hold's kWh
over the bound's. "managed" is the managed variant of least kWh in that case, so a variant compare
gains later (``managed-dampened``) is quoted against when it does better. Then the spread: min /
median / max of hold's kWh against managed over all cases (and by cap and by sigma), and in how many
cases hold is worse than managed or follow in kWh, node-hours or jobs overran. A run that did not
finish (its queue not drained at the cap) is counted apart, never in the spread.

Last, the seconds ``compare`` takes on week-weekends-7d.tsv (about 90,000 jobs) with its default
runs at D = 2 h: a figure, never a check (the machine is shared; treat it as +-30 %).

Figures only; nothing here asserts anything. Usage::

    python benchmarks/bench_spread.py [--traces DIR] [--deadlines 30m,2h,6h,12h] [--sigmas 0,0.5,1.0]
        [--max-nodes 500,100] [--workers N] [--json OUT] [--keep EARLIER.json] [--no-timing]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

import make_traces  # noqa: E402

from autoscaler.adapters.files import write_all_atomic
from autoscaler.app.cli.arguments import parse_deadlines
from autoscaler.app.compare import DEFAULT_RUNS
from autoscaler.core import defaults
from autoscaler.core.compare import against
from autoscaler.core.errors import ConfigError
from autoscaler.core.twin import MAX_LENGTH_ERROR_SIGMA

MANAGED = "managed"
RUNS = tuple(name for name in DEFAULT_RUNS if name in ("hold", "follow", "bound") or name.startswith(MANAGED))
"""compare's runs this benchmark asks for, in compare's order."""
TIMING_DEADLINE = "2h"
TIMING_MAX_NODES = 500


def run_compare(trace: Path, deadlines: str, extra: Sequence[str], workers: int | None) -> tuple[float, dict]:
    """(wall seconds, the JSON document) of ``autoscaler compare --trace TRACE --deadline DEADLINES
    EXTRA --format json`` in a subprocess (Python's start included). Exit 1 (a run did not finish)
    still gives the document, whose run says so; any other failure stops with compare's message."""
    argv = [sys.executable, "-m", "autoscaler", "compare", "--trace", str(trace), "--deadline", deadlines, *extra, "--format", "json"]
    if workers is not None:
        argv += ["--workers", str(workers)]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1) or not done.stdout.strip():
        raise SystemExit(f"{' '.join(argv[3:])}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    return seconds, json.loads(done.stdout)


def case_rows(document: dict, trace: str, sigma: float, max_nodes: int) -> list[dict]:
    """One row per deadline of a compare document: hold against the managed variant of least kWh and
    against follow, the overran counts, and hold's kWh over the bound's. A run that did not finish
    has its figures None; a comparison with it is None."""
    rows = []
    for d in document["deadline_slots"]:
        runs = {run["name"]: run for run in document["runs"] if run["deadline_slots"] == d}
        finished = {name: run for name, run in runs.items() if not run.get("error")}
        managed = [run for name, run in finished.items() if name.startswith(MANAGED)]
        reference = min(managed, key=lambda run: run["energy_kwh"]) if managed else None
        hold, follow, bound = finished.get("hold"), finished.get("follow"), finished.get("bound")

        def pct(run: dict | None, other: dict | None, key: str) -> float | None:
            return None if run is None or other is None else against(run[key], other[key])

        rows.append({
            "trace": trace, "max_nodes": max_nodes, "sigma": sigma, "deadline_slots": d, "deadline_s": d * document["slot_s"],
            "jobs": document["jobs"], "managed_run": reference["name"] if reference else None,
            "managed_variants": sorted(name for name in runs if name.startswith(MANAGED)),
            "not_finished": sorted(name for name, run in runs.items() if run.get("error")),
            "hold_kwh": hold["energy_kwh"] if hold else None,
            "hold_node_hours": hold["node_hours"] if hold else None,
            "kwh_vs_managed_pct": pct(hold, reference, "energy_kwh"),
            "node_hours_vs_managed_pct": pct(hold, reference, "node_hours"),
            "kwh_vs_follow_pct": pct(hold, follow, "energy_kwh"),
            "node_hours_vs_follow_pct": pct(hold, follow, "node_hours"),
            "overran_hold": hold["jobs_finished_after_deadline"] if hold else None,
            "overran_follow": follow["jobs_finished_after_deadline"] if follow else None,
            "overran_managed": reference["jobs_finished_after_deadline"] if reference else None,
            "hold_over_bound": hold["energy_kwh"] / bound["energy_kwh"] if hold and bound and bound["energy_kwh"] > 0 else None,
        })  # fmt: skip
    return rows


WORSE = (
    ("kWh", "kwh_vs_managed_pct", "kwh_vs_follow_pct"),
    ("node-hours", "node_hours_vs_managed_pct", "node_hours_vs_follow_pct"),
)


def _overran_more(row: dict, other: str) -> bool:
    """Whether more of hold's jobs ended after their deadline than ``other``'s (both known)."""
    return None not in (row["overran_hold"], row[f"overran_{other}"]) and row["overran_hold"] > row[f"overran_{other}"]


def _overran_text(row: dict) -> str:
    """Jobs that overran, hold / follow / managed (– where a run did not finish)."""
    return " / ".join("–" if row[f"overran_{n}"] is None else f"{row[f'overran_{n}']:,}" for n in ("hold", "follow", "managed"))


def spread(rows: list[dict]) -> dict:
    """Min / median / max of hold's kWh against managed (%) over the rows where both finished, and the
    rows where hold is worse (strictly more) than managed or follow in kWh, node-hours or overran."""
    pcts = [row["kwh_vs_managed_pct"] for row in rows if row["kwh_vs_managed_pct"] is not None]
    worse: dict[str, int] = {}
    for label, managed_key, follow_key in WORSE:
        worse[f"{label} vs managed"] = sum(1 for row in rows if (row[managed_key] or 0.0) > 0.0)
        worse[f"{label} vs follow"] = sum(1 for row in rows if (row[follow_key] or 0.0) > 0.0)
    for other in ("managed", "follow"):
        worse[f"overran vs {other}"] = sum(1 for row in rows if _overran_more(row, other))
    any_worse = sum(
        1
        for row in rows
        if any((row[key] or 0.0) > 0.0 for _, *keys in WORSE for key in keys)
        or any(_overran_more(row, other) for other in ("managed", "follow"))
    )
    return {
        "cases": len(rows),
        "compared": len(pcts),
        "kwh_vs_managed_pct": {"min": min(pcts), "median": float(np.median(pcts)), "max": max(pcts)} if pcts else None,
        "worse": worse,
        "worse_in_any": any_worse,
        "hold_not_finished": sum(1 for row in rows if "hold" in row["not_finished"]),
        "any_not_finished": sum(1 for row in rows if row["not_finished"]),
    }


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f} %"


def _deadline_text(deadline_s: float) -> str:
    return f"{deadline_s / 3600:g} h" if deadline_s >= 3600 else f"{deadline_s / 60:g} min"


def cases_table(rows: list[dict]) -> Table:
    """Every case: hold against managed (least-kWh variant) and follow, overran, over the bound."""
    variants = any(len(row["managed_variants"]) > 1 for row in rows)
    table = Table(title="hold on the unseen traces: (%) = hold against the run named; overran = jobs ended after their deadline")
    headers = ["trace", "max nodes", "σ", "D", "hold kWh", "kWh vs managed", "node-h vs managed", "kWh vs follow", "node-h vs follow"]
    headers += ["overran hold / follow / managed", "hold / bound kWh"] + (["managed run"] if variants else []) + ["did not finish"]
    for header in headers:
        table.add_column(header, justify="left" if header in ("trace", "managed run", "did not finish") else "right")
    previous = None
    for row in rows:
        key = (row["trace"], row["max_nodes"], row["sigma"])
        overran = _overran_text(row)
        cells = [
            row["trace"] if key != previous else "", f"{row['max_nodes']:,}" if key != previous else "", f"{row['sigma']:g}" if key != previous else "",
            _deadline_text(row["deadline_s"]), "–" if row["hold_kwh"] is None else f"{row['hold_kwh']:,.1f}",
            _pct(row["kwh_vs_managed_pct"]), _pct(row["node_hours_vs_managed_pct"]), _pct(row["kwh_vs_follow_pct"]), _pct(row["node_hours_vs_follow_pct"]),
            overran, "–" if row["hold_over_bound"] is None else f"{row['hold_over_bound']:.3f}",
        ]  # fmt: skip
        if variants:
            cells.append(row["managed_run"] or "–")
        cells.append(", ".join(row["not_finished"]))
        table.add_row(*cells, end_section=False)
        previous = key
    return table


def spread_groups(rows: list[dict]) -> list[tuple[str, dict]]:
    """(label, spread) over all rows, then by --max-nodes and by sigma where there are several."""
    groups = [("all cases", spread(rows))]
    for key, label in (("max_nodes", "max nodes {:,}"), ("sigma", "σ {:g}")):
        values = sorted({row[key] for row in rows}, reverse=key == "max_nodes")
        if len(values) > 1:
            groups += [(label.format(value), spread([row for row in rows if row[key] == value])) for value in values]
    return groups


def spread_table(groups: list[tuple[str, dict]]) -> Table:
    table = Table(title="the spread: hold's kWh against managed (least-kWh variant), and the cases hold is worse (strictly more)")
    headers = ["cases", "compared", "min", "median", "max"]
    headers += [f"worse: {label} vs {other}" for label in ("kWh", "node-hours", "overran") for other in ("managed", "follow")]
    headers += ["worse in any", "hold did not finish"]
    table.add_column("over")
    for header in headers:
        table.add_column(header, justify="right")
    for label, s in groups:
        figures = s["kwh_vs_managed_pct"] or {}
        table.add_row(
            label, str(s["cases"]), str(s["compared"]), *(_pct(figures.get(k)) for k in ("min", "median", "max")),
            *(str(s["worse"][f"{w} vs {o}"]) for w in ("kWh", "node-hours", "overran") for o in ("managed", "follow")),
            str(s["worse_in_any"]), str(s["hold_not_finished"]),
        )  # fmt: skip
    return table


RESULTS = Path(__file__).resolve().parent / "results" / "spread.json"
"""The whole grid's document (``--json``) as last run on this machine; the spread figures of docs/results.md are
rendered from it by ``readme_figures.py`` (``markdown_figures``), as the grid takes about 50 minutes."""


def _md_pct(value: float | None) -> str:
    """``_pct`` with the README's minus sign."""
    return _pct(value).replace("-", "−")


def markdown_figures(document: dict) -> dict[str, str]:
    """docs/results.md's figures from a ``--json`` document: ``spread-range`` (min / median / max of hold's
    kWh against the strongest managed variant over every case), ``spread-table`` (that spread over
    all cases, by cap and by sigma, with the cases where hold is worse) and ``spread-worse`` (each
    case where hold overran more jobs than managed, or used more kWh)."""
    groups = spread_groups(document["cases"])
    figures = dict(groups[0][1]["kwh_vs_managed_pct"] or {})
    lines = [
        "| over | cases | hold's kWh vs managed: min | median | max | more kWh than managed | more node-hours | more overran than managed | more overran than follow | hold did not finish |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for label, s in groups:
        f = s["kwh_vs_managed_pct"] or {}
        w = s["worse"]
        lines.append(
            f"| {label} | {s['cases']} | {_md_pct(f.get('min'))} | {_md_pct(f.get('median'))} | {_md_pct(f.get('max'))} | "
            f"{w['kWh vs managed']} | {w['node-hours vs managed']} | {w['overran vs managed']} | {w['overran vs follow']} | {s['hold_not_finished']} |"
        )
    worse = [row for row in document["cases"] if (row["kwh_vs_managed_pct"] or 0.0) > 0.0 or _overran_more(row, "managed")]
    rows = ["| trace | max nodes | σ | D | hold's kWh vs managed | overran hold / follow / managed |", "|---|--:|--:|--:|--:|--:|"]
    for row in worse:
        rows.append(
            f"| {row['trace'].removesuffix('.tsv')} | {row['max_nodes']:,} | {row['sigma']:g} | {_deadline_text(row['deadline_s'])} | "
            f"{_md_pct(row['kwh_vs_managed_pct'])} | {_overran_text(row)} |"
        )
    return {
        "spread-range": f"{_md_pct(figures.get('min'))} / {_md_pct(figures.get('median'))} / {_md_pct(figures.get('max'))} over {groups[0][1]['compared']} cases",
        "spread-table": "\n".join(lines),
        "spread-worse": "\n".join(rows) if worse else "(none)",
    }


def _comma_list(text: str, convert, flag: str, expected: str, parser: argparse.ArgumentParser) -> list:
    """A comma list through ``convert`` (None: refused), refused with the flag named."""
    values = []
    for part in text.split(","):
        try:
            value = convert(part.strip())
        except ValueError:
            value = None
        if value is None:
            parser.error(f"{flag} {text}: {part.strip()!r} is not {expected}; expected a comma list of them")
        values.append(value)
    if len(set(values)) != len(values):
        parser.error(f"{flag} {text}: a value is given twice; give each once")
    return values


def _sigma(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) and 0.0 <= value <= MAX_LENGTH_ERROR_SIGMA else None


def _node_count(text: str) -> int | None:
    value = int(text)
    return value if value >= 1 else None


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[int]]:
    """The flags, each checked before any work (exit 2 naming the flag); with the deadlines in slots."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=make_traces.UNSEEN_DIR, metavar="DIR", help="folder whose .tsv traces are run, each (default: the unseen set, %(default)s; its week is written there if missing)")
    parser.add_argument("--deadlines", default="30m,2h,6h,12h", metavar="LIST", help="compare --deadline: a comma list of durations or slots of 300 s (default %(default)s)")
    parser.add_argument("--sigmas", default="0,0.5,1.0", metavar="LIST", help=f"compare --length-error values, a comma list of numbers in [0, {MAX_LENGTH_ERROR_SIGMA:g}] (default %(default)s)")
    parser.add_argument("--max-nodes", default="500,100", metavar="LIST", help="compare --max-nodes values, a comma list of whole numbers >= 1 (default %(default)s: room, and the default cap, which binds)")
    parser.add_argument("--workers", type=int, default=None, metavar="N", help="compare --workers: processes per compare (default: the machine's cores)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write every case, the spread and the timing to this JSON file")
    parser.add_argument(
        "--keep", type=Path, default=None, metavar="FILE",
        help="a --json document of an earlier run: its cases of other (trace, max nodes, sigma) than this run's are kept, "
        "and the spread is over both (re-run part of the grid after a change that leaves the rest as it was)",
    )  # fmt: skip
    parser.add_argument("--no-timing", action="store_true", help=f"skip timing compare on {make_traces.UNSEEN_WEEK} with its default runs")
    args = parser.parse_args(argv)
    if args.traces.resolve() != make_traces.UNSEEN_DIR.resolve():
        if not args.traces.is_dir():
            what = "a file, not a folder" if args.traces.exists() else "no such folder"
            parser.error(f"--traces {args.traces}: {what}; give a folder of SWIM traces (.tsv)")
        if not sorted(args.traces.glob("*.tsv")):
            parser.error(f"--traces {args.traces}: holds no .tsv trace; give a folder of SWIM traces (.tsv)")
    try:
        deadlines = parse_deadlines(args.deadlines, defaults.SLOT_S, "--deadlines")
    except ConfigError as exc:
        said = str(exc)
        parser.error(said if said.startswith(f"--deadlines {args.deadlines}") else f"--deadlines {args.deadlines}: {said.removeprefix('--deadlines: ')}")
    args.sigmas = _comma_list(args.sigmas, _sigma, "--sigmas", f"a number in [0, {MAX_LENGTH_ERROR_SIGMA:g}] (compare's --length-error)", parser)
    args.max_nodes = _comma_list(args.max_nodes, _node_count, "--max-nodes", "a whole number >= 1", parser)
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers {args.workers}: expected a whole number >= 1")
    if args.json is not None and (args.json.is_dir() or not args.json.parent.is_dir()):
        parser.error(f"--json {args.json}: expected a file in a folder that exists")
    return args, deadlines


def unseen_week(console: Console) -> Path:
    """The unseen set's week in its folder, written there first if missing; says so, and warns when
    its text is not the one the set was made with (another numpy's draws)."""
    path = make_traces.UNSEEN_DIR / make_traces.UNSEEN_WEEK
    if not path.is_file():
        write_all_atomic({path: make_traces.unseen_traces()[make_traces.UNSEEN_WEEK]})
        console.print(f"wrote {path} (the unseen set's week, written on demand)", style="dim", highlight=False)
    if make_traces.text_sha256(path.read_text()) != make_traces.UNSEEN_WEEK_SHA256:
        console.print(
            f"warning: {path} is not the week the unseen set was made with (sha256 differs from make_traces.UNSEEN_WEEK_SHA256): "
            "its figures are of another draw", style="bold red", highlight=False,
        )  # fmt: skip
    return path


def kept_cases(path: Path | None, run_now: set[tuple[str, int, float]]) -> list[dict]:
    """The cases of the --json document at ``path`` whose (trace, max nodes, sigma) is not in ``run_now``
    ([] without ``path``). SystemExit naming the file when it is not such a document."""
    if path is None:
        return []
    try:
        cases = json.loads(path.read_text())["cases"]
        return [case for case in cases if (case["trace"], case["max_nodes"], case["sigma"]) not in run_now]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"--keep {path}: expected a --json document of bench_spread.py ({exc})") from None


def main(argv: Sequence[str] | None = None) -> int:
    args, deadlines = parse_args(argv)
    console = Console(width=max(220, Console().width), highlight=False)
    week = None
    if args.traces.resolve() == make_traces.UNSEEN_DIR.resolve() or not args.no_timing:
        week = unseen_week(console)
    traces = sorted(args.traces.glob("*.tsv"))
    if not traces:
        raise SystemExit(f"--traces {args.traces}: holds no .tsv trace")
    deadline_text = ",".join(str(d) for d in deadlines)
    cases = [(trace, max_nodes, sigma) for trace in traces for max_nodes in args.max_nodes for sigma in args.sigmas]
    rows: list[dict] = []
    started = time.perf_counter()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(f"{len(cases)} compares", total=len(cases))
        for trace, max_nodes, sigma in cases:
            progress.update(task, description=f"{trace.name}, --max-nodes {max_nodes}, σ {sigma:g}")
            extra = ["--max-nodes", str(max_nodes), "--length-error", str(sigma), *make_traces.UNSEEN_COMPARE_FLAGS.get(trace.name, ())]
            _, document = run_compare(trace, deadline_text, extra, args.workers)
            rows += case_rows(document, trace.name, sigma, max_nodes)
            progress.advance(task)
    kept = kept_cases(args.keep, {(trace.name, max_nodes, sigma) for trace, max_nodes, sigma in cases})
    if kept:
        console.print(f"kept {len(kept)} cases of {args.keep} (other traces, caps or sigmas than this run's)")
        rows = sorted(kept + rows, key=lambda row: (row["trace"], -row["max_nodes"], row["sigma"], row["deadline_slots"]))
    console.print(cases_table(rows))
    groups = spread_groups(rows)
    console.print(spread_table(groups))
    console.print(f"{len(cases)} compares ({len(rows)} cases) in {time.perf_counter() - started:,.0f} s; runs: {', '.join(RUNS)}")
    timing = None
    if not args.no_timing:
        with console.status(f"timing compare on {week.name} with its default runs"):
            seconds, document = run_compare(week, TIMING_DEADLINE, ["--max-nodes", str(TIMING_MAX_NODES)], args.workers)
        timing = {
            "trace": week.name, "jobs": document["jobs"], "runs": sorted({run["name"] for run in document["runs"]}),
            "deadline": TIMING_DEADLINE, "max_nodes": TIMING_MAX_NODES, "workers": args.workers or os.cpu_count(), "seconds": seconds,
        }  # fmt: skip
        console.print(
            f"compare on {week.name} ({document['jobs']:,} jobs), its {len(timing['runs'])} default runs at D = {TIMING_DEADLINE}, "
            f"--max-nodes {TIMING_MAX_NODES}, --workers {timing['workers']}: {seconds:,.1f} s (the command's wall time, Python's start included)"
        )
    if args.json is not None:
        document = {
            "runs": list(RUNS), "deadline_slots": sorted({row["deadline_slots"] for row in rows}),
            "sigmas": sorted({row["sigma"] for row in rows}), "max_nodes": sorted({row["max_nodes"] for row in rows}, reverse=True),
            "cases": rows, "spread": dict(groups), "timing": timing,
        }  # fmt: skip
        write_all_atomic({args.json: json.dumps(document, indent=1) + "\n"})
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
