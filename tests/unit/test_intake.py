"""Submissions into Jobs: deadline forms, the length from sizes, steps, and every refusal naming its field."""

from __future__ import annotations

import math

import pytest

from autoscaler.core.errors import SubmitError
from autoscaler.core.intake import build_job, parse_deadline
from autoscaler.core.model import MIB, LengthModel, StepSpec
from autoscaler.core.workload import estimate_length_s

NOW_S = 1_795_900_000.0  # 2026-11-29T00:00:00Z is 1_795_910_400 (checked below): NOW is 2h53m20s before it


def submission(**overrides) -> dict:
    fields = dict(
        job_id="job-1",
        name="nightly etl",
        tenant="analytics",
        now_s=NOW_S,
        deadline="2h",
        length_s=600.0,
        sizes=None,
        jar=None,
        args=[],
        command=["spark-submit", "s3://bucket/etl.py"],
    )
    fields.update(overrides)
    return fields


def test_a_command_job_runs_through_command_runner():
    job = build_job(**submission())
    assert job.job_id == "job-1"
    assert job.name == "nightly etl" and job.tenant == "analytics"
    assert job.submit_s == NOW_S
    assert job.deadline_s == NOW_S + 7200
    assert job.length_s == 600.0
    assert job.step == StepSpec(jar="command-runner.jar", args=("spark-submit", "s3://bucket/etl.py"))
    assert job.state == "queued" and job.released_s is None and job.step_id is None


def test_a_jar_job_keeps_its_args_and_main_class():
    job = build_job(
        **submission(jar="s3://bucket/wordcount.jar", args=["in", "out"], command=None, main_class="org.example.WordCount")
    )
    assert job.step == StepSpec(jar="s3://bucket/wordcount.jar", args=("in", "out"), main_class="org.example.WordCount")
    local = build_job(**submission(jar="/usr/lib/hadoop/hadoop-examples.jar", args=[], command=None))
    assert local.step.jar == "/usr/lib/hadoop/hadoop-examples.jar" and local.step.args == ()
    # An s3:// object need not end in .jar.
    assert build_job(**submission(jar="s3://bucket/tools/latest", command=None)).step.jar == "s3://bucket/tools/latest"


@pytest.mark.parametrize(
    ("deadline", "seconds"),
    [
        ("90m", 5400),
        ("2h", 7200),
        ("45s", 45),
        ("1h30m", 5400),
        ("1h30m15s", 5415),
        ("600", 600),
        ("600.5", 600.5),
        ("1d", 86400),
        ("0.5h", 1800),
        (" 2h ", 7200),
    ],
)
def test_durations_count_from_now(deadline, seconds):
    assert parse_deadline(deadline, NOW_S) == NOW_S + seconds


def test_iso_times_are_absolute_and_respect_their_offset():
    # 2026-11-29 is day 20786 after 1970-01-01: 56 years of 365 days, 14 leap days (1972..2024),
    # and 304 + 28 days into 2026 (Jan..Oct, then Nov 1..28). 20786 * 86400 + 18 * 3600 = 1_795_975_200.
    expected_s = 20786 * 86400 + 18 * 3600
    assert expected_s == 1_795_975_200
    assert parse_deadline("2026-11-29T18:00:00Z", NOW_S) == expected_s
    assert parse_deadline("2026-11-29t18:00:00z", NOW_S) == expected_s  # RFC 3339 allows lower case
    assert parse_deadline("2026-11-29T19:00:00+01:00", NOW_S) == expected_s
    assert parse_deadline("2026-11-29T12:30:00-05:30", NOW_S) == expected_s
    job = build_job(**submission(deadline="2026-11-29T18:00:00Z"))
    assert job.deadline_s == expected_s


def test_length_from_sizes_is_the_section_v_a_estimate():
    sizes = (3 * 128 * MIB + 5, 700 * MIB, 200 * MIB)
    model = LengthModel(map_s_per_mb=0.5, network_mb_s=20.0)
    job = build_job(**submission(length_s=None, sizes=sizes, length_model=model, deadline="1d"))
    assert job.length_s == float(estimate_length_s(*sizes, model))
    assert isinstance(job.length_s, float)


def test_no_job_id_gets_a_fresh_valid_one():
    first = build_job(**submission(job_id=None))
    second = build_job(**submission(job_id=None))
    assert first.job_id != second.job_id
    assert len(first.job_id) <= 64 and first.job_id.isalnum()


def test_a_deadline_exactly_the_job_length_away_is_accepted():
    assert build_job(**submission(deadline="600", length_s=600.0)).deadline_s == NOW_S + 600


def test_a_deadline_shorter_than_a_length_from_past_runs_names_where_it_came_from_and_the_fields_to_give():
    learned_from = "p90 of 50 past runs of name 'nightly etl' (tenant 'analytics')"
    with pytest.raises(SubmitError) as refused:
        build_job(**submission(deadline="1h", length_s=20000.0, length_from=learned_from))
    assert str(refused.value) == (
        "deadline: the job is planned at p90 of 50 past runs of name 'nightly etl' (tenant 'analytics'): 5 h 33 min, "
        "but the deadline '1h' leaves only 1 h; give length_s if this run is shorter, or a deadline at least 5 h 33 min from now"
    )
    with pytest.raises(SubmitError, match="; give --length-s SECONDS if this run is shorter, or a deadline"):
        build_job(**submission(deadline="1h", length_s=20000.0, length_from="p90 of 1 past run", length_option="--length-s SECONDS"))


def test_known_tenants_admit_their_own():
    assert build_job(**submission(known_tenants={"analytics", "ads"})).tenant == "analytics"


BAD_SUBMISSIONS = [
    # (overrides, field named in the message)
    (dict(deadline="2026-11-28T18:00:00Z"), "deadline"),  # in the past
    (dict(deadline="0s"), "deadline"),  # now is not in the future
    (dict(deadline="5m", length_s=600.0), "deadline"),  # shorter than the job
    (dict(deadline="tomorrow"), "deadline"),
    (dict(deadline="2h30"), "deadline"),
    (dict(deadline="-5m"), "deadline"),
    (dict(deadline=""), "deadline"),
    (dict(deadline="2026-11-29T18:00:00"), "deadline"),  # no timezone
    (dict(deadline=3600), "deadline"),
    (dict(tenant="marketing", known_tenants={"analytics", "ads"}), "tenant"),
    (dict(tenant="analytics", known_tenants=set()), "tenant"),
    (dict(tenant=""), "tenant"),
    (dict(tenant="   "), "tenant"),
    (dict(name=""), "name"),
    (dict(name=None), "name"),
    (dict(jar="s3://b/x.jar", command=["ls"]), "step"),  # both
    (dict(jar=None, command=None), "step"),  # neither
    (dict(command=[]), "command"),
    (dict(command=[""]), "command"),
    (dict(command="spark-submit x.py"), "command"),  # a string, not a list
    (dict(command=["ls", 3]), "command[1]"),
    (dict(command=["ls"], args=["-l"]), "args"),
    (dict(command=["ls"], main_class="Main"), "main_class"),
    (dict(jar="wordcount.py", command=None), "jar"),
    (dict(jar="", command=None), "jar"),
    (dict(jar="x.jar", command=None, main_class=""), "main_class"),
    (dict(length_s=math.nan), "length_s"),
    (dict(length_s=math.inf), "length_s"),
    (dict(length_s=-1.0), "length_s"),
    (dict(length_s=0.0), "length_s"),
    (dict(length_s="600"), "length_s"),
    (dict(length_s=True), "length_s"),
    (dict(length_s=None, sizes=None), "length_s/sizes"),
    (dict(length_s=600.0, sizes=(1.0, 1.0, 1.0)), "length_s/sizes"),
    (dict(length_s=None, sizes=(1.0, math.nan, 1.0)), "sizes[1]"),
    (dict(length_s=None, sizes=(-1.0, 1.0, 1.0)), "sizes[0]"),
    (dict(length_s=None, sizes=(1.0, 1.0, math.inf)), "sizes[2]"),
    (dict(length_s=None, sizes=(1.0, 1.0)), "sizes"),
    (dict(now_s=math.nan), "now_s"),
    (dict(now_s=-1.0), "now_s"),
    (dict(job_id="job 1"), "job_id"),
    (dict(job_id="job/1"), "job_id"),
    (dict(job_id="jöb"), "job_id"),
    (dict(job_id=""), "job_id"),
    (dict(job_id="x" * 65), "job_id"),
]


@pytest.mark.parametrize(("overrides", "field"), BAD_SUBMISSIONS, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_SUBMISSIONS)])
def test_bad_submissions_are_refused_naming_the_field(overrides, field):
    with pytest.raises(SubmitError) as caught:
        build_job(**submission(**overrides))
    message = str(caught.value)
    assert message.startswith((f"{field}:", f"{field} (")), message
    assert "expected" in message


def test_the_longest_allowed_job_id_is_accepted():
    assert build_job(**submission(job_id="A-z.0_" + "x" * 58)).job_id == "A-z.0_" + "x" * 58


def test_a_job_longer_than_any_deadline_accepted_is_refused_in_a_short_message():
    # 1e308 s is about 3.2e300 years; the latest deadline accepted is 366 days away.
    with pytest.raises(SubmitError) as error:
        build_job(**submission(length_s=1e308))
    message = str(error.value)
    assert message.startswith("length_s: ") and "expected at most 366 days" in message
    assert len(message) < 200 and not any(len(run) > 12 for run in message.replace(",", "").split())
