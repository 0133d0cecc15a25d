"""In-memory stand-ins for the cluster and the clock, for replays and dry runs on a laptop.

They implement the same ports as the EMR adapter and the wall clock, so the daemon's
slot loop runs unchanged on them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job
from autoscaler.core.ports import StepStatus, TaskGroup


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
    """A TASK group and steps held in memory. A step completes once ``length_s`` of simulated time
    has passed since it was added (``clock`` decides what "now" is).

    ``steps(active_only=True)`` and ``step_state`` cost O(steps still running), not O(steps ever
    added): a step seen completed leaves the active index. ``calls``, when given a list, records each
    action as ``("resize", nodes)`` or ``("add_step", job_id, step_id)``: what a dry run would have
    done. ``seeded`` starts one from a real cluster's observed state.
    """

    clock: SimulatedClock
    requested: int = 0
    calls: list[tuple] | None = None
    resizes: list[int] = field(default_factory=list)
    _steps: dict[str, tuple[str, float, float]] = field(default_factory=dict)  # step id -> (job id, added_s, length_s), in add order
    _active: dict[str, None] = field(default_factory=dict)  # step ids not yet seen completed, in add order
    _order: dict[str, int] = field(default_factory=dict)  # step id -> its place in add order
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    @classmethod
    def seeded(
        cls, clock: SimulatedClock, requested: int, running_steps: list[tuple[str, str, float, float]], calls: list[tuple] | None = None
    ) -> FakeCluster:
        """A cluster of ``requested`` TASK nodes running ``running_steps``, each ``(job_id, step_id,
        added_s, length_s)`` (added_s: the job's release time, Unix seconds; length_s: its estimated
        run time), listed in the order they were added. Each completes ``length_s`` after ``added_s``.
        Raises ConfigError on a negative or fractional ``requested``, a step id given twice, or a
        time or length that is not a finite number (a length < 0)."""
        if isinstance(requested, bool) or int(requested) != requested or requested < 0:
            raise ConfigError(f"requested must be a whole number of nodes >= 0, got {requested!r}")
        cluster = cls(clock=clock, requested=int(requested), calls=calls)
        for job_id, step_id, added_s, length_s in running_steps:
            if step_id in cluster._steps:
                raise ConfigError(f"running_steps: step id {step_id!r} given twice")
            if not math.isfinite(added_s):
                raise ConfigError(f"running_steps: step {step_id!r} has added_s {added_s!r}, expected finite Unix seconds")
            if not (math.isfinite(length_s) and length_s >= 0):
                raise ConfigError(f"running_steps: step {step_id!r} has length_s {length_s!r}, expected a finite number >= 0")
            cluster._put(job_id, step_id, float(added_s), float(length_s))
        return cluster

    def start_slot(self) -> None:
        pass

    def task_group(self) -> TaskGroup:
        return TaskGroup(group_id="ig-fake", requested=self.requested, running=self.requested)

    def resize(self, nodes: int) -> None:
        self.requested = int(nodes)
        self.resizes.append(self.requested)
        if self.calls is not None:
            self.calls.append(("resize", self.requested))

    def add_step(self, job: Job) -> str:
        step_id = f"s-fake{next(self._ids)}"
        self._put(job.job_id, step_id, self.clock.now_s(), job.length_s)
        if self.calls is not None:
            self.calls.append(("add_step", job.job_id, step_id))
        return step_id

    def steps(self, active_only: bool = False, newer_than: frozenset[str] | None = None) -> list[StepStatus]:
        """Steps in the order added (every step ever added unless ``active_only``); only those added
        after the newest step in ``newer_than`` when given (all, if none of them is known)."""
        after = max((self._order[s] for s in newer_than or () if s in self._order), default=-1)
        if active_only:
            statuses = [self._status(step_id) for step_id in list(self._active) if self._order[step_id] > after]
            return [s for s in statuses if s.state == "RUNNING"]
        return [self._status(step_id) for step_id in self._steps if self._order[step_id] > after]

    def step_state(self, step_id: str) -> str:
        """The state of one step; KeyError for a step never added."""
        return self._status(step_id).state

    def step_status(self, step_id: str) -> StepStatus:
        """One step; KeyError for a step never added."""
        return self._status(step_id)

    def _put(self, job_id: str, step_id: str, added_s: float, length_s: float) -> None:
        self._order[step_id] = len(self._order)
        self._steps[step_id] = (job_id, added_s, length_s)
        self._active[step_id] = None

    def _status(self, step_id: str) -> StepStatus:
        job_id, added_s, length_s = self._steps[step_id]
        state = "COMPLETED" if self.clock.now_s() >= added_s + length_s else "RUNNING"
        if state == "COMPLETED":
            self._active.pop(step_id, None)  # a simulated clock never goes back: it stays completed
        # It starts when added (the fake has no queue) and ends length_s later.
        end_s = added_s + length_s if state == "COMPLETED" else None
        return StepStatus(job_id, step_id, state, created_s=added_s, start_s=added_s, end_s=end_s)
