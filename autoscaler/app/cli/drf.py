"""``autoscaler drf``: dynamic DRF's water level and dominant shares as agents arrive."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np
from rich.console import Console

from autoscaler.adapters.files import write_all_atomic
from autoscaler.app.cli.arguments import agent_count
from autoscaler.core.errors import ConfigError


def add_parsers(commands) -> None:
    """The drf command."""
    drf = commands.add_parser(
        "drf",
        help="dynamic dominant resource fairness shares as agents arrive one by one",
        description="Read agents' demand vectors (a CSV: agent, then one column per resource, rows in arrival "
        "order) and print dynamic DRF's water level M^k and dominant shares x^k at every step k, with the "
        "linear-time algorithm. Each resource has capacity 1; at step k at most k/n of each is handed out.",
    )
    drf.add_argument("--demands", type=Path, required=True, help="CSV with header agent,RESOURCE,...; one row per agent")
    drf.add_argument("--n", type=agent_count, default=None, help="total agents n that will arrive, at most 10,000,000 (default: the row count)")
    drf.add_argument("--format", choices=["table", "json"], default="table", help="stdout format")
    drf.add_argument("--ratios", action="store_true", help="also the competitive ratios against the offline LP optimum at every step (one LP pair per step)")
    drf.add_argument("--yarn-out", type=Path, default=None, help="write the final shares as a YARN fair-scheduler allocation XML")
    drf.add_argument("--plot", type=Path, default=None, help="write a PNG of the competitive ratios per step (implies --ratios)")
    drf.set_defaults(handler=_run_drf)


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
