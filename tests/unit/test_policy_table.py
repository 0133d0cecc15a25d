"""Every list of policies comes from the one policy table, so a policy added there is known everywhere."""

from __future__ import annotations

import typing

import pytest

from autoscaler.core import defaults
from autoscaler.core.controller import CONTROLLER_POLICIES, REASONS, UNIFORM_DEADLINE_POLICIES, ControllerConfig
from autoscaler.core.errors import ConfigError
from autoscaler.core.policies import POLICIES, POLICY_TABLE, UNIFORM


def test_the_lists_are_the_tables():
    assert POLICIES == ("follow", "hold", "offline", "gcp-u", "vfw", "gcp")
    assert set(POLICIES) == set(POLICY_TABLE) and set(UNIFORM) == set(POLICIES) - {"gcp"}
    assert CONTROLLER_POLICIES == ("hold", "gcp-u", "gcp", "vfw", "follow")
    assert CONTROLLER_POLICIES[0] == defaults.POLICY == ControllerConfig().policy
    assert UNIFORM_DEADLINE_POLICIES == ("hold", "gcp-u", "vfw")
    assert REASONS == (
        "idle", "follow", "deadlines", "held", "valley", "carbon", "no_signal", "due_jobs", "running", "min_nodes", "max_nodes", "overloaded",
    )  # fmt: skip
    for name in CONTROLLER_POLICIES:
        for rule in (POLICY_TABLE[name].online, POLICY_TABLE[name].carbon_online):
            if rule is not None:
                assert set(rule.reasons) <= set(REASONS), name


def test_the_config_and_the_command_line_take_the_tables_policies(capsys):
    from autoscaler.app.cli import main
    from autoscaler.app.config import Settings

    assert typing.get_args(Settings.model_fields["policy"].annotation) == CONTROLLER_POLICIES
    with pytest.raises(SystemExit) as exited:
        main(["run", "--policy", "lifo"])
    assert exited.value.code == 2
    assert f"choose from {', '.join(map(repr, CONTROLLER_POLICIES))}" in capsys.readouterr().err


def test_only_a_policy_with_a_carbon_variant_runs_carbon_aware():
    assert ControllerConfig(policy="hold", carbon=True).policy_name == "hold+carbon"
    with pytest.raises(ConfigError, match=r"only policy 'hold' has a carbon-aware variant \(hold\+carbon\), got policy 'gcp-u'"):
        ControllerConfig(policy="gcp-u", carbon=True)
