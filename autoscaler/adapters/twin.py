"""The cluster twin behind the Cluster port: :class:`autoscaler.core.twin.ClusterTwin` on a clock.

Every call first plays the twin's events up to the clock's now, so the daemon's slot loop drives
it unchanged, slot by slot, while nodes boot, jobs end and drains time out in between.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from autoscaler.core.errors import ActuationError
from autoscaler.core.model import Job
from autoscaler.core.ports import Clock, StepStatus, TaskGroup
from autoscaler.core.release import MAX_ACTIVE_STEPS
from autoscaler.core.twin import ClusterTwin, TwinBill, TwinConfig


@dataclass
class TwinCluster:
    """The Cluster port on the twin. ``steps(active_only=True)`` lists PENDING and RUNNING steps at
    the cost of the steps not yet seen completed; ``step_state`` raises KeyError for a step never
    added. ``add_step`` refuses a step beyond EMR's ``MAX_ACTIVE_STEPS`` PENDING and RUNNING ones, as
    EMR does (ActuationError, permanent: the daemon fails that job). ``start_nodes`` TASK nodes are requested at the clock's time of construction."""

    clock: Clock
    config: TwinConfig = field(default_factory=TwinConfig)
    start_nodes: int = 0
    twin: ClusterTwin = field(init=False)
    _order: dict[str, int] = field(default_factory=dict)  # step id -> its place in add order
    _active: dict[str, None] = field(default_factory=dict)  # step ids not yet seen completed, in add order
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.twin = ClusterTwin(self.config, now_s=self.clock.now_s())
        if self.start_nodes:
            self.twin.resize(self.clock.now_s(), self.start_nodes)

    def start_slot(self) -> None:
        self.twin.advance(self.clock.now_s())

    def task_group(self) -> TaskGroup:
        self.twin.advance(self.clock.now_s())
        return TaskGroup(group_id="ig-twin", requested=self.twin.requested, running=self.twin.running)

    def resize(self, nodes: int) -> None:
        self.twin.resize(self.clock.now_s(), nodes)

    def add_step(self, job: Job) -> str:
        self.twin.advance(self.clock.now_s())
        if self.twin.active_steps >= MAX_ACTIVE_STEPS:
            raise ActuationError(
                f"job {job.job_id!r}: the cluster already has {self.twin.active_steps} steps PENDING and RUNNING, "
                f"EMR's most is {MAX_ACTIVE_STEPS}", permanent=True,
            )  # fmt: skip
        step_id = f"s-twin{next(self._ids)}"
        self.twin.add_step(
            self.clock.now_s(), step_id, job.job_id, job.length_s, job.submit_s, job.deadline_s, job.nodes,
            name=job.name, submitted_s=job.submitted_length_s,
        )  # fmt: skip
        self._order[step_id] = len(self._order)
        self._active[step_id] = None
        return step_id

    def steps(self, active_only: bool = False, newer_than: frozenset[str] | None = None) -> list[StepStatus]:
        """Steps in the order added (every step ever added unless ``active_only``); only those added
        after the newest step in ``newer_than`` when given (all, if none of them is known)."""
        self.twin.advance(self.clock.now_s())
        after = max((self._order[s] for s in newer_than or () if s in self._order), default=-1)
        chosen = list(self._active) if active_only else list(self._order)
        statuses = [self._status(step_id) for step_id in chosen if self._order[step_id] > after]
        return [s for s in statuses if s.state != "COMPLETED"] if active_only else statuses

    def step_state(self, step_id: str) -> str:
        return self.step_status(step_id).state

    def step_status(self, step_id: str) -> StepStatus:
        self.twin.advance(self.clock.now_s())
        return self._status(step_id)

    def finish(self) -> TwinBill:
        """Run every job to its end from the clock's now, remove every node, and return the bill."""
        self.twin.finish(self.clock.now_s())
        return self.twin.bill()

    def _status(self, step_id: str) -> StepStatus:
        run = self.twin.steps[step_id]
        state = run.state
        if state == "COMPLETED":
            self._active.pop(step_id, None)  # the twin's time never goes back: it stays completed
        # EMR's StartDateTime is the step's first start; a run killed and started again keeps it.
        return StepStatus(run.job_id, step_id, state, created_s=run.added_s, start_s=run.start_s, end_s=run.end_s)
