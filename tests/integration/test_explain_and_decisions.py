"""Every decision says why, `autoscaler explain` reads it back, and `run --replay` keeps no store it was not asked to.

Workload A's first two hours through the daemon (a SWIM file of its own), in process.
"""

from __future__ import annotations

import json
import tempfile

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main
from autoscaler.core.controller import REASONS, Decision, start_by_slot

from test_daemon import TAU, workload_a, write_swim

SLOTS = 24


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "a-2h.tsv"
    write_swim(path, workload_a(SLOTS))
    return path


def test_decisions_out_has_a_line_per_slot_with_its_reason_and_the_store_the_same(trace, tmp_path):
    out = tmp_path / "decisions.jsonl"
    store_path = tmp_path / "replay.db"
    assert main(["run", "--replay", str(trace), "--store", str(store_path), "--decisions-out", str(out), "--max-nodes", "3"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    with SqliteJobStore(store_path) as store:
        stored = [Decision.from_json(d) for d in store.decisions()]
    assert [line["slot"] for line in lines] == [d.slot for d in stored] == list(range(len(lines)))
    for line, decision in zip(lines, stored):
        assert (line["m_t"], line["nodes"], line["released"], line["reason"]) == (
            decision.capacity, decision.nodes, list(decision.release), decision.reason
        )
        assert line["reason"] in REASONS and line["why"]
    # Three nodes are too few for Workload A's second hour (it packs onto six): some slot is capped and says so.
    capped = [line for line in lines if line["reason"] in ("max_nodes", "overloaded")]
    assert capped and all("3" in line["why"] for line in capped)
    assert all(line["nodes"] <= 3 for line in lines)


def test_explain_prints_a_past_slots_decision_in_words(trace, tmp_path, capsys):
    store_path = tmp_path / "replay.db"
    assert main(["run", "--replay", str(trace), "--store", str(store_path)]) == 0
    capsys.readouterr()
    with SqliteJobStore(store_path) as store:
        decisions = [Decision.from_json(d) for d in store.decisions()]
        jobs = {job.job_id: job for job in store.all_jobs()}
    # A slot whose nodes were raised for due jobs names the first of them, due in that slot: its start-by
    # slot is that slot or one of the next ones within the margin.
    raised = next((d for d in decisions if d.reason == "due_jobs"), None)
    chosen = raised or decisions[5]
    assert main(["explain", "--store", str(store_path), "--slot", str(chosen.slot)]) == 0
    text = capsys.readouterr().out
    assert f"slot {chosen.slot}:" in text and chosen.why in text
    assert f"released {len(chosen.release):,} job" in text
    if raised is not None:
        first = raised.why.split("'")[1]
        assert first in raised.release
        config = _config()
        # Under node-seconds with the default 330 s boot a job is due ceil(330/300) + 1 = 3 slots ahead.
        assert config.due_margin_slots == 3
        assert raised.slot <= start_by_slot(jobs[first], config) <= raised.slot + config.due_margin_slots
    # The last slot by default, and JSON that reads back as the same decision.
    assert main(["explain", "--store", str(store_path), "--format", "json"]) == 0
    assert Decision.from_json(json.loads(capsys.readouterr().out)) == decisions[-1]


def _config():
    from autoscaler.core.controller import ControllerConfig

    return ControllerConfig(slot_s=TAU, provision_s=330.0, work_model="node-seconds")  # the settings' defaults


def test_explain_names_what_it_cannot_find(trace, tmp_path, capsys):
    store_path = tmp_path / "replay.db"
    assert main(["run", "--replay", str(trace), "--store", str(store_path), "--decisions-out", str(tmp_path / "d.jsonl")]) == 0
    capsys.readouterr()
    assert main(["explain", "--store", str(store_path), "--slot", "99999"]) == 2
    assert "slot 99,999: no decision recorded" in capsys.readouterr().err
    assert main(["explain", "--decisions", str(tmp_path / "d.jsonl"), "--slot", "3"]) == 0
    assert "slot 3:" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"slot": 0, "capacity": 1, "nodes": 1}\nnot json\n')
    assert main(["explain", "--decisions", str(bad)]) == 2
    assert f"{bad}:2: not a JSON line" in capsys.readouterr().err


def test_run_replay_removes_its_temporary_store_unless_asked_to_keep_it(trace, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    assert main(["run", "--replay", str(trace)]) == 0
    assert list(folder.iterdir()) == []
    assert "store:" not in capsys.readouterr().err
    assert main(["run", "--replay", str(trace), "--keep-store"]) == 0
    kept = list(folder.glob("autoscaler-replay-*/replay.db"))
    assert len(kept) == 1 and f"store: {kept[0]}" in capsys.readouterr().err
    # A dry replay keeps no store at all, and decides the same slots.
    assert main(["run", "--replay", str(trace), "--dry-run", "--decisions-out", str(tmp_path / "dry.jsonl")]) == 0
    assert len(list(folder.iterdir())) == 1
    with SqliteJobStore(kept[0]) as store:
        kept_decisions = [(d["slot"], d["nodes"], d["release"]) for d in store.decisions()]
    dry = [json.loads(line) for line in (tmp_path / "dry.jsonl").read_text().splitlines()]
    assert [(d["slot"], d["nodes"], d["release"]) for d in dry] == kept_decisions


def test_run_replay_reads_autoscaler_variables_without_a_config(trace, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AUTOSCALER_CLUSTER__MAX_NODES", "5")
    monkeypatch.setenv("AUTOSCALER_POLICY", "gcp-u")
    assert main(["run", "--replay", str(trace), "--decisions-out", str(tmp_path / "d.jsonl")]) == 0
    lines = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert max(line["nodes"] for line in lines) == 5
    assert "gcp-u" in capsys.readouterr().out
    monkeypatch.setenv("AUTOSCALER_POLCY", "vfw")
    assert main(["run", "--replay", str(trace)]) == 2
    assert "did you mean AUTOSCALER_POLICY" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"\xff\xfe not text", "not a text file"),
        (b'{"slot": "x", "capacity": 1, "nodes": 1}\n', ":1: expected one JSON object per line"),
        (b'{"slot": null}\n', ":1: expected one JSON object per line"),
        (b'{"slot": -3, "capacity": 1, "nodes": 1}\n', ":1: expected one JSON object per line"),
        (b'{"slot": 1e400}\n', ":1: expected one JSON object per line"),
        (b'{"slot": 0, "capacity": "lots", "nodes": 1}\n', "'capacity' must be"),
    ],
)
def test_explain_refuses_a_bad_decisions_file_in_one_line(tmp_path, capsys, content, expected):
    path = tmp_path / "d.jsonl"
    path.write_bytes(content)
    assert main(["explain", "--decisions", str(path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("autoscaler: error: ") and expected in error and "Traceback" not in error


def test_decisions_out_that_cannot_be_written_is_refused_before_any_slot(trace, tmp_path, capsys):
    assert main(["run", "--replay", str(trace), "--decisions-out", str(tmp_path)]) == 2
    assert f"{tmp_path}: --decisions-out is a folder" in capsys.readouterr().err
    read_only = tmp_path / "ro.jsonl"
    read_only.write_text("")
    read_only.chmod(0o444)
    import os

    if os.access(read_only, os.W_OK):  # root writes anyway
        pytest.skip("running as root: a read-only file is still writable")
    assert main(["run", "--replay", str(trace), "--decisions-out", str(read_only)]) == 2
    assert "cannot write --decisions-out" in capsys.readouterr().err


def test_a_decision_file_that_fails_mid_run_loses_the_line_not_the_slot(tmp_path):
    from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
    from autoscaler.app.daemon import SlotRunner
    from autoscaler.core.controller import ControllerConfig
    from autoscaler.core.model import Job, StepSpec

    def full_disk(record: dict) -> None:
        raise OSError(28, "No space left on device")

    clock = SimulatedClock(0.0)
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        store.submit(Job("j", "n", "t", 0.0, 900.0, 300.0, StepSpec(args=("true",))))
        runner = SlotRunner(config=ControllerConfig(slot_s=TAU), store=store, cluster=FakeCluster(clock), clock=clock, on_decision=full_disk)
        decision = runner.run_slot()
        assert decision is not None and store.last_slot() == 0


def test_run_replay_refuses_a_daemons_store(trace, tmp_path, capsys):
    from autoscaler.core.model import Job, StepSpec

    path = tmp_path / "daemon.db"
    with SqliteJobStore(path) as store:
        store.submit(Job("nightly", "n", "t", 0.0, 900.0, 300.0, StepSpec(args=("true",))))
        store.commit_slot(0, {"last_slot": 0}, {}, {"slot": 0, "capacity": 1.0, "nodes": 1})
    before = path.read_bytes()
    assert main(["run", "--replay", str(trace), "--store", str(path)]) == 2
    assert "a daemon's store?" in capsys.readouterr().err
    assert path.read_bytes() == before
