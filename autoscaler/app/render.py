"""Render a replay result as a rich table, CSV text or a PNG (returns values; no file I/O)."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
from rich.table import Table

from autoscaler.core import defaults
from autoscaler.core.energy.signal import utc_text
from autoscaler.core.errors import ReportError
from autoscaler.core.policies import BASELINE, CLASS_DEADLINE_POLICIES
from autoscaler.core.readable import count_text, duration_text, number_text
from autoscaler.core.replay import ReplayResult, to_dict

SUMMARY_COLUMNS = [
    "policy",
    "cost",
    "operating_cost",
    "switching_cost",
    "saving_pct",
    "peak_servers",
    "mean_servers",
    "solve_ms_per_slot",
]


def json_text(document, indent: int | None = None) -> str:
    """The document as JSON text, never with NaN or Infinity (which JSON does not have).

    Raises ReportError naming the first field holding a non-finite number.
    """
    try:
        return json.dumps(document, indent=indent, allow_nan=False)
    except ValueError:
        raise ReportError(
            f"the JSON document holds a number that is not finite at {_non_finite_path(document, '$')}; "
            "nothing was written"
        ) from None


def _non_finite_path(value, path: str) -> str:
    """Where in ``value`` the first NaN or infinity is, as $.policies.follow.cost or $.m[3]."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = _non_finite_path(item, f"{path}.{key}" if isinstance(value, dict) else f"{path}[{key}]")
        if found:
            return found
    return ""


def summary_columns(result: ReplayResult) -> list[str]:
    """:data:`SUMMARY_COLUMNS`, then energy_wh, and with a signal co2_g (or cost_usd) and co2_saving_pct (or cost_saving_pct)."""
    columns = [*SUMMARY_COLUMNS, "energy_wh"]
    if result.signal is not None:
        columns += [result.signal.total_key, result.signal.saving_key]
    return columns


def summary_rows(result: ReplayResult) -> list[dict]:
    """One dict per policy with the columns of :func:`summary_columns`, taken from the JSON document."""
    policies = to_dict(result)["policies"]
    columns = summary_columns(result)
    return [{"policy": name, **{k: p[k] for k in columns[1:]}} for name, p in policies.items()]


def summary_table(result: ReplayResult) -> Table:
    """The replay summary as a rich Table, titled with the trace, D and cost parameters."""
    p = result.params
    w = result.workload
    title = (
        f"{w.source}: {count_text(w.n_slots, 'slot')} of {duration_text(w.slot_s)}, D = {result.deadline_slots}, "
        f"e0 = {p.e0:g}, e1 = {p.e1:g}, beta = {p.beta:g}"
        + (f", M = {number_text(p.max_servers)}" if p.max_servers is not None else "")
    )
    span = next(iter(result.policies.values())).span_slots if result.policies else w.n_slots
    sig = result.signal
    # Every mean is over the longest schedule's slots, so that means compare within the table; a policy with a
    # longer horizon (gcp's class deadlines) lowers follow's mean, and the caption names it.
    longest = max(result.policies, key=lambda name: result.policies[name].schedule.capacity.shape[0], default=None)
    follow = result.policies.get(BASELINE)
    reach = (
        f" (to the end of {longest}'s schedule, the longest: every policy's mean is over these slots)"
        if follow is not None and follow.schedule.capacity.shape[0] < span
        else ""
    )
    caption = (
        f"saving: against follow the workload; m: servers on; peak and mean m over the {count_text(span, 'slot')} of the "
        f"window and after it, where deferred work runs{reach}; kWh: modelled ({result.power_model}, {result.boot_s:g} s boot)"
    )
    if sig is not None:
        caption += (
            f"; signal {sig.source} ({sig.unit}) from {utc_text(sig.start_s)}, forecast: {sig.forecast_kind}; "
            f"{'CO2' if sig.is_carbon else 'cost'} cut: against follow; carbon-aware: "
            + (", ".join(f"{n} ({r.schedule.policy})" for n, r in result.policies.items() if r.carbon_aware) or "none")
        )
    table = Table(title=title, caption=caption)
    columns = [
        ("policy", "left"),
        ("cost", "right"),
        ("operating", "right"),
        ("switching", "right"),
        ("saving", "right"),
        ("peak m", "right"),
        ("mean m", "right"),
        ("ms/slot", "right"),
        ("kWh", "right"),
    ]
    if sig is not None:
        columns += [("kgCO2eq", "right"), ("CO2 cut", "right")] if sig.is_carbon else [("$", "right"), ("cost cut", "right")]
    for column, justify in columns:
        table.add_column(column, justify=justify, no_wrap=True)
    for row in summary_rows(result):
        cells = [
            row["policy"],
            f"{row['cost']:,.1f}",
            f"{row['operating_cost']:,.1f}",
            f"{row['switching_cost']:,.1f}",
            f"{row['saving_pct']:.2f} %",
            f"{row['peak_servers']:.2f}",
            f"{row['mean_servers']:.2f}",
            f"{row['solve_ms_per_slot']:.4f}",
            f"{row['energy_wh'] / 1000:,.2f}",
        ]
        if sig is not None:
            total = row[sig.total_key]
            cells += [f"{total / 1000:,.3f}" if sig.is_carbon else f"{total:,.2f}", f"{row[sig.saving_key]:.2f} %"]
        table.add_row(*cells)
    return table


def risk_table(result: ReplayResult) -> Table | None:
    """Each policy's risk against follow by day under the replay's signal
    (:func:`autoscaler.core.replay.risks_against_follow`), or None without one."""
    from autoscaler.core.carbon_risk import WORST_SHARE
    from autoscaler.core.replay import risks_against_follow

    risks = risks_against_follow(result)
    if not risks:
        return None
    what = "CO2" if result.signal.is_carbon else "cost"
    table = Table(
        title=f"{what} risk against follow (no deferral), by day of the replay (D = {count_text(result.deadline_slots, 'slot')})",
        caption=f"expected cut: mean over days of 1 - {what}/{what}(follow); worst-day regret: the most a day was above follow's; "
        f"worst 10 %: the mean cut over the worst ceil({WORST_SHARE:.0%} of the days) by cut; a day follow spent nothing on joins the day before",
    )
    for column in ("policy", "days", "expected cut", "worst-day regret", "days above follow", "worst 10 % cut"):
        table.add_column(column, justify="left" if column == "policy" else "right", no_wrap=True)
    for name, risk in risks.items():
        table.add_row(name, *risk_cells(risk))
    return table


def risk_cells(risk) -> tuple[str, ...]:
    """A :class:`~autoscaler.core.carbon_risk.Risk` as table cells: days, expected cut, worst-day
    regret, days above follow ("1 of 12"), the worst 10 % of days' cut."""
    return (
        str(risk.days), f"{risk.expected_cut:+.1%}", f"{risk.worst_day_regret:+.1%}", f"{risk.days_above_follow} of {risk.days}",
        f"{risk.worst_tenth_cut:+.1%}",
    )  # fmt: skip


def class_table(assignment) -> Table:
    """The k-means deadline classes, shaped like the deferral paper's Table II."""
    table = Table(title="deadline classes (k-means on S, S', S''; most jobs get the shortest deadline)")
    for column in ["class", "jobs", "% jobs", "S (MB)", "S' (MB)", "S'' (MB)", "deadline (slots)"]:
        table.add_column(column, justify="right", no_wrap=True)
    for i, c in enumerate(assignment.classes, start=1):
        table.add_row(
            str(i),
            str(c.jobs),
            f"{c.share_pct:.2f}",
            f"{c.mean_map_input_mb:.2f}",
            f"{c.mean_shuffle_mb:.2f}",
            f"{c.mean_reduce_output_mb:.2f}",
            str(c.deadline_slots),
        )
    raised = assignment.raised_to_length
    its = "its" if raised == 1 else "their"
    table.caption = f"{count_text(raised, 'job')} had {its} deadline raised to {its} length"
    return table


def workload_summary(result: ReplayResult) -> str:
    """One paragraph on what the reader and the curves did to the input."""
    w = result.workload
    parts = [count_text(w.n_jobs, "job") if w.n_jobs else "load curve"]
    parts.append(f"sum of L_t {float(w.active.sum()):,.6g} server-slots, peak {number_text(float(w.active.max(initial=0)))}")
    if w.jobs_after_window:
        parts.append(f"{count_text(w.jobs_after_window, 'job')} submitted after the window left out")
    if w.clipped_jobs:
        parts.append(f"{count_text(w.clipped_jobs, 'job')} ran past the window: {count_text(w.clipped_job_slots, 'job-slot')} clipped")
    if w.skipped_lines:
        parts.append(f"{count_text(w.skipped_lines, 'bad line')} skipped")
    if w.out_of_order_lines:
        parts.append(f"{count_text(w.out_of_order_lines, 'line')} out of submit-time order (sorted)")
    return "; ".join(parts)


def summary_csv(result: ReplayResult) -> str:
    """The summary table as CSV text with a header row."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=summary_columns(result), lineterminator="\n")
    writer.writeheader()
    writer.writerows(summary_rows(result))
    return out.getvalue()


def slots_csv(result: ReplayResult) -> str:
    """Per-slot CSV: slot, released jobs, L_t, then m_t and x_t of each policy; with a signal, a last
    column ``signal`` (its value in the slot, in the JSON's signal.unit)."""
    horizon = max(r.schedule.capacity.shape[0] for r in result.policies.values())
    w = result.workload
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = ["slot", "released_jobs", "load"]
    for name in result.policies:
        header += [f"m_{name}", f"x_{name}"]
    signal = result.signal.actual(horizon) if result.signal is not None else None
    if signal is not None:
        header.append("signal")
    writer.writerow(header)
    for t in range(horizon):
        row = [t, _at(w.released, t), _at(w.active, t)]
        for r in result.policies.values():
            row += [_at(r.schedule.capacity, t), _at(r.schedule.assigned, t)]
        if signal is not None:
            row.append(_at(signal, t))
        writer.writerow(row)
    return out.getvalue()


def schedule_png(result: ReplayResult) -> bytes:
    """PNG like the deferral paper's Fig. 3: one panel per policy, L_t shaded and that policy's m_t over it.

    The time axis ends D slots after the window (every job's deadline under a uniform D); a
    schedule that runs on past it (gcp's class deadlines can reach days) is cut there, and its
    panel's title says until when it runs."""
    fig, plt = schedule_figure(result)
    return _png(fig, plt)


def schedule_figure(result: ReplayResult):
    """replay.png's figure and pyplot (see :func:`schedule_png`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = result.workload
    n = len(result.policies)
    sig = result.signal
    panels = n + (sig is not None)
    fig, axes = plt.subplots(panels, 1, figsize=(12, 1.9 * panels + 0.8), dpi=110, sharex=True, squeeze=False)
    # Each slot is drawn from its start to its end: n values need n + 1 edges.
    hours = np.arange(w.n_slots + 1) * w.slot_s / 3600
    load = np.append(w.active, w.active[-1:])
    right_h = (w.n_slots + result.deadline_slots) * w.slot_s / 3600
    for ax, (name, r), colour in zip(axes[:n, 0], result.policies.items(), plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        m = r.schedule.capacity
        t = np.arange(m.shape[0] + 1) * w.slot_s / 3600
        ax.fill_between(hours, load, step="post", color="0.85", label="L_t (active jobs)")
        label = name if r.schedule.policy == name else f"{name} ({r.schedule.policy})"
        ax.step(t, np.append(m, m[-1:]), where="post", linewidth=1.0, color=colour, label=f"m_t {label}")
        title = f"{label}: cost {r.cost.total:,.0f}, {r.saving_pct:.1f} % saved"
        if sig is not None:
            total = f"{r.signal_total / 1000:,.1f} kgCO2eq" if sig.is_carbon else f"${r.signal_total:,.2f}"
            title += f"; {r.energy.energy_wh / 1000:,.1f} kWh, {total}, {r.signal_saving_pct:.1f} % {'CO2' if sig.is_carbon else 'cost'} cut"
        running = np.flatnonzero(m > 0)
        end_h = (running[-1] + 1) * w.slot_s / 3600 if running.size else 0.0
        if end_h > right_h:
            title += f"; runs to {end_h:,.1f} h, cut at {right_h:,.1f} h"
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_ylabel("servers")
        ax.grid(alpha=0.3)
        ax.axvline(w.n_slots * w.slot_s / 3600, color="0.5", linewidth=0.6, linestyle=":")
    for ax in axes[1:n, 0]:
        ax.sharey(axes[0, 0])  # the policies' panels on one scale; the signal's panel on its own
    if sig is not None:
        span = max(r.schedule.capacity.shape[0] for r in result.policies.values())
        values = sig.actual(span)
        ax = axes[n, 0]
        ax.step(np.arange(span + 1) * w.slot_s / 3600, np.append(values, values[-1:]), where="post", linewidth=1.0, color="0.2")
        ax.set_ylabel(sig.unit)
        ax.set_title(f"signal: {sig.source} from {utc_text(sig.start_s)} (forecast: {sig.forecast_kind})", fontsize=9, loc="left")
        ax.grid(alpha=0.3)
        ax.axvline(w.n_slots * w.slot_s / 3600, color="0.5", linewidth=0.6, linestyle=":")
    axes[0, 0].legend(loc="upper right", fontsize=8, frameon=False)
    axes[-1, 0].set_xlim(0.0, right_h)
    axes[-1, 0].set_xlabel("time (h); dotted: end of the window")
    classes = [name for name in result.policies if name in CLASS_DEADLINE_POLICIES]
    deadline = f"D = {count_text(result.deadline_slots, 'slot')}" + (f" ({', '.join(classes)}: class deadlines)" if classes else "")
    fig.suptitle(f"{w.source}: capacity by policy, {deadline}", fontsize=10)
    fig.tight_layout()
    return fig, plt



def _at(values: np.ndarray, t: int) -> float:
    return round(float(values[t]), 9) + 0.0 if t < values.shape[0] else 0.0


def sweep_table(result) -> Table:
    """Savings against follow by trace and D, one column per policy (paper: deferral, Fig. 9)."""
    table = Table(title="saving against follow the workload (%)", caption="gcp: k-means class deadlines, one figure per trace")
    table.add_column("trace", no_wrap=True)
    table.add_column("D", justify="right")
    for name in result.policies:
        table.add_column(name, justify="right")
    for trace, by_policy in result.by_deadline.items():
        for deadline in result.deadlines:
            cells = [f"{by_policy[n][deadline]:.2f}" if deadline in by_policy.get(n, {}) else "-" for n in result.policies]
            table.add_row(trace, str(deadline), *cells)
        if trace in result.gcp_classes:
            table.add_row(trace, "classes", *(["-"] * (len(result.policies) - 1)), f"gcp {result.gcp_classes[trace]:.2f}")
    return table


def sweep_signal_table(result) -> Table:
    """The cut in follow's emissions (or dollars) by trace and D, one column per policy; the
    carbon-aware policies (offline, hold) also with their carbon-blind schedule's cut, to show what
    awareness bought. Only for a sweep with a signal."""
    carbon = result.signal_unit == "gCO2eq/kWh"
    what = "CO2" if carbon else "cost"
    table = Table(
        title=f"{what} cut against follow the workload (%), under the signal",
        caption="offline and hold: carbon-aware (offline LP with the slot cost, hold+carbon); blind: their carbon-blind schedules; "
        "gcp-u and vfw have no carbon-aware variant",
    )
    table.add_column("trace", no_wrap=True)
    table.add_column("D", justify="right")
    columns = []
    for name in result.policies:
        columns.append((name, result.signal_cut_by_deadline))
        if any(name in by_policy for by_policy in result.blind_cut_by_deadline.values()):
            columns.append((f"{name} blind", result.blind_cut_by_deadline))
    for label, _ in columns:
        table.add_column(label, justify="right")
    for trace in result.by_deadline:
        for deadline in result.deadlines:
            cells = []
            for label, source in columns:
                by_d = source.get(trace, {}).get(label.removesuffix(" blind"), {})
                cells.append(f"{by_d[deadline]:.2f}" if deadline in by_d else "-")
            table.add_row(trace, str(deadline), *cells)
    return table


def sweep_pngs(result) -> tuple[bytes, bytes]:
    """(Fig. 9 analogue: saving against D, a line per policy, a panel per trace;
    Fig. 11 analogue: VFW saving against delta at D = result.delta_deadline)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = list(result.by_deadline)
    figures = []
    fig, axes = plt.subplots(1, len(traces), figsize=(5.5 * len(traces), 4), dpi=110, squeeze=False)
    for ax, trace in zip(axes[0], traces):
        for name, by_d in result.by_deadline[trace].items():
            ds = sorted(by_d)
            ax.plot(ds, [by_d[d] for d in ds], marker="o", markersize=3, label=name)
        if trace in result.gcp_classes:
            ax.axhline(result.gcp_classes[trace], linestyle="--", color="0.4", label="gcp (class deadlines)")
        ax.set_title(trace, fontsize=9)
        ax.set_xlabel("deadline D (slots)")
        ax.set_ylabel("saving vs follow (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    figures.append(_png(fig, plt))
    fig, axes = plt.subplots(1, len(traces), figsize=(5.5 * len(traces), 4), dpi=110, squeeze=False)
    for ax, trace in zip(axes[0], traces):
        by_delta = result.vfw_by_delta[trace]
        ax.plot(list(by_delta), list(by_delta.values()), marker="o", markersize=3)
        ax.set_title(f"{trace}: VFW, D = {result.delta_deadline}", fontsize=9)
        ax.set_xlabel("delta (slots)")
        ax.set_ylabel("saving vs follow (%)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    figures.append(_png(fig, plt))
    return figures[0], figures[1]


def ratios_png(ratios: list[dict], n: int, source: str) -> bytes:
    """PNG of dynamic DRF's competitive ratios against step k, capped at k/n and at full capacity."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = [r["k"] for r in ratios]
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    for name, label, style in (
        ("maxmin_capped", "maxmin, cap k/n", "-"),
        ("maxsum_capped", "maxsum, cap k/n", "-"),
        ("maxmin_full", "maxmin, full capacity", "--"),
        ("maxsum_full", "maxsum, full capacity", "--"),
    ):
        ax.plot(k, [r[name] for r in ratios], style, marker="." if len(k) < 60 else None, label=label)
    ax.set_xlabel("step k (agents arrived)")
    ax.set_ylabel("dynamic DRF / offline optimum")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(f"{source}: competitive ratios, n = {n}", fontsize=10)
    fig.tight_layout()
    return _png(fig, plt)


COMPARE_OURS = defaults.POLICY
"""The run drawn on top, thicker, in every panel: the daemon's default policy."""

COMPARE_PLOTTED = (COMPARE_OURS, "managed", "managed-dampened", "fixed")
"""The runs whose nodes up are drawn (every run that finished has its cumulative kWh drawn)."""


def compare_png(results: dict, deadlines: list[int], slot_s: float, with_carbon: bool) -> bytes:
    """compare.png (see :func:`compare_figure`) as PNG bytes."""
    fig, plt = compare_figure(results, deadlines, slot_s, with_carbon)
    return _png(fig, plt)


def compare_figure(results: dict, deadlines: list[int], slot_s: float, with_carbon: bool):
    """compare.png's figure and pyplot: one column per deadline; the nodes up over time (billed,
    whatever their state) of hold, managed, managed-dampened and fixed, and every run's cumulative
    kWh (and kgCO2eq with a carbon signal). ``results``: {(name, D): autoscaler.app.compare.RunResult}.

    A run keeps one colour in every panel; hold is drawn on top and thicker. The bound has no
    curve (the LP gives totals, not a path): its total is a dashed level in the kWh (and kgCO2eq)
    panel, to read against where each curve ends. Runs that did not finish are not drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from autoscaler.app.compare import BOUND

    names = list(dict.fromkeys(name for name, _ in results))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colours = {name: palette[i % len(palette)] for i, name in enumerate(n for n in names if n != BOUND)}
    panels = 3 if with_carbon else 2
    fig, axes = plt.subplots(panels, len(deadlines), figsize=(6 * len(deadlines), 3.5 * panels), squeeze=False, sharex="col")
    for column, d in enumerate(deadlines):
        nodes_ax, kwh_ax = axes[0][column], axes[1][column]
        for (name, deadline), result in results.items():
            if deadline != d or result.figures is None:
                continue
            if name == BOUND:
                _bound_level(kwh_ax, result.figures.energy_kwh, f"bound ({_total(result.figures.energy_kwh)} kWh, total)")
                if with_carbon and result.figures.co2_kg is not None:
                    _bound_level(axes[2][column], result.figures.co2_kg, f"bound ({_total(result.figures.co2_kg)} kg, total)")
                continue
            if result.nodes is None:
                continue
            style = {"color": colours[name], "linewidth": 2.0 if name == COMPARE_OURS else 0.9, "zorder": 3 if name == COMPARE_OURS else 2}
            if name in COMPARE_PLOTTED:
                times, nodes = result.nodes
                nodes_ax.step(times / 3600.0, nodes, where="post", label=name, **style)
            hours = slot_s * np.arange(1, len(result.cumulative_kwh) + 1) / 3600.0
            kwh_ax.plot(hours, result.cumulative_kwh, label=f"{name} ({_total(result.figures.energy_kwh)} kWh)", **style)
            if with_carbon and result.cumulative_co2_kg is not None:
                axes[2][column].plot(hours, result.cumulative_co2_kg, label=f"{name} ({_total(result.figures.co2_kg)} kg)", **style)
        nodes_ax.set_title(f"D = {d * slot_s / 3600:g} h: nodes up (billed: booting, idle or busy)")
        nodes_ax.set_ylabel("nodes")
        kwh_ax.set_ylabel("cumulative kWh")
        if with_carbon:
            axes[2][column].set_ylabel("cumulative kgCO2eq")
        axes[-1][column].set_xlabel("hours from the trace's start")
        for ax in axes[:, column]:
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    return fig, plt


def _total(value: float) -> str:
    """A legend's total: whole units from 100 up, one decimal below (a short window's 2.3 kWh, not 2)."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def _bound_level(ax, total: float, label: str) -> None:
    ax.axhline(total, color="0.3", linestyle="--", linewidth=0.9, label=label, zorder=1)


def _png(fig, plt) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()
