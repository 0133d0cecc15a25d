"""The cluster twin's rules (autoscaler.core.twin): a hand-worked case for each, then hypothesis
properties over random resize sequences, checked against the twin's own log of runs and nodes."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autoscaler.core.errors import AutoscalerError, ConfigError
from autoscaler.core.twin import PRICE_PER_NODE_HOUR, ClusterTwin, TwinConfig

IDLE_W, BUSY_W = 60.30, 93.87  # Table III: gamma_cpu, and all alphas + gammas (u = 1)


def twin(**options) -> ClusterTwin:
    return ClusterTwin(TwinConfig(**options))


def add(t: ClusterTwin, now_s: float, job_id: str, length_s: float) -> str:
    t.add_step(now_s, f"s-{job_id}", job_id, length_s, submit_s=now_s, deadline_s=now_s + 10 * length_s)
    return f"s-{job_id}"


def test_the_default_price_is_an_m5_xlarge_on_demand_plus_its_emr_charge():
    assert PRICE_PER_NODE_HOUR == pytest.approx(0.192 + 0.048)


def test_a_node_is_usable_provision_s_after_the_request_and_billed_and_powered_from_it():
    t = twin()  # provision_s 330
    t.resize(0.0, 1)
    step = add(t, 0.0, "a", 600.0)
    assert t.steps[step].state == "PENDING"
    t.advance(329.0)
    assert t.steps[step].state == "PENDING" and t.running == 0
    t.advance(330.0)
    assert t.steps[step].start_s == 330.0 and t.running == 1
    assert t.finish(930.0) == 930.0
    bill = t.bill()
    assert bill.billed_node_s == 930.0
    assert bill.state_node_s == {"booting": 330.0, "idle": 0.0, "busy": 600.0}
    assert bill.cost_usd == pytest.approx(930 / 3600 * 0.240)  # $0.062
    assert bill.energy_wh == pytest.approx(330 * 60.30 / 3600 + 600 * 93.87 / 3600)  # 5.5275 + 15.645 Wh
    assert bill.jobs == (("s-a", "a", 0.0, 0.0, 330.0, 930.0, 6000.0, 0),)


def test_a_node_up_for_ten_seconds_is_billed_sixty():
    t = twin()
    t.resize(0.0, 1)
    t.resize(10.0, 0)
    t.finish(10.0)
    bill = t.bill()
    assert bill.billed_node_s == 60.0 and bill.state_node_s["booting"] == 10.0
    assert bill.scale_events == 2 and bill.peak_nodes == 1


def test_a_resize_down_removes_the_idle_node_and_keeps_the_busy_one_until_its_job_ends():
    t = twin(provision_s=0.0)
    t.resize(0.0, 2)
    add(t, 0.0, "a", 1000.0)
    busy = t.steps["s-a"].node
    t.resize(100.0, 1)  # one node too many: the idle one goes now
    idle = 1 - busy
    assert t.nodes[idle].removed_s == 100.0 and t.nodes[busy].removed_s is None
    t.resize(200.0, 0)  # the busy one drains
    t.advance(999.0)
    assert t.nodes[busy].removed_s is None
    t.advance(1000.0)
    assert t.nodes[busy].removed_s == 1000.0 and t.steps["s-a"].end_s == 1000.0
    t.finish(1000.0)
    assert t.bill().billed_node_s == 100.0 + 1000.0 and t.bill().jobs_killed == 0


def test_a_job_still_running_at_the_decommission_timeout_is_killed_counted_and_run_again():
    t = twin(provision_s=0.0, decommission_timeout_s=100.0)
    t.resize(0.0, 1)
    add(t, 0.0, "a", 1000.0)
    t.resize(50.0, 0)
    t.advance(150.0)
    assert t.nodes[0].removed_s == 150.0 and t.steps["s-a"].kills == 1
    assert t.steps["s-a"].state == "RUNNING"  # YARN retries it within the step
    t.resize(200.0, 1)
    t.finish(200.0)
    bill = t.bill()
    assert t.steps["s-a"].start_s == 0.0 and t.steps["s-a"].end_s == 1200.0
    assert (bill.jobs_killed, bill.jobs_rerun, bill.killed_node_s, bill.work_node_s) == (1, 1, 150.0, 1000.0)
    assert bill.busy_node_s == 1150.0 and bill.billed_node_s == 150.0 + 1000.0
    assert t.runs == [("s-a", 0, 0.0, 150.0, False), ("s-a", 1, 200.0, 1200.0, True)]


def test_at_most_step_concurrency_steps_run_at_once():
    t = twin(provision_s=0.0, step_concurrency=1)
    t.resize(0.0, 2)
    add(t, 0.0, "a", 100.0)
    add(t, 0.0, "b", 100.0)
    t.finish(0.0)
    assert [(t.steps[s].start_s, t.steps[s].end_s) for s in ("s-a", "s-b")] == [(0.0, 100.0), (100.0, 200.0)]


def test_finish_runs_waiting_jobs_on_a_node_when_none_is_left():
    t = twin(provision_s=30.0)
    add(t, 0.0, "a", 100.0)
    assert t.finish(10.0) == 10.0 + 30.0 + 100.0
    assert t.bill().billed_node_s == 130.0


def test_true_lengths_are_the_estimate_times_a_seeded_lognormal_per_job():
    config = TwinConfig(length_error_sigma=0.5, seed=7)
    expected = 600.0 * np.random.default_rng([7, zlib.crc32(b"job-1")]).lognormal(0.0, 0.5)
    assert config.true_length_s("job-1", 600.0) == pytest.approx(expected)
    assert TwinConfig().true_length_s("job-1", 600.0) == 600.0
    ratios = np.log([config.true_length_s(f"j{i}", 100.0) / 100.0 for i in range(4000)])
    assert abs(ratios.mean()) < 0.05 and abs(ratios.std() - 0.5) < 0.05  # 4,000 draws: standard errors 0.008, 0.006
    assert TwinConfig(length_error_sigma=0.5, seed=8).true_length_s("job-1", 600.0) != pytest.approx(expected)


def test_a_recurring_name_is_off_by_the_same_factor_on_every_run_and_the_plan_never_moves_the_truth():
    config = TwinConfig(length_error_sigma=0.5, seed=7)
    factor = np.random.default_rng([7, zlib.crc32(b"nightly")]).lognormal(0.0, 0.5)
    runs = [config.true_length_s("nightly", 600.0, f"nightly-day{day}") for day in range(5)]
    assert runs == pytest.approx([600.0 * factor] * 5)
    # A planned length (a learned one) changes nothing: the twin draws from the submitted one.
    t = ClusterTwin(config)
    t.resize(0.0, 1)
    t.add_step(0.0, "s1", "nightly-day0", 5000.0, 0.0, 1e6, name="nightly", submitted_s=600.0)
    assert t.steps["s1"].true_s == pytest.approx(600.0 * factor) and t.steps["s1"].estimate_s == 5000.0
    # The jitter is drawn per job id, on top, and differs from run to run.
    jittered = TwinConfig(length_error_sigma=0.5, length_jitter_sigma=0.1, seed=7)
    ratios = np.log([jittered.true_length_s("nightly", 600.0, f"nightly-day{day}") / (600.0 * factor) for day in range(4000)])
    assert abs(ratios.mean()) < 0.01 and abs(ratios.std() - 0.1) < 0.01  # 4,000 draws: standard errors 0.0016, 0.0011
    with pytest.raises(ConfigError, match="^length_jitter_sigma: "):
        TwinConfig(length_jitter_sigma=-1.0)


def test_kg_co2_is_each_slots_energy_times_its_signal():
    t = twin(provision_s=3600.0)
    t.resize(0.0, 1)  # booting for an hour: idle power, 30.15 Wh per half hour
    t.resize(3600.0, 0)
    t.finish(3600.0)
    bill = t.bill()
    assert bill.energy_wh_between(np.array([0.0, 1800.0, 3600.0])) == pytest.approx([30.15, 30.15])
    kg, uncovered = bill.carbon_kg(0.0, 1800.0, np.array([100.0, 300.0]))
    assert kg == pytest.approx(0.03015 * 0.1 + 0.03015 * 0.3) and uncovered == 0
    kg, uncovered = bill.carbon_kg(0.0, 1800.0, np.array([100.0, math.nan]))
    assert kg == pytest.approx(0.003015) and uncovered == 1


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ({"provision_s": -1.0}, "-1.0"),
        ({"provision_s": 86_400.0}, "86400.0"),
        ({"provision_s": math.nan}, "nan"),
        ({"price_per_node_hour": 0.0}, "0.0"),
        ({"price_per_node_hour": math.nan}, "nan"),
        ({"length_error_sigma": -0.1}, "-0.1"),
        ({"step_concurrency": 0}, "0"),
        ({"step_concurrency": 257}, "257"),
        ({"decommission_timeout_s": -5.0}, "-5.0"),
        ({"seed": -1}, "-1"),
    ],
)
def test_bad_settings_are_refused_naming_the_field_first_and_the_value(options, shown):
    # The field first, as the command line's flagged() expects to name it by its flag (the CLI tests).
    (field,) = options
    with pytest.raises(ConfigError) as caught:
        TwinConfig(**options)
    assert str(caught.value).startswith(f"{field}: ") and shown in str(caught.value)
    assert isinstance(caught.value, AutoscalerError)


def test_time_never_goes_back():
    t = twin()
    t.advance(100.0)
    with pytest.raises(ConfigError, match="before its last time"):
        t.resize(50.0, 1)


# -- properties -------------------------------------------------------------------------------

TIME_ABS_S = 1e-6
"""Event times are floats of up to ~1e4 s, whose spacing is ~1e-12 s: a length or a time is compared to a microsecond."""

jobs_strategy = st.lists(st.floats(0.0, 5_000.0), min_size=1, max_size=12)
ops_strategy = st.lists(st.tuples(st.floats(0.0, 2_000.0), st.integers(0, 5), st.booleans()), min_size=1, max_size=25)
config_strategy = st.builds(
    TwinConfig,
    provision_s=st.sampled_from([0.0, 30.0, 330.0]),
    decommission_timeout_s=st.sampled_from([0.0, 200.0, 3600.0]),
    length_error_sigma=st.sampled_from([0.0, 0.7]),
    step_concurrency=st.integers(1, 4),
)


def drive(config: TwinConfig, lengths: list[float], ops: list[tuple[float, int, bool]]) -> ClusterTwin:
    """Each op: wait ``dt`` s, resize to ``nodes``, and add the next job if ``add``; the jobs left are
    added at the end; then finish."""
    t = ClusterTwin(config)
    now_s, added = 0.0, 0
    for dt, nodes, add_one in ops:
        now_s += dt
        t.resize(now_s, nodes)
        if add_one and added < len(lengths):
            t.add_step(now_s, f"s{added}", f"j{added}", lengths[added], now_s, now_s)
            added += 1
    for i in range(added, len(lengths)):
        t.add_step(now_s, f"s{i}", f"j{i}", lengths[i], now_s, now_s)
    t.finish(now_s)
    return t


@settings(max_examples=150, deadline=None)
@given(config_strategy, jobs_strategy, ops_strategy)
@example(  # a 1e-12 s job after a 4,436 s one: its run's length is known only to the float spacing at that time
    config=TwinConfig(provision_s=0.0, decommission_timeout_s=0.0, length_error_sigma=0.7, step_concurrency=1),
    lengths=[0.0, 0.0, 4436.0, 1148.0, 1.0, 1e-12],
    ops=[(0.0, 0, False)],
)
def test_the_twins_rules_hold_over_any_resize_sequence(config, lengths, ops):
    t = drive(config, lengths, ops)
    bill = t.bill()
    # every job ends, after as many kills as it counts, its last run completed and as long as its true length
    assert all(step.end_s is not None for step in t.steps.values())
    for step in t.steps.values():
        runs = [r for r in t.runs if r[0] == step.step_id]
        assert [r[4] for r in runs] == [False] * step.kills + [True]
        assert runs[-1][3] - runs[-1][2] == pytest.approx(step.true_s, abs=TIME_ABS_S)
        assert step.start_s == runs[0][2] and step.end_s == runs[-1][3]
    for _, node_id, start_s, end_s, completed in t.runs:
        node = t.nodes[node_id]
        # no job starts on a node before it is usable, provision_s after its request
        assert start_s >= node.usable_s == node.requested_s + config.provision_s
        # a node running a job is not removed before the job ends, or its drain's timeout kills it
        assert node.removed_s >= end_s
        if not completed:
            assert node.removed_s == end_s == pytest.approx(node.draining_s + config.decommission_timeout_s, abs=TIME_ABS_S)
    # one job per node at a time, and at most step_concurrency steps started and not ended
    for node_id in t.nodes:
        spans = sorted((r[2], r[3]) for r in t.runs if r[1] == node_id)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    changes = sorted([(s.start_s, 1) for s in t.steps.values()] + [(s.end_s, -1) for s in t.steps.values()], key=lambda c: (c[0], c[1]))
    assert max(np.cumsum([c[1] for c in changes])) <= config.step_concurrency
    # billed >= busy; energy = sum over states of time x power, the states counted again from the log
    assert bill.billed_node_s >= bill.busy_node_s - 1e-6
    busy_s = sum(r[3] - r[2] for r in t.runs)
    life_s = sum(node.removed_s - node.requested_s for node in t.nodes.values())
    booting_s = sum(min(node.usable_s, node.removed_s) - node.requested_s for node in t.nodes.values())
    assert bill.busy_node_s == pytest.approx(busy_s, abs=1e-6)
    assert bill.state_node_s["booting"] == pytest.approx(booting_s, abs=1e-6)
    expected_wh = (booting_s * config.idle_power_w + (life_s - booting_s - busy_s) * config.idle_power_w + busy_s * config.busy_power_w) / 3600
    assert bill.energy_wh == pytest.approx(expected_wh, rel=1e-9, abs=1e-9)
    assert bill.energy_wh_between(np.array([-1.0, t.now_s + 1.0])).sum() == pytest.approx(expected_wh, rel=1e-9, abs=1e-6)
    assert bill.billed_node_s == pytest.approx(sum(max(60.0, node.removed_s - node.requested_s) for node in t.nodes.values()))


@settings(max_examples=100, deadline=None)
@given(config_strategy, jobs_strategy, ops_strategy, ops_strategy)
def test_the_same_jobs_do_the_same_work_whatever_the_resize_sequence(config, lengths, ops_a, ops_b):
    first, second = drive(config, lengths, ops_a), drive(config, lengths, ops_b)
    assert first.bill().work_node_s == pytest.approx(second.bill().work_node_s, abs=TIME_ABS_S)
    assert first.bill().work_node_s == pytest.approx(sum(config.true_length_s(f"j{i}", length) for i, length in enumerate(lengths)), abs=TIME_ABS_S)
    if first.bill().jobs_killed == second.bill().jobs_killed == 0:
        assert first.bill().busy_node_s == pytest.approx(second.bill().busy_node_s, abs=TIME_ABS_S)


def test_the_default_power_is_table_iii_idle_and_at_full_load():
    from autoscaler.core.energy.power import TABLE_III

    assert (TwinConfig().idle_power_w, TwinConfig().busy_power_w) == pytest.approx((TABLE_III.idle_power_w, TABLE_III.peak_power_w))


def test_running_counts_usable_nodes_draining_ones_included_booting_ones_not():
    t = twin(provision_s=100.0)
    t.resize(0.0, 2)
    assert t.running == 0
    add(t, 0.0, "a", 1000.0)
    t.advance(100.0)
    assert t.running == 2
    t.resize(200.0, 0)  # the idle node goes; the busy one drains
    assert t.running == 1 and t.requested == 0
    t.advance(1100.0)
    assert t.running == 0


def test_finish_lets_busy_nodes_end_their_jobs_and_removes_the_others_at_once():
    t = twin(provision_s=0.0)
    t.resize(0.0, 3)
    add(t, 0.0, "a", 100.0)
    add(t, 0.0, "b", 500.0)
    assert t.finish(50.0) == 500.0
    removed = sorted(node.removed_s for node in t.nodes.values())
    assert removed == [50.0, 100.0, 500.0]  # the idle node at the finish, each busy one as its job ends
    assert t.bill().billed_node_s == 60.0 + 100.0 + 500.0  # the idle node up 50 s is billed the 60 s minimum


def test_remove_idle_removes_only_idle_nodes_newest_first_and_counts_one_scale_event():
    t = twin(provision_s=100.0)
    t.resize(0.0, 3)  # nodes 0, 1, 2 usable at 100
    add(t, 100.0, "a", 1000.0)  # on node 0, the lowest idle id
    t.resize(150.0, 4)  # node 3 boots until 250
    assert t.counts() == {"booting": 1, "idle": 2, "busy": 1, "draining": 0, "pending": 0, "waiting": 0}
    events = t.scale_events
    assert t.remove_idle(200.0, 5) == 2  # only nodes 1 and 2: node 3 boots, node 0 runs a job
    assert (t.nodes[1].removed_s, t.nodes[2].removed_s, t.nodes[0].removed_s, t.nodes[3].removed_s) == (200.0, 200.0, None, None)
    assert t.requested == 2 and t.scale_events == events + 1
    assert t.remove_idle(200.0, 1) == 0 and t.scale_events == events + 1  # nothing idle: no event
    t.advance(250.0)
    assert t.remove_idle(260.0, 1) == 1 and t.nodes[3].removed_s == 260.0 and t.requested == 1
    with pytest.raises(ConfigError, match="whole number"):
        t.remove_idle(260.0, -1)


def test_counts_tell_pending_steps_those_step_concurrency_lets_start():
    t = twin(provision_s=50.0, step_concurrency=2)
    t.resize(0.0, 1)
    for name in "abc":
        add(t, 0.0, name, 100.0)
    assert t.counts()["pending"] == 2 and t.counts()["waiting"] == 3 and t.next_event_s == 50.0
    t.advance(50.0)  # a starts; b may start (one more step), c waits for the concurrency
    assert t.counts() == {"booting": 0, "idle": 0, "busy": 1, "draining": 0, "pending": 1, "waiting": 2}
    assert t.next_event_s == 150.0
