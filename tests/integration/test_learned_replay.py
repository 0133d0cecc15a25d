"""`autoscaler run --replay --days N --lengths learned|submitted` on the twin: a small recurring load
(200 jobs a day, one a minute, each about 20 minutes by the size model, 30 minutes of slack (D = 6),
three days, every job named as on day 1) whose true lengths are off by one factor per name
(--length-error 0.48). Planned on the submitted length, as many jobs overrun their deadline every day;
planned on their name's past run, the same on the first day (no history) and far fewer after. Counted twice: from the twin's bill the replay prints, and from the run times the
daemon wrote to the store (EMR's step start and end, as the twin reports them) against the deadlines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main
from autoscaler.core.twin import TwinConfig

MB = 1024 * 1024
JOBS_PER_DAY = 200
DEADLINE_SLOTS = 6


def row(out: str, label: str) -> str:
    match = re.search(rf"{re.escape(label)}\s*│\s*([^│]+?)\s*│", out)
    assert match, f"no row {label!r} in:\n{out}"
    return match.group(1)


@pytest.fixture(scope="module")
def recurring_trace(tmp_path_factory) -> Path:
    """One day: 200 jobs, one a minute from 00:10, each 1,000 MB in, 1,000 MB shuffled, 100 MB out
    (1,203.5 s by the §V-A model: 4 slots of 300 s), so all end hours before the replay's last slot."""
    path = tmp_path_factory.mktemp("trace") / "recurring.tsv"
    lines = [f"etl{i}\t{600 + 60 * i}\t{60 if i else 600}\t{1000 * MB}\t{1000 * MB}\t{100 * MB}" for i in range(JOBS_PER_DAY)]
    path.write_text("\n".join(lines) + "\n")
    return path


def replay(trace: Path, lengths: str, store: Path, capsys) -> tuple[str, list]:
    # No start margin (length_error_quantile = 0): what is measured is the learned length alone, and
    # a margin learned on day 1 would cut the submitted lengths' overruns of days 2 and 3 as well.
    config = store.with_suffix(".toml")
    config.write_text("[jobs]\nlength_error_quantile = 0\n", encoding="utf-8")
    code = main([
        "run", "--replay", str(trace), "--cluster", "twin", "--length-error", "0.48", "--deadline", str(DEADLINE_SLOTS),
        "--days", "3", "--lengths", lengths, "--store", str(store), "--config", str(config),
    ])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    with SqliteJobStore(store) as opened:
        jobs = opened.all_jobs()
    return out, jobs


def test_learned_lengths_stop_the_overruns_of_recurring_jobs_after_their_first_day(recurring_trace, tmp_path, capsys):
    submitted_out, submitted = replay(recurring_trace, "submitted", tmp_path / "submitted.db", capsys)
    learned_out, learned = replay(recurring_trace, "learned", tmp_path / "learned.db", capsys)
    assert len(submitted) == len(learned) == 3 * JOBS_PER_DAY
    assert all(job.run_end_s is not None for job in submitted + learned)  # every run ended inside the replay

    def overran_by_day(jobs) -> dict[int, set[str]]:
        days: dict[int, set[str]] = {1: set(), 2: set(), 3: set()}
        for job in jobs:
            if job.run_end_s > job.deadline_s:
                days[int(job.job_id.rsplit("-day", 1)[1])].add(job.name)
        return days

    by_day = overran_by_day(submitted)
    learned_by_day = overran_by_day(learned)
    assert len(by_day[1]) == len(by_day[2]) == len(by_day[3]) > 10  # the same day's load, the same factors
    assert learned_by_day[1] == by_day[1]  # no history on the first day: planned as submitted
    assert 2 * len(learned_by_day[2]) < len(by_day[2]) and 2 * len(learned_by_day[3]) < len(by_day[3])
    # A job whose true length (the twin's draw, computed here) exceeds its whole slack must overrun, in either mode.
    twin = TwinConfig(length_error_sigma=0.48)
    for jobs in (submitted, learned):
        hopeless = {job.job_id for job in jobs if twin.true_length_s(job.name, job.submitted_length_s) > job.deadline_s - job.submit_s}
        assert hopeless and hopeless <= {job.job_id for job in jobs if job.run_end_s > job.deadline_s}
    # The replay's own count (from the twin's bill) is the store's.
    for out, days in ((submitted_out, by_day), (learned_out, learned_by_day)):
        count = sum(len(names) for names in days.values())
        assert row(out, "jobs overran (ended after their deadline)") == row(out, "jobs finished after their deadline") == f"{count:,}"
    # Days 2 and 3 are planned at their name's day-1 run (p90 of one run is that run), day 1 as submitted.
    runs = {job.job_id: job.run_end_s - job.run_start_s for job in learned}
    for job in learned:
        day = int(job.job_id.rsplit("-day", 1)[1])
        if day == 1:
            assert (job.prior_length_s, job.length_source) == (None, "size model")
        else:
            assert job.length_s == pytest.approx(runs[f"{job.name}-day1"]) and job.prior_length_s == pytest.approx(1203.5, abs=0.1)
            assert job.length_source == f"p90 of {day - 1} run{'s' if day > 2 else ''}"
    assert row(learned_out, "lengths planned (learned)") == f"{2 * JOBS_PER_DAY:,} learned (p90 of the name's past runs), {JOBS_PER_DAY:,} as submitted"


def test_runs_that_end_after_the_last_slot_are_stored_too(tmp_path, capsys):
    """Two 1,203.5 s jobs submitted 400 s before the day's end (cut to the 400 s left of the window, as
    replay cuts its curves) on nodes that take 330 s to boot: they end after the replay's last slot, the
    twin runs them to their end, and the store still gets both runs."""
    trace = tmp_path / "late-in-the-day.tsv"
    trace.write_text("".join(f"j{i}\t{86000 + i}\t1\t{1000 * MB}\t{1000 * MB}\t{100 * MB}\n" for i in range(2)))
    store = tmp_path / "jobs.db"
    assert main(["run", "--replay", str(trace), "--cluster", "twin", "--deadline", "0", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    with SqliteJobStore(store) as opened:
        jobs = opened.all_jobs()
    assert [job.state for job in jobs] == ["done", "done"]
    assert [job.length_s for job in jobs] == [400.0, 399.0]
    assert all(job.run_end_s - job.run_start_s == pytest.approx(job.length_s) for job in jobs)
    assert all(job.run_end_s > 86400.0 for job in jobs)
    assert row(out, "jobs overran (ended after their deadline)") == f"{sum(job.overran for job in jobs):,}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--replay", "A", "--dry-run", "--length-quantile", "1.5"], r"--length-quantile: expected a quantile in \(0, 1\], e.g. 0.9 for p90, got 1.5"),
        (["run", "--replay", "A", "--dry-run", "--days", "400"], r"--days: expected a whole number of days in 1..366, got 400"),
        (["run", "--config", "c.toml", "--lengths", "submitted"], r"run: --lengths is for --replay; a live run takes it from the config"),
        (["run", "--replay", "A", "--dry-run", "--lengths", "submitted", "--length-quantile", "0.5"], r"--lengths submitted plans none"),
    ],
)
def test_replay_length_flags_out_of_range_are_refused_before_any_work(argv, message, capsys):
    assert main(argv) == 2
    assert re.search(message, capsys.readouterr().err)


def test_a_learned_length_past_the_windows_end_is_cut_there_as_the_submitted_one_is():
    from autoscaler.app.replay_jobs import within_window
    from autoscaler.core.model import Job, StepSpec

    job = Job("j-day2", "j", "t", submit_s=172_794.0, deadline_s=172_800.0 + 600.0, length_s=74_738.0, step=StepSpec(), prior_length_s=6.0)
    cut = within_window(job, window_s=172_800.0)
    assert cut.length_s == 6.0 and cut.prior_length_s == 6.0  # the 6 s the window leaves, as the trace's length was cut
    assert within_window(job, window_s=300_000.0) is job  # inside the window: as planned
