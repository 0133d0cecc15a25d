"""``autoscaler serve`` with the real boto3 client over HTTP on 127.0.0.1, in front of moto's EMR:
steps added through it are queued jobs, described as deferred until the daemon releases them, then
as EMR's own steps; cancels, retries, credentials and tenants as a pipeline would meet them."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ReadTimeoutError

from autoscaler.adapters.emr import EmrCluster, emr_client
from autoscaler.adapters.fakes import SimulatedClock
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.config import load_settings
from autoscaler.app.daemon import SlotRunner
from autoscaler.app.serve import gateway_from_settings
from autoscaler.app.serve_http import Listener, build_app
from autoscaler.core.controller import ControllerConfig

from conftest import REGION

AIRFLOW_KEY, AIRFLOW_SECRET = "AKIAAIRFLOWPIPELINES", "airflow-secret-0123456789"
SEARCH_KEY, SEARCH_SECRET = "AKIASEARCHTEAM000001", "search-secret-9876543210"


def spark_step(name: str, **properties: str) -> dict:
    """A step as an Airflow DAG writes one (command-runner.jar running spark-submit)."""
    jar_step = {"Jar": "command-runner.jar", "Args": ["spark-submit", "--deploy-mode", "cluster", f"s3://bucket/{name}.py"]}
    if properties:
        jar_step["Properties"] = [{"Key": f"autoscaler.{key}", "Value": value} for key, value in properties.items()]
    return {"Name": name, "ActionOnFailure": "CONTINUE", "HadoopJarStep": jar_step}


@pytest.fixture
def door(emr_cluster_id, moto_endpoint, tmp_path, monkeypatch):
    """serve on a free port of 127.0.0.1 for a moto cluster, with two callers: the Airflow pipelines
    (tenant ads; a 10-minute default length) and the search team (tenants search and search-batch)."""
    client, cluster_id = emr_cluster_id
    (tmp_path / "search.secret").write_text(SEARCH_SECRET + "\n")
    monkeypatch.setenv("AIRFLOW_EMR_SECRET", AIRFLOW_SECRET)
    config = tmp_path / "autoscaler.toml"
    config.write_text(
        f"""store_path = "{tmp_path / 'jobs.db'}"
[cluster]
id = "{cluster_id}"
region = "{REGION}"
endpoint_url = "{moto_endpoint}"
[serve]
port = 0
[[serve.callers]]
access_key_id = "{AIRFLOW_KEY}"
secret_env = "AIRFLOW_EMR_SECRET"
tenants = ["ads"]
deadline = "4h"
length_s = 600
[[serve.callers]]
access_key_id = "{SEARCH_KEY}"
secret_file = "{tmp_path / 'search.secret'}"
tenants = ["search", "search-batch"]
"""
    )
    settings = load_settings(config)
    store = SqliteJobStore(settings.store_path)
    gateway, secrets = gateway_from_settings(settings, store, emr_client(REGION, moto_endpoint, boto3.Session()))
    listener = Listener(build_app(gateway, secrets), "127.0.0.1", 0).start()

    def client_for(key: str = AIRFLOW_KEY, secret: str = AIRFLOW_SECRET, **config):
        return boto3.client(
            "emr", endpoint_url=listener.url, region_name=REGION, aws_access_key_id=key, aws_secret_access_key=secret,
            config=Config(retries={"mode": "standard", "max_attempts": 3}, **config),
        )  # fmt: skip

    try:
        yield SimpleNamespace(
            url=listener.url, cluster_id=cluster_id, emr=client, store=store, client_for=client_for, settings=settings, gateway=gateway
        )
    finally:
        listener.stop()
        store.close()


def release_due_jobs(door, now_s: float) -> None:
    """One slot of the daemon (hold) on the store and the moto cluster at ``now_s``."""
    config = ControllerConfig(slot_s=300.0, deadline_slots=2, max_nodes=10)
    runner = SlotRunner(config=config, store=door.store, cluster=EmrCluster(door.emr, door.cluster_id), clock=SimulatedClock(now_s))
    runner.run_slot()


def test_added_steps_are_queued_jobs_described_as_deferred_with_their_deadline(door):
    client = door.client_for()
    ids = client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("daily-etl"), spark_step("hourly", deadline="90m", length_s="300")])["StepIds"]

    assert len(ids) == 2 and len(set(ids)) == 2 and all(i.startswith("s-") for i in ids)
    jobs = {job.job_id: job for job in door.store.all_jobs()}
    assert set(jobs) == set(ids)
    etl, hourly = jobs[ids[0]], jobs[ids[1]]
    assert (etl.name, etl.tenant, etl.state, etl.length_s, etl.length_source) == ("daily-etl", "ads", "queued", 600.0, "default")
    assert etl.deadline_s - etl.submit_s == pytest.approx(4 * 3600)  # the caller's default deadline
    assert hourly.deadline_s - hourly.submit_s == pytest.approx(90 * 60) and hourly.length_s == 300.0
    assert etl.step.args == ("spark-submit", "--deploy-mode", "cluster", "s3://bucket/daily-etl.py")
    assert door.emr.list_steps(ClusterId=door.cluster_id)["Steps"] == []  # nothing on EMR yet

    step = client.describe_step(ClusterId=door.cluster_id, StepId=ids[1])["Step"]
    assert step["Id"] == ids[1] and step["Name"] == "hourly" and step["Status"]["State"] == "PENDING"
    message = step["Status"]["StateChangeReason"]["Message"]
    assert message.startswith("deferred by the autoscaler") and time.strftime("%H:%M", time.gmtime(hourly.deadline_s)) in message
    listed = client.list_steps(ClusterId=door.cluster_id)["Steps"]
    assert [s["Id"] for s in listed] == [ids[1], ids[0]]  # newest first, as EMR lists


def test_a_released_step_is_described_as_emr_runs_it_under_the_id_serve_gave(door, set_step_state):
    client = door.client_for()
    (step_id,) = client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("urgent", deadline="12m", length_s="600")])["StepIds"]
    release_due_jobs(door, time.time())

    job = door.store.job(step_id)
    assert job.state == "released" and job.step_id is not None and job.step_id != step_id
    (real,) = door.emr.list_steps(ClusterId=door.cluster_id)["Steps"]
    assert real["Id"] == job.step_id
    step = client.describe_step(ClusterId=door.cluster_id, StepId=step_id)["Step"]
    assert (step["Id"], step["Name"], step["Status"]["State"]) == (step_id, "urgent", real["Status"]["State"])
    set_step_state(door.cluster_id, job.step_id, "COMPLETED")
    # The waiter Airflow's EmrAddStepsOperator(wait_for_completion=True) uses.
    client.get_waiter("step_complete").wait(ClusterId=door.cluster_id, StepId=step_id, WaiterConfig={"Delay": 1, "MaxAttempts": 3})
    assert client.describe_step(ClusterId=door.cluster_id, StepId=step_id)["Step"]["Status"]["State"] == "COMPLETED"


def test_cancel_before_release_withdraws_the_job_even_from_a_daemon_that_already_read_it(door):
    client = door.client_for()
    keep, cancel = client.add_job_flow_steps(
        JobFlowId=door.cluster_id, Steps=[spark_step("keep", deadline="12m", length_s="600"), spark_step("drop", deadline="12m", length_s="600")]
    )["StepIds"]
    config = ControllerConfig(slot_s=300.0, deadline_slots=2, max_nodes=10)
    runner = SlotRunner(config=config, store=door.store, cluster=EmrCluster(door.emr, door.cluster_id), clock=SimulatedClock(time.time()))
    runner.start()  # the daemon has read both jobs as queued

    (info,) = client.cancel_steps(ClusterId=door.cluster_id, StepIds=[cancel])["CancelStepsInfoList"]
    assert (info["StepId"], info["Status"]) == (cancel, "SUBMITTED")
    runner.run_slot()

    assert door.store.job(cancel).state == "cancelled" and door.store.job(keep).state == "released"
    on_emr = [s["Name"] for s in door.emr.list_steps(ClusterId=door.cluster_id)["Steps"]]
    assert on_emr == [f"autoscaler:{keep}"]
    assert client.describe_step(ClusterId=door.cluster_id, StepId=cancel)["Step"]["Status"]["State"] == "CANCELLED"
    # Released: the cancel goes to EMR and its answer comes back under serve's id. moto does not
    # implement CancelSteps (HTTP 500), so what is checked is EMR's refusal, relayed in one line.
    again = client.cancel_steps(ClusterId=door.cluster_id, StepIds=[keep])["CancelStepsInfoList"][0]
    assert (again["StepId"], again["Status"]) == (keep, "FAILED")
    assert again["Reason"].startswith(f"released as EMR step {door.store.job(keep).step_id}; EMR refused the cancel: ")
    assert "<" not in again["Reason"]


def test_a_retried_call_returns_the_same_ids_and_stores_each_step_once(door):
    client = door.client_for()
    first_answer = {}

    def lose_the_first_answer(request, **_):
        # The request reaches serve (its steps are stored), but the answer is lost: botocore retries.
        if first_answer:
            return None
        sent = urllib.request.Request(request.url, data=request.body, headers=dict(request.headers.items()), method="POST")
        with urllib.request.urlopen(sent, timeout=30) as response:
            first_answer.update(json.loads(response.read()))
        raise ReadTimeoutError(endpoint_url=request.url)

    client.meta.events.register("before-send.emr.AddJobFlowSteps", lose_the_first_answer)
    ids = client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("a"), spark_step("b")])["StepIds"]

    assert first_answer["StepIds"] == ids
    assert sorted(job.job_id for job in door.store.all_jobs()) == sorted(ids)
    other = client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("a")])["StepIds"]
    assert other[0] not in ids and len(door.store.all_jobs()) == 3  # a new call is a new step


@pytest.mark.parametrize(
    "key, secret, code",
    [
        (AIRFLOW_KEY, "not-the-secret", "InvalidSignatureException"),
        ("AKIAUNKNOWNCALLER000", AIRFLOW_SECRET, "UnrecognizedClientException"),
    ],
)
def test_a_wrong_credential_is_refused_with_403_and_nothing_stored(door, key, secret, code):
    client = door.client_for(key, secret)
    with pytest.raises(ClientError) as refused:
        client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("x")])
    assert refused.value.response["Error"]["Code"] == code
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert door.store.all_jobs() == []


def test_an_unsigned_request_is_refused_with_403(door):
    body = json.dumps({"JobFlowId": door.cluster_id, "Steps": [spark_step("x")]}).encode()
    request = urllib.request.Request(
        door.url, data=body, method="POST",
        headers={"X-Amz-Target": "ElasticMapReduce.AddJobFlowSteps", "Content-Type": "application/x-amz-json-1.1"},
    )  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403
    assert json.loads(refused.value.read())["__type"] == "MissingAuthenticationTokenException"
    assert door.store.all_jobs() == []


def test_a_caller_acts_only_for_its_own_tenants(door):
    airflow, search = door.client_for(), door.client_for(SEARCH_KEY, SEARCH_SECRET)
    with pytest.raises(ClientError) as refused:
        airflow.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("ok"), spark_step("sneak", tenant="search")])
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    assert door.store.all_jobs() == []  # the whole call is refused, its good step included

    (ads_step,) = airflow.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("ads-job")])["StepIds"]
    (batch_step,) = search.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("index", tenant="search-batch", length_s="60")])["StepIds"]
    assert door.store.job(batch_step).tenant == "search-batch"
    for call in (
        lambda: search.cancel_steps(ClusterId=door.cluster_id, StepIds=[batch_step, ads_step]),
        lambda: search.describe_step(ClusterId=door.cluster_id, StepId=ads_step),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    assert door.store.job(ads_step).state == "queued" and door.store.job(batch_step).state == "queued"
    assert [s["Id"] for s in search.list_steps(ClusterId=door.cluster_id)["Steps"]] == [batch_step]


def test_steps_that_cannot_be_deferred_are_refused_by_name_and_nothing_is_stored(door):
    client = door.client_for(SEARCH_KEY, SEARCH_SECRET)  # no default length: a new name must say its length
    cases = [
        ([spark_step("no-length")], "autoscaler.length_s"),
        ([dict(spark_step("stop", length_s="60"), ActionOnFailure="TERMINATE_CLUSTER")], "ActionOnFailure 'TERMINATE_CLUSTER'"),
        ([spark_step("prop", length_s="60", memory="4g")], "property 'autoscaler.memory'"),
        ([spark_step("late", length_s="7200", deadline="1h")], "deadline"),
        ([spark_step("nan", length_s="soon")], "autoscaler.length_s: expected a number"),
    ]
    for steps, named in cases:
        with pytest.raises(ClientError) as refused:
            client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=steps)
        assert refused.value.response["Error"]["Code"] == "InvalidRequestException"
        assert named in refused.value.response["Error"]["Message"]
    with pytest.raises(ClientError, match="defers steps for cluster"):
        client.add_job_flow_steps(JobFlowId="j-ANOTHERCLUSTER", Steps=[spark_step("x", length_s="60")])
    assert door.store.all_jobs() == []


def test_read_only_calls_pass_through_to_emr_and_writes_do_not(door):
    client = door.client_for()
    assert client.describe_cluster(ClusterId=door.cluster_id)["Cluster"]["Id"] == door.cluster_id
    groups = client.list_instance_groups(ClusterId=door.cluster_id)["InstanceGroups"]
    assert {g["InstanceGroupType"] for g in groups} == {"MASTER", "CORE", "TASK"}
    task = next(g for g in groups if g["InstanceGroupType"] == "TASK")
    with pytest.raises(ClientError) as refused:
        client.modify_instance_groups(ClusterId=door.cluster_id, InstanceGroups=[{"InstanceGroupId": task["Id"], "InstanceCount": 9}])
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    assert next(g for g in door.emr.list_instance_groups(ClusterId=door.cluster_id)["InstanceGroups"] if g["Id"] == task["Id"])["RequestedInstanceCount"] == 2


def test_an_unchanged_client_finds_serve_through_aws_endpoint_url_emr(door, monkeypatch):
    # What an Airflow worker or a script does when only its environment points EMR elsewhere.
    monkeypatch.setenv("AWS_ENDPOINT_URL_EMR", door.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AIRFLOW_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AIRFLOW_SECRET)
    client = boto3.Session().client("emr", region_name=REGION)
    (step_id,) = client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("env")])["StepIds"]
    assert door.store.job(step_id).name == "env"


def test_calls_at_once_each_store_their_step_once(door):
    # What the load benchmark measures at 1,000, checked here at 100: none lost, none twice.
    from concurrent.futures import ThreadPoolExecutor

    client = door.client_for(max_pool_connections=100)
    with ThreadPoolExecutor(max_workers=100) as pool:
        answered = list(pool.map(lambda i: client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step(f"burst-{i}")])["StepIds"][0], range(100)))
    assert len(set(answered)) == 100
    stored = door.store.all_jobs()
    assert sorted(job.job_id for job in stored) == sorted(answered)
    assert sorted(job.name for job in stored) == sorted(f"burst-{i}" for i in range(100))


def test_the_boto3_recipe_of_the_front_door_page_runs_as_written(door):
    # docs/front-door.md's ```python block under "From boto3", run with only the page's endpoint,
    # cluster id, region and key pair swapped for this test's.
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "front-door.md").read_text()
    section = page[page.index("## From boto3") :]
    code = section[section.index("```python\n") + len("```python\n") : section.index("```\n", section.index("```python\n") + 10)]
    for page_value, ours in (
        ("http://127.0.0.1:8788", door.url), ("j-2AXXXXXXGAPLF", door.cluster_id), ("eu-west-1", REGION),
        ("AKIAAIRFLOWPIPELINES", AIRFLOW_KEY), ("the caller's secret", AIRFLOW_SECRET),
    ):  # fmt: skip
        assert page_value in code
        code = code.replace(page_value, ours)
    printed = []
    exec(compile(code, "docs/front-door.md", "exec"), {"print": lambda *words: printed.append(" ".join(map(str, words)))})
    (job,) = door.store.all_jobs()
    assert (job.name, job.tenant, job.deadline_s - job.submit_s) == ("daily-etl", "ads", 6 * 3600)
    assert printed == [printed[0]] and printed[0].startswith("PENDING deferred by the autoscaler: ")


def test_beyond_loopback_serve_listens_only_with_tls_and_a_client_verifies_it(door, tmp_path):
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from autoscaler.app.config import ServeSettings

    with pytest.raises(ValueError, match="reachable beyond this machine; set tls_certfile and tls_keyfile"):
        ServeSettings(host="0.0.0.0")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key()).serial_number(1)
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    settings = ServeSettings(host="0.0.0.0", tls_certfile=tmp_path / "cert.pem", tls_keyfile=tmp_path / "key.pem")
    assert settings.tls_certfile is not None
    gateway, secrets = gateway_from_settings(door.settings, door.store, door.emr)
    listener = Listener(build_app(gateway, secrets), "127.0.0.1", 0, str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")).start()
    try:
        assert listener.url.startswith("https://")
        client = boto3.client(
            "emr", endpoint_url=listener.url, region_name=REGION, aws_access_key_id=AIRFLOW_KEY, aws_secret_access_key=AIRFLOW_SECRET,
            verify=str(tmp_path / "cert.pem"),
        )  # fmt: skip
        (step_id,) = client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("over-tls")])["StepIds"]
        assert door.store.job(step_id).name == "over-tls"
        client.close()  # its kept-alive TLS connection would hold the graceful stop for its 10 s
    finally:
        listener.stop()


def run_airflow(door, tmp_path, *argv: str) -> dict:
    """tests/integration/airflow_pipeline.py in its own process, its AWS connection pointed at serve
    through the connection's service_config, as the front door page says."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    connection = {
        "conn_type": "aws", "login": AIRFLOW_KEY, "password": AIRFLOW_SECRET,
        "extra": {"region_name": REGION, "service_config": {"emr": {"endpoint_url": door.url}}},
    }  # fmt: skip
    env = {**os.environ, "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(connection), "AIRFLOW_HOME": str(tmp_path / "airflow")}
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EMR", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        env.pop(name, None)
    script = Path(__file__).with_name("airflow_pipeline.py")
    done = subprocess.run([sys.executable, str(script), *argv], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_airflows_emr_add_steps_operator_and_step_sensor_work_through_serve(door, tmp_path, set_step_state):
    added = run_airflow(door, tmp_path, "add", door.cluster_id)
    (step_id,) = added["step_ids"]
    assert added["poke"] is False  # deferred: PENDING, the sensor waits
    job = door.store.job(step_id)
    assert (job.name, job.tenant, job.state, job.deadline_s - job.submit_s) == ("calculate_pi", "ads", "queued", 12 * 60)

    release_due_jobs(door, time.time())
    real_id = door.store.job(step_id).step_id
    assert real_id is not None
    assert run_airflow(door, tmp_path, "poke", door.cluster_id, step_id)["poke"] is False  # RUNNING on EMR
    set_step_state(door.cluster_id, real_id, "COMPLETED")
    assert run_airflow(door, tmp_path, "poke", door.cluster_id, step_id)["poke"] is True


def test_list_steps_filters_by_state_and_pages_as_emr_does(door):
    client = door.client_for()
    ids = client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step(f"job-{i}") for i in range(60)])["StepIds"]
    client.cancel_steps(ClusterId=door.cluster_id, StepIds=ids[:3])
    pages = list(client.get_paginator("list_steps").paginate(ClusterId=door.cluster_id))
    assert [len(page["Steps"]) for page in pages] == [50, 10]
    assert [s["Id"] for page in pages for s in page["Steps"]] == ids[::-1]  # newest first, every step once
    cancelled = client.list_steps(ClusterId=door.cluster_id, StepStates=["CANCELLED"])["Steps"]
    assert sorted(s["Id"] for s in cancelled) == sorted(ids[:3])
    pending = client.list_steps(ClusterId=door.cluster_id, StepStates=["PENDING", "RUNNING"], StepIds=ids[:5])["Steps"]
    assert [s["Id"] for s in pending] == [ids[4], ids[3]]


def test_only_the_named_calls_pass_through_whatever_their_case(door):
    client = door.client_for(SEARCH_KEY, SEARCH_SECRET)
    door.client_for().add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("ads-secret-job")])

    def shout(request, **_):  # the operation's name in another case, signed as sent
        request.headers.replace_header("X-Amz-Target", "ElasticMapReduce.ListSTEPS")

    client.meta.events.register("before-sign.emr.ListSteps", shout)
    with pytest.raises(ClientError) as refused:
        client.list_steps(ClusterId=door.cluster_id)
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    with pytest.raises(ClientError) as refused:
        door.client_for().get_cluster_session_credentials(ClusterId=door.cluster_id, ExecutionRoleArn="arn:aws:iam::123456789012:role/x")
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"


def test_one_call_sent_many_times_at_once_stores_its_step_once_and_two_alike_calls_store_two(door):
    # A call's copies (its retries: the same invocation id) sent at once are one step; two calls with the
    # same content, signed in the same second, are two steps, as at EMR.
    client = door.client_for()
    captured = {}

    class Captured(Exception):
        pass

    def capture(request, **_):  # taken off the wire: serve has not seen it
        captured.update(url=request.url, body=request.body, headers=dict(request.headers.items()))
        raise Captured

    client.meta.events.register("before-send.emr.AddJobFlowSteps", capture)
    with pytest.raises(Captured):
        client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("once")])
    headers = {name: value.decode() if isinstance(value, bytes) else value for name, value in captured["headers"].items()}

    def send(changed: dict) -> list[str]:
        sent = urllib.request.Request(captured["url"], data=captured["body"], headers=changed, method="POST")
        with urllib.request.urlopen(sent, timeout=30) as response:
            return json.loads(response.read())["StepIds"]

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(send, [headers] * 20))
    assert len(answers[0]) == 1 and answers == [answers[0]] * 20
    assert [job.job_id for job in door.store.all_jobs()] == answers[0]
    other = send({**headers, "amz-sdk-invocation-id": "00000000-0000-0000-0000-000000000001"})
    assert other != answers[0] and len(door.store.all_jobs()) == 2


def test_a_body_past_the_limit_is_refused_before_it_is_read(door):
    # Headers that announce 3 MiB and no body sent: the answer comes at once, nothing waits for it.
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(door.url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as connection:
        connection.sendall(
            b"POST / HTTP/1.1\r\nHost: " + address.netloc.encode() + b"\r\nContent-Length: 3145728\r\n"
            b"X-Amz-Target: ElasticMapReduce.AddJobFlowSteps\r\nContent-Type: application/x-amz-json-1.1\r\n\r\n"
        )
        answer = connection.recv(65536).decode()
    status, _, body = answer.partition("\r\n")[0], None, answer.partition("\r\n\r\n")[2]
    assert status == "HTTP/1.1 413 Request Entity Too Large" and json.loads(body)["__type"] == "RequestEntityTooLarge"
    assert door.store.all_jobs() == []


@pytest.mark.parametrize(
    "step, named",
    [
        (spark_step("new\nline\x1b[31mred", length_s="60"), "without control characters"),
        (spark_step("x" * 257, length_s="60"), "Name: expected a step name of 1 to 256 characters"),
        ({**spark_step("dup", length_s="60"), "HadoopJarStep": {**spark_step("dup")["HadoopJarStep"], "Properties": [
            {"Key": "autoscaler.deadline", "Value": "1h"}, {"Key": "autoscaler.deadline", "Value": "9h"}, {"Key": "autoscaler.length_s", "Value": "60"}]}},
         "property autoscaler.deadline is given twice"),
        (spark_step("digits", length_s="60", nodes="\u0663"), "autoscaler.nodes: expected a whole number like 2"),
        (spark_step("underscore", length_s="1_000"), "autoscaler.length_s: expected a number of seconds"),
        (spark_step("long-arg", length_s="60") | {"HadoopJarStep": {"Jar": "command-runner.jar", "Args": ["a" * 10_281]}}, "longer than EMR's 10,280 characters"),
    ],
    ids=["control-characters", "long-name", "property-twice", "arabic-indic-digit", "underscore-number", "long-argument"],
)
def test_a_step_emr_itself_would_refuse_or_that_reads_two_ways_is_refused(door, step, named):
    with pytest.raises(ClientError) as refused:
        door.client_for().add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[step])
    assert refused.value.response["Error"]["Code"] == "InvalidRequestException"
    assert named in refused.value.response["Error"]["Message"]
    assert door.store.all_jobs() == []


def test_a_runtime_role_or_a_malformed_list_is_refused_not_dropped(door):
    with pytest.raises(ClientError, match="ExecutionRoleArn: a deferred step is released with the daemon's own role"):
        door.client_for().add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step("x")], ExecutionRoleArn="arn:aws:iam::123456789012:role/r")
    assert door.store.all_jobs() == []
    caller = door.gateway.callers[AIRFLOW_KEY]
    from autoscaler.app.serve import EmrApiError

    for body, named in (({"StepIds": 5}, "StepIds: expected a list"), ({"Marker": "-1"}, "Marker"), ({"Marker": 5}, "Marker")):
        with pytest.raises(EmrApiError, match=named):
            door.gateway.list_steps(caller, {"ClusterId": door.cluster_id, **body})


def test_list_steps_pages_stay_put_when_steps_arrive_between_them(door):
    client = door.client_for()
    first = client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step(f"a-{i}") for i in range(60)])["StepIds"]
    page = client.list_steps(ClusterId=door.cluster_id)
    client.add_job_flow_steps(JobFlowId=door.cluster_id, Steps=[spark_step(f"b-{i}") for i in range(10)])
    rest = client.list_steps(ClusterId=door.cluster_id, Marker=page["Marker"])
    assert [s["Id"] for s in page["Steps"]] + [s["Id"] for s in rest["Steps"]] == first[::-1]


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT"])
def test_serve_as_a_process_stops_on_a_signal_with_status_0_and_says_so(door, tmp_path, stop):
    import os
    import signal
    import subprocess
    import sys

    config = tmp_path / "serve.toml"
    config.write_text(
        f'store_path = "{tmp_path / "own.db"}"\n[cluster]\nid = "{door.cluster_id}"\nregion = "{REGION}"\nendpoint_url = "{door.settings.cluster.endpoint_url}"\n'
        f'[serve]\nport = 0\n[[serve.callers]]\naccess_key_id = "{AIRFLOW_KEY}"\nsecret_env = "AIRFLOW_EMR_SECRET"\ntenants = ["ads"]\n'
    )
    process = subprocess.Popen([sys.executable, "-m", "autoscaler", "serve", "--config", str(config)], stderr=subprocess.PIPE, text=True, env=os.environ)
    try:
        # Listening: the socket is bound before the "serving" event, a JSON line like every other one.
        first = json.loads(process.stderr.readline())
        assert (first["event"], first["what"], first["cluster_id"], first["callers"]) == ("serving", "EMR steps", door.cluster_id, 1)
        process.send_signal(getattr(signal, stop))
        assert process.wait(timeout=60) == 0
        events = [json.loads(line) for line in process.stderr.read().splitlines() if line.startswith("{")]
    finally:
        process.kill()
    assert [e["signal"] for e in events if e["event"] == "stopping"] == [stop]
