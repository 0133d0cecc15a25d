"""intake: a TASK node's YARN capacity, and the width a job's vCPU and memory demand needs on such nodes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.core.controller import ControllerConfig, arrive_tenants
from autoscaler.core.edf import demand_vector
from autoscaler.core.errors import ConfigError
from autoscaler.core.intake import TASK_YARN_CAPACITY, NodeCapacity, nodes_for, task_capacity
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.policy_state import PolicyState

M5_XLARGE = NodeCapacity(4, 12288, "m5.xlarge's YARN capacity")


def test_the_table_holds_emrs_published_defaults():
    # EMR Release Guide, "Task configuration": yarn.nodemanager.resource.memory-mb per type; vCPUs are EC2's.
    assert TASK_YARN_CAPACITY["m5.xlarge"] == (4, 12288)
    assert TASK_YARN_CAPACITY["m5.2xlarge"] == (8, 24576)
    assert TASK_YARN_CAPACITY["c5.xlarge"] == (4, 6144)
    assert TASK_YARN_CAPACITY["r5.xlarge"] == (4, 24576)
    assert task_capacity("m5.xlarge") == M5_XLARGE


def test_an_unknown_type_must_be_told_and_the_error_names_the_keys():
    with pytest.raises(ConfigError) as refused:
        task_capacity("x9.huge")
    message = str(refused.value)
    assert "'x9.huge'" in message and "cluster.task_yarn_vcpus and cluster.task_yarn_memory_mb" in message
    assert "yarn.nodemanager.resource.memory-mb" in message
    with pytest.raises(ConfigError, match=r"set cluster\.task_yarn_memory_mb \(the node's yarn\.nodemanager\.resource\.memory-mb\)"):
        task_capacity("x9.huge", vcpus=8)
    assert task_capacity("x9.huge", vcpus=8, memory_mb=30000) == NodeCapacity(8, 30000, "x9.huge's YARN capacity as configured")


def test_a_told_figure_overrides_the_tables():
    assert task_capacity("m5.xlarge", memory_mb=14336) == NodeCapacity(4, 14336, "m5.xlarge's YARN capacity as configured")


@pytest.mark.parametrize(
    "vcpus, memory_gib, nodes",
    [
        (36, 48, 9),  # ceil(36 / 4) = 9 beats ceil(48 / 12) = 4
        (4, 48, 4),  # 48 GiB is exactly four nodes of 12 GiB: 4, not 5
        (None, 12.3, 2),  # a little over one node's memory
        (1, None, 1),
        (0.5, 0.5, 1),  # a demand below one node still takes a whole one
        (200, None, 50),
        (None, 400, 34),  # 400 / 12 = 33.3
    ],
)
def test_the_width_is_worked_by_hand(vcpus, memory_gib, nodes):
    assert nodes_for(vcpus, memory_gib, M5_XLARGE) == nodes


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True])
def test_a_demand_that_is_not_a_positive_number_is_refused(bad):
    with pytest.raises(ConfigError, match="vcpus: expected a finite number > 0"):
        nodes_for(bad, None, M5_XLARGE)


@given(
    vcpus=st.none() | st.integers(1, 2000),
    memory_mib=st.none() | st.integers(1, 4_000_000),
    node_vcpus=st.integers(1, 96),
    node_memory_mb=st.integers(1, 800_000),
)
def test_the_width_is_the_least_whole_number_of_nodes_that_holds_the_demand(vcpus, memory_mib, node_vcpus, node_memory_mb):
    # Brute force in whole MiB and vCPUs: count up from one node until both fit.
    capacity = NodeCapacity(node_vcpus, node_memory_mb, "test")
    memory_gib = None if memory_mib is None else memory_mib / 1024
    w = 1
    while (vcpus is not None and w * node_vcpus < vcpus) or (memory_mib is not None and w * node_memory_mb < memory_mib):
        w += 1
    assert nodes_for(vcpus, memory_gib, capacity) == w


def _first_job(job_id: str, tenant: str, nodes: int, length_s: float, demand=None) -> Job:
    return Job(job_id, job_id, tenant, 0.0, 7200.0, length_s, StepSpec(args=("true",)), demand_vector=demand, nodes=nodes)


def test_a_wide_job_demands_w_nodes_for_its_length_and_drf_shares_are_worked_by_hand():
    config = ControllerConfig(policy="follow", slot_s=300.0, max_nodes=8, tenants_n=2)
    # A: a job of 4 nodes for 600 s, no sizes: 2,400 node-seconds of CPU, d_A = (1, 0, 0).
    wide = _first_job("a0", "A", nodes=4, length_s=600.0)
    np.testing.assert_allclose(demand_vector(wide, config), [2400.0, 0.0, 0.0])
    # B: sizes whose disk bytes are two of its CPU seconds' worth at a node's disk rate: d_B = (0.5, 1, 0).
    disk = _first_job("b0", "B", nodes=1, length_s=600.0, demand=(100.0, 200.0 * config.node_disk_bytes_s, 0.0))
    np.testing.assert_allclose(demand_vector(disk, config), [100.0, 200.0, 0.0])
    tenants, demands, shares = arrive_tenants(PolicyState(), [wide, disk], 0, config)
    assert tenants == ("A", "B")
    np.testing.assert_allclose(demands, [(1.0, 0.0, 0.0), (0.5, 1.0, 0.0)])
    # Step 1 (k/n = 1/2): A alone, x_A = 1/2. Step 2 (k/n = 1): CPU binds, M + M/2 <= 1, so M = 2/3 for
    # both (M > 1/2 lifts A too); disk holds 2/3 <= 1.
    np.testing.assert_allclose(shares, [2 / 3, 2 / 3], atol=1e-9)


@given(width=st.integers(1, 64), length_s=st.floats(0.0, 86_400.0))
def test_a_width_scales_the_demand_and_changes_no_dominant_share(width, length_s):
    # DRF divides each demand by its dominant entry (the note's d_i = D_i / max_r D_ir), so w x a job
    # is the same agent: with w = 1 everything is as it was.
    config = ControllerConfig(policy="follow", slot_s=300.0, max_nodes=8, tenants_n=3)
    other = _first_job("b0", "B", nodes=1, length_s=60.0, demand=(10.0, 30.0 * config.node_disk_bytes_s, 0.0))

    def shares(nodes: int):
        return arrive_tenants(PolicyState(), [_first_job("a0", "A", nodes, length_s), other], 0, config)

    wide, narrow = shares(width), shares(1)
    np.testing.assert_allclose(demand_vector(_first_job("a0", "A", width, length_s), config)[0], width * max(length_s, 1.0))
    assert wide[1] == narrow[1]
    np.testing.assert_allclose(wide[2], narrow[2])
    assert wide[0] == ("A", "B")
