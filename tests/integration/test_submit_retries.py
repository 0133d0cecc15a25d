"""A resubmission with the same --id: which deadlines are the same job, which are refused, and what is said."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from autoscaler.adapters.sqlite_store import APPLICATION_ID, SCHEMA_VERSION, SqliteJobStore
from autoscaler.app.cli import main
from autoscaler.core.errors import SubmitError
from autoscaler.core.intake import build_job

NOW_S = 1_795_910_400.0  # 2026-11-29T00:00:00Z


def job_at(now_s: float, deadline: str, job_id: str = "nightly"):
    return build_job(
        job_id=job_id, name="etl", tenant="ads", now_s=now_s, deadline=deadline, length_s=600.0,
        sizes=None, jar=None, args=[], command=["true"],
    )  # fmt: skip


def test_the_same_duration_later_is_the_same_job_keeping_the_first_deadline(tmp_path):
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        assert store.submit(job_at(NOW_S, "2h")) is True
        assert store.submit(job_at(NOW_S + 95, "2h")) is False
        assert store.submit(job_at(NOW_S + 300, "120m")) is False  # the same duration written otherwise
        (stored,) = store.all_jobs()
    assert stored.deadline_s == NOW_S + 7200 and stored.deadline_text == "2h"


@pytest.mark.parametrize(
    "first, again, message",
    [
        ("2h", "3h", "deadline: first 2h (2026-11-29T02:00Z), now 3h (2026-11-29T03:01Z)"),
        ("2h", "2026-11-29T02:30Z", "deadline: first 2h (2026-11-29T02:00Z), now 2026-11-29T02:30Z"),
        ("2026-11-29T02:00:00Z", "2026-11-29T02:30:00Z", "deadline: first 2026-11-29T02:00:00Z, now 2026-11-29T02:30:00Z"),
        ("2026-11-29T02:00:00Z", "2h", "deadline: first 2026-11-29T02:00:00Z, now 2h (2026-11-29T02:01Z)"),
    ],
)
def test_another_deadline_is_other_content_and_the_refusal_says_what_differs(tmp_path, first, again, message):
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        store.submit(job_at(NOW_S, first))
        with pytest.raises(SubmitError) as refused:
            store.submit(job_at(NOW_S + 60, again))
        assert store.all_jobs()[0].deadline_text == first
    assert message in str(refused.value)


def test_the_same_absolute_time_is_the_same_job_however_it_is_written(tmp_path):
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        assert store.submit(job_at(NOW_S, "2026-11-29T02:00:00Z")) is True
        assert store.submit(job_at(NOW_S + 60, "2026-11-29T03:00:00+01:00")) is False
        # A duration first and that duration's time later: the same deadline.
        assert store.submit(job_at(NOW_S, "90m", job_id="other")) is True
        assert store.submit(job_at(NOW_S + 60, "2026-11-29T01:30Z", job_id="other")) is False


def test_concurrent_retries_agree(tmp_path):
    """Clients retrying at once, from their own clocks: one is queued, the others find it; none is refused."""
    path = tmp_path / "jobs.db"
    SqliteJobStore(path).close()
    barrier = threading.Barrier(4)
    outcomes: list[object] = []

    def retry(offset_s: float) -> None:
        job = job_at(NOW_S + offset_s, "2h")
        with SqliteJobStore(path) as store:
            barrier.wait()
            try:
                outcomes.append(store.submit(job))
            except SubmitError as exc:
                outcomes.append(exc)

    threads = [threading.Thread(target=retry, args=(offset,)) for offset in (0.0, 0.4, 1.5, 7.0)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes, key=str) == [False, False, False, True]
    with SqliteJobStore(path) as store:
        (stored,) = store.all_jobs()
    assert stored.deadline_s - stored.submit_s == 7200


def test_a_version_2_store_is_migrated_and_its_old_jobs_keep_the_old_retry_rule(tmp_path):
    path = tmp_path / "jobs.db"
    with SqliteJobStore(path) as store:
        store.submit(job_at(NOW_S, "2h"))
    # The same file as version 2 wrote it: no deadline_text column.
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("ALTER TABLE jobs DROP COLUMN deadline_text")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()
    with SqliteJobStore(path) as store:
        (old,) = store.all_jobs()
        assert old.deadline_text is None and old.deadline_s == NOW_S + 7200
        assert store.submit(job_at(NOW_S + 600, "2h")) is False  # a duration retry keeps its deadline, as before
        with pytest.raises(SubmitError, match=r"deadline: first 2026-11-29T02:00Z, now 2026-11-29T05:00:00Z"):
            store.submit(job_at(NOW_S + 600, "2026-11-29T05:00:00Z"))
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
    assert "deadline_text" in {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    conn.close()


def test_a_job_without_deadline_text_is_compared_by_its_time():
    from dataclasses import replace

    from autoscaler.core.intake import deadline_difference

    first = replace(job_at(NOW_S, "2h"), deadline_text=None)
    assert deadline_difference(first, replace(first, deadline_s=first.deadline_s + 1)).startswith("deadline_s: stored")
    assert deadline_difference(first, first) is None


def test_submit_says_which_deadline_it_keeps_and_refuses_another(tmp_path, capsys):
    argv = ["submit", "--store", str(tmp_path / "jobs.db"), "--id", "nightly", "--name", "etl", "--tenant", "ads", "--length-s", "60"]
    assert main([*argv, "--deadline", "2h", "--command", "true"]) == 0
    queued = capsys.readouterr()
    assert queued.out == "queued: nightly\n" and queued.err.startswith("deadline 20")
    assert main([*argv, "--deadline", "2h", "--command", "true"]) == 0
    again = capsys.readouterr()
    assert again.out == "already queued: nightly\n"
    assert again.err == queued.err.rstrip("\n") + " (the first submission's)\n"
    assert main([*argv, "--deadline", "3h", "--command", "true"]) == 2
    err = capsys.readouterr().err
    assert "already stored with different content (deadline: first 2h (" in err and "), now 3h (" in err
