"""The adapters' interfaces. The controller never imports an adapter; the daemon wires them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from autoscaler.core import defaults
from autoscaler.core.model import Job, JobState

if TYPE_CHECKING:
    from autoscaler.core.controller import CarbonWindow, SignalUnavailable


@dataclass(frozen=True)
class TaskGroup:
    """The EMR cluster's TASK instance group: id, nodes requested and nodes running, and its EC2
    ``instance_type`` when the cluster says (not compared: a group is the same group whatever is read of it)."""

    group_id: str
    requested: int
    running: int
    instance_type: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TaskInstance:
    """One EC2 instance of the TASK group: its id and when it was up, Unix seconds (``end_s`` None: still up)."""

    instance_id: str
    start_s: float
    end_s: float | None


@dataclass(frozen=True)
class StepStatus:
    """An EMR step of ours: the job id read back from its name, the step id, EMR's state, and when
    EMR created, started and ended the step (``created_s``, ``start_s``, ``end_s``: Unix seconds, EMR's
    Status.Timeline CreationDateTime, StartDateTime and EndDateTime; None where EMR does not say yet)."""

    job_id: str
    step_id: str
    state: str  # PENDING | RUNNING | COMPLETED | CANCELLED | FAILED | INTERRUPTED | ...
    created_s: float | None = field(default=None, compare=False)  # when, not which or in what state
    start_s: float | None = field(default=None, compare=False)
    end_s: float | None = field(default=None, compare=False)

    @property
    def run(self) -> tuple[float, float] | None:
        """(start_s, end_s) of a step that COMPLETED with both times known, else None: the run a
        learned length counts (``autoscaler.core.learned``); a failed or cancelled run is not its length."""
        if self.state != "COMPLETED" or self.start_s is None or self.end_s is None:
            return None
        return (self.start_s, self.end_s)


JOB_STATE_BY_STEP_STATE = {
    "PENDING": JobState.RELEASED,
    "CANCEL_PENDING": JobState.RELEASED,
    "RUNNING": JobState.RUNNING,
    "COMPLETED": JobState.DONE,
    "CANCELLED": JobState.FAILED,
    "FAILED": JobState.FAILED,
    "INTERRUPTED": JobState.FAILED,
}
"""EMR step state -> our job state (see ``autoscaler.core.model.JOB_STATES``)."""


def step_states_to_job_states(statuses: Iterable[StepStatus]) -> dict[str, str]:
    """Map our steps' EMR states to job states: {job id: 'released' | 'running' | 'done' | 'failed'}.

    PENDING and CANCEL_PENDING -> 'released', RUNNING -> 'running', COMPLETED -> 'done',
    CANCELLED, FAILED and INTERRUPTED -> 'failed'. A job id seen twice takes its last status
    (``EmrCluster.steps`` lists oldest first, so the newest step wins). A state EMR may add
    later is left out, so the job keeps its stored state rather than taking a guessed one.
    """
    job_states: dict[str, str] = {}
    for status in statuses:
        job_state = JOB_STATE_BY_STEP_STATE.get(status.state)
        if job_state is not None:
            job_states[status.job_id] = job_state
    return job_states


class Clock(Protocol):
    def now_s(self) -> float:
        """Unix seconds."""


class Cluster(Protocol):
    """The EMR cluster, through its TASK instance group and its steps. Calls block until AWS answers."""

    def start_slot(self) -> None:
        """Called as each slot begins, before any other call (the EMR adapter renews its client)."""

    def task_group(self) -> TaskGroup:
        """Read the TASK group. Raises ActuationError when the cluster or group is missing."""

    def resize(self, nodes: int) -> None:
        """Ask for ``nodes`` TASK nodes (modify_instance_groups). Raises ActuationError."""

    def add_step(self, job: Job) -> str:
        """Add the job's step (add_job_flow_steps) named with its job id; returns the step id."""

    def steps(self, active_only: bool = False, newer_than: frozenset[str] | None = None) -> list[StepStatus]:
        """Our steps on the cluster (list_steps, all pages); only pending or running ones if ``active_only``;
        only those added after the newest step in ``newer_than`` (step ids) when given."""

    def step_state(self, step_id: str) -> str:
        """EMR's state of one step (describe_step)."""

    def step_status(self, step_id: str) -> StepStatus:
        """One step with its state and times (describe_step)."""


class JobStore(Protocol):
    """Durable queue, controller state and decision log. Every method is one transaction; times are
    Unix seconds. Each job has ``seq``, its place in the order of arrival (1, 2, ...; it only grows),
    so a slot reads only what arrived since the last (``jobs_after``) and writes once (``commit_slot``):
    its cost does not grow with the jobs ever stored. Raises StoreError when the store fails."""

    def submit(self, job: Job) -> bool:
        """Add a job (normally queued; it gets the next seq); False if the same job id is already
        stored with the same content (a retry: nothing changes). Raises SubmitError if the id is
        stored with different content, or the job is malformed."""

    def submit_many(self, jobs: Iterable[Job]) -> int:
        """``submit`` for each job in one transaction; returns how many were added (retries, also of
        an earlier job in ``jobs``, are skipped). Raises SubmitError naming the first refused job, and
        then nothing is written."""

    def active_jobs(self) -> list[Job]:
        """Jobs queued, released or running (seq filled), oldest submission first. Reads all of them:
        a daemon's first slot."""

    def all_jobs(self) -> list[Job]:
        """Every job stored (seq filled), oldest submission first. Reads the whole store: not per slot."""

    def job(self, job_id: str) -> Job | None:
        """The stored job ``job_id`` (seq filled) as ``all_jobs`` has it, or None if none is. Reads
        that one job: a resubmission's look-up costs the same however many jobs are stored."""

    def jobs_after(self, seq: int) -> list[Job]:
        """Jobs with ``job.seq > seq``, any state, in arrival order. Raises StoreError if ``seq`` is not
        a whole number."""

    def max_seq(self) -> int:
        """The seq of the last job that arrived; 0 before the first. Never decreases (retention
        deleting that job does not lower it)."""

    def recent_step_ids(self, limit: int = 256, released_before_s: float | None = None) -> frozenset[str]:
        """Step ids of the ``limit`` jobs released last (newest released_s, then seq), only those
        released before ``released_before_s`` when given: where a listing of the cluster's steps,
        newest first, may stop when looking for a step added but not recorded."""

    def load_state(self) -> dict | None:
        """The controller state document saved by the last ``commit_slot``, or None."""

    def last_slot(self) -> int | None:
        """The slot of the last ``commit_slot``, or None before the first."""

    def commit_slot(
        self,
        slot: int,
        state: dict,
        released: dict[str, tuple[float, str]],
        decision: dict,
        *,
        states: dict[str, str] | None = None,
        runs: dict[str, tuple[float, float]] | None = None,
        prune_before_s: float | None = None,
        prune_decisions_before_slot: int | None = None,
        prune_limit_rows: int = defaults.PRUNE_ROWS_PER_COMMIT,
    ) -> None:
        """In one transaction, in this order: set job ``states`` ({job id: 'running' | 'done' | 'failed'
        ...}, from EMR step states) and ``runs`` (as ``set_runs``), mark jobs released ({job id: (released_s, step_id)}), save the
        controller state and the slot's decision (replacing one of the same slot), settle (delete)
        the intents of this slot and earlier ones, and, when asked, delete done/failed jobs released (else submitted) before ``prune_before_s`` and decisions of
        slots before ``prune_decisions_before_slot``, at most ``prune_limit_rows`` of each per call.
        Unknown job ids are ignored. Raises StoreError, with nothing written, on a state not in
        JOB_STATES, a document that is not JSON, a bad bound, or a store failure."""

    def commit_release(self, slot: int, released: dict[str, tuple[float, str]], *, states: dict[str, str] | None = None) -> None:
        """A release between slots, in one transaction: set job ``states`` (a refused step's job
        'failed'), mark jobs released ({job id: (released_s, step_id)}) as ``commit_slot`` does, and
        settle the intents of slot ``slot`` and earlier ones; the decision and the controller state
        are untouched. Unknown job ids are ignored. Raises StoreError, with nothing written, on a
        bad state or slot, or a store failure."""

    def record_intent(self, slot: int, job_ids: list[str], nodes: int) -> list[str]:
        """Write, in its own small transaction, what slot ``slot`` is about to do on the cluster (add
        the steps of ``job_ids``, ask for ``nodes`` TASK nodes), before doing it: a store that cannot
        write stops the slot before the cluster is touched. ``commit_slot`` of this slot (or a later
        one) settles it. Returns the ids of ``job_ids`` cancelled since they were read, left out of
        the intent: the caller releases none of them. Raises StoreError, with nothing written, on a
        bad argument or a store failure ("disk full: ..." when the disk is full)."""

    def pending_intent(self) -> dict | None:
        """The newest unsettled intent, ``{"slot", "job_ids", "nodes", "recorded_s"}``, or None: what a
        slot that stopped before its commit was about to do (for the restart to log)."""

    def set_states(self, updates: dict[str, str]) -> None:
        """Set job states from EMR step states ({job id: 'running' | 'done' | 'failed'}) in their own
        transaction; ``commit_slot(states=...)`` does the same within the slot's one."""

    def set_runs(self, runs: dict[str, tuple[float, float]]) -> None:
        """Record finished steps' runs ({job id: (run_start_s, run_end_s)}, EMR's step start and end)
        in their own transaction; ``commit_slot(runs=...)`` does the same within the slot's one.
        Unknown job ids are ignored. Raises StoreError, with nothing written, on a time that is not a
        finite number or an end before its start."""

    def run_lengths_s(self, tenant: str, name: str, ended_by_s: float, limit: int = defaults.LEARNED_RUNS) -> list[float]:
        """Run times (run_end_s - run_start_s, s) of the ``limit`` newest done jobs of ``tenant`` named
        ``name`` whose run ended at or before ``ended_by_s``, oldest first: what a learned length is
        drawn from (``autoscaler.core.learned``)."""

    def recent_runs(self, limit: int = defaults.LENGTH_ERROR_RUNS) -> list[tuple[float, float, bool]]:
        """(planned length_s, run time s, planned at a learned length) of the ``limit`` newest done
        jobs with a run recorded, by run end, oldest first: what the length error a new job's start
        margin is drawn from is rebuilt from at start-up (``autoscaler.core.learned.LengthErrors``)."""

    def decisions(self, first_slot: int | None = None, last_slot: int | None = None) -> list[dict]:
        """The decision log, oldest first; only ``first_slot <= slot <= last_slot`` when given."""

    def decision(self, slot: int) -> dict | None:
        """The decision of one slot, or None (not decided, or pruned)."""


class Telemetry(Protocol):
    """What the slot loop reports as it runs: metrics and health (the Prometheus adapter is
    ``autoscaler.adapters.health.Telemetry``). Calls return at once; none raises. Energies are
    modelled Wh, times ms."""

    def slot_done(
        self,
        decision,
        solve_ms: float,
        energy_wh: float,
        follow_wh: float,
        released: list[str] | None = None,
        late: list[str] | None = None,
        healthy: bool = True,
        group: TaskGroup | None = None,
        queued: int | None = None,
        overran_by_tenant: dict[str, int] | None = None,
    ) -> None:
        """A decided slot (``decision``: controller.Decision): the job ids really released and late,
        whether it could read and change EMR, the TASK group as the slot left it (None: unknown),
        the jobs left queued, and {tenant: jobs whose step ended this slot after their deadline}."""

    def released_between_slots(self, released: list[str], late: list[str]) -> None:
        """Jobs released between slots (``SlotRunner.release_between_slots``): the job ids whose steps
        were added, and those of them released after their start-by slot."""

    def slot_ok(self) -> None:
        """A slot ran to the end (decided, or found already decided)."""

    def slot_failed(self) -> None:
        """A slot failed part-way."""

    def carbon_signal(self, value: float | None, unit: str = "", fallback: str = "") -> None:
        """A hold+carbon slot's signal ``value`` in ``unit``, or None and why (``fallback``)."""

    def steps_unknown(self, count: int) -> None:
        """How many of our EMR steps name jobs the store does not hold (at a start or restart)."""


class SignalFeed(Protocol):
    """The ``[carbon]`` signal as the daemon reads it, slot by slot
    (:class:`autoscaler.adapters.carbon_feed.CarbonFeed` reads files and URLs).

    ``fallback``: why the last ``window`` returned None (``SignalUnavailable``), else None.
    """

    fallback: SignalUnavailable | None

    def window(self, now_s: float, slot_s: float, deadline_slots: int, epoch_s: float = 0.0) -> CarbonWindow | None:
        """hold+carbon's window (shape (3D + 1,), in gCO2eq/kWh or the price's unit) for the slot of
        ``slot_s`` seconds from ``epoch_s`` (Unix s) that holds ``now_s``, or None without a usable
        signal (``fallback`` says why). Never blocks on a read, never raises for the signal's sake."""
