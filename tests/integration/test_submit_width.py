"""``submit --nodes`` and ``--vcpus/--memory-gb``: the width stored, each refusal with its figures and
the store as it was, and ``jobs`` showing the width."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main


def config(tmp_path: Path, cluster_lines: str = "") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[cluster]\nid = "j-ABC123"\nmax_nodes = 32\n{cluster_lines}', encoding="utf-8")
    return path


def submit(tmp_path: Path, *width: str, job_id: str = "wide", cluster_lines: str = "") -> int:
    """The exit status of ``autoscaler submit``, argparse's refusals (which exit) included."""
    try:
        return main([
            "submit", "--config", str(config(tmp_path, cluster_lines)), "--store", str(tmp_path / "jobs.db"), "--id", job_id,
            "--name", "etl", "--tenant", "ads", "--deadline", "2h", "--length-s", "600", *width, "--command", "true",
        ])  # fmt: skip
    except SystemExit as exited:
        return exited.code


def stored(tmp_path: Path) -> dict[str, int]:
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        return {job.job_id: job.nodes for job in store.all_jobs()}


def test_nodes_is_the_width_stored(tmp_path, capsys):
    assert submit(tmp_path, "--nodes", "8") == 0
    assert stored(tmp_path) == {"wide": 8}
    assert "width 8 nodes" in capsys.readouterr().err


def test_no_width_is_one_node_as_before(tmp_path):
    assert submit(tmp_path) == 0
    assert stored(tmp_path) == {"wide": 1}


@pytest.mark.parametrize(
    "cluster_lines, width, nodes",
    [
        ("", ["--vcpus", "36", "--memory-gb", "48"], 9),  # m5.xlarge, 4 vCPUs, 12 GiB: ceil(36/4) = 9, ceil(48/12) = 4
        ("", ["--memory-gb", "48"], 4),  # exactly four nodes' memory
        ('task_instance_type = "m5.2xlarge"\n', ["--vcpus", "20", "--memory-gb", "100"], 5),  # 8 vCPUs, 24 GiB: 3 and 5
        ('task_instance_type = "x9.huge"\ntask_yarn_vcpus = 16\ntask_yarn_memory_mb = 65536\n', ["--vcpus", "17"], 2),
        ("", ["--vcpus", "6", "--memory-gb", "30", "--container-vcpus", "2", "--container-memory-gb", "5"], 3),  # 6 containers, 2 a node
    ],
)
def test_vcpus_and_memory_become_whole_nodes_of_the_task_type(tmp_path, cluster_lines, width, nodes):
    assert submit(tmp_path, *width, cluster_lines=cluster_lines) == 0
    assert stored(tmp_path) == {"wide": nodes}


@pytest.mark.parametrize(
    "width, cluster_lines, said",
    [
        (["--nodes", "40"], "", "nodes: 40 is above max_nodes 32 (cluster.max_nodes)"),
        (["--vcpus", "200"], "", "vcpus: 200 vCPUs need 50 nodes of 4 vCPUs (m5.xlarge's YARN capacity); max_nodes is 32"),
        (["--memory-gb", "400"], "", "memory_gb: 400 GiB need 34 nodes of 12 GiB (m5.xlarge's YARN capacity: 12,288 MiB); max_nodes is 32"),
        (["--vcpus", "200"], "task_yarn_vcpus = 2\n", "vcpus: 200 vCPUs need 100 nodes of 2 vCPUs (m5.xlarge's YARN capacity as configured)"),
        (["--nodes", "2", "--vcpus", "4"], "", "nodes: expected either a width in nodes or a demand in vcpus/memory_gb"),
        (["--nodes", "0"], "", "argument --nodes: expected a whole number"),
        (["--memory-gb", "-3"], "", "argument --memory-gb: expected a finite number > 0, got '-3'"),
        (["--vcpus", "8"], 'task_instance_type = "x9.huge"\n', "set cluster.task_yarn_vcpus and cluster.task_yarn_memory_mb"),
        (["--vcpus", "8", "--container-vcpus", "1", "--container-memory-gb", "16"], "", "container_memory_gb: a container of 16 GiB does not fit one node of 12 GiB"),
        (
            ["--vcpus", "40", "--memory-gb", "280", "--container-vcpus", "1", "--container-memory-gb", "7"], "",
            "vcpus/memory_gb: 40 containers of 1 vCPUs and 7 GiB, 1 to a node of 4 vCPUs and 12 GiB (m5.xlarge's YARN capacity), need 40 nodes; max_nodes is 32",
        ),
    ],
)
def test_a_width_no_cluster_can_start_is_refused_with_its_figures_and_nothing_is_stored(tmp_path, capsys, width, cluster_lines, said):
    assert submit(tmp_path, "--nodes", "3", job_id="before") == 0
    capsys.readouterr()
    assert submit(tmp_path, *width, cluster_lines=cluster_lines) == 2
    assert said in capsys.readouterr().err
    assert stored(tmp_path) == {"before": 3}


def test_the_same_id_with_another_width_is_refused(tmp_path, capsys):
    assert submit(tmp_path, "--nodes", "4") == 0
    assert submit(tmp_path, "--nodes", "4") == 0  # a retry: the same job
    assert submit(tmp_path, "--vcpus", "16") == 0  # 16 vCPUs on m5.xlarge are four nodes too: the same job
    capsys.readouterr()
    assert submit(tmp_path, "--nodes", "5") == 2
    assert "already stored with different content" in capsys.readouterr().err
    assert stored(tmp_path) == {"wide": 4}


def test_jobs_shows_the_width(tmp_path, capsys):
    assert submit(tmp_path, "--nodes", "12") == 0
    assert submit(tmp_path, job_id="narrow") == 0
    capsys.readouterr()
    assert main(["jobs", "--store", str(tmp_path / "jobs.db"), "--format", "json"]) == 0
    assert {row["job_id"]: row["nodes"] for row in json.loads(capsys.readouterr().out)} == {"wide": 12, "narrow": 1}
    assert main(["jobs", "--store", str(tmp_path / "jobs.db")]) == 0
    table = capsys.readouterr().out
    header = next(line for line in table.splitlines() if " id " in line)
    cells = [cell.strip() for cell in header.split("┃")[1:-1]]
    assert cells[cells.index("tenant") + 1] == "nodes"
    row = next(line for line in table.splitlines() if line.startswith("│ wide "))
    assert [cell.strip() for cell in row.split("│")[1:-1]][cells.index("nodes")] == "12"
