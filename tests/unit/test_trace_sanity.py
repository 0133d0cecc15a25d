"""Traces as they come: gzip-compressed ones are read."""

from __future__ import annotations

import gzip

import pytest

from autoscaler.cli import main
from autoscaler.errors import TraceError
from autoscaler.workload import read_swim

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
