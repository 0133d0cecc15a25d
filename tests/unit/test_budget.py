"""The memory budget: a run's size is estimated from the trace before its curves are built,
and a run over the budget is refused with the figure, before anything large is allocated."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from autoscaler.app.cli import load_workload, main
from autoscaler.core import budget
from autoscaler.core.budget import WorkloadSize, format_bytes, replay_estimate
from autoscaler.core.model import LengthModel


def test_a_replay_over_the_budget_is_refused_before_its_curves_are_built(tmp_path, capsys):
    # 40 jobs of distinct sizes over a day; in 1-second slots over a million-slot window their
    # lengths make 40 distinct deadlines: L_(d,t) alone would be 40 x 1,000,001 x 8 B = 305 MiB,
    # the offline LP about 6 GiB.
    trace = tmp_path / "forty.tsv"
    trace.write_text("".join(f"j{i}\t{2000 * i}\t0\t{(i + 1) * 2**30}\t{(i + 1) * 2**28}\t{2**27}\n" for i in range(40)))
    import sklearn.cluster  # noqa: F401  (imported outside the measurement: tracemalloc slows imports)

    tracemalloc.start()
    try:
        status = main(["replay", "--trace", str(trace), "--slot-s", "1", "--window", "1000000"])
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 2
    message = capsys.readouterr().err
    assert "replay: --window 1000000 makes 1,000,000 slots of 1 s and 40 distinct job deadlines" in message
    assert "offline LP over 1,000,002 slots 5.96 GiB" in message
    assert "L_(d,t): 40 deadlines x 1,000,001 slots 305 MiB" in message
    assert "more than the 2 GiB budget (--memory-budget-mb)" in message
    assert peak_bytes < 20 * 2**20  # refused before any of it was allocated


def test_the_estimate_of_l_dt_is_the_array_built():
    seen: list[WorkloadSize] = []
    workload, _ = load_workload(
        None, slot_s=60.0, window_slots=None, skip_bad_lines=False, length_model=LengthModel(),
        deadline_classes=True, check_size=seen.append,
    )  # fmt: skip
    (size,) = seen
    by_deadline = workload.active_by_deadline
    assert (size.n_slots, size.n_deadlines, size.max_deadline) == (1440, by_deadline.load.shape[0], by_deadline.max_deadline)
    estimate = replay_estimate(size, ["follow", "gcp"], 2)
    (l_dt,) = [need for need in estimate.needs if need.what.startswith("L_(d,t)")]
    # The rows are a view of one (K, n_slots + 1) array: the estimate is its size.
    assert l_dt.bytes == by_deadline.load.base.nbytes
    assert estimate.value_updates["gcp"] == (size.max_deadline + 1) * (1440 + size.max_deadline)


def test_a_load_curve_is_sized_by_its_length(tmp_path, capsys):
    curve = tmp_path / "long.csv"
    curve.write_text("slot,released\n0,1\n299999,1\n")
    assert main(["replay", "--trace", str(curve), "--policy", "offline", "--memory-budget-mb", "1024"]) == 2
    message = capsys.readouterr().err
    assert "the load curve has 300,000 slots" in message and "offline LP over 300,002 slots" in message


def test_long_policies_are_announced():
    size = WorkloadSize(n_slots=20_000, slot_s=300.0)
    assert replay_estimate(size, ["gcp-u"], 10_000).slow_policies() == []
    (note,) = replay_estimate(size, ["gcp-u"], 100_000).slow_policies()
    assert note.startswith("gcp-u makes up to 1.2e+10 value updates")


@pytest.mark.parametrize("count, text", [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (300 * 2**20, "300 MiB"), (2**31, "2 GiB")])
def test_format_bytes(count, text):
    assert format_bytes(count) == text


def test_a_run_that_fits_is_not_over_the_budget():
    estimate = replay_estimate(WorkloadSize(n_slots=288, slot_s=300.0), ["follow", "offline"], 2)
    assert budget.over_budget(estimate, budget.DEFAULT_MEMORY_BUDGET_MB) is None
    assert estimate.total_bytes < 200 * 2**20
    assert np.isclose(estimate.total_bytes, sum(n.bytes for n in estimate.needs))
