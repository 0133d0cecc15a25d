"""``run``'s own flags: ``--deadline`` takes slots or a duration, as ``compare`` and ``replay`` do (the
duration is turned into slots of the config's slot_s when the config is read), and without ``--config``
each mode says what it needs."""

from __future__ import annotations

import pytest

from autoscaler.app.cli import build_parser
from autoscaler.app.cli.jobs import _replay_request
from autoscaler.core.errors import ConfigError


@pytest.mark.parametrize(("given", "slot_s", "slots"), [("2h", 300.0, 24), ("24", 300.0, 24), ("90m", 600.0, 9), ("0", 300.0, 0)])
def test_a_duration_is_the_slots_it_spans(given, slot_s, slots):
    args = build_parser().parse_args(["run", "--replay", "A", "--deadline", given])
    assert _replay_request(args, slot_s).deadline_slots == slots


def test_no_deadline_leaves_the_configs():
    assert _replay_request(build_parser().parse_args(["run", "--replay", "A"]), 300.0).deadline_slots is None


def test_a_duration_that_is_not_whole_slots_is_refused_naming_the_slot():
    args = build_parser().parse_args(["run", "--replay", "A", "--deadline", "7m"])
    with pytest.raises(ConfigError, match=r"--deadline 7m is 1\.4 slots of 300 s; give a multiple of 5m"):
        _replay_request(args, 300.0)


def test_a_deadline_that_is_neither_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--replay", "A", "--deadline", "soon"])
    assert "expected a whole number of slots >= 0 like 12, or a duration" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "said"), [
    (["run", "--shadow"], "run --shadow: --config FILE is required: shadow mode watches the cluster of --config"),
    (["run"], "run: --config FILE is required (or --replay TRACE for a simulated run)"),
])  # fmt: skip
def test_run_without_a_config_says_what_each_mode_needs(argv, said, capsys):
    from autoscaler.app.cli import main

    assert main(argv) == 2
    assert said in capsys.readouterr().err
