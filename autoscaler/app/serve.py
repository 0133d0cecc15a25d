"""``autoscaler serve``: an EMR-compatible step endpoint, so unchanged boto3 clients and Airflow
connections submit deferrable steps.

A client pointed at it (boto3 ``endpoint_url``, ``AWS_ENDPOINT_URL_EMR``, an Airflow connection's
``service_config``) speaks EMR's JSON API (``X-Amz-Target: ElasticMapReduce.<Operation>``):

- ``AddJobFlowSteps`` stores each step as a queued job and returns its step id at once; the daemon
  releases it to EMR by deadline (earliest deadline first). A step's deadline, tenant, length and width
  come from its ``HadoopJarStep.Properties`` ``autoscaler.deadline``, ``autoscaler.tenant``,
  ``autoscaler.length_s`` and ``autoscaler.nodes``, else from its caller's defaults (``[[serve.callers]]``).
  A retried call (botocore resends it with the same ``amz-sdk-invocation-id``) gets the same step ids
  and stores nothing twice.
- ``DescribeStep`` answers PENDING, "deferred: ... deadline ...", while the job waits; once released,
  EMR's own step (by the id the daemon recorded), shown under the id this endpoint gave.
- ``ListSteps`` and ``CancelSteps`` work on the caller's own steps; a queued step is cancelled here, a
  released one on EMR.
- Seven read-only calls on the managed cluster (:meth:`StepGateway.pass_through`: DescribeCluster,
  ListInstanceGroups ...) pass through to EMR with the server's credentials; every other is refused (403).

This module is the operations (:class:`StepGateway`); :mod:`autoscaler.app.serve_http` is the HTTP in
front of them. Each request is authenticated by its SigV4 signature (``autoscaler.adapters.sigv4``) against the
callers' keys; a caller submits, sees and cancels only as its own tenants. A refused request stores
nothing. Errors are EMR's JSON errors (``__type``, ``message``), which botocore raises as ClientError.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets as random_secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog
from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from autoscaler.adapters.clock import submit_time
from autoscaler.app.submission import Submission, planned_job
from autoscaler.core.errors import ConfigError, SubmitError
from autoscaler.core.model import Job, JobState
from autoscaler.core.readable import utc_text

log = structlog.get_logger("autoscaler")

PROPERTY_PREFIX = "autoscaler."
PROPERTIES = ("deadline", "tenant", "length_s", "nodes")
"""The step properties read (each after ``autoscaler.``); any other is refused, since a released step
runs only its jar, main class and arguments."""

STEP_STATE_BY_JOB_STATE = {
    JobState.QUEUED: "PENDING",
    JobState.RELEASED: "PENDING",
    JobState.RUNNING: "RUNNING",
    JobState.DONE: "COMPLETED",
    JobState.FAILED: "FAILED",
    JobState.CANCELLED: "CANCELLED",
}
"""The EMR step state a job's stored state stands for (a released job's true state is EMR's)."""

LIST_PAGE = 50
"""Steps per ListSteps page, as EMR pages them."""

MAX_STEPS_PER_CALL = 256
"""EMR's limit on the steps of one AddJobFlowSteps call."""

STEP_NAME_MAX_CHARS = 256
ARG_MAX_CHARS = 10_280
"""EMR's limits: a step name of at most 256 characters, each jar, main class and argument at most 10,280."""

_WHOLE = re.compile(r"[0-9]{1,9}")
_NUMBER = re.compile(r"[0-9]{1,12}(\.[0-9]{1,12})?")


class EmrApiError(Exception):
    """An error answered in EMR's JSON form: ``code`` (``__type``), ``message``, HTTP ``status``."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.status = code, status


def _invalid(message: str) -> EmrApiError:
    return EmrApiError("InvalidRequestException", message)


def _denied(message: str) -> EmrApiError:
    return EmrApiError("AccessDeniedException", message, 403)


@dataclass(frozen=True)
class Caller:
    """A caller as serve knows it: its key id, the tenants it acts for (the first is its default),
    its default deadline (a duration) and its default length for a name never run (s, or None)."""

    access_key_id: str
    tenants: tuple[str, ...]
    deadline: str
    length_s: float | None = None


def read_secrets(callers) -> dict[str, str]:
    """{access key id: secret} for ``[[serve.callers]]``, each read from its ``secret_env`` variable or
    its ``secret_file`` (stripped). Raises ConfigError naming the caller and the variable or file
    that is unset, unreadable or empty."""
    found: dict[str, str] = {}
    for caller in callers:
        if caller.secret_env is not None:
            secret = os.environ.get(caller.secret_env, "").strip()
            where = f"environment variable {caller.secret_env}"
        else:
            try:
                secret = Path(caller.secret_file).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as error:
                raise ConfigError(f"serve caller {caller.access_key_id!r}: cannot read secret_file {str(caller.secret_file)!r}: {error}") from None
            where = f"secret_file {str(caller.secret_file)!r}"
        if not secret:
            raise ConfigError(f"serve caller {caller.access_key_id!r}: {where} is empty or unset; expected its secret access key")
        found[caller.access_key_id] = secret
    return found


@dataclass
class StepGateway:
    """The operations, apart from HTTP: each takes the caller and the request's JSON body and returns
    the response's, or raises EmrApiError.

    ``store``: the job store the daemon drains (SqliteJobStore). ``emr_client``: a boto3 EMR client for the
    managed cluster ``cluster_id``. ``settings``: the daemon's Settings (tenants, max nodes, lengths).
    """

    store: object
    emr_client: object
    cluster_id: str
    settings: object
    callers: Mapping[str, Caller]

    # -- AddJobFlowSteps ------------------------------------------------------------------------

    def add_steps(self, caller: Caller, body: dict, invocation_id: str | None) -> dict:
        """Queue the steps of ``body`` (AddJobFlowSteps); {"StepIds": [...]}. ``invocation_id``: botocore's
        ``amz-sdk-invocation-id``, the same on every retry of one call, from which the ids are derived:
        a retry stores nothing twice. Two calls with the same content are two calls, as at EMR."""
        unknown = sorted(set(body) - {"JobFlowId", "Steps", "ExecutionRoleArn"})
        if unknown:
            raise _invalid(f"AddJobFlowSteps: unknown field {', '.join(unknown)}; expected JobFlowId and Steps")
        if "ExecutionRoleArn" in body:
            raise _invalid(
                "ExecutionRoleArn: a deferred step is released with the daemon's own role, not a runtime role; "
                "add steps that need a runtime role to EMR directly"
            )
        self._managed_cluster(body.get("JobFlowId"), "JobFlowId")
        steps = body.get("Steps")
        if not isinstance(steps, list) or not steps:
            raise _invalid("Steps: expected a list of 1 to 256 steps")
        if len(steps) > MAX_STEPS_PER_CALL:
            raise _invalid(f"Steps: {len(steps):,} steps; EMR takes at most {MAX_STEPS_PER_CALL} in one call")
        stamp = submit_time(self.store.path)
        jobs = [self._job(caller, step, index, invocation_id, stamp.now_s, stamp.wall_minus_now_s) for index, step in enumerate(steps)]
        try:
            added = self.store.submit_many(jobs)
        except SubmitError as error:
            raise _invalid(f"Steps: {error}") from None
        step_ids = [job.job_id for job in jobs]
        log.info("steps_submitted", caller=caller.access_key_id, step_ids=step_ids, added=added, retried=len(jobs) - added)
        return {"StepIds": step_ids}

    def _job(self, caller: Caller, step, index: int, invocation_id: str | None, now_s: float, wall_minus_now_s: float) -> Job:
        where = f"Steps[{index}]"
        if not isinstance(step, dict):
            raise _invalid(f"{where}: expected a step object")
        unknown = sorted(set(step) - {"Name", "ActionOnFailure", "HadoopJarStep"})
        if unknown:
            raise _invalid(f"{where}: unknown field {', '.join(unknown)}; expected Name, ActionOnFailure and HadoopJarStep")
        name = step.get("Name")
        if not isinstance(name, str) or not name.strip() or len(name) > STEP_NAME_MAX_CHARS:
            raise _invalid(f"{where}.Name: expected a step name of 1 to {STEP_NAME_MAX_CHARS} characters")
        action = step.get("ActionOnFailure", "CONTINUE")
        if action != "CONTINUE":
            raise _invalid(
                f"{where} ({_shown(name)}): ActionOnFailure {_shown(action)}: a deferred step runs with CONTINUE, since steps are released by "
                "deadline, not in the order sent; set CONTINUE, or add this step to EMR directly"
            )
        jar_step = step.get("HadoopJarStep")
        if not isinstance(jar_step, dict) or not isinstance(jar_step.get("Jar"), str):
            raise _invalid(f"{where} ({_shown(name)}): HadoopJarStep with a Jar is required")
        unknown = sorted(set(jar_step) - {"Jar", "MainClass", "Args", "Properties"})
        if unknown:
            raise _invalid(f"{where} ({_shown(name)}): HadoopJarStep: unknown field {', '.join(unknown)}; expected Jar, MainClass, Args and Properties")
        properties = _properties(jar_step.get("Properties", []), where, name)
        tenant = properties.get("tenant", caller.tenants[0])
        if tenant not in caller.tenants:
            raise _denied(f"{where} ({_shown(name)}): caller {caller.access_key_id!r} may not submit as tenant {_shown(tenant)}; its tenants: {', '.join(caller.tenants)}")
        args = jar_step.get("Args", [])
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise _invalid(f"{where} ({_shown(name)}): HadoopJarStep.Args: expected a list of strings")
        main_class = jar_step.get("MainClass")
        if main_class is not None and not isinstance(main_class, str):
            raise _invalid(f"{where} ({_shown(name)}): HadoopJarStep.MainClass: expected a string")
        too_long = [field for field, value in (("Jar", jar_step["Jar"]), ("MainClass", main_class or ""), *(("Args", a) for a in args)) if len(value) > ARG_MAX_CHARS]
        if too_long:
            raise _invalid(f"{where} ({_shown(name)}): HadoopJarStep.{too_long[0]}: longer than EMR's {ARG_MAX_CHARS:,} characters")
        jar = jar_step["Jar"]
        command_runner = jar == "command-runner.jar"
        submission = Submission(
            name=name,
            tenant=tenant,
            deadline=properties.get("deadline", caller.deadline),
            job_id=_step_id(caller.access_key_id, invocation_id, index),
            length_s=_number(properties, "length_s", where, float),
            default_length_s=caller.length_s,
            jar=None if command_runner else jar,
            args=() if command_runner else tuple(args),
            command=tuple(args) if command_runner else None,
            main_class=main_class or None,
            nodes=_number(properties, "nodes", where, int),
            door="",
            length_option=f"the step property {PROPERTY_PREFIX}length_s (seconds)",
            no_length_hint=f"set the step property {PROPERTY_PREFIX}length_s (seconds), or a default length for this caller ([[serve.callers]] length_s)",
        )
        try:
            return planned_job(self.store, self.settings, submission, now_s, wall_minus_now_s)
        except (SubmitError, ConfigError) as error:
            raise _invalid(f"{where} ({_shown(name)}): {error}") from None

    # -- DescribeStep, ListSteps ----------------------------------------------------------------

    def describe_step(self, caller: Caller, body: dict) -> dict:
        self._managed_cluster(body.get("ClusterId"), "ClusterId")
        job = self._own_job(caller, body.get("StepId"))
        step = _step(job)
        if job.step_id is not None and job.state != JobState.CANCELLED:
            try:
                real = self.emr_client.describe_step(ClusterId=self.cluster_id, StepId=job.step_id)["Step"]
                step["Status"] = real["Status"]
            except (ClientError, BotoCoreError) as error:
                # EMR cannot be asked now: the state the daemon last recorded, said to be that.
                log.warning("describe_step_from_store", step_id=job.job_id, emr_step_id=job.step_id, error=str(error))
                step["Status"]["StateChangeReason"] = {"Message": f"EMR could not be asked ({_error_text(error)}); state as the autoscaler last saw it"}
        return {"Step": step}

    def list_steps(self, caller: Caller, body: dict) -> dict:
        """The caller's steps, newest first, LIST_PAGE to a page; ``Marker`` is the arrival number (seq)
        of the last step of the page before, so steps added between two pages do not shift them."""
        self._managed_cluster(body.get("ClusterId"), "ClusterId")
        wanted_states, wanted_ids, marker = body.get("StepStates"), body.get("StepIds"), body.get("Marker")
        known_states = sorted(set(STEP_STATE_BY_JOB_STATE.values()) | {"CANCEL_PENDING", "INTERRUPTED"})
        if wanted_states is not None and (not isinstance(wanted_states, list) or not set(wanted_states) <= set(known_states)):
            raise _invalid(f"StepStates: expected a list of {', '.join(known_states)}, got {_shown(wanted_states)}")
        if wanted_ids is not None and (not isinstance(wanted_ids, list) or not all(isinstance(i, str) for i in wanted_ids)):
            raise _invalid(f"StepIds: expected a list of step ids, got {_shown(wanted_ids)}")
        if marker is not None and not (isinstance(marker, str) and _WHOLE.fullmatch(marker)):
            raise _invalid(f"Marker: {_shown(marker)} is not a marker this endpoint gave")
        states = None if wanted_states is None else [job for job, step in STEP_STATE_BY_JOB_STATE.items() if step in wanted_states]
        jobs = self.store.tenants_jobs(caller.tenants, states)  # newest first, as EMR lists
        if wanted_ids:
            jobs = [job for job in jobs if job.job_id in set(wanted_ids)]
        if marker is not None:
            jobs = [job for job in jobs if (job.seq or 0) < int(marker)]
        response: dict = {"Steps": [_step(job) for job in jobs[:LIST_PAGE]]}
        if len(jobs) > LIST_PAGE:
            response["Marker"] = str(jobs[LIST_PAGE - 1].seq)
        return response

    # -- CancelSteps ------------------------------------------------------------------------------

    def cancel_steps(self, caller: Caller, body: dict) -> dict:
        self._managed_cluster(body.get("ClusterId"), "ClusterId")
        step_ids = body.get("StepIds")
        if not isinstance(step_ids, list) or not step_ids or not all(isinstance(s, str) for s in step_ids):
            raise _invalid("StepIds: expected a list of step ids")
        jobs = {step_id: self._own_job(caller, step_id) for step_id in step_ids}  # all checked before any is cancelled
        outcomes = self.store.cancel_queued(list(jobs))
        answers = []
        for step_id, job in jobs.items():
            outcome = outcomes.get(step_id)
            if outcome == "cancelled":
                answers.append({"StepId": step_id, "Status": "SUBMITTED", "Reason": "cancelled before release: it will not run"})
            elif outcome == "released":
                answers.append(self._cancel_on_emr(step_id, self.store.job(step_id) or job, body.get("StepCancellationOption")))
            elif outcome == "releasing":
                answers.append({"StepId": step_id, "Status": "FAILED", "Reason": "being released to EMR this moment; cancel again in a few seconds"})
            else:
                answers.append({"StepId": step_id, "Status": "FAILED", "Reason": f"already {job.state}: nothing to cancel"})
        log.info("steps_cancel", caller=caller.access_key_id, outcomes={a["StepId"]: a["Status"] for a in answers})
        return {"CancelStepsInfoList": answers}

    def _cancel_on_emr(self, step_id: str, job: Job, option: str | None) -> dict:
        extra = {"StepCancellationOption": option} if option else {}
        try:
            info = self.emr_client.cancel_steps(ClusterId=self.cluster_id, StepIds=[job.step_id], **extra)["CancelStepsInfoList"]
        except (ClientError, BotoCoreError) as error:
            return {"StepId": step_id, "Status": "FAILED", "Reason": f"released as EMR step {job.step_id}; EMR refused the cancel: {_error_text(error)}"}
        answer = dict(info[0]) if info else {"Status": "FAILED", "Reason": "EMR answered nothing"}
        answer["StepId"] = step_id
        return answer

    # -- the rest: read-only calls on the managed cluster, passed to EMR ---------------------------

    def pass_through(self, operation: str, body: dict) -> dict:
        # The calls passed to EMR, read-only and on the managed cluster; every other is refused. Named one
        # by one, not by a prefix (some Get* calls issue credentials), each a call the IAM policy's scan reads.
        calls = {
            "DescribeCluster": lambda: self.emr_client.describe_cluster(**body),
            "ListInstanceGroups": lambda: self.emr_client.list_instance_groups(**body),
            "ListInstances": lambda: self.emr_client.list_instances(**body),
            "ListInstanceFleets": lambda: self.emr_client.list_instance_fleets(**body),
            "ListBootstrapActions": lambda: self.emr_client.list_bootstrap_actions(**body),
            "GetManagedScalingPolicy": lambda: self.emr_client.get_managed_scaling_policy(**body),
            "GetAutoTerminationPolicy": lambda: self.emr_client.get_auto_termination_policy(**body),
        }
        if operation not in calls:
            raise _denied(
                f"{operation}: this endpoint takes AddJobFlowSteps, DescribeStep, ListSteps and CancelSteps, and passes to EMR only "
                f"{', '.join(calls)} on cluster {self.cluster_id}; send other calls to EMR directly"
            )
        self._managed_cluster(body.get("ClusterId"), "ClusterId")
        try:
            response = calls[operation]()
        except ClientError as error:
            details = error.response.get("Error", {})
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 400)
            raise EmrApiError(details.get("Code", "InternalServerError"), _error_text(error), status) from None
        except ParamValidationError as error:
            raise _invalid(" ".join(str(error).split())) from None
        except BotoCoreError as error:
            # EMR cannot be reached from here (no connection, no credentials): a fault of this server, which a client may retry.
            raise EmrApiError("ServiceUnavailable", f"EMR could not be asked from this endpoint: {_error_text(error)}", 503) from None
        response.pop("ResponseMetadata", None)
        return response

    # -- shared checks ----------------------------------------------------------------------------

    def _managed_cluster(self, cluster_id, name: str) -> None:
        if cluster_id != self.cluster_id:
            raise _invalid(f"{name}: this endpoint defers steps for cluster {self.cluster_id} only, got {cluster_id!r}")

    def _own_job(self, caller: Caller, step_id) -> Job:
        if not isinstance(step_id, str) or not step_id:
            raise _invalid("StepId: expected a step id")
        job = self.store.job(step_id)
        if job is None:
            raise _invalid(f"Step id {step_id!r} is not a step of this endpoint")
        if job.tenant not in caller.tenants:
            raise _denied(f"step {step_id} belongs to a tenant caller {caller.access_key_id!r} may not act for")
        return job


def _error_text(error: Exception) -> str:
    """An AWS error in one short line: its code and message (an HTML error page is left out)."""
    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        message = " ".join(str(details.get("Message", "")).split())
        return f"{details.get('Code', 'unknown')}" + (f": {message[:200]}" if message and not message.startswith("<") else "")
    return " ".join(str(error).split())[:200]


def _properties(given, where: str, name: str) -> dict[str, str]:
    """``autoscaler.*`` step properties, by their name after the prefix; anything else, and a property
    given twice, is refused."""
    if not isinstance(given, list) or not all(isinstance(p, dict) and isinstance(p.get("Key"), str) and isinstance(p.get("Value"), str) for p in given):
        raise _invalid(f"{where} ({_shown(name)}): HadoopJarStep.Properties: expected a list of {{Key, Value}} strings")
    found = {}
    for prop in given:
        key = prop["Key"]
        short = key[len(PROPERTY_PREFIX):] if key.startswith(PROPERTY_PREFIX) else None
        if short not in PROPERTIES:
            allowed = ", ".join(PROPERTY_PREFIX + p for p in PROPERTIES)
            raise _invalid(f"{where} ({_shown(name)}): property {_shown(key)} is not kept by a deferred step; expected only {allowed}")
        if short in found:
            raise _invalid(f"{where} ({_shown(name)}): property {key} is given twice; give it once")
        found[short] = prop["Value"]
    return found


def _number(properties: dict[str, str], key: str, where: str, kind: Callable):
    """A number property, written in plain ASCII digits (``600``, ``90.5``; a whole number for ``int``)."""
    if key not in properties:
        return None
    text = properties[key]
    if not (_WHOLE if kind is int else _NUMBER).fullmatch(text):
        noun = "a whole number like 2" if kind is int else "a number of seconds like 600 or 90.5"
        raise _invalid(f"{where}: property {PROPERTY_PREFIX}{key}: expected {noun}, got {_shown(text)}")
    return kind(text)


def _shown(value) -> str:
    """A value sent, quoted for a message, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:80]}... ({len(text):,} characters)"


def _step_id(access_key_id: str, invocation_id: str | None, index: int) -> str:
    """An EMR-like step id ("s-" and 13 characters). botocore resends a retried call with the same
    ``amz-sdk-invocation-id``, so the id is derived from it (with the caller and the step's place):
    a retry names the same job, which the store keeps once. Without one, a random id."""
    if invocation_id:
        digest = hashlib.sha256(f"{access_key_id}\n{invocation_id}\n{index}".encode()).digest()
    else:
        digest = random_secrets.token_bytes(16)
    return "s-" + base64.b32encode(digest).decode()[:13]


def _step(job: Job) -> dict:
    """A job as EMR describes a step (Id, Name, Config, ActionOnFailure, Status), times in Unix seconds."""
    state = STEP_STATE_BY_JOB_STATE[JobState(job.state)]
    config: dict = {"Jar": job.step.jar or "command-runner.jar", "Args": list(job.step.args), "Properties": {}}
    if job.step.main_class:
        config["MainClass"] = job.step.main_class
    timeline: dict = {"CreationDateTime": job.submit_s}
    if job.run_start_s is not None:
        timeline["StartDateTime"] = job.run_start_s
    if job.run_end_s is not None:
        timeline["EndDateTime"] = job.run_end_s
    status: dict = {"State": state, "Timeline": timeline}
    if job.state == JobState.QUEUED:
        status["StateChangeReason"] = {
            "Message": f"deferred by the autoscaler: released to start by {utc_text(job.deadline_s - job.length_s)} at the latest "
            f"(planned at {job.length_s:,.0f} s), deadline {utc_text(job.deadline_s)}; sooner when nodes are free"
        }
    elif job.state == JobState.CANCELLED:
        status["StateChangeReason"] = {"Message": "cancelled before it was released"}
    return {"Id": job.job_id, "Name": job.name, "Config": config, "ActionOnFailure": "CONTINUE", "Status": status}


def gateway_from_settings(settings, store, emr) -> tuple[StepGateway, dict[str, str]]:
    """The gateway and the callers' secrets for ``settings`` ([serve], cluster.id). Raises ConfigError
    when no caller is configured or a secret cannot be read."""
    if not settings.serve.callers:
        raise ConfigError("serve: no [[serve.callers]] configured; each caller needs access_key_id, secret_env or secret_file, and tenants")
    if settings.cluster.id is None:
        raise ConfigError("serve: cluster.id is not set; the endpoint defers steps for that cluster")
    secrets = read_secrets(settings.serve.callers)
    callers = {
        caller.access_key_id: Caller(caller.access_key_id, tuple(caller.tenants), caller.deadline, caller.length_s)
        for caller in settings.serve.callers
    }
    return StepGateway(store=store, emr_client=emr, cluster_id=settings.cluster.id, settings=settings, callers=callers), secrets
