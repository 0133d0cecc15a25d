"""Shadow mode in the daily report: a window's figures from the slots the shadow played, as Markdown.

Returns values, writes nothing (as ``energy_report``). A window's figures are the running figures at
the end of the last slot played that ends within it less those at its start (both are from the
shadow's start), so a window counts each slot played once, wherever the report is cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autoscaler.core.readable import utc_text
from autoscaler.core.shadow_books import ShadowFigures, UseFigures

ZERO = UseFigures(0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class ShadowWindow:
    """What the shadow played in [since_s, until_s) (Unix s): the figures of the slots ending in it
    (``figures``: until the last of them; None when none was played), how many slots and steps released."""

    since_s: float
    until_s: float
    figures: ShadowFigures | None
    slots: int
    released: int


def shadow_window(slots: Sequence, since_s: float, until_s: float) -> ShadowWindow:
    """The window [since_s, until_s) of ``slots`` (``ShadowSlot``s in the order played, each with
    running figures from the shadow's start); see the module's docstring."""
    before = [s for s in slots if s.figures.until_s <= since_s]
    within = [s for s in slots if since_s < s.figures.until_s <= until_s]
    if not within:
        return ShadowWindow(since_s, until_s, None, 0, 0)
    start = before[-1].figures if before else None
    end = within[-1].figures
    actual = end.actual.minus(start.actual) if start else end.actual
    shadow = end.shadow.minus(start.shadow) if start else end.shadow
    released = sum(len(s.released) for s in within)
    return ShadowWindow(since_s, until_s, ShadowFigures(end.until_s, actual, shadow), len(within), released)


def markdown(window: ShadowWindow, policy: str, lag_s: float) -> str:
    """The section: a table of the cluster's use and the policy's over the window, the saving (actual -
    policy; negative: the policy would have used more) with its %, and what it covers."""
    period = f"{utc_text(window.since_s, layout='text')} to {utc_text(window.until_s, layout='text')}"
    lines = [f"## Shadow: {policy} beside the cluster's own scaling, {period}", ""]
    figures = window.figures
    if figures is None:
        lines.append(
            f"No slot of the window was played yet: the shadow is {lag_s / 3600:,.1f} h behind the cluster "
            "(it plays a slot once every step created before its end has ended)."
        )
        return "\n".join(lines) + "\n"
    has_co2 = figures.actual.co2_kg is not None and figures.shadow.co2_kg is not None
    head = "| schedule | node-hours | kWh | $ |" + (" kgCO2eq |" if has_co2 else "")
    lines += [head, "|---|---:|---:|---:|" + ("---:|" if has_co2 else "")]

    def row(label: str, use: UseFigures, percents: tuple = ()) -> str:
        cells = [f"{use.node_hours:,.2f}", f"{use.energy_kwh:,.3f}", f"{use.cost_usd:,.2f}"] + ([f"{use.co2_kg:,.3f}"] if has_co2 else [])
        if percents:
            cells = [f"{cell} ({_percent(p)})" for cell, p in zip(cells, percents)]
        return f"| {label} | " + " | ".join(cells) + " |"

    saved = figures.actual.minus(figures.shadow)
    fields = ("node_hours", "energy_kwh", "cost_usd") + (("co2_kg",) if has_co2 else ())
    saved_percents = tuple(None if (p := figures.percent(f)) is None else -p for f in fields)
    lines += [
        row("actual (the cluster's own scaling)", figures.actual),
        row(f"{policy} (shadow)", figures.shadow),
        row(f"saved by {policy}", saved, saved_percents),
        "",
        f"{window.slots:,} slots played, {window.released:,} steps released by {policy}; the last slot ends "
        f"{utc_text(figures.until_s, layout='text')}, and the shadow is {lag_s / 3600:,.1f} h behind the cluster. "
        "The same steps, priced alike: the cluster's nodes as EMR reported them, the policy's on the cluster twin.",
    ]
    return "\n".join(lines) + "\n"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f} %"
