"""What "late" means, once, for every command that counts late jobs.

A job is **late**, or has **missed its deadline**, when it was not released by the end of its
start-by slot: the slot of (deadline - length), the last one it can start in and still finish by its
deadline (§V-B: a job holds a node until it is done). That is a job released in a later slot, or a
job still queued once its start-by slot has been decided without it or has passed. It stays late
whatever happens after (running, done, failed). A job released in time that then runs past its
deadline because its length was under-estimated is not counted: the daemon cannot tell until EMR
says the step is done, and it did what it promised.

The controller counts the same jobs as they happen (``Decision.missed``, once per job, in the slot
of its start-by slot or the first slot decided after it); ``autoscaler jobs``, ``jobs --by-tenant``
and the replay through the daemon count them from the store with :func:`slots_late`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autoscaler.core.model import Job, JobState

if TYPE_CHECKING:
    from autoscaler.core.controller import ControllerConfig

LATE_HELP = (
    "late (missed its deadline): not released by the end of its start-by slot (deadline - length), "
    "so released in a later slot or still queued after it; a late job stays late when it runs or is done"
)
"""The definition in the words every --help uses."""


def slots_late(job: Job, config: ControllerConfig, now_s: float, last_decided_slot: int | None = None) -> int:
    """How many slots after its start-by slot a job was (or, still queued, will at best be) released;
    0 if it is not late. ``now_s``: Unix seconds (the replay's simulated time for a replay store).
    ``last_decided_slot``: the store's last decided slot (a queued job the daemon already passed
    over in its start-by slot is late even before that slot ends), or None.

    A job never released that is no longer queued (failed before release) is not late.
    """
    from autoscaler.core.controller import start_by_slot  # the controller, only once a job is counted

    start_by = start_by_slot(job, config)
    if job.released_s is not None:
        return max(0, config.slot_of(job.released_s) - start_by)
    if job.state != JobState.QUEUED:
        return 0
    # Queued: the earliest slot it can still be released in.
    next_slot = config.slot_of(now_s)
    if last_decided_slot is not None:
        next_slot = max(next_slot, last_decided_slot + 1)
    return max(0, next_slot - start_by)
