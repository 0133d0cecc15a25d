"""The documentation's deterministic figures, computed by running the commands it quotes.

Every figure or table in README.md and docs/*.md that a program can reproduce sits between two markers,
``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->``, on lines of their own around a table or
inline around a phrase; a name may be marked in several files (the front page repeats a few), once
in each. This script computes each NAME and either rewrites the text between its markers or compares it:

    python benchmarks/readme_figures.py --write          # after a change of behaviour: rewrite the files
    python benchmarks/readme_figures.py --check          # exit 1 with a diff when a file disagrees
    python benchmarks/readme_figures.py --check --group cheap      # only the groups below marked cheap

The figures come from the command line itself (``autoscaler.app.cli.main``, run in this process,
its stdout read as JSON where the command has ``--format json``, else its table or message), so
they are what a reader typing the README's commands gets. Timings
(ms, s) are never computed here: they stay outside the markers, measured by the other scripts in
benchmarks/. A marker the README has and no group computes, or a figure no marker holds, is an error.

Groups, and what each costs on the project's 2-core machine (tests/unit/test_readme_figures.py
checks the cheap ones in the default run, the slow ones under ``pytest -m slow``):

    cheap  results   ``sweep --trace A --trace B`` (D = 1..12) and ``replay`` of A and B at D = 2:
                     the tables beside the paper (Fig. 9, 11), hold's table, eq. (2)'s costs, the
                     workload's clipped and long jobs, the horizon, the deadline classes (Table II),
                     hold's energy under the paper's costs and under objective energy; about 8 s of CPU
    cheap  budget    ``replay --memory-budget-mb 1`` at three sizes: the memory estimates; about 3 s
    cheap  overload  ``run --replay default --policy gcp-u --max-nodes 60`` with 3 tenants and with 1,
                     then ``jobs --by-tenant``: the overload table; about 3.5 s
    cheap  table-iv  ``report --replay`` over 48 slots and the day at boot_s = 300, 0 and 600: the
                     energy beside the paper's Table IV; under 1 s
    cheap  spread    hold against managed over make_traces.py's unseen set, rendered from what
                     ``bench_spread.py --json benchmarks/results/spread.json`` recorded (the grid
                     itself takes about 50 min); milliseconds
    slow   daemon-replay  ``run --replay default`` for hold, GCP-U and VFW with ``release_margin_slots``
                     1 and 0: rounding to whole nodes and the margin's node-slots; about 10 s
    slow   compare   ``compare`` of A, B and make_traces.py's weekly-7d, bursty and diurnal-bursty-2d at
                     30 min, 2 h, 6 h and 12 h (objective energy, hold also under cost and in
                     job-slots): hold against follow, the strongest managed variant, fixed and the
                     bound, and every run; a few minutes
    slow   carbon    ``replay --carbon deploy/carbon-daily.csv`` at 1, 2, 6 and 12 h, with and without
                     ``--forecast perfect``, and ``sweep`` of hold at those deadlines: the carbon
                     table and the eq. (2) savings beside it; about 75 s

All of it (``--write`` or ``--check`` without ``--group``) took 1.5 min of CPU, 3.5 min of wall
time on the shared machine.

Raises (exit 2) when a command the figures come from fails; the message names the command.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import math
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autoscaler.core.errors import AutoscalerError

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"


def documents() -> list[Path]:
    """The files whose figures are written and checked: README.md and docs/*.md, in that order."""
    return [README, *sorted((REPO / "docs").glob("*.md"))]
CARBON_CSV = REPO / "deploy" / "carbon-daily.csv"

MARKER = re.compile(r"<!-- figures:(?P<name>[a-z0-9-]+) -->(?P<body>.*?)<!-- /figures:(?P=name) -->", re.DOTALL)

# The paper's figures the tables put beside ours (Fig. 9 read off its curves; §VI-B's GCP savings).
PAPER_FIG9 = {(2, "offline"): "~60 %", (12, "offline"): "~70 %", (2, "gcp-u"): "~40 %", (12, "gcp-u"): "approaches offline"}
PAPER_VFW_D2 = "~20 %"
PAPER_GCP_CLASSES = {"A": "47.66 %", "B": "45.65 %"}
PAPER_FIRST_CLASS_JOBS_A = 5691  # Table II, Workload A, cluster 1
CARBON_DEADLINES = ("1h", "2h", "6h", "12h")
SLOT_S = 300.0
PAPER = ("--objective", "paper")
"""The figures beside the paper's are the paper's model: eq. (2) with e0 = 1, e1 = 0, beta = 12. The
command lines default to objective energy; these pass the paper's, as the README's commands do."""


class FigureError(AutoscalerError):
    """A command the figures come from failed, or the README's markers do not match the groups."""


def cli_json(*argv: str) -> object:
    """Run ``autoscaler ARGV`` in this process and parse its stdout as JSON."""
    return json.loads(cli_text(*argv))


def cli_text(*argv: str, status: int = 0) -> str:
    """Run ``autoscaler ARGV`` in this process; its stdout, or its stderr when ``status`` is not 0.

    Raises FigureError when the exit status is not ``status``."""
    from autoscaler.app.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        got = main(list(argv))
    if got != status:
        raise FigureError(f"autoscaler {' '.join(argv)}: exit status {got}, expected {status}: {err.getvalue()[-2000:]}")
    return out.getvalue() if status == 0 else err.getvalue()


def pct(value: float, digits: int = 1) -> str:
    """A percentage as the README writes it: 63.33 %, −1.3 % (a minus sign, not a hyphen)."""
    text = f"{value:.{digits}f}"
    if text.startswith("-"):
        text = "−" + text[1:] if float(text) != 0 else text[1:]
    return f"{text} %"


def group_results() -> dict[str, str]:
    """Savings beside the paper, hold's table, costs, workload and class figures (cheap)."""
    sweep = cli_json("sweep", "--trace", "A", "--trace", "B", *PAPER, "--format", "json")
    traces = {"A": "Workload A (embedded)", "B": "Workload B (embedded)"}
    by_d = {short: sweep["by_deadline"][name] for short, name in traces.items()}
    replay_a = cli_json("replay", "--trace", "A", "-D", "2", *PAPER, "--format", "json")
    replay_b = cli_json("replay", "--trace", "B", "-D", "2", "--policy", "follow", *PAPER, "--format", "json")
    figures: dict[str, str] = {}

    rows = [
        "| workload | D | offline (ours) | offline (paper, Fig. 9) | GCP-U (ours) | GCP-U (paper, Fig. 9) |",
        "|---|---|---|---|---|---|",
    ]
    for short in traces:
        for d in (2, 12):
            savings = by_d[short]
            rows.append(
                f"| {short} | {d} | {pct(savings['offline'][str(d)], 2)} | {PAPER_FIG9[d, 'offline']} "
                f"| {pct(savings['gcp-u'][str(d)], 2)} | {PAPER_FIG9[d, 'gcp-u']} |"
            )
    figures["results-offline"] = "\n".join(rows)

    rows = [
        "| workload | VFW, D = 2 (ours) | VFW, D = 2 (paper) | VFW, D = 12 (ours) | GCP classes (ours) | GCP classes (paper) |",
        "|---|---|---|---|---|---|",
    ]
    for short, name in traces.items():
        vfw = by_d[short]["vfw"]
        rows.append(
            f"| {short} | {pct(vfw['2'], 2)} | {PAPER_VFW_D2} | {pct(vfw['12'], 2)} | {pct(sweep['gcp_classes'][name], 2)} "
            f"| {PAPER_GCP_CLASSES[short]} |"
        )
    figures["results-vfw"] = "\n".join(rows)
    gcp_classes = sweep["gcp_classes"].values()
    figures["gcp-classes-range"] = f"{min(gcp_classes):.0f}–{pct(max(gcp_classes), 0)}"

    deltas = (1, 2, 6, 11)
    by_delta = {short: sweep["vfw_by_delta"][name] for short, name in traces.items()}
    a_part = ", ".join(f"{pct(by_delta['A'][str(delta)])} at {'δ = ' if i == 0 else ''}{delta}" for i, delta in enumerate(deltas))
    b_part = ", ".join(pct(by_delta["B"][str(delta)]) for delta in deltas)
    figures["vfw-delta"] = f"A {a_part}; B {b_part}"

    ratio_low, ratio_high = {}, {}
    rows = [
        "| D | A offline | A GCP-U | A VFW | A **hold** | B offline | B GCP-U | B VFW | B **hold** |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in sweep["deadlines"]:
        cells = [str(d)]
        for short in traces:
            savings = by_d[short]
            offline = savings["offline"][str(d)]
            cells.append(pct(offline))
            for policy in ("gcp-u", "vfw", "hold"):
                saving = savings[policy].get(str(d))
                if saving is None:
                    cells.append("–")  # vfw needs 0 < delta < D: no VFW at D = 1
                    continue
                ratio = saving / offline
                ratio_low[policy] = min(ratio_low.get(policy, math.inf), ratio)
                ratio_high[policy] = max(ratio_high.get(policy, -math.inf), ratio)
                cells.append(f"{saving:.1f} (**{ratio:.3f}**)" if policy == "hold" else f"{saving:.1f} ({ratio:.3f})")
        rows.append("| " + " | ".join(cells) + " |")
    figures["hold-table"] = "\n".join(rows)
    figures["hold-ratio"] = f"{ratio_low['hold']:.2f}–{ratio_high['hold']:.2f}"
    figures["gcp-u-ratio"] = f"{ratio_low['gcp-u']:.2f}–{ratio_high['gcp-u']:.2f}"

    policies = replay_a["policies"]
    follow = policies["follow"]
    figures["costs-a-d2"] = (
        f"follow {follow['cost']:,.0f} ({follow['operating_cost']:,.0f} operating + {follow['switching_cost']:,.0f} switching), "
        f"offline {policies['offline']['cost']:,.0f}, GCP-U {policies['gcp-u']['cost']:,.0f}"
    )
    kwh = {name: policy["energy_wh"] / 1000 for name, policy in policies.items()}
    figures["hold-energy"] = (
        f"{kwh['hold']:.1f} kWh against follow's {kwh['follow']:.1f} (offline {kwh['offline']:.1f}, GCP-U {kwh['gcp-u']:.1f}), "
        f"while its eq. (2) saving is {pct(policies['hold']['saving_pct'])}"
    )
    # The default objective beside the paper's: hold's kWh against follow's when it decides in Wh.
    energy = {
        short: cli_json("replay", "--trace", short, "-D", "2", "--policy", "follow,hold,offline", "--objective", "energy", "--format", "json")["policies"]
        for short in ("A", "B")
    }
    figures["objective-energy"] = "; ".join(
        f"Workload {short} {p['hold']['energy_wh'] / 1000:.1f} kWh against follow's {p['follow']['energy_wh'] / 1000:.1f} "
        f"(offline {p['offline']['energy_wh'] / 1000:.1f})"
        for short, p in energy.items()
    )
    clipped = {short: replay["workload"] for short, replay in (("A", replay_a), ("B", replay_b))}
    figures["clipped"] = "; ".join(
        f"Workload {short}: {w['clipped_jobs']:,} jobs, {w['clipped_job_slots']:,} job-slots" for short, w in clipped.items()
    )
    horizon = {name: len(policy["m"]) for name, policy in policies.items()}
    uniform = {horizon[name] for name in ("follow", "offline", "gcp-u", "vfw", "hold")}
    if len(uniform) != 1:
        raise FigureError(f"the uniform-deadline policies' horizons differ: {horizon}")
    figures["horizon"] = f"{uniform.pop():,} slots, and {horizon['gcp']:,} for `gcp`"

    (note,) = [n for n in replay_a["workload"]["notes"] if "longer than the window" in n]
    count, longest, hours = re.match(r"(\d+) jobs have an estimated length.*?clipped at its end: (\S+) ([\d,.]+) h", note).groups()
    hours_text = f"{float(hours.replace(',', '')):,.0f} h"
    figures["long-jobs"] = f"{count} jobs, the longest {longest} at {hours_text}"
    figures["longest-hours"] = hours_text

    classes = replay_a["classes"]
    # The JSON document has the class table, not the count of raised deadlines: the table's caption says it.
    raised = re.search(r"([\d,]+) jobs had their deadline raised to their length", cli_text("replay", "--trace", "A", "--policy", "gcp", *PAPER))
    if raised is None:
        raise FigureError("replay --trace A --policy gcp: no count of deadlines raised to the job's length in its table")
    figures["raised"] = f"{raised[1]} jobs"
    figures["first-class"] = f"{classes[0]['jobs']:,} vs {PAPER_FIRST_CLASS_JOBS_A:,}"
    largest = max(classes, key=lambda c: c["mean_shuffle_mb"])
    if largest["jobs"] != 1:
        raise FigureError(f"the class with the most shuffle has {largest['jobs']} jobs, not Workload A's largest job alone")
    number = classes.index(largest) + 1
    figures["largest-job"] = (
        f"S = {largest['mean_map_input_mb']:,.0f} MB in, S' = {largest['mean_shuffle_mb']:,.0f} MB of shuffle, "
        f"S'' = {largest['mean_reduce_output_mb']:.2f} MB out: Table II's cluster 10, which our k-means makes class {number} "
        f"(deadline {largest['deadline_slots']} slots; the two one-job classes come out in the other order)"
    )
    return figures


def _estimate(*argv: str) -> re.Match:
    """The memory estimate ``replay ARGV`` prints when refused under a 1 MiB budget."""
    message = cli_text("replay", *argv, "--memory-budget-mb", "1", status=2)
    found = re.search(r"and ([\d,]+) distinct job deadlines up to ([\d,]+) slots; that needs about ([\d.,]+ [KMGT]?i?B)", message)
    if found is None:
        raise FigureError(f"replay {' '.join(argv)}: no memory estimate in {message!r}")
    return found


def group_budget() -> dict[str, str]:
    """The memory budget's estimates (cheap: nothing is allocated, each run is refused)."""
    from autoscaler.core.budget import DEFAULT_MEMORY_BUDGET_MB

    one_s = _estimate("--slot-s", "1")
    window = _estimate("--window", "1000000")
    gcp = _estimate("--policy", "gcp")
    budget_bytes = DEFAULT_MEMORY_BUDGET_MB * 2**20

    def to_bytes(text: str) -> float:
        number, unit = text.split()
        return float(number.replace(",", "")) * 2 ** (10 * ("B", "KiB", "MiB", "GiB", "TiB").index(unit))

    def verdict(found: re.Match) -> str:
        return "so it runs" if to_bytes(found.group(3)) <= budget_bytes else "refused"

    return {
        "budget-slot-1s": f"about {one_s.group(3)}, {verdict(one_s)}",
        "budget-window": f"{window.group(3)}, {verdict(window)}",
        "gcp-rows": f"{gcp.group(1)} rows on Workload A, not ν + 1 = {int(gcp.group(2).replace(',', '')) + 1:,}",
    }


def _overload_run(tenants: int, folder: Path) -> tuple[list[dict], list[dict]]:
    """(decision records, ``jobs --by-tenant`` rows) of Workload A through the daemon under a 60-node
    cap, in job-slots."""
    store, decisions = folder / f"tenants-{tenants}.db", folder / f"tenants-{tenants}.jsonl"
    # The paper's work model: a node per job, which is what makes Workload A overload 60 nodes.
    paper = folder / "job-slots.toml"
    paper.write_text('work_model = "job-slots"\nprovision_s = 0\n', encoding="utf-8")
    argv = ["run", "--replay", "default", "--policy", "gcp-u", "--max-nodes", "60", "--tenants", str(tenants), "--config", str(paper)]
    cli_text(*argv, "--store", str(store), "--decisions-out", str(decisions))
    records = [json.loads(line) for line in decisions.read_text().splitlines()]
    return records, cli_json("jobs", "--store", str(store), "--by-tenant", "--format", "json")


def group_overload() -> dict[str, str]:
    """The overload table: dynamic DRF shares under a 60-node cap, three tenants and one (cheap)."""
    with tempfile.TemporaryDirectory(prefix="readme-figures-") as folder:
        records, tenants = _overload_run(3, Path(folder))
        _, one_tenant = _overload_run(1, Path(folder))
    overloaded = [r for r in records if r["overloaded"]]
    node_slots: dict[str, int] = {}
    for record in overloaded:
        for tenant, nodes in record["nodes_by_tenant"].items():
            node_slots[tenant] = node_slots.get(tenant, 0) + nodes
    rows = ["| tenant | jobs | late (missed deadline) | node-slots when overloaded | dominant share |", "|---|---|---|---|---|"]
    for row in tenants:
        rows.append(
            f"| {row['tenant']} | {row['jobs']:,} | {row['missed']:,} | {node_slots.get(row['tenant'], 0):,} | {row['dominant_share']:.4f} |"
        )
    jobs = sum(row["jobs"] for row in tenants)
    fewest = min(tenants, key=lambda row: row["missed"])
    return {
        "overload-peak": f"{max(math.ceil(r['capacity'] - 1e-9) for r in records):,}",
        "overload-totals": (
            f"{len(overloaded):,} of {len(records):,} slots overloaded (jobs queued and more nodes wanted than 60), "
            f"and {sum(row['missed'] for row in tenants):,} of {jobs:,} jobs that miss their deadline"
        ),
        "overload-table": "\n".join(rows),
        "overload-fewest": fewest["tenant"],
        "overload-one-tenant": f"{sum(row['missed'] for row in one_tenant):,}",
    }


PAPER_TABLE_IV_ROW = "| paper, Table IV (measured) | 8.60 | 4.46 | 4.19 (6.02 %) | 3.93 (11.96 %) |"


def group_table_iv() -> dict[str, str]:
    """The modelled energy beside the paper's Table IV: ``report --replay`` over 48 slots and the day,
    boot_s = 300, 0 and 600 (cheap: follow, VFW and GCP-U only)."""
    kwh: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
    for window in ("48", "day"):
        for boot_s in ("300", "0", "600"):
            argv = ["report", "--replay", "--boot-s", boot_s, *PAPER, "--format", "json", *(["--window", window] if window != "day" else [])]
            schedules = cli_json(*argv)["schedules"]
            kwh[window, boot_s] = {s["schedule"]: (s["energy_wh"] / 1000, s["reduction_percent"]) for s in schedules}
    rows = ["| kWh (reduction against follow) | no provisioning | follow | VFW | GCP-U |", "|---|---|---|---|---|", PAPER_TABLE_IV_ROW]
    for window, label in (("48", "replay, 48 slots + 2"), ("day", "replay, 24 h + 2 slots")):
        run = kwh[window, "300"]
        rows.append(
            f"| {label} | {run['no provisioning'][0]:.2f} | {run['follow'][0]:.2f} | {run['vfw'][0]:.2f} ({pct(run['vfw'][1], 2)}) "
            f"| {run['gcp-u'][0]:.2f} ({pct(run['gcp-u'][1], 2)}) |"
        )
    policies = ("vfw", "gcp-u")
    below_none = [100 * (1 - kwh[w, "300"][p][0] / kwh[w, "300"]["no provisioning"][0]) for w in ("48", "day") for p in policies]
    more_at_0 = [-kwh[w, "0"][p][1] for w in ("48", "day") for p in policies]
    if min(more_at_0) <= 0:
        raise FigureError(f"with boot_s = 0 a policy no longer uses more than follow: {more_at_0}; reword the README's sentence")
    at_600 = {(w, p): pct(kwh[w, "600"][p][1], 2) for w in ("48", "day") for p in policies}
    return {
        "table-iv": "\n".join(rows),
        "table-iv-none": f"{min(below_none):.0f}-{max(below_none):.0f} %",
        "table-iv-boot-0": f"{min(more_at_0):.1f}-{max(more_at_0):.1f} %",
        "table-iv-boot-600": (
            f"GCP-U saves {at_600['48', 'gcp-u']} (48 slots) and {at_600['day', 'gcp-u']} (24 h), "
            f"VFW {at_600['48', 'vfw']} and {at_600['day', 'vfw']}"
        ),
    }


def _daemon_replay(policy: str, margin_slots: int, folder: Path) -> dict[str, float]:
    """Workload A through the daemon at D = 2 (``run --replay default``), with ``release_margin_slots``
    set by a config file: jobs released and late, and node-slots: m_t, m_t rounded up, added for due
    jobs, run. Exit status 0 is required, so m_t equals ``autoscaler replay``'s: the paper's work
    model (job-slots, nodes usable at once), which replay plans in."""
    config = folder / f"margin-{margin_slots}.toml"
    config.write_text(
        f'objective = "paper"\nrelease_margin_slots = {margin_slots}\nwork_model = "job-slots"\nprovision_s = 0\n', encoding="utf-8"
    )
    store, decisions = folder / f"{policy}-{margin_slots}.db", folder / f"{policy}-{margin_slots}.jsonl"
    cli_text(
        "run", "--replay", "default", "--policy", policy, "--config", str(config), "--store", str(store), "--decisions-out", str(decisions)
    )
    records = [json.loads(line) for line in decisions.read_text().splitlines()]
    whole = [math.ceil(r["capacity"] - 1e-9) for r in records]
    late = sum(row["missed"] for row in cli_json("jobs", "--store", str(store), "--by-tenant", "--format", "json"))
    return {
        "released": sum(len(r["release"]) for r in records),
        "late": late,
        "capacity": sum(r["capacity"] for r in records),
        "whole": sum(whole),
        "due": sum(max(r["nodes"] - w, 0) for r, w in zip(records, whole)),
        "run": sum(r["nodes"] for r in records),
    }


def group_daemon_replay() -> dict[str, str]:
    """Rounding to whole nodes and the release margin through the daemon, hold, GCP-U and VFW (slow: six replays)."""
    with tempfile.TemporaryDirectory(prefix="readme-figures-") as folder:
        runs = {(policy, margin): _daemon_replay(policy, margin, Path(folder)) for policy in ("hold", "gcp-u", "vfw") for margin in (1, 0)}
    hold, hold_0 = runs["hold", 1], runs["hold", 0]

    def rounding(policy: str) -> str:
        run = runs[policy, 1]
        return pct(100 * (run["whole"] / run["capacity"] - 1), 2)

    def margin_cost(policy: str) -> str:
        return pct(100 * (runs[policy, 1]["run"] / runs[policy, 0]["run"] - 1))

    late = "none late" if hold["late"] == 0 else f"{hold['late']:,} late"
    return {
        "daemon-replay": (
            f"{hold['released']:,} jobs released, {late}, max |Δm_t| = 0; rounding m_t up to whole nodes costs "
            f"{rounding('hold')} more node-slots for hold (GCP-U: {rounding('gcp-u')}, VFW: {rounding('vfw')}); releasing due jobs "
            f"a slot early (`release_margin_slots = 1`) adds {hold['due']:,} node-slots for due jobs where a margin of 0 adds "
            f"{hold_0['due']:,}, so {margin_cost('hold')} more node-slots run ({hold['run']:,} against {hold_0['run']:,}; "
            f"GCP-U {margin_cost('gcp-u')}, VFW {margin_cost('vfw')})"
        ),
    }


def group_carbon() -> dict[str, str]:
    """Workload A under deploy/carbon-daily.csv at 1, 2, 6 and 12 h (slow: hold+carbon solves an LP per slot)."""
    signal = ["--carbon", str(CARBON_CSV), "--carbon-unit", "gCO2eq/kWh"]
    rows = [
        "| D | follow | hold | gcp-u | vfw | offline | offline, carbon-aware | hold+carbon | kept | hold+carbon, persistence | hold+carbon, perfect forecast |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    hold_carbon_saving, aware_saving = [], []
    for deadline in CARBON_DEADLINES:
        run = cli_json("replay", *signal, "--deadline", deadline, "--policy", "follow,offline,hold,gcp-u,vfw", *PAPER, "--format", "json")
        perfect = cli_json(
            "replay", *signal, "--deadline", deadline, "--policy", "follow,offline,hold", "--forecast", "perfect", *PAPER, "--format", "json"
        )
        persistence = cli_json(
            "replay", *signal, "--deadline", deadline, "--policy", "follow,offline,hold", "--forecast", "persistence", *PAPER, "--format", "json"
        )
        policies = run["policies"]
        follow_g = policies["follow"]["co2_g"]

        def cell(energy_wh: float, co2_g: float, follow_g: float = follow_g) -> str:
            cut = 100 * (1 - co2_g / follow_g)
            return f"{energy_wh / 1000:.1f} / {co2_g / 1000:.2f} / {'0 %' if cut == 0 else pct(cut)}"

        aware_cut, hold_carbon_cut = policies["offline"]["co2_saving_pct"], policies["hold"]["co2_saving_pct"]
        perfect_cut = perfect["policies"]["hold"]["co2_saving_pct"]
        perfect_kept = perfect_cut / perfect["policies"]["offline"]["co2_saving_pct"]
        persistence_cut = persistence["policies"]["hold"]["co2_saving_pct"]
        persistence_kept = persistence_cut / persistence["policies"]["offline"]["co2_saving_pct"]
        cells = [
            deadline.replace("h", " h"),
            cell(policies["follow"]["energy_wh"], follow_g),
            cell(**policies["hold"]["carbon_blind"]),
            cell(policies["gcp-u"]["energy_wh"], policies["gcp-u"]["co2_g"]),
            cell(policies["vfw"]["energy_wh"], policies["vfw"]["co2_g"]),
            cell(**policies["offline"]["carbon_blind"]),
            cell(policies["offline"]["energy_wh"], policies["offline"]["co2_g"]),
            cell(policies["hold"]["energy_wh"], policies["hold"]["co2_g"]),
            f"{hold_carbon_cut / aware_cut:.2f}",
            f"{pct(persistence_cut)} ({persistence_kept:.2f})",
            f"{pct(perfect_cut)} ({perfect_kept:.2f})",
        ]
        rows.append("| " + " | ".join(cells) + " |")
        if deadline == CARBON_DEADLINES[0]:
            first_cuts = (pct(aware_cut), pct(100 * (1 - policies["hold"]["carbon_blind"]["co2_g"] / follow_g)))
        hold_carbon_saving.append(policies["hold"]["saving_pct"])
        aware_saving.append(policies["offline"]["saving_pct"])
    sweep = cli_json("sweep", "--trace", "A", "--deadlines", ",".join(CARBON_DEADLINES), "--policy", "hold", *PAPER, "--format", "json")
    (hold_by_d,) = [savings["hold"] for savings in sweep["by_deadline"].values()]
    hold_saving = [hold_by_d[str(d)] for d in sweep["deadlines"]]
    hours = ", ".join(d.rstrip("h") for d in CARBON_DEADLINES)
    # eq. (2) cost over follow's is 1 - saving; hold+carbon's against hold's at the shortest deadline.
    over_hold = (100 - hold_carbon_saving[0]) / (100 - hold_saving[0]) - 1
    return {
        "carbon-table": "\n".join(rows),
        "carbon-first-cuts": f"the offline LP cuts {first_cuts[0]} against hold's {first_cuts[1]} at {CARBON_DEADLINES[0].replace('h', ' h')}",
        "carbon-over-hold": pct(100 * over_hold, 0),
        "carbon-eq2": (
            f"{', '.join(pct(s) for s in hold_carbon_saving)} at {hours} h against hold's "
            f"{', '.join(pct(s) for s in hold_saving)} (and the aware LP's {min(aware_saving):.1f}–{pct(max(aware_saving))})"
        ),
    }


COMPARE_DEADLINES = ("30m", "2h", "6h", "12h")
COMPARE_TRACES = (
    ("A", "Workload A"),
    ("B", "Workload B"),
    ("weekly-7d", "weekly-7d"),
    ("bursty", "bursty"),
    ("diurnal-bursty-2d", "diurnal-bursty-2d"),
)
"""Traces of the compare tables: the paper's two, and make_traces.py's week (fresh set), bursty day
(first set) and two bursty diurnal days (fresh set)."""


def signed_pct(value: float) -> str:
    """A difference as the README writes it: +20.7 %, −3.2 %."""
    text = pct(value)
    return text if text.startswith("−") or text.startswith("0.0") else "+" + text


def _against(value: float, other: float) -> str:
    return signed_pct(100 * (value / other - 1))


def _compare_cell(run: dict, reference: dict, key: str, digits: int) -> str:
    """A figure with its difference from the reference run (the strongest managed variant): 62.8 (−13.4 %)."""
    value = run[key]
    if run["name"] == reference["name"]:
        return f"{value:,.{digits}f}"
    return f"{value:,.{digits}f} ({_against(value, reference[key])})"


def _references(document: dict) -> dict[float, dict]:
    """compare's reference run per deadline (deadline_s: its row): the strongest managed variant the JSON names."""
    by = {(r["name"], r["deadline_s"]): r for r in document["runs"]}
    return {entry["deadline_s"]: by[entry["name"], entry["deadline_s"]] for entry in document["reference"]["by_deadline"]}


def _compare_trace_files(folder: Path) -> dict[str, str]:
    """--trace arguments of COMPARE_TRACES, make_traces.py's written into ``folder``."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import make_traces

    written = make_traces.traces() | make_traces.fresh_traces()
    paths = {}
    for trace, _ in COMPARE_TRACES:
        if trace in ("A", "B"):
            paths[trace] = trace
        else:
            path = folder / f"{trace}.tsv"
            path.write_text(written[f"{trace}.tsv"], encoding="utf-8")
            paths[trace] = str(path)
    return paths


def group_compare() -> dict[str, str]:
    """``compare`` on Workloads A and B and three of make_traces.py's loads at 30 min, 2 h, 6 h and
    12 h: hold against follow, the strongest managed variant (compare's reference: managed or
    managed-dampened, the least kWh), fixed and the bound (kWh under objective energy, $ under
    objective cost), and every run in detail (slow: every policy through the slot loop, a few minutes)."""
    summary = [
        "| trace | D | hold kWh | vs follow | vs managed* | vs fixed | vs bound | hold $ (objective cost) | vs follow | vs managed* | vs fixed | vs bound | released late / overran |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    detail = [
        "| trace | run | kWh, 30 min | kWh, 2 h | kWh, 6 h | kWh, 12 h | node-hours, 2 h | $, 2 h | finished after deadline (30 min / 2 h / 6 h / 12 h) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    figures: dict[str, str] = {}
    worst_bound = {}
    with tempfile.TemporaryDirectory() as folder:
        paths = _compare_trace_files(Path(folder))
        job_slots = Path(folder) / "job-slots.toml"
        job_slots.write_text('work_model = "job-slots"\n', encoding="utf-8")
        for trace, title in COMPARE_TRACES:
            argv = ("--trace", paths[trace], "-D", ",".join(COMPARE_DEADLINES), "--format", "json")
            document = cli_json("compare", *argv)
            by_cost = cli_json("compare", *argv, "--policy", "hold", "--objective", "cost")
            paper = cli_json("compare", *argv, "--policy", "hold", "--config", str(job_slots))
            by = {(r["name"], r["deadline_s"]): r for r in document["runs"]}
            by |= {("hold, job-slots", r["deadline_s"]): r for r in paper["runs"]}
            cost = {r["deadline_s"]: r for r in by_cost["runs"]}
            deadlines = document["deadline_s"]
            reference = _references(document)
            for d, label in zip(deadlines, COMPARE_DEADLINES):
                hold, follow, fixed, bound = (by[n, d] for n in ("hold", "follow", "fixed", "bound"))
                managed = reference[d]
                cells = [title if d == deadlines[0] else "", label.replace("m", " min").replace("h", " h")]
                cells.append(f"{hold['energy_kwh']:,.1f}")
                cells += [_against(hold["energy_kwh"], r["energy_kwh"]) for r in (follow, managed, fixed, bound)]
                cells.append(f"{cost[d]['cost_usd']:,.2f}")
                cells += [_against(cost[d]["cost_usd"], r["cost_usd"]) for r in (follow, managed, fixed, bound)]
                cells.append(f"{hold['jobs_released_late']:,} / {hold['jobs_finished_after_deadline']:,}")
                summary.append("| " + " | ".join(cells) + " |")
                if d >= 7200:
                    worst_bound[trace, label] = hold["energy_kwh"] / bound["energy_kwh"] - 1
            names = list(dict.fromkeys(r["name"] for r in document["runs"]))
            names.insert(names.index("fixed"), "hold, job-slots")
            for name in names:
                cells = [title if name == names[0] else "", f"**{name}**" if name == "hold" else name]
                for d in deadlines:
                    cells.append(_compare_cell(by[name, d], reference[d], "energy_kwh", 1))
                run = by[name, deadlines[1]]
                cells.append(_compare_cell(run, reference[deadlines[1]], "node_hours", 0))
                cells.append(f"{run['cost_usd']:,.2f}")
                late = [by[name, d]["jobs_finished_after_deadline"] for d in deadlines]
                cells.append("–" if late[0] is None else " / ".join(f"{n:,}" for n in late))
                detail.append("| " + " | ".join(cells) + " |")
            if trace == "A":
                hold, managed, bound = by["hold", deadlines[1]], by["managed", deadlines[1]], by["bound", deadlines[1]]
                strongest = reference[deadlines[1]]
                paper_hold = by["hold, job-slots", deadlines[1]]
                figures["compare-a-hold"] = (
                    f"{hold['energy_kwh']:.1f} kWh and {hold['node_hours']:,.0f} node-hours at 2 h "
                    f"({_against(hold['energy_kwh'], strongest['energy_kwh'])} and {_against(hold['node_hours'], strongest['node_hours'])} "
                    f"against {strongest['name']}'s {strongest['energy_kwh']:.1f} kWh and {strongest['node_hours']:,.0f} node-hours, "
                    f"the strongest managed variant; {_against(hold['energy_kwh'], managed['energy_kwh'])} and "
                    f"{_against(hold['node_hours'], managed['node_hours'])} against plain managed's; "
                    f"{_against(hold['energy_kwh'], bound['energy_kwh'])} kWh above the bound)"
                )
                figures["compare-a-busy"] = (
                    f"{hold['busy_node_hours']:,.1f} node-hours of work, billed as {paper_hold['node_hours']:,.0f} under hold "
                    f"in job-slots, {hold['node_hours']:,.0f} in node-seconds and {managed['node_hours']:,.0f} under managed"
                )
    (trace, label), worst = max(worst_bound.items(), key=lambda item: item[1])
    within = sum(1 for value in worst_bound.values() if value <= 0.03)
    figures["compare-bound"] = (
        f"within 3 % of the bound in {within} of {len(worst_bound)} runs from 2 h up, at worst "
        f"{signed_pct(100 * worst)} ({dict(COMPARE_TRACES)[trace]} at {label.replace('h', ' h')})"
    )
    figures["compare-summary"] = "\n".join(summary)
    figures["compare-table"] = "\n".join(detail)
    return figures


def group_spread() -> dict[str, str]:
    """The spread of hold against managed scaling over the unseen traces, from the document
    ``bench_spread.py --json benchmarks/results/spread.json`` wrote (the grid takes about 50 minutes,
    too long to run here; this renders and checks the README against what it recorded)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_spread

    if not bench_spread.RESULTS.is_file():
        raise FigureError(f"{bench_spread.RESULTS}: missing; run benchmarks/bench_spread.py --json {bench_spread.RESULTS.relative_to(REPO)}")
    return bench_spread.markdown_figures(json.loads(bench_spread.RESULTS.read_text(encoding="utf-8")))


@dataclass(frozen=True)
class Group:
    """Figures computed together: ``cost`` 'cheap' (checked in the default test run) or 'slow'
    (``pytest -m slow``), the function, and the marker names it returns."""

    cost: str
    build: Callable[[], dict[str, str]]
    names: tuple[str, ...]


GROUPS: dict[str, Group] = {
    "results": Group("cheap", group_results, (
        "results-offline", "results-vfw", "gcp-classes-range", "vfw-delta", "hold-table", "hold-ratio", "gcp-u-ratio", "costs-a-d2", "hold-energy",
        "objective-energy", "clipped", "horizon", "long-jobs", "longest-hours", "first-class", "raised", "largest-job",
    )),
    "budget": Group("cheap", group_budget, ("budget-slot-1s", "budget-window", "gcp-rows")),
    "overload": Group("cheap", group_overload, (
        "overload-peak", "overload-totals", "overload-table", "overload-fewest", "overload-one-tenant",
    )),
    "table-iv": Group("cheap", group_table_iv, ("table-iv", "table-iv-none", "table-iv-boot-0", "table-iv-boot-600")),
    "spread": Group("cheap", group_spread, ("spread-range", "spread-table", "spread-worse")),
    "daemon-replay": Group("slow", group_daemon_replay, ("daemon-replay",)),
    "carbon": Group("slow", group_carbon, ("carbon-table", "carbon-eq2", "carbon-first-cuts", "carbon-over-hold")),
    "compare": Group("slow", group_compare, ("compare-summary", "compare-table", "compare-a-hold", "compare-a-busy", "compare-bound")),
}  # fmt: skip


def compute(cost: str = "all") -> dict[str, str]:
    """Every figure of the groups of that cost ('cheap', 'slow' or 'all'), or of the group so named, by marker name.

    Raises FigureError when a group returns other names than it declares."""
    figures: dict[str, str] = {}
    for name, group in GROUPS.items():
        if cost in ("all", group.cost, name):
            built = group.build()
            if set(built) != set(group.names):
                raise FigureError(f"group {name} returned {sorted(built)}, declared {sorted(group.names)}")
            figures.update(built)
    return figures


def readme_figures(text: str, name: str = "README.md") -> dict[str, str]:
    """The text between each pair of markers in the file ``name``, by name (a table's surrounding newlines dropped).

    Raises FigureError for a name marked twice, and for an inline marker at the start of a line:
    Markdown would take that line for a block of raw HTML and show the figure unformatted."""
    found: dict[str, str] = {}
    for match in MARKER.finditer(text):
        if match["name"] in found:
            raise FigureError(f"{name}: figures:{match['name']} is marked twice")
        line_start = text.rfind("\n", 0, match.start()) + 1
        if not match["body"].startswith("\n") and not text[line_start : match.start()].strip():
            line = text.count("\n", 0, match.start()) + 1
            raise FigureError(f"{name}:{line}: figures:{match['name']} starts a line; put a word before it (Markdown reads it as HTML)")
        found[match["name"]] = match["body"].strip("\n") if match["body"].startswith("\n") else match["body"]
    return found


def rewrite(text: str, figures: dict[str, str]) -> str:
    """``text`` with each marked figure in ``figures`` replaced; a table keeps its markers on lines of their own."""

    def replace(match: re.Match) -> str:
        name, body = match["name"], match["body"]
        if name not in figures:
            return match[0]
        new = f"\n{figures[name]}\n" if body.startswith("\n") else figures[name]
        return f"<!-- figures:{name} -->{new}<!-- /figures:{name} -->"

    return MARKER.sub(replace, text)


def check_names(text: str | dict[Path, str], figures: dict[str, str]) -> None:
    """Raises FigureError when a computed figure has no marker in any of the texts (one text, or
    {path: text}), or a marker names no group's figure."""
    texts = text if isinstance(text, dict) else {README: text}
    marked = set().union(*(readme_figures(body, _shown(path)) for path, body in texts.items()))
    missing = sorted(set(figures) - marked)
    where = "README.md" if len(texts) == 1 else "README.md and docs/"
    if missing:
        raise FigureError(f"{where} has no marker for {', '.join(missing)}: add <!-- figures:NAME --> ... <!-- /figures:NAME -->")
    declared = {name for group in GROUPS.values() for name in group.names}
    if marked - declared:
        raise FigureError(f"{where} marks figures no group computes: {', '.join(sorted(marked - declared))}")


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def diff(text: str | dict[Path, str], figures: dict[str, str]) -> str:
    """A unified diff from each text as it is (one text, or {path: text}) to the text with ``figures``
    written; empty when they agree."""
    texts = text if isinstance(text, dict) else {README: text}
    changes = []
    for path, body in texts.items():
        name = _shown(path)
        new = rewrite(body, figures)
        changes.append("".join(difflib.unified_diff(body.splitlines(True), new.splitlines(True), str(name), f"{name} (computed)")))
    return "".join(changes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="rewrite README.md's marked figures")
    action.add_argument("--check", action="store_true", help="exit 1 with a diff when README.md's figures differ")
    parser.add_argument(
        "--group", choices=("all", "cheap", "slow", *GROUPS), default="all", help="which groups to compute: by cost, or one group by name (default: all)"
    )
    parser.add_argument(
        "--readme", type=Path, action="append", default=None,
        help="a file to check or rewrite, repeatable (default: the repository's README.md and docs/*.md)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    paths = args.readme or documents()
    texts = {path: path.read_text(encoding="utf-8") for path in paths}
    try:
        figures = compute(args.group)
        check_names(texts, figures)
    except FigureError as exc:
        print(f"readme_figures: {exc}", file=sys.stderr)
        return 2
    if args.write:
        for path, text in texts.items():
            new = rewrite(text, figures)
            if new != text:
                staged = path.with_name(f".{path.name}.tmp")
                staged.write_text(new, encoding="utf-8")
                staged.replace(path)  # atomic: a reader sees the old file or the new one
        print(f"readme_figures: {len(figures)} figures written to {', '.join(str(p) for p in paths)}", file=sys.stderr)
        return 0
    changes = diff(texts, figures)
    if changes:
        sys.stdout.write(changes)
        print(
            "readme_figures: the documentation disagrees with the figures computed; run benchmarks/readme_figures.py --write", file=sys.stderr
        )
        return 1
    print(f"readme_figures: {len(figures)} figures agree", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
