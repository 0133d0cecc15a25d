"""The objective's derivations, by hand from their inputs, and the refusals of config and command line."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autoscaler.core.cost import schedule_cost
from autoscaler.core.energy.accounting import modelled_schedule
from autoscaler.core.energy.power import TABLE_III
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import CostParams
from autoscaler.core.objective import DEFAULT_OBJECTIVE, OBJECTIVES, derive_costs
from autoscaler.core.policies.hold import break_even_slots

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
    # and autoscaler.core.energy.accounting charges boot_s of idle power once per node switched on; over a horizon
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


# -- the settings: objective and restart_penalty, and e0, e1, beta only under paper -----------------


def _settings(tmp_path, text: str):
    from autoscaler.app.config import load_settings

    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_settings(path, cluster_required=False)


def test_the_settings_default_to_energy_and_the_controller_decides_by_its_costs(tmp_path):
    settings = _settings(tmp_path, "")
    assert (settings.objective, settings.restart_penalty) == ("energy", 0.0)
    cost = settings.controller_config(0.0).cost
    # A restart is the idle power of the 330 s a node takes to be usable (provision_s's default).
    assert (cost.e0, cost.e1, cost.beta) == pytest.approx((IDLE_W * 300 / 3600, (BUSY_W - IDLE_W) * 300 / 3600, IDLE_W * 330 / 3600 / 2))
    # The boot and the slot come from the settings: with provision_s = 0 the energy model's boot_s;
    # a 600 s boot at 60 s slots holds 10 slots.
    longer = _settings(tmp_path, "slot_s = 60\nrestart_penalty = 1.0\nprovision_s = 0\n[report]\nboot_s = 600\n").controller_config(0.0).cost
    assert _settings(tmp_path, "provision_s = 600\n").controller_config(0.0).cost.beta == pytest.approx(IDLE_W * 600 / 3600 / 2)
    assert longer.e0 == pytest.approx(IDLE_W * 60 / 3600)
    assert longer.beta == pytest.approx((IDLE_W * 600 / 3600 + 1.0) / 2)


def test_objective_cost_takes_the_price_per_node_hour(tmp_path):
    from autoscaler.app import compose

    settings = _settings(tmp_path, 'objective = "cost"\n')
    assert settings.controller_config(0.0).cost.e0 == pytest.approx(0.240 * 300 / 3600)
    assert compose.controller_config(settings, price_per_node_hour=1.2).cost.e0 == pytest.approx(1.2 * 300 / 3600)


def test_the_paper_objective_reads_e0_e1_beta(tmp_path):
    settings = _settings(tmp_path, 'objective = "paper"\nbeta = 6\n')
    assert settings.controller_config(0.0).cost == CostParams(e0=1.0, e1=0.0, beta=6.0)


@pytest.mark.parametrize("text, named", [
    ("beta = 6\n", "beta is set, with objective 'energy'"),
    ('objective = "cost"\ne0 = 1\ne1 = 0\n', "e0, e1 are set, with objective 'cost'"),
    ('objective = "paper"\nrestart_penalty = 2\n', "restart_penalty"),
    ('objective = "watts"\n', "objective: expected one of 'energy', 'cost', 'carbon' or 'paper', got 'watts'"),
    ('objective = "carbon"\n', "[carbon] source is not set"),
])  # fmt: skip
def test_the_settings_refuse_costs_the_objective_does_not_read(tmp_path, text, named):
    with pytest.raises(ConfigError) as raised:
        _settings(tmp_path, text)
    assert named in str(raised.value)


def test_the_command_lines_objective_is_refused_over_a_configs_given_costs(tmp_path):
    from autoscaler.app.config import with_objective

    paper = _settings(tmp_path, 'objective = "paper"\nbeta = 6\n')
    with pytest.raises(ConfigError, match=r"beta is set, with --objective 'energy'"):
        with_objective(paper, "energy")
    assert with_objective(paper, None) is paper
    assert with_objective(_settings(tmp_path, ""), "cost").derived_costs().unit == "$"


# -- the command line -------------------------------------------------------------------------------


def _replay_json(capsys, *argv: str) -> dict:
    import json

    from autoscaler.app.cli import main

    assert main(["replay", "--window", "48", "--policy", "follow,hold,offline,gcp-u", "--format", "json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_replay_under_paper_is_the_replay_with_the_papers_costs_given(capsys):
    implicit = _replay_json(capsys, "--objective", "paper")
    explicit = _replay_json(capsys, "--objective", "paper", "--e0", "1", "--e1", "0", "--beta", "12")
    strip = lambda d: {k: {n: {f: v for f, v in p.items() if f != "solve_ms_per_slot"} for n, p in v.items()} if k == "policies" else v for k, v in d.items()}  # noqa: E731
    assert strip(implicit) == strip(explicit)
    assert implicit["params"] | {"deadline": None} == {"e0": 1.0, "e1": 0.0, "beta": 12.0, "deadline": None, "max_servers": None}
    follow = np.array(implicit["policies"]["follow"]["m"])
    assert implicit["policies"]["follow"]["cost"] == pytest.approx(follow.sum() + 12 * np.abs(np.diff(follow, prepend=0, append=0)).sum())


def test_replay_prints_the_derived_costs_with_their_derivation(capsys):
    document = _replay_json(capsys, "--boot-s", "600")
    objective = document["objective"]
    assert objective["objective"] == "energy" and objective["unit"] == "Wh"
    assert objective["beta"] == pytest.approx(IDLE_W * 600 / 3600 / 2)
    assert document["params"]["beta"] == objective["beta"]
    assert "a restart = idle power 60.30 W x boot 600 s / 3600 = 10.05 Wh" in objective["derivation"]


@pytest.mark.parametrize("argv, named", [
    (["--beta", "6"], "--beta: only with --objective paper"),
    (["--objective", "cost", "--e0", "1", "--e1", "0"], "--e0, --e1: only with --objective paper"),
    (["--objective", "paper", "--restart-penalty", "1"], "--restart-penalty: not with --objective paper"),
    (["--objective", "watts"], "invalid choice: 'watts'"),
    (["--objective", "carbon"], "--objective carbon weights the energy by a carbon signal: give it with --carbon SOURCE"),
])  # fmt: skip
def test_replay_and_sweep_refuse_costs_the_objective_does_not_read(capsys, argv, named):
    from autoscaler.app.cli import main

    for command in (["replay", "--window", "48"], ["sweep", "--window", "48", "--deadlines", "1-2", "--delta-deadline", "2"]):
        try:
            code = main([*command, *argv])
        except SystemExit as stopped:  # argparse's own refusal of a choice
            code = stopped.code
        assert code == 2
        assert named in " ".join(capsys.readouterr().err.split())


def test_the_live_run_takes_its_objective_from_the_config(tmp_path, capsys):
    from autoscaler.app.cli import main

    config = tmp_path / "config.toml"
    config.write_text('[cluster]\nid = "j-ABC"\n', encoding="utf-8")
    assert main(["run", "--config", str(config), "--objective", "cost"]) == 2
    assert "--objective is for --replay" in capsys.readouterr().err


def test_replay_under_carbon_decides_by_the_signal_with_the_energy_costs(capsys):
    from pathlib import Path

    signal = str(Path(__file__).resolve().parents[2] / "deploy" / "carbon-daily.csv")
    argv = ["--policy", "follow,hold", "--deadline", "1h", "--carbon", signal, "--carbon-unit", "gCO2eq/kWh"]
    carbon = _replay_json(capsys, *argv, "--objective", "carbon")
    energy = _replay_json(capsys, *argv, "--objective", "energy")
    assert carbon["params"] == energy["params"]
    assert carbon["policies"]["hold"]["schedule"] == "hold+carbon"
    assert carbon["policies"]["hold"]["m"] == energy["policies"]["hold"]["m"]
    assert carbon["objective"]["unit"] == "Wh (weighted by the carbon signal)"


def _three_hours(tmp_path):
    from pathlib import Path

    from autoscaler.app.traces import SHIPPED

    trace_a = Path(__file__).parents[2] / "autoscaler" / "data" / SHIPPED["A"].file_name
    lines = [line for line in trace_a.read_text().splitlines() if float(line.split("\t")[1]) < 3 * 3600]
    path = tmp_path / "a-3h.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_compare_decides_by_the_objective_and_prints_it(tmp_path, capsys):
    import json

    from autoscaler.app.cli import main

    argv = ["compare", "--trace", str(_three_hours(tmp_path)), "-D", "30m", "--policy", "hold", "--format", "json", "--workers", "1"]
    assert main([*argv, "--objective", "cost", "--price-per-node-hour", "0.6"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["objective"]["unit"] == "$"
    assert document["objective"]["e0"] == pytest.approx(0.6 * 300 / 3600)  # the twin's price, not the default
    assert "objective cost ($):" in captured.err
    config = tmp_path / "paper.toml"
    config.write_text('objective = "paper"\nbeta = 6\n', encoding="utf-8")
    assert main([*argv, "--config", str(config), "--objective", "energy"]) == 2
    assert "beta is set, with --objective 'energy'" in " ".join(capsys.readouterr().err.split())


def test_report_replay_decides_by_the_objective_and_says_so(capsys):
    import json

    from autoscaler.app.cli import main

    def hold_wh(*argv: str) -> tuple[float, list[str]]:
        assert main(["report", "--replay", "--window", "48", "--policy", "hold", "--format", "json", *argv]) == 0
        document = json.loads(capsys.readouterr().out)
        return next(s["energy_wh"] for s in document["schedules"] if s["schedule"] == "hold"), document["notes"]

    energy_wh, notes = hold_wh()
    assert any(note.startswith("The policies decide by objective energy (Wh)") for note in notes)
    paper_wh, notes = hold_wh("--objective", "paper")
    assert any("as given" in note for note in notes)
    # Under the paper's beta = 12 hold keeps idle nodes through valleys the energy model would not.
    assert energy_wh < paper_wh
