"""VFW(delta) and GCP with per-class deadlines: hand-worked cases and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.classes import assign_deadlines
from autoscaler.core.cost import schedule_cost
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import CostParams, Trace, TraceJob
from autoscaler.core.policies import plan
from autoscaler.core.policies.gcp import class_deadline_curve
from autoscaler.core.policies.vfw import default_delta

PAPER = CostParams()


def test_vfw_needs_delta_strictly_between_zero_and_d():
    with pytest.raises(ConfigError, match="0 < delta < D"):
        plan("vfw", np.array([1.0, 2.0]), 1, PAPER)
    with pytest.raises(ConfigError, match="delta = 3 with D = 3"):
        plan("vfw", np.array([1.0, 2.0]), 3, PAPER, delta=3)
    assert [default_delta(d) for d in (2, 3, 4, 12)] == [1, 1, 2, 6]


def test_vfw_on_a_constant_load_runs_it_as_released():
    # L_t = 4 for 6 slots, D = 2, delta = 1. LOPT at t runs max(due now, what l^delta has
    # released / 3 slots); with a constant load the backlog settles at once and m_t stays
    # 4 until the final slots, where VOPT over [t, T] runs what is left.
    schedule = plan("vfw", np.full(6, 4.0), 2, PAPER)
    assert schedule.assigned.sum() == pytest.approx(24.0)
    assert schedule.capacity.max() <= 4.0 + 1e-9


def test_gcp_classes_hand_worked():
    # One unit with deadline 0 at slot 0 and two units with deadline 2 at slot 0:
    # L_{0,0} = 1, L_{2,0} = 2. GCP-OPT at t = 0 over 3 slots with Y = (1, 1, 3):
    # the majorant from the origin has slope max(1/1, 1/2, 3/3) = 1, so m = 1, 1, 1.
    by_deadline = np.zeros((3, 1))
    by_deadline[0, 0] = 1.0
    by_deadline[2, 0] = 2.0
    schedule = plan("gcp", np.zeros(1), 0, PAPER, load_by_deadline=by_deadline)
    np.testing.assert_allclose(schedule.capacity, [1.0, 1.0, 1.0])
    released, due = class_deadline_curve(by_deadline)
    np.testing.assert_allclose(released, [3.0, 0.0, 0.0])
    np.testing.assert_allclose(due, [1.0, 0.0, 2.0])


loads = st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=40).map(lambda v: np.array(v, float))


@settings(max_examples=80, deadline=None)
@given(load=loads, deadline_slots=st.integers(min_value=2, max_value=12), data=st.data())
def test_vfw_meets_every_deadline_and_finishes_all_work(load, deadline_slots, data):
    delta = data.draw(st.integers(min_value=1, max_value=deadline_slots - 1))
    # plan() raises ScheduleError unless C1, C2, 0 <= x <= m and all work done hold.
    schedule = plan("vfw", load, deadline_slots, PAPER, delta=delta)
    assert schedule.assigned.sum() == pytest.approx(load.sum(), abs=1e-7 * max(1.0, load.sum()))
    offline = plan("offline", load, deadline_slots, PAPER)
    cost = lambda s: schedule_cost(s.capacity, s.assigned, PAPER).total  # noqa: E731
    assert cost(offline) <= cost(schedule) + 1e-5 * max(1.0, cost(schedule))


@settings(max_examples=80, deadline=None)
@given(
    by_deadline=st.integers(min_value=1, max_value=6).flatmap(
        lambda rows: st.lists(
            st.lists(st.integers(min_value=0, max_value=20), min_size=rows, max_size=rows), min_size=1, max_size=25
        )
    )
)
def test_gcp_with_classes_meets_every_deadline(by_deadline):
    matrix = np.array(by_deadline, dtype=float).T  # (nu+1, n_slots)
    schedule = plan("gcp", matrix.sum(axis=0), 0, PAPER, load_by_deadline=matrix)
    assert schedule.assigned.sum() == pytest.approx(matrix.sum(), abs=1e-7 * max(1.0, matrix.sum()))


def _trace(sizes):
    jobs = tuple(TraceJob(f"j{i}", float(i), 1.0, *s) for i, s in enumerate(sizes))
    return Trace(path="t.tsv", jobs=jobs)


def test_deadline_classes_rank_by_job_count_and_raise_to_length():
    # Twelve distinct sizes in three groups far apart: 8 tiny, 3 medium, 1 huge. With
    # three classes k-means separates the groups; the biggest group gets deadline 1.
    sizes = [(1e3 * (i + 1), 0.0, 1e3) for i in range(8)]
    sizes += [(1e11 + i * 1e6, 0.0, 1e3) for i in range(3)]
    sizes += [(1e13, 0.0, 1e3)]
    lengths = np.ones(12, dtype=int)
    lengths[11] = 5
    assignment = assign_deadlines(_trace(sizes), lengths, n_classes=3)
    assert [c.jobs for c in assignment.classes] == [8, 3, 1]
    assert [c.deadline_slots for c in assignment.classes] == [1, 2, 3]
    np.testing.assert_array_equal(assignment.deadline_slots, [1] * 8 + [2] * 3 + [5])
    assert assignment.raised_to_length == 1
