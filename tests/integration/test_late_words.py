"""'Late' and 'missed deadline' are one thing, counted the same by every command."""

from __future__ import annotations

import json
import math
import re
import time

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main
from autoscaler.core.controller import ControllerConfig
from autoscaler.core.lateness import slots_late
from autoscaler.core.model import Job, StepSpec

TAU = 300.0  # the slots of a store without a config: 300 s from Unix time 0


def job(job_id: str, start_by_slot: int, state: str, released_slot: int | None = None, tenant: str = "ads") -> Job:
    """A job of length 100 s whose start-by slot is ``start_by_slot``, released 5 s into ``released_slot``."""
    return Job(
        job_id=job_id,
        name=job_id,
        tenant=tenant,
        submit_s=(start_by_slot - 20) * TAU,
        deadline_s=start_by_slot * TAU + 150.0,
        length_s=100.0,
        step=StepSpec(args=("true",)),
        state=state,
        released_s=None if released_slot is None else released_slot * TAU + 5.0,
        step_id=None if released_slot is None else f"s-{job_id}",
    )


def test_a_late_job_stays_late_in_every_state_and_every_listing_agrees(tmp_path, capsys):
    now = math.floor(time.time() / TAU)
    jobs = [
        job("late-done", now - 10, "done", released_slot=now - 8),  # released 2 slots after its start-by slot
        job("ontime-done", now - 10, "done", released_slot=now - 10),  # released in its start-by slot: in time
        job("late-running", now - 6, "running", released_slot=now - 5, tenant="search"),
        job("late-failed", now - 7, "failed", released_slot=now - 4, tenant="search"),
        job("queued-past", now - 3, "queued"),  # its start-by slot has passed: late before it is released
        job("queued-future", now + 5, "queued"),
        job("failed-unreleased", now - 4, "failed"),  # never released (EMR refused the step): failed, not late
    ]
    store_path = tmp_path / "jobs.db"
    with SqliteJobStore(store_path) as store:
        for j in jobs:
            store.submit(j)
    late_ids = {"late-done", "late-running", "late-failed", "queued-past"}

    assert main(["jobs", "--store", str(store_path), "--state", "late", "--format", "json"]) == 0
    listed = {row["job_id"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(listed) == late_ids
    assert {i: listed[i]["slots_late"] for i in ("late-done", "late-running", "late-failed")} == {"late-done": 2, "late-running": 1, "late-failed": 3}
    assert listed["queued-past"]["slots_late"] >= 3
    assert {i: row["state"] for i, row in listed.items()}["late-done"] == "done"  # its state is kept, lateness beside it

    assert main(["jobs", "--store", str(store_path), "--by-tenant", "--format", "json"]) == 0
    by_tenant = {row["tenant"]: row["missed"] for row in json.loads(capsys.readouterr().out)}
    assert by_tenant == {"ads": 2, "search": 2}

    assert main(["jobs", "--store", str(store_path)]) == 0
    table = capsys.readouterr().out
    assert "7 jobs, 4 late" in table and "late (missed its deadline): not released by the end of its start-by slot" in " ".join(table.split())


def test_a_queued_job_passed_over_in_its_start_by_slot_is_late_before_the_slot_ends():
    config = ControllerConfig()
    queued = job("q", 100, "queued")
    in_its_slot = 100 * TAU + 10.0
    assert slots_late(queued, config, in_its_slot, last_decided_slot=99) == 0  # the daemon may still release it now
    assert slots_late(queued, config, in_its_slot, last_decided_slot=100) == 1  # decided without it
    assert slots_late(queued, config, 103 * TAU, last_decided_slot=None) == 3


def test_the_overloaded_replay_and_jobs_count_the_same_late_jobs(tmp_path, capsys, job_slots_config):
    store_path = tmp_path / "replay.db"
    argv = ["run", "--replay", "default", "--max-nodes", "60", "--tenants", "3", "--store", str(store_path), "--config", str(job_slots_config)]
    assert main(argv) == 0
    printed = " ".join(capsys.readouterr().out.split())
    summary = int(re.search(r"jobs late \(missed their deadline\) │ ([\d,]+)", printed).group(1).replace(",", ""))
    per_tenant = [int(n.replace(",", "")) for n in re.findall(r"│ tenant-\d │ [\d,]+ │ ([\d,]+) │", printed)]
    with SqliteJobStore(store_path) as store:
        decisions = store.decisions()
    counted_as_they_happened = sum(sum(d["missed_by_tenant"].values()) for d in decisions)
    assert main(["jobs", "--store", str(store_path), "--state", "late", "--format", "json"]) == 0
    listed = len(json.loads(capsys.readouterr().out))
    # Hundreds late (372 since the jobs that can still be on time go before the overdue; 1,000+ before).
    assert summary == sum(per_tenant) == listed == counted_as_they_happened > 100

    # Rounding m_t up costs node-slots, never saves them; what the node cap took away is its own row.
    def row(label: str) -> str:
        return re.search(re.escape(label) + r" │ ([^│]+) │", printed).group(1).strip()

    whole = [math.ceil(d["capacity"] - 1e-9) for d in decisions]
    capacity = sum(d["capacity"] for d in decisions)
    rounded = row("m_t rounded up to whole nodes, node-slots")
    assert rounded == f"{sum(whole):,} (+{100 * (sum(whole) / capacity - 1):.2f} %)"
    held = sum(max(w - d["nodes"], 0) for w, d in zip(whole, decisions))
    raised = sum(max(d["nodes"] - w, 0) for w, d in zip(whole, decisions))
    assert row("fewer nodes than that: max nodes").startswith(f"-{held:,} in ") and held > 0
    assert row("more nodes than that: due jobs, min nodes").startswith(f"+{raised:,} in ")
    assert row("node-slots run") == f"{sum(d['nodes'] for d in decisions):,}" == f"{sum(whole) - held + raised:,}"
    assert "cost of rounding" not in printed
