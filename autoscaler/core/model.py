"""Frozen value types shared by the core, the adapters and the CLI.

Symbols follow the deferral paper: L_t is the workload released in slot t (in
servers), m_t the capacity (servers on), x_t the work assigned to slot t, D the
deadline in slots, beta the switching cost, e0/e1 the operating cost C(u) = e0 + e1*u.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from autoscaler.core import defaults
from autoscaler.core.errors import ConfigError

MIB = 1024 * 1024
"""Bytes in the paper's "MB" (HDFS block sizes and the s/MB rates are binary megabytes)."""

MAX_SLOTS = 1_000_000
"""Most slots a window or load curve may have: about 35 days of 3-second slots, or a century of
hourly ones. Beyond it the arrays alone take gigabytes, so it is refused rather than attempted."""


DEFAULT_MAX_NODES = defaults.MAX_NODES
"""The most task nodes the daemon asks for unless told otherwise (``cluster.max_nodes``, ``--max-nodes``):
the one default of every path (run, run --dry-run, run --replay, report)."""


@dataclass(frozen=True)
class TraceJob:
    """One job of a SWIM trace; byte sizes are S, S', S'' of the paper's §V-A."""

    job_id: str
    submit_s: float
    gap_s: float
    map_input_bytes: float
    shuffle_bytes: float
    reduce_output_bytes: float
    deadline_slots: int | None = None


@dataclass(frozen=True)
class Trace:
    """A parsed SWIM trace: jobs sorted by submit time, plus what the reader had to fix."""

    path: str
    jobs: tuple[TraceJob, ...]
    skipped_lines: int = 0
    out_of_order_lines: int = 0


@dataclass(frozen=True)
class LengthModel:
    """Parameters of the MapReduce job-length estimate (paper: deferral, §V-A and §VI-A).

    Rates are in MB/s and s/MB with MB = MiB. ``map_slots`` is the M of the
    paper's case split (mappers completed per round); ``None`` means X, every
    mapper in one round, which is what lambda_m = 1 assumes.
    """

    block_bytes: float = defaults.BLOCK_MB * MIB
    map_s_per_mb: float = defaults.MAP_S_PER_MB
    reduce_s_per_mb: float = defaults.REDUCE_S_PER_MB
    read_mb_s: float = defaults.READ_MB_S
    write_mb_s: float = defaults.WRITE_MB_S
    network_mb_s: float = defaults.NETWORK_MB_S
    map_rounds: int = 1
    reduce_rounds: int = 1
    map_slots: int | None = None

    def __post_init__(self) -> None:
        for name in ("block_bytes", "read_mb_s", "write_mb_s", "network_mb_s"):
            require_positive(name, getattr(self, name))
        for name in ("map_s_per_mb", "reduce_s_per_mb"):
            require_non_negative(name, getattr(self, name))
        for name in ("map_rounds", "reduce_rounds"):
            if int(getattr(self, name)) != getattr(self, name) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a whole number >= 1, got {getattr(self, name)!r}")
        if self.map_slots is not None and (int(self.map_slots) != self.map_slots or self.map_slots < 1):
            raise ConfigError(f"map_slots must be a whole number >= 1 or unset, got {self.map_slots!r}")


@dataclass(frozen=True, eq=False)
class LoadByDeadline:
    """L_{d,t}, the work active in slot t whose deadline is d slots, stored by the deadlines that
    have work (paper: deferral, §IV).

    ``deadlines``: the distinct deadlines d in slots, increasing, shape (K,); the last is nu.
    ``load``: ``load[k, t]`` = L_{deadlines[k], t} in servers, shape (K, n_slots).
    The rows of the (nu+1, n_slots) matrix that are not listed are zero and not stored, so it takes
    K * n_slots * 8 bytes: K is the k-means classes plus the job lengths some deadlines were raised
    to, a few hundred where nu can be tens of thousands. Raises ConfigError for shapes that do not fit.
    """

    deadlines: np.ndarray
    load: np.ndarray

    def __post_init__(self) -> None:
        deadlines, load = np.asarray(self.deadlines), np.asarray(self.load)
        if deadlines.ndim != 1 or deadlines.size == 0 or load.ndim != 2 or load.shape[0] != deadlines.size:
            raise ConfigError(
                f"load by deadline: expected deadlines of shape (K,), K >= 1, and load of shape (K, n_slots), "
                f"got {deadlines.shape} and {load.shape}"
            )
        if not np.issubdtype(deadlines.dtype, np.integer) or deadlines[0] < 0 or (np.diff(deadlines) <= 0).any():
            raise ConfigError("load by deadline: deadlines must be whole numbers >= 0 in increasing order")

    @classmethod
    def from_dense(cls, matrix: np.ndarray) -> "LoadByDeadline":
        """From the dense L_{d,t}, shape (nu+1, n_slots): its non-zero rows, and row nu always,
        which fixes the horizon n_slots + nu."""
        matrix = np.asarray(matrix, dtype=float)
        if matrix.ndim != 2 or matrix.shape[0] == 0:
            raise ConfigError(f"load by deadline: expected shape (nu+1, n_slots) with nu >= 0, got {matrix.shape}")
        keep = matrix.any(axis=1)
        keep[-1] = True
        return cls(deadlines=np.flatnonzero(keep).astype(np.int64), load=matrix[keep])

    @property
    def max_deadline(self) -> int:
        """nu, the largest deadline."""
        return int(self.deadlines[-1])

    @property
    def n_slots(self) -> int:
        return int(self.load.shape[1])

    def dense(self) -> np.ndarray:
        """The whole (nu+1, n_slots) matrix; for small cases and tests only."""
        matrix = np.zeros((self.max_deadline + 1, self.n_slots))
        matrix[self.deadlines] = self.load
        return matrix


@dataclass(frozen=True, eq=False)
class Workload:
    """Workload curves over a window of slots (paper: deferral, §VI-A, Fig. 8).

    ``released``: jobs submitted per slot, shape (n_slots,).
    ``active``: L_t, jobs active per slot (each job counted in every slot it runs), shape (n_slots,).
    ``clipped_job_slots``: job-slots that fell past the window's end and were dropped.
    """

    source: str
    slot_s: float
    released: np.ndarray
    active: np.ndarray
    n_jobs: int = 0
    clipped_jobs: int = 0
    clipped_job_slots: int = 0
    jobs_after_window: int = 0
    skipped_lines: int = 0
    out_of_order_lines: int = 0
    active_by_deadline: LoadByDeadline | None = None
    """L_{d,t}: jobs active in slot t whose deadline is d slots, by the deadlines jobs have; None for a load curve."""
    notes: tuple[str, ...] = ()
    """Warnings about the input for the operator: jobs whose estimated length exceeds the window."""

    @property
    def n_slots(self) -> int:
        return int(self.active.shape[0])


@dataclass(frozen=True)
class CostParams:
    """Cost model of eq. (1)-(3): C(u) = e0 + e1*u per server-slot, beta per server switched.

    ``max_servers`` is the cap M on m_t; ``None`` means uncapped.
    Defaults are the paper's §VI-A choice (e0=1, e1=0, beta=12 for 5-minute slots).
    """

    e0: float = defaults.E0
    e1: float = defaults.E1
    beta: float = defaults.BETA
    max_servers: float | None = None

    def __post_init__(self) -> None:
        require_non_negative("e0", self.e0)
        require_non_negative("e1", self.e1)
        require_non_negative("beta", self.beta)
        if self.max_servers is not None:
            require_positive("max_servers", self.max_servers)


@dataclass(frozen=True)
class CostBreakdown:
    """Total cost split into its operating and switching parts (eq. 2)."""

    operating: float
    switching: float

    @property
    def total(self) -> float:
        return self.operating + self.switching


@dataclass(frozen=True, eq=False)
class Schedule:
    """A policy's output over the horizon (window + D slots).

    ``capacity``: m_t, servers on, shape (horizon,).
    ``assigned``: x_t, work run in slot t (servers' worth), shape (horizon,).
    ``solve_ms_per_slot``: wall time of the policy divided by the slots it decided.
    """

    policy: str
    capacity: np.ndarray
    assigned: np.ndarray
    solve_ms_per_slot: float = 0.0
    notes: dict = field(default_factory=dict)

    @classmethod
    def online(cls, policy: str, capacity: np.ndarray, elapsed_ms: float, notes: dict | None = None) -> "Schedule":
        """A schedule of an online policy that never idles a server: x_t = m_t (paper: deferral, §III-IV)."""
        return cls(
            policy=policy,
            capacity=capacity,
            assigned=capacity.copy(),
            solve_ms_per_slot=elapsed_ms / max(1, capacity.shape[0]),
            notes=notes or {},
        )


def require_positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")


def require_non_negative(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")


class JobState(str, Enum):
    """A job's life: queued (in our store) -> released (an EMR step was added) -> running -> done | failed;
    or queued -> cancelled (CancelSteps through ``autoscaler serve`` before it was released).
    "Late" is not a state: a job is late (missed its deadline) when it was not released by the end of
    its start-by slot, whatever its state since; see ``autoscaler.core.lateness``.

    Each state is its lower-case name as a string (``JobState.QUEUED == "queued"``), as the store,
    the JSON and the command line write it."""

    QUEUED = "queued"
    RELEASED = "released"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


JOB_STATES = tuple(state.value for state in JobState)
"""Every job state's name, in the order of a job's life."""

ACTIVE_STATES = (JobState.QUEUED.value, JobState.RELEASED.value, JobState.RUNNING.value)
"""A job the daemon still follows: queued, or holding a node."""

FINISHED_STATES = (JobState.DONE.value, JobState.FAILED.value, JobState.CANCELLED.value)
"""A job whose step has ended, or that was cancelled before it had one; retention prunes these."""


@dataclass(frozen=True)
class StepSpec:
    """The EMR step a job runs: a jar with arguments, or a command-runner command (``jar`` empty)."""

    jar: str = "command-runner.jar"
    args: tuple[str, ...] = ()
    main_class: str | None = None


@dataclass(frozen=True)
class Job:
    """A job submitted to the daemon.

    Times are Unix seconds. ``length_s`` is the estimated run time (given, or from the
    §V-A model). ``deadline_s`` is when it must be finished. The job is released as an
    EMR step whose name carries ``job_id``. ``demand_vector`` is its estimated resource use
    (CPU seconds, disk bytes, network bytes) when its sizes were given (``estimate_demand_vector``),
    else None; its tenant's dynamic DRF demand comes from it. ``deadline_text``: the deadline as
    submitted ("2h", or an ISO-8601 time), which decides whether a resubmission is the same job
    (``autoscaler.core.intake.deadline_difference``); None for jobs not submitted that way (a trace's).
    ``nodes``: w, the whole TASK nodes it runs on at once (its work is w node-slots per slot it runs; it
    starts only when w nodes are free). ``length_s`` is the length it is planned at; ``prior_length_s``
    the length it was submitted with (``--length-s`` or the size model) when a learned estimate replaced
    it (None: not replaced), and ``length_source`` says where ``length_s`` came from ("given", "size
    model", "p90 of 6 runs"; None for a job not submitted through intake). ``run_start_s`` and
    ``run_end_s``: when its step started and ended on the cluster (EMR's step timeline), once known.
    ``seq``: the job's place in the store's order of arrival (1, 2, ...; set by the store, None for a
    job not read from one); the daemon reads only the jobs after the last it has seen. Not compared.
    ``start_margin_s``: seconds before (deadline - length) by which the job is started, to allow for a
    length that runs longer than planned (``autoscaler.core.learned.LengthErrors``: the slot loop sets
    it when the job joins its queue; 0: none). ``work_factor``: how much longer than planned jobs like
    it have run (``LengthErrors.job_work_factor``: the mean of min(run / plan, slot / length), >= 1; 1
    for a job of a slot or more; the slot loop sets it with the margin), so the nodes are planned for
    ``work_length_s``. Not stored, not compared.
    """

    job_id: str
    name: str
    tenant: str
    submit_s: float
    deadline_s: float
    length_s: float
    step: StepSpec
    state: str = JobState.QUEUED
    released_s: float | None = None
    step_id: str | None = None
    demand_vector: tuple[float, float, float] | None = None
    deadline_text: str | None = None
    nodes: int = 1
    prior_length_s: float | None = None
    length_source: str | None = None
    run_start_s: float | None = None
    run_end_s: float | None = None
    seq: int | None = field(default=None, compare=False)
    start_margin_s: float = field(default=0.0, compare=False)
    work_factor: float = field(default=1.0, compare=False)

    @property
    def work_length_s(self) -> float:
        """The node time the job is expected to take on each of its nodes, s: ``length_s`` x ``work_factor``
        (>= 0). The policy's work (m_t) is planned with it (``autoscaler.core.slot_work``); the release
        packs a slot by ``length_s``, and the start-by slot keeps ``length_s`` and ``start_margin_s``."""
        return max(self.length_s, 0.0) * self.work_factor

    @property
    def submitted_length_s(self) -> float:
        """The length the job came with (``--length-s``, or the §V-A size model's), s: ``prior_length_s``,
        or ``length_s`` when no other estimate replaced it."""
        return self.length_s if self.prior_length_s is None else self.prior_length_s

    @property
    def overran(self) -> bool:
        """Whether it finished after its deadline (``run_end_s`` > ``deadline_s``); False until it ends."""
        return self.run_end_s is not None and self.run_end_s > self.deadline_s
