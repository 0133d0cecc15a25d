"""The EMR cluster adapter: the TASK instance group and the steps that carry our jobs.

Every AWS call goes through one boto3 client made by ``emr_client``; retries (standard mode:
exponential backoff with jitter, a retry quota) are botocore's, never a loop of ours. A call
that still fails is raised as ``ActuationError`` naming the cluster, the AWS operation and the
AWS error code.

``EmrCluster.check`` is the start-up check of the configured cluster (DescribeCluster, then the
TASK group): a cluster that is missing from the region used, has ended, or uses instance fleets is
refused as ``ClusterError`` naming ``cluster.id`` and ``cluster.region``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import boto3
import structlog
from botocore.client import BaseClient
from botocore.exceptions import BotoCoreError, ClientError

from autoscaler.adapters.aws import aws_client, is_transient
from autoscaler.core.errors import ActuationError, ClusterError, ConfigError
from autoscaler.core.model import Job
from autoscaler.core.ports import JOB_STATE_BY_STEP_STATE, StepStatus, TaskGroup, TaskInstance, step_states_to_job_states  # noqa: F401 - re-exported

STEP_NAME_MAX_CHARS = 256
"""EMR's limit on a step name."""

DEFAULT_STEP_JAR = "command-runner.jar"

ENDED_CLUSTER_STATES = ("TERMINATING", "TERMINATED", "TERMINATED_WITH_ERRORS")
"""EMR cluster states from which a cluster never runs again. STARTING and BOOTSTRAPPING pass the
check: the bootstrap action starts the daemon while its cluster is still BOOTSTRAPPING."""

NOT_FOUND_ERROR_CODES = frozenset({"InvalidRequestException", "ValidationException", "ResourceNotFoundException"})
"""What DescribeCluster answers for a cluster id EMR does not have in the region asked (EMR:
InvalidRequestException "Cluster id 'j-...' is not valid.")."""


def emr_client(
    region: str | None = None,
    endpoint_url: str | None = None,
    session: boto3.Session | None = None,
) -> BaseClient:
    """The EMR client every EMR call of the project goes through: ``aws_client`` (standard
    retries, failed attempts logged). Does not call AWS; ConfigError when no region is configured."""
    return aws_client("emr", "EMR", region, endpoint_url, session)


PERMANENT_ERROR_CODES = frozenset({"ValidationException", "InvalidRequestException"})
"""AWS error codes that refuse the request itself; retrying the same request cannot succeed."""

log = structlog.get_logger("autoscaler")

ACTIVE_STEP_STATES = ("PENDING", "CANCEL_PENDING", "RUNNING")
"""EMR step states in which a step still holds (or waits for) a node."""


class EmrCluster:
    """One EMR cluster, through its TASK instance group and the steps named ``{step_prefix}{job id}``.

    Implements ``autoscaler.core.ports.Cluster``. Every method blocks until AWS answers (botocore's
    retries included) and raises ActuationError when the call still fails. ``client`` is an
    EMR client, normally from ``emr_client``; ``new_client``, if given, makes the fresh client
    each slot starts with (``start_slot``).
    """

    def __init__(
        self,
        client: BaseClient,
        cluster_id: str,
        step_prefix: str = "autoscaler:",
        new_client: Callable[[], BaseClient] | None = None,
    ) -> None:
        if not step_prefix:
            raise ConfigError("step_prefix must not be empty: it tells our steps from everyone else's")
        self.client = client
        self.cluster_id = cluster_id
        self.step_prefix = step_prefix
        self.new_client = new_client

    def start_slot(self) -> None:
        """Begin a slot with a fresh client (when ``new_client`` was given). botocore's retry quota
        belongs to a client and refills only as calls succeed; under sustained throttling it runs dry
        and calls fail without a retry. A client per slot gives every slot the full quota, while
        within a slot the quota still stops a retry storm."""
        if self.new_client is not None:
            self.client = self.new_client()

    def check(self, configured_region: str | None) -> TaskGroup:
        """Check at start-up that this is a cluster the daemon can run against; returns its TASK group.

        DescribeCluster: the cluster exists in the client's region, has not ended
        (``ENDED_CLUSTER_STATES``), and uses instance groups, not fleets; then ``task_group``: it has a
        TASK group. ``configured_region``: the ``cluster.region`` setting (None when the region came
        from the AWS environment), named in the messages beside the region used. Raises ClusterError
        when the cluster fails a check or AWS refuses the request; ActuationError (its cause kept,
        ``autoscaler.adapters.aws.is_transient`` true) for an error that passes.
        """
        setting = f"cluster.id = {self.cluster_id!r}"
        region = self.client.meta.region_name
        where = f"region {region} (cluster.region = {configured_region!r})" if configured_region else (
            f"region {region} (cluster.region is not set: the region came from AWS_DEFAULT_REGION, AWS_REGION or the AWS profile)"
        )
        try:
            with self._calling("DescribeCluster"):
                described = self.client.describe_cluster(ClusterId=self.cluster_id)["Cluster"]
        except ActuationError as error:
            cause = error.__cause__
            if is_transient(error) or not isinstance(cause, ClientError):
                raise
            details = cause.response.get("Error", {})
            code, message = details.get("Code", "unknown"), " ".join(str(details.get("Message", "")).split())[:200]
            if code in NOT_FOUND_ERROR_CODES:
                raise ClusterError(
                    f"{setting}: EMR has no such cluster in {where}: DescribeCluster answered {code}: {message}. "
                    "Check cluster.id; the cluster may be in another region: set cluster.region to the region it runs in"
                ) from cause
            if "AccessDenied" in code:
                raise ClusterError(
                    f"{setting}: not allowed to describe the cluster in {where}: DescribeCluster answered {code}: {message}. "
                    "The daemon's role needs elasticmapreduce:DescribeCluster on the cluster's ARN (deploy/iam-policy.json); "
                    "the ARN names the region, so a cluster in another region is refused this way too"
                ) from cause
            raise ClusterError(f"{setting}: DescribeCluster in {where} answered {code}: {message}") from cause
        status = described.get("Status", {})
        state = status.get("State", "unknown")
        if state in ENDED_CLUSTER_STATES:
            reason = status.get("StateChangeReason", {})
            why = ", ".join(str(part) for part in (reason.get("Message"), reason.get("Code")) if part)
            raise ClusterError(
                f"{setting}: EMR cluster {self.cluster_id} in region {region} is {state}{f' ({why})' if why else ''}; "
                "the daemon needs a running cluster: set cluster.id to a cluster that is starting, running or waiting"
            )
        if described.get("InstanceCollectionType") == "INSTANCE_FLEET":
            raise ClusterError(
                f"{setting}: cluster {self.cluster_id} uses instance fleets; the daemon resizes a TASK instance group: "
                "use an instance-group cluster"
            )
        try:
            group = self.task_group()
        except ActuationError as error:
            if is_transient(error):
                raise
            raise ClusterError(f"{setting}: {error}") from error
        log.info("cluster_checked", cluster_id=self.cluster_id, region=region, state=state, task_group=group.group_id, task_nodes_requested=group.requested)
        return group

    def task_group(self) -> TaskGroup:
        """Read the TASK instance group (ListInstanceGroups, all pages): id, nodes requested and running,
        and its instance type.

        Raises ActuationError when the cluster is missing, has no TASK group, or the call fails.
        """
        with self._calling("ListInstanceGroups"):
            pages = self.client.get_paginator("list_instance_groups").paginate(ClusterId=self.cluster_id)
            groups = [group for page in pages for group in page.get("InstanceGroups", [])]
        for group in groups:
            if group.get("InstanceGroupType") == "TASK":
                return TaskGroup(
                    group_id=group["Id"],
                    requested=int(group.get("RequestedInstanceCount", 0)),
                    running=int(group.get("RunningInstanceCount", 0)),
                    instance_type=group.get("InstanceType"),
                )
        found = ", ".join(sorted({str(group.get("InstanceGroupType")) for group in groups})) or "none"
        raise ActuationError(
            f"EMR cluster {self.cluster_id} has no TASK instance group (its groups: {found}); "
            "add one (AddInstanceGroups, InstanceRole TASK) for the daemon to resize",
            permanent=True,
        )

    def task_instances(self) -> list[TaskInstance]:
        """Every EC2 instance the TASK group has had, running or ended (ListInstances, all pages).

        An instance counts from its creation to its end time (None while it runs); one without an
        EC2 instance id yet (still being provisioned) is left out. Raises ActuationError when the
        call fails.
        """
        with self._calling("ListInstances"):
            pages = self.client.get_paginator("list_instances").paginate(ClusterId=self.cluster_id, InstanceGroupTypes=["TASK"])
            listed = [instance for page in pages for instance in page.get("Instances", [])]
        instances = []
        for instance in listed:
            timeline = instance.get("Status", {}).get("Timeline", {})
            created, ended = timeline.get("CreationDateTime"), timeline.get("EndDateTime")
            if instance.get("Ec2InstanceId") and created is not None:
                instances.append(
                    TaskInstance(instance["Ec2InstanceId"], created.timestamp(), None if ended is None else ended.timestamp())
                )
        return instances

    def resize(self, nodes: int) -> None:
        """Ask for ``nodes`` TASK nodes (ListInstanceGroups, then ModifyInstanceGroups).

        Returns once EMR accepts the request, not when the nodes are running; ``task_group``
        shows the progress. No ModifyInstanceGroups call is made when ``nodes`` is already the
        requested count. Raises ActuationError for a negative or non-integer ``nodes`` (before
        any call) and when a call fails.
        """
        if isinstance(nodes, bool) or not hasattr(nodes, "__index__") or operator.index(nodes) < 0:
            raise ActuationError(
                f"resize of EMR cluster {self.cluster_id}: nodes must be a whole number >= 0, got {nodes!r}"
            )
        count = operator.index(nodes)
        group = self.task_group()
        if group.requested == count:
            return
        with self._calling("ModifyInstanceGroups"):
            self.client.modify_instance_groups(
                ClusterId=self.cluster_id,
                InstanceGroups=[{"InstanceGroupId": group.group_id, "InstanceCount": count}],
            )

    def add_step(self, job: Job) -> str:
        """Add the job's step (AddJobFlowSteps) named ``{step_prefix}{job id}``; returns the step id.

        The step is a HadoopJarStep (``command-runner.jar`` when the job's jar is empty) with
        ActionOnFailure=CONTINUE, so a failed job never stops the cluster. Returns once EMR has
        queued the step. Raises ActuationError when the name exceeds EMR's 256 characters or
        the call fails.
        """
        name = f"{self.step_prefix}{job.job_id}"
        if len(name) > STEP_NAME_MAX_CHARS:
            raise ActuationError(
                f"job {job.job_id!r}: step name {name[:40]!r}... is {len(name)} characters, "
                f"EMR allows {STEP_NAME_MAX_CHARS}"
            )
        hadoop_jar_step: dict = {"Jar": job.step.jar or DEFAULT_STEP_JAR, "Args": list(job.step.args)}
        if job.step.main_class:
            hadoop_jar_step["MainClass"] = job.step.main_class
        with self._calling("AddJobFlowSteps"):
            response = self.client.add_job_flow_steps(
                JobFlowId=self.cluster_id,
                Steps=[{"Name": name, "ActionOnFailure": "CONTINUE", "HadoopJarStep": hadoop_jar_step}],
            )
        return response["StepIds"][0]

    def steps(self, active_only: bool = False, newer_than: frozenset[str] | None = None) -> list[StepStatus]:
        """Steps of ours on the cluster (ListSteps, following Marker over the pages), oldest first,
        each with its times (``StepStatus.created_s``, ``start_s``, ``end_s``: EMR's Timeline.CreationDateTime,
        StartDateTime and EndDateTime).

        A step is ours when its name starts with ``step_prefix``; the rest of the name is the
        job id. EMR pages ListSteps at 50 steps and lists newest first; the order is reversed
        here. ``active_only`` asks only for PENDING, CANCEL_PENDING and RUNNING steps, which
        keeps the per-slot call short on a cluster with a long history. ``newer_than``: step ids
        already known; listing stops at the first of them, so only the steps added after it are
        read (one page, usually, rather than the cluster's whole history).
        Raises ActuationError when the call fails.
        """
        statuses: list[StepStatus] = []
        filters = {"StepStates": list(ACTIVE_STEP_STATES)} if active_only else {}
        with self._calling("ListSteps"):
            for page in self.client.get_paginator("list_steps").paginate(ClusterId=self.cluster_id, **filters):
                for step in page.get("Steps", []):
                    if newer_than is not None and step["Id"] in newer_than:
                        statuses.reverse()
                        return statuses
                    name = step.get("Name", "")
                    if name.startswith(self.step_prefix):
                        statuses.append(_step_status(step, name[len(self.step_prefix):]))
        statuses.reverse()
        return statuses

    def step_state(self, step_id: str) -> str:
        """EMR's state of one step (DescribeStep). Raises ActuationError when the call fails."""
        return self.step_status(step_id).state

    def step_status(self, step_id: str) -> StepStatus:
        """One step (DescribeStep): the job id from its name (the whole name if it lacks ``step_prefix``),
        its state and its Timeline's times. Raises ActuationError when the call fails."""
        with self._calling("DescribeStep"):
            step = self.client.describe_step(ClusterId=self.cluster_id, StepId=step_id)["Step"]
        name = step.get("Name", "")
        return _step_status(step, name[len(self.step_prefix):] if name.startswith(self.step_prefix) else name)

    @contextmanager
    def _calling(self, operation: str) -> Iterator[None]:
        """Raise botocore's errors from ``operation`` as ActuationError, keeping the cause."""
        try:
            yield
        except ClientError as error:
            details = error.response.get("Error", {})
            code = details.get("Code", "unknown")
            message = " ".join(str(details.get("Message", "")).split())[:200]
            raise ActuationError(
                f"EMR {error.operation_name or operation} on cluster {self.cluster_id} failed: {code}: {message}",
                permanent=code in PERMANENT_ERROR_CODES,
            ) from error
        except BotoCoreError as error:
            raise ActuationError(f"EMR {operation} on cluster {self.cluster_id} failed: {error}") from error


def _step_status(step: dict, job_id: str) -> StepStatus:
    """A ListSteps or DescribeStep step as a StepStatus; a time EMR leaves out (not started, not ended) is None."""
    timeline = step["Status"].get("Timeline", {})

    def seconds(key: str) -> float | None:
        value = timeline.get(key)
        return None if value is None else value.timestamp()

    return StepStatus(
        job_id=job_id,
        step_id=step["Id"],
        state=step["Status"]["State"],
        created_s=seconds("CreationDateTime"),
        start_s=seconds("StartDateTime"),
        end_s=seconds("EndDateTime"),
    )
