"""Static and dynamic DRF: the linear-time step against the LP and water-filling, SI, DPO, irrevocability."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core import fairshare
from autoscaler.core.errors import ConfigError

LP_TOL = 1e-7
"""CLARABEL's default tolerances are ~1e-8 on these tiny LPs; 1e-9 is beyond what the solver promises."""

WATER_STEP = 1e-3


@st.composite
def instances(draw):
    """(demands (k, m), n >= k): entries drawn from a few values so ties and zeros are common."""
    m = draw(st.integers(1, 4))
    k = draw(st.integers(1, 7))
    n = draw(st.integers(k, k + 3))
    entry = st.one_of(st.sampled_from([0.0, 0.0, 0.1, 0.25, 0.5, 1.0]), st.floats(1e-3, 1.0))
    rows = []
    for _ in range(k):
        row = draw(st.lists(entry, min_size=m, max_size=m))
        if max(row) == 0:
            row[draw(st.integers(0, m - 1))] = draw(st.floats(1e-3, 1.0))
        rows.append(row)
    # Repeated agents make the ordering ties of the bisection likely.
    if k >= 2 and draw(st.booleans()):
        rows[-1] = rows[0]
    return np.array(rows), n


@settings(max_examples=40, deadline=None)
@given(instances())
def test_linear_time_step_matches_lp_and_water_filling(instance):
    demands, n = instance
    d = fairshare.normalized_demands(demands)
    previous = np.zeros(0)
    for k in range(1, d.shape[0] + 1):
        level, x = fairshare.dynamic_drf_step(d[:k], previous, n)
        lp_level, lp_x = fairshare.dynamic_drf_step_lp(d[:k], previous, n)
        wf_level, wf_x = fairshare.dynamic_drf_step_water_filling(d[:k], previous, n, WATER_STEP)
        assert level == pytest.approx(lp_level, abs=LP_TOL)
        np.testing.assert_allclose(x, lp_x, atol=LP_TOL, rtol=0)
        assert level - WATER_STEP - 1e-12 <= wf_level <= level + 1e-12
        assert np.all(np.abs(x - wf_x) <= WATER_STEP + 1e-12)
        previous = x


@settings(max_examples=150, deadline=None)
@given(instances())
def test_sharing_incentive_pareto_at_k_over_n_and_irrevocability_at_every_step(instance):
    demands, n = instance
    d = fairshare.normalized_demands(demands)
    drf = fairshare.DynamicDRF(n, d.shape[1])
    previous = np.zeros(0)
    for k, row in enumerate(demands, start=1):
        drf.arrive(row)
        x = drf.shares
        usage = x @ d[:k]
        assert np.all(x >= 1 / n - 1e-12), "SI"
        assert np.all(usage <= k / n + 1e-12), "feasible at k/n"
        assert usage.max() == pytest.approx(k / n, abs=1e-12), "DPO: some resource used to exactly k/n"
        assert np.all(x[:-1] >= previous), "irrevocable"
        assert np.all(np.diff(x) <= 0), "non-increasing in arrival order"
        previous = x


def test_hand_worked_three_agents_two_resources():
    # Resources (CPU, memory), n = 3.
    # D_1 = (0.2, 0.1) -> d_1 = (1, 0.5); D_2 = (0.1, 0.4) -> d_2 = (0.25, 1); D_3 = (0.3, 0.3) -> d_3 = (1, 1).
    demands = np.array([[0.2, 0.1], [0.1, 0.4], [0.3, 0.3]])
    drf = fairshare.DynamicDRF(3, 2)
    # Step 1, cap 1/3: CPU M <= 1/3, memory 0.5 M <= 1/3  ->  M = 1/3.
    assert drf.arrive(demands[0]) == pytest.approx(1 / 3, abs=1e-15)
    # Step 2, cap 2/3; both agents at M >= 1/3: CPU 1.25 M <= 2/3 (M <= 8/15),
    # memory 1.5 M <= 2/3 (M <= 4/9)  ->  M = 4/9, x = (4/9, 4/9).
    assert drf.arrive(demands[1]) == pytest.approx(4 / 9, abs=1e-15)
    np.testing.assert_allclose(drf.shares, [4 / 9, 4 / 9], atol=1e-15)
    # Step 3, cap 1. All three at 4/9 needs memory 4/9 * 2.5 = 10/9 > 1, so agents 1 and 2 keep 4/9
    # (tau = 3): CPU 4/9 + 1/9 + M <= 1 (M <= 4/9), memory 2/9 + 4/9 + M <= 1 (M <= 1/3)  ->  M = 1/3.
    assert drf.arrive(demands[2]) == pytest.approx(1 / 3, abs=1e-15)
    np.testing.assert_allclose(drf.shares, [4 / 9, 4 / 9, 1 / 3], atol=1e-15)
    # Memory is used to exactly 3/3 (DPO); CPU to 4/9 + 1/9 + 1/3 = 8/9.
    np.testing.assert_allclose(drf.shares @ drf.demands, [8 / 9, 1.0], atol=1e-15)
    assert drf.levels == pytest.approx([1 / 3, 4 / 9, 1 / 3])


def test_one_resource_splits_it_equally_as_agents_arrive():
    steps = fairshare.run_dynamic_drf(np.array([[0.5], [0.1], [0.9], [0.3]]))
    for k, (_level, x) in enumerate(steps, start=1):
        np.testing.assert_allclose(x, np.full(k, 0.25))


def test_zero_demand_on_a_resource_is_not_a_division_by_zero():
    # d_1 = (1, 0), d_2 = (0, 1): step 1 (cap 1/2) gives x_1 = 1/2; at step 2 (cap 1) CPU bounds
    # max(1/2, M) <= 1 and memory M <= 1, so both rise to M = 1: disjoint agents each get a whole resource.
    steps = fairshare.run_dynamic_drf(np.array([[1.0, 0.0], [0.0, 2.0]]), n_agents=2)
    assert steps[0][0] == 0.5
    np.testing.assert_allclose(steps[-1][1], [1.0, 1.0])


def test_static_drf_ghodsi_example():
    # 9 CPUs, 18 GB; A needs <1 CPU, 4 GB> per task, B <3 CPU, 1 GB>: A runs 3 tasks, B 2, both at 2/3.
    shares = fairshare.static_drf(np.array([[1 / 9, 4 / 18], [3 / 9, 1 / 18]]))
    np.testing.assert_allclose(shares, [2 / 3, 2 / 3])


def test_static_drf_agents_off_a_full_resource_keep_rising():
    # CPU fills at 1/2 (agents 1 and 2); agent 3 uses only memory and rises to 1 - 1/2 * 0.5 = 0.75.
    shares = fairshare.static_drf(np.array([[1.0, 0.5], [1.0, 0.0], [0.0, 1.0]]))
    np.testing.assert_allclose(shares, [0.5, 0.5, 0.75])


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ([0.0, 0.0], "all zero"),
        ([-0.1, 0.2], ">= 0"),
        ([np.nan, 0.2], "finite"),
        ([np.inf, 0.2], "finite"),
    ],
)
def test_bad_demand_vectors_name_the_agent(row, message):
    drf = fairshare.DynamicDRF(2, 2)
    with pytest.raises(ConfigError, match=rf"agent 'web'.*{message}"):
        drf.arrive(np.array(row), agent="web")
    assert drf.k == 0
    with pytest.raises(ConfigError, match=rf"agent 'web'.*{message}"):
        fairshare.static_drf(np.array([[1.0, 1.0], row]), agents=["db", "web"])


def test_more_arrivals_than_n_is_refused_naming_the_agent():
    drf = fairshare.DynamicDRF(1, 1)
    drf.arrive(np.array([1.0]), agent="a")
    with pytest.raises(ConfigError, match=r"agent 'b'.*more than the n = 1"):
        drf.arrive(np.array([1.0]), agent="b")


@settings(max_examples=15, deadline=None)
@given(instances())
def test_offline_maxmin_lp_matches_its_closed_form_and_ratios_are_at_most_one(instance):
    demands, n = instance
    d = fairshare.normalized_demands(demands)
    steps = fairshare.run_dynamic_drf(demands, n)
    k = d.shape[0]
    # Everyone at t is optimal for maxmin: t = cap / max_r sum_i d_ir.
    assert fairshare.offline_optimum(d, 1.0, "maxmin") == pytest.approx(1 / d.sum(axis=0).max(), abs=1e-7)
    ratios = fairshare.competitive_ratios(d, steps[-1][1], n)
    assert ratios.k == k
    # The k/n-capped optimum, solved directly, is the full one scaled (the LP is homogeneous).
    assert fairshare.offline_optimum(d, k / n, "maxsum") == pytest.approx(
        k / n * fairshare.offline_optimum(d, 1.0, "maxsum"), rel=1e-6
    )
    for value in (ratios.maxmin_capped, ratios.maxsum_capped):
        assert 0 < value <= 1 + 1e-6
    assert ratios.maxmin_full == pytest.approx(k / n * ratios.maxmin_capped)


def test_yarn_allocation_xml_weights_and_bad_names():
    text = fairshare.yarn_allocation_xml(["a", "b&c"], np.array([0.5, 0.25]), 4)
    assert '<queue name="b&amp;c">' in text and "<weight>2</weight>" in text and "<weight>1</weight>" in text
    with pytest.raises(ConfigError, match="root.a"):
        fairshare.yarn_allocation_xml(["root.a"], np.array([1.0]), 1)
