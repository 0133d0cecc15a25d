"""One suite over every implementation of the JobStore port, where they overlap: the SQLite store on
a file, the dry run's shadow store in memory, and the shadow over an SQLite store (as ``run
--dry-run`` uses it). What a slot reads and writes must come out the same from each; the expected
values are written out by hand from the calls made.

Where they differ on purpose the suite does not go: the shadow keeps no finished job (``all_jobs``
is its active jobs), takes jobs only through ``submit_many`` and does not check a resubmission."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.adapters.shadow import ShadowStore
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.ports import JobStore


def job(job_id: str, submit_s: float) -> Job:
    return Job(job_id, "etl", "analytics", submit_s, submit_s + 3600.0, 300.0, StepSpec(args=("spark-submit", f"{job_id}.py")))


@pytest.fixture(params=["sqlite", "shadow", "shadow of sqlite"])
def job_store(request, tmp_path: Path) -> Iterator[JobStore]:
    """An empty store of each implementation of the port."""
    if request.param == "shadow":
        yield ShadowStore(None)
        return
    with SqliteJobStore(tmp_path / "jobs.db") as sqlite:
        yield sqlite if request.param == "sqlite" else ShadowStore(sqlite)


@pytest.fixture
def five_jobs(job_store: JobStore) -> JobStore:
    assert job_store.submit_many([job(f"j{i}", 1000.0 + 10 * i) for i in range(5)]) == 5
    return job_store


def by_id(jobs: list[Job]) -> dict[str, tuple]:
    return {j.job_id: (j.seq, j.state, j.released_s, j.step_id) for j in jobs}


def test_an_empty_store_has_nothing(job_store):
    assert job_store.active_jobs() == [] and job_store.jobs_after(0) == []
    assert job_store.max_seq() == 0
    assert job_store.load_state() is None and job_store.last_slot() is None
    assert job_store.decisions() == [] and job_store.decision(0) is None
    assert job_store.recent_step_ids() == frozenset() and job_store.pending_intent() is None


def test_jobs_arrive_in_order_with_seqs_one_to_n(five_jobs):
    assert [j.job_id for j in five_jobs.active_jobs()] == ["j0", "j1", "j2", "j3", "j4"]
    assert [j.seq for j in five_jobs.active_jobs()] == [1, 2, 3, 4, 5]
    assert five_jobs.max_seq() == 5
    assert [j.job_id for j in five_jobs.jobs_after(3)] == ["j3", "j4"]
    assert five_jobs.jobs_after(5) == []
    assert five_jobs.active_jobs()[2] == dataclasses.replace(job("j2", 1020.0), seq=3)  # every field as submitted


def test_one_job_is_read_by_its_id_as_all_jobs_has_it(five_jobs):
    five_jobs.commit_slot(1, {}, {"j1": (1100.0, "s-1"), "j3": (1100.0, "s-3")}, {"slot": 1}, states={"j3": "done"})
    every = {j.job_id: j for j in five_jobs.all_jobs()}
    assert five_jobs.job("j2") == every["j2"] == dataclasses.replace(job("j2", 1020.0), seq=3)
    assert five_jobs.job("j1") == every["j1"] and (five_jobs.job("j1").state, five_jobs.job("j1").step_id) == ("released", "s-1")
    assert five_jobs.job("j3") == every.get("j3")  # done: the SQLite store keeps it, the shadow forgets it
    assert five_jobs.job("nobody") is None and five_jobs.job("") is None


def test_a_slot_commit_releases_sets_states_and_keeps_its_decision_and_state(five_jobs):
    five_jobs.commit_slot(1, {"last_slot": 1, "backlog": [1.5, 2.0]}, {"j0": (1100.0, "s-0"), "j1": (1100.0, "s-1")}, {"slot": 1, "m_t": 2})
    assert by_id(five_jobs.active_jobs()) == {
        "j0": (1, "released", 1100.0, "s-0"),
        "j1": (2, "released", 1100.0, "s-1"),
        "j2": (3, "queued", None, None),
        "j3": (4, "queued", None, None),
        "j4": (5, "queued", None, None),
    }
    assert five_jobs.last_slot() == 1 and five_jobs.load_state() == {"last_slot": 1, "backlog": [1.5, 2.0]}
    assert five_jobs.decision(1) == {"slot": 1, "m_t": 2}
    # Slot 2: j0 runs, j1 is done (leaves the active jobs), j2 is released; unknown ids are ignored.
    five_jobs.commit_slot(2, {"last_slot": 2}, {"j2": (1400.0, "s-2"), "nobody": (1400.0, "s-9")}, {"slot": 2}, states={"j0": "running", "j1": "done", "nobody": "done"})
    assert by_id(five_jobs.active_jobs()) == {
        "j0": (1, "running", 1100.0, "s-0"),
        "j2": (3, "released", 1400.0, "s-2"),
        "j3": (4, "queued", None, None),
        "j4": (5, "queued", None, None),
    }
    assert [d["slot"] for d in five_jobs.decisions()] == [1, 2]
    assert five_jobs.decisions(first_slot=2) == [{"slot": 2}] and five_jobs.decisions(last_slot=1) == [{"slot": 1, "m_t": 2}]


def test_a_job_found_running_before_its_release_is_recorded_keeps_its_state_and_gets_its_step(five_jobs):
    # After a crash the slot's reconciliation finds j3's step on the cluster, running, and records both at once.
    five_jobs.commit_slot(1, {}, {"j3": (1200.0, "s-3")}, {"slot": 1}, states={"j3": "running"})
    assert by_id(five_jobs.active_jobs())["j3"] == (4, "running", 1200.0, "s-3")
    five_jobs.commit_slot(2, {}, {"j3": (1500.0, "s-other")}, {"slot": 2})  # released again: its first step stays
    assert by_id(five_jobs.active_jobs())["j3"] == (4, "running", 1200.0, "s-3")


def test_recent_step_ids_are_the_newest_releases(five_jobs):
    five_jobs.commit_slot(1, {}, {"j0": (100.0, "s-0"), "j1": (200.0, "s-1")}, {})
    five_jobs.commit_slot(2, {}, {"j2": (300.0, "s-2"), "j3": (400.0, "s-3")}, {})
    assert five_jobs.recent_step_ids() == {"s-0", "s-1", "s-2", "s-3"}
    assert five_jobs.recent_step_ids(limit=2) == {"s-2", "s-3"}
    assert five_jobs.recent_step_ids(limit=2, released_before_s=300.0) == {"s-0", "s-1"}


def test_an_intent_is_kept_until_a_slot_at_or_after_it_commits(five_jobs):
    five_jobs.record_intent(3, ["j0", "j1"], 4)
    five_jobs.record_intent(4, ["j2"], 5)
    pending = five_jobs.pending_intent()
    assert (pending["slot"], pending["job_ids"], pending["nodes"]) == (4, ["j2"], 5)
    five_jobs.commit_slot(3, {}, {}, {"slot": 3})
    assert five_jobs.pending_intent()["slot"] == 4
    five_jobs.commit_slot(4, {}, {}, {"slot": 4})
    assert five_jobs.pending_intent() is None


def test_old_decisions_are_pruned_when_asked(five_jobs):
    for slot in range(1, 6):
        five_jobs.commit_slot(slot, {}, {}, {"slot": slot}, prune_decisions_before_slot=slot - 2)
    assert [d["slot"] for d in five_jobs.decisions()] == [3, 4, 5]
    assert five_jobs.decision(2) is None and five_jobs.decision(5) == {"slot": 5}


def test_runs_of_done_jobs_are_the_lengths_learned_from(job_store):
    """Three runs of "etl": 600 s ending at 2000, 900 s ending at 3000; a third not done (failed). Asked
    at 2999 only the first has ended; at 3000 both (at or before); other names and tenants never count."""
    jobs = [job("a", 100.0), job("b", 200.0), job("c", 300.0), dataclasses.replace(job("other", 400.0), name="load")]
    job_store.submit_many(jobs)
    runs = {"a": (1400.0, 2000.0), "b": (2100.0, 3000.0), "c": (2500.0, 2600.0), "other": (100.0, 200.0)}
    job_store.commit_slot(1, {}, {}, {"slot": 1}, states={"a": "done", "b": "done", "c": "failed", "other": "done"}, runs=runs)

    assert job_store.run_lengths_s("analytics", "etl", 1999.0) == []
    assert job_store.run_lengths_s("analytics", "etl", 2999.0) == [600.0]
    assert job_store.run_lengths_s("analytics", "etl", 3000.0) == [600.0, 900.0]
    assert job_store.run_lengths_s("analytics", "etl", 1e9, limit=1) == [900.0]
    assert job_store.run_lengths_s("analytics", "load", 1e9) == [100.0]
    assert job_store.run_lengths_s("other-tenant", "etl", 1e9) == []


def test_recent_runs_are_the_newest_done_runs_with_their_planned_lengths(job_store):
    """What the length error is rebuilt from at start-up: (planned length, run time, learned) of done
    jobs with a run, by run end, oldest first; a failed job's run and a job without one never count."""
    jobs = [job("a", 100.0), dataclasses.replace(job("b", 200.0), prior_length_s=50.0), job("c", 300.0), job("d", 400.0)]
    job_store.submit_many(jobs)
    runs = {"a": (1000.0, 3000.0), "b": (1500.0, 2000.0), "c": (100.0, 150.0)}
    job_store.commit_slot(1, {}, {}, {"slot": 1}, states={"a": "done", "b": "done", "c": "failed", "d": "done"}, runs=runs)

    length_s = {j.job_id: j.length_s for j in jobs}
    assert job_store.recent_runs() == [(length_s["b"], 500.0, True), (length_s["a"], 2000.0, False)]
    assert job_store.recent_runs(limit=1) == [(length_s["a"], 2000.0, False)]


def test_the_shadow_forgets_a_job_at_the_commit_after_it_finished_and_keeps_one_set_running_again():
    shadow = ShadowStore(None)
    shadow.submit_many([job(f"j{i}", 1000.0 + 10 * i) for i in range(4)])
    shadow.set_states({"j0": "done", "j1": "failed", "j2": "done"})
    assert [j.job_id for j in shadow.active_jobs()] == ["j0", "j1", "j2", "j3"]  # until the next commit
    shadow.set_states({"j2": "running"})  # seen running again before the commit: it stays
    shadow.commit_release(1, {"j3": (1100.0, "s-3")})
    assert {j.job_id: j.state for j in shadow.active_jobs()} == {"j2": "running", "j3": "released"}
    shadow.commit_slot(2, {}, {}, {"slot": 2}, states={"j3": "done"})
    assert [j.job_id for j in shadow.active_jobs()] == ["j2"]
