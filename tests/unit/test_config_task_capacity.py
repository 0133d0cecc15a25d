"""[cluster] task_instance_type and its YARN capacity: the table's defaults, figures told, and a type that must be told."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_config import EXAMPLE

from autoscaler.app.config import load_settings
from autoscaler.core.errors import ConfigError
from autoscaler.core.intake import NodeCapacity

pytestmark = pytest.mark.usefixtures("no_autoscaler_environment")


def config(tmp_path: Path, cluster_lines: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[cluster]\nid = "j-ABC123"\n{cluster_lines}', encoding="utf-8")
    return path


def test_the_example_config_runs_m5_xlarge_nodes_of_4_vcpus_and_12288_mib():
    capacity = load_settings(EXAMPLE).cluster.task_capacity()
    assert capacity == NodeCapacity(4, 12288, "m5.xlarge's YARN capacity")


def test_a_listed_type_takes_the_tables_figures(tmp_path):
    capacity = load_settings(config(tmp_path, 'task_instance_type = "r5.2xlarge"\n')).cluster.task_capacity()
    assert (capacity.vcpus, capacity.memory_mb) == (8, 57344)


def test_an_unknown_type_is_refused_naming_the_keys_to_set(tmp_path):
    with pytest.raises(ConfigError) as refused:
        load_settings(config(tmp_path, 'task_instance_type = "x9.huge"\n'))
    message = str(refused.value)
    assert "cluster.task_instance_type 'x9.huge'" in message
    assert "set cluster.task_yarn_vcpus and cluster.task_yarn_memory_mb" in message


def test_an_unknown_type_told_both_figures_loads(tmp_path):
    settings = load_settings(config(tmp_path, 'task_instance_type = "x9.huge"\ntask_yarn_vcpus = 12\ntask_yarn_memory_mb = 40960\n'))
    assert settings.cluster.task_capacity() == NodeCapacity(12, 40960, "x9.huge's YARN capacity as configured")


def test_the_environment_tells_the_figures_too(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOSCALER_CLUSTER__TASK_INSTANCE_TYPE", "x9.huge")
    monkeypatch.setenv("AUTOSCALER_CLUSTER__TASK_YARN_VCPUS", "6")
    monkeypatch.setenv("AUTOSCALER_CLUSTER__TASK_YARN_MEMORY_MB", "18432")
    assert load_settings(config(tmp_path, "")).cluster.task_capacity().memory_gib == 18.0


@pytest.mark.parametrize("line, named", [("task_yarn_vcpus = 0", "cluster.task_yarn_vcpus: must be >= 1"), ("task_yarn_memory_mb = -5", "cluster.task_yarn_memory_mb: must be >= 1")])
def test_a_figure_below_one_is_named(tmp_path, line, named):
    with pytest.raises(ConfigError, match=named):
        load_settings(config(tmp_path, line + "\n"))
