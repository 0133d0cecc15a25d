"""A multi-day load of recurring jobs: a day-long trace repeated, each job keeping its name. Pure.

A SWIM trace is one day of distinct jobs; production jobs recur (the same ETL every night). Repeating
the day N times, job ``job17`` of the trace becomes ``job17-day1`` .. ``job17-dayN``, all named
``job17``, so from the second day on every job has a history its length can be learned from
(``autoscaler.core.learned``).
"""

from __future__ import annotations

import dataclasses

from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Trace

MAX_DAYS = 366
"""Most days a trace is repeated over: a year; the slots alone of more run into MAX_SLOTS at 1-minute slots."""


def repeat_days(trace: Trace, days: int, day_s: float) -> tuple[Trace, dict[str, str]]:
    """The jobs of ``trace`` submitted before ``day_s`` (its day), repeated on ``days`` days: day k's
    copy (k = 1..days) is submitted (k - 1) x ``day_s`` later, with job id ``{id}-day{k}``. Returns the
    new trace (jobs in submit order) and {new job id: name}, the name being the trace's job id.
    ``days`` = 1 returns the trace as it is and no names (job id = name, as every trace replay had).
    Raises ConfigError for ``days`` not a whole number in 1..366 (the message starts with the field,
    marked `days`, which the command line names by its flag) or ``day_s`` not > 0.
    """
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise ConfigError(f"`days`: expected a whole number of days in 1..{MAX_DAYS}, got {days!r}")
    if not day_s > 0:
        raise ConfigError(f"repeat_days: day_s must be > 0 seconds, got {day_s!r}")
    if days == 1:
        return trace, {}
    one_day = [job for job in trace.jobs if job.submit_s < day_s]
    jobs, names = [], {}
    for day in range(1, days + 1):
        for job in one_day:
            job_id = f"{job.job_id}-day{day}"
            jobs.append(dataclasses.replace(job, job_id=job_id, submit_s=job.submit_s + (day - 1) * day_s))
            names[job_id] = job.job_id
    return dataclasses.replace(trace, jobs=tuple(jobs)), names
