"""Tenants sharing an overloaded cluster: Workload A through the daemon with too few nodes."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main
from autoscaler.core.controller import ControllerConfig, start_by_slot

from test_daemon import workload_a, write_swim


@pytest.mark.parametrize(
    "hours, max_nodes",
    [
        pytest.param(4, 20, id="first-4h-on-20-nodes"),  # Workload A wants up to 29 nodes in its first 4 hours
        pytest.param(24, 60, id="whole-day-on-60-nodes", marks=pytest.mark.slow),  # and up to 86 over the day
    ],
)
def test_an_overloaded_replay_reports_missed_deadlines_per_tenant(tmp_path, capsys, hours, max_nodes, job_slots_config):
    trace = "default"
    if hours < 24:
        trace = tmp_path / "trace.tsv"
        write_swim(trace, workload_a(hours * 12))
    store_path = tmp_path / "replay.db"
    argv = ["run", "--replay", str(trace), "--max-nodes", str(max_nodes), "--tenants", "3", "--store", str(store_path), "--config", str(job_slots_config)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "missed deadline" in printed and "tenant-3" in printed
    with SqliteJobStore(store_path) as store:
        jobs = store.all_jobs()
        decisions = store.decisions()
        state = store.load_state()
    config = ControllerConfig()  # the replay's slots: 300 s from Unix time 0
    assert all(j.released_s is not None for j in jobs)
    # Independently of the controller's count: a job missed its deadline when it was released
    # after its start-by slot.
    late_by_tenant = Counter(j.tenant for j in jobs if config.slot_of(j.released_s) > start_by_slot(j, config))
    reported = Counter()
    for decision in decisions:
        reported.update(decision["missed_by_tenant"])
    assert reported == late_by_tenant and sum(late_by_tenant.values()) > 0
    overloaded = [d for d in decisions if d["overloaded"]]
    assert overloaded and all(d["nodes"] == max_nodes for d in overloaded)
    assert state["tenants"] == ["tenant-1", "tenant-2", "tenant-3"]
    assert state["dominant_shares"] == sorted(state["dominant_shares"], reverse=True)  # earlier tenants never hold less

    assert main(["jobs", "--store", str(store_path), "--by-tenant", "--format", "json"]) == 0
    rows = {row["tenant"]: row for row in json.loads(capsys.readouterr().out)}
    assert {t: row["missed"] for t, row in rows.items()} == {t: late_by_tenant.get(t, 0) for t in rows}
    assert all(row["jobs"] == row["queued"] + row["released"] + row["running"] + row["done"] + row["failed"] for row in rows.values())
