"""The core's messages and notes name the fields it checks, marked (`days`); the command line names
them by the flags the user typed (--days). What a library caller reads names its own arguments."""

from __future__ import annotations

import ast
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest

import autoscaler.core
from autoscaler.app.cli import main
from autoscaler.app.cli.arguments import FIELD_FLAGS, in_flags, with_flagged_notes
from autoscaler.core.errors import ConfigError, InfeasibleError, TraceError
from autoscaler.core.model import CostParams, Trace, TraceJob
from autoscaler.core.recurring import repeat_days
from autoscaler.core.replay import parse_policy_list, replay
from autoscaler.core.signal_slots import _same_kind
from autoscaler.core.workload import workload_from_curve, workload_from_trace

LIBRARY_ONLY = {"counted"}
"""Fields a core message marks that no command sets (power.py's ``counted`` cells): the CLI never
prints them, so they need no flag."""

_MARK = re.compile(r"(?<![`:])`(\w+)`(?!`)")

HELP_TEXTS = {("compare.py", "FIGURE_UNITS"), ("intake.py", "SAME_DEADLINE_RULE")}
"""Help text the command line prints by design (compare's figure keys, submit's resubmission rule):
they describe the flags, so they may name them."""

CORE = Path(autoscaler.core.__file__).parent


def _trace(submit_times, shuffle_bytes=1000.0) -> Trace:
    return Trace("t.tsv", tuple(TraceJob(f"job{i}", t, 0.0, 1000.0, shuffle_bytes, 1000.0) for i, t in enumerate(submit_times)))


def test_the_cores_messages_name_the_fields_they_check():
    with pytest.raises(ConfigError, match=r"^`days`: expected a whole number of days in 1\.\.366, got 0$"):
        repeat_days(_trace([0.0]), 0, 100.0)
    with pytest.raises(ConfigError, match=r"^`policy`: unknown policy 'bogus'; expected one of: "):
        parse_policy_list("bogus")
    with pytest.raises(ConfigError, match=r"^`policy`: 'all' stands alone, not in a list; got 'all,vfw'$"):
        parse_policy_list("all,vfw")
    with pytest.raises(ConfigError, match=r"^`policy`: expected a policy name, a comma list or 'all'$"):
        parse_policy_list(" , ")
    with pytest.raises(ConfigError, match=r"^`forecast` f\.json: \$/kWh is a price; the signal is a carbon intensity$"):
        _same_kind("f.json", "$/kWh", "gCO2eq/kWh")
    with pytest.raises(ConfigError, match=r"^`forecast` f\.json: its unit is gCO2eq/kWh, the signal's is \$/kWh$"):
        _same_kind("f.json", "gCO2eq/kWh", "$/kWh")


def test_the_workloads_hints_name_its_parameters():
    with pytest.raises(TraceError, match=r"the first is at 20000 s: give a longer `window_slots` or times relative"):
        workload_from_trace(_trace([20_000.0, 20_100.0]), window_slots=10)
    # 200 days of 10 s slots is more than MAX_SLOTS (a million): longer slots and a window.
    with pytest.raises(TraceError, match=r"give a longer `slot_s` and a `window_slots` covering 17,277,000 s"):
        workload_from_trace(_trace([i * 443_000.0 for i in range(40)]), slot_s=10.0)
    with pytest.raises(TraceError, match=r"give `window_slots` 2796 \(slots of 300 s\)"):
        workload_from_trace(_trace([i * 21_500.0 for i in range(40)]))
    # One job of a TiB of shuffle: a one-reducer estimate far past the day.
    (note,) = workload_from_trace(_trace([0.0, 100.0], shuffle_bytes=2.0**40)).notes
    assert note.endswith("Check the sizes (bytes) and the length model's rates (`block_bytes`, `network_mb_s` ...)")


def test_the_smallest_cap_names_max_servers():
    load = workload_from_curve(np.array([0, 3, 9, 14, 2, 0, 0, 11, 6, 1], dtype=float))
    with pytest.raises(InfeasibleError) as caught:
        replay(load, ["offline"], 3, CostParams(max_servers=1.0))
    assert re.search(r"the smallest cap that works for offline is M = [\d.]+ \(`max_servers`\)", str(caught.value))
    with pytest.raises(InfeasibleError) as caught:
        replay(load, ["offline", "vfw"], 3, CostParams(max_servers=1.0))
    assert re.search(r"the smallest cap that works \(`max_servers`\) is M = [\d.]+ for all of them: offline ", str(caught.value))


def test_in_flags_names_each_marked_field_by_its_flag_and_nothing_else():
    text = "`start_s`: give a later `start_s`; start and `window_slots` of `counted` and ``slot_s``"
    assert in_flags(text) == "--start: give a later --start; start and --window of `counted` and ``slot_s``"
    assert in_flags("Check the length model's rates (`block_bytes`, `network_mb_s` ...)") == (
        "Check the length model's rates (autoscaler replay's --block-mb, --network-mb-s ...)"
    )
    workload = workload_from_trace(_trace([0.0, 100.0], shuffle_bytes=2.0**40))
    (note,) = with_flagged_notes(workload).notes
    assert note.endswith("(autoscaler replay's --block-mb, --network-mb-s ...)") and "`" not in note


def test_every_field_the_core_marks_has_a_flag():
    # A mark without a flag would reach a CLI user in backticks.
    marked = set()
    for path in CORE.rglob("*.py"):
        with tokenize.open(path) as source:
            for token in tokenize.generate_tokens(source.readline):
                if token.type == tokenize.STRING:
                    marked.update(_MARK.findall(token.string))
    assert {"days", "policy", "max_servers", "start_s", "forecast", "window_slots", "slot_s"} <= marked
    assert marked - LIBRARY_ONLY <= set(FIELD_FLAGS)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["replay", "--policy", "bogus"], "autoscaler: error: --policy: unknown policy 'bogus'; expected one of: "),
        (["replay", "--policy", "all,vfw"], "autoscaler: error: --policy: 'all' stands alone, not in a list; got 'all,vfw'\n"),
        (["run", "--replay", "A", "--dry-run", "--days", "1000"], "autoscaler: error: --days: expected a whole number of days in 1..366, got 1000\n"),
    ],
)
def test_the_command_line_names_the_flags(argv, expected, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected) and "`" not in err


def test_a_short_window_names_the_window_flag(tmp_path, capsys):
    path = tmp_path / "late.tsv"
    path.write_text("".join(f"job{i}\t{20_000 + 100 * i}\t0\t1000\t1000\t1000\n" for i in range(3)))
    assert main(["replay", "--trace", str(path), "--window", "10"]) == 2
    err = capsys.readouterr().err
    assert "the first is at 20000 s: give a longer --window or times relative to the trace's start" in err and "`" not in err


def test_run_replay_which_has_no_window_flag_says_what_its_window_is(tmp_path, capsys):
    # run --replay replays the trace's first day (--days repeats it): advising --window, which it has
    # not, or more --days, which repeat that empty day, would not help.
    path = tmp_path / "late.tsv"
    path.write_text("".join(f"job{i}\t{90_000 + 100 * i}\t0\t1000\t1000\t1000\n" for i in range(3)))
    assert main(["run", "--replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "the first is at 90000 s: give a longer window (run --replay replays the trace's first day; --days repeats that day)" in err
    assert "--window" not in err
    assert main(["run", "--replay", str(path), "--days", "2"]) == 2
    assert "no job of the trace is left to replay" in capsys.readouterr().err


def _flags_named(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each string in ``path`` that names a flag (--window), docstrings and the help texts aside."""
    tree = ast.parse(path.read_text())
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))  # a docstring, of a module, class, function or attribute
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and (path.name, t.id) in HELP_TEXTS for t in node.targets):
            skipped.update(id(inner) for inner in ast.walk(node.value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped and re.search(r"(?<![\w-])--[a-z]", node.value)
    ]


def test_no_core_message_names_a_flag():
    named = {str(path.relative_to(CORE)): found for path in sorted(CORE.rglob("*.py")) if (found := _flags_named(path))}
    assert named == {}


def test_run_is_told_to_replay_a_longer_trace_with_the_commands_that_take_a_window(tmp_path):
    # run --replay has no --window; the dropped-lines refusal names replay's and compare's, and its counts
    # are singular where they are one.
    from autoscaler.core.errors import TraceError
    from autoscaler.core.workload import read_swim, workload_from_trace

    trace = tmp_path / "exact.tsv"
    trace.write_text("j0\t100\t0\t0\t0\t0\nj1\t86400\t0\t0\t0\t0\nj2\t50\t0\t0\t0\t0\n")
    with pytest.raises(TraceError) as refused:
        workload_from_trace(read_swim(trace), slot_s=300.0)
    said = str(refused.value)
    assert "1 job is submitted after the window's end" in said and "1 line is out of submit-time order" in said
    assert "replay or compare it with --window 289 (run --replay replays the trace's first day; --days repeats that day)." in in_flags(said, "run")
    assert "give --window 289 (slots of 300 s) to replay all of it." in in_flags(said, "replay")
