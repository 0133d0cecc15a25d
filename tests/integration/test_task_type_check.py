"""Start-up reads the TASK group's instance type from EMR (ListInstanceGroups, moto over HTTP) and
refuses a config whose cluster.task_instance_type says another, since submit sizes nodes by it."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from autoscaler.app import compose
from autoscaler.core.errors import ConfigError

from conftest import REGION


def settings_for(tmp_path, cluster_id: str, endpoint: str, cluster_lines: str = ""):
    path = tmp_path / "config.toml"
    path.write_text(
        f'store_path = "{tmp_path / "jobs.db"}"\nlog_format = "json"\nhealth_port = 0\n'
        f'[cluster]\nid = "{cluster_id}"\nregion = "{REGION}"\nendpoint_url = "{endpoint}"\nmax_nodes = 10\n{cluster_lines}',
        encoding="utf-8",
    )
    return compose.settings(path)


def test_the_task_groups_type_is_read_and_the_same_type_starts(emr_cluster_id, moto_endpoint, tmp_path):
    _, cluster_id = emr_cluster_id  # its TASK group runs m5.xlarge, the default type
    cluster = compose.emr_cluster(settings_for(tmp_path, cluster_id, moto_endpoint), startup_wait_s=0)
    assert cluster.task_group().instance_type == "m5.xlarge"


@pytest.mark.parametrize(
    "cluster_lines",
    ['task_instance_type = "r5.2xlarge"\n', 'task_instance_type = "x9.huge"\ntask_yarn_vcpus = 8\ntask_yarn_memory_mb = 30000\n'],
)
def test_another_configured_type_stops_start_up_naming_both(emr_cluster_id, moto_endpoint, tmp_path, cluster_lines):
    _, cluster_id = emr_cluster_id
    with pytest.raises(ConfigError) as refused:
        compose.emr_cluster(settings_for(tmp_path, cluster_id, moto_endpoint, cluster_lines), startup_wait_s=0)
    message = str(refused.value)
    configured = cluster_lines.split('"')[1]
    assert f"cluster.task_instance_type is {configured!r}, but the TASK group " in message
    assert f"of cluster {cluster_id} runs m5.xlarge" in message
    assert message.endswith("set cluster.task_instance_type = 'm5.xlarge'")


def m6i_cluster(emr) -> str:
    groups = [
        {"Name": "master", "InstanceRole": "MASTER", "InstanceType": "m5.xlarge", "InstanceCount": 1},
        {"Name": "task", "InstanceRole": "TASK", "InstanceType": "m6i.xlarge", "InstanceCount": 1},
    ]
    cluster_id = emr.run_job_flow(
        Name="m6i", ReleaseLabel="emr-6.15.0", JobFlowRole="EMR_EC2_DefaultRole", ServiceRole="EMR_DefaultRole",
        Instances={"InstanceGroups": groups, "KeepJobFlowAliveWhenNoSteps": True},
    )["JobFlowId"]  # fmt: skip
    return cluster_id


def test_a_type_the_table_does_not_list_is_named_with_the_figures_to_tell(emr, moto_endpoint, tmp_path):
    cluster_id = m6i_cluster(emr)
    with pytest.raises(ConfigError) as refused:
        compose.emr_cluster(settings_for(tmp_path, cluster_id, moto_endpoint, 'task_instance_type = "m5.xlarge"\n'), startup_wait_s=0)
    assert str(refused.value).endswith(
        "set cluster.task_instance_type = 'm6i.xlarge', with cluster.task_yarn_vcpus and cluster.task_yarn_memory_mb "
        "(its YARN capacity is not in the table)"
    )


def test_a_config_that_never_set_the_type_starts_with_a_warning_naming_the_groups_type(emr, moto_endpoint, tmp_path):
    cluster_id = m6i_cluster(emr)
    with capture_logs() as logs:
        cluster = compose.emr_cluster(settings_for(tmp_path, cluster_id, moto_endpoint), startup_wait_s=0)
    assert cluster.task_group().instance_type == "m6i.xlarge"
    (warning,) = [line for line in logs if line["event"] == "task_instance_type_differs"]
    assert warning["configured"] == "m5.xlarge (the default)"
    assert "runs m6i.xlarge" in warning["detail"] and warning["detail"].endswith("(its YARN capacity is not in the table)")
