"""A trace's jobs as the daemon's jobs, for a replay through the slot loop (``run --replay``,
``compare``): deadline = submit + length + D slots, each length from the §V-A size model and cut at
the window's end as ``autoscaler replay`` clips its curves, the jobs dealt to tenants in turn, each on
its w nodes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.readable import count_text
from autoscaler.core.workload import estimate_demand_vector, estimate_length_s, job_nodes


def trace_jobs(
    trace, deadline_slots: int, slot_s: float, window_s: float, tenants: int = 1, containers_per_node: int | None = None,
    max_nodes: int | None = None, names: dict[str, str] | None = None,
) -> list[Job]:  # fmt: skip
    """The trace's jobs inside the window as daemon jobs: deadline = submit + length + D slots.

    A length running past the window is cut at the window's end, as ``autoscaler replay``
    clips its curves, so both see the same work. The trace has no tenants: with ``tenants``
    > 1 its jobs are dealt to tenant-1 .. tenant-K in submit order, like K teams sharing the
    cluster; each job carries its estimated demand vector (CPU s, disk bytes, network bytes).
    With ``containers_per_node`` each job runs on w nodes (``autoscaler.core.workload.job_nodes``:
    its §V-A mappers or reducers, whichever are more, over the containers a node holds); None: one
    node each. Raises ConfigError naming the job when its w is above ``max_nodes`` (it could never start).
    A job is named by ``names`` (job id -> name, a recurring load's: ``autoscaler.core.recurring``),
    else by its id; its length comes from the size model (``length_source`` "size model").
    """
    sizes = np.array([(j.map_input_bytes, j.shuffle_bytes, j.reduce_output_bytes) for j in trace.jobs], dtype=float).reshape(-1, 3)
    lengths = estimate_length_s(sizes[:, 0], sizes[:, 1], sizes[:, 2])
    demands = estimate_demand_vector(sizes[:, 0], sizes[:, 1], sizes[:, 2])
    widths = job_nodes(sizes[:, 0], sizes[:, 2], containers_per_node)
    if max_nodes is not None:
        inside = [i for i, j in enumerate(trace.jobs) if j.submit_s < window_s and widths[i] > max_nodes]
        if inside:
            first = trace.jobs[inside[0]]
            raise ConfigError(
                f"--containers-per-node {containers_per_node}: job {first.job_id!r} needs {int(widths[inside[0]]):,} nodes at once "
                f"({count_text(len(inside), 'job')} of the trace above --max-nodes {max_nodes:,}), more than the cluster may have; "
                "give more containers per node or a larger --max-nodes"
            )
    return [
        Job(
            job_id=j.job_id,
            name=(names or {}).get(j.job_id, j.job_id),
            tenant="trace" if tenants == 1 else f"tenant-{i % tenants + 1}",
            submit_s=j.submit_s,
            deadline_s=j.submit_s + min(float(length), window_s - j.submit_s) + deadline_slots * slot_s,
            length_s=min(float(length), window_s - j.submit_s),
            step=StepSpec(args=("true",)),
            demand_vector=tuple(float(v) for v in demand),
            nodes=int(width),
            length_source="size model",
        )
        for i, (j, length, demand, width) in enumerate(zip(trace.jobs, lengths, demands, widths))
        if j.submit_s < window_s
    ]


def within_window(job: Job, window_s: float) -> Job:
    """``job`` with a planned length that runs past the window's end (``window_s``, s from the trace's
    start) cut there, as ``trace_jobs`` cuts the length it is submitted with: a learned length of a
    run on an earlier day, which the window did not cut, would otherwise plan the last day's job past
    the end its submitted length and its deadline were cut to, and count it late."""
    left_s = window_s - job.submit_s
    return job if job.length_s <= left_s else dataclasses.replace(job, length_s=max(0.0, left_s))
