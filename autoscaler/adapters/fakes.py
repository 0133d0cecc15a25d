"""In-memory stand-ins for the cluster and the clock, for replays and dry runs on a laptop.

They implement the same ports as the EMR adapter and the wall clock, so the daemon's
slot loop runs unchanged on them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from autoscaler.model import Job
from autoscaler.ports import StepStatus, TaskGroup


@dataclass
class SimulatedClock:
    """A clock that moves only when told to (Unix seconds)."""

    time_s: float

    def now_s(self) -> float:
        return self.time_s

    def advance(self, seconds: float) -> None:
        self.time_s += seconds


@dataclass
class FakeCluster:
    """A TASK group and steps held in memory. A step completes once ``length_s`` of
    simulated time has passed since it was added (``clock`` decides what "now" is)."""

    clock: SimulatedClock
    requested: int = 0
    _steps: dict[str, tuple[str, float, float]] = field(default_factory=dict)  # job id -> (step id, added_s, length_s)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _job_by_step: dict[str, str] = field(default_factory=dict)
    resizes: list[int] = field(default_factory=list)

    def start_slot(self) -> None:
        pass

    def task_group(self) -> TaskGroup:
        return TaskGroup(group_id="ig-fake", requested=self.requested, running=self.requested)

    def resize(self, nodes: int) -> None:
        self.requested = int(nodes)
        self.resizes.append(self.requested)

    def add_step(self, job: Job) -> str:
        step_id = f"s-fake{next(self._ids)}"
        self._steps[job.job_id] = (step_id, self.clock.now_s(), job.length_s)
        self._job_by_step[step_id] = job.job_id
        return step_id

    def steps(self, active_only: bool = False, newer_than: frozenset[str] | None = None) -> list[StepStatus]:
        statuses = [StepStatus(job_id, step_id, self._state(added, length)) for job_id, (step_id, added, length) in self._steps.items()]
        if newer_than:
            known = [i for i, s in enumerate(statuses) if s.step_id in newer_than]
            statuses = statuses[known[-1] + 1 :] if known else statuses
        return [s for s in statuses if s.state == "RUNNING"] if active_only else statuses

    def step_state(self, step_id: str) -> str:
        _, added, length = self._steps[self._job_by_step[step_id]]
        return self._state(added, length)

    def _state(self, added_s: float, length_s: float) -> str:
        return "COMPLETED" if self.clock.now_s() >= added_s + length_s else "RUNNING"
