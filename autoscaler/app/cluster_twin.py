"""The cluster twin as the application runs it (``run --replay`` and ``compare``): its flags as the
command line gave them and the TwinConfig fields they set, the twin and its --carbon signal checked
before any work, the twin's bill as a table, and the runs a finished twin ended after the replay's last
slot, into the store.

The twin itself (an EMR TASK group's boot delays, drains and bill) is :mod:`autoscaler.core.twin`,
driven through :mod:`autoscaler.adapters.twin`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from rich.table import Table

from autoscaler.adapters.twin import TwinCluster
from autoscaler.app.config import Settings
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import JobState
from autoscaler.core.ports import JobStore

TWIN_FLAGS = {
    "provision_s": "--provision-s",
    "decommission_timeout_s": "--decommission-timeout-s",
    "length_error_sigma": "--length-error",
    "length_jitter_sigma": "--length-jitter",
    "seed": "--seed",
    "step_concurrency": "--step-concurrency",
    "price_per_node_hour": "--price-per-node-hour",
}
"""TwinConfig's fields and the run flags that set them."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TwinFlags:
    """The cluster twin's flags as the command line gave them (``run --replay``, ``compare``), each None
    unless given, so the twin's defaults (autoscaler.core.twin) live in one place. The first seven are
    TwinConfig's fields (``TWIN_FLAGS`` names their flags); ``carbon`` is the source (a file or URL) of a
    carbon signal for the bill's kgCO2 (--carbon), ``carbon_unit`` the unit of a CSV one (--carbon-unit)."""

    provision_s: float | None = None
    decommission_timeout_s: float | None = None
    length_error_sigma: float | None = None
    length_jitter_sigma: float | None = None
    seed: int | None = None
    step_concurrency: int | None = None
    price_per_node_hour: float | None = None
    carbon: str | None = None
    carbon_unit: str | None = None

    def config_fields(self) -> dict[str, float | int | None]:
        """TwinConfig's fields as given (None: not given)."""
        return {name: getattr(self, name) for name in TWIN_FLAGS}



def replay_twin_inputs(flags: TwinFlags, cluster: str | None, settings: Settings):
    """(the TwinConfig, the --carbon signal) of a replay (``run --replay``) on the twin, (None, None) on
    the instant cluster or EMR; ``cluster``: --cluster ("twin", "instant", None: not given); checked
    before any work. The twin is the default, unless the config names an
    endpoint on this machine (EMR in moto: :func:`replay_on_emr`). Raises ConfigError naming the flag:
    a twin flag with ``--cluster instant`` or on EMR, a value out of range, a --carbon that is a
    price; TraceError for a --carbon that cannot be read."""
    chosen = cluster
    if chosen == "instant" or (chosen is None and replay_on_emr(settings)):
        fields = flags.config_fields()
        carbon_flags = {"--carbon": flags.carbon, "--carbon-unit": flags.carbon_unit}
        given = [TWIN_FLAGS[name] for name, value in fields.items() if value is not None] + [flag for flag, value in carbon_flags.items() if value is not None]
        if given:
            where = "--cluster instant" if chosen == "instant" else f"EMR at {settings.cluster.endpoint_url} (the config's endpoint_url)"
            raise ConfigError(f"{', '.join(given)}: for the cluster twin only, and this replay runs on {where}; leave them out or give --cluster twin")
        return None, None
    return twin_inputs(flags, settings)


def replay_on_emr(settings: Settings | None) -> bool:
    """Whether a replay without --cluster runs on EMR: the config's endpoint_url is on this machine (moto)."""
    from urllib.parse import urlparse

    endpoint = settings.cluster.endpoint_url if settings is not None else None
    return bool(endpoint) and urlparse(endpoint).hostname in ("127.0.0.1", "localhost", "::1")


def twin_inputs(flags: TwinFlags, settings: Settings | None):
    """(the TwinConfig of ``flags`` and the settings' power model, the --carbon signal in
    gCO2eq/kWh or None), checked before any work: ConfigError naming the flag and the value, a
    --carbon that is a price or a --carbon-unit without --carbon; TraceError for an unreadable --carbon."""
    from autoscaler.app import compose
    from autoscaler.app.cli.arguments import flagged

    try:
        twin = compose.twin_config(settings, **flags.config_fields())
    except ConfigError as error:
        raise flagged(error, TWIN_FLAGS) from None
    source, unit = flags.carbon, flags.carbon_unit
    if source is None:
        if unit is not None:
            raise ConfigError("--carbon-unit without --carbon: give the signal with --carbon SOURCE")
        return twin, None
    from autoscaler.adapters.signal_source import load_signal
    from autoscaler.core.energy.signal import in_grams

    signal = load_signal(source, unit, unit_name="--carbon-unit", flag="--carbon")
    if signal.unit not in ("gCO2eq/kWh", "lbs/MWh"):
        raise ConfigError(f"--carbon {signal.source}: its unit is {signal.unit}; the twin's bill needs a carbon intensity (gCO2eq/kWh or lbs/MWh)")
    return twin, in_grams(signal)


def twin_bill_table(bill, twin, carbon, slot_s: float) -> Table:
    """The twin's bill as a table: node-hours billed and by state, $, kWh, kgCO2 (with ``carbon``: a
    Signal in gCO2eq/kWh whose first time is the replay's time 0), jobs killed and run again, jobs
    that finished after their deadline, wait from submit to start, peak nodes, scale events."""
    from autoscaler.core.signal_slots import covered_means

    table = Table(
        title=(
            f"the cluster twin's bill: provision {twin.provision_s:g} s, decommission timeout {twin.decommission_timeout_s:g} s, "
            f"length error sigma {twin.length_error_sigma:g} (seed {twin.seed}), {twin.step_concurrency} steps at once, "
            f"${twin.price_per_node_hour:g}/node-hour"
        )
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    hours = {state: seconds / 3600.0 for state, seconds in bill.state_node_s.items()}
    table.add_row("node-hours billed (per second, 60 s minimum)", f"{bill.billed_node_s / 3600:,.2f}")
    table.add_row("  booting, idle, busy node-hours", f"{hours['booting']:,.2f}, {hours['idle']:,.2f}, {hours['busy']:,.2f}")
    table.add_row("utilisation (busy node-hours / billed)", f"{100 * bill.utilisation:.1f} %")
    table.add_row("cost, $", f"{bill.cost_usd:,.2f}")
    table.add_row("energy, kWh", f"{bill.energy_wh / 1000:,.3f}")
    if carbon is not None:
        end_s = max((job[5] for job in bill.jobs if job[5] is not None), default=0.0)
        n_slots = max(1, math.ceil(max(end_s, max((i[1] for i in bill.power_intervals), default=0.0)) / slot_s))
        values = covered_means(carbon, float(carbon.times_s[0]), slot_s, n_slots)
        kg, uncovered = bill.carbon_kg(0.0, slot_s, values)
        table.add_row("CO2, kg" + (f" (over the slots --carbon covers; {uncovered:,} slots used energy outside it)" if uncovered else ""), f"{kg:,.3f}")
    ended = [job for job in bill.jobs if job[5] is not None]
    # The replay submits a job at the start of the slot its submit time is in, so its wait runs from there.
    waits = np.array([job[4] - math.floor(job[2] / slot_s) * slot_s for job in ended]) if ended else np.zeros(1)
    table.add_row("jobs run", f"{len(bill.jobs):,}")
    table.add_row("jobs finished after their deadline", f"{sum(1 for job in ended if job[5] > job[6] + 1e-9):,}")
    table.add_row("wait from submit (its slot's start) to start, p50 / p95, s", f"{np.percentile(waits, 50):,.0f} / {np.percentile(waits, 95):,.0f}")
    table.add_row("jobs killed at the decommission timeout (runs), run again (jobs)", f"{bill.jobs_killed:,}, {bill.jobs_rerun:,}")
    table.add_row("peak nodes, scale events", f"{bill.peak_nodes:,}, {bill.scale_events:,}")
    return table


def record_last_runs(cluster: TwinCluster, store: JobStore) -> None:
    """The runs that ended after the replay's last slot (the twin ran them to their end), into the store
    with their jobs done, as the next slot of a daemon would: the store then holds every run of the replay."""
    # The finished twin is read as it is: its time is past the clock's now, which cluster.steps() would replay to.
    runs = {step.job_id: (step.start_s, step.end_s) for step in cluster.twin.steps.values() if step.end_s is not None}
    if runs:
        # Runs before states: the shadow store (a dry run) keeps a run only for a job it still holds.
        store.set_runs(runs)
        store.set_states(dict.fromkeys(runs, JobState.DONE))
