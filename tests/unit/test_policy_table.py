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


DISPATCH_MODULES = ("autoscaler/app/daemon.py", "autoscaler/app/compose.py")
"""The daemon and the composition root: they choose by what the table says of a policy, never by its name.
(The replay's and the command line's vfw-delta and gcp-class rules still name their policy: the table
has no column for them.)"""


def policy_name_literals(path) -> list[str]:
    """Where ``path`` compares with, or defaults to, a string that is a policy's name (or its carbon
    variant's): ``x == "hold"``, ``x in ("gcp", ...)``, ``policy: str = "hold"``. Read from the source."""
    import ast

    names = set(POLICY_TABLE) | {p.carbon for p in POLICY_TABLE.values() if p.carbon}

    def named(node) -> bool:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(named(item) for item in node.elts)
        return isinstance(node, ast.Constant) and node.value in names

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Compare) and any(named(side) for side in (node.left, *node.comparators)):
            found.append(f"{path.name}:{node.lineno}")
        elif isinstance(node, ast.AnnAssign) and node.value is not None and named(node.value):
            found.append(f"{path.name}:{node.lineno}")
    return found


@pytest.mark.parametrize("module", DISPATCH_MODULES)
def test_the_daemon_and_the_composition_root_name_no_policy(module):
    from pathlib import Path

    assert policy_name_literals(Path(__file__).resolve().parents[2] / module) == []


def test_the_scan_finds_a_policy_name_compared_or_defaulted(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text('policy: str = "hold"\nok = name != "hold+carbon"\nok = name in ("x", "gcp-u")\nok = name == "lifo"\n')
    assert policy_name_literals(source) == ["sample.py:1", "sample.py:2", "sample.py:3"]
