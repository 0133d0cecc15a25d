"""The daemon's /healthz and Prometheus /metrics, on a small HTTP server beside the slot loop.

``Telemetry`` holds the metrics (prometheus-client, in its own registry) and the health rule: healthy
while the last successful slot ran within two slots (and not after now: a clock gone back is not green). ``serve`` answers GET /healthz (200 or 503,
with a JSON body) and GET /metrics (Prometheus text format) on a daemon thread, bound to 127.0.0.1
unless told otherwise.
"""

from __future__ import annotations

import json
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from autoscaler.adapters.clock import WallClock
from autoscaler.core import defaults
from autoscaler.core.controller import SIGNAL_FALLBACKS
from autoscaler.core.errors import ConfigError

HEALTHY_SLOTS = 2
"""/healthz fails once this many slots have passed without a successful one."""


class Telemetry:
    """Prometheus metrics of the slot loop, and whether it is healthy.

    Metrics: capacity m_t (servers), task nodes requested, queue depth and jobs at risk (jobs),
    jobs released and released late (counters), deadlines missed and jobs that overran their deadline
    (ended after it), by tenant (counters), solve time
    (histogram, seconds), modelled energy of the task nodes and modelled energy saved against
    follow (Wh, eq. (13)-(14) at u = running jobs / nodes; no start-up energy), failed slots, and the
    time of the last successful slot (Unix seconds). For hold+carbon: the signal's value in the slot
    last decided (labelled by its unit; NaN when the slot had none) and the slots decided without a
    signal, by reason (``autoscaler.core.controller.SIGNAL_FALLBACKS``).
    """

    def __init__(self, slot_s: float, registry: CollectorRegistry | None = None, clock=None) -> None:
        self.slot_s = slot_s
        self.registry = registry or CollectorRegistry()
        # Unix seconds that never step back (the daemon's own clock), so a wall-clock step is not
        # taken for a slot that succeeded in the future or long ago.
        self._clock = clock if clock is not None else WallClock().now_s
        self._started_s = self._clock()
        self._last_success_s: float | None = None
        r = self.registry
        self.capacity = Gauge("autoscaler_capacity_servers", "m_t, the policy's capacity in the last slot", registry=r)
        self.nodes_decided = Gauge("autoscaler_nodes_decided", "task nodes the last slot decided on", registry=r)
        self.nodes = Gauge(
            "autoscaler_nodes_requested", "task nodes EMR's TASK group has requested after the last slot's resize, as last known", registry=r
        )
        self.nodes_running = Gauge("autoscaler_nodes_running", "task nodes EMR's TASK group had running, as last observed", registry=r)
        self.observed = Gauge(
            "autoscaler_emr_observed_timestamp_seconds", "when EMR's TASK group was last read (Unix seconds)", registry=r
        )
        self.queue_depth = Gauge("autoscaler_queue_depth_jobs", "jobs queued in the store after the last slot", registry=r)
        self.at_risk = Gauge("autoscaler_jobs_at_risk", "queued jobs due within a slot and not released", registry=r)
        self.released = Counter("autoscaler_jobs_released", "jobs released as EMR steps", registry=r)
        self.late = Counter("autoscaler_jobs_released_late", "jobs released after their start-by slot", registry=r)
        self.missed = Counter("autoscaler_deadlines_missed", "jobs whose start-by slot passed unreleased", ["tenant"], registry=r)
        self.overran = Counter(
            "autoscaler_jobs_overran", "jobs whose EMR step ended after their deadline (released in time or not)", ["tenant"], registry=r
        )
        self.solve = Histogram(
            "autoscaler_solve_seconds", "time to decide a slot", buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5), registry=r
        )
        self.energy = Counter("autoscaler_energy_modelled_wh", "modelled energy of the task nodes, Wh", registry=r)
        self.saved = Gauge("autoscaler_energy_saved_modelled_wh", "modelled energy saved against follow the workload, Wh", registry=r)
        self.failures = Counter("autoscaler_slot_failures", "slots that failed, or could not read or change EMR", registry=r)
        self.unknown_steps = Gauge(
            "autoscaler_steps_unknown_to_store",
            "steps of ours on EMR for jobs the store does not hold, as the last start (or restart after a failure) found them",
            registry=r,
        )
        self.last_success = Gauge("autoscaler_last_success_timestamp_seconds", "when the last slot succeeded", registry=r)
        self.carbon_fallback = Counter(
            "autoscaler_carbon_signal_fallback",
            "slots hold+carbon decided carbon-blind for want of a signal (unreadable, stale, not_covering, not_given)",
            ["reason"],
            registry=r,
        )
        self.carbon_value = Gauge(
            "autoscaler_carbon_signal_value", "the carbon or price signal in the slot last decided (NaN: none)", ["unit"], registry=r
        )
        for reason in SIGNAL_FALLBACKS:  # each at 0 from the start, so a rate or an alert has a series to read
            self.carbon_fallback.labels(reason=reason)
        self._carbon_unit: str | None = None

    def slot_done(
        self,
        decision,
        solve_ms: float,
        energy_wh: float,
        follow_wh: float,
        released: list[str] | None = None,
        late: list[str] | None = None,
        healthy: bool = True,
        group=None,
        queued: int | None = None,
        overran_by_tenant: dict[str, int] | None = None,
    ) -> None:
        """Record a decided slot (``decision``: controller.Decision) and its modelled energies, Wh.

        ``released`` and ``late``: the job ids whose steps were really added (default: the
        decision's). ``healthy``: False when the slot could not read or change something on EMR; it
        then counts as a failed slot, and /healthz turns 503 if no healthy slot follows within two.
        ``group``: EMR's TASK group as the slot left it (``ports.TaskGroup``; requested after the
        slot's resize), or None when it could not be read: the requested and running gauges then keep their last observed values, and
        ``autoscaler_emr_observed_timestamp_seconds`` says how old those are. ``queued``: the jobs
        queued in the store after the slot (default: the decision's count of jobs held back).
        ``overran_by_tenant``: {tenant: jobs whose step ended this slot after their deadline}.
        """
        self.capacity.set(decision.capacity)
        self.nodes_decided.set(decision.nodes)
        if group is not None:
            self.nodes.set(group.requested)
            self.nodes_running.set(group.running)
            self.observed.set(self._clock())
        self.queue_depth.set(decision.queue_depth if queued is None else queued)
        self.at_risk.set(decision.at_risk)
        self.released.inc(len(decision.release if released is None else released))
        self.late.inc(len(decision.late if late is None else late))
        for tenant, count in decision.missed_by_tenant.items():
            self.missed.labels(tenant=tenant).inc(count)
        for tenant, count in (overran_by_tenant or {}).items():
            self.overran.labels(tenant=tenant).inc(count)
        self.solve.observe(solve_ms / 1000)
        self.energy.inc(energy_wh)
        self.saved.inc(follow_wh - energy_wh)
        if healthy:
            self.slot_ok()
        else:
            self.slot_failed()

    def released_between_slots(self, released: list[str], late: list[str]) -> None:
        """Count jobs released between slots in the same counters as a slot's (released, late)."""
        self.released.inc(len(released))
        self.late.inc(len(late))

    def carbon_signal(self, value: float | None, unit: str = "", fallback: str = "") -> None:
        """Record a hold+carbon slot's signal: ``value`` in ``unit``, or None and the ``fallback``
        reason, which counts one slot in ``autoscaler_carbon_signal_fallback_total``."""
        if value is None:
            self.carbon_fallback.labels(reason=fallback or "not_given").inc()
            if self._carbon_unit is not None:
                self.carbon_value.labels(unit=self._carbon_unit).set(float("nan"))
            return
        if self._carbon_unit is not None and self._carbon_unit != unit:
            self.carbon_value.remove(self._carbon_unit)
        self._carbon_unit = unit
        self.carbon_value.labels(unit=unit).set(value)

    def steps_unknown(self, count: int) -> None:
        """Record how many of our EMR steps name jobs the store does not hold (a restored store)."""
        self.unknown_steps.set(count)

    def slot_ok(self) -> None:
        """A slot ran to the end (decided, or found already decided)."""
        self._last_success_s = self._clock()
        self.last_success.set(self._last_success_s)

    def slot_failed(self) -> None:
        self.failures.inc()

    def health(self) -> tuple[bool, dict]:
        """(healthy, details): healthy while the last success (or the start) is within two slots.
        A negative age (the clock read went back past the last success) is not healthy: it says
        nothing of when a slot last ran (``status``: "clock_went_back")."""
        now_s = self._clock()
        since_s = self._last_success_s if self._last_success_s is not None else self._started_s
        age_s = now_s - since_s
        healthy = 0 <= age_s <= HEALTHY_SLOTS * self.slot_s
        return healthy, {
            "status": "ok" if healthy else "clock_went_back" if age_s < 0 else "stale",
            "seconds_since_last_success": round(age_s, 3),
            "last_success_s": self._last_success_s,
            "limit_s": HEALTHY_SLOTS * self.slot_s,
        }


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *_args) -> None:  # requests are not worth a log line each
        pass


def serve(telemetry: Telemetry, host: str = "127.0.0.1", port: int = defaults.HEALTH_PORT) -> WSGIServer:
    """Serve /healthz and /metrics on ``host``:``port`` (0: a free port; ``server.server_port`` says
    which) on a daemon thread; ``server.shutdown()`` stops it. Raises ConfigError if the address
    cannot be bound (in use, or not an address of this machine)."""
    metrics_app = make_wsgi_app(telemetry.registry)

    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            healthy, details = telemetry.health()
            start_response("200 OK" if healthy else "503 Service Unavailable", [("Content-Type", "application/json")])
            return [json.dumps(details).encode()]
        if path == "/metrics":
            return metrics_app(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /healthz or /metrics\n"]

    try:
        server = make_server(host, port, app, server_class=_Server, handler_class=_QuietHandler)
    except OSError as error:
        raise ConfigError(f"health_host/health_port: cannot listen on {host}:{port}: {error.strerror or error}") from None
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server
