"""Learned job lengths: a job is planned at a quantile of its name's past run times. Pure.

A recurring job (the same name, day after day) is predictable from its own history: production
studies of recurring jobs (3Sigma, EuroSys 2018) find its past run times a far better guide than a
length given by hand, 8-23 % of which are off by 2x or more. So a job whose (tenant, name) has
finished runs is planned at the ``quantile`` q of their run times (EMR's step end minus start), and
the length it was submitted with (``--length-s``, or the §V-A size model's) is kept as the prior:
what a name never seen before is planned at.

Only runs that ended at or before the time the job is planned at count (``ended_by_s``): a replay
sees no run the daemon could not yet have seen, so replay = live.

A planned length is still a guess: a name's p90 runs longer one time in ten, and a length given by hand
or by the size model is off by 2x or more for many jobs. :class:`LengthErrors` learns how far off
(finished jobs' run time / planned length) and gives each new job a start margin, so that a job held
back to its start-by slot still has room for a run as long as the error's p99.9.

The quantile is nearest-rank: the ceil(q n)-th smallest of n run times, a run time that happened
(p90 of 6 runs is the 6th smallest, the longest; p50 of 6 the 3rd), checkable by hand. At least
:data:`~autoscaler.core.defaults.LEARNED_MIN_RUNS` runs (one) are needed; the newest
:data:`~autoscaler.core.defaults.LEARNED_RUNS` (50) are used.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np

from autoscaler.core import defaults
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job

LENGTH_SOURCES = ("learned", "submitted")
"""What a replay plans a job at (``--lengths``): its name's past runs, or the length it was submitted with."""


def check_quantile(quantile: float, name: str = "length_quantile") -> float:
    """``quantile`` as a float in (0, 1]; ConfigError naming ``name`` otherwise."""
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not (0.0 < quantile <= 1.0):
        raise ConfigError(f"{name}: expected a quantile in (0, 1], e.g. 0.9 for p90, got {quantile!r}")
    return float(quantile)


def nearest_rank(values_s: Sequence[float], quantile: float) -> float:
    """The nearest-rank ``quantile`` of ``values_s`` (the ceil(q n)-th smallest; n >= 1), s.
    Raises ConfigError on an empty sequence or a quantile outside (0, 1]."""
    quantile = check_quantile(quantile)
    if not values_s:
        raise ConfigError("nearest_rank: expected at least one run time, got none")
    ordered = sorted(values_s)
    # A small tolerance: q n = 5.4 must not become 6 through 0.9 * 6 = 5.4000000000000004.
    rank = max(1, math.ceil(quantile * len(ordered) - 1e-9))
    return float(ordered[rank - 1])


def quantile_label(quantile: float) -> str:
    """``0.9`` -> "p90", ``0.5`` -> "p50", ``0.95`` -> "p95", ``1`` -> "p100"."""
    return f"p{100 * quantile:g}"


def runs_ended_by(runs: Iterable[tuple[float, float]], ended_by_s: float, limit: int = defaults.LEARNED_RUNS) -> list[float]:
    """Run times (end - start, s) of the newest ``limit`` of ``runs`` ((start_s, end_s) pairs) that
    ended at or before ``ended_by_s``, oldest first: what a store without SQL (the dry run's) answers
    for ``JobStore.run_lengths_s``."""
    ended = sorted(((end_s, end_s - start_s) for start_s, end_s in runs if end_s <= ended_by_s), key=lambda run: run[0])
    return [length_s for _, length_s in ended[-limit:]] if limit > 0 else []


def planned(job: Job, run_lengths_s: Sequence[float], quantile: float = defaults.LENGTH_QUANTILE, prior_source: str | None = None) -> Job:
    """``job`` planned at the ``quantile`` of ``run_lengths_s`` (its name's past run times, s; those
    that ended by the time it is planned at), or at the length it came with when fewer than
    :data:`~autoscaler.core.defaults.LEARNED_MIN_RUNS` are given.

    The learned length replaces ``length_s``; the length it came with goes to ``prior_length_s`` and
    ``length_source`` says "p90 of 6 runs". Without enough runs ``length_s`` stays and ``length_source``
    is ``prior_source`` ("given", "size model"; the job's own when None). The deadline is the job's:
    a learned length longer than the deadline leaves is planned as it is (the job is then due at
    once, and late if it cannot make it), never refused, since the operator's deadline stands.
    Raises ConfigError for a quantile outside (0, 1] or a run time that is not a finite number >= 0.
    """
    quantile = check_quantile(quantile)
    source = prior_source if prior_source is not None else job.length_source
    bad = [value for value in run_lengths_s if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0)]
    if bad:
        raise ConfigError(f"job {job.job_id!r}: run times must be finite numbers of seconds >= 0, got {bad[:3]!r}")
    if len(run_lengths_s) < defaults.LEARNED_MIN_RUNS:
        return dataclasses.replace(job, length_source=source)
    length_s = nearest_rank(run_lengths_s, quantile)
    return dataclasses.replace(
        job,
        length_s=length_s,
        prior_length_s=job.submitted_length_s,
        length_source=f"{quantile_label(quantile)} of {len(run_lengths_s)} run{'s' if len(run_lengths_s) != 1 else ''}",
    )


WORK_FACTOR_STEP = 0.05
"""Queued jobs take a pool's new work factor once it has moved this share from the one they have
(``LengthErrors.work_factor``): each move re-queues every waiting job, so not for every run that ends."""

RATIO_TOLERANCE = 1e-6
"""A ratio within this of 1 is a run as long as planned: a step's end - start in float seconds is the
length only to rounding, and no margin is planned for rounding."""


@dataclasses.dataclass
class LengthErrors:
    """How far finished jobs ran from the lengths they were planned at, and the room a new job's start is
    given for it: ``start_margin_s`` = (r - 1) x length_s when r > 1, where r is the nearest-rank
    ``quantile`` of run time / planned length over the newest ``runs`` finished jobs (0 below
    ``min_runs`` of them, or when r <= 1: lengths planned long enough already).

    Two pools, as the error differs: jobs planned at a learned length (their name's past runs,
    ``prior_length_s`` set) and jobs planned at the length they came with (``--length-s`` or the §V-A
    size model). A run of a job planned under a second tells nothing and is not recorded.

    Why: deferral holds a job back to its start-by slot, deadline - length; one that then runs r times
    its planned length ends (r - 1) x length after its deadline, where released at once it may have
    made it. The deadline stays the job's: only the slot it is due from moves earlier (``Job.start_margin_s``,
    ``autoscaler.core.edf.start_by_slot``), so at most about 1 - ``quantile`` of the jobs held back to
    the last moment overrun for a length planned short. Raises ConfigError on a quantile outside (0, 1]
    or ``runs`` / ``min_runs`` not whole numbers >= 1. A ``quantile`` of 0 plans no margin (off).

    The margin moves a job's start; it adds no node. So each job also takes a work factor, and the
    nodes are planned for that much work (``Job.work_length_s``): the mean over the same runs of
    min(r, slot / length), the node time a job shorter than a slot is expected to take in the slot it
    is released in (``job_work_factor``), at least 1; a job of a slot or more keeps its length. Why:
    the margin is a tail quantile for one job, the factor a mean for many. Lengths off by
    lognormal(0, 1) run e^0.5 = 1.65 times the plan on the whole. On a bursty day (bursts of 5,400 jobs
    of 7-60 s in an hour; D = 2 h, 500 nodes) hold planned its nodes for the planned lengths, kept
    32-46 through a burst, and 3,141 jobs overran (managed scaling: 9); planned with the factor, 9.

    The factor plans m_t (the policy's work, ``autoscaler.core.slot_work``) and the node time a
    released or running step is still counted for (``autoscaler.core.release.running_need_s``); the
    release packs a slot by the planned lengths, and EMR queues what a node cannot start yet.

    Measured before the choice (hold, lognormal(0, 1), D = 2 h, 500 nodes; kWh, jobs overran; without
    a factor: the bursty day 39.3, 3,141; FB-2009 A 104.3, 45; a flat load of 150-s jobs on a node
    boundary 50.2, 5):

    * the pool's plain mean ratio, in the plan, the packing and the count of steps: bursty 41.1, 9;
      A 112.3, 44. A job of hours that runs longer holds its one node for more slots, which asks for
      no node now, but hold's plan, which counts work as divisible, fitted the extra slots before its
      deadline on nodes of their own;
    * the mean ratio, a job grown to one slot at most: A 104.7, 44; bursty 40.3, 9; flat 58.8, 5. A
      150-s job planned at min(1.65 x 150, 300) = 248 s, where min(r x 150, 300) averages about 180 s
      (the mean of a minimum is below the minimum of the mean);
    * the mean of min(r, slot / length), everywhere: flat 53.5, 5; bursty 40.2, 9; A 104.4, 44. Packed
      by the expected node time, a node-slot was handed fewer jobs than it ran, and idled;
    * the same, the slot packed by the planned lengths (shipped): flat 50.7, 5; bursty 39.8, 9. With the
      steps released and running counted at their planned lengths too, a burst of 600 jobs that ran 3
      times their plan went from 8 nodes to 4 while 36 of its steps waited in EMR, and 12 overran.

    The mean of the ratios, not sum of run times / sum of lengths: the runs of long jobs that overran
    most have not ended when it is read, and the sum, led by them, read 1.2 after a burst whose jobs
    ran 1.7 times their plan.
    Off with the margin (``quantile`` 0).
    """

    quantile: float = defaults.LENGTH_ERROR_QUANTILE
    runs: int = defaults.LENGTH_ERROR_RUNS
    min_runs: int = defaults.LENGTH_ERROR_MIN_RUNS

    def __post_init__(self) -> None:
        off = self.quantile == 0 and not isinstance(self.quantile, bool)
        if not off:
            self.quantile = check_quantile(self.quantile, "length_error_quantile")
        for name in ("runs", "min_runs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"LengthErrors: {name} must be a whole number >= 1, got {value!r}")
        self._ratio: dict[bool, float | None] = {}
        # Run time / planned length of each pool's newest runs; in order, with their prefix sums, once read.
        self._ratios: dict[bool, deque[float]] = {False: deque(maxlen=self.runs), True: deque(maxlen=self.runs)}
        self._sorted: dict[bool, tuple[np.ndarray, np.ndarray]] = {}

    def record(self, length_s: float, run_s: float, learned: bool = False) -> None:
        """One finished run: planned at ``length_s``, ran ``run_s`` (EMR's step end - start), s;
        ``learned``: planned at a learned length. A length under a second or a value that is not a
        finite number >= 0 is skipped (the ratio of a run of microseconds is the clock's rounding)."""
        if not (math.isfinite(length_s) and math.isfinite(run_s)) or length_s < 1.0 or run_s < 0:
            return
        learned = bool(learned)
        self._ratios[learned].append(run_s / length_s)
        self._ratio.pop(learned, None)
        self._sorted.pop(learned, None)

    def ratio(self, learned: bool = False) -> float | None:
        """The ``quantile`` of run time / planned length of the pool's newest runs (nearest rank), or
        None with fewer than ``min_runs`` in it (or with ``quantile`` 0: off)."""
        learned = bool(learned)
        if self.quantile == 0:
            return None
        if learned not in self._ratio:
            ratios = self._ratios[learned]
            self._ratio[learned] = nearest_rank(ratios, self.quantile) if len(ratios) >= self.min_runs else None
        return self._ratio[learned]

    def work_factor(self, learned: bool = False) -> float:
        """The mean run time / planned length of the pool's newest runs, at least 1; 1 with fewer than
        ``min_runs`` runs, or with ``quantile`` 0 (off), or when within a clock's rounding of 1. How
        far the pool has moved (``WORK_FACTOR_STEP``); a job is planned with :meth:`job_work_factor`."""
        learned = bool(learned)
        if self.quantile == 0 or len(self._ratios[learned]) < self.min_runs:
            return 1.0
        ordered, below = self._ordered(learned)
        factor = below[-1] / len(ordered)
        return factor if factor > 1.0 + RATIO_TOLERANCE else 1.0

    def _ordered(self, learned: bool) -> tuple[np.ndarray, np.ndarray]:
        """The pool's ratios in ascending order and their prefix sums (0 first), sorted once after runs are recorded."""
        if learned not in self._sorted:
            ratios = self._ratios[learned]
            ordered = np.sort(np.fromiter(ratios, dtype=float, count=len(ratios)))
            self._sorted[learned] = (ordered, np.concatenate(([0.0], np.cumsum(ordered))))
        return self._sorted[learned]

    def margin_s(self, job: Job) -> float:
        """The start margin for ``job``, s: (r - 1) x its ``length_s`` when its pool's ratio r > 1 (by
        more than a clock's rounding, ``RATIO_TOLERANCE``), else 0."""
        ratio = self.ratio(job.prior_length_s is not None)
        return 0.0 if ratio is None or ratio <= 1.0 + RATIO_TOLERANCE else (ratio - 1.0) * max(job.length_s, 0.0)

    def job_work_factor(self, job: Job, slot_s: float) -> float:
        """The work factor ``job`` is planned with, from its pool's newest runs: the mean over them of
        min(r, slot_s / length_s), at least 1, where r is a run's run time / planned length. So
        ``Job.work_length_s`` is the node time the job is expected to take in the slot of ``slot_s`` s
        it is released in (the release still packs the slot by ``length_s``). 1 for a job
        of a slot or more (it holds its node whole slots whatever it runs), of no length, with fewer
        than ``min_runs`` runs in the pool, or with ``quantile`` 0 (off). O(log runs) a job, and
        O(runs log runs) once after runs are recorded."""
        learned = job.prior_length_s is not None
        ratios = self._ratios[learned]
        length_s = job.length_s
        if self.quantile == 0 or len(ratios) < self.min_runs or not (0.0 < length_s < slot_s):
            return 1.0
        ordered, below = self._ordered(learned)
        cap = slot_s / length_s
        k = int(np.searchsorted(ordered, cap, side="left"))  # ratios under the cap count whole
        factor = (below[k] + cap * (len(ordered) - k)) / len(ordered)
        return factor if factor > 1.0 + RATIO_TOLERANCE else 1.0

    def with_margin(self, job: Job, slot_s: float) -> Job:
        """``job`` with its ``start_margin_s`` (:meth:`margin_s`) and ``work_factor``
        (:meth:`job_work_factor` for slots of ``slot_s`` s) set."""
        margin_s, factor = self.margin_s(job), self.job_work_factor(job, slot_s)
        if margin_s == job.start_margin_s and factor == job.work_factor:
            return job
        return dataclasses.replace(job, start_margin_s=margin_s, work_factor=factor)
