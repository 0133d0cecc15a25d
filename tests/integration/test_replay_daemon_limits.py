"""`run --replay` ends: a cap the queue cannot drain under is refused (up front, or at the slot
it becomes clear), and SIGTERM stops the replay after a slot, saying which."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main
from autoscaler.app.replay_drain import check_drain
from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.app.traces import SHIPPED
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.workload import read_swim

WORKLOAD_A = os.path.join(os.path.dirname(__file__), "..", "..", "autoscaler", "data", SHIPPED["A"].file_name)


def test_a_cap_the_queue_cannot_drain_under_is_refused_before_the_first_slot(tmp_path, capsys):
    store = tmp_path / "replay.db"
    assert main(["run", "--replay", "default", "--max-nodes", "1", "--store", str(store)]) == 2
    message = capsys.readouterr().err
    # Independently: each job holds a node for ceil(length / 300 s) slots, at least one; the jobs
    # submitted from slot r on must be released in the 580 - r slots left of the replay.
    jobs = trace_jobs(read_swim(WORKLOAD_A), 2, 300.0, 288 * 300.0)
    windows = {}
    for first in range(288):
        later = [job for job in jobs if job.submit_s // 300 >= first]
        windows[first] = (len(later), sum(max(1, math.ceil(job.length_s / 300.0)) for job in later))
    worst = max(windows, key=lambda first: windows[first][1] / (580 - first))
    count, work = windows[worst]
    assert (
        f"under --max-nodes 1 the queue cannot drain (before its first slot): {count:,} jobs submitted from slot {worst} on "
        f"hold {work:,} node-slots, more than 1 node(s) x the {580 - worst} slots from slot {worst} to 580"
    ) in message
    needed = max(math.ceil(work / (580 - first)) for first, (_, work) in windows.items())
    assert f"fewer than --max-nodes {needed} cannot release them all by then (a lower bound" in message
    with SqliteJobStore(store) as opened:
        assert opened.decisions() == []


def test_a_burst_the_cap_cannot_drain_is_refused_before_it_arrives(tmp_path, capsys):
    # 400 jobs of no size (one slot each) all submitted in slot 280 of the day: 400 node-slots
    # fit in the replay's 580 slots on one node, but not in the 300 left from slot 280.
    trace = tmp_path / "burst.tsv"
    trace.write_text("".join(f"j{i}\t{84_000 + i / 100:.2f}\t0\t0\t0\t0\n" for i in range(400)))
    assert main(["run", "--replay", str(trace), "--max-nodes", "1"]) == 2
    message = capsys.readouterr().err
    assert "(before its first slot): 400 jobs submitted from slot 280 on hold 400 node-slots, more than 1 node(s) x the 300 slots" in message
    assert "fewer than --max-nodes 2 cannot" in message
    assert main(["run", "--replay", str(trace), "--max-nodes", "2"]) == 0


def test_running_jobs_count_while_they_hold_their_nodes():
    # At slot 100, one node: a job released in slot 90 for 400 slots holds it 390 more slots, and
    # 200 one-slot jobs wait: 590 node-slots in the 480 slots to 580.
    held = Job("long", "long", "t", 90 * 300.0, 1e9, 400 * 300.0, StepSpec(), state="running", released_s=90 * 300.0)
    waiting = [Job(f"w{i}", "w", "t", 95 * 300.0, 1e9, 0.0, StepSpec()) for i in range(200)]
    with pytest.raises(ConfigError) as caught:
        check_drain(waiting, [held], 100, 580, 290, 1, 300.0, 7)
    assert (
        "(at slot 100): 200 jobs not yet released and 1 running hold 590 node-slots, more than 1 node(s) x the 480 slots "
        "from slot 100 to 580"
    ) in str(caught.value)
    assert "fewer than --max-nodes 2 cannot" in str(caught.value) and "at least --max-nodes 7" in str(caught.value)
    check_drain(waiting[:90], [held], 100, 580, 290, 1, 300.0, 7)  # 480 node-slots: they fit


def test_a_replay_that_falls_behind_stops_at_the_slot_it_becomes_clear(tmp_path, capsys):
    store = tmp_path / "replay.db"
    assert main(["run", "--replay", "default", "--max-nodes", "23", "--store", str(store)]) == 2
    message = capsys.readouterr().err
    stopped = re.search(r"under --max-nodes 23 the queue cannot drain \(at slot (\d+)\): [\d,]+ jobs not yet released", message)
    assert stopped, message[-600:]
    with SqliteJobStore(store) as opened:
        assert [d["slot"] for d in opened.decisions()] == list(range(int(stopped.group(1))))


def test_sigterm_stops_the_replay_after_a_slot_and_says_which(tmp_path):
    store = tmp_path / "replay.db"
    log = tmp_path / "stderr.log"
    with open(log, "w") as stderr:
        # 300 s slots at --speedup 300: one slot a second of sleep, so the replay is mid-way when stopped.
        process = subprocess.Popen(
            [sys.executable, "-m", "autoscaler", "run", "--replay", "default", "--speedup", "300", "--store", str(store)],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        deadline = time.monotonic() + 120
        while log.read_text().count('"event": "slot"') < 3:
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 128 + signal.SIGTERM
    with SqliteJobStore(store) as opened:
        last = opened.decisions()[-1]["slot"]
    text = log.read_text()
    assert f"run --replay: stopped by SIGTERM after slot {last} of 290 (the horizon); the slots decided are in {store}" in text
    assert json.loads([line for line in text.splitlines() if '"event": "slot"' in line][-1])["slot"] == last


def test_a_store_holding_a_daemons_jobs_is_refused_and_left_as_it_was(tmp_path, capsys):
    store = tmp_path / "prod.db"
    submit = ["submit", "--store", str(store), "--name", "nightly", "--tenant", "ads", "--deadline", "2h", "--length-s", "60"]
    assert main([*submit, "--command", "echo", "hi"]) == 0
    before = store.read_bytes()
    assert main(["run", "--replay", "default", "--store", str(store)]) == 2
    assert "holds 1 job and no replay's state" in capsys.readouterr().err
    assert store.read_bytes() == before


def test_a_deadline_longer_than_the_window_is_refused_as_replay_refuses_it(tmp_path, capsys):
    """Issue 20, finding 7: ``run --replay A -D 100000`` ran for hours towards a horizon of 100,288
    slots; ``replay`` refuses a D longer than its 288-slot window. The same rule, the same words."""
    store = tmp_path / "replay.db"
    assert main(["replay", "--policy", "hold", "--deadline", "289"]) == 2
    refused_by_replay = capsys.readouterr().err
    assert "longer than the window (288 slots); give a D of at most 288" in " ".join(refused_by_replay.split())
    assert main(["run", "--replay", "default", "--deadline", "100000", "--store", str(store)], ) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "--deadline: D = 100000 slots is longer than the window (288 slots); give a D of at most 288" in message
    assert not store.exists()  # refused before a store was made, let alone a slot decided
    # At the window's length itself both go on (a smaller trace keeps the daemon's run short).
    trace = tmp_path / "short.tsv"
    trace.write_text("".join(f"j{i}\t{i * 300 + 10}\t0\t0\t0\t0\n" for i in range(4)))
    assert main(["run", "--replay", str(trace), "--deadline", "288"]) == 0


def test_vfw_with_a_deadline_under_two_slots_names_d_and_where_it_came_from(tmp_path, capsys):
    """``policy = "vfw"`` in a config and ``-D 1`` said "got delta = 0", a delta nobody gave (it
    defaults to D // 2). VFW needs D >= 2, as ``replay --delta-deadline`` says; the message names
    the flag, or the config field, that set D."""
    config = tmp_path / "v.toml"
    config.write_text('policy = "vfw"\n')
    store = tmp_path / "replay.db"
    assert main(["run", "--replay", "A", "--dry-run", "--config", str(config), "-D", "1", "--store", str(store)]) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "--deadline: vfw needs D >= 2, got 1" in message and "delta = 0" not in message
    assert main(["run", "--replay", "A", "--dry-run", "--policy", "vfw", "-D", "0", "--store", str(store)]) == 2
    assert "--deadline: vfw needs D >= 2, got 0" in capsys.readouterr().err
    assert not store.exists()


def test_a_cap_beyond_the_steps_emr_runs_at_once_is_not_advised_for_one_node_jobs():
    # 1,000 one-slot jobs waiting at slot 575 with 5 slots left: 200 nodes at once are needed. EMR
    # runs at most 100 steps at once here, so the refusal says no --max-nodes above 100 helps.
    waiting = [Job(f"w{i}", "w", "t", 575 * 300.0, 1e9, 0.0, StepSpec()) for i in range(1000)]
    with pytest.raises(ConfigError) as caught:
        check_drain(waiting, [], 575, 580, 290, 150, 300.0, 7, step_limit=100)
    assert "fewer than --max-nodes 200 cannot release them all" in str(caught.value)
    assert "EMR runs at most 100 steps at once" in str(caught.value) and "no --max-nodes above 100 drains it" in str(caught.value)
    # Jobs of several nodes each use more nodes than steps: then the nodes asked for stand alone.
    with pytest.raises(ConfigError) as caught:
        check_drain(waiting, [], 575, 580, 290, 150, 300.0, 7, step_limit=None)
    assert "steps at once" not in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        check_drain(waiting, [], 575, 580, 290, 150, 300.0, 7, step_limit=256)  # 200 nodes are within 256 steps
    assert "steps at once" not in str(caught.value)
    # Draining needs 200, within 256 steps, but the deadlines would need 300 nodes at once: out of reach.
    with pytest.raises(ConfigError) as caught:
        check_drain(waiting, [], 575, 580, 290, 150, 300.0, 300, step_limit=256)
    assert "meeting every deadline takes at least --max-nodes 300; but EMR runs at most 256 steps at once" in str(caught.value)
    assert "so no --max-nodes meets every deadline" in str(caught.value)
    # On a twin whose steps at once bind, the cap named is --step-concurrency, itself at most 256 (EMR's
    # StepConcurrencyLevel): 4,000 jobs in 5 slots need 800 at once, which no --step-concurrency gives.
    waiting = [Job(f"w{i}", "w", "t", 575 * 300.0, 1e9, 0.0, StepSpec()) for i in range(4000)]
    with pytest.raises(ConfigError) as caught:
        check_drain(waiting, [], 575, 580, 290, 256, 300.0, 7, cap_flag="--step-concurrency", step_limit=256)
    assert "fewer than --step-concurrency 800 cannot release them all" in str(caught.value)
    assert "(--step-concurrency 256 is the most), so no --step-concurrency above 256 drains it" in str(caught.value)


def test_the_summary_names_the_nodes_planned_with_when_emrs_steps_bind(tmp_path, capsys):
    # 10 jobs of no size: --max-nodes 1,000 is planned with EMR's 256 steps at once, and the summary
    # says both, where it said "max nodes 1,000" beside a log of max_nodes = 256.
    trace = tmp_path / "few.tsv"
    trace.write_text("".join(f"j{i}\t{600 + i:.2f}\t0\t0\t0\t0\n" for i in range(10)))
    assert main(["run", "--replay", str(trace), "--max-nodes", "1000"]) == 0
    assert "(max nodes 1,000; planned with 256, the steps EMR runs at once)" in capsys.readouterr().out
    assert main(["run", "--replay", str(trace), "--max-nodes", "100"]) == 0
    out = capsys.readouterr().out
    assert "(max nodes 100)" in out and "the steps EMR runs at once" not in out


def test_jobs_left_out_or_cut_at_the_windows_end_are_said(tmp_path, capsys):
    # j0: 10 GB of map input (about 103 s by the size model) at 86,350 s runs past the day's end
    # (86,400 s) and is cut there; j1 at 90,000 s is after the window. Both were left unsaid.
    trace = tmp_path / "edges.tsv"
    small = "".join(f"s{i}\t{600 + 60 * i}\t0\t0\t0\t0\n" for i in range(20))
    trace.write_text(small + "j0\t86350\t0\t10000000000\t0\t0\nj1\t90000\t0\t0\t0\t0\n")
    assert main(["run", "--replay", str(trace), "--deadline", "0"]) == 0
    err = capsys.readouterr().err
    assert "note: 1 job submitted after the window's end left out; 1 job ran past the window's end and is cut there" in err


def test_with_days_the_jobs_after_the_first_day_are_said_left_out(tmp_path, capsys):
    # --days 2 repeats the first day; j1 at 90,000 s is in neither copy, and was dropped unsaid.
    trace = tmp_path / "days.tsv"
    trace.write_text("".join(f"s{i}\t{600 + 100 * i}\t0\t0\t0\t0\n" for i in range(5)) + "j1\t90000\t0\t0\t0\t0\n")
    assert main(["run", "--replay", str(trace), "--days", "2"]) == 0
    assert "note: 1 job submitted after the trace's first day left out (--days repeats that day)" in capsys.readouterr().err
