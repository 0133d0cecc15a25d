"""The adapters' interfaces. The controller never imports an adapter; the daemon wires them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from autoscaler.model import Job


@dataclass(frozen=True)
class TaskGroup:
    """The EMR cluster's TASK instance group: id, nodes requested and nodes running."""

    group_id: str
    requested: int
    running: int


@dataclass(frozen=True)
class TaskInstance:
    """One EC2 instance of the TASK group: its id and when it was up, Unix seconds (``end_s`` None: still up)."""

    instance_id: str
    start_s: float
    end_s: float | None


@dataclass(frozen=True)
class StepStatus:
    """An EMR step of ours: the job id read back from its name, the step id and EMR's state."""

    job_id: str
    step_id: str
    state: str  # PENDING | RUNNING | COMPLETED | CANCELLED | FAILED | INTERRUPTED | ...


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


class JobStore(Protocol):
    """Durable queue and controller state. Every method is one transaction."""

    def submit(self, job: Job) -> bool:
        """Add a queued job; False if the same job id is already stored with the same content.
        Raises SubmitError if the id is stored with different content."""

    def active_jobs(self) -> list[Job]:
        """Jobs not yet done or failed."""

    def all_jobs(self) -> list[Job]:
        """Every job, oldest submission first."""

    def load_state(self) -> dict | None:
        """The controller state document saved by the last ``commit_slot``, or None."""

    def commit_slot(self, slot: int, state: dict, released: dict[str, tuple[float, str]], decision: dict) -> None:
        """In one transaction: save the controller state, mark jobs released
        ({job id: (released_s, step_id)}) and append the slot's decision to the log."""

    def set_states(self, updates: dict[str, str]) -> None:
        """Set job states from EMR step states ({job id: 'running' | 'done' | 'failed'})."""

    def decisions(self) -> list[dict]:
        """The decision log, oldest first."""
