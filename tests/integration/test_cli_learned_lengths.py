"""`autoscaler submit` without --length-s plans a job at p90 of its name's past runs (the store's, as the
daemon records them from EMR's step start and end), `jobs` shows the estimate, where it came from, the
run time and whether it overran; a job with no length, no sizes and no past run is refused."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main


def submit(store: Path, job_id: str | None, *length: str) -> int:
    """`autoscaler submit` of a "nightly" job of tenant "analytics", 6 h deadline, with ``length`` flags."""
    given_id = ["--id", job_id] if job_id else []
    return main(["submit", "--store", str(store), *given_id, "--name", "nightly", "--tenant", "analytics", "--deadline", "6h", *length, "--command", "true"])


def run_history(store: Path, runs_s: list[float], overrun_last: bool = False) -> None:
    """Done runs of "nightly" of ``runs_s`` seconds, ended in the past, as the daemon would record them."""
    now_s = time.time()
    with SqliteJobStore(store) as opened:
        jobs = {job.job_id: job for job in opened.all_jobs()}
        runs = {}
        for i, (job_id, length_s) in enumerate(zip(sorted(jobs), runs_s)):
            end_s = now_s - 3600.0 * (len(runs_s) - i)
            if overrun_last and i == len(runs_s) - 1:
                end_s = jobs[job_id].deadline_s + 125.0  # past its deadline (in the future: fine for the store)
            runs[job_id] = (end_s - length_s, end_s)
        opened.commit_slot(1, {}, {}, {"slot": 1}, states=dict.fromkeys(runs, "done"), runs=runs)


def test_a_name_never_run_needs_a_length_or_sizes(tmp_path, capsys):
    store = tmp_path / "jobs.db"
    code = submit(store, None)
    err = capsys.readouterr().err
    assert code == 2
    assert "job name 'nightly' of tenant 'analytics' has no finished run to learn its length from; give --length-s SECONDS or --sizes" in err


def test_submit_learns_p90_of_the_names_runs_and_jobs_shows_it(tmp_path, capsys):
    store = tmp_path / "jobs.db"
    for i in range(3):
        assert submit(store, f"n{i}", "--length-s", "600") == 0
    run_history(store, [700.0, 1300.0, 650.0])
    capsys.readouterr()
    # p90 of 3 runs (nearest rank: the ceil(2.7) = 3rd smallest of 650, 700, 1300) = 1,300 s.
    assert submit(store, "n3") == 0
    assert "length 1,300 s (p90 of 3 runs)" in capsys.readouterr().err
    assert submit(store, "n4", "--sizes", "1", "1", "1") == 0
    assert "length 1,300 s (p90 of 3 runs; submitted as " in capsys.readouterr().err
    assert submit(store, "n5", "--length-s", "90") == 0
    assert "length 90 s (given)" in capsys.readouterr().err

    assert main(["jobs", "--store", str(store), "--format", "json"]) == 0
    rows = {row["job_id"]: row for row in json.loads(capsys.readouterr().out)}
    assert (rows["n3"]["length_s"], rows["n3"]["length_source"], rows["n3"]["prior_length_s"]) == (1300.0, "p90 of 3 runs", None)
    assert (rows["n4"]["length_s"], rows["n4"]["length_source"]) == (1300.0, "p90 of 3 runs") and rows["n4"]["prior_length_s"] > 0
    assert (rows["n5"]["length_s"], rows["n5"]["length_source"]) == (90.0, "given")
    assert [rows[f"n{i}"]["run_s"] for i in range(3)] == pytest.approx([700.0, 1300.0, 650.0])
    assert rows["n3"]["run_s"] is None and not any(row["overran"] for row in rows.values())
    assert main(["jobs", "--store", str(store)]) == 0
    table = capsys.readouterr().out
    assert "6 jobs, 0 late, 0 overran (ended after the deadline)" in table
    assert "p90 of 3 runs" in table and "given" in table


def test_jobs_shows_a_job_that_overran_and_counts_it_per_tenant(tmp_path, capsys):
    store = tmp_path / "jobs.db"
    for i in range(2):
        assert submit(store, f"n{i}", "--length-s", "600") == 0
    run_history(store, [600.0, 600.0], overrun_last=True)
    capsys.readouterr()
    assert main(["jobs", "--store", str(store)]) == 0
    table = capsys.readouterr().out
    assert "2 jobs, 0 late, 1 overran (ended after the deadline)" in table and "by 125 s" in table
    assert main(["jobs", "--store", str(store), "--by-tenant", "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["tenant"], row["done"], row["overran"]) == ("analytics", 2, 1)


def test_a_retry_of_a_job_planned_on_its_runs_alone_is_the_same_job_after_another_run(tmp_path, capsys):
    store = tmp_path / "jobs.db"
    for i in range(2):
        assert submit(store, f"n{i}", "--length-s", "600") == 0
    run_history(store, [700.0])  # n0 ran 700 s
    assert submit(store, "again") == 0
    assert "length 700 s (p90 of 1 run)" in capsys.readouterr().err
    run_history(store, [700.0, 900.0])  # n1 ran 900 s since: p90 of 2 runs is now 900 s
    assert submit(store, "again") == 0
    retry = capsys.readouterr()
    assert retry.out == "already queued: again\n" and "length 700 s (p90 of 1 run) (the first submission's)" in retry.err
    assert submit(store, "fresh") == 0
    assert "length 900 s (p90 of 2 runs)" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--name", "--tenant"])
def test_a_name_or_tenant_that_is_not_utf8_is_refused_before_its_runs_are_looked_up(tmp_path, capsys, flag):
    # argv hands bytes that are not UTF-8 over as lone surrogates; the store cannot be asked about them.
    store = tmp_path / "jobs.db"
    assert submit(store, "n-1", "--length-s", "600") == 0
    argv = ["submit", "--store", str(store), "--name", "nightly", "--tenant", "analytics", "--deadline", "6h", "--command", "true"]
    argv[argv.index(flag) + 1] = "\udc80"
    capsys.readouterr()
    assert main(argv) == 2
    assert f"{flag[2:]}: expected UTF-8 text, got '\\udc80' (bytes that are not UTF-8)" in capsys.readouterr().err
    with SqliteJobStore(store) as opened:
        assert [job.job_id for job in opened.all_jobs()] == ["n-1"]


def test_a_deadline_shorter_than_the_learned_length_says_where_the_length_came_from_and_what_to_give(tmp_path, capsys):
    store = tmp_path / "jobs.db"
    for i in range(3):
        assert submit(store, f"n{i}", "--length-s", "600") == 0
    run_history(store, [700.0, 20000.0, 650.0])  # p90 of 3 runs: the 3rd smallest, 20,000 s = 5 h 33 min 20 s
    capsys.readouterr()
    short = ["submit", "--store", str(store), "--name", "nightly", "--tenant", "analytics", "--deadline", "1h", "--command", "true"]
    assert main(short) == 2
    said = capsys.readouterr().err
    assert (
        "deadline: the job is planned at p90 of 3 past runs of name 'nightly' (tenant 'analytics'): 5 h 33 min, "
        "but the deadline '1h' leaves only 1 h; give --length-s SECONDS if this run is shorter, "
        "or a deadline at least 5 h 33 min from now"
    ) in said, said
    assert main([*short[:-2], "--length-s", "1800", "--command", "true"]) == 0  # as it says
    assert "length 1,800 s (given)" in capsys.readouterr().err
