"""Long-job decomposition, deadline assignment and earliest-deadline-first order (paper: deferral, §V-B).

Deadline convention (paper: deferral, §II): a job released in slot t with deadline D (a whole number of
slots, D >= 0) must be executed within slot t + D, i.e. it may run in any of the slots t, t+1, ..., t+D.
A deadline of 0 means "run in the release slot". Slots are integers; lengths are in seconds; a piece's
``work`` is in servers' worth of one slot (1.0 = one server busy for the whole slot of ``slot_s`` seconds).

A job of length T_J seconds spans ell = ceil(T_J / tau) slots (tau = ``slot_s``). Jobs with ell = 1 are
the paper's small jobs and are not split. Longer jobs become ell pieces of at most one slot each:

* preemptive (``split_preemptive``): the pieces are known up front, each with deadline floor(D/ell) - 1;
* non-preemptive (``NonPreemptiveJob``): only the first piece is known up front (deadline D - ell); each
  later piece is released in the slot right after the scheduler ran the previous one, with deadline 0.

``edf_order`` is the order in which released pieces are handed to the scheduler.

Whole jobs (the daemon's): a job of length T_J seconds due at ``deadline_s`` must start by its
start-by slot, the slot of (deadline - length) (``start_by_slot``). Queued jobs are released in EDF
order of that slot, kept between slots in a :class:`JobQueue`; which are released in a slot, and how
the nodes are shared under overload, is :mod:`autoscaler.core.release`.

Over 600 lines, one module: the decomposition, the deadlines it gives the pieces and the EDF queue
that orders them by those deadlines are one rule of the paper (§V-B), read together.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
from sortedcontainers import SortedList

from autoscaler.core.errors import ConfigError, ScheduleError
from autoscaler.core.model import FINISHED_STATES, JOB_STATES, Job, JobState
from autoscaler.core.readable import duration_text


class SlotGrid(Protocol):
    """Where slots are: slot k is [epoch_s + k*slot_s, epoch_s + (k+1)*slot_s), seconds."""

    slot_s: float
    epoch_s: float


class NodeLimits(SlotGrid, Protocol):
    """A slot grid, the bounds on task nodes, [min_nodes, max_nodes], and how many slots before its
    start-by slot a queued job is due (``due_margin_slots``, see ``release_by_slot``)."""

    min_nodes: int
    max_nodes: int
    due_margin_slots: int


class NodeRates(Protocol):
    """One node's disk and network rates, bytes/s, which put a demand vector on one scale."""

    node_disk_bytes_s: float
    node_network_bytes_s: float


@dataclass(frozen=True)
class Piece:
    """One slot's worth (or less) of a job, with its own release slot and relative deadline.

    ``index``: 1-based piece number within the job (J_1 ... J_ell).
    ``release_slot``: first slot the piece may run in.
    ``deadline_slots``: relative deadline d >= 0; the piece must run in a slot of
    [release_slot, release_slot + d].
    ``work``: servers' worth of work in the slot it runs in, 0 <= work <= 1 (the last piece of a
    2.5-slot job has 0.5).

    Raises ConfigError if index < 1, a slot field is not a whole number, deadline_slots < 0, or
    work is not a finite number in [0, 1].
    """

    job_id: str
    index: int
    release_slot: int
    deadline_slots: int
    work: float

    def __post_init__(self) -> None:
        where = f"piece {self.index!r} of job {self.job_id!r}"
        object.__setattr__(self, "index", _whole("index", self.index, minimum=1, where=where))
        object.__setattr__(self, "release_slot", _whole("release_slot", self.release_slot, where=where))
        deadline_slots = _whole("deadline_slots", self.deadline_slots, minimum=0, where=where)
        object.__setattr__(self, "deadline_slots", deadline_slots)
        if not (_is_number(self.work) and math.isfinite(self.work) and 0.0 <= self.work <= 1.0):
            raise ConfigError(
                f"{where}: work must be a finite number in [0, 1] (servers' worth of one slot), got {self.work!r}"
            )
        object.__setattr__(self, "work", float(self.work))

    @property
    def due_slot(self) -> int:
        """Last slot the piece may run in: release_slot + deadline_slots."""
        return self.release_slot + self.deadline_slots


def job_length_slots(length_s: float, slot_s: float) -> int:
    """Length ell = ceil(T_J / tau) of a job in slots, at least 1 (paper: deferral, §V-B).

    ``length_s``: T_J in seconds, finite and >= 0 (0 gives 1 slot). ``slot_s``: tau in seconds.
    Raises ConfigError if slot_s is not a finite number > 0 or length_s is not a finite number >= 0.
    """
    ratio = _length_ratio(length_s, slot_s)
    return max(1, math.ceil(ratio))


def split_preemptive(
    job_id: str, release_slot: int, length_s: float, deadline_slots: int, slot_s: float
) -> list[Piece]:
    """Pieces J_1..J_ell of a preemptive job with their releases and deadlines (paper: deferral, §V-B, Fig. 7a).

    Returns a list of ell = ceil(T_J / tau) pieces. With k = floor(D / ell), piece i (1-based) is
    released at t_J + (i - 1) k with deadline k - 1, as the paper writes it; pieces 1..ell-1 carry
    work 1.0 and the last carries T_J/tau - (ell - 1), in (0, 1], so the works sum to T_J/tau.
    A job with ell = 1 is not split: one piece with the job's own deadline D and work T_J/tau.

    Every piece meets the job's deadline: piece ell is released at t_J + (ell - 1) k and is due at
    t_J + (ell - 1) k + k - 1 = t_J + ell k - 1 <= t_J + D - 1 < t_J + D, since ell k <= D. Piece i is
    due at t_J + i k - 1, one slot before piece i+1 is released, so the pieces' windows are disjoint
    and in order, which keeps any precedence between them.

    Raises ConfigError (naming the job) if ell >= 2 and D < ell, where the paper's piece deadline
    floor(D/ell) - 1 would be negative; if D is not a whole number >= 0 or release_slot not a whole
    number; or if length_s / slot_s are invalid (see ``job_length_slots``).
    """
    release_slot = _whole("release_slot", release_slot, where=f"job {job_id!r}")
    deadline_slots = _whole("deadline_slots", deadline_slots, minimum=0, where=f"job {job_id!r}")
    ratio = _length_ratio(length_s, slot_s)
    ell = max(1, math.ceil(ratio))
    if ell == 1:
        return [Piece(job_id, 1, release_slot, deadline_slots, ratio)]
    if deadline_slots < ell:
        raise ConfigError(
            f"job {job_id!r}: deadline D = {deadline_slots} slots is shorter than the job's length "
            f"ell = {ell:,} slots (T_J = {duration_text(float(length_s))} in slots of {duration_text(float(slot_s))}); a preemptive "
            f"split needs D >= ell so that the piece deadline floor(D/ell) - 1 is >= 0"
        )
    stride = deadline_slots // ell  # k = floor(D / ell), >= 1 here
    last_work = ratio - (ell - 1)
    return [
        Piece(
            job_id=job_id,
            index=i,
            release_slot=release_slot + (i - 1) * stride,
            deadline_slots=stride - 1,
            work=1.0 if i < ell else last_work,
        )
        for i in range(1, ell + 1)
    ]


@dataclass(frozen=True)
class NonPreemptiveJob:
    """A non-preemptive job released piece by piece as the scheduler runs it (paper: deferral, §V-B, Fig. 7b).

    ``release_slot``: t_J. ``length_slots``: ell >= 1. ``deadline_slots``: D (whole, >= 0, and >= ell when
    ell >= 2). ``last_piece_work``: work of J_ell in servers' worth of one slot, in (0, 1] (in [0, 1]
    when ell = 1); earlier pieces carry 1.0.

    The paper gives J_1 the deadline D - ell; when the scheduler runs J_{i-1} in slot t'_{i-1}, piece J_i
    is released at t'_{i-1} + 1 with deadline 0, so it runs in exactly that slot. Hence, for ell >= 2,
    J_1 runs at some t'_1 in [t_J, t_J + D - ell], piece i runs at t'_1 + i - 1, the job occupies the
    ell consecutive slots t'_1 .. t'_1 + ell - 1 without preemption, and its last piece runs by
    t_J + D - ell + ell - 1 = t_J + D - 1 < t_J + D: the job's deadline is met with one slot to spare
    (the paper's D - ell is one slot more conservative than needed; it is kept as written).
    A job with ell = 1 is not split (paper: deferral, §VI-A): J_1 keeps the job's deadline D and runs
    by t_J + D.

    Raises ConfigError if a field is out of range, in particular (naming the job) if ell >= 2 and
    D < ell, where the first piece's deadline D - ell would be negative.
    """

    job_id: str
    release_slot: int
    length_slots: int
    deadline_slots: int
    last_piece_work: float

    def __post_init__(self) -> None:
        where = f"job {self.job_id!r}"
        object.__setattr__(self, "release_slot", _whole("release_slot", self.release_slot, where=where))
        length_slots = _whole("length_slots", self.length_slots, minimum=1, where=where)
        object.__setattr__(self, "length_slots", length_slots)
        deadline_slots = _whole("deadline_slots", self.deadline_slots, minimum=0, where=where)
        object.__setattr__(self, "deadline_slots", deadline_slots)
        low = 0.0 if self.length_slots == 1 else math.nextafter(0.0, 1.0)
        work = self.last_piece_work
        if not (_is_number(work) and math.isfinite(work) and low <= work <= 1.0):
            bounds = "[0, 1]" if self.length_slots == 1 else "(0, 1]"
            raise ConfigError(f"{where}: last_piece_work must be a finite number in {bounds}, got {work!r}")
        object.__setattr__(self, "last_piece_work", float(work))
        if self.length_slots >= 2 and self.deadline_slots < self.length_slots:
            raise ConfigError(
                f"{where}: deadline D = {self.deadline_slots} slots is shorter than the job's length "
                f"ell = {self.length_slots} slots; a non-preemptive job needs D >= ell so that its first "
                f"piece's deadline D - ell is >= 0"
            )

    @classmethod
    def from_length(
        cls, job_id: str, release_slot: int, length_s: float, deadline_slots: int, slot_s: float
    ) -> NonPreemptiveJob:
        """The job of T_J = ``length_s`` seconds: ell = ceil(T_J/tau), last piece work T_J/tau - (ell - 1).

        Raises ConfigError as ``job_length_slots`` and the class do.
        """
        ratio = _length_ratio(length_s, slot_s)
        ell = max(1, math.ceil(ratio))
        return cls(job_id, release_slot, ell, deadline_slots, ratio - (ell - 1))

    def first_piece(self) -> Piece:
        """J_1: released at t_J with deadline D - ell (D itself when ell = 1).

        Never raises: the class already refused D < ell for ell >= 2.
        """
        if self.length_slots == 1:
            return Piece(self.job_id, 1, self.release_slot, self.deadline_slots, self.last_piece_work)
        return Piece(self.job_id, 1, self.release_slot, self.deadline_slots - self.length_slots, 1.0)

    def next_piece(self, ran_slot: int, index: int) -> Piece | None:
        """Piece index+1, released at ``ran_slot`` + 1 with deadline 0, after piece ``index`` ran in ``ran_slot``.

        Returns None once piece ell has run. The caller passes the slot the scheduler actually ran
        piece ``index`` in; this method keeps no state, so it can only check that slot against the
        widest window piece ``index`` can have: [t_J + index - 1, t_J + D - ell + index - 1]
        ([t_J, t_J + D] when ell = 1).

        Raises ConfigError if index is not a whole number in [1, ell] or ran_slot is not a whole
        number; ScheduleError if ran_slot lies outside that window (the scheduler missed a deadline
        or ran a piece before it was released).
        """
        where = f"job {self.job_id!r}"
        index = _whole("index", index, minimum=1, where=where)
        if index > self.length_slots:
            raise ConfigError(f"{where}: piece index must be in [1, {self.length_slots}], got {index}")
        ran_slot = _whole("ran_slot", ran_slot, where=where)
        earliest = self.release_slot + index - 1
        slack = self.deadline_slots if self.length_slots == 1 else self.deadline_slots - self.length_slots
        latest = self.release_slot + slack + index - 1
        if not earliest <= ran_slot <= latest:
            raise ScheduleError(
                f"{where}: piece {index} ran in slot {ran_slot}, outside its possible window "
                f"[{earliest}, {latest}] (t_J = {self.release_slot}, D = {self.deadline_slots}, "
                f"ell = {self.length_slots})"
            )
        if index == self.length_slots:
            return None
        following = index + 1
        work = 1.0 if following < self.length_slots else self.last_piece_work
        return Piece(self.job_id, following, ran_slot + 1, 0, work)


def edf_order(pieces: Iterable[Piece]) -> list[Piece]:
    """Pieces in earliest-deadline-first order (paper: deferral, §II, Lemma 1 and §V-B).

    Sorted by due slot, then release slot, then job_id, then index, so the order is total and does
    not depend on the input order. Returns a new list; the input is not changed.
    """
    return sorted(pieces, key=lambda piece: (piece.due_slot, piece.release_slot, piece.job_id, piece.index))


def _length_ratio(length_s: float, slot_s: float) -> float:
    """T_J / tau after checking both (seconds)."""
    if not (_is_number(slot_s) and math.isfinite(slot_s) and slot_s > 0):
        raise ConfigError(f"slot_s must be a finite number > 0 (seconds), got {slot_s!r}")
    if not (_is_number(length_s) and math.isfinite(length_s) and length_s >= 0):
        raise ConfigError(f"length_s must be a finite number >= 0 (seconds), got {length_s!r}")
    return float(length_s) / float(slot_s)


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))


def _whole(name: str, value: object, *, minimum: int | None = None, where: str) -> int:
    """``value`` as an int if it is a whole number (not a bool, not a float) at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{where}: {name} must be a whole number (slots), got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{where}: {name} must be >= {minimum}, got {value!r}")
    return int(value)


# -- whole jobs: start-by slots, EDF release and fair release under overload ----------------------


def slot_of(time_s: float, grid: SlotGrid) -> int:
    """The slot holding ``time_s`` (seconds): floor((time_s - epoch_s)/slot_s)."""
    return math.floor((time_s - grid.epoch_s) / grid.slot_s)


def start_by_slot(job: Job, grid: SlotGrid) -> int:
    """Latest slot a job may start in and still finish by its deadline: the slot of deadline - length,
    less the job's ``start_margin_s`` (the room its length's learned error asks for; 0 by default)."""
    return slot_of(job.deadline_s - job.length_s - job.start_margin_s, grid)


def release_by_slot(job: Job, limits: NodeLimits) -> int:
    """The slot from which a queued job is due: its start-by slot minus ``due_margin_slots`` (the
    configured margin, or the slots a new node takes to boot if that is more).

    A due job is released even beyond the policy's nodes (up to the maximum), so it goes out in the
    first slot decided at or after this one; with a margin g, g undecided slots in a row still leave
    its start-by slot, the last one in time (``start_by_slot``; lateness counts from that one).
    """
    return start_by_slot(job, limits) - limits.due_margin_slots


def deadline_key(job: Job) -> tuple[float, float, str]:
    """Earliest deadline first: (deadline_s, submit_s, job_id), the order overload releases in."""
    return (job.deadline_s, job.submit_s, job.job_id)


def estimate_slot(job: Job, grid: SlotGrid) -> int:
    """The last slot a job can start in and end by its deadline by its estimated length alone (no
    length-error margin): the slot of deadline - length. Past it, the job is late on its estimate."""
    return slot_of(job.deadline_s - job.length_s, grid)


def need_s(job: Job, slot_s: float) -> float:
    """Node seconds a queued job needs in the slot it is released in: min(length_s, slot_s) (it runs
    on one node from the slot's start; a job longer than the slot takes the node's whole slot); a job
    of w > 1 nodes w x slot_s, its w nodes whole (they start it together, so no other job's time on
    them is counted before it). The planned length, not the expected one (``Job.work_length_s``): the
    release packs a slot by the plan, and EMR queues what a node cannot start yet; packed by the
    expected node time, a node took fewer jobs than it could run and idled."""
    if job.nodes > 1:
        return job.nodes * slot_s
    return min(max(job.length_s, 0.0), slot_s)


def _edf_key(job: Job, grid: SlotGrid) -> tuple[int, float, float, str]:
    """EDF order of whole jobs: (start-by slot, deadline_s, submit_s, job_id), a total order."""
    return (start_by_slot(job, grid), job.deadline_s, job.submit_s, job.job_id)


edf_key = _edf_key


def demand_vector(job: Job, rates: NodeRates) -> np.ndarray:
    """A job's demand vector ``(3,)`` on one scale: node-seconds of CPU, disk and network.

    A job is one task in the DRF note's sense (paper: dynamic DRF note, §2: agent i needs D_ir of
    resource r per task). With sizes, D is the job's estimated work (CPU seconds, and disk and network
    bytes divided by one node's rates): the whole job's, which its width w spreads over w nodes
    without changing it. Without sizes (or with all-zero ones) the job holds w whole nodes for its
    length: w times one node for ``length_s`` (at least one second), w * length_s node-seconds,
    counted as CPU since nothing says which of a node's resources it uses. DRF divides by the dominant
    entry (d_i = D_i / max_r D_ir), so only the direction counts: w by itself changes no dominant
    share, and with w = 1 the vector is the one-node job's.
    """
    cpu_s, disk_bytes, network_bytes = job.demand_vector or (0.0, 0.0, 0.0)
    vector = np.array([cpu_s, disk_bytes / rates.node_disk_bytes_s, network_bytes / rates.node_network_bytes_s])
    if vector.max() > 0:
        return vector
    # A job of unknown (or zero) size needs CPU only.
    return np.array([job.nodes * max(job.length_s, 1.0), 0.0, 0.0])


QUEUED = JobState.QUEUED
RUNNING_STATES = (JobState.RELEASED, JobState.RUNNING)
"""States in which a job holds a node."""
FINAL_STATES = FINISHED_STATES


class JobQueue:
    """The active jobs (queued, released, running) kept between slots, indexed so that a slot costs
    the jobs that change, the jobs released and O(log n), not the queue.

    Queued jobs sit in a ``sortedcontainers.SortedList`` in EDF order, keyed by (start-by slot,
    deadline_s, submit_s, job_id) (``edf_key``), and per tenant twice: in EDF order and by deadline
    (``tenant_by_deadline``, the order overload releases in); released and running jobs in a dict.
    Overload also asks which queued jobs can still be on time by their estimate alone (the slot of
    deadline - length, ``estimate_slot``, is the slot's or later): those that can and those that
    no longer can are kept apart, in EDF order and per tenant by deadline, split at the last slot
    asked about; as slots go by, each job crosses once (O(log n)), so a backlog of lapsed jobs is
    not read again each slot.
    Two more sorted indexes hold every active job by ``Job.seq`` (the store's order of arrival, for
    ``arrived_after``) and by submit_s (``submitted_in``). Adding, updating or removing
    a job costs O(log n). Iterators (``queued``, ``tenant_queued``) must be used up before the queue
    is changed.

    ``slot_s``, ``epoch_s``: the slot grid (seconds) the start-by slots are counted on; it must be
    the controller's. Raises ConfigError for a grid that is not finite with slot_s > 0, and for a
    job whose state is not one of ``JOB_STATES``.
    """

    def __init__(self, slot_s: float, epoch_s: float = 0.0) -> None:
        if isinstance(slot_s, bool) or not isinstance(slot_s, (int, float)) or not (math.isfinite(slot_s) and slot_s > 0):
            raise ConfigError(f"job queue: slot_s must be a finite number > 0 (seconds), got {slot_s!r}")
        if isinstance(epoch_s, bool) or not isinstance(epoch_s, (int, float)) or not math.isfinite(epoch_s):
            raise ConfigError(f"job queue: epoch_s must be a finite number (Unix seconds), got {epoch_s!r}")
        self.slot_s = float(slot_s)
        self.epoch_s = float(epoch_s)
        self._jobs: dict[str, Job] = {}
        self._keys: dict[str, tuple] = {}  # queued job id -> EDF key
        self._edf = SortedList()
        self._by_tenant: dict[str, SortedList] = {}
        # (deadline_s, submit_s, job_id) of queued jobs, per tenant, split at _lapse_slot: on time / lapsed
        self._on_time_by_deadline: dict[str, SortedList] = {}
        self._lapsed_by_deadline: dict[str, SortedList] = {}
        self._on_time_edf = SortedList()  # EDF keys of the queued jobs not lapsed
        self._by_estimate = SortedList()  # (estimate_slot, job_id) of every queued job
        # Per start-by slot of queued jobs: how many, and their need_s in whole nanoseconds (sums
        # that jobs join and leave without float dust building up), for due_need_s.
        self._need_ns_by_start_by: dict[int, int] = {}
        self._count_by_start_by: Counter[int] = Counter()
        self._start_by_slots = SortedList()
        self._lapse_slot: int | None = None  # jobs whose estimate_slot is below it are lapsed; None: none yet
        self._running: dict[str, Job] = {}
        self._running_by_tenant: Counter[str] = Counter()  # nodes held: the running jobs' w
        self._running_nodes = 0
        self._wide_queued = 0  # queued jobs of w > 1
        self._by_seq = SortedList()  # (seq, job_id) of active jobs with a seq
        self._by_submit = SortedList()  # (submit_s, job_id) of every active job

    @classmethod
    def of(cls, jobs: Iterable[Job], slot_s: float, epoch_s: float = 0.0) -> "JobQueue":
        """A queue holding ``jobs`` (done and failed ones left out; of two with one id, the later),
        built with one sort per index: O(n log n)."""
        queue = cls(slot_s, epoch_s)
        latest: dict[str, Job] = {}
        for job in jobs:
            _check_state(job.job_id, job.state)
            latest.pop(job.job_id, None)
            latest[job.job_id] = job
        by_tenant: dict[str, list[tuple]] = {}
        for job_id, job in latest.items():
            if job.state in FINAL_STATES:
                continue
            queue._jobs[job_id] = job
            if job.state == QUEUED:
                key = queue._keys[job_id] = _edf_key(job, queue)
                by_tenant.setdefault(job.tenant, []).append(key)
                queue._wide_queued += job.nodes > 1
            else:
                queue._running[job_id] = job
                queue._running_by_tenant[job.tenant] += job.nodes
                queue._running_nodes += job.nodes
        queue._edf = SortedList(queue._keys.values())
        queue._by_tenant = {tenant: SortedList(keys) for tenant, keys in by_tenant.items()}
        queue._on_time_by_deadline = {tenant: SortedList((deadline, submit, job_id) for _, deadline, submit, job_id in keys) for tenant, keys in by_tenant.items()}
        queue._on_time_edf = SortedList(queue._keys.values())
        queue._by_estimate = SortedList((estimate_slot(queue._jobs[job_id], queue), job_id) for job_id in queue._keys)
        for job_id, key in queue._keys.items():
            queue._count_need(key[0], queue._jobs[job_id], 1)
        queue._by_seq = SortedList((job.seq, job_id) for job_id, job in queue._jobs.items() if job.seq is not None)
        queue._by_submit = SortedList((job.submit_s, job_id) for job_id, job in queue._jobs.items())
        return queue

    # -- changes --------------------------------------------------------------------------------

    def add(self, job: Job) -> None:
        """Add a job, or replace the one with its id: queued ones join EDF order, released and
        running ones the running jobs; a done or failed one is only removed."""
        _check_state(job.job_id, job.state)
        self._discard(job.job_id)
        self._insert(job)

    def update(
        self, job_id: str, state: str, released_s: float | None = None, step_id: str | None = None, run_start_s: float | None = None
    ) -> None:
        """A job's new state: done or failed removes it; released or running moves it to the running
        jobs, with ``released_s``, ``step_id`` and ``run_start_s`` (when EMR started its step) when
        given (else the ones it had). Unknown ids are ignored."""
        _check_state(job_id, state)
        job = self._jobs.get(job_id)
        if job is None:
            return
        if state in FINAL_STATES:
            self._discard(job_id)
            return
        changed = replace(
            job,
            state=state,
            released_s=job.released_s if released_s is None else released_s,
            step_id=job.step_id if step_id is None else step_id,
            run_start_s=job.run_start_s if run_start_s is None else run_start_s,
        )
        # Only the EDF lists or the running jobs change: the seq and submit indexes stay as they are.
        self._unplace(job)
        self._jobs[job_id] = changed
        self._place(changed)

    def _insert(self, job: Job) -> None:
        if job.state in FINAL_STATES:
            return
        self._jobs[job.job_id] = job
        self._place(job)
        if job.seq is not None:
            self._by_seq.add((job.seq, job.job_id))
        self._by_submit.add((job.submit_s, job.job_id))

    def _discard(self, job_id: str) -> Job | None:
        job = self._jobs.pop(job_id, None)
        if job is None:
            return None
        self._unplace(job)
        if job.seq is not None:
            self._by_seq.remove((job.seq, job_id))
        self._by_submit.remove((job.submit_s, job_id))
        return job

    def _place(self, job: Job) -> None:
        """Into the EDF lists (queued) or the running jobs."""
        if job.state == QUEUED:
            key = self._keys[job.job_id] = _edf_key(job, self)
            self._edf.add(key)
            self._by_tenant.setdefault(job.tenant, SortedList()).add(key)
            self._count_need(key[0], job, 1)
            estimate = estimate_slot(job, self)
            self._by_estimate.add((estimate, job.job_id))
            if self._lapsed(estimate):
                self._lapsed_by_deadline.setdefault(job.tenant, SortedList()).add(deadline_key(job))
            else:
                self._on_time_by_deadline.setdefault(job.tenant, SortedList()).add(deadline_key(job))
                self._on_time_edf.add(key)
            self._wide_queued += job.nodes > 1
        else:
            self._running[job.job_id] = job
            self._running_by_tenant[job.tenant] += job.nodes
            self._running_nodes += job.nodes

    def _unplace(self, job: Job) -> None:
        if job.state == QUEUED:
            key = self._keys.pop(job.job_id)
            self._edf.remove(key)
            tenant = self._by_tenant[job.tenant]
            tenant.remove(key)
            if not tenant:
                del self._by_tenant[job.tenant]
            self._count_need(key[0], job, -1)
            estimate = estimate_slot(job, self)
            self._by_estimate.remove((estimate, job.job_id))
            if self._lapsed(estimate):
                _remove(self._lapsed_by_deadline, job.tenant, deadline_key(job))
            else:
                _remove(self._on_time_by_deadline, job.tenant, deadline_key(job))
                self._on_time_edf.remove(key)
            self._wide_queued -= job.nodes > 1
        else:
            del self._running[job.job_id]
            self._running_nodes -= job.nodes
            self._running_by_tenant[job.tenant] -= job.nodes
            if not self._running_by_tenant[job.tenant]:
                del self._running_by_tenant[job.tenant]

    # -- reading --------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Active jobs: queued, released and running."""
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def jobs(self) -> list[Job]:
        """Every active job, in no particular order."""
        return list(self._jobs.values())

    def queued(self) -> Iterator[Job]:
        """Queued jobs in EDF order (earliest start-by slot first)."""
        return (self._jobs[key[3]] for key in self._edf)

    @property
    def queued_count(self) -> int:
        return len(self._edf)

    def running(self) -> list[Job]:
        """Released and running jobs (each holds a node)."""
        return list(self._running.values())

    @property
    def running_count(self) -> int:
        return len(self._running)

    @property
    def running_nodes(self) -> int:
        """Nodes the released and running jobs hold: the sum of their w (``Job.nodes``)."""
        return self._running_nodes

    def running_by_tenant(self) -> dict[str, int]:
        """{tenant: nodes its released and running jobs hold (their w)}, tenants holding none left out."""
        return dict(self._running_by_tenant)

    @property
    def all_narrow(self) -> bool:
        """Whether every queued job is one node wide (w = 1)."""
        return self._wide_queued == 0

    def due_nodes(self, slot: int) -> int:
        """Nodes the queued jobs whose start-by slot is <= ``slot`` need (their w): O(log n), or the
        due jobs when some queued job is wider than a node."""
        if self._wide_queued == 0:
            return self.due_count(slot)
        return sum(job.nodes for job in self.start_by_between(None, slot))

    def queued_tenants(self) -> list[str]:
        """Tenants with queued jobs."""
        return list(self._by_tenant)

    def tenant_queued(self, tenant: str, start_by_from: int | None = None, start_by_before: int | None = None) -> Iterator[Job]:
        """A tenant's queued jobs in EDF order (none for a tenant with nothing queued), only those whose
        start-by slot is in [``start_by_from``, ``start_by_before``) when given: O(log n) to start."""
        keys = self._by_tenant.get(tenant)
        if keys is None:
            return iter(())
        start = 0 if start_by_from is None else keys.bisect_left((start_by_from,))
        stop = len(keys) if start_by_before is None else keys.bisect_left((start_by_before,))
        return (self._jobs[key[3]] for key in keys.islice(start, stop))

    def tenant_by_deadline(self, tenant: str, slot: int, on_time: bool) -> Iterator[Job]:
        """A tenant's queued jobs by deadline (deadline_s, submit_s, job_id) that can still be on time
        in ``slot`` by their estimate alone (``estimate_slot`` >= ``slot``), or, not ``on_time``, those
        that no longer can: O(1) to start once the jobs whose estimate lapsed since the last slot
        asked about have crossed (O(log n) each)."""
        self._lapse_to(slot)
        keys = (self._on_time_by_deadline if on_time else self._lapsed_by_deadline).get(tenant, ())
        return (self._jobs[job_id] for _, _, job_id in keys)

    def on_time_by(self, slot: int, last_slot: int | None = None) -> Iterator[Job]:
        """Queued jobs that can still be on time in ``slot`` by their estimate alone, whose start-by
        slot is ``last_slot`` or earlier (None: any), in EDF order: O(log n + the jobs returned),
        once the lapsed ones have crossed (``tenant_by_deadline``)."""
        self._lapse_to(slot)
        keys = self._on_time_edf if last_slot is None else self._on_time_edf.irange(maximum=(last_slot + 1,), inclusive=(True, False))
        return (self._jobs[key[3]] for key in keys)

    def due_need_s(self, slot: int) -> float:
        """Node seconds the queued jobs whose start-by slot is ``slot`` or earlier need in the slot
        they are released in (``need_s`` each, to the nanosecond): O(the start-by slots up to ``slot``)."""
        return sum(self._need_ns_by_start_by[s] for s in self._start_by_slots.irange(maximum=slot)) / 1e9

    def _count_need(self, start_by: int, job: Job, sign: int) -> None:
        """A queued job of start-by slot ``start_by`` joins (``sign`` 1) or leaves (-1) due_need_s's sums."""
        count = self._count_by_start_by[start_by] = self._count_by_start_by[start_by] + sign
        if count == 0:
            del self._count_by_start_by[start_by], self._need_ns_by_start_by[start_by]
            self._start_by_slots.remove(start_by)
            return
        if count == 1 and sign == 1:
            self._start_by_slots.add(start_by)
            self._need_ns_by_start_by[start_by] = 0
        self._need_ns_by_start_by[start_by] += sign * round(need_s(job, self.slot_s) * 1e9)

    def _lapsed(self, estimate: int) -> bool:
        return self._lapse_slot is not None and estimate < self._lapse_slot

    def _lapse_to(self, slot: int) -> None:
        """Move the split between on time and lapsed to ``slot``: the jobs whose estimate_slot lies
        between the old split and the new one cross, either way."""
        old = self._lapse_slot
        if old == slot:
            return
        lapsing = old is None or slot > old
        low = None if old is None else (min(old, slot),)
        high = (slot if old is None else max(old, slot),)
        crossing = [job_id for _, job_id in self._by_estimate.irange(low, high, inclusive=(True, False))]
        self._lapse_slot = slot
        for job_id in crossing:
            job = self._jobs[job_id]
            by_deadline = deadline_key(job)
            if lapsing:
                _remove(self._on_time_by_deadline, job.tenant, by_deadline)
                self._lapsed_by_deadline.setdefault(job.tenant, SortedList()).add(by_deadline)
                self._on_time_edf.remove(self._keys[job_id])
            else:
                _remove(self._lapsed_by_deadline, job.tenant, by_deadline)
                self._on_time_by_deadline.setdefault(job.tenant, SortedList()).add(by_deadline)
                self._on_time_edf.add(self._keys[job_id])

    def due_count(self, slot: int) -> int:
        """Queued jobs whose start-by slot is <= ``slot``: O(log n)."""
        return self._edf.bisect_left((slot + 1,))

    def start_by_between(self, first_slot: int | None, last_slot: int | None) -> list[Job]:
        """Queued jobs whose start-by slot is in [first_slot, last_slot] (None: unbounded), EDF order;
        O(log n + the jobs returned)."""
        start = 0 if first_slot is None else self._edf.bisect_left((first_slot,))
        stop = len(self._edf) if last_slot is None else self._edf.bisect_left((last_slot + 1,))
        return [self._jobs[key[3]] for key in self._edf.islice(start, stop)]

    def arrived_after(self, seq: int) -> list[Job]:
        """Active jobs with ``job.seq > seq`` in seq order (jobs without a seq never); O(log n + returned)."""
        return [self._jobs[job_id] for _, job_id in self._by_seq.islice(self._by_seq.bisect_left((seq + 1,)))]

    def max_seq(self) -> int | None:
        """The highest seq of an active job, None if none has one."""
        return self._by_seq[-1][0] if self._by_seq else None

    def submitted_in(self, first_slot: int | None, last_slot: int | None) -> list[Job]:
        """Active jobs whose submit slot is in [first_slot, last_slot] (None: unbounded), by submit_s;
        O(log n + the jobs returned)."""
        # Bounds a hair wider than the range (far more than floating-point rounding at a slot's
        # edge, far less than a slot), so no job at an edge is dropped; slot_of decides.
        lo = 0 if first_slot is None else self._by_submit.bisect_left((self._edge_s(first_slot, -1),))
        hi = len(self._by_submit) if last_slot is None else self._by_submit.bisect_left((self._edge_s(last_slot + 1, 1),))
        found = [self._jobs[job_id] for _, job_id in self._by_submit.islice(lo, hi)]
        return [
            job
            for job in found
            if (first_slot is None or slot_of(job.submit_s, self) >= first_slot)
            and (last_slot is None or slot_of(job.submit_s, self) <= last_slot)
        ]


    def _edge_s(self, slot: int, side: int) -> float:
        """The start of ``slot`` (seconds), moved out by a relative 1e-9 in the direction ``side``."""
        edge = self.epoch_s + slot * self.slot_s
        return edge + side * 1e-9 * (abs(edge) + abs(self.epoch_s) + self.slot_s)


def _remove(index: dict[str, SortedList], tenant: str, key: tuple) -> None:
    """``key`` out of the tenant's list in ``index``; a tenant left with none leaves the index."""
    keys = index[tenant]
    keys.remove(key)
    if not keys:
        del index[tenant]


def _check_state(job_id: str, state: str) -> None:
    if state not in JOB_STATES:
        raise ConfigError(f"job {job_id!r}: state must be one of {', '.join(JOB_STATES)}, got {state!r}")


def as_queue(jobs: JobQueue | Iterable[Job], grid: SlotGrid) -> JobQueue:
    """``jobs`` as a JobQueue on ``grid``: itself if it is one (ConfigError if on another grid), else built."""
    if isinstance(jobs, JobQueue):
        if (jobs.slot_s, jobs.epoch_s) != (float(grid.slot_s), float(grid.epoch_s)):
            raise ConfigError(
                f"job queue: its slots (slot_s = {jobs.slot_s:g}, epoch_s = {jobs.epoch_s:g}) are not the controller's "
                f"(slot_s = {grid.slot_s:g}, epoch_s = {grid.epoch_s:g})"
            )
        return jobs
    return JobQueue.of(jobs, grid.slot_s, grid.epoch_s)
