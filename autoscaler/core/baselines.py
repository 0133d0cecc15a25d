"""What an EMR operator would run instead of the daemon, played on the cluster twin. Pure.

Each baseline plays the same jobs on :class:`autoscaler.core.twin.ClusterTwin` and returns the twin
after ``finish``, so ``twin.bill()`` is the whole bill (issue 21, item 2). Every job is added as
a step at its own ``submit_s`` (a job cannot run before it is submitted; no baseline defers one),
step id ``s-<job id>``; EMR runs steps first come first served, as the twin's dispatch does.
Times are seconds on the trace's clock, ``start_s`` its time 0 (the start of its first slot).

* ``fixed``: N nodes (``fixed_nodes``, default ``max_nodes``), requested ``provision_s`` before
  ``start_s`` so they are usable from it (billed and powered from the request), always on (issue 21:
  "max_nodes, or the smallest fixed size that meets every deadline, always on"; the smallest is
  :func:`smallest_fixed_nodes`).
* ``managed``: EMR managed scaling (AWS EMR best practices, managed-scaling section; EMR
  management guide, "Using managed scaling"). It evaluates YARN's metrics every
  :data:`MANAGED_INTERVAL_S` (EMR: every 5-10 s) with no documented cooldown, adds task nodes for
  pending containers and removes idle task nodes, within min..max, and defers nothing. At each
  evaluation: pending = the nodes (w each) of the steps usable nodes would start now (never-started steps that
  step_concurrency lets start, and killed runs waiting to run again); demand = busy nodes +
  pending; up = booting + idle + busy nodes. If demand > up: resize to min(max_nodes, demand)
  (booting nodes count as covering pending work). Else if a node is idle and up > max(min_nodes,
  demand): remove idle nodes (never a booting one, never a busy one) down to that. Ticks fall at
  start_s + k x 10 s and see every event at or before them (a job submitted at 105 s is seen at
  110 s, one at 100 s at 100 s). It starts with ``min_nodes`` requested ``provision_s`` before
  ``start_s`` (the cluster's minimum capacity).
* ``managed-dampened``: ``managed`` with a step counted as pending demand only once it has waited
  ``dampen_s`` (:data:`MANAGED_DAMPEN_S` by default; ``autoscaler compare --managed-dampen-s``): at
  an evaluation, pending = the nodes of the steps usable nodes would start now that were added at
  least ``dampen_s`` before it (a killed run counts from its step's addition). Everything else is
  ``managed``'s, by the same code: if busy + that pending > up, resize to min(max_nodes, busy + it);
  idle nodes are removed down to max(min_nodes, busy + every pending step's nodes), so a step not
  yet counted never makes an idle node go that it could start on. A step that starts, or ends, within
  ``dampen_s`` of its submission never asks for a node; one that waits longer asks for it at the
  first tick at or after ``submit_s + dampen_s``. With ``dampen_s`` = 0 it is ``managed``, bill for bill.
  What AWS documents, and what this approximates:

  - EMR management guide, "Advanced Scaling for Amazon EMR" (managed-scaling-allocation-strategy-
    optimized.html; API: ManagedScalingPolicy ``ScalingStrategy`` ADVANCED and
    ``UtilizationPerformanceIndex``, EMR 7.0 and later): an index of 1, 25, 50, 75 or 100 (any other
    value a validation error); "Utilization optimized [1]" prevents over-provisioning and "causes the
    cluster to scale up less aggressively", for regularly occurring workload spikes where resources
    should not ramp up too quickly; 50 balances; 100 scales up aggressively. AWS gives no rule, delay
    or threshold behind the index: how much less aggressive 1 is, is not documented.
  - AWS's "Managed Scaling Dampener" (aws-samples/aws-emr-utilities, utilities/managed-scaling-dampener,
    an AWS sample script, not an EMR feature): clusters sit underutilised when managed scaling scales
    to its maximum for containers that run "for a small duration (less than 30 seconds)" and are done
    before the nodes arrive. Its remedy is another rule: a cron job (at most once a minute) caps
    MaximumCapacityUnits at an initial maximum, raises the cap by a step each run while YARN's
    containersPending > 0, and puts it back after containersPending has stayed 0 for a cooldown.

  The wait threshold here is ours, in the spirit of both (scale up less for work that would be done
  before a node is usable): not AWS's algorithm for the index, which is not published, nor the
  sample's ramped cap. 120 s is our default, not an AWS figure.
* ``custom-rules``: EMR's older automatic scaling with a custom policy (EMR management guide,
  "Using automatic scaling with a custom policy for instance groups"), the console's default
  rules: every :data:`PERIOD_S` (one CloudWatch period; EMR publishes its metrics every five
  minutes) YARNMemoryAvailablePercentage is read as 100 x (idle usable nodes less the nodes pending
  steps need, at least 0) / usable nodes (a node's memory is free when it runs no step and no
  waiting step of w nodes claims it; with no usable node: 0 if a step waits, else 100).
  Below :data:`SCALE_OUT_BELOW_PERCENT`: +1 node (up to max_nodes); above
  :data:`SCALE_IN_ABOVE_PERCENT`: -1 node, an idle one (down to min_nodes). After a scaling
  activity no rule fires for :data:`COOLDOWN_S`, counted as EMR's API defines ``CoolDown`` ("after
  a scaling activity completes", SimpleScalingPolicyConfiguration): a node added completes when it
  is usable, ``provision_s`` after the request; an idle node removed completes at once. It starts
  with ``min_nodes`` requested ``provision_s`` before ``start_s``.

All four respect min_nodes..max_nodes at every moment until the end of the run: ``fixed`` after
its last submission, the managed variants and ``custom-rules`` at their first evaluation after the last
submission at which no step waits (so their rules, not the end, serve a backlog). Then
``twin.finish`` lets every step run to its end and removes each node once it has no job and no
step waits (below min_nodes: the run is over). The nodes requested at the start count as one scale
event in the bill, as any resize does.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from numbers import Real

import numpy as np

from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job
from autoscaler.core.twin import ClusterTwin, TwinConfig

MANAGED_INTERVAL_S = 10.0
"""How often managed scaling evaluates YARN's metrics: EMR says every 5-10 s; its slower end."""

MANAGED_DAMPEN_S = 120.0
"""``managed-dampened``'s default wait, s: a step counts as pending demand once it has waited this
long. Ours, not AWS's (AWS publishes no figure behind Advanced Scaling's index); well under the 330 s a
node takes to be usable, and far above the 30 s jobs AWS's Managed Scaling Dampener was written for."""

MAX_DAMPEN_S = 86400.0
"""The longest wait ``managed-dampened`` takes, s: a step left a day without asking for a node is no
autoscaler (more is a unit or typing error)."""

MANAGED_VARIANTS = ("managed", "managed-dampened")
"""The baselines that are EMR managed scaling: compare sets every run against the one of these with
the least kWh at each deadline (the strongest an operator could run instead)."""

PERIOD_S = 300.0
"""The custom rules' CloudWatch period: one five-minute period, the console default rules' and the
interval at which EMR publishes YARNMemoryAvailablePercentage."""

COOLDOWN_S = 300.0
"""The console default rules' cooldown: no rule fires until 300 s after a scaling activity completes."""

SCALE_OUT_BELOW_PERCENT = 15.0
"""Console default scale-out rule: +1 node when YARNMemoryAvailablePercentage < 15 for one period."""

SCALE_IN_ABOVE_PERCENT = 75.0
"""Console default scale-in rule: -1 node when YARNMemoryAvailablePercentage > 75 for one period."""

DEADLINE_ABS_S = 1e-6
"""A job meets its deadline when it ends no later than a microsecond after it (floats of ~1e9 s)."""

_TIME_ABS_S = 1e-6


def _step_id(job: Job) -> str:
    return f"s-{job.job_id}"


def _add(twin: ClusterTwin, job: Job) -> None:
    twin.add_step(job.submit_s, _step_id(job), job.job_id, job.length_s, job.submit_s, job.deadline_s, job.nodes)


def _add_until(twin: ClusterTwin, jobs: Sequence[Job], next_job: int, until_s: float) -> int:
    """Add the jobs from ``next_job`` on submitted at or before ``until_s``, each at its submit_s;
    returns the index of the first job not added."""
    while next_job < len(jobs) and jobs[next_job].submit_s <= until_s:
        _add(twin, jobs[next_job])
        next_job += 1
    return next_job


def _started_twin(config: TwinConfig, start_s: float, nodes: int) -> ClusterTwin:
    """A twin whose ``nodes`` are requested ``provision_s`` before ``start_s``, usable from it."""
    request_s = start_s - config.provision_s
    twin = ClusterTwin(config, now_s=request_s)
    if nodes:
        twin.resize(request_s, nodes)
    return twin


def _play_fixed(jobs: Sequence[Job], config: TwinConfig, min_nodes: int, max_nodes: int, start_s: float, *, fixed_nodes: int, dampen_s: float = 0.0) -> ClusterTwin:
    twin = _started_twin(config, start_s, fixed_nodes)
    for job in jobs:
        _add(twin, job)
    twin.finish(jobs[-1].submit_s if jobs else start_s)
    return twin


def _next_tick(tick: int, event_s: float | None, start_s: float, interval_s: float) -> int | None:
    """The first tick after ``tick`` at or after ``event_s`` (ticks at start_s + k x interval_s)."""
    if event_s is None or not math.isfinite(event_s):
        return None
    k = max(tick + 1, math.ceil((event_s - start_s) / interval_s))
    while start_s + k * interval_s < event_s:
        k += 1
    while k - 1 > tick and start_s + (k - 1) * interval_s >= event_s:  # ceil rounded up past a tick on the event
        k -= 1
    return k


def _play_managed(jobs: Sequence[Job], config: TwinConfig, min_nodes: int, max_nodes: int, start_s: float, *, fixed_nodes: int = 0, dampen_s: float = 0.0) -> ClusterTwin:
    # Between events the state does not change, and an evaluation right after another changes
    # nothing (it already resized to the demand or removed the idle nodes it could): so the twin
    # jumps from the tick it is at to the first tick at or after the next submission, twin event or
    # step that has now waited dampen_s (``managed``: 0, every step counts at once).
    twin = _started_twin(config, start_s, min_nodes)
    tick, next_job = 0, 0
    while True:
        now_s = start_s + tick * MANAGED_INTERVAL_S
        next_job = _add_until(twin, jobs, next_job, now_s)
        twin.advance(now_s)
        counts = twin.counts()
        if next_job == len(jobs) and counts["waiting"] == 0:
            break
        counted, counted_from_s = twin.pending_nodes(dampen_s)
        up = counts["booting"] + counts["idle"] + counts["busy"]
        demand = counts["busy"] + counts["pending"]
        if counts["busy"] + counted > up and up < max_nodes:
            twin.resize(now_s, min(max_nodes, counts["busy"] + counted))
        elif counts["idle"] and up > max(min_nodes, demand):
            twin.remove_idle(now_s, min(counts["idle"], up - max(min_nodes, demand)))
        queued_s = twin.next_event_s
        next_event_s = min(
            jobs[next_job].submit_s if next_job < len(jobs) else math.inf,
            math.inf if queued_s is None else queued_s,
            math.inf if counted_from_s is None else counted_from_s,
        )
        following = _next_tick(tick, next_event_s, start_s, MANAGED_INTERVAL_S)
        if following is None:
            break  # nothing can change any more; finish serves what waits
        tick = following
    twin.finish(now_s)
    return twin


def _play_custom_rules(jobs: Sequence[Job], config: TwinConfig, min_nodes: int, max_nodes: int, start_s: float, *, fixed_nodes: int = 0, dampen_s: float = 0.0) -> ClusterTwin:
    # A rule may fire period after period with no event in between (-1 node each period while
    # memory stays free), so every period is evaluated: a week is 2,016 periods.
    twin = _started_twin(config, start_s, min_nodes)
    cooldown_until_s = -math.inf
    period, next_job = 0, 0
    while True:
        now_s = start_s + period * PERIOD_S
        next_job = _add_until(twin, jobs, next_job, now_s)
        twin.advance(now_s)
        counts = twin.counts()
        if next_job == len(jobs) and counts["waiting"] == 0:
            break
        if now_s >= cooldown_until_s - _TIME_ABS_S:
            up = counts["booting"] + counts["idle"] + counts["busy"]
            usable = counts["idle"] + counts["busy"]
            if usable:
                # YARN hands idle memory to pending containers: a step of w nodes waiting for more
                # than are idle leaves none available (one-node steps never wait beside an idle node).
                memory_available_percent = 100.0 * max(0, counts["idle"] - counts["pending"]) / usable
            else:
                memory_available_percent = 0.0 if counts["waiting"] else 100.0
            if memory_available_percent < SCALE_OUT_BELOW_PERCENT and up < max_nodes:
                twin.resize(now_s, up + 1)
                cooldown_until_s = now_s + config.provision_s + COOLDOWN_S
            elif memory_available_percent > SCALE_IN_ABOVE_PERCENT and up > min_nodes and twin.remove_idle(now_s, 1):
                cooldown_until_s = now_s + COOLDOWN_S
        period += 1
    twin.finish(now_s)
    return twin


# Each plays (jobs, config, min_nodes, max_nodes, start_s, *, fixed_nodes, dampen_s) and reads what its rule needs.
_PLAYERS: dict[str, Callable[..., ClusterTwin]] = {
    "fixed": _play_fixed,
    "managed": _play_managed,
    "managed-dampened": _play_managed,
    "custom-rules": _play_custom_rules,
}

BASELINES: tuple[str, ...] = tuple(_PLAYERS)
"""The baselines' names: ("fixed", "managed", "managed-dampened", "custom-rules")."""


def _whole(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ConfigError(f"{name}: expected a whole number >= {low}, got {value!r}")
    return int(value)


def _checked_jobs(jobs: Sequence[Job], start_s) -> list[Job]:
    """The jobs sorted by submit time (stable); ConfigError for a start or a submit time that is
    not finite, or a job submitted before ``start_s``."""
    if isinstance(start_s, bool) or not isinstance(start_s, Real) or not math.isfinite(start_s):
        raise ConfigError(f"start_s: expected a finite time in s, got {start_s!r}")
    for job in jobs:
        if not (isinstance(job.submit_s, Real) and math.isfinite(job.submit_s)) or job.submit_s < start_s:
            raise ConfigError(f"job {job.job_id!r}: submit_s {job.submit_s!r} is not a finite time at or after the trace's start_s {start_s!r}")
    return sorted(jobs, key=lambda job: job.submit_s)


def checked_dampen_s(value, flag: str = "dampen_s") -> float:
    """``managed-dampened``'s wait, s, as a float: ConfigError naming ``flag`` unless it is a finite
    number in 0..:data:`MAX_DAMPEN_S`."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or not 0.0 <= value <= MAX_DAMPEN_S:
        raise ConfigError(f"{flag}: expected a finite number of seconds >= 0 and <= {MAX_DAMPEN_S:,.0f} (a day), got {value!r}")
    return float(value)


def run_baseline(
    name: str, jobs: Sequence[Job], config: TwinConfig, *, min_nodes: int, max_nodes: int, start_s: float, fixed_nodes: int | None = None,
    dampen_s: float | None = None,
) -> ClusterTwin:  # fmt: skip
    """Play baseline ``name`` (one of :data:`BASELINES`) on a new twin over ``jobs`` (any order;
    sorted by submit_s here) and return the twin after ``finish``: ``twin.bill()`` is the run's
    whole bill, ``twin.steps`` its steps (``s-<job id>``). ``min_nodes`` (>= 0) .. ``max_nodes``
    (>= 1) bound the nodes up; ``fixed_nodes`` (``fixed`` only; default ``max_nodes``) must lie in
    max(1, min_nodes)..max_nodes; ``dampen_s`` (``managed-dampened`` only; default
    :data:`MANAGED_DAMPEN_S`) in 0..:data:`MAX_DAMPEN_S` s. The rules and their sources: the module's docstring.

    Raises ConfigError for an unknown name (listing the baselines), bounds that are not whole
    numbers or min_nodes > max_nodes, ``fixed_nodes`` or ``dampen_s`` out of its range or given to
    another baseline, a start_s that is not finite, a job submitted before start_s, and (from the
    twin) a job id given twice or a length that is not a finite number >= 0."""
    if name not in _PLAYERS:
        raise ConfigError(f"baseline {name!r}: expected one of {', '.join(BASELINES)}")
    max_nodes = _whole(max_nodes, "max_nodes", 1)
    min_nodes = _whole(min_nodes, "min_nodes", 0)
    if min_nodes > max_nodes:
        raise ConfigError(f"min_nodes {min_nodes} is above max_nodes {max_nodes}")
    if fixed_nodes is not None and name != "fixed":
        raise ConfigError(f"fixed_nodes {fixed_nodes!r} is for the fixed baseline only, not {name!r}")
    if dampen_s is not None and name != "managed-dampened":
        raise ConfigError(f"dampen_s {dampen_s!r} is for the managed-dampened baseline only, not {name!r}")
    nodes = max_nodes if fixed_nodes is None else _whole(fixed_nodes, "fixed_nodes", 1)
    if name == "fixed" and not max(1, min_nodes) <= nodes <= max_nodes:
        raise ConfigError(f"fixed_nodes {nodes}: expected a size in {max(1, min_nodes)}..{max_nodes} (min_nodes..max_nodes)")
    wait_s = 0.0
    if name == "managed-dampened":
        wait_s = MANAGED_DAMPEN_S if dampen_s is None else checked_dampen_s(dampen_s)
    return _PLAYERS[name](_checked_jobs(jobs, start_s), config, min_nodes, max_nodes, float(start_s), fixed_nodes=nodes, dampen_s=wait_s)


def _fifo_end_s(submit_s: np.ndarray, true_s: np.ndarray, servers: int, free_from_s: float) -> np.ndarray:
    """Each job's end, s, shape (n_jobs,), when jobs sorted by submit time run first come first
    served on ``servers`` identical servers free from ``free_from_s``: job i starts at the later of
    its submission and the earliest time a server is free. This is the twin's dispatch on a fixed
    cluster (no node ever drains, so no run is killed), in the same float arithmetic."""
    free_s = [free_from_s] * servers
    end_s = np.empty(len(submit_s))
    for i, (submitted_s, length_s) in enumerate(zip(submit_s.tolist(), true_s.tolist())):
        end_s[i] = max(submitted_s, free_s[0]) + length_s
        heapq.heapreplace(free_s, end_s[i])
    return end_s


def smallest_fixed_nodes(jobs: Sequence[Job], config: TwinConfig, *, max_nodes: int, start_s: float) -> tuple[int, bool]:
    """The smallest N in 1..``max_nodes`` for which ``fixed`` with N nodes ends every job (its true
    length, as the twin draws it) no later than its deadline (end_s <= deadline_s + 1e-6):
    (N, True); if even ``max_nodes`` misses one, (max_nodes, False). With no jobs, (1, True).

    Sizes are tried by binary search from a lower bound (total true work / the time from start_s
    to the last deadline) on a first-come-first-served recursion equal to the twin's (step
    concurrency c makes N nodes work as min(N, c)); the N found is checked to meet every deadline
    and N - 1 to miss one. Jobs of w > 1 nodes (gang start, later steps passing a wide one) are
    played on the twin itself for each N tried, from the widest w up (fewer nodes never run it; the
    bound counts w x true length). Raises ConfigError as :func:`run_baseline` does for its inputs."""
    max_nodes = _whole(max_nodes, "max_nodes", 1)
    ordered = _checked_jobs(jobs, start_s)
    if not ordered:
        return 1, True
    submit_s = np.array([job.submit_s for job in ordered], dtype=float)
    true_s = np.array([config.true_length_s(job.name, job.submitted_length_s, job.job_id) for job in ordered], dtype=float)
    deadline_s = np.array([job.deadline_s for job in ordered], dtype=float)
    if not np.all(np.isfinite(true_s)) or np.any(true_s < 0):
        bad = ordered[int(np.flatnonzero(~(np.isfinite(true_s) & (true_s >= 0)))[0])]
        raise ConfigError(f"job {bad.job_id!r} has length_s {bad.length_s!r}, expected a finite number >= 0")
    free_from_s = (start_s - config.provision_s) + config.provision_s  # when the twin's first nodes are usable

    width = np.array([job.nodes for job in ordered], dtype=float)
    widest = int(width.max())

    def meets(nodes: int) -> bool:
        if widest > 1:
            if nodes < widest:
                return False
            steps = _play_fixed(ordered, config, 0, max_nodes, start_s, fixed_nodes=nodes).steps
            return all(steps[_step_id(job)].end_s <= job.deadline_s + DEADLINE_ABS_S for job in ordered)
        servers = min(nodes, config.step_concurrency)
        return bool(np.all(_fifo_end_s(submit_s, true_s, servers, free_from_s) <= deadline_s + DEADLINE_ABS_S))

    if not meets(max_nodes):
        return max_nodes, False
    horizon_s = float(np.max(deadline_s)) + DEADLINE_ABS_S - free_from_s
    bound = math.ceil(float(np.sum(true_s * width)) / horizon_s * (1 - 1e-12)) if horizon_s > 0 else 1
    low, high = max(1, widest, min(bound, max_nodes)), max_nodes
    while low < high:
        middle = (low + high) // 2
        if meets(middle):
            high = middle
        else:
            low = middle + 1
    # FIFO start times do not grow with more servers, so the search's answer is the least; should a
    # case ever break that, walk down to the least size that still meets every deadline.
    while high > 1 and meets(high - 1):
        high -= 1
    return high, True


def nodes_over_time(twin: ClusterTwin) -> tuple[np.ndarray, np.ndarray]:
    """The nodes up (requested and not removed: booting, idle, busy or draining) as a step function:
    (times_s, nodes), both shape (n_changes,), times increasing; nodes[i] holds from times_s[i] to
    times_s[i + 1] (the last from its time on). Built from every node's requested_s and removed_s;
    a node still up is counted from its request on. No nodes: two empty arrays."""
    times = [node.requested_s for node in twin.nodes.values()] + [node.removed_s for node in twin.nodes.values() if node.removed_s is not None]
    steps = [1] * len(twin.nodes) + [-1] * (len(times) - len(twin.nodes))
    if not times:
        return np.zeros(0), np.zeros(0, dtype=int)
    times_s, deltas = np.asarray(times, dtype=float), np.asarray(steps, dtype=int)
    order = np.argsort(times_s, kind="stable")
    times_s, nodes = times_s[order], np.cumsum(deltas[order])
    last_of_each_time = np.append(times_s[1:] != times_s[:-1], True)
    return times_s[last_of_each_time], nodes[last_of_each_time]
