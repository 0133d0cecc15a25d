"""The daemon's settings: one TOML file, overridden by ``AUTOSCALER_*`` environment variables.

Environment variables win over the file; nested fields use ``__``, e.g.
``AUTOSCALER_CLUSTER__ID=j-2AXXXXXXGAPLF`` or ``AUTOSCALER_SLOT_S=60``; lists are JSON,
e.g. ``AUTOSCALER_KNOWN_TENANTS='["ads", "search"]'``. An unknown field in the file, and an
``AUTOSCALER_*`` variable that names no field (nor the SMTP password variable,
``report.smtp_password_env``), is an error, so a typo never silently falls back to a default.
See ``deploy/example-config.toml`` for every field.

Over 600 lines, one module: the settings' models, the strict TOML source and the wording of their
errors share pydantic's validation, and the type check and messages read the models' own fields.
"""

from __future__ import annotations

import difflib
import math
import os
import types
import typing
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from autoscaler.adapters.files import require_regular_file
from autoscaler.core import defaults
from autoscaler.core.controller import ControllerConfig
from autoscaler.core.errors import ConfigError
from autoscaler.core.intake import DEFAULT_TASK_INSTANCE_TYPE, NodeCapacity, task_capacity
from autoscaler.core.model import DEFAULT_MAX_NODES, CostParams
from autoscaler.core.objective import DEFAULT_OBJECTIVE, OBJECTIVES, DerivedCosts, derive_costs
from autoscaler.core.policies import ONLINE_POLICIES, POLICY_TABLE
from autoscaler.core.readable import number_text

ENV_PREFIX = "AUTOSCALER_"
ENV_NESTED_DELIMITER = "__"

# The file load_settings is reading; a context variable so the source chain stays the
# library's own and concurrent loads (threads, tests) do not see each other's path.
_toml_path: ContextVar[Path | None] = ContextVar("autoscaler_toml_path", default=None)


class ClusterSettings(BaseModel):
    """The EMR cluster whose TASK instance group the daemon resizes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = Field(default=None, pattern=r"^j-[0-9A-Za-z]+$", description="EMR cluster id, e.g. 'j-2AXXXXXXGAPLF'")
    """Required to run against a cluster (``load_settings(cluster_required=True)``); a replay needs none."""
    region: str | None = None
    endpoint_url: str | None = None
    min_nodes: int = Field(default=0, ge=0, le=100_000)
    max_nodes: int = Field(default=DEFAULT_MAX_NODES, ge=0, le=100_000)
    task_instance_type: str = Field(default=DEFAULT_TASK_INSTANCE_TYPE, min_length=1, max_length=64)
    """The TASK group's EC2 instance type, whose YARN capacity (autoscaler.core.intake) turns a
    job's ``submit --vcpus/--memory-gb`` into whole nodes."""
    task_yarn_vcpus: int | None = Field(default=None, ge=1, le=100_000)
    task_yarn_memory_mb: int | None = Field(default=None, ge=1, le=100_000_000)
    """A TASK node's YARN vCPUs and memory (MiB), over the table's defaults for task_instance_type;
    both are required for a type the table does not list."""

    @model_validator(mode="after")
    def _min_not_above_max(self) -> ClusterSettings:
        if self.min_nodes > self.max_nodes:
            raise ValueError(
                f"expected min_nodes <= max_nodes, got min_nodes={self.min_nodes} > max_nodes={self.max_nodes}"
            )
        return self

    @model_validator(mode="after")
    def _task_capacity_known(self) -> ClusterSettings:
        try:
            self.task_capacity()
        except ConfigError as error:
            raise ValueError(str(error)) from None
        return self

    def task_capacity(self) -> NodeCapacity:
        """One TASK node's YARN capacity (vCPUs, MiB): the table's for ``task_instance_type``, or as told.
        Raises ConfigError naming the keys to set for a type the table does not list."""
        return task_capacity(self.task_instance_type, self.task_yarn_vcpus, self.task_yarn_memory_mb)


class ReportSettings(BaseModel):
    """The energy report (``autoscaler report``, and the daemon's daily report): power model and delivery.

    Credentials are never in this file: the SMTP password is read from the environment variable
    ``smtp_password_env`` or the file ``smtp_password_file``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    power_model: Literal["table-iii", "ccf-aws"] = "table-iii"
    node_vcpus: int = Field(default=1, ge=1, le=448)
    boot_s: float = Field(default=defaults.BOOT_S, ge=0, le=3600)
    max_hold_slots: int = Field(default=1, ge=0)
    daily: bool = False
    publish_metrics: bool = True
    email_to: list[str] = Field(default_factory=list)
    email_from: str | None = None
    transport: Literal["smtp", "ses"] = "smtp"
    smtp_host: str = "localhost"
    smtp_port: int = Field(default=587, ge=1, le=65535)
    smtp_starttls: bool = True
    smtp_username: str | None = None
    smtp_password_env: str | None = "AUTOSCALER_SMTP_PASSWORD"
    smtp_password_file: Path | None = None
    ses_region: str | None = None
    ses_endpoint_url: str | None = None

    @model_validator(mode="after")
    def _no_nul_in_paths(self) -> "ReportSettings":
        if self.smtp_password_file is not None and "\0" in str(self.smtp_password_file):
            raise ValueError("smtp_password_file: a path cannot hold a NUL character")
        return self

    @model_validator(mode="after")
    def _email_settings_hang_together(self) -> "ReportSettings":
        for field_name, address in [("email_from", self.email_from)] + [(f"email_to[{i}]", a) for i, a in enumerate(self.email_to)]:
            if address is not None and ("@" not in address or any(c in address for c in "\r\n, ")):
                raise ValueError(f"{field_name}: expected one email address like 'ops@example.com', got {address!r}")
        if self.email_to and not self.email_from:
            raise ValueError("email_to is set but email_from is not: a report needs a sender")
        if self.transport == "smtp" and self.smtp_username is not None and not self.smtp_starttls:
            raise ValueError("smtp_username is set with smtp_starttls = false: the password would cross the network unencrypted")
        return self


class CarbonSettings(BaseModel):
    """``[carbon]``: the cost signal hold+carbon defers work by (carbon intensity or price).

    ``source``: a file path or an http(s) URL (CSV ``time,value``, WattTime v3, Electricity Maps or
    UK Carbon Intensity JSON; ``autoscaler.core.energy.signal``). Unset: the daemon is carbon-blind. ``unit``: the
    signal's unit, required for CSV (a JSON format names its own). ``forecast``: an optional second
    source with values for future slots: an archive of forecasts as issued (a file or folder: each
    slot reads the newest issued by its start), a URL (each read is an issue), or a file without issue
    times (read as known); without it, or past its end, persistence (the same slot a day earlier). The signal is read again every ``refresh_s``; a slot whose signal is older than
    ``max_staleness_s`` (or never read) is decided carbon-blind, logged and counted.
    ``max_regret``: the regret cap, a share of follow's emissions (0.01 = 1 %): while hold+carbon has
    emitted more than follow (no deferral) over the last 3D+1 slots by more than it, it defers only
    as far as ``short_deferral_s`` (at least hold's break-even;
    :func:`autoscaler.core.policies.carbon.short_deadline_slots`), as it does when no forecast gain
    beats the forecast's recent errors.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str | None = None
    unit: Literal["gCO2eq/kWh", "lbs/MWh", "$/kWh", "$/node-hour"] | None = None
    forecast: str | None = None
    refresh_s: float = Field(default=1800.0, ge=1, le=86_400)
    max_staleness_s: float = Field(default=7200.0, ge=1, le=7 * 86_400)
    timeout_s: float = Field(default=10.0, gt=0, le=300)
    max_regret: float = Field(default=defaults.CARBON_MAX_REGRET, ge=0)
    short_deferral_s: float = Field(default=defaults.CARBON_SHORT_DEFERRAL_S, ge=0, le=7 * 86_400)

    @model_validator(mode="after")
    def _max_regret_a_share_or_off(self) -> "CarbonSettings":
        if not (self.max_regret <= 1 or self.max_regret == math.inf):
            raise ValueError(f"max_regret: expected a share of follow's emissions in 0..1 (0.01 = 1 %) or inf (no cap), got {self.max_regret!r}")
        return self

    @model_validator(mode="after")
    def _staleness_covers_refresh(self) -> "CarbonSettings":
        if self.max_staleness_s < self.refresh_s:
            raise ValueError(
                f"max_staleness_s ({number_text(self.max_staleness_s)}) must be at least refresh_s "
                f"({number_text(self.refresh_s)}): a signal read on time would count as stale"
            )
        for name in ("source", "forecast"):
            value = getattr(self, name)
            if value is None:
                continue
            scheme = value.split("://", 1)[0].lower() if "://" in value else ""
            if not value.strip() or "\0" in value or scheme not in ("", "http", "https"):
                raise ValueError(f"{name}: expected a file path or an http(s) URL, got {value!r}")
            if value.strip().lower() in ("blend", "persistence", "perfect"):
                raise ValueError(
                    f"{name}: {value!r} is not a file or URL; leave forecast unset for the blend (yesterday, last week and "
                    "the latest value, weighted by their recent errors); a daemon has no perfect forecast"
                )
        if self.forecast is not None and self.source is None:
            raise ValueError("forecast is set without source: the forecast only fills the slots after the source's values")
        # A field set away from its default shows a signal was meant; the defaults written out (the
        # example config's) do not.
        meant = sorted(name for name in self.model_fields_set - {"source"} if getattr(self, name) != type(self).model_fields[name].default)
        if self.source is None and meant:
            given = ", ".join(meant)
            raise ValueError(
                f"[carbon] has {given} but no source: without one the daemon runs carbon-blind and {given} do nothing; "
                "set source (a file path or an http(s) URL), or remove the section"
            )
        return self


class JobsSettings(BaseModel):
    """``[jobs]``: how a submitted job's length is planned. ``length_quantile``: a job whose name has run
    before is planned at this quantile of its past run times (``autoscaler.core.learned``; 0.9 = p90).
    ``length_error_quantile``: a job's start is planned with room for this quantile of finished jobs'
    run time / planned length (``autoscaler.core.learned.LengthErrors``; 0.999 = p99.9), and its nodes for
    the mean of that ratio (the work factor); 0: neither."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    length_quantile: float = Field(default=defaults.LENGTH_QUANTILE, gt=0, le=1)
    length_error_quantile: float = Field(default=defaults.LENGTH_ERROR_QUANTILE, ge=0, le=1)


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach ``host``: localhost, or a loopback address (127.0.0.0/8,
    ::1). Where ``autoscaler serve`` may listen without TLS."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class CallerSettings(BaseModel):
    """One caller of ``autoscaler serve`` (``[[serve.callers]]``): the AWS-style key pair it signs its
    requests with (SigV4, as every boto3 and Airflow client already does), and the tenants it may
    submit and cancel as. The secret is never in this file: it is read from the environment variable
    ``secret_env`` or the file ``secret_file`` (one of them) when serve starts.

    ``deadline``: a step's deadline when it sets no ``autoscaler.deadline`` property, a duration
    ("2h", "90m", "600"). ``length_s``: the length of a step whose name has never run and that sets
    no ``autoscaler.length_s`` property; None refuses such a step, naming the property.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    access_key_id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    secret_env: str | None = None
    secret_file: Path | None = None
    tenants: list[str] = Field(min_length=1)
    deadline: str = defaults.SERVE_DEADLINE
    length_s: float | None = Field(default=None, gt=0, le=366 * 86400)

    @model_validator(mode="after")
    def _one_secret_and_a_duration(self) -> "CallerSettings":
        if (self.secret_env is None) == (self.secret_file is None):
            raise ValueError(f"caller {self.access_key_id!r}: give its secret as secret_env (a variable's name) or secret_file (a path), one of them")
        from autoscaler.core.intake import parse_duration_s

        if parse_duration_s(self.deadline) is None:
            raise ValueError(f"caller {self.access_key_id!r}: deadline must be a duration like 2h, 90m or 600, got {self.deadline!r}")
        if any(not tenant.strip() for tenant in self.tenants):
            raise ValueError(f"caller {self.access_key_id!r}: a tenant cannot be empty")
        return self


class ServeSettings(BaseModel):
    """``[serve]``: ``autoscaler serve``, the EMR-compatible step endpoint (``autoscaler.app.serve``).

    It listens on ``host``:``port``; beyond this machine (a host other than 127.0.0.1, ::1 or
    localhost) only with TLS (``tls_certfile`` and ``tls_keyfile``, PEM). ``max_clock_skew_s``: how far
    a request's signing time may be from the server's (AWS allows 15 minutes).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=defaults.SERVE_PORT, ge=0, le=65535)
    tls_certfile: Path | None = None
    tls_keyfile: Path | None = None
    max_clock_skew_s: float = Field(default=900.0, gt=0, le=86_400)
    callers: list[CallerSettings] = Field(default_factory=list)

    @model_validator(mode="after")
    def _tls_beyond_loopback(self) -> "ServeSettings":
        if (self.tls_certfile is None) != (self.tls_keyfile is None):
            raise ValueError("give tls_certfile and tls_keyfile together, or neither")
        if not is_loopback(self.host) and self.tls_certfile is None:
            raise ValueError(
                f"host {self.host!r} is reachable beyond this machine; set tls_certfile and tls_keyfile "
                f"(requests carry signed job steps), or listen on 127.0.0.1"
            )
        keys = [caller.access_key_id for caller in self.callers]
        if len(keys) != len(set(keys)):
            twice = sorted({key for key in keys if keys.count(key) > 1})
            raise ValueError(f"access_key_id {', '.join(twice)} is given to more than one caller")
        return self


class Settings(BaseSettings):
    """Every setting of the daemon; times in seconds, deadlines in slots, costs in the objective's unit.

    Build it with :func:`load_settings`; ``Settings()`` alone reads only the environment.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
    )

    policy: Literal[ONLINE_POLICIES] = defaults.POLICY  # type: ignore[valid-type]
    delta: int | None = Field(default=None, ge=1, le=100_000)
    deadline_slots: int = Field(default=defaults.DEADLINE_SLOTS, ge=0, le=100_000)
    slot_s: float = Field(default=defaults.SLOT_S, ge=1, le=86_400)
    max_deadline_slots: int = Field(default=defaults.MAX_DEADLINE_SLOTS, ge=1, le=100_000)
    objective: Literal[OBJECTIVES] = DEFAULT_OBJECTIVE  # type: ignore[valid-type]
    """What e0, e1 and beta are priced in (autoscaler.core.objective): energy (Wh, from the power model
    and boot_s), cost ($, from the price per node-hour), carbon (Wh weighted by the signal) or paper
    (e0, e1 and beta as given)."""
    restart_penalty: float = Field(default=defaults.RESTART_PENALTY, ge=0, le=defaults.MAX_COST)
    """Added to each restart (a server off, then on) under objective energy, cost or carbon, in its unit (Wh or $)."""
    e0: float = Field(default=defaults.E0, ge=0, le=defaults.MAX_COST)
    e1: float = Field(default=defaults.E1, ge=0, le=defaults.MAX_COST)
    beta: float = Field(default=defaults.BETA, ge=0, le=defaults.MAX_COST)
    """e0, e1, beta: eq. (2)'s costs as given, per server-slot; read only under objective = "paper"."""
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    store_path: Path = Path("autoscaler.db")
    log_format: Literal["auto", "json", "console"] = "auto"
    misfire_grace_s: float = Field(default=60.0, gt=0)
    release_poll_s: float = Field(default=defaults.RELEASE_POLL_S, ge=0, le=86_400)
    """Between slots, how often the daemon looks for newly submitted jobs already due (they cannot
    wait for the next slot) and releases them; 0: only at slot boundaries, else at least 1 s."""
    known_tenants: list[str] = Field(default_factory=list)
    """Tenants allowed to submit; empty accepts any tenant."""
    health_host: str = "127.0.0.1"
    health_port: int = Field(default=defaults.HEALTH_PORT, ge=0, le=65535)
    """/healthz and /metrics; 0 picks a free port (logged at start)."""
    report: ReportSettings = Field(default_factory=ReportSettings)
    carbon: CarbonSettings = Field(default_factory=CarbonSettings)
    jobs: JobsSettings = Field(default_factory=JobsSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    retention_days: float = Field(default=defaults.RETENTION_DAYS, gt=0, le=36_600)
    """Finished jobs released longer ago, and decisions of slots that long ago, are pruned from the store."""
    startup_wait_s: float | None = Field(default=None, ge=0, le=86_400)
    """How long start-up keeps trying EMR through errors that pass (throttling, 5xx, no connection)
    before it gives up with exit status 75; default 300 (``compose.STARTUP_WAIT_S``)."""
    release_margin_slots: int = Field(default=defaults.RELEASE_MARGIN_SLOTS, ge=0, le=100_000)
    """Slots before its start-by slot (deadline - length) from which a queued job is due: released even
    beyond the policy's nodes, up to cluster.max_nodes. With 1, one slot that goes undecided (a restart,
    a slot skipped on a busy machine) never makes a job late; a job submitted with less slack is due at
    once. 0: due in its start-by slot exactly. Jobs are late, as always, only after their start-by slot."""
    provision_s: float = Field(default=defaults.PROVISION_S, ge=0, le=3600)
    """Seconds a TASK node asked for takes to be usable (default 330, EMR's 5-6 minutes). A job is due at
    least ceil(provision_s / slot_s) slots before its start-by slot, so none waits for a node still
    booting past it (``ControllerConfig.due_margin_slots``), and a restart costs the idle power (energy)
    or the bill (cost) of this time. 0: nodes counted as usable at once (the restart then costs the
    energy model's ``report.boot_s``)."""
    work_model: Literal["job-slots", "node-seconds"] = defaults.WORK_MODEL
    """How the daemon counts work (``ControllerConfig.work_model``): "node-seconds" (default), the node time
    paid for (short jobs share a node), or "job-slots", the paper's (a job is one node in every slot it touches)."""
    tenants_n: int | None = Field(default=None, ge=1, le=1_000_000, strict=True)
    """n, the tenants dynamic DRF divides the cluster for under overload; default: the number of
    known_tenants, or 10 when any tenant may submit."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Earlier sources win: keyword arguments, then the environment, then the file.
        return (
            init_settings,
            env_settings,
            StrictTomlSource(settings_cls, toml_file=_toml_path.get()),
        )

    @model_validator(mode="after")
    def _vfw_delta_fits(self) -> "Settings":
        if POLICY_TABLE[self.policy].needs_delta:
            delta = self.delta if self.delta is not None else self.deadline_slots // 2
            if not (0 < delta < self.deadline_slots):
                raise ValueError(
                    f"policy {self.policy!r} needs 0 < delta < deadline_slots (delta defaults to deadline_slots // 2), "
                    f"got delta = {delta} with deadline_slots = {self.deadline_slots}"
                )
        return self

    @model_validator(mode="after")
    def _costs_given_only_under_paper(self) -> "Settings":
        refuse_given_costs(self, self.objective, "objective")
        if self.objective == "carbon" and self.carbon.source is None:
            raise ValueError(
                'objective "carbon" weights the energy by the [carbon] signal, and [carbon] source is not set: set it, '
                'or objective = "energy"'
            )
        if self.objective == "paper" and self.restart_penalty:
            raise ValueError("restart_penalty is for objective energy, cost or carbon; under objective \"paper\" beta is used as given")
        return self

    @model_validator(mode="after")
    def _release_poll_off_or_a_second(self) -> "Settings":
        if 0 < self.release_poll_s < 1:
            raise ValueError(f"release_poll_s: must be 0 (off) or at least 1 s, got {self.release_poll_s:g}")
        return self

    @model_validator(mode="after")
    def _no_nul_in_store_path(self) -> "Settings":
        if "\0" in str(self.store_path):
            raise ValueError("store_path: a path cannot hold a NUL character")
        return self

    @model_validator(mode="after")
    def _callers_tenants_known(self) -> "Settings":
        if self.known_tenants:
            for caller in self.serve.callers:
                unknown = [tenant for tenant in caller.tenants if tenant not in self.known_tenants]
                if unknown:
                    raise ValueError(f"serve caller {caller.access_key_id!r}: tenants {', '.join(map(repr, unknown))} are not in known_tenants")
        return self

    @model_validator(mode="after")
    def _tenants_n_covers_known_tenants(self) -> "Settings":
        if self.tenants_n is not None and self.tenants_n < len(self.known_tenants):
            raise ValueError(
                f"tenants_n ({self.tenants_n}) must be at least the number of known_tenants ({len(self.known_tenants)})"
            )
        return self

    def derived_costs(self, price_per_node_hour: float | None = None) -> DerivedCosts:
        """e0, e1 and beta under ``objective`` (autoscaler.core.objective.derive_costs): from the
        [report] power model's idle and peak power, the boot time (``provision_s``, or ``report.boot_s``
        when it is 0), ``slot_s``, ``restart_penalty``
        and ``price_per_node_hour`` ($; default the twin's, autoscaler.core.twin.PRICE_PER_NODE_HOUR)."""
        from autoscaler.core.energy.power import power_model
        from autoscaler.core.twin import PRICE_PER_NODE_HOUR

        model = power_model(self.report.power_model)
        return derive_costs(
            self.objective,
            slot_s=self.slot_s,
            idle_power_w=model.idle_power_w,
            busy_power_w=model.peak_power_w,
            boot_s=self.provision_s if self.provision_s > 0 else self.report.boot_s,
            price_per_node_hour=PRICE_PER_NODE_HOUR if price_per_node_hour is None else price_per_node_hour,
            restart_penalty=self.restart_penalty,
            given=CostParams(e0=self.e0, e1=self.e1, beta=self.beta),
        )

    def controller_config(self, epoch_s: float, price_per_node_hour: float | None = None) -> ControllerConfig:
        """The controller's view of these settings; ``epoch_s`` is the Unix time slot 0 starts at; the
        costs are :meth:`derived_costs` (``price_per_node_hour``: $, for objective cost)."""
        return ControllerConfig(
            policy=self.policy,
            deadline_slots=self.deadline_slots,
            slot_s=self.slot_s,
            epoch_s=epoch_s,
            min_nodes=self.cluster.min_nodes,
            max_nodes=self.cluster.max_nodes,
            max_deadline_slots=self.max_deadline_slots,
            cost=self.derived_costs(price_per_node_hour).cost_params(),
            delta=self.delta,
            tenants_n=self.tenants_n or len(self.known_tenants) or defaults.TENANTS_N,
            release_margin_slots=self.release_margin_slots,
            provision_s=self.provision_s,
            work_model=self.work_model,
            carbon=bool(self.carbon.source) and POLICY_TABLE[self.policy].carbon_online is not None,
            carbon_max_regret=self.carbon.max_regret,
            carbon_short_deferral_s=self.carbon.short_deferral_s,
        )


COST_FIELDS = ("e0", "e1", "beta")
"""The settings that give eq. (2)'s costs by hand: read only under objective = "paper"."""


def refuse_given_costs(settings: "Settings", objective: str, where: str) -> None:
    """ValueError (pydantic turns it into a field error) unless ``objective`` is "paper" or none of
    e0, e1, beta was set: under energy, cost and carbon they are derived, and a given figure would
    silently do nothing. ``where`` names what chose the objective (the field, or ``--objective``)."""
    given = [name for name in COST_FIELDS if name in settings.model_fields_set]
    if objective != "paper" and given:
        raise ValueError(
            f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} set, with {where} {objective!r}: e0, e1 and beta are "
            f"derived from the power model, boot_s and the price under {objective!r}; set objective = \"paper\" to give them "
            "by hand, or remove them"
        )


def with_objective(settings: Settings, objective: str | None, flag: str = "--objective") -> Settings:
    """``settings`` with the command line's ``objective`` (None: as they are). Raises ConfigError naming
    ``flag`` when the settings give e0, e1 or beta and ``objective`` is not "paper", or give a
    restart_penalty and it is."""
    if objective is None or objective == settings.objective:
        return settings
    try:
        refuse_given_costs(settings, objective, flag)
    except ValueError as error:
        raise ConfigError(f"{error} (in the config or AUTOSCALER_* environment)") from None
    if objective == "paper" and settings.restart_penalty:
        raise ConfigError(f"{flag} paper: the config's restart_penalty applies under energy, cost or carbon only; remove it")
    if objective == "carbon" and settings.carbon.source is None:
        raise ConfigError(f"{flag} carbon weights the energy by the [carbon] signal, and the config's [carbon] source is not set")
    return settings.model_copy(update={"objective": objective})


def refuse_carbon_objective(settings: Settings, command: str) -> None:
    """ConfigError when ``settings`` ask for objective "carbon" in a command whose policies decide
    carbon-blind (``compare``, ``run --replay``): it would decide as "energy" and say it weighed the signal."""
    if settings.objective == "carbon":
        raise ConfigError(
            f"{command} decides carbon-blind (its policies do not read a signal), so objective carbon would decide as energy: "
            "give --objective energy (its --carbon prices the kgCO2), or run autoscaler replay --objective carbon --carbon SOURCE"
        )


def load_settings(path: str | os.PathLike | None, cluster_required: bool = True) -> Settings:
    """Read settings from the TOML file at ``path`` (None: environment only), env overriding file.

    ``cluster_required``: refuse settings without ``cluster.id`` (every command that talks to a
    cluster); a replay passes False. Raises ConfigError naming the path if the file is missing,
    unreadable, a FIFO or a device (never opened: reading a FIFO blocks) or not valid TOML, and ConfigError listing every bad, missing or unknown field with
    what was expected.
    """
    toml_path = None if path is None else Path(path)
    if toml_path is not None:
        require_regular_file(toml_path, "--config")
        # The TOML source skips a missing file silently; a named config file must exist.
        try:
            with toml_path.open("rb"):
                pass
        except FileNotFoundError:
            raise ConfigError(f"{toml_path}: config file not found") from None
        except IsADirectoryError:
            raise ConfigError(f"{toml_path}: config path is a directory, expected a TOML file") from None
        except OSError as error:
            raise ConfigError(f"{toml_path}: cannot read config file: {error.strerror or error}") from None
    token = _toml_path.set(toml_path)
    try:
        settings = Settings()
    except ValidationError as error:
        unknown = unknown_variables(os.environ, _password_variables(toml_path))
        # An unknown nested variable (AUTOSCALER_CLUSTER__NODES) also shows as an unknown field: say it once, as the variable.
        from_unknown = {_field_of(name) for name in unknown}
        errors = [e for e in error.errors() if not (e["type"] == "extra_forbidden" and tuple(map(str, e["loc"])) in from_unknown)]
        variables = [_variable_setting(e["loc"]) for e in errors]
        sections = []
        if errors:
            from_file = toml_path is not None and None in variables
            where = f"{toml_path} (and AUTOSCALER_* environment)" if from_file else "AUTOSCALER_* environment"
            problems = [describe_error(e) + (f" (from {v})" if v else "") for e, v in zip(errors, variables)]
            sections.append(f"invalid settings in {where}:\n" + "\n".join(f"  {p}" for p in problems))
        if unknown:
            sections.append(_unknown_variables_text(unknown, _password_variables(toml_path)))
        raise ConfigError("\n".join(sections)) from None
    except SettingsError as error:
        # A complex field (a list) whose AUTOSCALER_* variable is not JSON.
        cause = f": {error.__cause__}" if error.__cause__ else ""
        raise ConfigError(f"{error} (expected JSON, e.g. '[\"a\", \"b\"]'){cause}") from None
    except ValueError as error:
        # tomllib's (or tomli's) TOMLDecodeError and UnicodeDecodeError, raised by the TOML source.
        raise ConfigError(f"{toml_path}: not valid TOML: {error}") from None
    finally:
        _toml_path.reset(token)
    password = {settings.report.smtp_password_env} if settings.report.smtp_password_env else set()
    unknown = unknown_variables(os.environ, password)
    if unknown:
        raise ConfigError(_unknown_variables_text(unknown, password))
    if cluster_required and settings.cluster.id is None:
        where = f"{toml_path} (and AUTOSCALER_* environment)" if toml_path is not None else "AUTOSCALER_* environment"
        raise ConfigError(
            f"invalid settings in {where}:\n  cluster.id: field required (the EMR cluster to run against, "
            "e.g. [cluster] id = \"j-2AXXXXXXGAPLF\", or AUTOSCALER_CLUSTER__ID)"
        )
    return settings


class StrictTomlSource(TomlConfigSettingsSource):
    """The TOML file, with its types kept: TOML has booleans, numbers and strings, so a number field
    given ``true`` or ``"5"`` is a mistake (pydantic would read them as 1 and 5), where the
    environment, which has only text, is parsed. Raises ConfigError naming the file and every such
    key, dotted (``cluster.max_nodes``), with what was expected."""

    def __init__(self, settings_cls: type[BaseSettings], toml_file: Path | None = None) -> None:
        super().__init__(settings_cls, toml_file=toml_file)
        problems = _toml_type_problems(self.toml_data, settings_cls)
        if problems:
            raise ConfigError(f"invalid settings in {toml_file}:\n" + "\n".join(f"  {p}" for p in problems))


def _toml_type_problems(table: dict, model: type[BaseModel], prefix: str = "") -> list[str]:
    """Each key of ``table`` whose TOML type a field of ``model`` would only take by coercion: a
    boolean or a string for a number, a number or a string for a boolean (nested tables by their
    models). Keys no field reads are left to the model (it names them)."""
    problems = []
    for key, value in table.items():
        info = model.model_fields.get(key)
        if info is None:
            continue
        kinds = _scalar_kinds(info.annotation)
        if isinstance(value, dict):
            nested = [a for a in _union_args(info.annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
            if nested:
                problems += _toml_type_problems(value, nested[0], f"{prefix}{key}.")
            continue
        shown = "true" if value is True else "false" if value is False else repr(value)
        if kinds and str not in kinds:
            if isinstance(value, bool) and bool not in kinds:
                problems.append(f"{prefix}{key}: expected a number, got {shown} (a TOML boolean)")
            elif isinstance(value, str) and {int, float} & kinds:
                problems.append(f"{prefix}{key}: expected a number, got {shown} (a TOML string: write it without quotes)")
            elif isinstance(value, (int, float, str)) and not isinstance(value, bool) and kinds == {bool}:
                problems.append(f"{prefix}{key}: expected true or false, got {shown}")
    return problems


def _union_args(annotation: Any) -> tuple:
    return typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else (annotation,)


def _scalar_kinds(annotation: Any) -> set[type]:
    """The scalar types (bool, int, float, str) a field's annotation admits; empty for anything else
    (a Literal, a list, a model, a path), whose own validation is already strict enough."""
    kinds = set()
    for arg in _union_args(annotation):
        if arg in (bool, int, float, str):
            kinds.add(arg)
        elif arg is not type(None):
            return set()
    return kinds


def known_variables(password_variables: set[str] = frozenset()) -> list[str]:
    """Every AUTOSCALER_* variable the settings read: one per field, one per field of a nested table
    (``AUTOSCALER_CLUSTER__ID``), plus ``password_variables`` (where the SMTP password is read)."""
    names = []
    for name, info in Settings.model_fields.items():
        names.append(f"{ENV_PREFIX}{name.upper()}")
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            names += [f"{ENV_PREFIX}{name.upper()}{ENV_NESTED_DELIMITER}{sub.upper()}" for sub in info.annotation.model_fields]
    names += sorted(v for v in password_variables if v.upper().startswith(ENV_PREFIX) and v.upper() not in names)
    return names


def unknown_variables(environ, password_variables: set[str] = frozenset()) -> list[str]:
    """The AUTOSCALER_* names in ``environ`` (any case, as pydantic-settings reads them) that no setting
    reads: pydantic-settings would ignore them without a word."""
    known = {name.upper() for name in known_variables(password_variables)}
    return sorted(name for name in environ if name.upper().startswith(ENV_PREFIX) and name.upper() not in known)


def _unknown_variables_text(unknown: list[str], password_variables: set[str]) -> str:
    known = known_variables(password_variables)
    lines = []
    for name in unknown:
        close = difflib.get_close_matches(name.upper(), known, n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else ""
        lines.append(f"  unknown variable {name}{hint}: no setting reads it")
    return (
        "invalid settings in AUTOSCALER_* environment:\n" + "\n".join(lines)
        + f"\n  known variables: {', '.join(f'{v} (the SMTP password)' if v in password_variables else v for v in known)}"
    )


def _password_variables(toml_path: Path | None) -> set[str]:
    """Where the SMTP password may be read from when the settings did not load: the default, and the
    name the environment or the file give (read leniently; the file's own errors are reported apart)."""
    import tomllib

    names = {ReportSettings.model_fields["smtp_password_env"].default}
    for name, value in os.environ.items():
        if name.upper() == f"{ENV_PREFIX}REPORT{ENV_NESTED_DELIMITER}SMTP_PASSWORD_ENV":
            names.add(value)
    if toml_path is not None:
        try:
            value = tomllib.loads(toml_path.read_text(encoding="utf-8")).get("report", {}).get("smtp_password_env")
        except (OSError, ValueError, AttributeError):
            value = None
        if isinstance(value, str):
            names.add(value)
    return names


def _field_of(variable: str) -> tuple[str, ...]:
    """The field path an AUTOSCALER_* variable would set: AUTOSCALER_CLUSTER__NODES -> ('cluster', 'nodes')."""
    return tuple(part.lower() for part in variable[len(ENV_PREFIX):].split(ENV_NESTED_DELIMITER))


def _variable_setting(loc: tuple) -> str | None:
    """The AUTOSCALER_* variable that sets the field at ``loc`` (or the table holding it), if the
    environment has one: the error is then the variable's, not the file's."""
    parts = [str(part) for part in loc]
    for depth in range(len(parts), 0, -1):
        variable = ENV_PREFIX + ENV_NESTED_DELIMITER.join(parts[:depth]).upper()
        if any(name.upper() == variable for name in os.environ):
            return variable
    return None


def describe_error(error: dict[str, Any]) -> str:
    """One line for one pydantic error: the dotted field, what was expected and what was given."""
    loc = tuple(str(part) for part in error["loc"])
    field = ".".join(loc)
    kind = error["type"]
    ctx = error.get("ctx") or {}
    given = error.get("input")
    if kind == "missing":
        return f"{field}: field required"
    if kind == "extra_forbidden":
        known = _field_names(loc[:-1])
        close = difflib.get_close_matches(loc[-1], known, n=1)
        hint = f" (did you mean '{'.'.join(loc[:-1] + (close[0],))}'?)" if close else ""
        return f"unknown field '{field}'{hint}"
    comparisons = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
    if kind in comparisons:
        bound = next(iter(ctx.values()))
        return f"{field}: must be {comparisons[kind]} {number_text(bound)}, got {given!r}"
    if kind == "literal_error":
        return f"{field}: expected one of {ctx.get('expected')}, got {given!r}"
    if kind == "string_pattern_mismatch" and field == "cluster.id":
        return f"{field}: expected an EMR cluster id like 'j-2AXXXXXXGAPLF', got {given!r}"
    if kind == "finite_number":
        return f"{field}: must be a finite number, got {given!r}"
    message = error["msg"].removeprefix("Value error, ")
    if kind == "value_error" or isinstance(given, dict):
        return f"{field}: {message}" if field else message
    return f"{field}: {message}, got {given!r}"


def _field_names(loc: tuple[str, ...]) -> list[str]:
    """Field names of the (nested) model at ``loc``; empty if ``loc`` is not a model."""
    model: Any = Settings
    for part in loc:
        info = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if info is None:
            return []
        model = info.annotation
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []
