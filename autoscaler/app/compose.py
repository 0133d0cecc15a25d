"""The composition root: settings -> clients -> adapters -> the slot runner, for every way of running it.

``run`` (EMR and the SQLite store), ``run --dry-run`` (a simulated cluster seeded from EMR and a
shadow of the store: nothing real is written), ``run --replay`` (a simulated cluster and clock and
a temporary store, or a shadow with ``--dry-run``) and ``report`` all take their settings and
adapters from here, so a default (``max_nodes``: :data:`autoscaler.core.model.DEFAULT_MAX_NODES`) and an
``AUTOSCALER_*`` variable mean the same on every path.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import structlog

from autoscaler.app.config import Settings, load_settings
from autoscaler.app.daemon import SlotRunner
from autoscaler.core.controller import ControllerConfig
from autoscaler.core.errors import ConfigError
from autoscaler.core.policies import POLICY_TABLE


def settings(config_path: Path | None, cluster_required: bool = True) -> Settings:
    """The settings of ``config_path`` (None: the ``AUTOSCALER_*`` environment and the defaults).
    ``cluster_required``: refuse settings without ``cluster.id``. Raises ConfigError."""
    return load_settings(config_path, cluster_required=cluster_required)


def controller_config(
    settings: Settings,
    policy: str | None = None,
    deadline_slots: int | None = None,
    max_nodes: int | None = None,
    tenants: int | None = None,
    epoch_s: float = 0.0,
    carbon: bool = False,
    price_per_node_hour: float | None = None,
) -> ControllerConfig:
    """The controller's configuration: ``settings``, with the command line's overrides where given.
    ``tenants``: the tenants a replay deals its jobs to (n is at least that many). ``carbon``: run
    hold as hold+carbon when ``[carbon] source`` is set (the daemon and its dry run); False (a
    replay) decides carbon-blind whatever the config says. Raises ConfigError for a combination the
    controller refuses (e.g. vfw's delta against a new D; a D under the policy's least (vfw: 2), naming --deadline or
    deadline_slots), and, with ``carbon``, for a ``[carbon]
    source`` under a policy other than hold (only hold has a carbon-aware variant).
    The costs are the settings' objective's (``Settings.derived_costs``; ``price_per_node_hour``: the
    twin's $ per node-hour under objective cost, default the twin's default)."""
    config = settings.controller_config(epoch_s, price_per_node_hour)
    chosen = policy or config.policy
    # The daemon runs a carbon-aware variant only where the policy table gives it a slot rule.
    aware = [p for p in POLICY_TABLE.values() if p.carbon_online is not None]
    if carbon and settings.carbon.source and chosen not in {p.name for p in aware}:
        names = " or ".join(repr(p.name) for p in aware)
        variants = ", ".join(str(p.carbon) for p in aware)
        settings_text = " or ".join(f'policy = "{p.name}"' for p in aware)
        raise ConfigError(
            f"[carbon] source is set but policy is {chosen!r}: only policy {names} has a carbon-aware "
            f"variant ({variants}); set {settings_text}, or remove [carbon] source to run carbon-blind"
        )
    chosen_deadline_slots = deadline_slots if deadline_slots is not None else config.deadline_slots
    needs_slots = POLICY_TABLE[chosen].min_deadline_slots if chosen in POLICY_TABLE else 0
    if chosen_deadline_slots < needs_slots:
        # Said of D, which the user gave: the delta the controller would refuse (vfw's) is D // 2, a default.
        where = "--deadline" if deadline_slots is not None else "deadline_slots"
        raise ConfigError(f"{where}: {chosen} needs D >= {needs_slots}, got {chosen_deadline_slots}")
    changes: dict = {}
    wanted = bool(carbon and settings.carbon.source)
    if config.carbon != wanted:
        changes["carbon"] = wanted
    if policy is not None:
        changes["policy"] = policy
    if deadline_slots is not None:
        changes["deadline_slots"] = deadline_slots
    if max_nodes is not None:
        changes["max_nodes"] = max_nodes
        changes["min_nodes"] = min(config.min_nodes, max_nodes)
    if tenants is not None and tenants > 1:
        changes["tenants_n"] = max(tenants, settings.tenants_n or 0)
    return dataclasses.replace(config, **changes) if changes else config


def runner(settings: Settings, config: ControllerConfig, store, cluster, clock, **options) -> SlotRunner:
    """The slot runner on these adapters, with the settings' power model and retention; ``options``
    are SlotRunner's other fields (and override those)."""
    from autoscaler.core.energy.power import power_model
    from autoscaler.core.learned import LengthErrors

    chosen = {
        "policy_name": config.policy_name,
        "power_model": power_model(settings.report.power_model),
        "retention_s": settings.retention_days * 86400.0,
        "length_errors": LengthErrors(quantile=settings.jobs.length_error_quantile),
    }
    return SlotRunner(config=config, store=store, cluster=cluster, clock=clock, **(chosen | options))


STARTUP_WAIT_S = 300.0
"""How long start-up keeps trying EMR while it fails with errors that pass (throttling, 5xx, no
connection), from the first try; then OutageError (exit status 75). The config's ``startup_wait_s``
sets another; ``emr_cluster`` and ``daemon_runner`` also take one."""

STARTUP_FIRST_BACKOFF_S = 1.0
"""The first wait between start-up tries (full jitter: a random wait up to this); it doubles each try."""

STARTUP_MAX_BACKOFF_S = 30.0
"""The longest wait between start-up tries (each try also holds botocore's own retries, up to 6 sends)."""


def emr_cluster(
    settings: Settings,
    startup_wait_s: float | None = None,
    first_backoff_s: float | None = None,
    session=None,
):
    """The EMR adapter for ``settings.cluster``, its client renewed each slot, checked now
    (``EmrCluster.check``: the cluster exists in the region, has not ended, uses instance groups and
    has a TASK group), so a wrong cluster fails at start-up rather than at the first slot.

    The region (``cluster.region``, or the AWS environment's) is checked against botocore's known
    EMR regions before any call. Errors that pass are tried again for ``startup_wait_s`` (default
    :data:`STARTUP_WAIT_S`) with backoff from ``first_backoff_s`` (default
    :data:`STARTUP_FIRST_BACKOFF_S`), each try logged as ``startup_retry``. ``session``: the
    boto3.Session clients are made from (tests hook its events). Raises ConfigError (a region
    botocore does not know, no region, a TASK group of another instance type than
    ``cluster.task_instance_type``: ``require_task_type``), ClusterError (the cluster fails a check; exit status 2)
    and OutageError (still failing when the wait ran out; exit status 75).
    """
    import boto3

    from autoscaler.adapters.aws import check_region, retry_at_startup
    from autoscaler.adapters.emr import EmrCluster, emr_client

    session = session or boto3.Session()
    configured = settings.cluster.region
    if configured is not None:
        check_region("emr", configured, "cluster.region", session)
    elif session.region_name is not None:
        check_region("emr", session.region_name, "the AWS region (AWS_DEFAULT_REGION, AWS_REGION or the profile; cluster.region is not set)", session)
    else:
        raise ConfigError(
            "no AWS region for the EMR cluster: set cluster.region in the config (or AUTOSCALER_CLUSTER__REGION), "
            "or AWS_DEFAULT_REGION, AWS_REGION or the profile's region"
        )

    def new_client():
        return emr_client(configured, settings.cluster.endpoint_url, session)

    cluster = EmrCluster(new_client(), settings.cluster.id, new_client=new_client)
    group = retry_at_startup(
        lambda: cluster.check(configured),
        what=f"EMR cluster {settings.cluster.id} in region {cluster.client.meta.region_name}",
        wait_s=STARTUP_WAIT_S if startup_wait_s is None else startup_wait_s,
        first_backoff_s=STARTUP_FIRST_BACKOFF_S if first_backoff_s is None else first_backoff_s,
        max_backoff_s=STARTUP_MAX_BACKOFF_S,
        before_retry=cluster.start_slot,
    )
    require_task_type(settings, group)
    return cluster


def require_task_type(settings: Settings, group) -> None:
    """Check EMR's TASK group (``group``, a TaskGroup) against ``cluster.task_instance_type``:
    ``submit`` turns vCPUs and memory into nodes of the configured type, so every such width would be
    wrong on another. A type set in the config (file or environment) that differs is a ConfigError;
    the default (m5.xlarge, not set) that differs is a warning, ``task_instance_type_differs``, and
    the daemon starts: it sizes nothing itself, and a config that never set the type ran before
    widths existed. A group whose type EMR does not say passes."""
    actual, configured = group.instance_type, settings.cluster.task_instance_type
    if actual is None or actual == configured:
        return
    from autoscaler.core.intake import TASK_YARN_CAPACITY

    told = "" if actual in TASK_YARN_CAPACITY else ", with cluster.task_yarn_vcpus and cluster.task_yarn_memory_mb (its YARN capacity is not in the table)"
    detail = (
        f"the TASK group {group.group_id} of cluster {settings.cluster.id} runs {actual}: submit --vcpus/--memory-gb "
        f"would count nodes of the wrong size; set cluster.task_instance_type = {actual!r}{told}"
    )
    if "task_instance_type" not in settings.cluster.model_fields_set:
        structlog.get_logger("autoscaler").warning("task_instance_type_differs", configured=f"{configured} (the default)", detail=detail)
        return
    raise ConfigError(f"cluster.task_instance_type is {configured!r}, but {detail}")


@contextmanager
def daemon_runner(
    settings: Settings,
    dry_run: bool,
    clock=None,
    telemetry=None,
    on_decision: Callable[[dict], None] | None = None,
    cluster=None,
    startup_wait_s: float | None = None,
) -> Iterator[SlotRunner]:
    """The daemon's runner on EMR and the store of ``settings``; the store's lock is held inside.

    With ``dry_run`` the same runner runs on a shadow of the store (read, never written; no lock, so
    it may watch a store a live daemon is using; a store not yet created is an empty queue) and on a
    simulated cluster that starts from EMR's TASK group and running steps and then follows the dry
    run's own decisions. ``cluster``: an EMR adapter to use instead of building one (tests).
    ``startup_wait_s``: how long the cluster's start-up check keeps trying through errors that pass
    (default :data:`STARTUP_WAIT_S`); see ``emr_cluster`` for what it raises.
    """
    from autoscaler.adapters.carbon_feed import carbon_feed, check_sources
    from autoscaler.adapters.clock import WallClock
    from autoscaler.adapters.lock import StoreLock
    from autoscaler.adapters.shadow import ShadowStore, shadow_cluster
    from autoscaler.adapters.sqlite_store import SqliteJobStore

    clock = clock or WallClock()
    path = settings.store_path
    if not Path(path).parent.is_dir():
        raise ConfigError(f"store_path: {path}: folder {Path(path).parent} does not exist (create it, or set store_path elsewhere)")
    wait_s = startup_wait_s if startup_wait_s is not None else settings.startup_wait_s
    config = controller_config(settings, carbon=True)
    feed = carbon_feed(settings.carbon, clock) if config.carbon else None
    if feed is not None:
        check_sources(settings.carbon, feed)
    # The store is opened (and checked) before EMR is asked anything: a damaged store is a fault to
    # fix (exit 2), and must not hide behind an EMR outage that would have systemd retry for ever.
    if dry_run:
        real = SqliteJobStore(path, read_only=True) if os.path.exists(path) else None
        if real is None:
            structlog.get_logger("autoscaler").warning(
                "dry_run_empty_store", store_path=str(path), detail="no job store there yet: the dry run starts from an empty queue"
            )
        try:
            cluster = cluster or emr_cluster(settings, startup_wait_s=wait_s)
            shadow = ShadowStore(real)
            simulated = shadow_cluster(cluster, shadow, clock)
            yield runner(settings, config, shadow, simulated, clock, dry_run=True, telemetry=telemetry, on_decision=on_decision, carbon_feed=feed)
        finally:
            if real is not None:
                real.close()
        return
    # At start-up the daemon checks its store whole, once (seconds on a store of a million jobs).
    # A store that is not there yet is created only once EMR has answered: a start that fails
    # leaves nothing behind.
    if not os.path.exists(path):
        cluster = cluster or emr_cluster(settings, startup_wait_s=wait_s)
    # The lock file carries the clock's frame: `submit` stamps jobs on the daemon's clock (see clock.py).
    frame = clock.frame() if isinstance(clock, WallClock) else None
    with StoreLock(path, note=None if frame is None else frame.note()), SqliteJobStore(path, full_check_max_bytes=None) as store:
        store.load_state()  # a damaged state row is refused before EMR is asked anything
        cluster = cluster or emr_cluster(settings, startup_wait_s=wait_s)
        live = runner(settings, config, store, cluster, clock, telemetry=telemetry, on_decision=on_decision, carbon_feed=feed)
        live.start()  # a damaged row is refused now, not at every slot
        yield live


def require_folder(path: Path, what: str) -> None:
    """ConfigError unless the folder that would hold ``path`` exists."""
    if not path.parent.is_dir():
        raise ConfigError(f"{path}: cannot write {what}: folder {path.parent} does not exist")


def require_writable(path: Path, what: str) -> None:
    """ConfigError unless ``path`` can be opened for appending (it is created if absent, left as it is otherwise)."""
    if path.is_dir():
        raise ConfigError(f"{path}: {what} is a folder; expected a file to append one JSON line per slot to")
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as error:
        raise ConfigError(f"{path}: cannot write {what}: {error.strerror or error}") from None


# -- the report's adapters: the store read, EMR's TASK instances, CloudWatch, mail -------------------


def report_store(settings: Settings):
    """The job store of ``settings`` opened for the report to read its decisions (a context manager).
    Raises StoreError when it cannot be opened or is not ours."""
    from autoscaler.adapters.sqlite_store import SqliteJobStore

    return SqliteJobStore(settings.store_path, flag="store_path")


def task_instances_source(settings: Settings, session=None):
    """The EMR adapter of ``settings.cluster`` for listing its TASK instances (``task_instances``); not
    checked now. ``session``: the boto3.Session its client is made from (default: a new one)."""
    from autoscaler.adapters.emr import EmrCluster, emr_client

    cluster = settings.cluster
    return EmrCluster(emr_client(cluster.region, cluster.endpoint_url, session), cluster.id)


def metrics_reader(settings: Settings, session=None):
    """The CloudWatch reader of the TASK instances' metrics, in ``settings.cluster``'s region and endpoint."""
    from autoscaler.adapters.cloudwatch_reader import CloudWatchMetricsReader, cloudwatch_client

    return CloudWatchMetricsReader(cloudwatch_client(settings.cluster.region, settings.cluster.endpoint_url, session))


def energy_publisher(settings: Settings, session=None):
    """The CloudWatch publisher of the report's EnergyWh and SavedWh (and CO2 or cost) datapoints."""
    from autoscaler.adapters.cloudwatch_publish import EnergyPublisher
    from autoscaler.adapters.cloudwatch_reader import cloudwatch_client

    return EnergyPublisher(cloudwatch_client(settings.cluster.region, settings.cluster.endpoint_url, session))


def mail_sender(settings: Settings, session=None, ssl_context=None):
    """The SMTP or SES sender the config's [report] names, its credentials read now. The daemon
    calls it at start-up, so a missing password stops it then, not at the first daily report.
    Raises ConfigError for an unset or unreadable password source."""
    from autoscaler.adapters.mail import SesSender, SmtpSender, SmtpSettings, ses_client, smtp_password_from

    options = settings.report
    if options.transport == "ses":
        return SesSender(ses_client(options.ses_region or settings.cluster.region, options.ses_endpoint_url, session))
    password = None
    if options.smtp_username is not None:
        env_var = None if options.smtp_password_file is not None else options.smtp_password_env
        password = smtp_password_from(env_var, options.smtp_password_file)
    smtp = SmtpSettings(options.smtp_host, options.smtp_port, options.smtp_starttls, options.smtp_username, password)
    return SmtpSender(smtp, ssl_context)


# -- run --replay: a simulated clock, the in-memory cluster (or moto's EMR), its own store ---------


def replay_clock(start_s: float):
    """The simulated clock a replay moves slot by slot (Unix seconds)."""
    from autoscaler.adapters.fakes import SimulatedClock

    return SimulatedClock(start_s)


def twin_config(settings: Settings | None, **flags):
    """The cluster twin's settings (:class:`autoscaler.core.twin.TwinConfig`): ``flags`` (its field names;
    None: the default) and the settings' power model (booting and idle nodes draw its idle power, busy
    ones its peak). Raises ConfigError naming the flag and the value for a setting out of range."""
    from autoscaler.core.energy.power import power_model
    from autoscaler.core.twin import TwinConfig

    model = power_model(settings.report.power_model if settings is not None else "table-iii")
    given = {name: value for name, value in flags.items() if value is not None}
    return TwinConfig(idle_power_w=model.idle_power_w, busy_power_w=model.peak_power_w, **given)


def replay_cluster(settings: Settings | None, clock, twin=None):
    """The cluster twin on ``clock`` when given its settings (``twin``: a TwinConfig), else the
    in-memory cluster, or EMR when the config's endpoint is on this machine (moto): a replay never
    touches a real cluster."""
    from urllib.parse import urlparse

    from autoscaler.adapters.fakes import FakeCluster

    if twin is not None:
        from autoscaler.adapters.twin import TwinCluster

        return TwinCluster(clock, twin)
    endpoint = settings.cluster.endpoint_url if settings is not None else None
    if endpoint and urlparse(endpoint).hostname in ("127.0.0.1", "localhost", "::1"):
        from autoscaler.adapters.emr import EmrCluster, emr_client

        return EmrCluster(emr_client(settings.cluster.region, settings.cluster.endpoint_url), settings.cluster.id)
    return FakeCluster(clock)


def replay_store(store_path: Path | None, stack):
    """A replay's store: a shadow in memory when ``store_path`` is None (``--dry-run``), else the
    SQLite store at ``store_path``, its lock held; both entered on ``stack`` (a contextlib.ExitStack),
    so they close with it. A replay's store survives the replay being killed (it resumes), not a
    power cut: no fsync per commit. Raises StoreError (and the lock's error when another holds it)."""
    from autoscaler.adapters.lock import StoreLock
    from autoscaler.adapters.shadow import ShadowStore
    from autoscaler.adapters.sqlite_store import SqliteJobStore

    if store_path is None:
        return ShadowStore(None)
    stack.enter_context(StoreLock(store_path))
    return stack.enter_context(SqliteJobStore(store_path, durable=False))
