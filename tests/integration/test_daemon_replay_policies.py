"""`autoscaler run --replay` drives the daemon's slot loop with each online policy and checks its m_t
against `autoscaler replay` (under the paper's work model, job-slots, which replay plans in); every
job is released by its start-by slot."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main
from autoscaler.core.controller import ControllerConfig, Decision, start_by_slot


@pytest.mark.parametrize("policy", ["hold", "gcp-u", "vfw", "follow"])
def test_daemon_replay_gives_replays_capacity_and_meets_every_start_by_slot(policy, tmp_path, capsys, job_slots_config):
    store_path = tmp_path / "replay.db"
    config_file = job_slots_config
    # Exit 0 means the daemon's m_t equalled autoscaler replay's in every slot (within 1e-6).
    assert main(["run", "--replay", "default", "--policy", policy, "--deadline", "3", "--store", str(store_path), "--config", str(config_file)]) == 0
    assert "max |m_t - autoscaler replay's m_t|" in capsys.readouterr().out
    assert main(["replay", "--policy", policy, "--deadline", "3", "--format", "json"]) == 0
    replayed = json.loads(capsys.readouterr().out)["policies"][policy]
    with SqliteJobStore(store_path) as store:
        jobs = store.all_jobs()
        decisions = store.decisions()
    n = len(replayed["m"]) - (4 if policy == "vfw" else 0)  # vfw's last D+1 slots differ by design
    np.testing.assert_allclose([d["capacity"] for d in decisions][:n], replayed["m"][:n], atol=1e-6)
    if policy == "hold":
        np.testing.assert_allclose([Decision.from_json(d).assigned for d in decisions][: len(replayed["x"])], replayed["x"], atol=1e-6)
    config = ControllerConfig(policy=policy, deadline_slots=3)
    assert jobs and all(j.released_s is not None for j in jobs)
    assert all(config.slot_of(j.released_s) <= start_by_slot(j, config) for j in jobs)


@pytest.mark.parametrize("costs", ["beta = 6.0", "e0 = 1e12"], ids=["beta-6", "e0-1e12"])
def test_daemon_replay_compares_against_a_replay_with_the_configured_costs(costs, tmp_path, capsys):
    """Issue 20, finding 4: with costs set in the config, the daemon decides under them, so the
    replay it is compared with must be priced the same way (it was priced with the defaults)."""
    from autoscaler.app.traces import SHIPPED
    from autoscaler.core.model import CostParams
    from autoscaler.core.policies import plan
    from autoscaler.core.workload import read_swim, workload_from_trace

    config_file = tmp_path / "config.toml"
    config_file.write_text(f'objective = "paper"\nwork_model = "job-slots"\nprovision_s = 0\n{costs}\n')
    store_path = tmp_path / "replay.db"
    code = main(["run", "--replay", "default", "--policy", "hold", "--config", str(config_file), "--store", str(store_path)])
    assert code == 0, capsys.readouterr()
    assert "max |m_t - autoscaler replay's m_t|" in capsys.readouterr().out
    # Independently: hold's plan of the same trace under the configured costs is what the daemon ran.
    name, value = (part.strip() for part in costs.split("="))
    params = CostParams(**{name: float(value)})
    trace = read_swim(str(__import__("pathlib").Path(__file__).parents[2] / "autoscaler" / "data" / SHIPPED["A"].file_name))
    expected = plan("hold", workload_from_trace(trace, slot_s=300.0).active, 2, params).capacity
    with SqliteJobStore(store_path) as store:
        capacity = [d["capacity"] for d in store.decisions()]
    np.testing.assert_allclose(capacity[: len(expected)], expected[: len(capacity)], atol=1e-6)


@pytest.mark.parametrize("policy", ["gcp-u", "follow"])
def test_daemon_replay_under_node_seconds_plans_the_node_time_curve(policy, tmp_path, capsys):
    """Under work_model = "node-seconds" the daemon's m_t is the policy's plan of each job's node time
    (``node_seconds_active``), not of replay's one unit a job and slot: run --replay compares with that.
    (hold's books follow the work the cluster ran instead: tests/unit/test_hold_books.py.)"""
    from autoscaler.app.replay_jobs import trace_jobs
    from autoscaler.app.traces import SHIPPED
    from autoscaler.core.policies import plan
    from autoscaler.core.slot_work import node_seconds_active
    from autoscaler.core.workload import read_swim, workload_from_trace

    config_file = tmp_path / "config.toml"
    config_file.write_text('work_model = "node-seconds"\nobjective = "paper"\n')  # the plan below is priced at the paper's costs
    store_path = tmp_path / "replay.db"
    code = main(["run", "--replay", "default", "--policy", policy, "--config", str(config_file), "--store", str(store_path)])
    assert code == 0, capsys.readouterr()
    assert f"max |m_t - {policy} planned on the jobs' node time|" in capsys.readouterr().out
    trace = read_swim(str(__import__("pathlib").Path(__file__).parents[2] / "autoscaler" / "data" / SHIPPED["A"].file_name))
    workload = workload_from_trace(trace, slot_s=300.0)
    config = ControllerConfig(policy=policy, deadline_slots=2, work_model="node-seconds")
    jobs = trace_jobs(trace, 2, 300.0, workload.n_slots * 300.0)
    curve = node_seconds_active(jobs, config, workload.n_slots)
    # A day of Workload A is about 633 node-hours of work: about a third of replay's job-slots.
    assert curve.sum() * 300.0 / 3600.0 == pytest.approx(640.0, rel=0.03)
    assert curve.sum() < 0.6 * workload.active.sum()
    expected = plan(policy, curve, 2, config.cost).capacity
    with SqliteJobStore(store_path) as store:
        decided = [d["capacity"] for d in store.decisions()]
    np.testing.assert_allclose(decided[: len(expected)], expected, atol=1e-6)
