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
