"""Jobs of w nodes on the cluster twin (issue 24): gang start, a drain timeout killing the whole run,
pending work in nodes and the bill's utilisation, each worked by hand, then a hypothesis property
checked from the twin's log of runs and nodes, not from its dispatch."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_twin import config_strategy

from autoscaler.core.errors import ConfigError
from autoscaler.core.twin import ClusterTwin, TwinConfig

TIME_ABS_S = 1e-6


def add(t: ClusterTwin, now_s: float, job_id: str, length_s: float, nodes: int) -> str:
    t.add_step(now_s, f"s-{job_id}", job_id, length_s, submit_s=now_s, deadline_s=now_s + 10 * length_s, nodes=nodes)
    return f"s-{job_id}"


def test_a_wide_step_waits_for_all_its_nodes_and_a_narrow_one_behind_it_takes_an_idle_node():
    t = ClusterTwin(TwinConfig(provision_s=100.0))
    t.resize(0.0, 2)
    wide = add(t, 0.0, "wide", 600.0, nodes=3)
    assert t.counts()["pending"] == 3  # nodes, not steps
    t.advance(100.0)  # two nodes usable: not enough for three
    assert t.steps[wide].state == "PENDING" and t.counts()["idle"] == 2
    narrow = add(t, 150.0, "narrow", 100.0, nodes=1)
    assert t.steps[narrow].start_s == 150.0 and t.counts()["idle"] == 1
    t.resize(200.0, 4)  # two more, usable at 300; the narrow job ends at 250
    t.advance(299.0)
    assert t.steps[wide].state == "PENDING" and t.counts()["idle"] == 2
    t.advance(300.0)
    assert t.steps[wide].start_s == 300.0 and t.steps[wide].run_nodes == (0, 1, 2)
    assert t.counts() == {"booting": 0, "idle": 1, "busy": 3, "draining": 0, "pending": 0, "waiting": 0}
    t.finish(900.0)
    bill = t.bill()
    # busy: 600 s on each of three nodes plus the narrow job's 100 s; billed: nodes 0, 1 from 0 to
    # 900 (finish, when the wide job ends), nodes 2 and 3 from 200 to 900
    assert bill.busy_node_s == pytest.approx(3 * 600.0 + 100.0)
    assert bill.work_node_s == pytest.approx(3 * 600.0 + 100.0)
    assert bill.billed_node_s == pytest.approx(900 + 900 + 700 + 700)
    assert bill.utilisation == pytest.approx(1900 / 3200)


def test_a_drain_timeout_on_one_node_of_a_wide_run_kills_the_run_and_frees_every_node():
    t = ClusterTwin(TwinConfig(provision_s=0.0, decommission_timeout_s=100.0))
    t.resize(0.0, 3)
    wide = add(t, 0.0, "wide", 1000.0, nodes=3)
    assert t.steps[wide].run_nodes == (0, 1, 2)
    t.resize(50.0, 2)  # one node of the run drains; it times out at 150
    t.advance(150.0)
    step = t.steps[wide]
    assert step.kills == 1 and step.run_nodes == () and step.state == "RUNNING"
    assert step.killed_busy_s == pytest.approx(3 * 150.0)  # three nodes' 150 s each, lost
    assert t.nodes[2].removed_s == 150.0 and t.counts()["idle"] == 2
    assert t.counts()["pending"] == 3  # it needs three again: two are there
    t.resize(200.0, 3)
    t.advance(200.0)
    assert step.run_start_s == 200.0 and len(step.run_nodes) == 3
    t.finish(200.0)
    assert step.end_s == pytest.approx(1200.0)
    assert sorted(r[1] for r in t.runs if not r[4]) == [0, 1, 2]  # the killed run, logged on each node


def test_finish_asks_for_as_many_nodes_as_the_widest_waiting_step_needs():
    t = ClusterTwin(TwinConfig(provision_s=30.0))
    wide = add(t, 0.0, "wide", 60.0, nodes=4)
    t.finish(0.0)
    assert t.steps[wide].start_s == 30.0 and t.steps[wide].end_s == 90.0 and len(t.nodes) == 4


@pytest.mark.parametrize("nodes", [0, -1, 2.0, True])
def test_a_width_that_is_not_a_whole_number_of_one_or_more_is_refused(nodes):
    t = ClusterTwin(TwinConfig())
    with pytest.raises(ConfigError, match="expected a whole number >= 1"):
        t.add_step(0.0, "s-a", "a", 10.0, 0.0, 100.0, nodes=nodes)


# -- the property ---------------------------------------------------------------------------------

jobs_strategy = st.lists(st.tuples(st.floats(0.0, 3_000.0), st.integers(1, 5)), min_size=1, max_size=10)
ops_strategy = st.lists(st.tuples(st.floats(0.0, 1_500.0), st.integers(0, 8), st.booleans()), min_size=1, max_size=20)


@settings(max_examples=150, deadline=None)
@given(config_strategy, jobs_strategy, ops_strategy)
def test_no_step_ever_starts_with_fewer_than_its_w_free_usable_nodes(config, jobs, ops):
    t = ClusterTwin(config)
    now_s, added = 0.0, 0
    for dt, nodes, add_one in ops:
        now_s += dt
        t.resize(now_s, nodes)
        if add_one and added < len(jobs):
            length_s, width = jobs[added]
            t.add_step(now_s, f"s{added}", f"j{added}", length_s, now_s, now_s, nodes=width)
            added += 1
    for i in range(added, len(jobs)):
        t.add_step(now_s, f"s{i}", f"j{i}", jobs[i][0], now_s, now_s, nodes=jobs[i][1])
    t.finish(now_s)
    # From the log alone: each run (a step and a start time) is on as many distinct nodes as its w,
    # each usable by then and not removed before the run ended, and no node runs two things at once.
    # A run is a step, its start, its end and how it ended: a run killed at the instant it started
    # (a drain timeout of 0 s) and its rerun on another node at that same instant are two runs.
    by_run: dict[tuple[str, float, float, bool], list[tuple]] = defaultdict(list)
    for run in t.runs:
        by_run[(run[0], run[2], run[3], run[4])].append(run)
    width = {f"s{i}": w for i, (_, w) in enumerate(jobs)}
    for (step_id, start_s, _, _), runs in by_run.items():
        nodes = [r[1] for r in runs]
        assert len(set(nodes)) == len(nodes) == width[step_id]
        assert len({(r[3], r[4]) for r in runs}) == 1  # the run ends on all of its nodes at once
        for _, node_id, _, end_s, _ in runs:
            node = t.nodes[node_id]
            assert node.usable_s <= start_s
            assert node.removed_s is not None and node.removed_s >= end_s
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for _, node_id, start_s, end_s, _ in t.runs:
        spans[node_id].append((start_s, end_s))
    for node_spans in spans.values():
        node_spans.sort()
        assert all(a[1] <= b[0] + TIME_ABS_S for a, b in zip(node_spans, node_spans[1:]))
    # every step ends, its last run completed on w nodes; busy node-seconds are those of the log
    assert all(step.end_s is not None for step in t.steps.values())
    bill = t.bill()
    assert bill.busy_node_s == pytest.approx(sum(r[3] - r[2] for r in t.runs), abs=1e-6)
    assert 0.0 <= bill.utilisation <= 1.0 + 1e-9


def test_a_run_killed_as_it_starts_and_its_rerun_at_that_instant_are_two_runs_of_one_node_each():
    # Hypothesis found it: no boot, no drain timeout; a 1-node step starts at 0 s, the resize to 0
    # kills it at 0 s, and finish() reruns it at 0 s on a new node.
    t = ClusterTwin(TwinConfig(provision_s=0.0, decommission_timeout_s=0.0))
    t.resize(0.0, 0)
    t.add_step(0.0, "s0", "j0", 1.0, 0.0, 0.0, nodes=1)
    t.resize(0.0, 1)
    t.resize(0.0, 0)
    t.finish(0.0)
    assert sorted((r[1], r[2], r[3], r[4]) for r in t.runs) == [(0, 0.0, 0.0, False), (1, 0.0, 1.0, True)]
