"""``submit --command`` and ``--args`` take the rest of the line: submit's own flags written after them
are refused by name, not queued as part of the job's command line."""

from __future__ import annotations

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main


def _usage_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return " ".join(capsys.readouterr().err.split())


def test_submit_names_the_flags_command_swallowed_and_queues_nothing(tmp_path, capsys):
    store = tmp_path / "jobs.db"
    argv = [
        "submit", "--store", str(store), "--command", "spark-submit", "--class", "X", "app.jar",
        "--name", "x", "--tenant", "t", "--deadline", "2h", "--length-s", "60",
    ]  # fmt: skip
    err = _usage_error(argv, capsys)
    assert (
        "autoscaler submit: error: --command takes the rest of the line, and it swallowed --name, --tenant, "
        "--deadline, --length-s; put --command ... last"
    ) in err
    assert "the following arguments are required" not in err
    assert not store.exists()


def test_submit_names_a_swallowed_flag_written_with_its_value_attached(tmp_path, capsys):
    argv = ["submit", "--store", str(tmp_path / "jobs.db"), "--name", "x", "--tenant", "t", "--command", "true", "--deadline=2h"]
    err = _usage_error(argv, capsys)
    assert "--command takes the rest of the line, and it swallowed --deadline; put --command ... last" in err


def test_submit_keeps_a_command_whose_own_flags_submit_was_also_given(tmp_path, capsys):
    # spark-submit has a --name of its own; submit's --name came before --command, so nothing was swallowed.
    store = tmp_path / "jobs.db"
    command = ["spark-submit", "--name", "app", "--class", "X", "app.jar", "--nodes", "2"]
    argv = ["submit", "--store", str(store), "--name", "x", "--tenant", "t", "--deadline", "2h", "--length-s", "60", "--nodes", "1"]
    assert main([*argv, "--command", *command]) == 0
    with SqliteJobStore(store) as jobs:
        (job,) = jobs.all_jobs()
    assert (job.name, job.tenant, job.nodes) == ("x", "t", 1)
    assert job.step.args == tuple(command)


def test_submit_names_the_flags_args_swallowed(tmp_path, capsys):
    argv = ["submit", "--store", str(tmp_path / "jobs.db"), "--jar", "app.jar", "--args", "in", "out", "--name", "x", "--tenant", "t", "--deadline", "2h"]
    err = _usage_error(argv, capsys)
    assert "--args takes the rest of the line, and it swallowed --name, --tenant, --deadline; put --args ... last" in err


def test_a_double_dash_in_the_command_is_the_commands_and_ends_the_flag_check(tmp_path, capsys):
    # The help says dashes are the command's: its own '--' too, and a --name after it is the command's.
    store = tmp_path / "jobs.db"
    argv = ["submit", "--store", str(store), "--name", "x", "--tenant", "t", "--deadline", "2h", "--length-s", "60",
            "--command", "spark-submit", "app.py", "--", "--name", "inner", "--"]  # fmt: skip
    assert main(argv) == 0
    with SqliteJobStore(store, read_only=True) as jobs:
        (job,) = jobs.all_jobs()
    assert job.step.args == ("spark-submit", "app.py", "--", "--name", "inner", "--")
    assert job.name == "x"
