"""The store's side of learned lengths, on SQLite on disk: the run times a job is planned from are
exactly those of its tenant and name that were done and ended at or before the time asked, checked
against a brute force over the runs written."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.core.learned import planned
from autoscaler.core.model import Job, StepSpec

run = st.tuples(
    st.sampled_from(["etl", "report"]),
    st.sampled_from(["done", "failed"]),
    st.integers(0, 5_000),
    st.integers(0, 2_000),
)


@settings(max_examples=40, deadline=None)
@given(runs=st.lists(run, max_size=25), plan_at=st.integers(0, 8_000), limit=st.integers(1, 30))
def test_stored_runs_used_are_those_ended_by_the_time_planned(runs, plan_at, limit):
    jobs = [
        Job(f"j{i}", name, "analytics", float(i), 1e6, 60.0, StepSpec(args=("true",)))
        for i, (name, _, _, _) in enumerate(runs)
    ]
    with tempfile.TemporaryDirectory() as folder, SqliteJobStore(Path(folder) / "jobs.db") as store:
        store.submit_many(jobs)
        store.commit_slot(
            0, {}, {}, {"slot": 0},
            states={f"j{i}": state for i, (_, state, _, _) in enumerate(runs)},
            runs={f"j{i}": (float(start), float(start + length)) for i, (_, _, start, length) in enumerate(runs)},
        )  # fmt: skip
        got = store.run_lengths_s("analytics", "etl", float(plan_at), limit)
    eligible = sorted(
        ((start + length, i, float(length)) for i, (name, state, start, length) in enumerate(runs) if name == "etl" and state == "done" and start + length <= plan_at),
    )
    assert got == [length for _, _, length in eligible[-limit:]]
    learned = planned(jobs[0] if jobs else Job("x", "etl", "analytics", 0.0, 1e6, 60.0, StepSpec()), got, 0.9)
    assert learned.length_s in {length for _, _, length in eligible} | {60.0}
