"""GCP on L_{d,t} stored by the deadlines that have work: the same schedule as the dense
matrix, in memory that grows with the deadlines jobs have, not with the longest one."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.app.cli import load_workload
from autoscaler.core.model import CostParams, LengthModel, LoadByDeadline, Trace, TraceJob
from autoscaler.core.policies import plan
from autoscaler.core.policies.gcp import GcpState, gcp_step, plan_uniform
from autoscaler.core.workload import deadline_rows, workload_from_trace

PAPER = CostParams()


def reference_gcp(matrix: np.ndarray) -> np.ndarray:
    """Algorithm 2 written out on the dense (nu+1, n_slots) matrix, entry by entry: EDF with
    m_{t-1}, shift, arrivals, then m_t from the whole least concave majorant (monotone chain)."""
    nu, n_slots = matrix.shape[0] - 1, matrix.shape[1]
    y = np.zeros(nu + 1)
    previous = 0.0
    capacity = []
    for t in range(n_slots + nu):
        spare = previous
        for i in range(nu + 1):
            if spare <= 0:
                break
            done = min(spare, y[i])
            y[i] -= done
            spare -= done
        assert y[0] <= 1e-9 * max(1.0, y.sum() + previous)
        y = np.concatenate([y[1:], [0.0]]) + (matrix[:, t] if t < n_slots else 0.0)
        points = np.concatenate([[0.0], np.cumsum(y)])
        hull: list[int] = []
        for k in range(points.shape[0]):
            while len(hull) >= 2 and (points[hull[-1]] - points[hull[-2]]) * (k - hull[-2]) <= (points[k] - points[hull[-2]]) * (hull[-1] - hull[-2]):
                hull.pop()
            hull.append(k)
        first = (points[hull[1]] - points[0]) / hull[1] if points[-1] > 0 else 0.0
        previous = max(first, y[0])
        capacity.append(previous)
    return np.array(capacity)


def test_sparse_gcp_gives_the_dense_schedule_on_workload_a():
    workload, _ = load_workload(None, slot_s=300.0, window_slots=None, skip_bad_lines=False, length_model=LengthModel(), deadline_classes=True)
    by_deadline = workload.active_by_deadline
    assert isinstance(by_deadline, LoadByDeadline)
    # Workload A: 72 distinct deadlines (the 10 classes and the lengths some were raised to) of nu + 1 = 247.
    assert by_deadline.load.shape == (72, 288) and by_deadline.max_deadline == 246
    sparse = plan("gcp", workload.active, 0, PAPER, load_by_deadline=by_deadline).capacity
    np.testing.assert_allclose(sparse, reference_gcp(by_deadline.dense()), rtol=1e-12, atol=1e-12)
    dense = plan("gcp", workload.active, 0, PAPER, load_by_deadline=by_deadline.dense()).capacity
    np.testing.assert_array_equal(sparse, dense)


matrices = st.integers(min_value=1, max_value=8).flatmap(
    lambda rows: st.lists(
        st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 3.0, 7.25]), min_size=rows, max_size=rows), min_size=1, max_size=20
    )
)


@settings(max_examples=150, deadline=None)
@given(rows=matrices)
def test_sparse_gcp_gives_the_dense_schedule_on_small_random_cases(rows):
    matrix = np.array(rows, dtype=float).T  # (nu+1, n_slots), many rows all zero
    by_deadline = LoadByDeadline.from_dense(matrix)
    assert by_deadline.load.shape[0] == int(matrix[:-1].any(axis=1).sum()) + 1
    np.testing.assert_array_equal(by_deadline.dense(), matrix)
    schedule = plan("gcp", matrix.sum(axis=0), 0, PAPER, load_by_deadline=by_deadline)
    np.testing.assert_allclose(schedule.capacity, reference_gcp(matrix), rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(load=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=30), deadline_slots=st.integers(0, 12))
def test_gcp_u_and_the_daemon_step_give_the_dense_schedule(load, deadline_slots):
    load = np.array(load, dtype=float)
    matrix = np.zeros((deadline_slots + 1, load.shape[0]))
    matrix[deadline_slots] = load
    expected = reference_gcp(matrix)
    np.testing.assert_allclose(plan_uniform(load, deadline_slots, PAPER).capacity, expected, rtol=1e-12, atol=1e-12)
    # The controller's path: one gcp_step a slot on the dense state tuple.
    state = GcpState.empty(deadline_slots)
    stepped = []
    for t in range(expected.shape[0]):
        arrivals = matrix[:, t] if t < load.shape[0] else np.zeros(deadline_slots + 1)
        m_t, state = gcp_step(state, arrivals, PAPER)
        stepped.append(m_t)
    np.testing.assert_allclose(stepped, expected, rtol=1e-12, atol=1e-12)


def _long_job_trace() -> Trace:
    # Ten short jobs and one whose deadline is 5,000 slots: the dense L_{d,t} would be 5,001 rows.
    jobs = [TraceJob(f"short{i}", 300.0 * i, 0.0, 1e6, 1e6, 1e6) for i in range(10)]
    jobs.append(TraceJob("long", 0.0, 0.0, 1e6, 1e6, 1e6))
    return Trace(path="long.tsv", jobs=tuple(jobs))


def test_l_dt_has_one_row_per_distinct_deadline_not_per_slot_up_to_nu():
    trace = _long_job_trace()
    deadlines = np.array([1] * 5 + [2] * 5 + [5000])
    assert deadline_rows(trace, 300.0, 6000, deadlines) == (3, 5000)
    workload = workload_from_trace(trace, slot_s=300.0, window_slots=6000, deadline_slots=deadlines)
    by_deadline = workload.active_by_deadline
    np.testing.assert_array_equal(by_deadline.deadlines, [1, 2, 5000])
    assert by_deadline.load.shape == (3, 6000)
    np.testing.assert_array_equal(by_deadline.load.sum(axis=0), workload.active)


def test_gcp_runs_in_memory_of_its_rows_not_of_nu_times_the_window():
    trace = _long_job_trace()
    deadlines = np.array([1] * 5 + [2] * 5 + [5000])
    tracemalloc.start()
    try:
        workload = workload_from_trace(trace, slot_s=300.0, window_slots=6000, deadline_slots=deadlines)
        schedule = plan("gcp", workload.active, 0, PAPER, load_by_deadline=workload.active_by_deadline)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert schedule.assigned.sum() == pytest.approx(workload.active.sum())
    # Dense, L_{d,t} alone is 5,001 x 6,000 x 8 B = 240 MB; here: 3 rows and a few horizon-long arrays.
    assert peak_bytes < 8 * 2**20


def test_gcp_u_with_a_long_deadline_allocates_no_d_by_slots_matrix():
    load = np.ones(3000)
    tracemalloc.start()
    try:
        schedule = plan_uniform(load, 3000, PAPER)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert schedule.capacity.sum() == pytest.approx(3000.0)
    assert peak_bytes < 2 * 2**20  # (D + 1) x n_slots would be 72 MB
