"""`autoscaler explain` on inputs that used to break it: a slot number past any integer the store
holds, a decisions file far larger than one slot's line, a line torn by a daemon killed mid-append,
and a store a dry run never wrote to.

Workload A's first two hours through the daemon (a SWIM file of its own), in process.
"""

from __future__ import annotations

import pytest

from autoscaler.app.cli import main

from test_daemon import workload_a, write_swim

SLOTS = 24


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """(store path, decisions file) of one run --replay over two hours of Workload A."""
    folder = tmp_path_factory.mktemp("replayed")
    trace = folder / "a-2h.tsv"
    write_swim(trace, workload_a(SLOTS))
    store, decisions = folder / "replay.db", folder / "decisions.jsonl"
    assert main(["run", "--replay", str(trace), "--store", str(store), "--decisions-out", str(decisions)]) == 0
    return store, decisions


def test_a_slot_number_past_what_sqlite_holds_is_not_recorded_rather_than_a_traceback(replayed, capsys):
    store, decisions = replayed
    capsys.readouterr()
    huge = "99999999999999999999999"  # > 2**63 - 1, the largest SQLite INTEGER
    assert main(["explain", "--store", str(store), "--slot", huge]) == 2
    error = capsys.readouterr().err
    assert "slot 99,999,999,999,999,999,999,999: no decision recorded for it" in error and "Traceback" not in error
    assert main(["explain", "--decisions", str(decisions), "--slot", huge]) == 2
    assert "no decision recorded for it" in capsys.readouterr().err


def test_a_slot_number_past_what_a_float_holds_is_refused_by_the_parser(replayed, capsys):
    store, _ = replayed
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "--store", str(store), "--slot", "1" + "0" * 400])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "argument --slot: expected a whole number >= 0" in error and "Traceback" not in error
    # The same check behind every whole-number flag: run --tenants reads it too.
    with pytest.raises(SystemExit):
        main(["run", "--replay", "A", "--tenants", "9" * 400])
    assert "argument --tenants: expected a whole number >= 1" in capsys.readouterr().err
