"""The energy report as text, CSV and a picture: returns strings and bytes, writes nothing.

Shaped like the deferral paper's Table IV (each schedule's energy and metric totals, and the % reduction
against "follow the workload") and Fig. 13 (energy per slot by schedule). A report with a carbon or
price signal gains its CO2 (kgCO2eq) or cost ($) beside the energy, per schedule, per slot and per tenant.
"""

from __future__ import annotations

import csv
import io
import math

import numpy as np

from autoscaler.core import readable
from autoscaler.core.energy.accounting import NO_PROVISIONING, EnergyReport, ReportSignal
from autoscaler.core.readable import duration_text

METRIC_ROWS = (
    ("CPUUtilization", "CPUUtilization (sum)", 1.0),
    ("DiskReadBytes", "DiskReadBytes (GB)", 1e9),
    ("DiskWriteBytes", "DiskWriteBytes (GB)", 1e9),
    ("DiskReadOps", "DiskReadOps (count)", 1.0),
    ("DiskWriteOps", "DiskWriteOps (count)", 1.0),
    ("NetworkIn", "NetworkIn (GB)", 1e9),
    ("NetworkOut", "NetworkOut (GB)", 1e9),
)
"""Table IV's metric rows: (CloudWatch metric, label, divisor to the label's unit)."""


PERCENT_BASE_RATIO = 2.0
"""A reduction against the baseline is given as a percentage while the schedule's figure is at most this
many times the baseline's (-100 % at most): past that the baseline is too small a base (a quiet day's
follow, a few kWh against no provisioning's hundreds) and the percentage (-2,654 %) says little."""


def table_rows(report: EnergyReport) -> tuple[list[str], list[list[str]]]:
    """(header, rows) shaped like Table IV: one column per schedule, each schedule but the baseline and no
    provisioning (the two the others are measured against) followed by its % reduction against the
    baseline, "n/a" where the baseline's figure is 0 or under 1 / PERCENT_BASE_RATIO of the schedule's;
    rows for energy, start-up energy, node-slots, nodes started and, when some schedule was measured,
    each CloudWatch metric's total ("-" where not measured)."""
    header = ["metric"]
    for energy in report.schedules:
        header.append(f"{energy.schedule} ({energy.source})")
        if _has_reduction(report, energy.schedule):
            header.append(f"% reduction vs {report.baseline}")
    baseline = report.get(report.baseline)

    def row(label: str, value) -> list[str]:
        cells = [label]
        base = value(baseline)
        for energy in report.schedules:
            own = value(energy)
            cells.append(_number(own))
            if _has_reduction(report, energy.schedule):
                cells.append(_percent(base, own))
        return cells

    rows = [
        row("Energy (kWh)", lambda e: e.energy_wh / 1000),
        row("of which starting nodes (kWh)", lambda e: e.boot_energy_wh / 1000),
        row("Node-slots", lambda e: e.node_slots),
        row("Nodes started", lambda e: e.switch_ons),
    ]
    if report.signal is not None:
        label, divisor = cost_label(report.signal)
        rows.insert(2, row(label, lambda e: report.cost(e.schedule) / divisor))
    if any(e.metric_totals for e in report.schedules):
        for metric, label, divisor in METRIC_ROWS:
            rows.append(row(label, lambda e, m=metric, d=divisor: e.metric_totals[m] / d if m in e.metric_totals else None))
    return header, rows


def markdown(report: EnergyReport) -> str:
    """The report as Markdown: title, period, the Table IV-shaped table, savings and notes."""
    header, rows = table_rows(report)
    lines = [
        f"# Energy report: {report.title}",
        "",
        f"{_period(report)}; power model {report.model.name} ({report.model.source}).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
        *("| " + " | ".join(cells) + " |" for cells in rows),
        "",
    ]
    names = [e.schedule for e in report.schedules]
    for energy in report.schedules:
        name = energy.schedule
        # The baseline is measured against no provisioning; every other schedule against the baseline and no provisioning.
        if name == NO_PROVISIONING or (name == report.baseline and NO_PROVISIONING not in names):
            continue
        against = NO_PROVISIONING if name == report.baseline else report.baseline
        also = [NO_PROVISIONING] if against != NO_PROVISIONING and NO_PROVISIONING in names else []

        def kwh(schedule: str) -> float:
            return report.get(schedule).energy_wh

        line = f"- {name}: {report.saved_wh(name, against) / 1000:,.2f} kWh saved against {against} ({_against(report, name, [against, *also], kwh, 1000.0, 'kWh', 2)})"
        if report.signal is not None:
            label, divisor = cost_label(report.signal)
            amount = label.rsplit(" (", 1)[1].rstrip(")")
            places = _places(report.signal)
            line += (
                f"; {report.cost_saved(name, against) / divisor:,.{places}f} {amount} saved "
                f"({_against(report, name, [against, *also], report.cost, divisor, amount, places)})"
            )
        lines.append(line + ".")
    if report.signal is not None and report.nodes_by_tenant is not None:
        lines += ["", *tenant_lines(report)]
    notes = list(report.notes)
    if any(cell == "n/a" for cells in rows for cell in cells[1:]):
        notes.append(
            f"% reduction vs {report.baseline} is n/a where {report.baseline}'s figure is 0 or less than "
            f"1/{PERCENT_BASE_RATIO:g} of the schedule's: a percentage of so small a base says little; the figures "
            "beside it say how far apart they are."
        )
    lines += ["", *(f"Note: {note}" for note in notes)]
    return "\n".join(lines).rstrip() + "\n"


def _has_reduction(report: EnergyReport, schedule: str) -> bool:
    """Whether the table gives ``schedule`` a % reduction column: not the baseline, not no provisioning."""
    return schedule not in (report.baseline, NO_PROVISIONING)


def _against(report: EnergyReport, schedule: str, references: list[str], value, divisor: float, unit: str, places: int) -> str:
    """How ``schedule``'s ``value`` (energy_wh or cost) compares with each of ``references``', joined by
    "; ": "3.20 % less" (the first; later ones "... than no provisioning"), or where a percentage of the
    reference would mislead (see PERCENT_BASE_RATIO) "2.93 times follow's 0.09 kWh" or "follow used none"."""
    own = value(schedule)
    parts = []
    for i, reference in enumerate(references):
        base = value(reference)
        if not base > 0:
            parts.append(f"{reference} used none")
        elif own > PERCENT_BASE_RATIO * base:
            parts.append(f"{own / base:,.2f} times {reference}'s {base / divisor:,.{places}f} {unit}")
        else:
            parts.append(_percent_text(100.0 * (base - own) / base) + (f" than {reference}" if i else ""))
    return "; ".join(parts)


def cost_label(signal: ReportSignal) -> tuple[str, float]:
    """(row label, divisor from grams or dollars): ("CO2 (kgCO2eq)", 1000) or ("Cost ($)", 1)."""
    return ("CO2 (kgCO2eq)", 1000.0) if signal.is_carbon else ("Cost ($)", 1.0)


def tenant_lines(report: EnergyReport) -> list[str]:
    """A Markdown table of the run's CO2 or cost by tenant: node-slots held, amount, share."""
    label, divisor = cost_label(report.signal)
    costs = report.tenant_costs()
    total = sum(cost for _, cost in costs.values())
    run = report.schedules[-1].schedule
    lines = [
        f"{label.split(' (')[0]} of {run} by tenant, each slot's share by node-slots held:",
        "",
        f"| tenant | node-slots | {label} | share |",
        "|---|---:|---:|---:|",
    ]
    for tenant, (node_slots, cost) in costs.items():
        share = f"{100 * cost / total:.2f} %" if total > 0 else "-"
        lines.append(f"| {tenant} | {_number(node_slots)} | {cost / divisor:,.{_places(report.signal)}f} | {share} |")
    return lines


def _places(signal: ReportSignal) -> int:
    # kgCO2eq to the gram; dollars to the cent would hide a small cluster's cost.
    return 3 if signal.is_carbon else 4


def slots_csv(report: EnergyReport) -> str:
    """One row per slot: slot, start (UTC ISO-8601 or seconds), then energy_wh and nodes per schedule.

    With a signal, then: the signal's value (column "signal <unit>"), each schedule's "co2_g" (or
    "cost_usd") and, for the daemon's report, each tenant's "tenant <name> co2_g"; a cell is empty
    where the signal has no value."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = ["slot", "start"] + [f"{s.schedule} {column}" for s in report.schedules for column in ("energy_wh", "nodes")]
    signal = report.signal
    columns: list[np.ndarray] = []
    if signal is not None:
        amount = "co2_g" if signal.is_carbon else "cost_usd"
        header.append(f"signal {signal.unit}")
        columns.append(signal.values)
        for energy in report.schedules:
            header.append(f"{energy.schedule} {amount}")
            columns.append(report.slot_cost(energy.schedule))
        if report.nodes_by_tenant is not None:
            split = report.tenant_slot_costs()
            for tenant in report.tenant_costs():
                header.append(f"tenant {tenant} {amount}")
                columns.append(split[tenant][1])
    writer.writerow(header)
    for t in range(report.n_slots):
        cells: list = [t, _time(report.start_s + t * report.slot_s)]
        for energy in report.schedules:
            cells += [f"{energy.slot_energy_wh[t] + 0.0:.6g}", f"{energy.nodes[t] + 0.0:g}"]
        cells += ["" if math.isnan(column[t]) else f"{column[t] + 0.0:.6g}" for column in columns]
        writer.writerow(cells)
    return out.getvalue()


def energy_png(report: EnergyReport) -> bytes:
    """PNG like the paper's Fig. 13: energy per slot (Wh) of each schedule, over the report's slots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    signal = report.signal
    if signal is None:
        fig, ax = plt.subplots(figsize=(11, 4.2), dpi=110)
    else:
        fig, (ax, signal_ax) = plt.subplots(2, 1, figsize=(11, 5.8), dpi=110, sharex=True, gridspec_kw={"height_ratios": [3, 1.2]})
    hours = np.arange(report.n_slots + 1) * report.slot_s / 3600
    for energy in report.schedules:
        values = np.append(energy.slot_energy_wh, energy.slot_energy_wh[-1:])
        label = f"{energy.schedule} ({energy.source}): {energy.energy_wh / 1000:,.2f} kWh"
        ax.step(hours, values, where="post", linewidth=1.0, label=label)
    ax.set_ylabel("energy per slot (Wh)")
    ax.set_title(f"{report.title}: energy per {report.slot_s / 60:g}-minute slot", fontsize=10, loc="left")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    if signal is not None:
        # A slot without a signal is a break in the line (NaN), not a drop to zero.
        signal_ax.step(hours, np.append(signal.values, signal.values[-1:]), where="post", linewidth=1.0, color="tab:green")
        signal_ax.set_ylabel(signal.unit)
        signal_ax.set_title(f"signal: {signal.source}", fontsize=9, loc="left")
        signal_ax.grid(alpha=0.3)
        ax = signal_ax
    ax.set_xlabel("time from the start of the report (h)")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    value = round(value, 2) + 0.0  # no "-0.00"
    return f"{value:,.0f}" if abs(value) >= 1000 or float(value).is_integer() else f"{value:,.2f}"


def _percent(base: float | None, own: float | None) -> str:
    """The % reduction of ``own`` against ``base``; "-" where either is unknown (not measured), "n/a" where
    ``base`` is 0 or ``own`` is over PERCENT_BASE_RATIO times it."""
    if base is None or own is None:
        return "-"
    if not base > 0 or own > PERCENT_BASE_RATIO * base:
        return "n/a"
    return f"{round(100 * (base - own) / base, 2) + 0.0:.2f}"


def _percent_text(value: float) -> str:
    if math.isnan(value):
        return "-"
    value = round(value, 2) + 0.0
    return f"{value:.2f} % less" if value >= 0 else f"{-value:.2f} % more"


def _period(report: EnergyReport) -> str:
    """'290 slots of 5 min, 0 h to 24 h 10 min: the 288-slot window (to 24 h) and 2 slots after it,
    where deferred work runs', or with dates for the daemon's slots."""
    start_s, slot_s, n = report.start_s, report.slot_s, report.n_slots
    text = f"{readable.count_text(n, 'slot')} of {duration_text(slot_s)}, {_time_words(start_s)} to {_time_words(start_s + n * slot_s)}"
    window = report.window_slots
    if window is not None and window < n:
        after = n - window
        text += (
            f": the {window:,}-slot window (to {_time_words(start_s + window * slot_s)}) and "
            f"{readable.count_text(after, 'slot')} after it, where deferred work runs"
        )
    return text


def _time_words(seconds: float) -> str:
    """A report's time in a heading: a UTC date and time, or for a replay the time from the trace's start."""
    if seconds < 946_684_800:
        return "0 h" if seconds == 0 else duration_text(seconds)
    return _time(seconds)


def _time(seconds: float) -> str:
    """UTC time for Unix seconds of this century; a replay's seconds from the trace's start otherwise."""
    if seconds < 946_684_800:  # before 2000: a trace's own clock, not a date
        return f"{seconds / 3600:g} h"
    return readable.utc_text(seconds, layout="text")
