"""Jobs of 1 to 32 nodes through the daemon's slot loop on the cluster twin (issue 24): none released
after its start-by slot while max_nodes allows, whole node counts, a wide job that waits said in the
slot's why, and the bill's utilisation equal to the jobs' node time summed by hand."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from autoscaler.app.cli import main
from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.core.model import MIB
from autoscaler.core.workload import estimate_length_s, read_swim

SLOT_S = 300.0
D = 2
MAX_NODES = 64
GROUPS = [(0, [32, 16, 8, 1, 1]), (310, [24, 12, 4, 2, 1, 3]), (650, [20, 6, 1])]
"""(seconds after a group's start, the widths submitted then): 30 to 63 nodes at a time, 130 in 650 s."""


def wide_trace(path: Path, rounds: int = 40) -> dict[str, tuple[float, int]]:
    """A SWIM trace whose job of w nodes reads w HDFS blocks (w mappers, one reducer): with one
    container per node, w nodes. Returns {job id: (submit_s, w)}."""
    jobs: dict[str, tuple[float, int]] = {}
    lines = []
    for k in range(rounds):
        for offset_s, widths in GROUPS:
            for w in widths:
                job_id, submit_s = f"job{len(jobs)}", k * 2000 + offset_s
                jobs[job_id] = (float(submit_s), w)
                lines.append(f"{job_id}\t{submit_s}\t0\t{w * 128 * MIB}\t{MIB}\t{MIB}")
    path.write_text("\n".join(lines) + "\n")
    return jobs


def bill_row(out: str, label: str) -> str:
    match = re.search(rf"{re.escape(label)}\s*│\s*([^│]+?)\s*│", out)
    assert match, f"no row {label!r} in:\n{out}"
    return match.group(1)


def test_jobs_of_1_to_32_nodes_are_released_by_their_start_by_slot_on_whole_nodes_and_the_utilisation_adds_up(tmp_path, capsys):
    trace_path = tmp_path / "wide.tsv"
    by_hand = wide_trace(trace_path)
    decisions_path = tmp_path / "decisions.jsonl"
    code = main([
        "run", "--replay", str(trace_path), "--cluster", "twin", "--policy", "hold", "--deadline", str(D),
        "--max-nodes", str(MAX_NODES), "--containers-per-node", "1", "--decisions-out", str(decisions_path),
    ])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    jobs = trace_jobs(read_swim(str(trace_path)), D, SLOT_S, 288 * SLOT_S, containers_per_node=1)
    assert {job.job_id: job.nodes for job in jobs} == {job_id: w for job_id, (_, w) in by_hand.items()}
    decisions = [json.loads(line) for line in decisions_path.read_text().splitlines()]
    assert not any(d["overloaded"] for d in decisions)  # the cap allows every slot
    released_in = {job_id: d["slot"] for d in decisions for job_id in d["release"]}
    assert set(released_in) == set(by_hand)
    for job_id, (submit_s, _) in by_hand.items():
        # deadline = submit + length + D slots, so the start-by slot is the submit slot + D
        assert released_in[job_id] <= math.floor(submit_s / SLOT_S) + D, job_id
    assert bill_row(out, "jobs late (missed their deadline)") == "0"
    for d in decisions:
        assert isinstance(d["nodes"], int) and 0 <= d["nodes"] <= MAX_NODES
        # a wide job released takes its w whole nodes in its slot
        assert d["nodes"] >= sum(by_hand[j][1] for j in d["release"] if by_hand[j][1] > 1)
    waits = [d["why"] for d in decisions if "waits for its" in d["why"]]
    assert waits, "no slot said a wide job waited for its nodes"
    named = re.search(r"job '(job\d+)' waits for its (\d+) nodes \(w\)", waits[0])
    assert named and by_hand[named.group(1)][1] == int(named.group(2)) > 1
    # No length error and no drain timing out: the busy node time is sum w x the §V-A length.
    lengths = estimate_length_s(
        [w * 128.0 * MIB for _, w in by_hand.values()], [float(MIB)] * len(by_hand), [float(MIB)] * len(by_hand)
    )  # fmt: skip
    busy_hours = sum(w * float(length) for (_, w), length in zip(by_hand.values(), lengths)) / 3600
    assert bill_row(out, "jobs killed at the decommission timeout (runs), run again (jobs)") == "0, 0"
    assert float(bill_row(out, "booting, idle, busy node-hours").split(", ")[2]) == pytest.approx(busy_hours, abs=0.006)
    billed_hours = float(bill_row(out, "node-hours billed (per second, 60 s minimum)").replace(",", ""))
    utilisation = float(bill_row(out, "utilisation (busy node-hours / billed)").rstrip(" %"))
    assert utilisation == pytest.approx(100 * busy_hours / billed_hours, abs=0.06)
    assert int(bill_row(out, "peak nodes, scale events").split(", ")[0]) <= MAX_NODES


def test_a_trace_job_wider_than_max_nodes_is_refused_naming_it_before_any_work(tmp_path, capsys):
    trace_path = tmp_path / "wide.tsv"
    wide_trace(trace_path, rounds=1)
    store = tmp_path / "replay.db"
    assert main(["run", "--replay", str(trace_path), "--store", str(store), "--max-nodes", "16", "--containers-per-node", "1"]) == 2
    err = capsys.readouterr().err
    assert "job 'job0' needs 32 nodes at once (3 jobs of the trace above --max-nodes 16)" in err
    assert not store.exists()
