"""Fuzz every input edge with N generated inputs and print, per edge, what was accepted, what was refused
(by error class) and anything unexpected (with the first input that did it).

The generators and checks are those of ``tests/fuzz/test_fuzz_inputs.py``, drawing every kind of
malformed input, including the ones that once escaped as tracebacks. Run: ``.venv/bin/python benchmarks/fuzz_report.py [--n 1000]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

FUZZ_MODULE = Path(__file__).resolve().parent.parent / "tests" / "fuzz" / "test_fuzz_inputs.py"


def load_fuzz_module():
    spec = importlib.util.spec_from_file_location("fuzz_inputs", FUZZ_MODULE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def explore(target, n: int, on_input) -> tuple[Counter, dict, float]:
    """Run ``n`` generated inputs through ``target``; (outcome counts, first input per unexpected kind, seconds)."""
    counts: Counter = Counter()
    first: dict[str, tuple[object, object]] = {}

    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(target.cases(True))
    def run_one(case):
        outcome = target.run(case)
        counts[(outcome.verdict, outcome.kind)] += 1
        if outcome.verdict == "unexpected":
            first.setdefault(outcome.kind, (case, outcome))
        on_input()

    started = time.perf_counter()
    run_one()
    return counts, first, time.perf_counter() - started


def _short(text: object, limit: int = 300) -> str:
    text = repr(text) if not isinstance(text, str) else text
    return text if len(text) <= limit else text[:limit] + " ..."


def target_table(name: str, counts: Counter, first: dict, seconds: float) -> Table:
    tried = sum(counts.values())
    table = Table(title=f"{name}: {tried} inputs in {seconds:.1f} s", title_justify="left")
    table.add_column("outcome")
    table.add_column("inputs", justify="right")
    table.add_column("first input (unexpected only)", overflow="fold")
    table.add_row("tried", str(tried), "")
    table.add_row("accepted", str(counts[("accepted", "")]), "")
    refusals = sorted((kind, count) for (verdict, kind), count in counts.items() if verdict == "refused")
    table.add_row("refused", str(sum(c for _, c in refusals)), "")
    for kind, count in refusals:
        table.add_row(Text(f"  {kind}"), str(count), "")
    unexpected = sorted((kind, count) for (verdict, kind), count in counts.items() if verdict == "unexpected")
    table.add_row("unexpected", str(sum(c for _, c in unexpected)), "")
    for kind, count in unexpected:
        case, outcome = first[kind]
        # Text, not markup: an input such as "[cluster]" must be shown, not read as a style.
        table.add_row(Text(f"  {kind}"), str(count), Text(f"{_short(case)}\n-> {_short(outcome.detail, 200)}"))
    return table


def summary_table(results: dict[str, tuple[Counter, dict, float]], n: int) -> Table:
    table = Table(title=f"fuzzed input edges, {n} generated inputs each", title_justify="left")
    for column in ("edge", "tried", "accepted", "refused", "refused by error class", "unexpected"):
        table.add_column(column, justify="left" if column in ("edge", "refused by error class") else "right")
    for name, (counts, _, _) in results.items():
        refusals = Counter({kind: c for (verdict, kind), c in counts.items() if verdict == "refused"})
        unexpected = sum(c for (verdict, _), c in counts.items() if verdict == "unexpected")
        table.add_row(
            name,
            str(sum(counts.values())),
            str(counts[("accepted", "")]),
            str(sum(refusals.values())),
            ", ".join(f"{kind} {c}" for kind, c in refusals.most_common()),
            str(unexpected),
        )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fuzz the input edges (traces, load curves, settings, submit, drf, replay) and tabulate the outcomes.")
    parser.add_argument("--n", type=int, default=1000, help="generated inputs per edge (default: 1000)")
    parser.add_argument("--only", default=None, help="comma list of edges to run (substrings of their names)")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be at least 1")
    fuzz = load_fuzz_module()
    targets = [t for t in fuzz.TARGETS if args.only is None or any(part in t.name for part in args.only.split(","))]
    out, err = Console(), Console(stderr=True)
    if not out.is_terminal:
        out = Console(width=160)  # piped: rich would assume 80 columns and fold the examples
    results: dict[str, tuple[Counter, dict, float]] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        for target in targets:
            task = progress.add_task(target.name, total=args.n)
            results[target.name] = explore(target, args.n, partial(progress.advance, task))
    for name, (counts, first, seconds) in results.items():
        out.print(target_table(name, counts, first, seconds))
    out.print(summary_table(results, args.n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
