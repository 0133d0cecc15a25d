"""The baselines an operator would run instead of the daemon (autoscaler.core.baselines): a
hand-worked case for each rule, then hypothesis properties checked against the twin's own record
of steps and nodes (and, for the smallest fixed size, against the twin's fixed runs themselves)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.baselines import BASELINES, MANAGED_DAMPEN_S, nodes_over_time, run_baseline, smallest_fixed_nodes
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.twin import ClusterTwin, TwinConfig

IDLE_W, BUSY_W = 60.30, 93.87  # Table III: gamma_cpu, and all alphas + gammas (u = 1)


def job(job_id: str, submit_s: float, length_s: float, deadline_s: float | None = None) -> Job:
    deadline = submit_s + length_s + 7200.0 if deadline_s is None else deadline_s
    return Job(job_id=job_id, name=job_id, tenant="t", submit_s=submit_s, deadline_s=deadline, length_s=length_s, step=StepSpec(args=("true",)))


def runs(twin: ClusterTwin) -> dict[str, tuple[float, float]]:
    """Each job's (start_s, end_s)."""
    return {step.job_id: (step.start_s, step.end_s) for step in twin.steps.values()}


def removed(twin: ClusterTwin) -> list[tuple[float, float]]:
    """Each node's (requested_s, removed_s), in request order."""
    return [(node.requested_s, node.removed_s) for node in twin.nodes.values()]


def play(name: str, jobs: list[Job], **options) -> ClusterTwin:
    config = TwinConfig(provision_s=options.pop("provision_s", 330.0))
    return run_baseline(name, jobs, config, start_s=0.0, **options)


def test_the_baselines_are_fixed_managed_dampened_managed_and_custom_rules():
    assert BASELINES == ("fixed", "managed", "managed-dampened", "custom-rules")


# -- fixed ------------------------------------------------------------------------------------


def test_fixed_nodes_are_usable_at_the_start_and_run_the_jobs_first_come_first_served():
    twin = play("fixed", [job("a", 0.0, 600.0), job("b", 0.0, 600.0), job("c", 0.0, 600.0)], min_nodes=0, max_nodes=2)
    # both nodes requested 330 s early, usable at 0: a and b at once, c when a's node is free
    assert runs(twin) == {"a": (0.0, 600.0), "b": (0.0, 600.0), "c": (600.0, 1200.0)}
    # at the last submission (t = 0) the run ends: node 1 goes when a and b end and nothing waits, node 0 after c
    assert removed(twin) == [(-330.0, 1200.0), (-330.0, 600.0)]
    bill = twin.bill()
    assert bill.billed_node_s == 1530.0 + 930.0
    assert bill.state_node_s == {"booting": 660.0, "idle": 0.0, "busy": 1800.0}
    assert bill.cost_usd == pytest.approx(2460 / 3600 * 0.240)  # $0.164
    assert bill.energy_wh == pytest.approx(660 * IDLE_W / 3600 + 1800 * BUSY_W / 3600)  # 11.055 + 46.935 Wh
    times_s, nodes = nodes_over_time(twin)
    assert times_s.tolist() == [-330.0, 600.0, 1200.0] and nodes.tolist() == [2, 1, 0]


def test_fixed_defaults_to_max_nodes_and_a_job_never_runs_before_its_submission():
    twin = play("fixed", [job("a", 500.0, 100.0)], min_nodes=0, max_nodes=3)
    assert len(twin.nodes) == 3 and runs(twin) == {"a": (500.0, 600.0)}
    assert twin.steps["s-a"].added_s == 500.0
    twin = play("fixed", [job("a", 500.0, 100.0)], min_nodes=0, max_nodes=3, fixed_nodes=1)
    assert len(twin.nodes) == 1 and twin.bill().billed_node_s == 330.0 + 600.0


# -- managed ----------------------------------------------------------------------------------


def test_managed_resizes_at_the_next_10_s_tick_and_removes_the_idle_node_at_the_tick_after_the_job():
    twin = play("managed", [job("a", 105.0, 605.0), job("b", 2000.0, 100.0)], min_nodes=0, max_nodes=10)
    # a pending at 105 -> resize at the tick at 110 -> usable at 440 -> a ends at 1045 -> the
    # idle node goes at the tick at 1050; b at 2000 (a tick) -> usable at 2330 -> ends 2430, the end
    assert runs(twin) == {"a": (440.0, 1045.0), "b": (2330.0, 2430.0)}
    assert removed(twin) == [(110.0, 1050.0), (2000.0, 2430.0)]
    bill = twin.bill()
    assert bill.billed_node_s == 940.0 + 430.0
    assert bill.state_node_s == {"booting": 660.0, "idle": 5.0, "busy": 705.0}
    assert bill.scale_events == 3  # up at 110, the idle node out at 1050, up at 2000
    times_s, nodes = nodes_over_time(twin)
    assert times_s.tolist() == [110.0, 1050.0, 2000.0, 2430.0] and nodes.tolist() == [1, 0, 1, 0]


def test_managed_evaluates_at_a_tick_that_falls_on_the_submission():
    twin = play("managed", [job("a", 100.0, 600.0)], min_nodes=0, max_nodes=10)
    assert removed(twin) == [(100.0, 1030.0)] and runs(twin) == {"a": (430.0, 1030.0)}


def test_managed_keeps_min_nodes_and_removes_only_idle_nodes():
    jobs = [job("a", 0.0, 600.0), job("b", 0.0, 600.0), job("c", 0.0, 600.0), job("d", 5000.0, 10.0)]
    twin = play("managed", jobs, min_nodes=2, max_nodes=3)
    # two nodes from -330 take a and b at 0; c is pending: a third node at 0, usable at 330.
    # At 600 nodes 0 and 1 are idle, node 2 busy with c: demand 1, so one idle node goes (the
    # newest idle one, node 1) down to min_nodes = 2; node 2 is never touched while busy.
    assert runs(twin) == {"a": (0.0, 600.0), "b": (0.0, 600.0), "c": (330.0, 930.0), "d": (5000.0, 5010.0)}
    assert removed(twin) == [(-330.0, 5010.0), (-330.0, 600.0), (0.0, 5000.0)]
    assert twin.bill().billed_node_s == 5340.0 + 930.0 + 5000.0
    times_s, nodes = nodes_over_time(twin)
    assert times_s.tolist() == [-330.0, 0.0, 600.0, 5000.0, 5010.0] and nodes.tolist() == [2, 3, 2, 1, 0]


def test_managed_asks_for_the_pending_work_at_once_up_to_max_nodes():
    twin = play("managed", [job(f"j{i}", 0.0, 1000.0) for i in range(5)], min_nodes=0, max_nodes=3)
    assert [node.requested_s for node in twin.nodes.values()] == [0.0, 0.0, 0.0]  # 5 pending, capped at 3
    assert sorted(runs(twin).values()) == [(330.0, 1330.0)] * 3 + [(1330.0, 2330.0)] * 2


# -- managed, dampened ------------------------------------------------------------------------


def test_dampened_adds_no_node_for_a_step_that_starts_within_dampen_s_where_managed_does():
    jobs = [job("a", 0.0, 100.0), job("b", 10.0, 50.0)]
    dampened = play("managed-dampened", jobs, min_nodes=1, max_nodes=3, dampen_s=120.0)
    # node 0 (min_nodes) usable at 0 runs a to 100; b waits from 10 and starts at 100 on node 0,
    # having waited 90 s < 120: never counted, no node asked for; node 0 goes when b ends at 150
    assert runs(dampened) == {"a": (0.0, 100.0), "b": (100.0, 150.0)}
    assert removed(dampened) == [(-330.0, 150.0)]
    assert dampened.bill().billed_node_s == 480.0
    # managed asks for b's node at the tick at 10; it is still booting when b starts on node 0 at 100,
    # and goes then (the run ends at 100 with nothing waiting): 90 s billed for nothing
    managed = play("managed", jobs, min_nodes=1, max_nodes=3)
    assert runs(managed) == runs(dampened)
    assert removed(managed) == [(-330.0, 150.0), (10.0, 100.0)]
    assert managed.bill().billed_node_s == 480.0 + 90.0


@pytest.mark.parametrize(("submit_s", "requested_s", "managed_requested_s"), [(10.0, 130.0, 10.0), (15.0, 140.0, 20.0)])
def test_dampened_asks_for_a_node_at_the_first_tick_after_a_step_has_waited_dampen_s(submit_s, requested_s, managed_requested_s):
    jobs = [job("a", 0.0, 600.0), job("b", submit_s, 50.0)]
    twin = play("managed-dampened", jobs, min_nodes=1, max_nodes=3, dampen_s=120.0)
    # b waits behind a (node 0 busy to 600); it has waited 120 s at submit + 120 (130 is a tick, 135
    # is not: 140): a node asked for then, usable 330 s later, runs b for 50 s and goes when b ends
    usable_s = requested_s + 330.0
    assert runs(twin) == {"a": (0.0, 600.0), "b": (usable_s, usable_s + 50.0)}
    assert removed(twin) == [(-330.0, 600.0), (requested_s, usable_s + 50.0)]
    assert twin.bill().billed_node_s == 930.0 + 380.0
    # managed asks at the first tick at or after the submission
    assert removed(play("managed", jobs, min_nodes=1, max_nodes=3))[1][0] == managed_requested_s


def test_dampened_keeps_an_idle_node_a_wide_step_not_yet_counted_will_start_on():
    jobs = [job("a", 0.0, 1000.0), job("c", 0.0, 100.0), dataclasses.replace(job("b", 500.0, 100.0), nodes=2)]
    twin = play("managed-dampened", jobs, min_nodes=0, max_nodes=3, dampen_s=120.0)
    # a and c counted at 120: two nodes, usable at 450. c ends at 550: node 1 idle, b (2 nodes,
    # waited 50 s) not yet counted; busy 1 + b's 2 is 3 > 2 up, so node 1 stays (removing by the
    # counted demand, 1, would take it). b counted at 620: a third node, usable 950, b on nodes 1, 2.
    assert runs(twin) == {"a": (450.0, 1450.0), "c": (450.0, 550.0), "b": (950.0, 1050.0)}
    assert removed(twin) == [(120.0, 1450.0), (120.0, 1050.0), (620.0, 1050.0)]


def test_dampened_defaults_to_its_constant_and_zero_is_managed_on_a_hand_case():
    jobs = [job("a", 0.0, 600.0), job("b", 10.0, 50.0)]
    assert removed(play("managed-dampened", jobs, min_nodes=1, max_nodes=3)) == removed(
        play("managed-dampened", jobs, min_nodes=1, max_nodes=3, dampen_s=MANAGED_DAMPEN_S)
    )
    assert removed(play("managed-dampened", jobs, min_nodes=1, max_nodes=3, dampen_s=0.0)) == [(-330.0, 600.0), (10.0, 390.0)]


# -- custom rules -----------------------------------------------------------------------------


def test_custom_rules_add_one_node_a_period_after_the_cooldown_from_the_last_node_being_usable():
    twin = play("custom-rules", [job(x, 0.0, 3000.0) for x in "abc"], min_nodes=1, max_nodes=3)
    # t=0: 1 node busy, 0 % free < 15 -> +1 (usable 330, cooldown to 630); t=300, 600: cooling down;
    # t=900: 2 busy, 0 % -> +1 (usable 1230, cooldown to 1530); t=1500: nothing waits, the run ends.
    assert runs(twin) == {"a": (0.0, 3000.0), "b": (330.0, 3330.0), "c": (1230.0, 4230.0)}
    assert removed(twin) == [(-330.0, 3000.0), (0.0, 3330.0), (900.0, 4230.0)]
    assert twin.bill().billed_node_s == 3 * 3330.0
    assert twin.bill().scale_events == 3  # the first node, and two rules


def test_custom_rules_add_one_node_every_period_when_nodes_boot_at_once():
    twin = play("custom-rules", [job(x, 0.0, 3000.0) for x in "abc"], min_nodes=1, max_nodes=3, provision_s=0.0)
    assert runs(twin) == {"a": (0.0, 3000.0), "b": (0.0, 3000.0), "c": (300.0, 3300.0)}


def test_custom_rules_remove_an_idle_node_when_memory_is_mostly_free_down_to_min_nodes():
    jobs = [job("a", 0.0, 600.0), job("b", 0.0, 600.0), job("c", 3000.0, 10.0)]
    twin = play("custom-rules", jobs, min_nodes=1, max_nodes=3)
    # t=0: +1 (b waits; node 1 usable 330, cooldown to 630); t=900: node 0 idle, node 1 busy: 50 %;
    # t=1200: both idle, 100 % > 75 -> -1, the newest idle node; t=1500...: 100 % but at min_nodes.
    assert runs(twin) == {"a": (0.0, 600.0), "b": (330.0, 930.0), "c": (3000.0, 3010.0)}
    assert removed(twin) == [(-330.0, 3010.0), (0.0, 1200.0)]
    assert twin.bill().billed_node_s == 3340.0 + 1200.0


def test_custom_rules_read_no_usable_node_as_no_free_memory_when_a_step_waits():
    twin = play("custom-rules", [job("a", 10.0, 100.0)], min_nodes=0, max_nodes=2)
    # t=0: no node, nothing waits: 100 %, but at min_nodes; t=300: a waits, no usable node: 0 % -> +1
    # (usable 630); t=900: nothing waits, the run ends and the node, idle since 730, goes
    assert removed(twin) == [(300.0, 900.0)] and runs(twin) == {"a": (630.0, 730.0)}


# -- the smallest fixed size ------------------------------------------------------------------


def test_the_smallest_fixed_size_is_the_least_that_meets_every_deadline():
    jobs = [job(x, 0.0, 600.0, deadline_s=1200.0) for x in "abcd"]  # 2 nodes: two rounds, the last ends at 1200
    assert smallest_fixed_nodes(jobs, TwinConfig(), max_nodes=5, start_s=0.0) == (2, True)
    assert smallest_fixed_nodes(jobs, TwinConfig(), max_nodes=1, start_s=0.0) == (1, False)
    assert smallest_fixed_nodes([], TwinConfig(), max_nodes=5, start_s=0.0) == (1, True)
    # one step at a time (StepConcurrencyLevel 1): nodes cannot help, so 1 suffices or none does
    pair = [job("a", 0.0, 600.0, deadline_s=1200.0), job("b", 0.0, 600.0, deadline_s=1200.0)]
    assert smallest_fixed_nodes(pair, TwinConfig(step_concurrency=1), max_nodes=4, start_s=0.0) == (1, True)
    late = [job("a", 0.0, 600.0, deadline_s=1100.0), job("b", 0.0, 600.0, deadline_s=1100.0)]
    assert smallest_fixed_nodes(late, TwinConfig(step_concurrency=1), max_nodes=4, start_s=0.0) == (4, False)


def test_nodes_over_time_of_a_twin_without_nodes_is_empty():
    times_s, nodes = nodes_over_time(ClusterTwin(TwinConfig()))
    assert times_s.shape == nodes.shape == (0,)


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "options", "shown"),
    [
        ("elastic", {}, "expected one of fixed, managed, managed-dampened, custom-rules"),
        ("managed", {"min_nodes": 4, "max_nodes": 3}, "min_nodes 4 is above max_nodes 3"),
        ("managed", {"max_nodes": 0}, "max_nodes: expected a whole number >= 1, got 0"),
        ("managed", {"min_nodes": -1}, "min_nodes: expected a whole number >= 0, got -1"),
        ("managed", {"max_nodes": 2.5}, "max_nodes: expected a whole number >= 1, got 2.5"),
        ("managed", {"fixed_nodes": 2}, "fixed_nodes 2 is for the fixed baseline only"),
        ("fixed", {"fixed_nodes": 4}, "fixed_nodes 4: expected a size in 1..3"),
        ("fixed", {"fixed_nodes": 1, "min_nodes": 2}, "fixed_nodes 1: expected a size in 2..3"),
        ("fixed", {"start_s": 100.0}, "job 'a': submit_s 50.0 is not a finite time at or after the trace's start_s 100.0"),
        ("fixed", {"start_s": float("nan")}, "start_s: expected a finite time in s, got nan"),
        ("managed", {"dampen_s": 30.0}, "dampen_s 30.0 is for the managed-dampened baseline only, not 'managed'"),
        ("managed-dampened", {"dampen_s": -1.0}, "dampen_s: expected a finite number of seconds >= 0 and <= 86,400 (a day), got -1.0"),
        ("managed-dampened", {"dampen_s": float("nan")}, "dampen_s: expected a finite number of seconds >= 0 and <= 86,400 (a day), got nan"),
        ("managed-dampened", {"dampen_s": "120"}, "dampen_s: expected a finite number of seconds >= 0 and <= 86,400 (a day), got '120'"),
        ("managed-dampened", {"dampen_s": True}, "got True"),
        ("managed-dampened", {"dampen_s": 1e9}, "got 1000000000.0"),
    ],
)
def test_bad_input_is_refused_naming_it(name, options, shown):
    arguments = {"min_nodes": 0, "max_nodes": 3, "start_s": 0.0} | options
    with pytest.raises(ConfigError) as caught:
        run_baseline(name, [job("a", 50.0, 10.0)], TwinConfig(), **arguments)
    assert shown in str(caught.value)


# -- properties -------------------------------------------------------------------------------

TIME_ABS_S = 1e-6

def seconds(high_s: float) -> st.SearchStrategy[float]:
    """Any time up to ``high_s``, or one on the 10-s grid, where a submission or an end meets a tick."""
    return st.one_of(st.floats(0.0, high_s), st.integers(0, int(high_s) // 10).map(lambda k: 10.0 * k))


jobs_strategy = st.lists(st.tuples(seconds(3000.0), seconds(2000.0), st.floats(0.0, 3000.0)), min_size=1, max_size=10)
config_strategy = st.builds(
    TwinConfig,
    provision_s=st.sampled_from([0.0, 30.0, 330.0]),
    length_error_sigma=st.sampled_from([0.0, 0.7]),
    step_concurrency=st.sampled_from([1, 2, 256]),
)
bounds_strategy = st.integers(1, 4).flatmap(lambda high: st.tuples(st.integers(0, high), st.just(high)))


def as_jobs(rows: list[tuple[float, float, float]]) -> list[Job]:
    """(submit_s, length_s, slack_s) rows as jobs due slack_s after submit + length, in no order."""
    return [job(f"j{i}", submit_s, length_s, submit_s + length_s + slack_s) for i, (submit_s, length_s, slack_s) in enumerate(rows)][::-1]


def nodes_at(twin: ClusterTwin, at_s: np.ndarray) -> np.ndarray:
    times_s, nodes = nodes_over_time(twin)
    index = np.searchsorted(times_s, at_s, side="right") - 1
    return np.where(index >= 0, nodes[np.maximum(index, 0)], 0)


@settings(max_examples=150, deadline=None)
@given(config_strategy, jobs_strategy, bounds_strategy, st.integers(1, 4))
def test_every_baseline_adds_each_job_at_its_submission_ends_it_and_does_the_same_work(config, rows, bounds, size):
    jobs = as_jobs(rows)
    min_nodes, max_nodes = bounds
    work_s = sum(config.true_length_s(j.job_id, j.length_s) for j in jobs)
    for name in BASELINES:
        fixed_nodes = max(size, min_nodes, 1) if name == "fixed" and size <= max_nodes else None
        twin = run_baseline(name, jobs, config, min_nodes=min_nodes, max_nodes=max_nodes, start_s=0.0, fixed_nodes=fixed_nodes)
        bill = twin.bill()
        submitted = {f"s-{j.job_id}": j.submit_s for j in jobs}
        assert {step_id: step.added_s for step_id, step in twin.steps.items()} == submitted
        assert all(step.end_s is not None and step.start_s >= step.added_s for step in twin.steps.values())
        # no baseline drains a busy node, so no run is killed and the busy time is the work
        assert bill.jobs_killed == 0
        assert bill.work_node_s == pytest.approx(work_s, abs=TIME_ABS_S)
        assert bill.busy_node_s == pytest.approx(work_s, abs=TIME_ABS_S)
        assert all(node.removed_s is not None for node in twin.nodes.values())


@settings(max_examples=150, deadline=None)
@given(config_strategy, jobs_strategy, bounds_strategy)
def test_the_nodes_stay_within_min_and_max_until_the_last_submission(config, rows, bounds):
    jobs = as_jobs(rows)
    min_nodes, max_nodes = bounds
    last_submit_s = max(j.submit_s for j in jobs)
    for name in BASELINES:
        twin = run_baseline(name, jobs, config, min_nodes=min_nodes, max_nodes=max_nodes, start_s=0.0)
        times_s, nodes = nodes_over_time(twin)
        assert nodes.max() <= max_nodes and nodes.min() >= 0
        checked_s = np.append(times_s[(times_s >= 0.0) & (times_s < last_submit_s)], [0.0] if last_submit_s > 0.0 else [])
        expected = max_nodes if name == "fixed" else min_nodes
        assert np.all(nodes_at(twin, checked_s) >= expected), name
        if name == "fixed":
            assert np.all(nodes_at(twin, checked_s) == max_nodes)


@settings(max_examples=150, deadline=None)
@given(config_strategy, jobs_strategy, st.integers(1, 5))
def test_the_smallest_fixed_size_meets_every_deadline_on_the_twin_and_one_node_fewer_does_not(config, rows, max_nodes):
    jobs = as_jobs(rows)
    nodes, met = smallest_fixed_nodes(jobs, config, max_nodes=max_nodes, start_s=0.0)

    def meets(size: int) -> bool:
        twin = run_baseline("fixed", jobs, config, min_nodes=0, max_nodes=max_nodes, start_s=0.0, fixed_nodes=size)
        return all(step.end_s <= step.deadline_s + 1e-6 for step in twin.steps.values())

    assert meets(nodes) == met
    if not met:
        assert nodes == max_nodes
    elif nodes > 1:
        assert not meets(nodes - 1)


def at_every_tick(jobs: list[Job], config: TwinConfig, min_nodes: int, rule: Callable[[ClusterTwin, float, dict], None]) -> ClusterTwin:
    """A scaling rule evaluated at every 10-s tick from 0, no tick skipped: what a baseline's jumps
    from event to event must reproduce. ``rule(twin, now_s, counts)`` acts at each tick, after the
    jobs submitted by then are added and the twin has played up to it, until none waits."""
    twin = ClusterTwin(config, now_s=-config.provision_s)
    if min_nodes:
        twin.resize(-config.provision_s, min_nodes)
    ordered, added, tick = sorted(jobs, key=lambda j: j.submit_s), 0, 0
    while True:
        now_s = tick * 10.0
        while added < len(ordered) and ordered[added].submit_s <= now_s:
            j = ordered[added]
            twin.add_step(j.submit_s, f"s-{j.job_id}", j.job_id, j.length_s, j.submit_s, j.deadline_s, j.nodes)
            added += 1
        twin.advance(now_s)
        counts = twin.counts()
        if added == len(ordered) and counts["waiting"] == 0:
            break
        rule(twin, now_s, counts)
        tick += 1
    twin.finish(now_s)
    return twin


def managed_at_every_tick(jobs: list[Job], config: TwinConfig, min_nodes: int, max_nodes: int) -> ClusterTwin:
    """Managed scaling's rule at every tick (its text as written before managed-dampened)."""

    def rule(twin: ClusterTwin, now_s: float, counts: dict) -> None:
        up, demand = counts["booting"] + counts["idle"] + counts["busy"], counts["busy"] + counts["pending"]
        if demand > up and up < max_nodes:
            twin.resize(now_s, min(max_nodes, demand))
        elif counts["idle"] and up > max(min_nodes, demand):
            twin.remove_idle(now_s, min(counts["idle"], up - max(min_nodes, demand)))

    return at_every_tick(jobs, config, min_nodes, rule)


@settings(max_examples=200, deadline=None)
@given(config_strategy, jobs_strategy, bounds_strategy)
def test_managed_jumping_between_events_is_managed_evaluated_every_10_s(config, rows, bounds):
    jobs = as_jobs(rows)
    jumping = run_baseline("managed", jobs, config, min_nodes=bounds[0], max_nodes=bounds[1], start_s=0.0)
    ticking = managed_at_every_tick(jobs, config, *bounds)
    assert removed(jumping) == removed(ticking)
    assert runs(jumping) == runs(ticking)
    assert jumping.bill().scale_events == ticking.bill().scale_events


def dampened_at_every_tick(jobs: list[Job], config: TwinConfig, min_nodes: int, max_nodes: int, dampen_s: float) -> ClusterTwin:
    """managed-dampened's rule at every tick, its pending work counted here from the steps themselves
    (not the twin's count): the steps never started, in the order added, as many as step concurrency
    lets start, w nodes each, those added at least dampen_s before the tick. No baseline drains a
    busy node, so no run is killed and none waits to run again."""

    def rule(twin: ClusterTwin, now_s: float, counts: dict) -> None:
        running = sum(1 for step in twin.steps.values() if step.start_s is not None and step.end_s is None)
        startable = [step for step in twin.steps.values() if step.start_s is None][: max(0, config.step_concurrency - running)]
        every = sum(step.width for step in startable)
        counted = sum(step.width for step in startable if step.added_s + dampen_s <= now_s)
        up = counts["booting"] + counts["idle"] + counts["busy"]
        if counts["busy"] + counted > up and up < max_nodes:
            twin.resize(now_s, min(max_nodes, counts["busy"] + counted))
        elif counts["idle"] and up > max(min_nodes, counts["busy"] + every):
            twin.remove_idle(now_s, min(counts["idle"], up - max(min_nodes, counts["busy"] + every)))

    return at_every_tick(jobs, config, min_nodes, rule)


@settings(max_examples=200, deadline=None)
@given(config_strategy, jobs_strategy, bounds_strategy)
def test_dampened_with_no_wait_is_managed_bill_for_bill(config, rows, bounds):
    jobs = as_jobs(rows)
    options = {"min_nodes": bounds[0], "max_nodes": bounds[1], "start_s": 0.0}
    zero = run_baseline("managed-dampened", jobs, config, dampen_s=0.0, **options)
    ticking = managed_at_every_tick(jobs, config, *bounds)
    assert removed(zero) == removed(ticking) and runs(zero) == runs(ticking)
    assert zero.bill() == run_baseline("managed", jobs, config, **options).bill()


@st.composite
def wide_jobs(draw, max_nodes: int) -> list[Job]:
    """1 to 8 jobs on 1..max_nodes nodes each (wider ones would never start), submitted on or off the ticks."""
    rows = draw(st.lists(st.tuples(seconds(2000.0), seconds(1500.0), st.integers(1, max_nodes)), min_size=1, max_size=8))
    return [
        Job(job_id=f"j{i}", name=f"j{i}", tenant="t", submit_s=s, deadline_s=s + length + 7200.0, length_s=length, step=StepSpec(args=("true",)), nodes=w)
        for i, (s, length, w) in enumerate(rows)
    ][::-1]


@settings(max_examples=200, deadline=None)
@given(config_strategy, bounds_strategy.flatmap(lambda b: st.tuples(st.just(b), wide_jobs(b[1]))), st.sampled_from([0.0, 10.0, 25.0, 120.0, 335.0]))
def test_dampened_jumping_between_events_is_its_rule_evaluated_every_10_s(config, drawn, dampen_s):
    bounds, jobs = drawn
    jumping = run_baseline("managed-dampened", jobs, config, min_nodes=bounds[0], max_nodes=bounds[1], start_s=0.0, dampen_s=dampen_s)
    ticking = dampened_at_every_tick(jobs, config, *bounds, dampen_s)
    assert removed(jumping) == removed(ticking)
    assert runs(jumping) == runs(ticking)
    assert jumping.bill().scale_events == ticking.bill().scale_events
    assert nodes_over_time(jumping)[1].max() <= bounds[1]
