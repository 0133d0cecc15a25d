"""Traces read wrongly (times in ms, columns in another order, a trace longer than the window)
stop with an error saying what was seen, instead of a replay of the few jobs left; .gz traces are read."""

from __future__ import annotations

import gzip

import pytest

from autoscaler.app.cli import main
from autoscaler.core.errors import TraceError
from autoscaler.core.model import Trace, TraceJob
from autoscaler.core.workload import read_swim, workload_from_trace

SIZES = (740773, 2339561, 627471)


def _lines(submit_times, gaps=None, order=(0, 1, 2, 3, 4, 5)) -> str:
    gaps = gaps or [0.0] * len(submit_times)
    rows = []
    for i, (submit, gap) in enumerate(zip(submit_times, gaps)):
        fields = [f"job{i}", f"{submit:g}", f"{gap:g}", *(str(s * (i + 1)) for s in SIZES)]
        rows.append("\t".join(fields[k] for k in order))
    return "\n".join(rows) + "\n"


def _write(tmp_path, text: str, name: str = "trace.tsv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _day(n: int = 40) -> list[float]:
    return [i * 86_000.0 / n for i in range(n)]  # spread over the day, in seconds


def test_times_in_milliseconds_are_refused_with_the_unit_named(tmp_path):
    trace = read_swim(_write(tmp_path, _lines([t * 1000 for t in _day()])))
    with pytest.raises(TraceError) as caught:
        workload_from_trace(trace)
    message = str(caught.value)
    # 39 of the 40 ms times are past 86,400: only job0 (at 0) is inside the day.
    assert "39 of 40 lines (98 %) would be dropped or reordered: 39 jobs are submitted after the window's end at 86,400 s" in message
    assert "If they are in milliseconds, divide columns 2 and 3 by 1000 (they would span 23.3 h)" in message


def test_a_ten_day_trace_in_a_one_day_window_is_refused_with_the_window_that_covers_it(tmp_path):
    trace = read_swim(_write(tmp_path, _lines([t * 10 for t in _day()])))
    with pytest.raises(TraceError) as caught:
        workload_from_trace(trace)
    message = str(caught.value)
    assert "35 jobs are submitted after the window's end" in message and "(9.7 days)" in message
    # The last job is at 838,500 s: slot 2,795 of 300 s.
    # The core names its parameter; the command line names it --window (test_field_flags.py).
    assert "give `window_slots` 2796 (slots of 300 s)" in message
    assert "milliseconds" not in message
    # With that window the whole trace is replayed.
    assert workload_from_trace(trace, window_slots=2796).n_jobs == 40


def test_an_explicit_short_window_still_cuts_the_trace(tmp_path):
    # The first hour of a day on purpose: the window was asked for, so the cut is no mistake.
    trace = read_swim(_write(tmp_path, _lines(_day())))
    workload = workload_from_trace(trace, window_slots=12)
    assert (workload.n_jobs, workload.jobs_after_window) == (2, 38)


def test_sizes_in_the_submit_column_are_refused(tmp_path):
    # Columns: job id, map input bytes, shuffle, output, submit, gap: column 2 holds bytes,
    # 20,000 x (i+1), so the first four are inside the day and the other 36 past it.
    text = "".join(f"job{i}\t{20_000 * (i + 1)}\t{4000 * i}\t{2**20}\t{t:g}\t0\n" for i, t in enumerate(_day()))
    with pytest.raises(TraceError) as caught:
        workload_from_trace(read_swim(_write(tmp_path, text)))
    message = str(caught.value)
    assert "36 of 40 lines (90 %) would be dropped or reordered: 36 jobs are submitted after the window's end" in message
    assert "SWIM's is: job id, submit time s, inter-job gap s, map input bytes" in message


def test_submit_and_gap_columns_swapped_are_refused(tmp_path):
    submits = _day()
    gaps = [submits[0]] + [b - a for a, b in zip(submits, submits[1:])]
    gaps = [g * (1 + 0.5 * (i % 3 == 0)) for i, g in enumerate(gaps)]  # gaps that go up and down
    with pytest.raises(TraceError, match="columns 2 and 3 look swapped"):
        read_swim(_write(tmp_path, _lines(gaps, submits)))
    # The right order reads.
    assert len(read_swim(_write(tmp_path, _lines(submits, gaps))).jobs) == 40


def test_mostly_unsorted_lines_are_refused(tmp_path):
    submits = _day(10)[::-1]  # newest first: 9 of 10 lines go back in time
    with pytest.raises(TraceError, match=r"9 of 10 lines \(90 %\) have a submit time \(column 2\) smaller than the line before"):
        read_swim(_write(tmp_path, _lines(submits)))


def test_mostly_malformed_lines_are_refused_even_when_skipping(tmp_path):
    text = _lines(_day(3)) + "".join(f"bad{i}\tx\t0\t1\t1\t1\n" for i in range(4))
    with pytest.raises(TraceError) as caught:
        read_swim(_write(tmp_path, text), skip_bad_lines=True)
    message = str(caught.value)
    assert "4 of 7 lines (57 %) are malformed" in message and "the first, line 4: column 2 (submit time s)" in message


def test_dropped_and_out_of_order_lines_add_up(tmp_path):
    # 10 jobs after the day and 3 lines out of order among 24: neither alone is half, both are.
    trace = Trace(
        "mixed.tsv",
        tuple(TraceJob(f"j{i}", 100.0 * i, 0.0, 1.0, 1.0, 1.0) for i in range(14))
        + tuple(TraceJob(f"late{i}", 90_000.0 + i, 0.0, 1.0, 1.0, 1.0) for i in range(10)),
        out_of_order_lines=3,
    )
    with pytest.raises(TraceError, match=r"13 of 24 lines \(54 %\) would be dropped or reordered"):
        workload_from_trace(trace)


def test_a_gzip_trace_is_read_like_the_plain_one(tmp_path):
    text = _lines(_day())
    plain = read_swim(_write(tmp_path, text))
    packed = tmp_path / "trace.tsv.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    assert read_swim(packed).jobs == plain.jobs
    broken = tmp_path / "broken.tsv.gz"
    broken.write_bytes(gzip.compress(text.encode())[:40])
    with pytest.raises(TraceError, match="starts like a gzip file but cannot be decompressed"):
        read_swim(broken)


def test_the_cli_reads_a_gzip_trace(tmp_path):
    packed = tmp_path / "day.tsv.gz"
    packed.write_bytes(gzip.compress(_lines(_day()).encode()))
    assert main(["replay", "--trace", str(packed), "--policy", "gcp-u", "--format", "csv"]) == 0
    curve = tmp_path / "curve.csv.gz"
    curve.write_bytes(gzip.compress(b"slot,released\n0,1\n1,2\n"))
    assert main(["replay", "--trace", str(curve), "--policy", "gcp-u", "--format", "csv"]) == 0


def test_the_cli_stops_on_a_millisecond_trace(tmp_path, capsys):
    path = _write(tmp_path, _lines([t * 1000 for t in _day()]))
    assert main(["replay", "--trace", str(path), "--policy", "gcp-u"]) == 2
    assert "divide columns 2 and 3 by 1000" in capsys.readouterr().err
