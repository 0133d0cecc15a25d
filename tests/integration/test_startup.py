"""Start-up against moto's EMR over HTTP: errors that pass (throttling, 5xx, no connection) are waited
out for the start-up wait, each try logged; a wrong cluster or region stops at once; and what
``autoscaler run`` exits with for each (75 and 2, the codes deploy/autoscaler.service restarts by).

Throttling is injected into the real boto3 client by a botocore ``before-send`` hook on the session
the clients are made from, as in test_aws_faults.py: the hook answers in place of the server. Both
backoffs are shrunk (botocore's through its backoff scale, start-up's through ``first_backoff_s``),
and no assertion depends on how long anything took: counts follow from botocore's 6 sends per call.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator

import boto3
import pytest
from botocore.retries.standard import ExponentialBackoff
from structlog.testing import capture_logs

from autoscaler.adapters.emr import EmrCluster
from autoscaler.app import compose
from autoscaler.app.cli import main
from autoscaler.core.errors import ClusterError, ConfigError, OutageError
from autoscaler.core.ports import TaskGroup

from conftest import REGION
from test_aws_faults import error_response

SENDS_PER_CALL = 6
"""botocore's standard mode with the project's RETRIES: the first send and 5 retries."""


@pytest.fixture
def quick_backoff(monkeypatch):
    monkeypatch.setattr(
        ExponentialBackoff, "_DEFAULT_BACKOFF_CONFIG", {"throttling_base_scale": 0.001, "non_throttling_base_scale": 0.00005}
    )


class FirstSends:
    """before-send hook: answers the first ``n`` sends (None: every send) with ``status`` and ``code``
    in place of EMR, and counts every send by operation."""

    def __init__(self, n: int | None, status: int = 400, code: str = "ThrottlingException") -> None:
        self.n, self.status, self.code = n, status, code
        self.sent: list[str] = []
        self.injected = 0

    def __call__(self, request, **_):
        self.sent.append(request.headers.get("X-Amz-Target", b"").decode().rsplit(".", 1)[-1])
        if self.n is None or self.injected < self.n:
            self.injected += 1
            return error_response(request, self.status, self.code)
        return None


def hooked_session(hook) -> boto3.Session:
    session = boto3.Session()
    session.events.register("before-send.emr", hook)
    return session


def write_config(tmp_path, cluster_id: str, endpoint: str, region: str = REGION) -> str:
    path = tmp_path / "config.toml"
    path.write_text(
        f'policy = "gcp-u"\nslot_s = 300\nstore_path = "{tmp_path / "jobs.db"}"\nlog_format = "json"\nhealth_port = 0\n'
        f'[cluster]\nid = "{cluster_id}"\nregion = "{region}"\nendpoint_url = "{endpoint}"\nmax_nodes = 10\n',
        encoding="utf-8",
    )
    return str(path)


def settings_for(tmp_path, cluster_id: str, endpoint: str, region: str = REGION):
    return compose.settings(write_config(tmp_path, cluster_id, endpoint, region))


def retries(events: list[dict]) -> list[dict]:
    return [e for e in events if e["event"] == "startup_retry"]


# --- errors that pass are waited out -------------------------------------------------------


@pytest.mark.parametrize("throttled", [SENDS_PER_CALL - 1, 20])
def test_start_up_waits_out_the_first_throttled_calls(emr_cluster_id, moto_endpoint, quick_backoff, tmp_path, throttled):
    client, cluster_id = emr_cluster_id
    hook = FirstSends(throttled)

    with capture_logs() as events:
        cluster = compose.emr_cluster(
            settings_for(tmp_path, cluster_id, moto_endpoint), startup_wait_s=600, first_backoff_s=0.001, session=hooked_session(hook)
        )

    (task_id,) = [g["Id"] for g in client.list_instance_groups(ClusterId=cluster_id)["InstanceGroups"] if g["InstanceGroupType"] == "TASK"]
    assert isinstance(cluster, EmrCluster) and cluster.task_group() == TaskGroup(task_id, 2, 2)
    # Each start-up try is one DescribeCluster of up to 6 sends: 20 throttled sends fail 3 tries
    # (18 sends) and 2 sends of the 4th, which then goes through; 5 are taken by botocore alone.
    failed_tries = throttled // SENDS_PER_CALL
    assert hook.injected == throttled
    assert hook.sent[: throttled + 2] == ["DescribeCluster"] * (throttled + 1) + ["ListInstanceGroups"]
    logged = retries(events)
    assert [e["attempt"] for e in logged] == list(range(1, failed_tries + 1))
    assert all("EMR DescribeCluster on cluster" in e["error"] and "ThrottlingException" in e["error"] for e in logged)
    assert all(0 <= e["wait_s"] <= compose.STARTUP_MAX_BACKOFF_S for e in logged)
    assert len([e for e in events if e["event"] == "aws_call_failed"]) == throttled


@pytest.mark.parametrize(
    ("status", "code"), [(400, "ThrottlingException"), (503, "ServiceUnavailable"), (500, "InternalServerException")]
)
def test_an_outage_that_outlasts_the_wait_is_an_outage_error(emr_cluster_id, moto_endpoint, quick_backoff, tmp_path, status, code):
    _, cluster_id = emr_cluster_id
    hook = FirstSends(None, status, code)

    with capture_logs() as events, pytest.raises(OutageError) as raised:
        compose.emr_cluster(settings_for(tmp_path, cluster_id, moto_endpoint), startup_wait_s=0.5, first_backoff_s=0.001, session=hooked_session(hook))

    error = raised.value
    assert error.exit_status == 75
    message = str(error)
    assert message.startswith(f"EMR cluster {cluster_id} in region us-east-1: still failing after ")
    assert f"the start-up wait is 0.5 s), last with: EMR DescribeCluster on cluster {cluster_id} failed: {code}" in message
    # Every try was logged but the last; every try sent DescribeCluster 6 times.
    assert error.tries == len(retries(events)) + 1 >= 1
    assert set(hook.sent) == {"DescribeCluster"} and len(hook.sent) == SENDS_PER_CALL * error.tries


def test_an_endpoint_that_refuses_connections_is_an_outage_not_a_bad_config(emr_cluster_id, quick_backoff, tmp_path):
    _, cluster_id = emr_cluster_id
    with socket.socket() as probe:  # a port that was free a moment ago: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    with pytest.raises(OutageError, match=r"last with: EMR DescribeCluster on cluster j-\w+ failed: Could not connect to the endpoint URL"):
        compose.emr_cluster(settings_for(tmp_path, cluster_id, f"http://127.0.0.1:{port}"), startup_wait_s=0.5, first_backoff_s=0.001)


# --- a wrong cluster or region stops at once ------------------------------------------------


def test_a_wrong_cluster_id_is_not_retried(moto_endpoint, quick_backoff, tmp_path):
    hook = FirstSends(0)

    with capture_logs() as events, pytest.raises(ClusterError, match=r"^cluster.id = 'j-TYPO12345': EMR has no such cluster in region us-east-1"):
        compose.emr_cluster(settings_for(tmp_path, "j-TYPO12345", moto_endpoint), startup_wait_s=600, session=hooked_session(hook))

    assert hook.sent == ["DescribeCluster"]  # neither botocore nor start-up tried again
    assert retries(events) == []


def test_access_denied_is_not_retried_and_names_the_permission(emr_cluster_id, moto_endpoint, quick_backoff, tmp_path):
    _, cluster_id = emr_cluster_id
    hook = FirstSends(None, 400, "AccessDeniedException")

    with pytest.raises(ClusterError, match=r"needs elasticmapreduce:DescribeCluster on the cluster's ARN"):
        compose.emr_cluster(settings_for(tmp_path, cluster_id, moto_endpoint), startup_wait_s=600, session=hooked_session(hook))

    assert hook.sent == ["DescribeCluster"]


@pytest.mark.parametrize(("region", "suggested"), [("us-esat-1", "us-east-1"), ("eu-wset-1", "eu-west-1"), ("useast1", "us-east-1")])
def test_an_unknown_region_is_refused_before_any_call(moto_endpoint, tmp_path, region, suggested):
    hook = FirstSends(0)

    with pytest.raises(ConfigError) as raised:
        compose.emr_cluster(settings_for(tmp_path, "j-ANY", moto_endpoint, region=region), session=hooked_session(hook))

    assert not isinstance(raised.value, ClusterError)
    assert str(raised.value).startswith(f"cluster.region = '{region}': not a region botocore ")
    assert f"did you mean '{suggested}'" in str(raised.value)
    assert hook.sent == []


def test_the_region_from_the_environment_is_checked_too(moto_endpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-esat-1")
    path = tmp_path / "config.toml"
    path.write_text(f'store_path = "{tmp_path / "jobs.db"}"\n[cluster]\nid = "j-ANY"\nendpoint_url = "{moto_endpoint}"\n', encoding="utf-8")
    hook = FirstSends(0)

    with pytest.raises(ConfigError, match=r"^the AWS region \(AWS_DEFAULT_REGION, .*cluster.region is not set\) = 'us-esat-1'.*did you mean 'us-east-1'"):
        compose.emr_cluster(compose.settings(path), session=hooked_session(hook))

    assert hook.sent == []


# --- what `autoscaler run` exits with -------------------------------------------------------


class _Throttling(http.server.BaseHTTPRequestHandler):
    """An EMR endpoint that answers every request as throttled."""

    requests = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).requests += 1
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def throttling_endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Throttling)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def logged_events(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_run_exits_75_when_emr_throttles_for_the_whole_wait(moto_server, throttling_endpoint, quick_backoff, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(compose, "STARTUP_WAIT_S", 0.5)
    monkeypatch.setattr(compose, "STARTUP_FIRST_BACKOFF_S", 0.001)
    _Throttling.requests = 0

    code = main(["run", "--config", write_config(tmp_path, "j-2AXXXXXXGAPLF", throttling_endpoint)])

    err = capsys.readouterr().err
    assert code == 75, err
    (line,) = [line for line in err.splitlines() if line.startswith("autoscaler: error:")]
    assert line.startswith("autoscaler: error: EMR cluster j-2AXXXXXXGAPLF in region us-east-1: still failing after ")
    assert "the start-up wait is 0.5 s), last with: EMR DescribeCluster on cluster j-2AXXXXXXGAPLF failed: ThrottlingException: Rate exceeded" in line
    logged = [e for e in logged_events(err) if e["event"] == "startup_retry"]
    assert _Throttling.requests == SENDS_PER_CALL * (len(logged) + 1)
    assert all({"attempt", "wait_s", "error"} <= e.keys() for e in logged)
    assert not (tmp_path / "jobs.db").exists()  # nothing was opened before the cluster answered


def test_run_exits_2_for_a_wrong_cluster_id_naming_the_setting(moto_endpoint, tmp_path, capsys):
    code = main(["run", "--config", write_config(tmp_path, "j-TYPO12345", moto_endpoint)])

    err = capsys.readouterr().err
    assert code == 2, err
    assert "autoscaler: error: cluster.id = 'j-TYPO12345': EMR has no such cluster in region us-east-1 (cluster.region = 'us-east-1')" in err
    assert "startup_retry" not in err and "Traceback" not in err


def test_run_exits_2_for_an_unknown_region_naming_the_setting(moto_endpoint, tmp_path, capsys):
    code = main(["run", "--config", write_config(tmp_path, "j-2AXXXXXXGAPLF", moto_endpoint, region="us-esat-1")])

    err = capsys.readouterr().err
    assert code == 2, err
    assert "autoscaler: error: cluster.region = 'us-esat-1': not a region botocore" in err and "did you mean 'us-east-1'" in err


def test_a_damaged_store_is_refused_before_emr_is_asked_even_during_an_outage(moto_server, throttling_endpoint, tmp_path, monkeypatch, capsys):
    from autoscaler.adapters.sqlite_store import SqliteJobStore
    from autoscaler.core.model import Job, StepSpec

    monkeypatch.setattr(compose, "STARTUP_WAIT_S", 60.0)  # an outage this long would end in exit 75
    config = write_config(tmp_path, "j-2AXXXXXXGAPLF", throttling_endpoint)
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        store.submit(Job("nightly", "n", "t", 0.0, 900.0, 300.0, StepSpec(args=("true",))))
        store.commit_slot(0, {"last_slot": 0}, {}, {"slot": 0, "capacity": 1.0, "nodes": 1})
        store._conn.execute("UPDATE controller_state SET state = 'not json {'")
    _Throttling.requests = 0
    code = main(["run", "--config", config])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "the controller state is damaged in the job store" in err and "store restore" in err
    assert _Throttling.requests == 0  # EMR was never asked
