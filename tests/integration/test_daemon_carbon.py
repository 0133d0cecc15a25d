"""The daemon's slot loop with a [carbon] signal: a CSV file on disk, the SQLite store on disk, the
simulated cluster and clock, and /metrics over HTTP, all wired by the composition root."""

from __future__ import annotations

import dataclasses
import math
import time
import urllib.request
from datetime import datetime, timezone

import pytest
import structlog
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.adapters.fakes import FakeCluster, SimulatedClock
from autoscaler.adapters.health import Telemetry, serve
from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app import compose
from autoscaler.app.config import Settings
from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.core.errors import ConfigError

from test_daemon import TAU, workload_a

T0 = datetime(2026, 6, 1, tzinfo=timezone.utc).timestamp()  # a slot boundary (slots of 300 s from the epoch)
DEADLINE_SLOTS = 6
SLOTS = 16


def iso(time_s: float) -> str:
    return datetime.fromtimestamp(time_s, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_daily_cycle(path) -> None:
    """Two days of 5-minute values around T0: 450 g at midday, 150 g at midnight (a cosine)."""
    lines = ["time,value"]
    for i in range(-288, 288):
        time_s = T0 + i * TAU
        hour = (time_s % 86_400.0) / 3600.0
        lines.append(f"{iso(time_s)},{300.0 - 150.0 * math.cos(2 * math.pi * (hour - 12.0) / 24.0 + math.pi):.3f}")
    path.write_text("\n".join(lines) + "\n")


def settings_for(tmp_path, source, store: str = "jobs.db", **carbon) -> Settings:
    return Settings(
        cluster={"id": "j-CARBON", "max_nodes": 10_000},
        store_path=tmp_path / store,
        policy="hold",
        deadline_slots=DEADLINE_SLOTS,
        slot_s=TAU,
        objective="paper",
        beta=1.0,
        # The paper's work model, where hold+carbon without a signal is the daemon's hold slot for slot
        # (under node-seconds the daemon's hold plans each job to the slot it is due in, hold+carbon to
        # D in its LP window).
        work_model="job-slots",
        provision_s=0.0,
        # Without a source the section is empty: a unit alone is refused (a signal was meant).
        carbon={} if source is None else {"source": str(source), "unit": "gCO2eq/kWh", **carbon},
    )


def jobs_from(t0_s: float):
    jobs = trace_jobs(workload_a(SLOTS // 2), DEADLINE_SLOTS, TAU, SLOTS // 2 * TAU)
    shifted = [dataclasses.replace(j, submit_s=j.submit_s + t0_s, deadline_s=j.deadline_s + t0_s) for j in jobs]
    return sorted(shifted, key=lambda j: j.submit_s)


def run_slots(settings: Settings, slots: int, before_slot=None, dry_run: bool = False):
    """``slots`` slots from T0 with Workload A's first jobs submitted as they arrive; returns the
    decisions, the telemetry, the fallback log lines and the /metrics text after the last slot."""
    clock = SimulatedClock(T0)
    telemetry = Telemetry(TAU, clock=clock.now_s)
    cluster = FakeCluster(clock)
    jobs = jobs_from(T0)
    decisions = []
    submitted = 0
    with structlog.testing.capture_logs() as logs:
        with SqliteJobStore(settings.store_path) as users, compose.daemon_runner(settings, dry_run=dry_run, clock=clock, telemetry=telemetry, cluster=cluster) as runner:
            for slot in range(slots):
                clock.time_s = T0 + slot * TAU
                arriving = submitted
                while submitted < len(jobs) and jobs[submitted].submit_s < clock.time_s + TAU:
                    submitted += 1
                users.submit_many(jobs[arriving:submitted])
                if before_slot is not None:
                    before_slot(slot)
                decisions.append(runner.run_slot())
            stored = users.decisions()
    server = serve(telemetry, "127.0.0.1", 0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10) as response:
            metrics = response.read().decode()
    finally:
        server.shutdown()
    fallbacks = [line for line in logs if line["event"] == "carbon_signal_fallback"]
    return decisions, stored, fallbacks, metrics, jobs


def samples(metrics: str, name: str) -> dict[tuple, float]:
    found = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def test_a_csv_signal_decides_hold_carbon_then_falls_back_when_it_goes_stale(tmp_path):
    source = tmp_path / "carbon.csv"
    write_daily_cycle(source)
    settings = settings_for(tmp_path, source, refresh_s=600, max_staleness_s=1200)

    def remove_the_file(slot):
        if slot == 6:  # gone before slot 6 (T0 + 1800) reads it again
            source.unlink()

    decisions, stored, fallbacks, metrics, jobs = run_slots(settings, SLOTS, remove_the_file)
    # Read at slots 0, 2, 4 (good), 6, 8, ... (failing): the read of slot 4 (T0 + 1200) is at most
    # 1200 s old up to slot 8, so slots 9..15 have no signal.
    modes = [d.carbon_mode for d in decisions]
    assert modes[:9] == ["carbon"] * 9
    assert modes[9:] == ["no_signal"] * (SLOTS - 9)
    assert all(d.carbon_fallback == "stale" and d.carbon_value is None for d in decisions[9:])
    assert all("no signal for this slot (stale: the last good read of" in d.why for d in decisions[9:])
    assert all(d.carbon_unit == "gCO2eq/kWh" and 140.0 < d.carbon_value < 460.0 for d in decisions[:9])
    assert any(d.reason == "carbon" for d in decisions[:9])
    # Every decision in the store's log says how it was decided.
    assert [r["carbon_mode"] for r in stored] == modes
    # One log line and one count per slot without a signal.
    assert [(line["slot"], line["reason"]) for line in fallbacks] == [(d.slot, "stale") for d in decisions[9:]]
    assert samples(metrics, "autoscaler_carbon_signal_fallback_total")[(("reason", "stale"),)] == SLOTS - 9
    assert samples(metrics, "autoscaler_carbon_signal_fallback_total")[(("reason", "unreadable"),)] == 0
    assert math.isnan(samples(metrics, "autoscaler_carbon_signal_value")[(("unit", "gCO2eq/kWh"),)])
    assert not any(d.late for d in decisions)


def test_a_local_source_that_does_not_exist_or_lacks_its_unit_is_refused_at_start(tmp_path):
    with pytest.raises(ConfigError, match=r"\[carbon\] source: .*missing\.csv: no such file"):
        run_slots(settings_for(tmp_path, tmp_path / "missing.csv"), 1)
    source = tmp_path / "carbon.csv"
    write_daily_cycle(source)
    with pytest.raises(ConfigError, match=r"\[carbon\] source: .*a CSV signal needs its unit"):
        run_slots(settings_for(tmp_path, source, unit=None), 1)


def test_a_url_that_does_not_answer_at_start_decides_every_slot_as_carbon_blind_hold(tmp_path):
    # A closed port: the source may come back, so the daemon starts and falls back slot by slot.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    aware = settings_for(tmp_path, f"http://127.0.0.1:{port}/carbon.csv", timeout_s=2)
    decisions, _, fallbacks, metrics, _ = run_slots(aware, 8)
    blind = settings_for(tmp_path, None, store="blind.db")
    hold, _, none, blind_metrics, _ = run_slots(blind, 8)
    assert [(d.capacity, d.assigned, d.nodes, d.release) for d in decisions] == [(d.capacity, d.assigned, d.nodes, d.release) for d in hold]
    assert any(d.nodes for d in hold)
    assert {(d.carbon_mode, d.carbon_fallback) for d in decisions} == {("no_signal", "unreadable")}
    assert {d.carbon_mode for d in hold} == {""}
    assert len(fallbacks) == 8 and "cannot fetch" in fallbacks[0]["detail"] and none == []
    assert samples(metrics, "autoscaler_carbon_signal_fallback_total")[(("reason", "unreadable"),)] == 8
    assert samples(blind_metrics, "autoscaler_carbon_signal_fallback_total")[(("reason", "unreadable"),)] == 0


def test_a_signal_the_current_value_of_is_given_on_metrics(tmp_path):
    source = tmp_path / "carbon.csv"
    write_daily_cycle(source)
    decisions, _, fallbacks, metrics, _ = run_slots(settings_for(tmp_path, source), 2)
    assert fallbacks == []
    # T0 + 300 is 00:05 UTC: 300 - 150*cos(2*pi*(1/12 - 12)/24 + pi) = 300 - 150*cos(0.02182) = 150.036 g,
    # the one point of that slot in the file.
    assert samples(metrics, "autoscaler_carbon_signal_value")[(("unit", "gCO2eq/kWh"),)] == pytest.approx(decisions[-1].carbon_value)
    assert decisions[-1].carbon_value == pytest.approx(150.036, abs=1e-3)


def test_the_dry_run_reads_the_same_feed_and_decides_as_the_live_daemon(tmp_path):
    source = tmp_path / "carbon.csv"
    write_daily_cycle(source)
    dry, stored, _, _, _ = run_slots(settings_for(tmp_path, source, store="dry.db"), 6, dry_run=True)
    live, _, _, _, _ = run_slots(settings_for(tmp_path, source, store="live.db"), 6)
    assert stored == []  # the dry run wrote nothing
    assert {d.carbon_mode for d in dry} == {"carbon"}
    assert [(d.capacity, d.nodes, d.release, d.why) for d in dry] == [(d.capacity, d.nodes, d.release, d.why) for d in live]


def test_only_hold_has_a_carbon_aware_variant(tmp_path):
    settings = settings_for(tmp_path, tmp_path / "carbon.csv").model_copy(update={"policy": "gcp-u"})
    with pytest.raises(ConfigError, match="only policy 'hold' has a carbon-aware variant"):
        compose.controller_config(settings, carbon=True)
    # A replay (carbon False) runs carbon-blind on the same settings.
    assert compose.controller_config(settings).carbon is False


def test_a_slow_carbon_source_never_delays_a_slot_and_its_read_counts_from_when_it_finished(tmp_path):
    """Issue 20, finding 14: a source that answers its headers, then holds its body, must not stall
    the slots; the slots go on with the last good read, and the read, once done, is dated when it finished."""
    import threading
    from http.server import BaseHTTPRequestHandler

    from local_http import serving

    good = tmp_path / "carbon.csv"
    write_daily_cycle(good)
    first_body = good.read_bytes()
    # The second answer: the same times at a flat 100 g, so a slot decided on it is told apart.
    later_body = b"time,value\n" + b"".join(line.split(b",")[0] + b",100\n" for line in first_body.splitlines()[1:])
    hold_next, holding, release, done = threading.Event(), threading.Event(), threading.Event(), threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            held = hold_next.is_set()
            body = later_body if held else first_body
            self.send_response(200)
            self.send_header("Content-Type", "text/csv")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                if held:
                    self.wfile.write(body[:1])
                    self.wfile.flush()
                    holding.set()
                    release.wait(timeout=30)  # the test releases it; a slot that waits on it waits this long
                    self.wfile.write(body[1:])
                    done.set()
                else:
                    self.wfile.write(body)
            except OSError:
                pass

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as base:
        settings = settings_for(tmp_path, f"{base}/carbon.csv", refresh_s=600, max_staleness_s=3600, timeout_s=120)
        clock = SimulatedClock(T0)
        try:
            with compose.daemon_runner(settings, dry_run=False, clock=clock, telemetry=Telemetry(TAU, clock=clock.now_s), cluster=FakeCluster(clock)) as runner:
                decisions = []
                for slot in range(6):
                    clock.time_s = T0 + slot * TAU
                    if slot == 2:
                        hold_next.set()  # slot 2 (T0 + 600) refreshes; that read is held
                    decisions.append(runner.run_slot())
                    if slot >= 2:
                        assert not done.is_set(), f"slot {slot} waited for the held read"
                    if slot == 2:
                        assert holding.wait(timeout=60)  # the read is under way, off the slot's path
                assert [d.carbon_mode for d in decisions] == ["carbon"] * 6
                assert all(d.carbon_value > 100.0 for d in decisions)  # all decided on the first read
                finished_s = clock.time_s + 17.0
                clock.time_s = finished_s
                release.set()
                feed = runner.carbon_feed
                assert feed is not None
                deadline = time.monotonic() + 60
                while feed.last_read_s != finished_s and time.monotonic() < deadline:
                    time.sleep(0.02)  # polling a condition, with a generous deadline
                assert feed.last_read_s == finished_s  # its age runs from when it finished, not from T0 + 600
                clock.time_s = T0 + 6 * TAU
                assert runner.run_slot().carbon_value == pytest.approx(100.0)
        finally:
            release.set()
