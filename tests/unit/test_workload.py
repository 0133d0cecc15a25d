"""SWIM reader, job-length estimate (paper: deferral, §V-A) and workload curves (§VI-A)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.errors import ConfigError, TraceError
from autoscaler.core.model import MIB, LengthModel, Trace, TraceJob
from autoscaler.core.workload import (
    estimate_length_s,
    read_load_curve,
    read_swim,
    workload_from_curve,
    workload_from_trace,
)

WORKLOAD_A = Path("/work/shared/traces/FB-2009_samples_24_times_1hr_0.tsv")

GOOD = "job0\t49\t49\t740773\t2339561\t627471"


def write(tmp_path: Path, text: str, name: str = "trace.tsv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- read_swim -------------------------------------------------------------------------------


def test_read_swim_parses_columns_and_ignores_blank_lines(tmp_path):
    path = write(tmp_path, f"{GOOD}\n\n   \njob1\t101\t52\t736346\t1700537\t432269\n")
    trace = read_swim(path)
    assert trace.path == str(path)
    assert trace.jobs == (
        TraceJob("job0", 49.0, 49.0, 740773.0, 2339561.0, 627471.0),
        TraceJob("job1", 101.0, 52.0, 736346.0, 1700537.0, 432269.0),
    )
    assert (trace.skipped_lines, trace.out_of_order_lines) == (0, 0)


@pytest.mark.parametrize(
    ("bad_line", "expected"),
    [
        ("job1\t60\t11\t1\t2", "expected 6 tab-separated columns"),
        ("job1\t60\t11\t1\t2\t3\t4", "expected 6 columns like the first job"),
        ("\t60\t11\t1\t2\t3", "column 1 (job id)"),
        ("job0\t60\t11\t1\t2\t3", "column 1 (job id): 'job0' already used on line 1"),
        ("job1\tsoon\t11\t1\t2\t3", "column 2 (submit time s): expected a finite number >= 0, got 'soon'"),
        ("job1\t-1\t11\t1\t2\t3", "column 2 (submit time s)"),
        ("job1\t60\t-11\t1\t2\t3", "column 3 (inter-job gap s)"),
        ("job1\t60\t11\tabc\t2\t3", "column 4 (map input bytes): expected a finite number >= 0, got 'abc'"),
        ("job1\t60\t11\t1\tnan\t3", "column 5 (shuffle bytes): expected a finite number >= 0, got 'nan'"),
        ("job1\t60\t11\t1\t2\tinf", "column 6 (reduce output bytes)"),
        ("job1\t60\t11\t1\t-2\t3", "column 5 (shuffle bytes)"),
    ],
)
def test_bad_line_names_line_and_column(tmp_path, bad_line, expected):
    # Line 2 is blank, so the bad line is line 3: blank lines still count in the numbering.
    path = write(tmp_path, f"{GOOD}\n\n{bad_line}\njob9\t70\t10\t1\t2\t3\n")
    with pytest.raises(TraceError) as caught:
        read_swim(path)
    assert caught.value.line == 3
    assert caught.value.path == str(path)
    assert expected in str(caught.value)
    assert str(caught.value).startswith(f"{path}:3: ")


def test_skip_mode_counts_bad_lines_and_keeps_first_duplicate(tmp_path):
    text = "\n".join(
        [
            GOOD,
            "job1\t60\t11\tabc\t2\t3",  # non-numeric
            "job0\t61\t1\t1\t2\t3",  # duplicate id: the first job0 stays
            "job2\t62\t1\t1\t2",  # too few columns
            "job3\t63\t1\t1\t2\t3",
            "job4\t64\t1\t1\t2\t3",
            "job5\t65\t1\t1\t2\t3",
        ]
    )
    trace = read_swim(write(tmp_path, text), skip_bad_lines=True)
    assert [job.job_id for job in trace.jobs] == ["job0", "job3", "job4", "job5"]
    assert trace.jobs[0].submit_s == 49.0
    assert trace.skipped_lines == 3


def test_out_of_order_lines_are_sorted_stably_and_counted(tmp_path):
    text = "\n".join(
        [
            "a\t100\t0\t1\t1\t1",
            "b\t50\t0\t1\t1\t1",  # earlier than a: out of order
            "c\t50\t0\t1\t1\t1",  # equal to b: in order
            "d\t200\t0\t1\t1\t1",
            "e\t10\t0\t1\t1\t1",  # out of order
        ]
    )
    trace = read_swim(write(tmp_path, text))
    assert [job.job_id for job in trace.jobs] == ["e", "b", "c", "a", "d"]
    assert trace.out_of_order_lines == 2


def test_file_level_errors_name_the_file(tmp_path):
    missing = tmp_path / "missing.tsv"
    with pytest.raises(TraceError, match="no such file") as caught:
        read_swim(missing)
    assert caught.value.path == str(missing) and caught.value.line is None

    with pytest.raises(TraceError, match="no jobs"):
        read_swim(write(tmp_path, "\n\n"))
    with pytest.raises(TraceError, match="no jobs"):
        read_swim(write(tmp_path, "x\ty\n"), skip_bad_lines=True)

    latin1 = tmp_path / "latin1.tsv"
    latin1.write_bytes(f"{GOOD}\n".encode() + "jöb1\t60\t1\t1\t1\t1\n".encode("latin-1"))
    with pytest.raises(TraceError, match="not UTF-8") as caught:
        read_swim(latin1)
    assert caught.value.line == 2

    with pytest.raises(TraceError, match="cannot read"):
        read_swim(tmp_path)  # a directory


def test_workload_a_file_loads():
    trace = read_swim(WORKLOAD_A)
    assert len(trace.jobs) == 5894
    assert trace.jobs[0] == TraceJob("job0", 49.0, 49.0, 740773.0, 2339561.0, 627471.0)
    assert (trace.skipped_lines, trace.out_of_order_lines) == (0, 0)


# --- read_load_curve -------------------------------------------------------------------------


def test_load_curve_fills_missing_slots_with_zero(tmp_path):
    path = write(tmp_path, "slot,released\n3,2.5\n0,1\n\n5,4\n", "curve.csv")
    np.testing.assert_array_equal(read_load_curve(path), [1.0, 0.0, 0.0, 2.5, 0.0, 4.0])


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("slot,load\n0,1\n", 1, "expected header 'slot,released'"),
        ("slot,released\n0,1\nx,2\n", 3, "column 1 (slot)"),
        ("slot,released\n0,1\n1.5,2\n", 3, "column 1 (slot): expected a whole number >= 0"),
        ("slot,released\n-1,2\n", 2, "column 1 (slot)"),
        ("slot,released\n0,1\n0,2\n", 3, "slot 0 already given on line 2"),
        ("slot,released\n0,-1\n", 2, "column 2 (released)"),
        ("slot,released\n0,nan\n", 2, "column 2 (released)"),
        ("slot,released\n0,1,2\n", 2, "expected 2 comma-separated columns"),
        ("", None, "empty file"),
        ("slot,released\n", None, "no rows"),
    ],
)
def test_load_curve_errors(tmp_path, text, line, expected):
    with pytest.raises(TraceError) as caught:
        read_load_curve(write(tmp_path, text, "curve.csv"))
    assert caught.value.line == line
    assert expected in str(caught.value)


# --- estimate_length_s -----------------------------------------------------------------------


def test_length_of_a_job_worked_by_hand():
    # S = 256 MiB, S' = 0, S'' = 128 MiB, paper defaults (block 128 MB, f = 0.8 s/MB,
    # g = 0.9 s/MB, V_i = V_o = 100 MB/s, V_n = 10 MB/s, λ_m = λ_r = 1, M = X).
    # X = ceil(256/128) = 2, Y = ceil(128/128) = 1.
    # T_m = 256/(2*100) + 0.8*(256/2) + 0/(2*100) = 1.28 + 102.4 = 103.68 s
    # T_s = 0/(2*1*10) = 0;  T_r = 0.9*(0/1) + 128/(1*100) = 1.28 s
    # T_m < M*T_s is 103.68 < 0: false, so the second case:
    # T_J = 1*103.68 + 2*0 + 1*(2*0 + 1.28) = 104.96 s
    assert estimate_length_s(256 * MIB, 0, 128 * MIB) == pytest.approx(104.96)


def test_length_when_reducers_need_not_wait():
    # S = 1 MiB, S' = 100 MiB, S'' = 1 MiB, paper defaults. X = 1, Y = 1, M = X = 1.
    # T_m = 1/100 + 0.8*1 + 100/100 = 1.81 s;  T_s = 100/(1*1*10) = 10 s
    # T_r = 0.9*(100/1) + 1/100 = 90.01 s
    # T_m < M*T_s is 1.81 < 10: true, so the first case:
    # T_J = 1.81 + 1*(1*10 + 90.01) = 101.82 s  (the second case would give 111.82 s)
    assert estimate_length_s(MIB, 100 * MIB, MIB) == pytest.approx(101.82)


def test_map_slots_sets_m_in_case_split():
    # S = 128 MiB, S' = 1024 MiB, S'' = 128 MiB. X = 1, Y = 1.
    # T_m = 1.28 + 102.4 + 10.24 = 113.92 s;  T_s = 1024/10 = 102.4 s;  T_r = 921.6 + 1.28 = 922.88 s
    # M = X = 1: 113.92 < 102.4 false -> 113.92 + 1*102.4 + (102.4 + 922.88) = 1241.6 s
    # M = 2:     113.92 < 204.8 true  -> 113.92 + (102.4 + 922.88) = 1139.2 s
    sizes = (128 * MIB, 1024 * MIB, 128 * MIB)
    assert estimate_length_s(*sizes) == pytest.approx(1241.6)
    assert estimate_length_s(*sizes, LengthModel(map_slots=2)) == pytest.approx(1139.2)


def test_length_rounds_multiply_their_phases():
    # Same job as the hand-worked one, with λ_m = 2 and λ_r = 3:
    # T_J = 2*103.68 + 2*0 + 3*(0 + 1.28) = 211.2 s
    model = LengthModel(map_rounds=2, reduce_rounds=3)
    assert estimate_length_s(256 * MIB, 0, 128 * MIB, model) == pytest.approx(211.2)


def test_length_is_vectorised_and_broadcasts():
    maps = np.array([256 * MIB, MIB, 0.0])
    lengths = estimate_length_s(maps, np.array([0.0, 100 * MIB, 0.0]), np.array([128 * MIB, MIB, 0.0]))
    assert lengths.shape == (3,)
    np.testing.assert_allclose(lengths, [104.96, 101.82, 0.0])
    assert estimate_length_s(np.zeros((2, 3)), 0.0, 0.0).shape == (2, 3)
    assert estimate_length_s(0, 0, 0).shape == ()


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_length_rejects_bad_sizes(bad):
    with pytest.raises(ConfigError, match="shuffle_bytes"):
        estimate_length_s(np.array([1.0, 2.0]), np.array([0.0, bad]), 0.0)


# --- workload_from_trace ---------------------------------------------------------------------


def job(job_id: str, submit_s: float, map_bytes: float = 0.0, shuffle_bytes: float = 0.0, output_bytes: float = 0.0):
    return TraceJob(job_id, submit_s, 0.0, map_bytes, shuffle_bytes, output_bytes)


def test_curves_of_a_three_job_trace_by_hand():
    # 100 s slots, a window of 4 slots (0..400 s).
    # a: submit 10 s, all sizes 0 -> T = 0 s, slots 0..max(0, ceil(0.1)-1=0) = slot 0 only.
    # b: submit 150 s, S = 256 MiB, S'' = 128 MiB -> T = 104.96 s (hand-worked above);
    #    end 254.96 s -> slots 1..ceil(2.5496)-1 = 1..2.
    # c: submit 390 s, S = 1 MiB, S' = 100 MiB, S'' = 1 MiB -> T = 101.82 s; end 491.82 s
    #    -> slots 3..4; slot 4 is past the window: 1 clipped job, 1 clipped job-slot.
    # d: submit 400 s -> slot 4, released after the window: not counted.
    trace = Trace(
        "hand",
        (job("a", 10), job("b", 150, 256 * MIB, 0, 128 * MIB), job("c", 390, MIB, 100 * MIB, MIB), job("d", 400)),
        skipped_lines=2,
        out_of_order_lines=1,
    )
    workload = workload_from_trace(trace, slot_s=100.0, window_slots=4)
    np.testing.assert_array_equal(workload.released, [1, 1, 0, 1])
    np.testing.assert_array_equal(workload.active, [1, 1, 1, 1])
    assert workload.n_jobs == 3
    assert workload.jobs_after_window == 1
    assert (workload.clipped_jobs, workload.clipped_job_slots) == (1, 1)
    assert (workload.skipped_lines, workload.out_of_order_lines) == (2, 1)
    assert workload.source == "hand" and workload.slot_s == 100.0 and workload.n_slots == 4

    # With 50 s slots and a 6-slot window: a -> slot 0; b -> slots 3..ceil(5.0992)-1 = 3..5;
    # c (slot 7) and d (slot 8) are after the window.
    workload = workload_from_trace(trace, slot_s=50.0, window_slots=6)
    np.testing.assert_array_equal(workload.released, [1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(workload.active, [1, 0, 0, 1, 1, 1])
    assert (workload.n_jobs, workload.jobs_after_window, workload.clipped_jobs) == (2, 2, 0)


def test_job_ending_on_a_slot_boundary_does_not_spill():
    # submit 0 s and a slot exactly T long (T ~ 104.96 s): the job ends on the boundary, slot 0 only.
    trace = Trace("edge", (job("b", 0, 256 * MIB, 0, 128 * MIB),))
    slot_s = float(estimate_length_s(256 * MIB, 0, 128 * MIB))
    workload = workload_from_trace(trace, slot_s=slot_s, window_slots=3)
    np.testing.assert_array_equal(workload.active, [1, 0, 0])


def test_default_window_is_the_trace_day():
    trace = Trace("day", (job("a", 0),))
    assert workload_from_trace(trace).n_slots == 288
    assert workload_from_trace(trace, slot_s=60.0).n_slots == 1440


@pytest.mark.parametrize("slot_s", [0.0, -5.0, math.nan, math.inf])
def test_bad_slot_length_is_rejected(slot_s):
    with pytest.raises(ConfigError, match="slot_s"):
        workload_from_trace(Trace("t", (job("a", 0),)), slot_s=slot_s)


@pytest.mark.parametrize("window_slots", [0, -1, 2.5])
def test_bad_window_is_rejected(window_slots):
    with pytest.raises(ConfigError, match="window_slots"):
        workload_from_trace(Trace("t", (job("a", 0),)), window_slots=window_slots)


def _slow_job_slots(submit_s, length_s, slot_s, window_slots):
    """Independent slow count: walk each job's slots one by one."""
    total = clipped = in_window = 0
    active = [0] * window_slots
    for s, t in zip(submit_s, length_s, strict=True):
        first = math.floor(s / slot_s)
        if first >= window_slots:
            continue
        in_window += 1
        slot = first
        while True:
            total += 1
            if slot < window_slots:
                active[slot] += 1
            else:
                clipped += 1
            slot += 1
            if slot >= (s + t) / slot_s:  # past the last slot ceil((s+T)/slot_s) - 1
                break
    return total, clipped, in_window, active


sizes = st.one_of(st.just(0.0), st.floats(min_value=0, max_value=2e10, allow_nan=False))


@settings(max_examples=150, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(st.floats(min_value=0, max_value=5000, allow_nan=False), sizes, sizes, sizes),
        max_size=40,
    ),
    slot_s=st.sampled_from([7.0, 60.0, 300.0]),
    window_slots=st.integers(min_value=1, max_value=60),
)
def test_active_counts_every_job_slot_in_the_window(jobs, slot_s, window_slots):
    trace = Trace("random", tuple(job(f"j{i}", *fields) for i, fields in enumerate(sorted(jobs))))
    submit_s = [fields[0] for fields in sorted(jobs)]
    length_s = [float(estimate_length_s(*fields[1:])) for fields in sorted(jobs)]
    total, clipped, in_window, active = _slow_job_slots(submit_s, length_s, slot_s, window_slots)
    if in_window == 0:
        # Nothing to provision for: refused rather than reported as a zero-cost success.
        with pytest.raises(TraceError, match="no job is submitted inside the window"):
            workload_from_trace(trace, slot_s=slot_s, window_slots=window_slots)
        return
    workload = workload_from_trace(trace, slot_s=slot_s, window_slots=window_slots)

    assert workload.active.sum() == total - workload.clipped_job_slots
    assert workload.clipped_job_slots == clipped
    np.testing.assert_array_equal(workload.active, active)
    assert workload.released.sum() == in_window == workload.n_jobs
    assert workload.n_jobs + workload.jobs_after_window == len(jobs)


# --- workload_from_curve ---------------------------------------------------------------------


def test_curve_wraps_load_as_released_and_active():
    workload = workload_from_curve([1, 0, 2.5], slot_s=60.0, source="mine")
    np.testing.assert_array_equal(workload.released, [1.0, 0.0, 2.5])
    np.testing.assert_array_equal(workload.active, [1.0, 0.0, 2.5])
    assert workload.released is not workload.active
    assert (workload.n_jobs, workload.slot_s, workload.source) == (0, 60.0, "mine")


@pytest.mark.parametrize("load", [[1.0, -1.0], [math.nan], [math.inf, 1.0], [], [[1.0, 2.0]]])
def test_curve_rejects_bad_load(load):
    with pytest.raises(ConfigError, match="load curve"):
        workload_from_curve(load)


def test_curve_read_from_file_round_trips(tmp_path):
    load = read_load_curve(write(tmp_path, "slot,released\n1,3\n", "curve.csv"))
    np.testing.assert_array_equal(workload_from_curve(load).active, [0.0, 3.0])
