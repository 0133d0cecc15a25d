"""What compare.png and replay.png draw, read from their figures (not their pixels): a run keeps its
colour in every panel and hold stands out; the bound is drawn as its total; replay.png's time axis
ends D slots after the window, and a schedule cut there says until when it runs."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import to_hex

from autoscaler.app.cli.trace_inputs import load_workload
from autoscaler.app.compare import BOUND, RunResult
from autoscaler.app.render import COMPARE_OURS, compare_figure, schedule_figure
from autoscaler.core.compare import TwinFigures
from autoscaler.core.model import CostParams, LengthModel
from autoscaler.core.replay import replay

SLOT_S = 300.0


def figures(kwh: float, co2_kg: float | None = None) -> TwinFigures:
    fields = {name: 0.0 for name in TwinFigures.__dataclass_fields__}
    return TwinFigures(**{**fields, "energy_kwh": kwh, "co2_kg": co2_kg})


def run(name: str, d: int, kwh: float, start: float) -> RunResult:
    # The nodes up and the kWh at each slot's end, over 12 slots.
    times = np.arange(12) * SLOT_S
    return RunResult(name, d, figures(kwh), nodes=(times, np.full(12, start)), cumulative_kwh=np.linspace(kwh / 12, kwh, 12))


def lines_by_label(ax) -> dict[str, object]:
    return {line.get_label(): line for line in ax.get_lines()}


def test_compare_png_keeps_a_runs_colour_across_panels_and_draws_hold_on_top_and_the_bound_as_a_level():
    # The two deadlines list the runs in different orders: colours must not follow the order.
    results = {}
    for d, order in ((2, ["hold", "managed", "follow"]), (24, ["follow", "managed", "hold"])):
        for i, name in enumerate(order):
            results[(name, d)] = run(name, d, 100.0 + 10 * i, 3.0 + i)
        results[(BOUND, d)] = RunResult(BOUND, d, figures(90.0))
    fig, plt = compare_figure(results, [2, 24], SLOT_S, with_carbon=False)
    try:
        axes = fig.axes  # row by row: nodes D=2, nodes D=24, kWh D=2, kWh D=24
        colour = {}
        for ax in axes:
            for line in ax.get_lines():
                name = line.get_label().split(" (")[0]
                if name == "bound":
                    continue
                colour.setdefault(name, set()).add(to_hex(line.get_color()))
        assert all(len(seen) == 1 for seen in colour.values()), colour
        assert len({next(iter(seen)) for seen in colour.values()}) == 3  # three runs, three colours
        kwh_lines = lines_by_label(axes[2])
        widths = {label.split(" (")[0]: line.get_linewidth() for label, line in kwh_lines.items()}
        assert widths[COMPARE_OURS] == max(widths.values()) > widths["managed"]
        (bound,) = [line for label, line in kwh_lines.items() if label.startswith("bound")]
        assert bound.get_linestyle() == "--" and list(bound.get_ydata()) == [90.0, 90.0]
        assert "nodes up (billed" in axes[0].get_title()
        assert {label.split(" (")[1] for label in kwh_lines} >= {"100 kWh)", "110 kWh)", "90.0 kWh, total)"}  # one decimal below 100
    finally:
        plt.close(fig)


@pytest.fixture(scope="module")
def workload_a_with_classes():
    workload, _ = load_workload(None, slot_s=SLOT_S, window_slots=None, skip_bad_lines=False, length_model=LengthModel(), deadline_classes=True)
    return workload


def test_replay_png_ends_d_slots_after_the_window_and_says_where_a_schedule_is_cut(workload_a_with_classes):
    workload = workload_a_with_classes
    result = replay(workload, ["follow", "hold", "gcp"], 2, CostParams())
    fig, plt = schedule_figure(result)
    try:
        right_h = (workload.n_slots + 2) * SLOT_S / 3600
        assert fig.axes[-1].get_xlim()[1] == pytest.approx(right_h)
        titles = {ax.get_title(loc="left").split(":")[0]: ax.get_title(loc="left") for ax in fig.axes}
        gcp = result.policies["gcp"].schedule.capacity
        end_h = (np.flatnonzero(gcp > 0)[-1] + 1) * SLOT_S / 3600
        assert end_h > right_h  # the class deadlines run past the window by hours
        assert f"runs to {end_h:,.1f} h, cut at {right_h:,.1f} h" in titles["gcp"]
        assert "runs to" not in titles["hold"] and "runs to" not in titles["follow"]
    finally:
        plt.close(fig)
