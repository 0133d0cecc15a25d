"""/healthz and /metrics over HTTP on 127.0.0.1, with a clock the test moves."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from autoscaler.adapters.health import Telemetry, serve
from autoscaler.core.controller import Decision
from autoscaler.core.errors import ConfigError
from autoscaler.core.ports import TaskGroup


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture
def served():
    clock = Clock()
    telemetry = Telemetry(slot_s=300.0, clock=clock)
    server = serve(telemetry, "127.0.0.1", 0)
    try:
        yield telemetry, clock, f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def decision(**fields) -> Decision:
    base = dict(slot=3, capacity=2.5, assigned=2.5, nodes=3, release=("a", "b"), late=("b",), at_risk=1, queue_depth=4,
                running=3, rounding_node_slots=0.5, missed=("b",), missed_by_tenant={"ads": 1}, load=2.0)  # fmt: skip
    return Decision(**(base | fields))


def test_healthz_is_ok_within_two_slots_of_the_last_success_then_503(served):
    telemetry, clock, url = served
    assert get(f"{url}/healthz")[0] == 200  # just started: the first slot has two slots to succeed
    clock.now_s += 601
    status, body = get(f"{url}/healthz")
    assert status == 503 and json.loads(body)["status"] == "stale"
    telemetry.slot_ok()
    clock.now_s += 599
    status, body = get(f"{url}/healthz")
    assert status == 200 and json.loads(body)["seconds_since_last_success"] == pytest.approx(599)


def test_metrics_count_what_the_slots_did(served):
    telemetry, _, url = served
    telemetry.slot_done(decision(), solve_ms=2.0, energy_wh=10.0, follow_wh=12.5)
    telemetry.slot_done(
        decision(release=("c",), late=(), missed_by_tenant={}, nodes=40),
        solve_ms=1.0,
        energy_wh=5.0,
        follow_wh=4.0,
        group=TaskGroup("ig-1", requested=5, running=4),
        queued=66,
    )
    telemetry.slot_failed()
    status, text = get(f"{url}/metrics")
    assert status == 200
    lines = set(text.splitlines())
    for expected in (
        "autoscaler_jobs_released_total 3.0",
        "autoscaler_jobs_released_late_total 1.0",
        'autoscaler_deadlines_missed_total{tenant="ads"} 1.0',
        "autoscaler_capacity_servers 2.5",
        # What was decided, and what EMR had (an outage can keep the group at 5 while 40 are decided).
        "autoscaler_nodes_decided 40.0",
        "autoscaler_nodes_requested 5.0",
        "autoscaler_nodes_running 4.0",
        "autoscaler_queue_depth_jobs 66.0",
        "autoscaler_energy_modelled_wh_total 15.0",
        "autoscaler_energy_saved_modelled_wh 1.5",
        "autoscaler_slot_failures_total 1.0",
        "autoscaler_solve_seconds_count 2.0",
    ):
        assert expected in lines, expected
    assert get(f"{url}/other")[0] == 404


def test_a_port_in_use_is_a_clear_error(served):
    _, _, url = served
    port = int(url.rsplit(":", 1)[1])
    with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
        serve(Telemetry(300.0), "127.0.0.1", port)


def test_gauges_show_what_was_decided_and_what_emr_has_during_an_outage(tmp_path):
    from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
    from autoscaler.adapters.sqlite_store import SqliteJobStore
    from autoscaler.app.daemon import SlotRunner
    from autoscaler.core.controller import ControllerConfig
    from autoscaler.core.errors import ActuationError
    from autoscaler.core.model import Job, StepSpec

    class GroupStuckAtFive(FakeCluster):
        def resize(self, nodes: int) -> None:
            raise ActuationError("EMR ModifyInstanceGroups failed: ServiceUnavailable")

    clock = SimulatedClock(0.0)
    cluster = GroupStuckAtFive(clock, requested=5)
    telemetry = Telemetry(300.0, clock=clock.now_s)
    config = ControllerConfig(policy="follow", deadline_slots=0, slot_s=300.0, max_nodes=100)
    with SqliteJobStore(tmp_path / "jobs.db") as store:
        # 40 one-slot jobs due now, and 26 more due in an hour: queued in the store.
        store.submit_many(
            [Job(f"now-{i}", "n", "t", 0.0, 600.0, 300.0, StepSpec(args=("true",))) for i in range(40)]
            + [Job(f"later-{i}", "n", "t", 0.0, 4200.0, 300.0, StepSpec(args=("true",))) for i in range(26)]
        )
        runner = SlotRunner(config=config, store=store, cluster=cluster, clock=clock, telemetry=telemetry)
        decision = runner.run_slot()
        with SqliteJobStore(tmp_path / "jobs.db") as reader:
            queued_in_store = sum(job.state == "queued" for job in reader.active_jobs())

    def value(name: str) -> float:
        return telemetry.registry.get_sample_value(name)

    assert decision.nodes >= 40 and value("autoscaler_nodes_decided") == decision.nodes
    assert value("autoscaler_nodes_requested") == 5 and value("autoscaler_nodes_running") == 5
    assert value("autoscaler_queue_depth_jobs") == queued_in_store == 66 - len(decision.release)
    assert value("autoscaler_slot_failures_total") == 1  # the failed resize makes the slot unhealthy


def test_healthz_is_not_green_when_the_clock_it_reads_went_back(served):
    """Issue 20, finding 15: after a backward clock step /healthz said 200 with
    ``seconds_since_last_success: -595.5``. A negative age is no evidence of a recent slot."""
    telemetry, clock, url = served
    telemetry.slot_ok()
    clock.now_s -= 600
    status, body = get(f"{url}/healthz")
    assert status == 503
    details = json.loads(body)
    assert details["status"] == "clock_went_back" and details["seconds_since_last_success"] == pytest.approx(-600)
    telemetry.slot_ok()  # a slot that succeeds afterwards counts from the clock as it now reads
    assert get(f"{url}/healthz")[0] == 200


def test_health_by_default_follows_a_clock_that_never_goes_back():
    from autoscaler.adapters.clock import WallClock

    telemetry = Telemetry(300.0)
    assert isinstance(getattr(telemetry._clock, "__self__", None), WallClock)


def test_the_prometheus_telemetry_implements_the_port_the_daemon_takes():
    """The slot loop knows telemetry by its port (``autoscaler.core.ports.Telemetry``), not by the
    Prometheus adapter: the adapter has every method of the port, with the same parameters, and
    the daemon's module imports no telemetry adapter."""
    import ast
    import inspect
    from pathlib import Path

    from autoscaler.app import daemon
    from autoscaler.core import ports

    wanted = {name for name, member in vars(ports.Telemetry).items() if inspect.isfunction(member) and not name.startswith("_")}
    assert wanted >= {"slot_done", "slot_ok", "slot_failed", "carbon_signal", "steps_unknown"}
    for name in wanted:
        port_parameters = list(inspect.signature(getattr(ports.Telemetry, name)).parameters)
        assert list(inspect.signature(getattr(Telemetry, name)).parameters) == port_parameters, name
    tree = ast.parse(Path(daemon.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert "autoscaler.adapters.health" not in imported
    assert daemon.SlotRunner.__annotations__["telemetry"] == "Telemetry | None"
    assert daemon.Telemetry is ports.Telemetry
