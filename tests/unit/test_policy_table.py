"""Every list of policies comes from the one policy table, so a policy added there is known everywhere."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

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


ROOT = Path(__file__).resolve().parents[2]

NOT_SCANNED = ("autoscaler/app/replay_daemon.py",)
"""Modules the scan leaves out: ``run --replay`` still names vfw and hold in its comparison with the replay."""


def policy_name_literals(path: Path, root: Path) -> list[str]:
    """Where ``path`` compares with, or defaults to, a string that is a policy's name (or its carbon
    variant's): ``x == "hold"``, ``x in ("gcp", ...)``, ``policy: str = "hold"``, ``def f(policy="gcp")``,
    ``case "vfw":``; as "file:line" relative to ``root``, in line order. Read from the source."""
    names = set(POLICY_TABLE) | {p.carbon for p in POLICY_TABLE.values() if p.carbon}

    def named(node) -> bool:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(named(item) for item in node.elts)
        return isinstance(node, ast.Constant) and node.value in names

    lines = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Compare) and any(named(side) for side in (node.left, *node.comparators)):
            lines.add(node.lineno)
        elif isinstance(node, ast.AnnAssign) and node.value is not None and named(node.value):
            lines.add(node.lineno)
        elif isinstance(node, ast.arguments):
            lines.update(default.lineno for default in (*node.defaults, *node.kw_defaults) if default is not None and named(default))
        elif isinstance(node, ast.MatchValue) and named(node.value):
            lines.add(node.lineno)
    where = path.relative_to(root).as_posix()
    return [f"{where}:{line}" for line in sorted(lines)]


def test_no_module_compares_a_policy_name():
    """Code chooses by what the table says of a policy (a column such as ``needs_delta`` or
    ``class_deadlines``), and names one policy by its constant (``BASELINE``, ``vfw.NAME``,
    ``defaults.POLICY``), never by a spelled name: a policy added or renamed in the table is then
    handled everywhere."""
    modules = [path for path in sorted((ROOT / "autoscaler").rglob("*.py")) if path.relative_to(ROOT).as_posix() not in NOT_SCANNED]
    assert len(modules) > 50
    found = [where for path in modules for where in policy_name_literals(path, ROOT)]
    assert found == []


def test_the_scan_finds_a_policy_name_compared_or_defaulted(tmp_path):
    source = tmp_path / "pkg" / "sample.py"
    source.parent.mkdir()
    source.write_text(
        'policy: str = "hold"\n'
        'ok = name != "hold+carbon"\n'
        'ok = name in ("x", "gcp-u")\n'
        'ok = name == "lifo"\n'
        'def plan(load, policy="gcp", *, name="offline", kind="uniform"):\n'
        '    match name:\n'
        '        case "vfw":\n'
        '            pass\n'
        'ok = "follow" if x == "follow" else None\n'
    )
    assert policy_name_literals(source, tmp_path) == ["pkg/sample.py:1", "pkg/sample.py:2", "pkg/sample.py:3", "pkg/sample.py:5", "pkg/sample.py:7", "pkg/sample.py:9"]
