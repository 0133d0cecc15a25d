"""benchmarks/make_traces.py's unseen set: each trace has the shape its docstring claims, checked from
the file as ``autoscaler compare`` reads it (``read_swim``, lengths by the §V-A model), and the files
committed are the ones the generator writes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from autoscaler.core.workload import estimate_length_s, job_nodes, read_swim

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import make_traces  # noqa: E402

SLOT_S = 300.0
DAY_S = 86400.0
DEFAULT_MAX_NODES = 100


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return make_traces.unseen_traces()


@pytest.fixture(scope="module")
def jobs(generated, tmp_path_factory):
    """name -> (submit s, length s, map input bytes, reduce output bytes) of the trace's file, each
    shape (n_jobs,): the committed file, or for the week (written on demand) the generator's."""
    folder = tmp_path_factory.mktemp("unseen")

    def read(name: str) -> tuple[np.ndarray, ...]:
        path = make_traces.UNSEEN_DIR / name
        if name == make_traces.UNSEEN_WEEK:
            path = folder / name
            path.write_text(generated[name])
        columns = np.array([(j.submit_s, j.map_input_bytes, j.shuffle_bytes, j.reduce_output_bytes) for j in read_swim(path).jobs])
        submit_s, map_bytes, shuffle_bytes, output_bytes = columns.T
        return submit_s, estimate_length_s(map_bytes, shuffle_bytes, output_bytes), map_bytes, output_bytes

    return read


def hour_of_day(submit_s: np.ndarray) -> np.ndarray:
    return (submit_s % DAY_S) / 3600.0


def running_node_s(submit_s: np.ndarray, length_s: np.ndarray, n_slots: int) -> np.ndarray:
    """Node-seconds of work running in each slot, shape (n_slots,), each job on one node from its
    submit time for its length (no cap, no queue): the overlap of [submit, submit + length) with the slot."""
    done_by = np.array([np.clip(np.minimum(submit_s + length_s, edge) - submit_s, 0.0, None).sum() for edge in SLOT_S * np.arange(n_slots + 1)])
    return np.diff(done_by)


def test_the_committed_traces_are_the_generators_and_the_week_its_recorded_draw(generated):
    committed = {path.name for path in make_traces.UNSEEN_DIR.glob("*.tsv")} - {make_traces.UNSEEN_WEEK}
    assert committed == set(generated) - {make_traces.UNSEEN_WEEK}
    for name in committed:
        assert (make_traces.UNSEEN_DIR / name).read_text() == generated[name], name
        assert (make_traces.UNSEEN_DIR / name).stat().st_size < 6_000_000
    assert make_traces.text_sha256(generated[make_traces.UNSEEN_WEEK]) == make_traces.UNSEEN_WEEK_SHA256


def test_the_week_has_about_90000_jobs_diurnal_weekdays_and_quiet_weekends(jobs):
    submit_s, *_ = jobs("week-weekends-7d.tsv")
    per_day = np.bincount((submit_s // DAY_S).astype(int), minlength=7)
    assert per_day.shape == (7,) and 88_000 <= per_day.sum() <= 92_000
    assert per_day[5:].max() < 0.5 * per_day[:5].min()  # Saturday and Sunday
    hour = hour_of_day(submit_s)
    weekday = submit_s < 5 * DAY_S
    assert ((hour >= 13) & (hour < 17) & weekday).sum() > 3 * ((hour >= 1) & (hour < 5) & weekday).sum()


def test_the_drift_raises_the_daytime_10_percent_a_day_and_the_nights_keep_a_batch_window(jobs):
    submit_s, length_s, *_ = jobs("multi-day-drift-4d.tsv")
    day, hour = (submit_s // DAY_S).astype(int), hour_of_day(submit_s)
    daytime = np.bincount(day[(hour >= 8) & (hour < 20)], minlength=4)
    assert daytime.shape == (4,)
    assert np.allclose(daytime[1:] / daytime[:-1], 1.1, atol=0.05)
    assert daytime[3] / daytime[0] == pytest.approx(1.1**3, abs=0.08)
    for d in range(4):
        batch = length_s[(day == d) & (hour >= 1) & (hour < 4)].sum()
        after = length_s[(day == d) & (hour >= 4) & (hour < 7)].sum()
        assert batch > 5 * after, d


def test_saturating_peaks_need_over_3x_the_default_cap_for_a_few_hours(jobs):
    submit_s, length_s, *_ = jobs("saturating-2d.tsv")
    work = running_node_s(submit_s, length_s, 2 * 288)
    over = work > 3 * DEFAULT_MAX_NODES * SLOT_S
    assert work.max() > 3 * DEFAULT_MAX_NODES * SLOT_S
    for d in range(2):
        assert 24 <= over[d * 288 : (d + 1) * 288].sum() <= 60, d  # 2 to 5 hours a day
    assert work.max() < 500 * SLOT_S  # bench_spread's roomy --max-nodes 500 holds it


def test_bursty_heavy_is_a_low_base_and_bursts_of_thousands_of_short_jobs_within_minutes(jobs):
    submit_s, length_s, *_ = jobs("bursty-heavy-1d.tsv")
    per_slot = np.bincount((submit_s // SLOT_S).astype(int), minlength=288)
    assert np.median(per_slot) <= 3
    busy = np.flatnonzero(per_slot >= 300)
    bursts = np.split(busy, np.flatnonzero(np.diff(busy) > 1) + 1)
    assert len(bursts) >= 3
    for slots in bursts:
        assert len(slots) <= 3 and per_slot[slots].sum() >= 2000  # thousands within 10 minutes
        inside = (submit_s >= slots[0] * SLOT_S) & (submit_s < (slots[-1] + 1) * SLOT_S)
        assert np.median(length_s[inside]) <= 60


def test_flat_boundary_sits_within_a_few_percent_of_a_whole_node_count(jobs):
    submit_s, length_s, *_ = jobs("flat-boundary-1d.tsv")
    nodes = np.bincount((submit_s // SLOT_S).astype(int), weights=length_s, minlength=288) / SLOT_S
    whole = round(float(nodes.mean()))
    assert whole >= 1 and nodes.mean() == pytest.approx(whole, rel=0.01)
    assert np.mean(np.abs(nodes / whole - 1.0) <= 0.05) >= 0.95


def test_wide_jobs_run_on_several_nodes_with_8_containers_per_node(jobs):
    submit_s, length_s, map_bytes, output_bytes = jobs("wide-jobs-1d.tsv")
    assert make_traces.UNSEEN_COMPARE_FLAGS["wide-jobs-1d.tsv"] == ("--containers-per-node", "8")
    width = job_nodes(map_bytes, output_bytes, 8)
    wide = width >= 2
    assert wide.mean() >= 0.15 and wide.sum() >= 200
    assert (width * length_s)[wide].sum() >= 0.7 * (width * length_s).sum()  # most node-seconds are wide
    assert width.max() <= DEFAULT_MAX_NODES  # every job can start under the default cap
