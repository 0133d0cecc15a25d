"""A controller driven slot by slot from a list of jobs, for the controller's tests (no store, no cluster).

Jobs join at their submit slot; a released job runs for its length and then leaves; ``tick`` decides
every slot but the skipped ones (the daemon down), with a carbon window per slot when one is given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from autoscaler.core.controller import ControllerConfig, Decision, PolicyState, tick
from autoscaler.core.model import Job, StepSpec


@dataclass
class SlotRun:
    """What a run left: the decisions (one per slot decided), the jobs still active at the end
    (``live``), the jobs that ran to their end (``ended``), each released job's release slot, and
    the controller's last state."""

    decisions: list[Decision]
    live: dict[str, Job]
    ended: dict[str, Job]
    released_in: dict[str, int]
    state: PolicyState


def simulate_slots(
    jobs: list[Job],
    config: ControllerConfig,
    slots: int,
    *,
    skipped: frozenset[int] = frozenset(),
    windows: Callable[[int], object] | None = None,
) -> SlotRun:
    """Run slots 0 .. ``slots`` - 1 of ``config`` (epoch 0) on ``jobs``; see the module docstring.
    ``windows(t)``: the carbon window (or its absence) ``tick`` is given in slot t."""
    live: dict[str, Job] = {}
    ended: dict[str, Job] = {}
    released_in: dict[str, int] = {}
    state = PolicyState()
    decisions = []
    pending = sorted(jobs, key=lambda j: j.submit_s)
    for t in range(slots):
        now_s = t * config.slot_s
        while pending and config.slot_of(pending[0].submit_s) <= t:
            j = pending.pop(0)
            live[j.job_id] = j
        for j in list(live.values()):
            if j.state == "running" and j.released_s + j.length_s <= now_s:
                ended[j.job_id] = live.pop(j.job_id)
        if t in skipped:
            continue
        decision, state = tick(now_s, list(live.values()), state, config, None if windows is None else windows(t))
        decisions.append(decision)
        for job_id in decision.release:
            live[job_id] = dataclasses.replace(live[job_id], state="running", released_s=now_s)
            released_in[job_id] = t
    return SlotRun(decisions, live, ended, released_in, state)


def workload_a_jobs(deadline_slots: int, slot_s: float = 300.0) -> tuple[object, list[Job]]:
    """Workload A (the package's SWIM sample) as the controller's jobs, with its trace: each job's
    estimated length (paper: deferral, §V-A) cut at the day's end, as ``autoscaler replay`` clips its
    curves (and ``run --replay`` its jobs); its deadline ``deadline_slots`` slots of ``slot_s`` after
    it could end; tenant "t". Jobs submitted after the day are left out."""
    from importlib import resources

    import numpy as np

    from autoscaler.core.workload import estimate_length_s, read_swim

    with resources.as_file(resources.files("autoscaler") / "data" / "FB-2009_samples_24_times_1hr_0.tsv") as path:
        trace = read_swim(path)
    sizes = np.array([(j.map_input_bytes, j.shuffle_bytes, j.reduce_output_bytes) for j in trace.jobs])
    lengths = estimate_length_s(sizes[:, 0], sizes[:, 1], sizes[:, 2])
    clipped = [(j, min(float(length), 86400 - j.submit_s)) for j, length in zip(trace.jobs, lengths, strict=True) if j.submit_s < 86400]
    jobs = [
        Job(j.job_id, j.job_id, "t", j.submit_s, j.submit_s + length + deadline_slots * slot_s, length, StepSpec(args=("true",)))
        for j, length in clipped
    ]
    return trace, jobs
