"""Long-job decomposition, deadline assignment and EDF order (paper: deferral, §V-B)."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.core.edf import NonPreemptiveJob, Piece, edf_order, job_length_slots, split_preemptive
from autoscaler.core.errors import ConfigError, ScheduleError

SLOT_S = 300.0


def run_non_preemptive(job: NonPreemptiveJob, choose_slot) -> list[tuple[Piece, int]]:
    """A tiny scheduler: run each piece in the slot ``choose_slot(piece)`` picks; returns (piece, ran slot)."""
    ran = []
    piece = job.first_piece()
    while piece is not None:
        slot = choose_slot(piece)
        ran.append((piece, slot))
        piece = job.next_piece(slot, piece.index)
    return ran


def latest(piece: Piece) -> int:
    return piece.due_slot


def earliest(piece: Piece) -> int:
    return piece.release_slot


# --- Piece, job_length_slots ----------------------------------------------------------------


def test_piece_due_slot_is_release_plus_deadline():
    assert Piece("j", 2, release_slot=10, deadline_slots=3, work=0.5).due_slot == 13


@pytest.mark.parametrize(
    "kwargs",
    [
        {"index": 0},
        {"deadline_slots": -1},
        {"release_slot": 1.5},
        {"work": 1.5},
        {"work": -0.1},
        {"work": math.nan},
        {"index": True},
    ],
)
def test_piece_rejects_bad_fields(kwargs):
    fields = {"job_id": "j", "index": 1, "release_slot": 0, "deadline_slots": 0, "work": 1.0} | kwargs
    with pytest.raises(ConfigError):
        Piece(**fields)


def test_piece_normalises_numpy_integers():
    piece = Piece("j", np.int64(1), np.int64(4), np.int64(2), np.float64(0.25))
    assert type(piece.release_slot) is int and type(piece.work) is float


@pytest.mark.parametrize(
    ("length_s", "expected"),
    [
        (0.0, 1),  # at least one slot
        (1.0, 1),
        (300.0, 1),  # exactly one slot
        (300.1, 2),
        (750.0, 3),  # 2.5 slots -> 3
        (900.0, 3),
    ],
)
def test_job_length_slots(length_s, expected):
    assert job_length_slots(length_s, SLOT_S) == expected


@pytest.mark.parametrize("slot_s", [0.0, -300.0, math.inf, math.nan, "300"])
def test_job_length_slots_rejects_bad_slot(slot_s):
    with pytest.raises(ConfigError, match="slot_s"):
        job_length_slots(600.0, slot_s)


@pytest.mark.parametrize("length_s", [-1.0, math.inf, math.nan])
def test_job_length_slots_rejects_bad_length(length_s):
    with pytest.raises(ConfigError, match="length_s"):
        job_length_slots(length_s, SLOT_S)


# --- split_preemptive ----------------------------------------------------------------------


def test_preemptive_three_slots_deadline_seven():
    # ell = 3, D = 7: k = floor(7/3) = 2, piece deadline k - 1 = 1;
    # releases t, t+2, t+4; due t+1, t+3, t+5, all <= t+7.
    t = 10
    pieces = split_preemptive("j", t, 3 * SLOT_S, 7, SLOT_S)
    assert [p.index for p in pieces] == [1, 2, 3]
    assert [p.release_slot for p in pieces] == [10, 12, 14]
    assert [p.deadline_slots for p in pieces] == [1, 1, 1]
    assert [p.due_slot for p in pieces] == [11, 13, 15]
    assert max(p.due_slot for p in pieces) <= t + 7
    assert [p.work for p in pieces] == [1.0, 1.0, 1.0]


def test_preemptive_fractional_last_piece():
    # 750 s / 300 s = 2.5 slots -> ell = 3, works 1, 1, 0.5.
    # D = 6: k = 2, deadline 1; releases 0, 2, 4; due 1, 3, 5 <= 6.
    pieces = split_preemptive("j", 0, 750.0, 6, SLOT_S)
    assert [p.work for p in pieces] == [1.0, 1.0, 0.5]
    assert [p.due_slot for p in pieces] == [1, 3, 5]
    assert sum(p.work for p in pieces) == 2.5


def test_preemptive_deadline_equal_to_length_gives_back_to_back_pieces():
    # ell = 3, D = 3: k = 1, deadline 0; releases t, t+1, t+2 = due slots; last due t+2 = t+D-1.
    pieces = split_preemptive("j", 5, 900.0, 3, SLOT_S)
    assert [(p.release_slot, p.due_slot) for p in pieces] == [(5, 5), (6, 6), (7, 7)]


@pytest.mark.parametrize(("length_s", "deadline_slots"), [(900.0, 2), (600.0, 1), (600.0, 0)])
def test_preemptive_deadline_shorter_than_length_is_rejected(length_s, deadline_slots):
    # ell = 3, D = 2 -> floor(2/3) - 1 = -1; ell = 2, D = 1 -> floor(1/2) - 1 = -1.
    with pytest.raises(ConfigError, match=r"job 'big'.*deadline D = .* shorter than .* ell = "):
        split_preemptive("big", 0, length_s, deadline_slots, SLOT_S)


@pytest.mark.parametrize("deadline_slots", [0, 1, 5])
def test_preemptive_single_slot_job_is_not_split(deadline_slots):
    # ell = 1: one piece keeping D (the formula would give D - 1).
    (piece,) = split_preemptive("small", 4, 120.0, deadline_slots, SLOT_S)
    assert (piece.index, piece.release_slot, piece.deadline_slots) == (1, 4, deadline_slots)
    assert piece.due_slot == 4 + deadline_slots
    assert piece.work == pytest.approx(0.4)  # 120 s of a 300 s slot


@pytest.mark.parametrize(
    "args",
    [
        ("j", 0, 600.0, -1, SLOT_S),
        ("j", 0, 600.0, 2.0, SLOT_S),
        ("j", 0.5, 600.0, 4, SLOT_S),
        ("j", 0, -1.0, 4, SLOT_S),
        ("j", 0, 600.0, 4, 0.0),
    ],
)
def test_preemptive_rejects_bad_input(args):
    with pytest.raises(ConfigError):
        split_preemptive(*args)


@given(
    release_slot=st.integers(min_value=-1000, max_value=1000),
    length_s=st.floats(min_value=0.0, max_value=50 * SLOT_S, allow_nan=False),
    extra_slots=st.integers(min_value=0, max_value=200),
)
def test_preemptive_pieces_meet_deadline_and_carry_all_work(release_slot, length_s, extra_slots):
    ell = job_length_slots(length_s, SLOT_S)
    deadline_slots = ell + extra_slots  # D >= ell so that floor(D/ell) >= 1
    pieces = split_preemptive("j", release_slot, length_s, deadline_slots, SLOT_S)
    assert len(pieces) == ell
    assert [p.index for p in pieces] == list(range(1, ell + 1))
    assert all(p.due_slot <= release_slot + deadline_slots for p in pieces)
    assert pieces[0].release_slot == release_slot
    releases = [p.release_slot for p in pieces]
    assert all(a < b for a, b in pairwise(releases))
    # each piece's window closes before the next one opens (precedence kept)
    assert all(a.due_slot < b.release_slot for a, b in pairwise(pieces))
    assert all(0.0 <= p.work <= 1.0 for p in pieces)
    assert math.isclose(sum(p.work for p in pieces), length_s / SLOT_S, rel_tol=1e-12, abs_tol=1e-12)


# --- NonPreemptiveJob ----------------------------------------------------------------------


def test_non_preemptive_three_slots_deadline_five_latest_scheduler():
    # ell = 3, D = 5, t = 10: J_1 deadline D - ell = 2, due 12; run at 12.
    # J_2 released 13, deadline 0, runs 13; J_3 released 14, runs 14 = t + D - 1 <= t + D = 15.
    job = NonPreemptiveJob("np", 10, 3, 5, 1.0)
    ran = run_non_preemptive(job, latest)
    assert [(p.index, p.release_slot, p.deadline_slots) for p, _ in ran] == [(1, 10, 2), (2, 13, 0), (3, 14, 0)]
    slots = [slot for _, slot in ran]
    assert slots == [12, 13, 14]
    assert all(b == a + 1 for a, b in pairwise(slots))  # consecutive: never preempted
    assert slots[-1] == 10 + 5 - 1 <= 10 + 5


def test_non_preemptive_earliest_scheduler_runs_back_to_back_from_release():
    # Same job run as soon as released: 10, 11, 12.
    job = NonPreemptiveJob("np", 10, 3, 5, 1.0)
    assert [slot for _, slot in run_non_preemptive(job, earliest)] == [10, 11, 12]


def test_non_preemptive_from_length_fractional_last_piece():
    # 750 s / 300 s = 2.5 -> ell = 3, last piece work 0.5; D = 4: J_1 deadline 1.
    job = NonPreemptiveJob.from_length("np", 0, 750.0, 4, SLOT_S)
    assert (job.length_slots, job.last_piece_work) == (3, 0.5)
    ran = run_non_preemptive(job, latest)
    assert [p.work for p, _ in ran] == [1.0, 1.0, 0.5]
    assert [slot for _, slot in ran] == [1, 2, 3]  # 3 = t + D - 1


@pytest.mark.parametrize("deadline_slots", [0, 3])
def test_non_preemptive_single_slot_job_keeps_deadline(deadline_slots):
    job = NonPreemptiveJob.from_length("small", 7, 60.0, deadline_slots, SLOT_S)
    piece = job.first_piece()
    assert (piece.deadline_slots, piece.due_slot, piece.work) == (deadline_slots, 7 + deadline_slots, 0.2)
    assert job.next_piece(piece.due_slot, 1) is None


@pytest.mark.parametrize(("length_slots", "deadline_slots"), [(3, 2), (2, 0)])
def test_non_preemptive_deadline_shorter_than_length_is_rejected(length_slots, deadline_slots):
    with pytest.raises(ConfigError, match=r"job 'np'.*shorter than .* ell = "):
        NonPreemptiveJob("np", 0, length_slots, deadline_slots, 1.0)


@pytest.mark.parametrize(
    "fields",
    [
        ("np", 0, 0, 5, 1.0),  # ell = 0
        ("np", 0, 3, 5, 0.0),  # last piece of a long job must carry work
        ("np", 0, 3, 5, 1.5),
        ("np", 0, 3.0, 5, 1.0),
    ],
)
def test_non_preemptive_rejects_bad_fields(fields):
    with pytest.raises(ConfigError):
        NonPreemptiveJob(*fields)


def test_non_preemptive_next_piece_checks_index_and_window():
    job = NonPreemptiveJob("np", 10, 3, 5, 1.0)
    with pytest.raises(ConfigError, match="index"):
        job.next_piece(11, 4)
    with pytest.raises(ConfigError, match="index"):
        job.next_piece(11, 0)
    # J_1 window [10, 12]; J_2 window [11, 13]
    with pytest.raises(ScheduleError, match=r"piece 1 ran in slot 13.*\[10, 12\]"):
        job.next_piece(13, 1)
    with pytest.raises(ScheduleError, match=r"piece 2 ran in slot 10"):
        job.next_piece(10, 2)


@given(
    release_slot=st.integers(min_value=-1000, max_value=1000),
    length_slots=st.integers(min_value=1, max_value=40),
    extra_slots=st.integers(min_value=0, max_value=40),
    first_delay=st.integers(min_value=0, max_value=80),
)
def test_non_preemptive_runs_consecutively_and_meets_deadline(release_slot, length_slots, extra_slots, first_delay):
    deadline_slots = length_slots + extra_slots
    job = NonPreemptiveJob("np", release_slot, length_slots, deadline_slots, 1.0)
    # the scheduler runs J_1 anywhere in its window, later pieces in their only slot
    ran = run_non_preemptive(job, lambda p: min(p.release_slot + first_delay, p.due_slot))
    slots = [slot for _, slot in ran]
    assert len(slots) == length_slots
    assert all(p.release_slot <= slot <= p.due_slot for p, slot in ran)
    assert all(b == a + 1 for a, b in pairwise(slots))
    assert release_slot <= slots[0] and slots[-1] <= release_slot + deadline_slots


# --- edf_order -----------------------------------------------------------------------------


def test_edf_order_mixed_list():
    a1 = Piece("a", 1, release_slot=0, deadline_slots=5, work=1.0)  # due 5
    a2 = Piece("a", 2, release_slot=6, deadline_slots=0, work=0.5)  # due 6
    b1 = Piece("b", 1, release_slot=2, deadline_slots=3, work=1.0)  # due 5, released later than a1
    c1 = Piece("c", 1, release_slot=4, deadline_slots=0, work=0.3)  # due 4: first
    d1 = Piece("d", 1, release_slot=2, deadline_slots=3, work=1.0)  # ties b1 on due and release: by job_id
    b2 = Piece("b", 2, release_slot=6, deadline_slots=0, work=1.0)  # ties a2: by job_id
    expected = [c1, a1, b1, d1, a2, b2]
    assert edf_order([a2, b2, d1, b1, a1, c1]) == expected
    assert edf_order(reversed(expected)) == expected
    assert edf_order([]) == []


def test_edf_order_breaks_ties_by_index():
    p1 = Piece("a", 1, release_slot=3, deadline_slots=0, work=1.0)
    p2 = Piece("a", 2, release_slot=3, deadline_slots=0, work=1.0)
    assert edf_order([p2, p1]) == [p1, p2]


def test_edf_order_of_split_jobs_keeps_each_jobs_pieces_in_order():
    # x: ell = 2, D = 4 -> k = 2, deadline 1: (0, due 1), (2, due 3)
    # y: ell = 3, D = 3 -> k = 1, deadline 0: (0, due 0), (1, due 1), (2, due 2)
    pieces = split_preemptive("x", 0, 600.0, 4, SLOT_S) + split_preemptive("y", 0, 900.0, 3, SLOT_S)
    order = [(p.job_id, p.index) for p in edf_order(pieces)]
    assert order == [("y", 1), ("x", 1), ("y", 2), ("y", 3), ("x", 2)]
