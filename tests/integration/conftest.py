"""Fixtures for adapters tested against real parts: moto's server over HTTP on 127.0.0.1.

The server runs in this process (``ThreadedMotoServer``), so besides speaking HTTP to it with the
real boto3 client, tests can reach moto's backend objects. That is used for one thing only:
``set_step_state``, because moto never advances a step's state on its own.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest

from autoscaler.adapters.emr import emr_client

REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """A moto server on 127.0.0.1 (a free port) for the session; yields its endpoint URL.

    Fake credentials and the region are set for the whole session, and any AWS profile or
    endpoint from the environment is cleared, so no test can reach real AWS.
    """
    from moto.server import ThreadedMotoServer

    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.setenv("AWS_DEFAULT_REGION", REGION)
        for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EMR"):
            env.delenv(name, raising=False)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()  # port=0: the OS picked a free port
        try:
            yield f"http://{host}:{port}"
        finally:
            server.stop()


@pytest.fixture
def moto_endpoint(moto_server: str) -> str:
    """The moto endpoint URL with every backend emptied first (POST /moto-api/reset)."""
    request = urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200, f"moto reset answered HTTP {response.status}"
    return moto_server


@pytest.fixture
def emr(moto_endpoint: str):
    """An EMR client from the project's factory, pointed at the moto server."""
    return emr_client(region=REGION, endpoint_url=moto_endpoint, session=boto3.Session())


@pytest.fixture
def emr_cluster_id(request: pytest.FixtureRequest, emr) -> tuple[object, str]:
    """A running EMR cluster in moto made with RunJobFlow; returns (client, cluster id).

    Instance groups: MASTER 1, CORE 2 and TASK with ``request.param`` nodes (default 2);
    ``None`` makes a cluster without a TASK group. Parametrize with ``indirect=True``.
    """
    task_nodes = getattr(request, "param", 2)
    groups = [
        {"Name": "master", "InstanceRole": "MASTER", "InstanceType": "m5.xlarge", "InstanceCount": 1},
        {"Name": "core", "InstanceRole": "CORE", "InstanceType": "m5.xlarge", "InstanceCount": 2},
    ]
    if task_nodes is not None:
        groups.append({"Name": "task", "InstanceRole": "TASK", "InstanceType": "m5.xlarge", "InstanceCount": task_nodes})
    response = emr.run_job_flow(
        Name="autoscaler-test",
        ReleaseLabel="emr-6.15.0",
        JobFlowRole="EMR_EC2_DefaultRole",
        ServiceRole="EMR_DefaultRole",
        Instances={"InstanceGroups": groups, "KeepJobFlowAliveWhenNoSteps": True},
    )
    return emr, response["JobFlowId"]


def _moto_cluster(cluster_id: str):
    """moto's backend object for a cluster, found in whichever account/region holds it."""
    from moto.emr.models import emr_backends

    for account_id in list(emr_backends.keys()):
        for region in list(emr_backends[account_id].keys()):
            cluster = emr_backends[account_id][region].clusters.get(cluster_id)
            if cluster is not None:
                return cluster
    raise LookupError(f"moto: no cluster {cluster_id} in any account or region")


def _moto_step(cluster_id: str, step_id: str):
    """moto's backend object for a step of a cluster."""
    for step in list(_moto_cluster(cluster_id).steps):
        if step.id == step_id:
            return step
    raise LookupError(f"moto: cluster {cluster_id} has no step {step_id}")


def _set_step_state(cluster_id: str, step_id: str, state: str) -> None:
    """Advance a step to ``state`` in moto's backend, as EMR would when the step runs or ends.

    moto puts a cluster's first step in RUNNING and later ones in PENDING, then never changes
    them, and EMR has no API to set a step's state; so tests set it on the backend object.
    """
    _moto_step(cluster_id, step_id).state = state


@pytest.fixture
def set_step_state() -> Callable[[str, str, str], None]:
    """``set_step_state(cluster_id, step_id, state)``: how tests advance a step's state in moto."""
    return _set_step_state


def _set_step_times(cluster_id: str, step_id: str, start_s: float, end_s: float | None) -> None:
    """Set a step's Timeline StartDateTime and EndDateTime (Unix seconds; None: not ended) in moto's
    backend: moto stamps a step's start when it starts it and never ends one."""
    import datetime

    step = _moto_step(cluster_id, step_id)
    step.start_date_time = datetime.datetime.fromtimestamp(start_s, datetime.timezone.utc)
    step.end_date_time = None if end_s is None else datetime.datetime.fromtimestamp(end_s, datetime.timezone.utc)


@pytest.fixture
def set_step_times() -> Callable[[str, str, float, float | None], None]:
    """``set_step_times(cluster_id, step_id, start_s, end_s)``: a step's run as EMR's Timeline gives it, in moto."""
    return _set_step_times


def _backdate_task_group(cluster_id: str, created_s: float) -> None:
    """Make moto's TASK group (and so its instances) of ``cluster_id`` created at ``created_s``, Unix
    seconds: moto stamps it with the time of RunJobFlow, and a report covers hours before that."""
    import datetime

    from moto.emr.models import emr_backends

    for account_id in list(emr_backends.keys()):
        for region in list(emr_backends[account_id].keys()):
            backend = emr_backends[account_id][region]
            if cluster_id in backend.clusters:
                for group in backend.instance_groups.values():
                    if group.role == "TASK" and group.id in backend.clusters[cluster_id].instance_group_ids:
                        group.creation_date_time = datetime.datetime.fromtimestamp(created_s, datetime.timezone.utc)
                return
    raise LookupError(f"moto: no cluster {cluster_id} in any account or region")


@pytest.fixture
def backdate_task_group() -> Callable[[str, float], None]:
    """``backdate_task_group(cluster_id, created_s)``: when moto's TASK instances say they started."""
    return _backdate_task_group


@pytest.fixture
def moto_step() -> Callable[[str, str], object]:
    """``moto_step(cluster_id, step_id)``: moto's backend object for a step, to check what was sent."""
    return _moto_step


class ProcessLog:
    """A child process's stderr, read on a thread as it comes: every line, and its JSON log lines
    parsed as events (dicts). Tests wait on what the process logged, never on the wall clock."""

    def __init__(self, process: subprocess.Popen, on_event: Callable[[dict], None] | None = None) -> None:
        """``on_event``, if given, is called on the reading thread with each event as it is logged;
        what it raises is raised again by ``wait_for`` and ``finish``."""
        self.process = process
        self.on_event = on_event
        self._error: BaseException | None = None
        self.lines: list[str] = []
        self.events: list[dict] = []
        self._closed = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            with self._changed:
                self.lines.append(line)
                event = _event(line)
                if event is not None:
                    self.events.append(event)
                self._changed.notify_all()
            if event is not None and self.on_event is not None and self._error is None:
                try:
                    self.on_event(event)
                except BaseException as error:  # raised again on the test's thread
                    self._error = error
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def of(self, event: str) -> list[dict]:
        """The events named ``event`` logged so far."""
        with self._changed:
            return [e for e in self.events if e.get("event") == event]

    def count(self, event: str) -> int:
        return len(self.of(event))

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> bool:
        """Wait until ``condition()`` holds; False if the process closed stderr (ended) first.
        Raises AssertionError, with the last lines logged, when ``timeout_s`` passes first."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not condition():
                self._raise_on_event_error()
                if self._closed:
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    tail = "".join(self.lines[-20:])
                    raise AssertionError(f"waited {timeout_s:g} s for {what}; the process logged last:\n{tail}")
                self._changed.wait(left)
            return True

    def wait_for_count(self, event: str, count: int, timeout_s: float = 120.0) -> bool:
        """Wait until ``count`` events named ``event`` are logged; as ``wait_for``."""
        return self.wait_for(lambda: self.count(event) >= count, f"{count} {event!r} events", timeout_s)

    def finish(self, timeout_s: float = 120.0) -> int:
        """Wait for the process to end and its stderr to be read; returns its exit code. Raises
        AssertionError, with the last lines it logged, when it has not ended after ``timeout_s``."""
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            tail = "".join(self.lines[-30:])
            raise AssertionError(f"the process had not ended after {timeout_s:g} s; it logged last:\n{tail}") from None
        self._reader.join(timeout=timeout_s)
        self._raise_on_event_error()
        return code

    def _raise_on_event_error(self) -> None:
        if self._error is not None:
            raise AssertionError(f"on_event failed: {self._error!r}") from self._error

    @property
    def text(self) -> str:
        with self._changed:
            return "".join(self.lines)


def _event(line: str) -> dict | None:
    if not line.startswith("{"):
        return None
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None  # a line cut off by SIGKILL


class StepsRunForTheirLength:
    """EMR running the steps that a daemon in another process adds to a cluster in moto: each step
    completes when its job's length has passed on the daemon's simulated clock, which the test
    follows through the slots the daemon logs. ``ProcessLog(process, on_event=runner)``.

    A step is taken as started in the first slot logged after it appeared (a slot whose log line a
    kill cut off counts as the next one), and is completed before the first slot that starts at
    least its job's length (``lengths_s``, by job id) after that, as ``set_step_state`` does in the
    tests that drive the slots themselves.
    """

    def __init__(self, cluster_id: str, lengths_s: dict[str, float], slot_s: float, prefix: str = "autoscaler:") -> None:
        self.cluster_id = cluster_id
        self.lengths_s = lengths_s
        self.slot_s = slot_s
        self.prefix = prefix
        self.started_slot: dict[str, int] = {}
        self.completed = 0

    def __call__(self, event: dict) -> None:
        if event.get("event") != "slot":
            return
        next_slot_s = (event["slot"] + 1) * self.slot_s
        for step in list(_moto_cluster(self.cluster_id).steps):
            if not step.name.startswith(self.prefix):
                continue
            started = self.started_slot.setdefault(step.id, event["slot"])
            length_s = self.lengths_s[step.name[len(self.prefix):]]
            if step.state in ("PENDING", "RUNNING") and started * self.slot_s + length_s <= next_slot_s:
                step.state = "COMPLETED"
                self.completed += 1


@pytest.fixture
def flat_signal(tmp_path: Path) -> Callable[[float, int], Path]:
    """``flat_signal(value, hours)``: a CSV carbon signal (time,value; hourly from 2026-01-01 UTC) of
    one value, gCO2eq/kWh, for ``hours`` hours, written in ``tmp_path``."""
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)

    def write(value: float, hours: int) -> Path:
        rows = [f"{(start + datetime.timedelta(hours=h)).strftime('%Y-%m-%dT%H:%M:%SZ')},{value:g}" for h in range(hours)]
        path = tmp_path / f"flat-{value:g}-{hours}h.csv"
        path.write_text("time,value\n" + "\n".join(rows) + "\n")
        return path

    return write


@pytest.fixture
def job_slots_config(tmp_path: Path) -> Path:
    """A settings file for the paper's work model: a job is a node in every slot it touches, nodes
    usable at once (``work_model = "job-slots"``, ``provision_s = 0``). The tests of overload and of
    daemon = replay are written in it: a node per job is what makes Workload A overload 60 nodes."""
    path = tmp_path / "job-slots.toml"
    path.write_text('work_model = "job-slots"\nprovision_s = 0\n', encoding="utf-8")
    return path
