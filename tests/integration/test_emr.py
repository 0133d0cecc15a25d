"""EmrCluster against moto's EMR over HTTP, with the real boto3 client.

What moto does that these tests rely on (moto 5.x): a resize sets RequestedInstanceCount and
RunningInstanceCount to the new count at once (EMR would show RESIZING and fill Running later);
ListSteps lists newest first in pages of 50 with a Marker, like EMR; a cluster's first step
starts RUNNING and later ones PENDING, and nothing changes a step's state afterwards, so tests
advance states with the ``set_step_state`` fixture (it writes moto's backend object).
"""

from __future__ import annotations

import re
import socket

import boto3
import pytest

from autoscaler.adapters.emr import EmrCluster, emr_client, step_states_to_job_states
from autoscaler.core.errors import ActuationError, ClusterError, ConfigError
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.ports import StepStatus, TaskGroup


def make_job(job_id: str, step: StepSpec | None = None) -> Job:
    return Job(
        job_id=job_id,
        name=f"job {job_id}",
        tenant="analytics",
        submit_s=1_700_000_000.0,
        deadline_s=1_700_003_600.0,
        length_s=600.0,
        step=step or StepSpec(args=("spark-submit", "--deploy-mode", "cluster", f"s3://bucket/{job_id}.py")),
    )


def task_group_counts(client, cluster_id: str) -> tuple[int, int]:
    """(RequestedInstanceCount, RunningInstanceCount) of the TASK group, read straight from EMR."""
    groups = client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"]
    (task,) = [group for group in groups if group["InstanceGroupType"] == "TASK"]
    return task["RequestedInstanceCount"], task["RunningInstanceCount"]


# --- the client factory -------------------------------------------------------------------


def test_emr_client_uses_standard_retries_and_given_endpoint(moto_endpoint):
    client = emr_client(region="eu-west-1", endpoint_url=moto_endpoint)

    assert client.meta.endpoint_url == moto_endpoint
    assert client.meta.region_name == "eu-west-1"
    # botocore reads Config(max_attempts=5) as 5 retries after the first call: 6 sends at most.
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 6}


def test_emr_client_honours_aws_endpoint_url_and_default_region(moto_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)

    client = emr_client()

    assert client.meta.endpoint_url == moto_endpoint
    assert client.meta.region_name == "us-east-1"
    assert client.list_clusters()["Clusters"] == []


def test_emr_client_without_region_raises_config_error(moto_server, monkeypatch):
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")

    with pytest.raises(ConfigError, match="region"):
        emr_client(session=boto3.Session())


# --- the TASK group -----------------------------------------------------------------------


@pytest.mark.parametrize("emr_cluster_id", [0, 2], indirect=True)
def test_task_group_reads_the_task_group(emr_cluster_id, request):
    client, cluster_id = emr_cluster_id
    task_nodes = request.node.callspec.params["emr_cluster_id"]
    groups = client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"]
    (task_id,) = [group["Id"] for group in groups if group["InstanceGroupType"] == "TASK"]

    group = EmrCluster(client, cluster_id).task_group()

    assert group == TaskGroup(group_id=task_id, requested=task_nodes, running=task_nodes)


@pytest.mark.parametrize("emr_cluster_id", [None], indirect=True)
def test_task_group_missing_raises_naming_the_cluster(emr_cluster_id):
    client, cluster_id = emr_cluster_id

    with pytest.raises(ActuationError, match=f"{cluster_id} has no TASK instance group"):
        EmrCluster(client, cluster_id).task_group()


@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_resize_changes_the_task_instance_count(emr_cluster_id):
    client, cluster_id = emr_cluster_id
    cluster = EmrCluster(client, cluster_id)

    cluster.resize(5)
    # moto reports the new count as both requested and running, immediately.
    assert task_group_counts(client, cluster_id) == (5, 5)
    assert cluster.task_group().requested == 5

    cluster.resize(0)
    assert task_group_counts(client, cluster_id) == (0, 0)


def test_resize_to_the_requested_count_changes_nothing(emr_cluster_id):
    client, cluster_id = emr_cluster_id

    EmrCluster(client, cluster_id).resize(2)

    assert task_group_counts(client, cluster_id) == (2, 2)


def test_resize_leaves_core_and_master_alone(emr_cluster_id):
    client, cluster_id = emr_cluster_id

    EmrCluster(client, cluster_id).resize(7)

    groups = client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"]
    counts = {group["InstanceGroupType"]: group["RequestedInstanceCount"] for group in groups}
    assert counts == {"MASTER": 1, "CORE": 2, "TASK": 7}


@pytest.mark.parametrize("nodes", [-1, 2.5, "3", True, None])
def test_resize_refuses_bad_counts_before_calling_aws(emr_cluster_id, nodes):
    client, cluster_id = emr_cluster_id

    with pytest.raises(ActuationError, match=re.escape(f"nodes must be a whole number >= 0, got {nodes!r}")):
        EmrCluster(client, cluster_id).resize(nodes)

    assert task_group_counts(client, cluster_id) == (2, 2)


# --- steps --------------------------------------------------------------------------------


def test_add_step_names_the_step_with_the_job_id(emr_cluster_id):
    client, cluster_id = emr_cluster_id
    job = make_job("job-42")

    step_id = EmrCluster(client, cluster_id).add_step(job)

    step = client.describe_step(ClusterId=cluster_id, StepId=step_id)["Step"]
    assert step["Name"] == "autoscaler:job-42"
    assert step["ActionOnFailure"] == "CONTINUE"
    assert step["Config"]["Jar"] == "command-runner.jar"
    assert step["Config"]["Args"] == list(job.step.args)


def test_add_step_sends_jar_and_main_class(emr_cluster_id, moto_step):
    client, cluster_id = emr_cluster_id
    spec = StepSpec(jar="s3://bucket/wordcount.jar", args=("in/", "out/"), main_class="org.example.WordCount")

    step_id = EmrCluster(client, cluster_id).add_step(make_job("wc-1", spec))

    # moto's ListSteps/DescribeStep drop MainClass from Config; its backend keeps what was sent.
    assert moto_step(cluster_id, step_id).hadoop_jar_step == {
        "Jar": "s3://bucket/wordcount.jar",
        "Args": ["in/", "out/"],
        "MainClass": "org.example.WordCount",
    }


def test_add_step_with_an_empty_jar_uses_command_runner(emr_cluster_id):
    client, cluster_id = emr_cluster_id

    step_id = EmrCluster(client, cluster_id).add_step(make_job("cmd-1", StepSpec(jar="", args=("hostname",))))

    step = client.describe_step(ClusterId=cluster_id, StepId=step_id)["Step"]
    assert step["Config"]["Jar"] == "command-runner.jar"
    assert step["Config"]["Args"] == ["hostname"]


def test_add_step_refuses_a_name_longer_than_emr_allows(emr_cluster_id):
    client, cluster_id = emr_cluster_id

    with pytest.raises(ActuationError, match="266 characters, EMR allows 256"):
        EmrCluster(client, cluster_id).add_step(make_job("x" * 255))

    assert client.list_steps(ClusterId=cluster_id)["Steps"] == []


def test_steps_reads_back_only_our_steps(emr_cluster_id):
    client, cluster_id = emr_cluster_id
    cluster = EmrCluster(client, cluster_id)
    first = cluster.add_step(make_job("a"))
    client.add_job_flow_steps(
        JobFlowId=cluster_id,
        Steps=[{"Name": "someone-else", "ActionOnFailure": "CONTINUE", "HadoopJarStep": {"Jar": "x.jar"}}],
    )
    second = cluster.add_step(make_job("b:with:colons"))

    statuses = cluster.steps()

    # moto starts a cluster's first step RUNNING and queues the rest PENDING.
    assert statuses == [
        StepStatus(job_id="a", step_id=first, state="RUNNING"),
        StepStatus(job_id="b:with:colons", step_id=second, state="PENDING"),
    ]


def test_steps_with_another_prefix_sees_other_steps(emr_cluster_id):
    client, cluster_id = emr_cluster_id
    EmrCluster(client, cluster_id, step_prefix="team-a/").add_step(make_job("a1"))
    step_b = EmrCluster(client, cluster_id, step_prefix="team-b/").add_step(make_job("b1"))

    assert EmrCluster(client, cluster_id, step_prefix="team-b/").steps() == [
        StepStatus(job_id="b1", step_id=step_b, state="PENDING")
    ]


def test_empty_step_prefix_is_refused(emr_cluster_id):
    client, cluster_id = emr_cluster_id

    with pytest.raises(ConfigError, match="step_prefix"):
        EmrCluster(client, cluster_id, step_prefix="")


def test_steps_follows_every_list_steps_page(emr_cluster_id):
    client, cluster_id = emr_cluster_id
    cluster = EmrCluster(client, cluster_id)
    n_steps = 120
    step_ids = [cluster.add_step(make_job(f"job-{i:03d}")) for i in range(n_steps)]
    client.add_job_flow_steps(
        JobFlowId=cluster_id,
        Steps=[{"Name": "not-ours", "ActionOnFailure": "CONTINUE", "HadoopJarStep": {"Jar": "x.jar"}}],
    )

    first_page = client.list_steps(ClusterId=cluster_id)
    assert len(first_page["Steps"]) == 50 and "Marker" in first_page  # the server pages; steps() must follow

    statuses = cluster.steps()

    assert [status.step_id for status in statuses] == step_ids
    assert [status.job_id for status in statuses] == [f"job-{i:03d}" for i in range(n_steps)]


def test_steps_report_states_advanced_in_moto(emr_cluster_id, set_step_state):
    client, cluster_id = emr_cluster_id
    cluster = EmrCluster(client, cluster_id)
    ids = {job_id: cluster.add_step(make_job(job_id)) for job_id in ("done", "broken", "queued", "cancelling")}
    # moto never advances steps itself: set_step_state writes the state on moto's backend object.
    set_step_state(cluster_id, ids["done"], "COMPLETED")
    set_step_state(cluster_id, ids["broken"], "FAILED")
    set_step_state(cluster_id, ids["cancelling"], "CANCEL_PENDING")

    statuses = cluster.steps()

    assert {status.job_id: status.state for status in statuses} == {
        "done": "COMPLETED",
        "broken": "FAILED",
        "queued": "PENDING",
        "cancelling": "CANCEL_PENDING",
    }
    assert step_states_to_job_states(statuses) == {
        "done": "done",
        "broken": "failed",
        "queued": "released",
        "cancelling": "released",
    }


def test_steps_carry_their_run_from_emr_timeline(emr_cluster_id, set_step_state, set_step_times):
    client, cluster_id = emr_cluster_id
    cluster = EmrCluster(client, cluster_id)
    ids = {job_id: cluster.add_step(make_job(job_id)) for job_id in ("done", "running", "waiting")}
    set_step_state(cluster_id, ids["done"], "COMPLETED")
    set_step_times(cluster_id, ids["done"], 1_700_000_100.0, 1_700_000_712.0)
    set_step_state(cluster_id, ids["running"], "RUNNING")
    set_step_times(cluster_id, ids["running"], 1_700_000_300.0, None)
    # What boto3 reads back over HTTP, independently of the adapter.
    raw = client.describe_step(ClusterId=cluster_id, StepId=ids["done"])["Step"]["Status"]["Timeline"]
    assert raw["EndDateTime"].timestamp() - raw["StartDateTime"].timestamp() == 612.0

    listed = {status.job_id: status for status in cluster.steps()}
    described = cluster.step_status(ids["done"])

    assert (listed["done"].start_s, listed["done"].end_s, listed["done"].run) == (1_700_000_100.0, 1_700_000_712.0, (1_700_000_100.0, 1_700_000_712.0))
    assert (described.job_id, described.state, described.run) == ("done", "COMPLETED", (1_700_000_100.0, 1_700_000_712.0))
    assert (listed["running"].start_s, listed["running"].end_s, listed["running"].run) == (1_700_000_300.0, None, None)
    assert listed["waiting"].end_s is None and listed["waiting"].run is None


# --- failures -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "operation"),
    [
        (lambda cluster: cluster.task_group(), "ListInstanceGroups"),
        (lambda cluster: cluster.resize(3), "ListInstanceGroups"),
        (lambda cluster: cluster.add_step(make_job("orphan")), "AddJobFlowSteps"),
        (lambda cluster: cluster.steps(), "ListSteps"),
    ],
    ids=["task_group", "resize", "add_step", "steps"],
)
def test_missing_cluster_raises_actuation_error_naming_the_operation(emr, call, operation):
    # EMR answers 400 InvalidRequestException for an unknown cluster; moto answers HTTP 500,
    # which botocore retries (standard mode) before the error reaches us. Either way: wrapped.
    cluster = EmrCluster(emr, "j-DOESNOTEXIST")

    with pytest.raises(ActuationError, match=f"EMR {operation} on cluster j-DOESNOTEXIST failed: ") as raised:
        call(cluster)

    assert raised.value.__cause__ is not None


def test_unreachable_endpoint_raises_actuation_error(moto_server):
    with socket.socket() as probe:  # a port that was free a moment ago: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = emr_client(region="us-east-1", endpoint_url=f"http://127.0.0.1:{port}")

    with pytest.raises(ActuationError, match="EMR ListInstanceGroups on cluster j-ANY failed"):
        EmrCluster(client, "j-ANY").task_group()


# --- step state mapping (pure) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("step_state", "job_state"),
    [
        ("PENDING", "released"),
        ("CANCEL_PENDING", "released"),
        ("RUNNING", "running"),
        ("COMPLETED", "done"),
        ("CANCELLED", "failed"),
        ("FAILED", "failed"),
        ("INTERRUPTED", "failed"),
    ],
)
def test_step_states_to_job_states_maps_each_emr_state(step_state, job_state):
    assert step_states_to_job_states([StepStatus("j1", "s-1", step_state)]) == {"j1": job_state}


def test_step_states_to_job_states_last_step_of_a_job_wins_and_unknown_states_are_left_out():
    statuses = [
        StepStatus("retried", "s-1", "FAILED"),
        StepStatus("retried", "s-2", "RUNNING"),
        StepStatus("future", "s-3", "SOME_NEW_STATE"),
    ]

    assert step_states_to_job_states(statuses) == {"retried": "running"}


# --- the start-up check of the configured cluster ------------------------------------------


def _moto_backend_cluster(cluster_id: str):
    from conftest import _moto_cluster

    return _moto_cluster(cluster_id)


def test_check_returns_the_task_group_of_a_running_cluster(emr_cluster_id):
    client, cluster_id = emr_cluster_id
    (task_id,) = [g["Id"] for g in client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"] if g["InstanceGroupType"] == "TASK"]

    assert EmrCluster(client, cluster_id).check("us-east-1") == TaskGroup(group_id=task_id, requested=2, running=2)


def test_check_of_an_unknown_cluster_names_cluster_id_and_the_region_used(emr):
    with pytest.raises(ClusterError) as raised:
        EmrCluster(emr, "j-TYPO12345").check("us-east-1")

    message = str(raised.value)
    assert message.startswith("cluster.id = 'j-TYPO12345': EMR has no such cluster in region us-east-1 (cluster.region = 'us-east-1')")
    assert "DescribeCluster answered InvalidRequestException: Cluster id 'j-TYPO12345' is not valid." in message
    assert "the cluster may be in another region" in message


def in_region(client, region: str):
    """``client`` with each request's Host header named as EMR's endpoint in ``region``. moto's EMR
    takes the region from the host name alone; on 127.0.0.1 every request would land in us-east-1."""

    def host(request, **_):
        request.headers["Host"] = f"elasticmapreduce.{region}.amazonaws.com"

    client.meta.events.register("before-send.emr", host)
    return client


def test_check_of_a_cluster_in_another_region_says_it_may_be_there(emr_cluster_id, moto_endpoint):
    _, cluster_id = emr_cluster_id  # made in us-east-1
    home = in_region(emr_client(region="us-east-1", endpoint_url=moto_endpoint, session=boto3.Session()), "us-east-1")
    elsewhere = in_region(emr_client(region="eu-west-1", endpoint_url=moto_endpoint, session=boto3.Session()), "eu-west-1")
    assert EmrCluster(home, cluster_id).check("us-east-1").requested == 2

    with pytest.raises(ClusterError) as raised:
        EmrCluster(elsewhere, cluster_id).check("eu-west-1")

    message = str(raised.value)
    assert f"cluster.id = '{cluster_id}': EMR has no such cluster in region eu-west-1 (cluster.region = 'eu-west-1')" in message
    assert "may be in another region: set cluster.region to the region it runs in" in message


def test_check_without_cluster_region_says_where_the_region_came_from(emr):
    with pytest.raises(ClusterError, match=r"region us-east-1 \(cluster.region is not set: the region came from AWS_DEFAULT_REGION"):
        EmrCluster(emr, "j-TYPO12345").check(None)


def test_check_of_a_terminated_cluster_names_its_state(emr_cluster_id):
    client, cluster_id = emr_cluster_id
    client.terminate_job_flows(JobFlowIds=[cluster_id])
    assert client.describe_cluster(ClusterId=cluster_id)["Cluster"]["Status"]["State"] == "TERMINATED"

    with pytest.raises(ClusterError) as raised:
        EmrCluster(client, cluster_id).check("us-east-1")

    # moto gives a terminated cluster no StateChangeReason: no reason in brackets.
    assert str(raised.value) == (
        f"cluster.id = '{cluster_id}': EMR cluster {cluster_id} in region us-east-1 is TERMINATED; "
        "the daemon needs a running cluster: set cluster.id to a cluster that is starting, running or waiting"
    )


@pytest.mark.parametrize("state", ["TERMINATING", "TERMINATED_WITH_ERRORS"])
def test_check_of_an_ending_cluster_names_its_state_and_reason(emr_cluster_id, state):
    client, cluster_id = emr_cluster_id
    # moto has no call that ends a cluster with errors or a reason: its backend object is set.
    backend = _moto_backend_cluster(cluster_id)
    backend.state = state
    backend.last_state_change_reason = "The master node was terminated by user."
    assert client.describe_cluster(ClusterId=cluster_id)["Cluster"]["Status"]["StateChangeReason"]["Message"] == backend.last_state_change_reason

    with pytest.raises(ClusterError, match=re.escape(f"is {state} (The master node was terminated by user.); the daemon needs a running cluster")):
        EmrCluster(client, cluster_id).check("us-east-1")


@pytest.mark.parametrize("state", ["STARTING", "BOOTSTRAPPING", "RUNNING", "WAITING"])
def test_check_passes_a_cluster_that_is_starting_or_running(emr_cluster_id, state):
    # The bootstrap action starts the daemon while its cluster is BOOTSTRAPPING.
    client, cluster_id = emr_cluster_id
    _moto_backend_cluster(cluster_id).state = state

    assert EmrCluster(client, cluster_id).check("us-east-1").requested == 2


def test_check_of_an_instance_fleet_cluster_says_to_use_instance_groups(emr_cluster_id):
    client, cluster_id = emr_cluster_id
    # moto 5 cannot make an instance-fleet cluster (RunJobFlow ignores InstanceFleets, and
    # DescribeCluster has no InstanceCollectionType); the field is set on its backend object,
    # which moto's serializer then sends as EMR does.
    assert "InstanceCollectionType" not in client.describe_cluster(ClusterId=cluster_id)["Cluster"]
    _moto_backend_cluster(cluster_id).instance_collection_type = "INSTANCE_FLEET"
    assert client.describe_cluster(ClusterId=cluster_id)["Cluster"]["InstanceCollectionType"] == "INSTANCE_FLEET"

    with pytest.raises(ClusterError) as raised:
        EmrCluster(client, cluster_id).check("us-east-1")

    assert str(raised.value) == (
        f"cluster.id = '{cluster_id}': cluster {cluster_id} uses instance fleets; the daemon resizes a TASK instance group: "
        "use an instance-group cluster"
    )


@pytest.mark.parametrize("emr_cluster_id", [None], indirect=True)
def test_check_of_a_cluster_without_a_task_group_names_its_groups(emr_cluster_id):
    client, cluster_id = emr_cluster_id

    with pytest.raises(ClusterError) as raised:
        EmrCluster(client, cluster_id).check("us-east-1")

    assert str(raised.value).startswith(f"cluster.id = '{cluster_id}': EMR cluster {cluster_id} has no TASK instance group (its groups: CORE, MASTER)")
