"""The EMR cluster as shadow mode sees it: read, never written.

``run --shadow`` runs beside EMR managed scaling and must change nothing on the cluster. That is made
structural, twice: the boto3 client is given a ``before-call`` hook (:func:`read_only_client`) that
refuses every EMR operation outside :data:`READ_OPERATIONS` before botocore sends it, so no code path,
ours or a library's, can resize the TASK group, add or cancel a step; and :class:`ReadOnlyEmr`
(the Cluster port's reads, plus every step of the cluster) raises :class:`ShadowWriteRefused` from
the port's writes before any call.
"""

from __future__ import annotations

from botocore.client import BaseClient

from autoscaler.adapters.emr import EmrCluster
from autoscaler.core.errors import ActuationError
from autoscaler.core.model import Job
from autoscaler.core.shadow_books import ClusterStep

READ_OPERATIONS = frozenset({"DescribeCluster", "ListInstanceGroups", "ListInstances", "ListSteps", "DescribeStep"})
"""The EMR operations shadow mode may call; every other (ModifyInstanceGroups, AddJobFlowSteps,
CancelSteps, TerminateJobFlows ...) is refused before it is sent."""

ACTIVE_STATES = ("PENDING", "CANCEL_PENDING", "RUNNING")


class ShadowWriteRefused(ActuationError):
    """Shadow mode was asked to change the cluster: it never does (a bug, never a retry)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"shadow mode changes nothing on the cluster: {what} refused", permanent=True)


def read_only_client(client: BaseClient) -> BaseClient:
    """``client`` (an EMR client) with a hook that raises ShadowWriteRefused for any operation not in
    :data:`READ_OPERATIONS`, before botocore sends it. Returns the same client."""

    def refuse_writes(model, **_kwargs) -> None:
        if model.name not in READ_OPERATIONS:
            raise ShadowWriteRefused(f"EMR {model.name}")

    client.meta.events.register("before-call.emr", refuse_writes, unique_id="autoscaler-shadow-read-only")
    return client


class ReadOnlyEmr(EmrCluster):
    """An EMR cluster read through a :func:`read_only_client`: the TASK group (``task_group``, ``check``)
    and every step (:meth:`cluster_steps`, :meth:`cluster_step`). ``resize`` and ``add_step`` raise
    ShadowWriteRefused before any call. Reads raise ActuationError as EmrCluster's do."""

    def __init__(self, client: BaseClient, cluster_id: str, new_client=None) -> None:
        made = None if new_client is None else (lambda: read_only_client(new_client()))
        super().__init__(read_only_client(client), cluster_id, new_client=made)

    def resize(self, nodes: int) -> None:
        raise ShadowWriteRefused(f"resize of the TASK group to {nodes!r} nodes")

    def add_step(self, job: Job) -> str:
        raise ShadowWriteRefused(f"a step for job {job.job_id!r}")

    def cluster_steps(self, newer_than: frozenset[str] = frozenset(), active_only: bool = False) -> list[ClusterStep]:
        """Every step of the cluster (ListSteps, all pages; whoever added it), oldest first; only those
        added after the newest of ``newer_than`` (step ids) when one of them is met (EMR lists newest
        first: the listing stops there); only PENDING, CANCEL_PENDING and RUNNING ones if ``active_only``."""
        steps: list[ClusterStep] = []
        filters = {"StepStates": list(ACTIVE_STATES)} if active_only else {}
        with self._calling("ListSteps"):
            for page in self.client.get_paginator("list_steps").paginate(ClusterId=self.cluster_id, **filters):
                for step in page.get("Steps", []):
                    if step["Id"] in newer_than:
                        steps.reverse()
                        return steps
                    steps.append(_cluster_step(step))
        steps.reverse()
        return steps

    def cluster_step(self, step_id: str) -> ClusterStep:
        """One step (DescribeStep)."""
        with self._calling("DescribeStep"):
            step = self.client.describe_step(ClusterId=self.cluster_id, StepId=step_id)["Step"]
        return _cluster_step(step)


def _cluster_step(step: dict) -> ClusterStep:
    timeline = step.get("Status", {}).get("Timeline", {})

    def seconds(key: str) -> float | None:
        value = timeline.get(key)
        return None if value is None else value.timestamp()

    return ClusterStep(step["Id"], step.get("Name", ""), step["Status"]["State"], seconds("CreationDateTime"), seconds("StartDateTime"), seconds("EndDateTime"))
