"""A submission's width: refused exactly when no cluster of max_nodes could start it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.core.errors import SubmitError
from autoscaler.core.intake import NodeCapacity, build_job, nodes_for

NOW_S = 1_795_910_400.0
C5_XLARGE = NodeCapacity(4, 6144, "c5.xlarge's YARN capacity")


def job(**width):
    return build_job(
        job_id="j", name="etl", tenant="ads", now_s=NOW_S, deadline="2h", length_s=600.0, sizes=None, jar=None,
        args=[], command=["true"], **width,
    )  # fmt: skip


@given(
    vcpus=st.none() | st.floats(0.25, 400.0),
    memory_gb=st.none() | st.floats(0.25, 800.0),
    max_nodes=st.integers(1, 64),
)
def test_a_demand_is_refused_exactly_when_its_width_is_above_max_nodes(vcpus, memory_gb, max_nodes):
    width = nodes_for(vcpus, memory_gb, C5_XLARGE)
    try:
        stored = job(vcpus=vcpus, memory_gb=memory_gb, max_nodes=max_nodes, node_capacity=C5_XLARGE)
    except SubmitError as refused:
        assert width > max_nodes, refused
        assert f"max_nodes is {max_nodes:,}" in str(refused)
    else:
        assert width <= max_nodes and stored.nodes == width


def test_without_max_nodes_or_with_none_on_any_width_is_kept():
    assert job(nodes=500).nodes == 500
    assert job(nodes=500, max_nodes=0).nodes == 500  # max_nodes 0: no TASK nodes at all, a paused cluster
    assert job(vcpus=8).nodes == 2  # on the default type, m5.xlarge: 4 vCPUs a node


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "3"])
def test_a_width_that_is_not_a_whole_number_of_nodes_is_refused(bad):
    with pytest.raises(SubmitError, match="nodes: expected a whole number of TASK nodes >= 1"):
        job(nodes=bad)


@given(
    count_vcpus=st.integers(1, 300),
    count_memory_gib=st.none() | st.integers(1, 2000),
    container_vcpus=st.integers(1, 10),
    container_memory_gib=st.integers(1, 30),
)
def test_containers_are_packed_onto_the_fewest_nodes_that_place_them_all(count_vcpus, count_memory_gib, container_vcpus, container_memory_gib):
    # Brute force: place the containers one by one on the first node with room, YARN-style.
    capacity = NodeCapacity(8, 24576, "m5.2xlarge's YARN capacity")
    demand = dict(vcpus=count_vcpus, memory_gb=count_memory_gib, container_vcpus=container_vcpus, container_memory_gb=container_memory_gib)
    if container_vcpus > 8 or container_memory_gib > 24:
        with pytest.raises(SubmitError, match="does not fit one node"):
            job(**demand, node_capacity=capacity)
        return
    stored = job(**demand, node_capacity=capacity)
    k = max(-(-count_vcpus // container_vcpus), -(-(count_memory_gib or 0) // container_memory_gib), 1)
    free: list[list[int]] = []
    for _ in range(k):
        node = next((n for n in free if n[0] >= container_vcpus and n[1] >= container_memory_gib * 1024), None)
        if node is None:
            node = [8, 24576]
            free.append(node)
        node[0] -= container_vcpus
        node[1] -= container_memory_gib * 1024
    assert stored.nodes == len(free)


def test_packing_can_need_more_nodes_than_the_totals_alone():
    # m5.xlarge: 4 vCPUs, 12 GiB. Three containers of 1 vCPU and 7 GiB: one to a node, so 3 nodes,
    # where 3 vCPUs and 21 GiB in all would fit 2.
    assert job(vcpus=3, memory_gb=21).nodes == 2
    assert job(vcpus=3, memory_gb=21, container_vcpus=1, container_memory_gb=7).nodes == 3


@pytest.mark.parametrize(
    "container, said",
    [
        (dict(container_vcpus=5, container_memory_gb=1), "container_vcpus: a container of 5 vCPUs does not fit one node of 4 vCPUs (m5.xlarge's YARN capacity)"),
        (dict(container_vcpus=1, container_memory_gb=13), "container_memory_gb: a container of 13 GiB does not fit one node of 12 GiB (m5.xlarge's YARN capacity: 12,288 MiB)"),
        (dict(container_vcpus=1), "container_memory_gb: expected both container_vcpus and container_memory_gb"),
    ],
)
def test_a_container_no_node_can_hold_is_refused_with_the_figures(container, said):
    with pytest.raises(SubmitError) as refused:
        job(vcpus=8, **container)
    assert said in str(refused.value)
