"""The objective's derivations, by hand from their inputs, and the refusals of config and command line."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autoscaler.core.cost import schedule_cost
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import CostParams
from autoscaler.core.objective import DEFAULT_OBJECTIVE, OBJECTIVES, derive_costs
from autoscaler.core.policies.hold import break_even_slots
from energy.accounting import modelled_schedule
from energy.power import TABLE_III

IDLE_W, BUSY_W = 60.30, 93.87  # Table III: gamma_cpu, and every alpha and gamma
INPUTS = dict(slot_s=300.0, idle_power_w=IDLE_W, busy_power_w=BUSY_W, boot_s=300.0, price_per_node_hour=0.240)


def test_the_objectives_and_the_default():
    assert OBJECTIVES == ("energy", "cost", "carbon", "paper")
    assert DEFAULT_OBJECTIVE == "energy"


def test_energy_is_the_power_model_per_slot_and_a_restart_is_the_boot_at_idle_power():
    costs = derive_costs("energy", **INPUTS)
    assert costs.e0 == pytest.approx(IDLE_W * 300 / 3600)  # 5.025 Wh an idle server-slot
    assert costs.e1 == pytest.approx((BUSY_W - IDLE_W) * 300 / 3600)  # 2.7975 Wh more a busy one
    assert costs.restart == pytest.approx(IDLE_W * 300 / 3600)  # 300 s of boot at idle power
    assert costs.beta == pytest.approx(costs.restart / 2)
    assert costs.unit == "Wh"
    assert "e0 = idle power 60.30 W x slot 300 s / 3600 = 5.025 Wh per server-slot" in costs.derivation


def test_a_restart_penalty_is_added_to_the_restart_in_the_objectives_unit():
    plain = derive_costs("energy", **INPUTS)
    worn = derive_costs("energy", **INPUTS, restart_penalty=10.0)
    assert worn.restart == pytest.approx(plain.restart + 10.0)
    assert (worn.e0, worn.e1) == (plain.e0, plain.e1)
    assert any("restart_penalty 10" in line for line in worn.derivation)


def test_cost_is_the_price_per_slot_and_a_restart_bills_the_boot_with_a_minute_minimum():
    costs = derive_costs("cost", **INPUTS)
    assert costs.e0 == pytest.approx(0.240 * 300 / 3600)  # $0.02 a server-slot
    assert costs.e1 == 0.0
    assert costs.beta == pytest.approx(0.240 * 300 / 3600 / 2)
    assert costs.unit == "$"
    short_boot = derive_costs("cost", **(INPUTS | {"boot_s": 20.0}))
    assert short_boot.restart == pytest.approx(0.240 * 60 / 3600)  # the 60 s minimum, not 20 s
    assert derive_costs("cost", **INPUTS, restart_penalty=0.01).restart == pytest.approx(0.240 * 300 / 3600 + 0.01)


def test_carbon_is_the_energy_costs_in_watt_hours():
    energy, carbon = derive_costs("energy", **INPUTS), derive_costs("carbon", **INPUTS)
    assert (carbon.e0, carbon.e1, carbon.beta) == (energy.e0, energy.e1, energy.beta)
    assert carbon.unit.startswith("Wh")
    assert any("weighted by the carbon signal" in line for line in carbon.derivation)


def test_paper_keeps_the_given_costs_whatever_the_power_model_says():
    assert derive_costs("paper", **INPUTS).cost_params() == CostParams(e0=1.0, e1=0.0, beta=12.0)
    given = CostParams(e0=2.0, e1=0.5, beta=6.0)
    assert derive_costs("paper", **INPUTS, given=given).cost_params() == given


def test_under_energy_holds_break_even_is_the_boot_in_slots():
    # W = 2 beta / e0 = (idle x boot) / (idle x slot) = boot_s / slot_s.
    for boot_s, slot_s in ((300.0, 300.0), (600.0, 300.0), (1800.0, 60.0)):
        costs = derive_costs("energy", **(INPUTS | {"boot_s": boot_s, "slot_s": slot_s}))
        assert 2 * costs.beta / costs.e0 == pytest.approx(boot_s / slot_s)
        assert break_even_slots(costs.cost_params()) == math.ceil(boot_s / slot_s)


def test_eq_2_under_energy_is_the_energy_models_watt_hours_of_the_schedule():
    # An independent check of beta = restart / 2: eq. (2) charges beta on every switch, on and off,
    # and energy.accounting charges boot_s of idle power once per node switched on; over a horizon
    # that starts and ends with no node on the two agree. Whole nodes, utilisation x_t / m_t.
    capacity = np.array([0, 3, 5, 5, 2, 0, 4, 1, 0], dtype=float)
    assigned = np.array([0, 2, 5, 3.5, 1, 0, 4, 0.5, 0])
    costs = derive_costs("energy", **INPUTS)
    eq2 = schedule_cost(capacity, assigned, costs.cost_params()).total
    energy = modelled_schedule("any", capacity, assigned, 300.0, TABLE_III, boot_s=300.0)
    assert eq2 == pytest.approx(float(energy.slot_energy_wh.sum()))


@pytest.mark.parametrize(
    "field, change",
    [
        ("slot_s", -1.0), ("slot_s", 0.0), ("idle_power_w", math.nan), ("busy_power_w", math.inf),
        ("boot_s", -5.0), ("price_per_node_hour", -0.1), ("restart_penalty", math.nan), ("busy_power_w", 10.0),
    ],
)  # fmt: skip
def test_a_bad_input_is_refused_naming_it(field, change):
    inputs = INPUTS | {"restart_penalty": 0.0} | {field: change}
    with pytest.raises(ConfigError, match=field):
        derive_costs("energy", **inputs)


def test_an_unknown_objective_is_refused_naming_the_choices():
    with pytest.raises(ConfigError, match="objective: expected one of energy, cost, carbon, paper, got 'watts'"):
        derive_costs("watts", **INPUTS)
