"""One submission made into a queued job, whoever sends it: ``autoscaler submit`` on the daemon's
machine and ``autoscaler serve``'s AddJobFlowSteps both come here, so a job is planned the same way
whichever door it came in by.

A job's length is the one given (``length_s``), else a quantile of its name's past runs (per tenant
and name, ``[jobs] length_quantile``), else, for a name never run, its SWIM sizes (``sizes``) read by
the size model (paper: deferral, §V-A), else ``default_length_s`` when the door has one (serve's per
caller default). A retry of a job planned on its runs alone keeps the length it was first stored with.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from autoscaler.core import defaults
from autoscaler.core.errors import SubmitError
from autoscaler.core.intake import build_job, non_empty_text
from autoscaler.core.learned import nearest_rank, planned, quantile_label
from autoscaler.core.model import DEFAULT_MAX_NODES, Job
from autoscaler.core.ports import JobStore
from autoscaler.core.readable import count_text


@dataclass(frozen=True)
class Submission:
    """What a client asks for, as given (checked by :func:`planned_job`).

    ``deadline``: a duration from now ("90m", "2h", "600") or an ISO-8601 time with a zone.
    ``length_s``: seconds, used as given; ``sizes``: map input, shuffle and reduce output bytes.
    ``default_length_s``: used only when the name has no past run and neither ``length_s`` nor
    ``sizes`` is given. The step: ``command`` (command-runner.jar) or ``jar`` with ``args``.
    ``door``: the command that took it, named first in its messages ("" names none); ``length_option``: how this door names a
    length, for the message that suggests one.
    """

    name: str
    tenant: str
    deadline: str
    job_id: str | None = None
    length_s: float | None = None
    sizes: tuple[float, float, float] | None = None
    default_length_s: float | None = None
    jar: str | None = None
    args: tuple[str, ...] = ()
    command: tuple[str, ...] | None = None
    main_class: str | None = None
    nodes: int | None = None
    vcpus: float | None = None
    memory_gb: float | None = None
    container_vcpus: float | None = None
    container_memory_gb: float | None = None
    door: str = "submit"
    length_option: str = "--length-s SECONDS"
    no_length_hint: str = "give --length-s SECONDS or --sizes MAP_IN SHUFFLE REDUCE_OUT"


def planned_job(store: JobStore, settings, submission: Submission, now_s: float, wall_minus_now_s: float = 0.0) -> Job:
    """The queued Job for ``submission`` at ``now_s`` (Unix seconds on the daemon's clock), its length
    planned as the module says; not stored. ``settings``: the daemon's Settings, or None for the
    defaults (any tenant, ``DEFAULT_MAX_NODES``, p90).

    Raises SubmitError naming the field and what was expected (see ``intake.build_job``), and when
    no length can be found: no past run, no length, no sizes and no default.
    """
    quantile = settings.jobs.length_quantile if settings else defaults.LENGTH_QUANTILE
    # The name and tenant are checked before the store is asked about their runs.
    name, tenant = non_empty_text("name", submission.name), non_empty_text("tenant", submission.tenant)
    given_s, sizes = submission.length_s, submission.sizes
    runs_s = [] if given_s is not None else store.run_lengths_s(tenant, name, now_s)
    learned_s = nearest_rank(runs_s, quantile) if runs_s else None
    of_name = f"of name {name!r} (tenant {tenant!r})"
    learned_from = f"{quantile_label(quantile)} of {count_text(len(runs_s), 'past run')} {of_name}"
    retried = default_s = None
    if given_s is None and sizes is None and submission.job_id:
        # A retry of a job planned on its runs (or on the default) keeps the length it was stored with:
        # a run that ended since would change it, and the retry would read as a different job.
        stored = store.job(submission.job_id)
        if stored is not None and stored.prior_length_s is None and stored.length_source not in (None, "given", "size model"):
            retried, learned_s = stored, stored.length_s
            learned_from = f"{stored.length_source} {of_name}, as first submitted"
    if given_s is None and sizes is None and not runs_s and retried is None:
        if submission.default_length_s is None:
            raise SubmitError(
                f"{submission.door + ': ' if submission.door else ''}job name {name!r} of tenant {tenant!r} has no finished run to learn its length from; {submission.no_length_hint}"
            )
        given_s = default_s = submission.default_length_s
    on_runs = given_s is None and not sizes
    job = build_job(
        job_id=submission.job_id,
        name=submission.name,
        tenant=submission.tenant,
        now_s=now_s,
        deadline=submission.deadline,
        # Without a length or sizes, the learned one is the only one: it is checked against the deadline as given.
        length_s=learned_s if on_runs else given_s,
        sizes=sizes,
        jar=submission.jar,
        args=list(submission.args),
        command=None if submission.command is None else list(submission.command),
        main_class=submission.main_class,
        known_tenants=set(settings.known_tenants) if settings and settings.known_tenants else None,
        nodes=submission.nodes,
        vcpus=submission.vcpus,
        memory_gb=submission.memory_gb,
        container_vcpus=submission.container_vcpus,
        container_memory_gb=submission.container_memory_gb,
        max_nodes=settings.cluster.max_nodes if settings else DEFAULT_MAX_NODES,
        node_capacity=settings.cluster.task_capacity() if settings else None,
        wall_minus_now_s=wall_minus_now_s,
        length_from=learned_from if on_runs else ("the caller's default length for a name never run" if default_s is not None else None),
        length_option=submission.length_option,
    )
    if default_s is not None:
        return dataclasses.replace(job, length_source="default")
    if given_s is not None:
        return dataclasses.replace(job, length_source="given")
    if sizes:
        return planned(job, runs_s, quantile, prior_source="size model")
    if retried is not None:
        return dataclasses.replace(job, length_source=retried.length_source)
    return dataclasses.replace(planned(job, runs_s, quantile), prior_length_s=None)
