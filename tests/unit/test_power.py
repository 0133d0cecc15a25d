"""The power model (paper: dynamic deferral, eq. (13)-(14), Table III) on hand-computed cases."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.energy.power import (
    MODELS,
    POWER_CEILING_W,
    TABLE_III,
    IoMaxima,
    PowerModel,
    ccf_aws_model,
    energy_wh,
    measured_energy,
    modelled_energy_wh,
    power_model,
)
from autoscaler.core.errors import ConfigError

NAN = np.nan


def grid(*rows):
    """A (n_slots, n_instances) array from rows of slots."""
    return np.array(rows, dtype=float)


# --- the model ------------------------------------------------------------------------------


def test_table_iii_coefficients_are_the_papers():
    model = TABLE_III
    assert (model.alpha_cpu, model.alpha_disk, model.alpha_dops, model.alpha_net) == (25.70, 7.21, 0, 0.66)
    assert (model.gamma_cpu, model.gamma_disk, model.gamma_dops, model.gamma_net) == (60.30, 0, 0, 0)
    assert TABLE_III.idle_power_w == pytest.approx(60.30)
    assert TABLE_III.peak_power_w == pytest.approx(60.30 + 25.70 + 7.21 + 0.66)  # 93.87 W
    assert "Table III" in TABLE_III.source


def test_power_is_eq_13():
    # u_cpu 0.5, u_disk 0.25, u_net 1: 25.70*0.5 + 60.30 + 7.21*0.25 + 0.66*1 = 12.85 + 60.30 + 1.8025 + 0.66
    assert TABLE_III.power_w(0.5, 0.25, 0.0, 1.0) == pytest.approx(75.6125)


def test_ccf_aws_model_is_min_plus_utilisation_times_range_times_pue():
    ccf = ccf_aws_model()
    # gamma = 0.74 W * 1.135; alpha = (3.5 - 0.74) W * 1.135
    assert ccf.gamma_cpu == pytest.approx(0.8399)
    assert ccf.alpha_cpu == pytest.approx(3.1326)
    assert (ccf.alpha_disk, ccf.alpha_dops, ccf.alpha_net) == (0.0, 0.0, 0.0)
    # at 50 % CPU: (0.74 + 0.5 * 2.76) * 1.135 = 2.12 * 1.135
    assert ccf.power_w(0.5) == pytest.approx(2.4062)
    four = ccf_aws_model(vcpus=4)
    assert four.peak_power_w == pytest.approx(4 * 3.5 * 1.135)
    assert four.name == "ccf-aws-4vcpu"


@pytest.mark.parametrize("vcpus", [0, -1, 1.5, True])
def test_ccf_aws_model_refuses_bad_vcpus(vcpus):
    with pytest.raises(ConfigError, match="vcpus"):
        ccf_aws_model(vcpus)


def test_named_models():
    assert set(MODELS) == {"table-iii", "ccf-aws"}
    assert power_model("table-iii") is TABLE_III
    assert power_model("ccf-aws").name == "ccf-aws"
    with pytest.raises(ConfigError, match="unknown power model 'specpower'.*table-iii, ccf-aws"):
        power_model("specpower")


def test_coefficients_are_configurable():
    model = PowerModel(name="lab", alpha_cpu=100.0, gamma_cpu=50.0, alpha_disk=0, alpha_net=0, source="bench")
    assert model.power_w(1.0) == pytest.approx(150.0)


@pytest.mark.parametrize("value", [-0.1, float("nan"), float("inf"), True, "25.7"])
def test_model_refuses_a_coefficient_that_is_not_finite_and_non_negative(value):
    with pytest.raises(ConfigError, match="alpha_cpu must be a finite number >= 0"):
        PowerModel(alpha_cpu=value)


def test_model_refuses_a_peak_above_the_ceiling():
    # 25.7 kW instead of 25.7 W: a units slip.
    with pytest.raises(ConfigError, match=f"peak power .* above the {POWER_CEILING_W:g} W ceiling"):
        PowerModel(name="kilo", alpha_cpu=25_700.0)


def test_model_refuses_an_empty_name():
    with pytest.raises(ConfigError, match="name must be a non-empty string"):
        PowerModel(name="")


@pytest.mark.parametrize("u", [-0.01, 1.01, float("nan")])
def test_power_refuses_utilisation_outside_0_1_and_names_the_index(u):
    with pytest.raises(ConfigError, match=r"u_cpu must be in \[0, 1\].*at index \(1,\)"):
        TABLE_III.power_w(np.array([0.5, u]))


def test_energy_wh_is_eq_14():
    # two VMs at 60 W and 40 W for one hour-long slot: 100 Wh
    assert energy_wh(grid([60.0, 40.0]), 3600) == pytest.approx(100.0)
    with pytest.raises(ConfigError, match="power_w must be finite and >= 0"):
        energy_wh(grid([60.0, -1.0]), 300)
    with pytest.raises(ConfigError, match="slot_s"):
        energy_wh(grid([60.0]), 0)


# --- measured energy ------------------------------------------------------------------------


def test_one_vm_two_slots_at_half_cpu():
    # No disk or network traffic (maximum 0, so u = 0). P = 25.70*0.5 + 60.30 = 73.15 W.
    # Two slots of 300 s: 73.15 W * 600 s / 3600 = 12.191666... Wh.
    zeros = grid([0.0], [0.0])
    result = measured_energy(grid([50.0], [50.0]), zeros, zeros, zeros, slot_s=300)
    assert result.energy_wh == pytest.approx(73.15 * 600 / 3600)
    np.testing.assert_allclose(result.slot_energy_wh, [73.15 * 300 / 3600] * 2)
    np.testing.assert_allclose(result.power_w, [[73.15], [73.15]])
    assert result.counted_count == 2
    assert result.maxima == IoMaxima(disk_bytes=0.0, disk_ops=0.0, network_bytes=0.0)


def test_disk_and_network_are_normalised_by_their_maximum_over_all_vms_and_slots():
    # Disk bytes (read + write) of two VMs over two slots: max 300 -> u_disk = [[1/3, 1], [0, 1/2]].
    # Network bytes: max 8 -> u_net = [[1/2, 0], [1, 1/4]]. CPU idle.
    disk = grid([100.0, 300.0], [0.0, 150.0])
    net = grid([4.0, 0.0], [8.0, 2.0])
    result = measured_energy(grid([0, 0], [0, 0]), disk, grid([0, 0], [0, 0]), net, slot_s=3600)
    expected_w = 60.30 + 7.21 * (disk / 300.0) + 0.66 * (net / 8.0)
    np.testing.assert_allclose(result.power_w, expected_w)
    assert result.energy_wh == pytest.approx(expected_w.sum())  # one-hour slots: W = Wh
    assert result.maxima == IoMaxima(disk_bytes=300.0, disk_ops=0.0, network_bytes=8.0)


def test_a_zero_maximum_gives_zero_utilisation_without_dividing_by_zero():
    zeros = grid([0.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a 0/0 would warn
        result = measured_energy(grid([100.0, 0.0]), zeros, zeros, zeros, slot_s=3600)
    np.testing.assert_allclose(result.power_w, [[25.70 + 60.30, 60.30]])


def test_given_maxima_put_two_runs_on_one_scale():
    # A reference run saw 1000 disk bytes at most; this run's 250 is then u_disk = 0.25, not 1.
    zeros = grid([0.0])
    reference = IoMaxima(disk_bytes=1000.0, disk_ops=0, network_bytes=0)
    result = measured_energy(zeros, grid([250.0]), zeros, zeros, slot_s=3600, maxima=reference)
    assert result.energy_wh == pytest.approx(60.30 + 7.21 * 0.25)
    too_small = IoMaxima(disk_bytes=100.0, disk_ops=0, network_bytes=0)
    with pytest.raises(ConfigError, match="given maximum disk_bytes 100.0 is below the observed maximum 250.0"):
        measured_energy(zeros, grid([250.0]), zeros, zeros, slot_s=3600, maxima=too_small)


def test_cells_not_counted_add_nothing_and_are_not_read():
    # VM 1 is unmeasured in slot 0 (NaN everywhere): left out of `counted`, it adds no energy.
    cpu = grid([0.0, NAN], [0.0, 0.0])
    zeros = grid([0.0, NAN], [0.0, 0.0])
    counted = np.array([[True, False], [True, True]])
    result = measured_energy(cpu, zeros, zeros, zeros, slot_s=3600, counted=counted)
    assert result.counted_count == 3
    assert result.energy_wh == pytest.approx(3 * 60.30)
    assert np.isnan(result.power_w[0, 1])


def test_an_input_the_model_does_not_use_may_be_missing():
    # Table III has alpha_dops = 0, and CCF uses the CPU only: NaN there is not needed.
    zeros = grid([0.0])
    result = measured_energy(grid([50.0]), zeros, grid([NAN]), zeros, slot_s=3600)
    assert result.energy_wh == pytest.approx(73.15)
    ccf = measured_energy(grid([50.0]), grid([NAN]), grid([NAN]), grid([NAN]), slot_s=3600, model=MODELS["ccf-aws"])
    assert ccf.energy_wh == pytest.approx((0.74 + 0.5 * 2.76) * 1.135)


def test_a_missing_needed_input_in_a_counted_cell_raises_naming_it():
    zeros = grid([0.0], [0.0])
    with pytest.raises(ConfigError, match=r"disk_bytes is missing \(NaN\) at slot 1, instance 0"):
        measured_energy(zeros, grid([0.0], [NAN]), zeros, zeros, slot_s=300)


def test_negative_bytes_raise_naming_the_slot():
    zeros = grid([0.0, 0.0])
    with pytest.raises(ConfigError, match="network_bytes is -5.0, not a finite number >= 0 at slot 0, instance 1"):
        measured_energy(zeros, zeros, zeros, grid([1.0, -5.0]), slot_s=300)


def test_cpu_above_100_percent_raises_but_rounding_is_clipped():
    zeros = grid([0.0])
    result = measured_energy(grid([100.00001]), zeros, zeros, zeros, slot_s=3600)
    assert result.energy_wh == pytest.approx(25.70 + 60.30)
    with pytest.raises(ConfigError, match="cpu_utilization_percent is 150.0 at slot 0, instance 0; expected at most"):
        measured_energy(grid([150.0]), zeros, zeros, zeros, slot_s=300)


def test_measured_energy_refuses_mismatched_shapes():
    with pytest.raises(ConfigError, match="shape"):
        measured_energy(grid([0.0, 0.0]), grid([0.0]), grid([0.0]), grid([0.0]), slot_s=300)


# --- modelled energy ------------------------------------------------------------------------


def test_modelled_energy_of_a_schedule_by_hand():
    # m = [2, 1.5, 0], x = [1, 1.5, 0], 300 s slots: u = [0.5, 1, 0].
    # Proportional I/O: P(u) = 60.30 + (25.70 + 7.21 + 0 + 0.66) u = 60.30 + 33.57 u.
    #   slot 0: 2 * (60.30 + 16.785) = 154.17 W -> * 300/3600 = 12.8475 Wh
    #   slot 1: 1.5 * 93.87 = 140.805 W -> 11.73375 Wh; slot 2: no server, 0 Wh.
    capacity, assigned = np.array([2.0, 1.5, 0.0]), np.array([1.0, 1.5, 0.0])
    np.testing.assert_allclose(modelled_energy_wh(capacity, assigned, 300), [12.8475, 11.73375, 0.0])
    # Idle I/O: P(u) = 60.30 + 25.70 u. slot 0: 2 * 73.15 = 146.3 W -> 12.19166 Wh; slot 1: 1.5 * 86 -> 10.75 Wh.
    np.testing.assert_allclose(
        modelled_energy_wh(capacity, assigned, 300, io_utilisation="zero"), [146.3 / 12, 10.75, 0.0]
    )


def test_fractional_servers_count_linearly():
    # 2.5 idle servers use 2.5 times one idle server's energy.
    one = modelled_energy_wh(np.array([1.0]), np.array([0.0]), 3600)
    assert modelled_energy_wh(np.array([2.5]), np.array([0.0]), 3600)[0] == pytest.approx(2.5 * one[0])
    assert one[0] == pytest.approx(60.30)


def test_assigned_above_capacity_raises_naming_the_slot():
    with pytest.raises(ConfigError, match="assigned x_t = 2.5 exceeds capacity m_t = 2.0 at slot 1"):
        modelled_energy_wh(np.array([1.0, 2.0]), np.array([1.0, 2.5]), 300)


def test_solver_rounding_above_capacity_is_accepted():
    result = modelled_energy_wh(np.array([1.0]), np.array([1.0 + 1e-9]), 3600)
    assert result[0] == pytest.approx(TABLE_III.peak_power_w)


@pytest.mark.parametrize(
    ("capacity", "assigned", "message"),
    [
        ([1.0, -1.0], [0.0, 0.0], "capacity m_t must be finite and >= 0, got -1.0 at slot 1"),
        ([1.0, np.nan], [0.0, 0.0], "capacity m_t must be finite and >= 0, got nan at slot 1"),
        ([1.0, 1.0], [np.inf, 0.0], "assigned x_t must be finite and >= 0, got inf at slot 0"),
        ([1.0, 1.0], [0.0, -0.5], "assigned x_t must be finite and >= 0, got -0.5 at slot 1"),
        ([1.0], [0.0, 0.0], "must both have shape"),
    ],
)
def test_modelled_energy_refuses_bad_schedules(capacity, assigned, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        modelled_energy_wh(np.array(capacity), np.array(assigned), 300)


def test_modelled_energy_refuses_unknown_io_assumption_and_bad_slot():
    with pytest.raises(ConfigError, match="io_utilisation must be one of proportional, zero"):
        modelled_energy_wh(np.array([1.0]), np.array([0.0]), 300, io_utilisation="half")
    with pytest.raises(ConfigError, match="slot_s"):
        modelled_energy_wh(np.array([1.0]), np.array([0.0]), float("nan"))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 50, allow_nan=False), st.floats(0, 1, allow_nan=False)), min_size=1, max_size=20
    ),
    st.sampled_from(sorted(MODELS)),
)
def test_modelled_energy_lies_between_idle_and_peak(slots, name):
    # Independent bounds: every server on draws between the idle and the peak power, and idle I/O
    # ("zero") never uses more than proportional I/O when every alpha is >= 0.
    model = MODELS[name]
    capacity = np.array([m for m, _ in slots])
    assigned = np.array([m * share for m, share in slots])
    proportional = modelled_energy_wh(capacity, assigned, 300, model=model)
    zero = modelled_energy_wh(capacity, assigned, 300, model=model, io_utilisation="zero")
    hours = 300 / 3600
    assert np.all(capacity * model.idle_power_w * hours <= zero + 1e-9)
    assert np.all(zero <= proportional + 1e-9)
    assert np.all(proportional <= capacity * model.peak_power_w * hours + 1e-9)
