"""Inputs that are not regular files (a FIFO here) are refused before they are opened.

Opening a FIFO for reading blocks until a writer comes, so each command here hung with nothing
printed. Each is run as a subprocess with a generous timeout, so a regression fails the test
rather than hanging the suite. Expected, checkable by eye: exit 2, one line naming the flag,
the FIFO's path and "is a FIFO, not a regular file", and the FIFO left as it was.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

TIMEOUT_S = 60

COMMANDS = {
    "store restore SRC": (["store", "restore", "--store", "s.db", "{fifo}"], "SRC"),
    "store restore --store": (["store", "restore", "--store", "{fifo}", "b1.db"], "--store"),
    "store check": (["store", "check", "--store", "{fifo}"], "--store"),
    "store backup": (["store", "backup", "--store", "{fifo}", "x.db"], "--store"),
    "explain --decisions": (["explain", "--decisions", "{fifo}"], "--decisions"),
    "replay --carbon": (["replay", "--carbon", "{fifo}", "--carbon-unit", "gCO2eq/kWh", "--policy", "follow"], "--carbon"),
    "replay --trace": (["replay", "--trace", "{fifo}", "--policy", "follow"], "--trace"),
    "submit --config": (
        ["submit", "--config", "{fifo}", "--id", "a", "--name", "n", "--tenant", "t", "--deadline", "2h", "--length-s", "60", "--command", "echo"],
        "--config",
    ),
    "run --replay": (["run", "--replay", "{fifo}", "--dry-run"], "--replay"),
}


@pytest.fixture
def backup_b1(tmp_path):
    """b1.db: a real backup (a store with one job), so `store restore --store FIFO b1.db` gets past its source."""
    from autoscaler.adapters.sqlite_store import SqliteJobStore

    with SqliteJobStore(tmp_path / "made.db") as store:
        store.backup(tmp_path / "b1.db")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_fifo_given_as_an_input_is_refused_naming_the_flag(tmp_path, backup_b1, name):
    argv, flag = COMMANDS[name]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = [part.replace("{fifo}", str(fifo)) for part in argv]
    env = {**os.environ, "COLUMNS": "400"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "autoscaler", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"autoscaler {' '.join(args)} still running after {TIMEOUT_S} s (it opened the FIFO)")
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert flag in message and str(fifo) in message and "is a FIFO, not a regular file" in message, message
    # Nothing was put in its place, nor renamed aside.
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir() if "fifo" in p.name) == ["fifo"]


def test_a_character_device_is_named_as_one(tmp_path, capsys):
    """/dev/null reads as empty, so it passed for "no job store here"; it is a character device
    (``ls -l /dev/null`` starts with "c")."""
    from autoscaler.app.cli import main

    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert main(["store", "check", "--store", "/dev/null"]) == 2
    assert "--store /dev/null: is a character device, not a regular file" in capsys.readouterr().err
