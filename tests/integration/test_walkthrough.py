"""docs/walkthrough.md run as a reader runs it: its ```sh commands in order, in an empty folder that
stands for the repository root, with its ```toml block saved as local.toml where step 3 says so.

What differs from the page, and nothing else (``Reader.substituted``): the ports 5000 (moto), 8025
(the mail server) and 9464 (/healthz) become free ones; the page's cluster id becomes the one
``deploy/moto-cluster.py`` printed; ``.venv/bin/`` is this Python's bin folder and
``deploy/moto-cluster.py`` the repository's. What the reader does by hand is done the same way: a
command ending in ``&`` starts in the background (``kill %N`` stops the N-th with SIGTERM),
``export`` sets variables for the commands after it, and ``autoscaler run`` runs until Ctrl-C
(SIGINT), pressed after as many slot lines as the page says to wait for.

Each block's output is held against the ```text block the page shows after it, in what does not
depend on the clock (the jobs and their states, the steps, nodes and jobs released, the mail's
headers), and the end state against moto itself, read with boto3.
"""

from __future__ import annotations

import email
import email.message
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import pytest

from conftest import ProcessLog

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "walkthrough.md"
CLUSTER_SCRIPT = "deploy/moto-cluster.py"
VENV_BIN = Path(sys.executable).parent
"""Where the reader's ``.venv/bin/`` is here: the bin folder of the Python running the tests."""

CONFIG_NAME = "local.toml"
"""Where step 3 tells the reader to save the page's ```toml block."""

PAGE_PORTS = ("5000", "8025", "9464")
"""The page's ports: moto, the mail server, the daemon's /healthz and /metrics."""

SLOT_LINES_BEFORE_CTRL_C = {"dry run": 1, "run": 2}
"""What step 5 says: Ctrl-C after the dry run's first slot line, after the real run's second."""

WAIT_S = 180.0
"""How long any one condition may take: the real run's second slot comes at the next whole minute."""


@dataclass
class Block:
    """A fenced block of the page and the ```text block shown right after it (None: none)."""

    language: str
    body: str
    shown: str | None


def page_blocks(text: str) -> list[Block]:
    """The page's fenced blocks other than ```text, in order, each with the output the page shows for it."""
    found = re.findall(r"^```(\w*)\n(.*?)^```[ \t]*$", text, flags=re.MULTILINE | re.DOTALL)
    blocks = []
    for index, (language, body) in enumerate(found):
        if language != "text":
            after = found[index + 1] if index + 1 < len(found) else None
            blocks.append(Block(language, body, after[1] if after is not None and after[0] == "text" else None))
    return blocks


def commands(body: str) -> list[str]:
    """The commands of a ```sh block: one a line, a trailing backslash joining the next; comments left out."""
    joined = re.sub(r"[ \t]*\\\n[ \t]*", " ", body)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def creates_cluster(command: str) -> bool:
    return CLUSTER_SCRIPT.rsplit("/", 1)[1] in command and "--show" not in command


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def wait_until(condition: Callable[[], bool], what: str, process: subprocess.Popen | None = None) -> None:
    """Poll ``condition`` until it holds; AssertionError after WAIT_S, or at once if ``process`` ends first."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert process is None or process.poll() is None, f"{what}: the process ended first, status {process.returncode}"
        assert time.monotonic() < deadline, f"waited {WAIT_S:g} s for {what}"
        time.sleep(0.05)


def reader_environment(aws_folder: Path) -> dict[str, str]:
    """This process's environment as a new reader's shell has it: no AWS credentials, profile, region
    or endpoint (the page exports what it needs; AWS's shared files point at nothing, so nothing can
    reach real AWS), no AUTOSCALER_* settings, and Python's output buffered when redirected."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("AWS_", "AUTOSCALER_"))}
    env.pop("PYTHONUNBUFFERED", None)
    env["AWS_SHARED_CREDENTIALS_FILE"] = str(aws_folder / "credentials")
    env["AWS_CONFIG_FILE"] = str(aws_folder / "config")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    return env


@dataclass
class Typed:
    """A command as it ran: its text after substitution, what it printed (a background job: the file its
    output goes to, once it is up), and a daemon's log events."""

    command: str
    output: str
    events: list[dict] = field(default_factory=list)


class Reader:
    """One terminal in ``folder``, as the page's reader types into it."""

    def __init__(self, folder: Path, aws_folder: Path) -> None:
        self.folder = folder
        self.env = reader_environment(aws_folder)
        self.ports = {page: str(free_port()) for page in PAGE_PORTS}
        self.page_cluster_id: str | None = None
        self.cluster_id: str | None = None
        self.jobs: list[subprocess.Popen] = []  # started with &: %1, %2 ...
        self.daemons: list[subprocess.Popen] = []  # autoscaler run, until Ctrl-C

    def substituted(self, text: str) -> str:
        """``text`` with this machine's ports, cluster id, venv and script for the page's."""
        text = text.replace(".venv/bin/", shlex.quote(f"{VENV_BIN}/"))
        text = text.replace(CLUSTER_SCRIPT, shlex.quote(str(REPO / CLUSTER_SCRIPT)))
        for page, ours in self.ports.items():
            text = re.sub(rf"\b{page}\b", ours, text)
        if self.page_cluster_id and self.cluster_id:
            text = text.replace(self.page_cluster_id, self.cluster_id)
        return text

    def save(self, name: str, text: str) -> None:
        """Save a file as the reader does in their editor."""
        (self.folder / name).write_text(self.substituted(text), encoding="utf-8")

    def type(self, command: str, shown: str | None = None) -> Typed:
        """Run ``command`` as the reader does; ``shown``: what the page shows it prints, which a server
        started in the background is up once it has written (moto's "Running on" line)."""
        command = self.substituted(command)
        if command.startswith("export "):
            for word in shlex.split(command)[1:]:
                name, _, value = word.partition("=")
                self.env[name] = value
            return Typed(command, "")
        if command.endswith("&"):
            return self._start_job(command[:-1].strip(), None if shown is None else self.substituted(shown))
        stopped = re.fullmatch(r"kill((?: %\d+)+)", command)
        if stopped:
            for number in re.findall(r"\d+", stopped.group(1)):
                job = self.jobs[int(number) - 1]
                job.terminate()  # kill's signal, SIGTERM
                job.wait(timeout=WAIT_S)
            return Typed(command, "")
        if re.search(r"/autoscaler run\b", command):
            return self._run_until_ctrl_c(command)
        done = subprocess.run(
            ["bash", "-c", command], cwd=self.folder, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, timeout=WAIT_S,
        )  # fmt: skip
        assert done.returncode == 0, f"{command}\nexited {done.returncode}:\n{done.stdout}"
        if creates_cluster(command):
            self.cluster_id = done.stdout.strip()
        return Typed(command, done.stdout)

    def _start_job(self, command: str, shown: str | None) -> Typed:
        """A server started with ``&``: up once its port (the command names it) accepts connections and
        the file its output goes to holds every line of ``shown``."""
        process = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.folder, env=self.env, stdin=subprocess.DEVNULL)
        self.jobs.append(process)
        port = int(re.search(r"(?:-p |127\.0\.0\.1:)(\d+)", command).group(1))
        wait_until(lambda: accepts(port), f"{command!r} to listen on port {port}", process)
        output = self.folder / re.search(r"> *(\S+)", command).group(1)
        expected = [line.strip() for line in (shown or "").splitlines() if line.strip()]
        wait_until(lambda: all(line in output.read_text(encoding="utf-8") for line in expected), f"{expected} in {output.name}", process)
        return Typed(command, output.read_text(encoding="utf-8"))

    def _run_until_ctrl_c(self, command: str) -> Typed:
        process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"], cwd=self.folder, env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.daemons.append(process)
        log = ProcessLog(process)
        lines = SLOT_LINES_BEFORE_CTRL_C["dry run" if "--dry-run" in command else "run"]
        assert log.wait_for_count("slot", lines, WAIT_S), f"{command} ended before {lines} slot lines:\n{log.text}"
        process.send_signal(signal.SIGINT)
        assert log.finish(WAIT_S) == 0, f"{command} did not exit 0 on Ctrl-C:\n{log.text}"
        return Typed(command, log.text, log.events)

    def stop_everything(self) -> None:
        """SIGTERM to every process still running (a failed test's), SIGKILL to any still there after 30 s."""
        for process in self.daemons + self.jobs:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=30)


@pytest.fixture
def reader(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    reader = Reader(root, tmp_path)
    yield reader
    reader.stop_everything()


# -- what an output says that does not depend on the clock -------------------------------------------------


def job_states(table: str) -> dict[str, str]:
    """{job id: state} from ``autoscaler jobs``'s table."""
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in table.splitlines() if line.startswith("│")]
    return {row[0]: row[4] for row in rows}


def slot_figures(log: str) -> list[dict[str, str]]:
    """Per slot line of a daemon's log, console or JSON: its dry_run, jobs_released, nodes_requested, queue_depth."""
    keys = ("dry_run", "jobs_released", "nodes_requested", "queue_depth")
    lines = [line for line in log.splitlines() if re.search(r'\] slot\s|"event": "slot"', line)]
    return [{key: re.search(rf'\b{key}"?[=:] ?(\w+)', line).group(1).lower() for key in keys} for line in lines]


def facts(command: str, output: str) -> dict:
    """What ``output`` of ``command`` says that the page's output must say too."""
    if "moto_server" in command:
        return {"listening": re.findall(r"Running on (\S+)", output)}
    if creates_cluster(command):
        return {"cluster id": output.strip()}
    if "--show" in command:
        return {
            "task group": re.findall(r"\d+ requested, \d+ running", output),
            "steps": sorted(re.findall(r"^ +s-\w+ +(\w+) +(\S+)$", output, flags=re.MULTILINE)),
        }
    if "autoscaler submit" in command:
        return {"queued": re.findall(r"^queued: (\S+)$", output, flags=re.MULTILINE)}
    if "autoscaler jobs" in command:
        return {"states": job_states(output)}
    if "autoscaler run" in command:
        return {"slot lines": slot_figures(output)}
    if "autoscaler explain" in command:
        return {"released": re.findall(r"^released .*$", output, flags=re.MULTILINE)}
    if "autoscaler report" in command:
        return {
            "title": re.findall(r"^# Energy report: .*$", output, flags=re.MULTILINE),
            "measured": re.findall(r"nothing measured", output),
            "emailed": re.findall(r"^emailed to .*$", output, flags=re.MULTILINE),
        }
    if command.startswith("grep"):
        return {"lines": [line for line in output.splitlines() if "boundary=" not in line]}
    return {}


def block_facts(typed: list[Typed], output: str) -> dict:
    """The facts of every command of a block, each read from ``output``, the whole block's."""
    merged: dict = {}
    for one in typed:
        merged.update(facts(one.command, output))
    return merged


def mail_in(log: str) -> email.message.Message:
    """The one mail aiosmtpd's debugging handler printed in ``log``, parsed (its X-Peer line is a header)."""
    bodies = re.findall(r"^---------- MESSAGE FOLLOWS ----------\n(.*?)^------------ END MESSAGE ------------$", log, flags=re.M | re.S)
    assert len(bodies) == 1, f"expected one mail, the server printed {len(bodies)}"
    return email.message_from_string(bodies[0])


def store_files(reader: Reader) -> dict[str, bytes]:
    """The bytes of the store and of every file beside it named after it (its WAL, its marker)."""
    store = re.search(r'^store_path = "([^"]+)"', (reader.folder / CONFIG_NAME).read_text(encoding="utf-8"), flags=re.MULTILINE).group(1)
    return {path.name: path.read_bytes() for path in sorted(reader.folder.glob(f"{store}*"))}


def only(ran: list[Typed], pattern: str) -> Typed:
    """The one command run so far that matches ``pattern``."""
    found = [t for t in ran if re.search(pattern, t.command)]
    assert len(found) == 1, f"expected one command matching {pattern!r}, the page has {len(found)}"
    return found[0]


def check_before_clean_up(reader: Reader, ran: list[Typed]) -> None:
    """What the page says happened, against moto (boto3) and the mail, while both are still there."""
    live = only(ran, r"autoscaler run --config \S+$")
    slots = [e for e in live.events if e["event"] == "slot"]
    assert (slots[0]["dry_run"], slots[0]["jobs_released"], slots[0]["nodes_requested"]) == (False, 2, 2)
    assert [e["signal"] for e in live.events if e["event"] == "stopping"] == ["SIGINT"]
    # EMR (moto) has a step per released job, named autoscaler:<job id>, and the TASK group asked for 2 nodes.
    emr = boto3.client(
        "emr", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{reader.ports['5000']}",
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )  # fmt: skip
    steps = emr.list_steps(ClusterId=reader.cluster_id)["Steps"]
    assert sorted(step["Name"] for step in steps) == ["autoscaler:etl-1", "autoscaler:etl-2"]
    groups = emr.list_instance_groups(ClusterId=reader.cluster_id)["InstanceGroups"]
    assert [g["RequestedInstanceCount"] for g in groups if g["InstanceGroupType"] == "TASK"] == [2]
    # explain printed the last slot's decision as the daemon logged it.
    explained = only(ran, r"autoscaler explain").output
    assert explained.startswith(f"slot {slots[-1]['slot']}: ") and slots[-1]["why"] in explained
    # The report's mail arrived, to the config's recipient, with the PNG attached.
    mail_log = re.search(r"> *(\S+)", only(ran, r"-m aiosmtpd ").command).group(1)
    mail = mail_in((reader.folder / mail_log).read_text(encoding="utf-8"))
    assert mail["To"] == "ops@example.com" and mail["Subject"] == f"Energy report: EMR cluster {reader.cluster_id}"
    attached = [part for part in mail.walk() if part.get_filename() == "energy.png"]
    assert len(attached) == 1 and attached[0].get_content_type() == "image/png"
    assert attached[0].get_payload(decode=True).startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.long
def test_the_walkthrough_runs_as_written(reader: Reader):
    ran: list[Typed] = []
    store_before = store_after = None
    blocks = page_blocks(PAGE.read_text(encoding="utf-8"))
    (config,) = [block.body for block in blocks if block.language == "toml"]
    reader.page_cluster_id = re.search(r'^id = "(j-\w+)"', config, flags=re.MULTILINE).group(1)
    for block in blocks:
        if block.language == "toml":
            reader.save(CONFIG_NAME, block.body)
            continue
        assert block.language == "sh", f"a ```{block.language} block, which the reader would not know what to do with"
        typed = []
        typing = commands(block.body)
        for command in typing:
            if command.startswith("kill "):
                check_before_clean_up(reader, ran)
            dry_run = "autoscaler run" in command and "--dry-run" in command
            if dry_run:
                store_before = store_files(reader)
            # What the page shows after a block is what the block printed, up to its last command.
            typed.append(reader.type(command, block.shown if command == typing[-1] else None))
            if dry_run:
                store_after = store_files(reader)
        ran += typed
        if block.shown is not None:
            printed = "".join(t.output for t in typed)
            assert block_facts(typed, printed) == block_facts(typed, reader.substituted(block.shown)), (
                f"the page shows for {[t.command for t in typed]}:\n{block.shown}\nit printed:\n{printed}"
            )
    assert [re.search(r"--id (\S+)", t.command).group(1) for t in ran if "autoscaler submit" in t.command] == ["etl-1", "etl-2", "nightly"]
    # The dry run decided a slot and left the store byte for byte as it was.
    assert [e["dry_run"] for e in only(ran, r"autoscaler run .*--dry-run").events if e["event"] == "slot"] == [True]
    assert store_before and store_after == store_before
    # Clean-up stopped both servers and left the folder empty, as it was.
    assert len(reader.jobs) == 2 and all(job.poll() is not None for job in reader.jobs)
    assert sorted(path.name for path in reader.folder.iterdir()) == []
