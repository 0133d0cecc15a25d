"""Turn a submission (CLI flags or a request) into a Job, refusing anything the daemon could not run.

Pure: the caller passes the current time and the known tenants; nothing here reads a clock,
a file or the environment. The job's width (``Job.nodes``) is checked here too, against the TASK
node's YARN capacity (EMR's defaults per instance type, :data:`TASK_YARN_CAPACITY`).
"""

from __future__ import annotations

import math
import re
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from numbers import Integral, Real

from autoscaler.core.errors import ConfigError, SubmitError
from autoscaler.core.model import Job, LengthModel, StepSpec
from autoscaler.core.readable import duration_text, utc_text
from autoscaler.core.workload import estimate_demand_vector, estimate_length_s

JOB_ID_MAX_CHARS = 64
"""A job id goes into the EMR step name, so it is kept short and to characters safe there."""

COMMAND_RUNNER_JAR = "command-runner.jar"

_JOB_ID = re.compile(r"[A-Za-z0-9._-]+")
_SECONDS = re.compile(r"\d+(?:\.\d+)?")
_DURATION = re.compile(
    r"(?:(?P<d>\d+(?:\.\d+)?)d)?(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?"
)
_UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_SIZE_NAMES = ("S, map input bytes", "S', shuffle bytes", "S'', reduce output bytes")
_DEADLINE_FORMS = (
    "a duration like '90m', '2h', '1h30m', '45s', '1d' or plain seconds '600', "
    "or an ISO-8601 time with a timezone like '2026-11-29T18:00:00Z'"
)


MAX_DEADLINE_S = 366 * 86400.0
"""Latest deadline accepted, from now: a year and a day."""


def build_job(
    *,
    job_id: str | None,
    name: str,
    tenant: str,
    now_s: float,
    deadline: str,
    length_s: float | None,
    sizes: tuple[float, float, float] | None,
    jar: str | None,
    args: list[str],
    command: list[str] | None,
    main_class: str | None = None,
    known_tenants: set[str] | None = None,
    length_model: LengthModel = LengthModel(),
    nodes: int | None = None,
    vcpus: float | None = None,
    memory_gb: float | None = None,
    max_nodes: int | None = None,
    node_capacity: NodeCapacity | None = None,
    container_vcpus: float | None = None,
    container_memory_gb: float | None = None,
    wall_minus_now_s: float = 0.0,
    length_from: str | None = None,
    length_option: str = "length_s",
) -> Job:
    """A queued Job submitted at ``now_s`` (Unix seconds, on the daemon's clock), checked field by field.

    ``deadline``: a duration from now ("90m", "2h", "1h30m", "45s", "1d", or plain seconds "600")
    or an absolute ISO-8601 time with a timezone ("2026-11-29T18:00:00Z", "...+01:00"), read on the
    wall clock and moved onto the daemon's by ``wall_minus_now_s`` (see ``parse_deadline``).
    Give exactly one of ``length_s`` (seconds) or ``sizes`` = (S, S', S'') in bytes, from which the
    length is estimated with ``estimate_length_s`` (paper: deferral, §V-A) and the job's demand
    vector with ``estimate_demand_vector``.
    Give exactly one of ``command`` (run by command-runner.jar; ``args`` must then be empty) or
    ``jar`` (a path ending in .jar or an s3:// URI) with ``args`` and optionally ``main_class``.

    The job's width w (``Job.nodes``, whole TASK nodes it runs on at once): ``nodes``, or the least w
    whose YARN capacity holds ``vcpus`` and ``memory_gb`` (GiB) on nodes of ``node_capacity``
    (default: :data:`DEFAULT_TASK_INSTANCE_TYPE`'s), see :func:`nodes_for`; neither: 1. With
    ``container_vcpus`` and ``container_memory_gb`` (one YARN container's ask, both or neither), each
    container must fit one node, and the demand is k = :func:`containers_for` such containers, at most
    :func:`containers_per_node` to a node: w = ceil(k / per node). A width above ``max_nodes`` (when
    given and >= 1) could never start, since a job starts only on all its nodes at once, and is refused.

    ``length_from``: where ``length_s`` came from when it was not given for this job, in words ("p90
    of 50 past runs of name 'x' (tenant 't')"); a deadline shorter than the length is then refused
    naming it and suggesting a length for this run, given as ``length_option`` (the caller's name
    for the field, e.g. a command-line option), if the run is shorter.

    ``job_id`` None gets a random id (uuid4 hex). Clients that may retry should supply their own
    id: the store treats a resubmission with the same id and content as a no-op, which a fresh
    random id cannot be.

    Raises SubmitError naming the field and what was expected: an empty name or tenant, a tenant
    not in ``known_tenants`` (when given), a job id outside [A-Za-z0-9._-] or longer than 64, a
    number that is NaN, infinite or negative, a deadline that cannot be read, is not after now,
    or leaves less time than the job's length, a length past :data:`MAX_DEADLINE_S`, a malformed step,
    ``nodes`` with ``vcpus`` or ``memory_gb``, a width that is not a whole number >= 1, a demand that
    is not a number > 0, a container bigger than one node, or a width above ``max_nodes`` (the
    message gives the figures).
    """
    job_id = _job_id(job_id)
    name = non_empty_text("name", name)
    tenant = non_empty_text("tenant", tenant)
    if known_tenants is not None and tenant not in known_tenants:
        known = ", ".join(sorted(known_tenants)) or "none configured"
        raise SubmitError(f"tenant: unknown tenant {tenant!r}; expected one of: {known}")
    now_s = _finite("now_s", now_s, "Unix seconds", minimum=0.0)
    width = _width(nodes, vcpus, memory_gb, max_nodes, node_capacity, container_vcpus, container_memory_gb)
    length_s = _length_s(length_s, sizes, length_model)
    deadline_s = parse_deadline(deadline, now_s, wall_minus_now_s)
    if deadline_s - now_s > MAX_DEADLINE_S:
        raise SubmitError(
            f"deadline: {deadline!r} is {duration_text(deadline_s - now_s)} away ({utc_text(deadline_s)}); expected at most "
            f"{MAX_DEADLINE_S / 86400:.0f} days (the daemon plans slots, not years)"
        )
    if length_s > MAX_DEADLINE_S:
        # No deadline accepted leaves that long: say so once, not "needs X but leaves only Y; expected X".
        raise SubmitError(
            f"length_s: {length_s:.6g} s ({duration_text(length_s)}); expected at most "
            f"{MAX_DEADLINE_S / 86400:.0f} days, the latest deadline accepted"
        )
    if now_s + length_s > deadline_s:
        needs, leaves = duration_text(length_s), duration_text(deadline_s - now_s)
        if needs == leaves:
            needs, leaves = f"{length_s:,.6g} s", f"{deadline_s - now_s:,.6g} s"
        if length_from is not None:
            # A length not given for this run is a guess from others: say whose, and how to give this run's own.
            raise SubmitError(
                f"deadline: the job is planned at {length_from}: {needs}, but the deadline {deadline!r} leaves only {leaves}; "
                f"give {length_option} if this run is shorter, or a deadline at least {needs} from now"
            )
        raise SubmitError(
            f"deadline: the job needs {needs} but the deadline {deadline!r} leaves only {leaves}; "
            f"expected a deadline at least {needs} from now"
        )
    step = _step(jar, args, command, main_class)
    demand_vector = None
    if sizes is not None:
        demand_vector = tuple(float(v) for v in estimate_demand_vector(*sizes, length_model))
    return Job(
        job_id=job_id,
        name=name,
        tenant=tenant,
        submit_s=now_s,
        deadline_s=deadline_s,
        length_s=length_s,
        step=step,
        demand_vector=demand_vector,
        deadline_text=deadline.strip(),
        nodes=width,
    )


def _width(
    nodes: int | None,
    vcpus: float | None,
    memory_gb: float | None,
    max_nodes: int | None,
    capacity: NodeCapacity | None,
    container_vcpus: float | None = None,
    container_memory_gb: float | None = None,
) -> int:
    """w, checked against ``max_nodes``; see :func:`build_job`."""
    demand = {"vcpus": vcpus, "memory_gb": memory_gb}
    if nodes is not None and any(value is not None for value in demand.values()):
        given = " and ".join(name for name, value in demand.items() if value is not None)
        raise SubmitError(
            f"nodes: expected either a width in nodes or a demand in vcpus/memory_gb, got nodes={nodes!r} and {given}"
        )
    capacity = capacity if capacity is not None else task_capacity(DEFAULT_TASK_INSTANCE_TYPE)
    for name, value, unit in (("vcpus", vcpus, "vCPUs"), ("memory_gb", memory_gb, "GiB"), ("container_vcpus", container_vcpus, "vCPUs"), ("container_memory_gb", container_memory_gb, "GiB")):
        if value is not None and (isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)) or float(value) <= 0):
            raise SubmitError(f"{name}: expected a finite number > 0 ({unit}), got {value!r}")
    container = _container(container_vcpus, container_memory_gb, capacity, nodes is not None or vcpus is not None or memory_gb is not None)
    checked = max_nodes is not None and max_nodes >= 1
    limit = f"max_nodes is {max_nodes:,} (cluster.max_nodes)" if checked else ""
    if nodes is not None:
        if isinstance(nodes, bool) or not isinstance(nodes, Integral) or nodes < 1:
            raise SubmitError(f"nodes: expected a whole number of TASK nodes >= 1, got {nodes!r}")
        width = int(nodes)
        if checked and width > max_nodes:
            raise SubmitError(
                f"nodes: {width:,} is above max_nodes {max_nodes:,} (cluster.max_nodes); a job starts only when all its "
                "nodes are free, so it would never start"
            )
        return width
    if vcpus is None and memory_gb is None:
        return 1
    if container is not None:
        count = containers_for(vcpus, memory_gb, *container)
        per_node = containers_per_node(*container, capacity)
        width = -(-count // per_node)
        if checked and width > max_nodes:
            raise SubmitError(
                f"vcpus/memory_gb: {count:,} containers of {container_vcpus:,g} vCPUs and {container_memory_gb:,g} GiB, "
                f"{per_node:,} to a node of {capacity.vcpus:,} vCPUs and {capacity.memory_gib:,g} GiB ({capacity.source}), "
                f"need {width:,} nodes; {limit}"
            )
        return width
    needs = {}
    if vcpus is not None:
        needs["vcpus"] = nodes_for(vcpus, None, capacity)
    if memory_gb is not None:
        needs["memory_gb"] = nodes_for(None, memory_gb, capacity)
    width = max(needs.values())
    if checked and width > max_nodes:
        name = max(needs, key=lambda key: (needs[key], key == "vcpus"))
        if name == "vcpus":
            what = f"{vcpus:,g} vCPUs need {needs[name]:,} nodes of {capacity.vcpus:,} vCPUs ({capacity.source})"
        else:
            what = (
                f"{memory_gb:,g} GiB need {needs[name]:,} nodes of {capacity.memory_gib:,g} GiB "
                f"({capacity.source}: {capacity.memory_mb:,} MiB)"
            )
        raise SubmitError(f"{name}: {what}; {limit}")
    return width


def _container(vcpus: float | None, memory_gb: float | None, capacity: NodeCapacity, with_width: bool) -> tuple[float, float] | None:
    """The container (vCPUs, GiB), checked to fit one node; None when not given."""
    if vcpus is None and memory_gb is None:
        return None
    if vcpus is None or memory_gb is None:
        missing = "container_vcpus" if vcpus is None else "container_memory_gb"
        raise SubmitError(f"{missing}: expected both container_vcpus and container_memory_gb (a YARN container asks for both), got one")
    if not with_width:
        raise SubmitError("container_vcpus/container_memory_gb: expected the job's width too, as nodes or as its vcpus/memory_gb in all")
    if _exact("container_vcpus", vcpus) > capacity.vcpus:
        raise SubmitError(
            f"container_vcpus: a container of {vcpus:,g} vCPUs does not fit one node of {capacity.vcpus:,} vCPUs "
            f"({capacity.source}); YARN would never place it"
        )
    if _exact("container_memory_gb", memory_gb) * MIB_PER_GIB > capacity.memory_mb:
        raise SubmitError(
            f"container_memory_gb: a container of {memory_gb:,g} GiB does not fit one node of {capacity.memory_gib:,g} GiB "
            f"({capacity.source}: {capacity.memory_mb:,} MiB); YARN would never place it"
        )
    return vcpus, memory_gb


SAME_DEADLINE_RULE = (
    "a resubmission with the same --id is the same job when its deadline is the same duration as the "
    "first time (2h, 120m and 7200 are one; the first submission's time is kept, so retries agree) or "
    "the same absolute time; any other deadline is other content and is refused"
)
"""The rule :func:`deadline_difference` applies, in the words of --help and the README."""


def deadline_difference(first: Job, again: Job) -> str | None:
    """None when ``again`` (a resubmission of ``first``'s id) has the same deadline; else what differs,
    e.g. "deadline: first 2h (2026-12-01T10:00Z), now 3h (2026-12-01T11:05Z)".

    Two durations are the same deadline when they are equal (the first one's absolute time is kept);
    otherwise the absolute times must be equal. A job stored before deadline texts were kept
    (``deadline_text`` None) matches any duration, as such a retry always did.
    """
    first_duration = parse_duration_s(first.deadline_text) if first.deadline_text is not None else None
    again_duration = parse_duration_s(again.deadline_text) if again.deadline_text is not None else None
    if first_duration is not None and again_duration is not None:
        same = first_duration == again_duration
    elif first.deadline_text is None and again_duration is not None:
        same = True
    else:
        same = first.deadline_s == again.deadline_s
    if same:
        return None
    if first.deadline_text is None and again.deadline_text is None:
        return f"deadline_s: stored {first.deadline_s!r}, given {again.deadline_s!r}"
    return f"deadline: first {_deadline_words(first)}, now {_deadline_words(again)}"


def _deadline_words(job: Job) -> str:
    when = utc_text(job.deadline_s)
    if job.deadline_text is None:
        return when
    return f"{job.deadline_text} ({when})" if parse_duration_s(job.deadline_text) is not None else job.deadline_text



def parse_deadline(deadline: str, now_s: float, wall_minus_now_s: float = 0.0) -> float:
    """The deadline as Unix seconds on the clock ``now_s`` is read on: ``now_s`` plus a duration, or
    an absolute ISO-8601 time with a timezone, read on the wall clock and moved by ``wall_minus_now_s``
    (the wall clock's lead over that clock, seconds). Raises SubmitError if it cannot be read or is
    not after ``now_s``."""
    if not isinstance(deadline, str):
        raise SubmitError(f"deadline: expected {_DEADLINE_FORMS}, got {deadline!r}")
    text = deadline.strip()
    seconds = parse_duration_s(text)
    if seconds is None and text.startswith("-") and parse_duration_s(text[1:].strip()) is not None:
        raise SubmitError(
            f"deadline: {deadline!r} is a duration into the past; expected a duration from now such as "
            f"{text[1:].strip()!r}, or a time with a timezone"
        )
    if seconds is not None:
        deadline_s = now_s + seconds
    else:
        try:
            # RFC 3339 (5.6) allows a lower-case 't' and 'z'; fromisoformat takes only upper case.
            moment = datetime.fromisoformat(text.upper())
        except ValueError:
            raise SubmitError(f"deadline: expected {_DEADLINE_FORMS}, got {deadline!r}") from None
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise SubmitError(
                f"deadline: the time {deadline!r} has no timezone; expected one such as 'Z' or '+01:00' at its end"
            )
        deadline_s = moment.timestamp() - wall_minus_now_s
    if not math.isfinite(deadline_s):
        raise SubmitError(f"deadline: {deadline!r} is too far away; expected {_DEADLINE_FORMS}")
    if deadline_s == now_s:
        raise SubmitError(f"deadline: {deadline!r} is now; expected a time after now")
    if deadline_s < now_s:
        raise SubmitError(
            f"deadline: {deadline!r} is {duration_text(now_s - deadline_s)} ago; "
            f"expected a time after now ({utc_text(now_s)})"
        )
    return deadline_s


def parse_duration_s(text: str) -> float | None:
    """Seconds of "600", "90m", "1h30m", "1d2h", "45s" (units d, h, m, s, in that order, each at most
    once, decimals allowed; a bare number is seconds); None if ``text`` is not a duration. The grammar
    ``submit --deadline`` and ``replay --deadline`` share."""
    if _SECONDS.fullmatch(text):
        return float(text)
    match = _DURATION.fullmatch(text)
    if not text or match is None:
        return None
    return sum(float(value) * _UNIT_S[unit] for unit, value in match.groupdict().items() if value is not None)


def _job_id(job_id: str | None) -> str:
    if job_id is None:
        return uuid.uuid4().hex
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id) or len(job_id) > JOB_ID_MAX_CHARS:
        raise SubmitError(
            f"job_id: expected 1 to {JOB_ID_MAX_CHARS} characters from A-Z a-z 0-9 . _ - "
            f"(it goes into the EMR step name), got {job_id!r}"
        )
    return job_id


def non_empty_text(field: str, value: str) -> str:
    """``value`` if it is text with a non-blank character that UTF-8 can hold and no control, format or
    line-separator character (a newline, NUL, a terminal escape, U+2028, a bidirectional override), else SubmitError naming ``field``: what a job's name and
    tenant must be before the store is asked about them."""
    if not isinstance(value, str) or not value.strip():
        raise SubmitError(f"{field}: expected a non-empty text, got {value!r}")
    _utf8(field, value)
    control = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if control is not None:
        # A newline, NUL or terminal escape would be printed as it is by `jobs` and in the logs.
        raise SubmitError(f"{field}: expected text without control characters, got {value[:80]!r} (it holds {control!r})")
    return value


def _utf8(field: str, value: str) -> None:
    """Text the store can keep: argv hands bytes that are not UTF-8 over as lone surrogates."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SubmitError(f"{field}: expected UTF-8 text, got {value!r} (bytes that are not UTF-8)") from None


def _finite(field: str, value: float, unit: str, minimum: float, strictly: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise SubmitError(f"{field}: expected a number ({unit}), got {value!r}")
    value = float(value)
    too_small = value <= minimum if strictly else value < minimum
    if not math.isfinite(value) or too_small:
        bound = f"> {minimum:g}" if strictly else f">= {minimum:g}"
        raise SubmitError(f"{field}: expected a finite number {bound} ({unit}), got {value!r}")
    return value


def _length_s(length_s: float | None, sizes: tuple[float, float, float] | None, model: LengthModel) -> float:
    if (length_s is None) == (sizes is None):
        raise SubmitError(
            "length_s/sizes: expected exactly one of a length in seconds or the sizes (S, S', S'') in bytes, "
            f"got {'both' if length_s is not None else 'neither'}"
        )
    if length_s is not None:
        return _finite("length_s", length_s, "seconds", minimum=0.0, strictly=True)
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__") or len(sizes) != 3:
        raise SubmitError(f"sizes: expected three byte sizes (S, S', S''), got {sizes!r}")
    checked = [_finite(f"sizes[{i}] ({label})", value, "bytes", minimum=0.0) for i, (label, value) in enumerate(zip(_SIZE_NAMES, sizes))]
    try:
        estimate = float(estimate_length_s(*checked, model))
    except ConfigError as exc:
        raise SubmitError(f"sizes: {exc}") from None
    if not math.isfinite(estimate) or estimate <= 0:
        raise SubmitError(
            f"sizes: the estimated length from {tuple(checked)} is {estimate!r} s; expected a finite length > 0 "
            "(check the length model's rates, or give length_s)"
        )
    return estimate


def _step(jar: str | None, args: list[str], command: list[str] | None, main_class: str | None) -> StepSpec:
    if (jar is None) == (command is None):
        raise SubmitError(
            "step: expected exactly one of jar (with args) or command (run by command-runner.jar), "
            f"got {'both' if jar is not None else 'neither'}"
        )
    args = _strings("args", args, allow_empty=True)
    if command is not None:
        command = _strings("command", command, allow_empty=False)
        if args:
            raise SubmitError(f"args: expected none with a command (put the arguments in the command), got {args!r}")
        if main_class is not None:
            raise SubmitError(f"main_class: expected none with a command (it is only for a jar), got {main_class!r}")
        return StepSpec(jar=COMMAND_RUNNER_JAR, args=tuple(command))
    if not isinstance(jar, str) or not jar.strip() or not (jar.endswith(".jar") or jar.startswith("s3://")):
        raise SubmitError(f"jar: expected a path ending in .jar or an s3:// URI, got {jar!r}")
    if main_class is not None and (not isinstance(main_class, str) or not main_class.strip()):
        raise SubmitError(f"main_class: expected a non-empty class name or none, got {main_class!r}")
    return StepSpec(jar=jar, args=tuple(args), main_class=main_class)


def _strings(field: str, values: list[str], allow_empty: bool) -> list[str]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise SubmitError(f"{field}: expected a list of strings, got {values!r}")
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise SubmitError(f"{field}[{index}]: expected a string, got {value!r}")
    if not allow_empty and (not values or not values[0].strip()):
        raise SubmitError(f"{field}: expected a non-empty list of strings starting with the program, got {values!r}")
    return list(values)


def parse_past_time(text: str, now_s: float, what: str) -> float:
    """Unix seconds of ``text``: an ISO-8601 time with a timezone, or a duration before ``now_s``
    ("24h", "1d", "90m", "600"). Raises ConfigError naming ``what`` if it cannot be read."""
    forms = "an ISO-8601 time with a timezone like '2026-11-28T00:00:00Z', or a duration ago like '24h' or '1d'"
    if not isinstance(text, str):
        raise ConfigError(f"{what}: expected {forms}, got {text!r}")
    seconds = parse_duration_s(text.strip())
    if seconds is not None:
        return now_s - seconds
    if text.strip().startswith("-") and parse_duration_s(text.strip()[1:].strip()) is not None:
        raise ConfigError(f"{what}: {text!r} is negative; a duration here counts back from now: write {text.strip()[1:].strip()!r}")
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(f"{what}: expected {forms}, got {text!r}") from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ConfigError(f"{what}: the time {text!r} has no timezone; expected one such as 'Z' or '+01:00' at its end")
    return moment.timestamp()


# --- width: the whole TASK nodes a job runs on -------------------------------------------------
# What one TASK node offers YARN, and the width w (whole nodes) a job's vCPU and memory demand needs.
#
# A job declares its width as ``--nodes w``, or as the vCPUs and memory its containers take together;
# then w is the least number of whole TASK nodes whose YARN capacity holds both:
#
#     w = max(1, ceil(V / c), ceil(1024 G / m))
#
# with V the vCPUs, G the memory in GiB, c a node's YARN vCPUs and m its YARN memory in MiB
# (``yarn.nodemanager.resource.memory-mb``).
#
# Source of the memory figures: Amazon EMR Release Guide, "Task configuration", default values of
# ``yarn.nodemanager.resource.memory-mb`` per instance type (without HBase), as published in
# awsdocs/amazon-emr-release-guide, doc_source/emr-hadoop-task-config.md. The vCPUs are the EC2
# instance type's, which EMR gives YARN by default (``yarn.nodemanager.resource.cpu-vcores``). Only the
# m5, c5 and r5 types whose figures were read there are listed; any other type is told through
# ``cluster.task_yarn_vcpus`` and ``cluster.task_yarn_memory_mb``.

MIB_PER_GIB = 1024
"""YARN counts memory in MiB; a job's memory is given in GiB."""

TASK_YARN_CAPACITY: dict[str, tuple[int, int]] = {
    # instance type: (vCPUs, yarn.nodemanager.resource.memory-mb)
    "m5.xlarge": (4, 12288),
    "m5.2xlarge": (8, 24576),
    "m5.4xlarge": (16, 57344),
    "m5.8xlarge": (32, 122880),
    "m5.12xlarge": (48, 188416),
    "m5.16xlarge": (64, 253952),
    "m5.24xlarge": (96, 385024),
    "c5.xlarge": (4, 6144),
    "c5.2xlarge": (8, 12288),
    "c5.4xlarge": (16, 24576),
    "c5.9xlarge": (36, 65536),
    "c5.12xlarge": (48, 90112),
    "c5.18xlarge": (72, 139264),
    "c5.24xlarge": (96, 188416),
    "r5.xlarge": (4, 24576),
    "r5.2xlarge": (8, 57344),
    "r5.4xlarge": (16, 122880),
    "r5.8xlarge": (32, 253952),
    "r5.12xlarge": (48, 385024),
    "r5.16xlarge": (64, 516096),
    "r5.24xlarge": (96, 778240),
}
"""EMR's default YARN capacity of one node, per EC2 instance type (source: the comment above)."""

DEFAULT_TASK_INSTANCE_TYPE = "m5.xlarge"
"""The TASK type assumed unless told: the one the twin prices (autoscaler.core.twin.PRICE_PER_NODE_HOUR)."""


@dataclass(frozen=True)
class NodeCapacity:
    """One TASK node's YARN capacity: ``vcpus`` and ``memory_mb`` (MiB), and ``source``, words naming
    where the figures come from ("m5.xlarge's YARN capacity"), which refusals quote.

    Raises ConfigError unless both are whole numbers >= 1.
    """

    vcpus: int
    memory_mb: int
    source: str

    def __post_init__(self) -> None:
        for name in ("vcpus", "memory_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"node capacity {name}: expected a whole number >= 1, got {value!r} ({self.source})")

    @property
    def memory_gib(self) -> float:
        return self.memory_mb / MIB_PER_GIB


_TOLD = (("task_yarn_vcpus", "yarn.nodemanager.resource.cpu-vcores"), ("task_yarn_memory_mb", "yarn.nodemanager.resource.memory-mb"))
"""The settings that tell a TASK node's YARN capacity, and the YARN setting each one is."""


def task_capacity(instance_type: str, vcpus: int | None = None, memory_mb: int | None = None) -> NodeCapacity:
    """The YARN capacity of one TASK node of ``instance_type``: ``vcpus`` and ``memory_mb`` where given
    (both, or either one over the table's figure), else :data:`TASK_YARN_CAPACITY`'s.

    Raises ConfigError naming the keys to set when the type is not in the table and a figure is missing.
    """
    known = TASK_YARN_CAPACITY.get(instance_type)
    if known is None and (vcpus is None or memory_mb is None):
        missing = [told for told, value in zip(_TOLD, (vcpus, memory_mb)) if value is None]
        keys = " and ".join(f"cluster.{key}" for key, _ in missing)
        yarn = " and ".join(setting for _, setting in missing)
        raise ConfigError(
            f"cluster.task_instance_type {instance_type!r}: its YARN capacity is not in the table of EMR's defaults "
            f"({', '.join(TASK_YARN_CAPACITY)}); set {keys} (the node's {yarn})"
        )
    if vcpus is None and memory_mb is None:
        return NodeCapacity(known[0], known[1], f"{instance_type}'s YARN capacity")
    return NodeCapacity(
        vcpus if vcpus is not None else known[0],
        memory_mb if memory_mb is not None else known[1],
        f"{instance_type}'s YARN capacity as configured",
    )


def nodes_for(vcpus: float | None, memory_gib: float | None, capacity: NodeCapacity) -> int:
    """w = max(1, ceil(vcpus / capacity.vcpus), ceil(1024 * memory_gib / capacity.memory_mb)): the least
    whole number of nodes whose YARN capacity holds both (an absent demand asks nothing).

    The division is exact on the numbers as written (12.3 GiB is 12.3, not the float next to it), so a
    demand of exactly k nodes needs k, never k + 1. Raises ConfigError for a demand that is not a
    finite number > 0.
    """
    need = 1
    for name, value, per_node in (("vcpus", vcpus, capacity.vcpus), ("memory_gib", memory_gib, Fraction(capacity.memory_mb, MIB_PER_GIB))):
        if value is None:
            continue
        exact = _exact(name, value)
        need = max(need, math.ceil(exact / per_node))
    return need


def _exact(name: str, value: float) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)) or float(value) <= 0:
        raise ConfigError(f"{name}: expected a finite number > 0, got {value!r}")
    # repr gives the shortest decimal that reads back as the same float: the number the user wrote.
    return Fraction(repr(float(value)))


def containers_for(vcpus: float | None, memory_gib: float | None, container_vcpus: float, container_memory_gib: float) -> int:
    """k, the containers of (``container_vcpus``, ``container_memory_gib``) a job needs to hold ``vcpus``
    and ``memory_gib`` in all: max(ceil(V / v), ceil(G / g)), at least 1, exact on the numbers as written.
    Raises ConfigError for a figure that is not a finite number > 0."""
    count = 1
    for name, total, each in (("vcpus", vcpus, container_vcpus), ("memory_gib", memory_gib, container_memory_gib)):
        if total is not None:
            count = max(count, math.ceil(_exact(name, total) / _exact(f"container_{name}", each)))
    return count


def containers_per_node(container_vcpus: float, container_memory_gib: float, capacity: NodeCapacity) -> int:
    """How many containers of (``container_vcpus``, ``container_memory_gib``) one node of ``capacity`` holds:
    min(floor(c / v), floor(m / (1024 g))); 0 when one does not fit. Raises ConfigError for a figure
    that is not a finite number > 0."""
    by_vcpus = math.floor(capacity.vcpus / _exact("container_vcpus", container_vcpus))
    by_memory = math.floor(capacity.memory_mb / (_exact("container_memory_gib", container_memory_gib) * MIB_PER_GIB))
    return min(by_vcpus, by_memory)
