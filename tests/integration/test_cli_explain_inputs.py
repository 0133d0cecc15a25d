"""`autoscaler explain` on inputs that used to break it: a slot number past any integer the store
holds, a decisions file far larger than one slot's line, a line torn by a daemon killed mid-append,
and a store a dry run never wrote to.

Workload A's first two hours through the daemon (a SWIM file of its own), in process.
"""

from __future__ import annotations

import json
import tracemalloc

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


def _lines(decisions) -> list[dict]:
    return [json.loads(line) for line in decisions.read_text().splitlines()]


def test_explain_reads_a_large_decisions_file_in_bounded_memory(replayed, tmp_path, capsys):
    _, decisions = replayed
    lines = _lines(decisions)
    big = tmp_path / "big.jsonl"
    with big.open("w") as file:
        for slot in range(16_000):
            file.write(json.dumps({**lines[slot % len(lines)], "slot": slot}) + "\n")
    size = big.stat().st_size
    assert size > 8_000_000
    # Once, so that the modules explain imports are not counted below.
    assert main(["explain", "--decisions", str(decisions), "--slot", "3"]) == 0
    capsys.readouterr()
    tracemalloc.start()
    try:
        assert main(["explain", "--decisions", str(big), "--slot", "12345", "--format", "json"]) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    shown = json.loads(capsys.readouterr().out)
    assert shown["slot"] == 12345 and shown["nodes"] == lines[12345 % len(lines)]["nodes"]
    # Reading the whole file would hold it at least once (and its parsed lines several times over).
    assert peak < size / 8, f"peak {peak:,} bytes for a {size:,}-byte file"


def test_a_torn_last_line_is_skipped_with_a_note(replayed, tmp_path, capsys):
    _, decisions = replayed
    text = decisions.read_text()
    complete = text.splitlines()
    torn = tmp_path / "torn.jsonl"
    # A daemon killed mid-append leaves the start of its last line, with no newline.
    torn.write_text(text + complete[-1][: len(complete[-1]) // 2].replace(f'"slot": {SLOTS - 1}', f'"slot": {SLOTS}'))
    capsys.readouterr()
    assert main(["explain", "--decisions", str(torn)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"slot {json.loads(complete[-1])['slot']}:")
    assert f"{torn}:{len(complete) + 1}:" in err and "cut short" in err and "skipped" in err
    assert main(["explain", "--decisions", str(torn), "--slot", "3"]) == 0
    assert capsys.readouterr().out.startswith("slot 3:")
    # The same text followed by a newline was written whole: it is a bad line, not a torn one.
    torn.write_text(torn.read_text() + "\n")
    assert main(["explain", "--decisions", str(torn)]) == 2
    assert f"{torn}:{len(complete) + 1}: not a JSON line" in capsys.readouterr().err


def test_explain_after_a_dry_run_says_a_dry_run_records_nothing(tmp_path, capsys):
    store = tmp_path / "jobs.db"
    assert main(["submit", "--store", str(store), "--name", "n", "--tenant", "t", "--deadline", "2h", "--length-s", "60", "--command", "true"]) == 0
    capsys.readouterr()
    assert main(["explain", "--store", str(store)]) == 2
    error = capsys.readouterr().err
    assert "no slot decided yet" in error and "--dry-run" in error and "--decisions-out" in error


def test_a_run_appending_to_a_torn_file_ends_the_torn_line_first(replayed, tmp_path, capsys):
    _, decisions = replayed
    text = decisions.read_text()
    complete = text.splitlines()
    trace = decisions.parent / "a-2h.tsv"
    glued = tmp_path / "glued.jsonl"
    glued.write_bytes(text.encode()[:-150])  # as `head -c -150`: the last line loses its end
    torn_number = len(complete)
    assert main(["run", "--replay", str(trace), "--dry-run", "--decisions-out", str(glued)]) == 0
    lines = glued.read_text().splitlines()
    # The torn line is a line of its own; the appending run's lines follow it whole.
    assert lines[torn_number - 1] == complete[-1][: len(complete[-1]) - 149]
    # The same replay again: as many whole lines as the first run wrote.
    assert len(lines) == 2 * len(complete) and all(json.loads(line)["slot"] >= 0 for line in lines[torn_number:])
    capsys.readouterr()
    assert main(["explain", "--decisions", str(glued), "--slot", "5"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("slot 5:")
    assert f"{glued}:{torn_number}:" in err and "cut short" in err and "skipped" in err
    assert main(["explain", "--decisions", str(glued), "--slot", str(SLOTS - 1)]) == 0
    assert capsys.readouterr().out.startswith(f"slot {SLOTS - 1}:")


def test_a_bad_line_in_the_middle_that_is_no_torn_object_is_still_an_error(replayed, tmp_path, capsys):
    _, decisions = replayed
    complete = decisions.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([complete[0], "not json at all", *complete[1:]]) + "\n")
    capsys.readouterr()
    assert main(["explain", "--decisions", str(bad), "--slot", "5"]) == 2
    assert f"{bad}:2: not a JSON line" in capsys.readouterr().err
