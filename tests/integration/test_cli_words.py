"""What the commands print says what is true, in numbers as people write them."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timezone

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main


def test_mean_m_is_taken_over_the_slots_of_the_peak_and_is_the_same_span_for_every_policy(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("slot,released\n0,3\n1,3\n2,3\n")
    assert main(["replay", "--trace", str(curve), "--deadline", "2", "--format", "json"]) == 0
    policies = json.loads(capsys.readouterr().out)["policies"]
    span = max(len(p["m"]) for p in policies.values())
    assert span == 3 + 2
    for name, policy in policies.items():
        assert policy["mean_servers"] == pytest.approx(sum(policy["m"]) / span), name
        assert policy["mean_servers"] <= policy["peak_servers"] + 1e-9, name
    assert main(["replay", "--trace", str(curve), "--deadline", "2"]) == 0
    assert "peak and mean m over the 5 slots" in " ".join(capsys.readouterr().out.split())


def test_with_gcp_every_mean_is_over_gcps_longer_horizon(capsys):
    assert main(["replay", "--policy", "gcp-u,gcp", "--window", "48", "--format", "json"]) == 0
    policies = json.loads(capsys.readouterr().out)["policies"]
    span = len(policies["gcp"]["m"])
    assert span > len(policies["gcp-u"]["m"]) == 48 + 2
    assert policies["gcp-u"]["mean_servers"] == pytest.approx(sum(policies["gcp-u"]["m"]) / span)


def test_report_heading_and_note_agree_on_the_slots(capsys):
    assert main(["replay", "--policy", "gcp", "--window", "48", "--format", "json"]) == 0
    horizon = len(json.loads(capsys.readouterr().out)["policies"]["gcp"]["m"])
    assert main(["report", "--replay", "--window", "48", "--policy", "all"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    end = horizon * 300
    end_words = f"{end // 3600} h {end % 3600 // 60} min" if end % 3600 else f"{end // 3600} h"
    assert f"{horizon} slots of 5 min, 0 h to {end_words}: the 48-slot window (to 4 h) and {horizon - 48} slots after it" in text
    assert f"in the first 50 of the {horizon} slots (the window and 2 more), then none" in text
    assert not re.search(r"\d\.\d{4,} h", text)  # no "5.91667 h"


def test_a_deadline_in_the_past_says_when_in_years_not_seconds(tmp_path, capsys):
    argv = ["submit", "--store", str(tmp_path / "jobs.db"), "--name", "n", "--tenant", "t", "--length-s", "60"]
    assert main([*argv, "--deadline", "2019-01-01T00:00:00Z", "--command", "true"]) == 2
    err = capsys.readouterr().err
    years = (time.time() - datetime(2019, 1, 1, tzinfo=timezone.utc).timestamp()) / (365.25 * 86400)
    assert f"deadline: '2019-01-01T00:00:00Z' is {years:.1f} years ago; expected a time after now (20" in err
    assert "e+" not in err and " s ago" not in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--deadline", "-1h"], "deadline: '-1h' is a duration into the past; expected a duration from now such as '1h'"),
        (["--deadline", "-90"], "deadline: '-90' is a duration into the past"),
        (["--deadline", "5m", "--length-s", "600"], "the job needs 10 min but the deadline '5m' leaves only 5 min"),
    ],
)
def test_submit_says_what_is_wrong_with_the_deadline(tmp_path, capsys, argv, message):
    base = ["submit", "--store", str(tmp_path / "jobs.db"), "--name", "n", "--tenant", "t", "--length-s", "60"]
    assert main([*base, *argv, "--command", "true"]) == 2
    assert message in capsys.readouterr().err
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        assert store.all_jobs() == []


def test_a_dash_after_command_stays_the_jobs_own(tmp_path, capsys):
    base = ["submit", "--store", str(tmp_path / "jobs.db"), "--name", "n", "--tenant", "t", "--length-s", "60", "--deadline", "2h"]
    assert main([*base, "--command", "tool", "--deadline", "-1h"]) == 0
    capsys.readouterr()
    assert main(["jobs", "--store", str(tmp_path / "jobs.db"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["step"]["args"] == ["tool", "--deadline", "-1h"]


@pytest.mark.parametrize(
    "deadlines, message",
    [
        ("12-1", "--deadlines: the range '12-1' runs backwards (12 > 1); write it smaller first: 1-12"),
        ("-1-12", "--deadlines: '-1-12' has a negative deadline"),
        ("2,-4", "--deadlines: '2,-4' has a negative deadline (-4)"),
        ("1-3,5", "(a range or a list, not both), got '1-3,5'"),
        ("1-99999", "'1-99999' is 99,999 deadlines to sweep"),
        ("1,,3", "--deadlines: '1,,3' has an empty item"),
        ("5,5", "--deadlines: '5,5' gives D = 5 more than once"),
    ],
)
def test_sweep_says_what_is_wrong_with_the_deadlines(capsys, deadlines, message):
    assert main(["sweep", "--deadlines", deadlines]) == 2
    assert message in capsys.readouterr().err


def test_big_bounds_are_written_out(tmp_path, capsys):
    demands = tmp_path / "d.csv"
    demands.write_text("agent,cpu\na,1\n")
    with pytest.raises(SystemExit):
        main(["drf", "--demands", str(demands), "--n", "99999999999"])
    assert "<= 10,000,000, got '99999999999'" in capsys.readouterr().err


def test_replay_table_numbers_have_separators(capsys):
    assert main(["replay", "--policy", "gcp-u", "--objective", "paper"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "288 slots of 5 min" in text and "44,299.0" in text  # follow's cost on Workload A (README)


def test_replay_caption_names_the_schedule_every_mean_is_taken_to_the_end_of(capsys):
    # gcp's class deadlines reach past the window and D: every mean, follow's too, is over its longer schedule.
    assert main(["replay", "--policy", "gcp-u,gcp", "--window", "48"]) == 0
    caption = " ".join(capsys.readouterr().out.split())
    assert "where deferred work runs (to the end of gcp's schedule, the longest: every policy's mean is over these slots)" in caption
    assert main(["replay", "--policy", "gcp-u", "--window", "48"]) == 0
    caption = " ".join(capsys.readouterr().out.split())
    assert "peak and mean m over the 50 slots of the window and after it, where deferred work runs;" in caption


def test_replay_of_one_slot_says_one_slot(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("slot,released\n0,3\n")
    assert main(["replay", "--trace", str(curve), "--policy", "follow", "--deadline", "0"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{curve}: 1 slot of 5 min, D = 0," in out and "peak and mean m over the 1 slot of the window" in out
