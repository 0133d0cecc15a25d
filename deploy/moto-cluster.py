"""An EMR cluster the daemon can run against, in a local moto server (docs/walkthrough.md).

    python deploy/moto-cluster.py                   # create one; prints its id
    python deploy/moto-cluster.py --show j-XXXXXXX  # its TASK group and steps, as EMR answers

The cluster is what the daemon checks at start-up (autoscaler.adapters.emr.EmrCluster.check):
instance groups, not fleets, with a TASK group, kept alive without steps, and StepConcurrencyLevel
256, so the steps the daemon adds run side by side. moto accepts any credentials: when the
environment has none, fake ones are set for this script. It never touches real AWS unless
--endpoint-url points there.
"""

from __future__ import annotations

import argparse
import os
import sys

import boto3

STEP_CONCURRENCY = 256
"""EMR's most steps running at once; its default, 1, would run the released jobs one after another."""

INSTANCE_TYPE = "m5.xlarge"
"""The daemon's default cluster.task_instance_type; another type would need it set in the config."""


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="moto-cluster.py",
        description=(
            "Create an EMR cluster for the autoscaler in a moto server (instance groups: MASTER 1, CORE 2, TASK; "
            f"StepConcurrencyLevel {STEP_CONCURRENCY}) and print its id; with --show, print a cluster's TASK group "
            "and steps instead. moto accepts any credentials: fake ones are set when the environment has none."
        ),
    )
    parser.add_argument("--endpoint-url", default="http://127.0.0.1:5000", help="the moto server (default: %(default)s)")
    parser.add_argument("--region", default="us-east-1", help="the region to create it in (default: %(default)s)")
    parser.add_argument("--task-nodes", type=int, default=0, help="TASK nodes to start with (default: %(default)s)")
    parser.add_argument("--show", metavar="CLUSTER_ID", help="print this cluster's TASK group and steps; create nothing")
    return parser.parse_args(argv)


def emr(endpoint_url: str, region: str):
    """An EMR client for ``endpoint_url``; fake credentials when the environment gives none (moto takes any)."""
    if boto3.Session().get_credentials() is None:
        os.environ["AWS_ACCESS_KEY_ID"] = "testing"
        os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    return boto3.Session(region_name=region).client("emr", endpoint_url=endpoint_url)


def create(client, task_nodes: int) -> str:
    """RunJobFlow with MASTER, CORE and TASK instance groups; returns the cluster id."""
    groups = [
        {"Name": "master", "InstanceRole": "MASTER", "InstanceType": INSTANCE_TYPE, "InstanceCount": 1},
        {"Name": "core", "InstanceRole": "CORE", "InstanceType": INSTANCE_TYPE, "InstanceCount": 2},
        {"Name": "task", "InstanceRole": "TASK", "InstanceType": INSTANCE_TYPE, "InstanceCount": task_nodes},
    ]
    response = client.run_job_flow(
        Name="autoscaler-walkthrough",
        ReleaseLabel="emr-7.2.0",
        JobFlowRole="EMR_EC2_DefaultRole",
        ServiceRole="EMR_DefaultRole",
        StepConcurrencyLevel=STEP_CONCURRENCY,
        Instances={"InstanceGroups": groups, "KeepJobFlowAliveWhenNoSteps": True},
    )
    return response["JobFlowId"]


def show(client, cluster_id: str) -> str:
    """The cluster's TASK group (nodes requested and running) and its steps, newest first, as text."""
    groups = client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"]
    lines = [
        f"TASK group {g['Id']}: {g['RequestedInstanceCount']} requested, {g['RunningInstanceCount']} running ({g['InstanceType']})"
        for g in groups
        if g["InstanceGroupType"] == "TASK"
    ]
    steps = client.list_steps(ClusterId=cluster_id)["Steps"]
    lines.append(f"steps: {len(steps)}")
    lines += [f"  {s['Id']}  {s['Status']['State']:<8} {s['Name']}" for s in steps]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    client = emr(arguments.endpoint_url, arguments.region)
    if arguments.show:
        print(show(client, arguments.show))
    else:
        print(create(client, arguments.task_nodes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
