"""``explain --slot`` takes a slot number, a time with a timezone or a duration ago; a time is the slot
that holds it, by the configured slot_s (slots counted from the Unix epoch, as the daemon counts them)."""

from __future__ import annotations

import json
import math
import time
from datetime import datetime, timezone

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main
from autoscaler.core.decision import Decision

NINE_PM_S = datetime(2026, 12, 5, 21, 0, tzinfo=timezone.utc).timestamp()
NINE_PM_SLOT = 5_988_348
"""2026-12-05T21:00Z is 1,796,504,400 s after the epoch: slot 5,988,348 of 300 s, 2,994,174 of 600 s."""


def _decide(store_path, slots: list[int]) -> None:
    """One decision per slot, each with a node count of its own (slot mod 97), so that the slot shown is known."""
    with SqliteJobStore(store_path) as store:
        for slot in slots:
            decision = Decision(slot=slot, capacity=1.0, assigned=1.0, nodes=slot % 97, release=(), late=(), at_risk=0, queue_depth=0, running=0, rounding_node_slots=0.0)
            store.commit_slot(slot, {"last_slot": slot}, {}, decision.to_json())


def _explained(argv: list[str], capsys) -> tuple[dict, str]:
    assert main(["explain", *argv, "--format", "json"]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), " ".join(captured.err.split())


def test_explain_slot_at_a_time_is_the_slot_holding_it(tmp_path, capsys):
    assert NINE_PM_S == 1_796_504_400 == NINE_PM_SLOT * 300
    store = tmp_path / "jobs.db"
    _decide(store, [NINE_PM_SLOT - 1, NINE_PM_SLOT, NINE_PM_SLOT + 1])
    shown, note = _explained(["--store", str(store), "--slot", "2026-12-05T21:04:59Z"], capsys)
    assert (shown["slot"], shown["nodes"]) == (NINE_PM_SLOT, NINE_PM_SLOT % 97)
    assert "note: --slot 2026-12-05T21:04:59Z is in slot 5,988,348 (2026-12-05T21:00Z to 2026-12-05T21:05Z, slots of 5 min)" in note
    assert _explained(["--store", str(store), "--slot", "2026-12-05T21:05Z"], capsys)[0]["slot"] == NINE_PM_SLOT + 1
    # 21:59:59 in Paris (UTC+01:00 in December) is 20:59:59Z.
    assert _explained(["--store", str(store), "--slot", "2026-12-05T21:59:59+01:00"], capsys)[0]["slot"] == NINE_PM_SLOT - 1
    # A slot number still reads as a slot.
    assert _explained(["--store", str(store), "--slot", str(NINE_PM_SLOT + 1)], capsys)[0]["slot"] == NINE_PM_SLOT + 1


def test_explain_slot_at_a_time_uses_the_configs_slot_s(tmp_path, capsys):
    store = tmp_path / "jobs.db"
    config = tmp_path / "config.toml"
    config.write_text(f'store_path = "{store}"\nslot_s = 600\n[cluster]\nid = "j-TEST"\nregion = "us-east-1"\n')
    _decide(store, [NINE_PM_SLOT // 2 - 1, NINE_PM_SLOT // 2])
    shown, note = _explained(["--config", str(config), "--slot", "2026-12-05T21:09Z"], capsys)
    assert shown["slot"] == 2_994_174
    assert "is in slot 2,994,174 (2026-12-05T21:00Z to 2026-12-05T21:10Z, slots of 10 min)" in note


def test_explain_slot_a_duration_ago_counts_back_from_now(tmp_path, capsys):
    store = tmp_path / "jobs.db"
    now_slot = math.floor(time.time() / 300)
    _decide(store, list(range(now_slot - 14, now_slot + 2)))
    before_s = time.time()
    shown, note = _explained(["--store", str(store), "--slot", "10m"], capsys)
    after_s = time.time()
    # The slot holding the time 600 s before the command ran (it may have crossed a slot boundary).
    assert shown["slot"] in {math.floor((before_s - 600) / 300), math.floor((after_s - 600) / 300)}
    assert f"note: --slot 10m is in slot {shown['slot']:,} (" in note
    # The decisions file is read the same way.
    decisions = tmp_path / "decisions.jsonl"
    with SqliteJobStore(store, read_only=True) as read:
        decisions.write_text("".join(json.dumps(record) + "\n" for record in read.decisions()))
    assert _explained(["--decisions", str(decisions), "--slot", "1h"], capsys)[0]["slot"] in {now_slot - 12, now_slot - 11}


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "yesterday",
            "argument --slot: expected a slot number (a whole number >= 0), an ISO-8601 time with a timezone like "
            "'2026-12-05T21:00Z', or a duration ago like '10m', '2h' or '1d', got 'yesterday'",
        ),
        ("600.5", "argument --slot: expected a slot number (a whole number >= 0), an ISO-8601 time"),
        ("-10m", "argument --slot: '-10m' is negative; a duration here counts back from now: write '10m'"),
        ("2026-12-05T21:00", "argument --slot: the time '2026-12-05T21:00' has no timezone; expected one such as 'Z' or '+01:00' at its end"),
        ("-5", "argument --slot: expected a whole number >= 0, got '-5'"),
    ],
)
def test_explain_slot_refuses_a_value_naming_the_forms_it_takes(value, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "--store", str(tmp_path / "jobs.db"), "--slot", value])
    assert exit_.value.code == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_explain_slot_refuses_a_time_before_slot_0(tmp_path, capsys):
    store = tmp_path / "jobs.db"
    _decide(store, [0])
    assert main(["explain", "--store", str(store), "--slot", "1969-12-31T23:59Z"]) == 2
    assert "autoscaler: error: --slot: '1969-12-31T23:59Z' is 1969-12-31T23:59Z, before slot 0 (1970-01-01T00:00Z)" in capsys.readouterr().err
    # 10**400 days ago is past any float: refused the same way, not a traceback.
    assert main(["explain", "--store", str(store), "--slot", "1" + "0" * 400 + "d"]) == 2
    assert "before slot 0 (1970-01-01T00:00Z); expected a time after it" in capsys.readouterr().err
