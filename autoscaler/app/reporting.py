"""`autoscaler report`: builds the energy report from a replay or from the daemon's slots, then
prints, writes, publishes and emails it.

The daemon's report: the TASK nodes' energy per slot, measured from their CloudWatch metrics
(eq. (13)-(14)) where the metrics exist and modelled from the decision log where they do not, against
"follow the workload" (the slots' released work L_t) and "no provisioning" (``max_nodes`` always on),
both modelled. A replay's report: every schedule modelled (paper: dynamic deferral, §VII-B).

With a carbon or price signal (``--carbon``, else the config's [carbon] source), every schedule's
energy is also counted in gCO2eq or $ per slot (``autoscaler.core.energy.accounting.with_signal``), and the daemon's
run is split by tenant by the node-slots each held.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import structlog
from rich.console import Console

from autoscaler.core import defaults, readable
from autoscaler.core.errors import ActuationError, AutoscalerError, ConfigError, DeliveryError, MetricsError
from autoscaler.core.model import CostParams, Workload
from autoscaler.core.readable import duration_text

log = structlog.get_logger("autoscaler")

DAY_S = 86400.0
MAX_REPORT_S = 366 * DAY_S
"""The longest window a report covers: a year and a day."""


@dataclasses.dataclass(frozen=True)
class EnergyOptions:
    """Power model name, start-up seconds per node, and how many slots a missing datapoint is held."""

    power_model: str = "table-iii"
    boot_s: float = defaults.BOOT_S
    max_hold_slots: int = 1
    node_vcpus: int = 1

    @property
    def model(self):
        from autoscaler.core.energy.power import ccf_aws_model, power_model

        return ccf_aws_model(self.node_vcpus) if self.power_model == "ccf-aws" else power_model(self.power_model)


def energy_options(args: argparse.Namespace, settings) -> EnergyOptions:
    """Options from the command line, else the config's [report], else the defaults."""
    report = settings.report if settings is not None else None
    options = EnergyOptions(
        power_model=args.power_model or (report.power_model if report else "table-iii"),
        boot_s=args.boot_s if args.boot_s is not None else (report.boot_s if report else defaults.BOOT_S),
        max_hold_slots=report.max_hold_slots if report else 1,
        node_vcpus=report.node_vcpus if report else 1,
    )
    _ = options.model  # an unknown model name fails here, before any work
    return options


def report_signal(source: str | None, unit: str | None, settings):
    """The signal a report is costed by: ``source`` (a path or URL, ``--carbon``) with ``unit``, else the
    config's [carbon] source and unit, else None (no CO2 or $). Raises ConfigError for a unit without
    a source; TraceError and ConfigError from ``load_signal``."""
    from autoscaler.adapters.signal_source import load_signal
    from autoscaler.core.energy.signal import plausibility_notes

    carbon = settings.carbon if settings is not None else None
    unit_name, flag = "--carbon-unit", "--carbon"
    if source is None and carbon is not None and carbon.source is not None:
        source, unit = carbon.source, unit or carbon.unit
        unit_name, flag = "--carbon-unit (or [carbon] unit)", "[carbon] source"
    if source is None:
        if unit is not None:
            raise ConfigError("report: --carbon-unit needs --carbon SOURCE (or [carbon] source in the config)")
        return None
    signal = load_signal(source, unit, carbon.timeout_s if carbon is not None else 10.0, unit_name=unit_name, flag=flag)
    for note in plausibility_notes(signal):
        log.warning("signal_implausible", source=signal.source, detail=note)
    return signal


def replay_report(
    workload: Workload,
    policies: list[str],
    deadline_slots: int,
    params: CostParams,
    options: EnergyOptions,
    start_s: float = 0.0,
    signal=None,
):
    """The modelled energy of ``policies`` replayed on ``workload`` with deadline D, against follow and no
    provisioning. ``start_s``: where the trace's first slot is placed (Unix seconds; 0: the trace's own clock).
    ``signal``: a :class:`autoscaler.core.replay.ReplaySignal` the policies decide by, as ``replay --carbon``
    does (offline with the slot cost, hold as hold+carbon); None: carbon-blind."""
    from autoscaler.core.energy.accounting import schedules_report
    from autoscaler.core.replay import BASELINE, replay

    result = replay(workload, [BASELINE, *policies], deadline_slots, params, signal=signal, power=options.model, boot_s=options.boot_s)
    schedules = {name: (r.schedule.capacity, r.schedule.assigned) for name, r in result.policies.items()}
    return schedules_report(
        f"{workload.source}, D = {deadline_slots}",
        workload.active,
        schedules,
        workload.slot_s,
        start_s=start_s,
        model=options.model,
        boot_s=options.boot_s,
        on_slots=workload.n_slots + deadline_slots,
        notes=(
            "A replay knows the work but not the cluster: it cannot see the I/O, data locality or task "
            "migration that a real cluster's CloudWatch metrics show.",
        ),
    )


def report_window(since: str | None, until: str | None, now_s: float, slot_s: float) -> tuple[int, int]:
    """(first slot, one past the last slot) of the report: whole slots from ``since`` to ``until``.

    Defaults: the last full UTC day. Slots are counted from the Unix epoch, as the daemon counts
    them. Raises ConfigError for an unreadable time or an empty window.
    """
    from autoscaler.core.intake import parse_past_time

    today_s = math.floor(now_s / DAY_S) * DAY_S
    until_s = parse_past_time(until, now_s, "--until") if until is not None else today_s
    since_s = parse_past_time(since, now_s, "--since") if since is not None else until_s - DAY_S
    if until_s > now_s:
        raise ConfigError(f"--until: {_utc(until_s)} is in the future; expected a time up to now ({_utc(now_s)})")
    if since_s < now_s - MAX_REPORT_S:
        raise ConfigError(f"--since: expected a time within {MAX_REPORT_S / DAY_S:.0f} days of now, got {since!r}")
    first, end = math.ceil(since_s / slot_s), math.floor(until_s / slot_s)
    if end <= first:
        unset = "" if until is not None else " (--until, not given, is the start of today, UTC; --until 0m is now)"
        raise ConfigError(f"--since/--until: no whole slot of {duration_text(slot_s)} between {_utc(since_s)} and {_utc(until_s)}{unset}")
    return first, end


def live_report(
    settings,
    options: EnergyOptions,
    since: str | None = None,
    until: str | None = None,
    *,
    measure: bool = True,
    now_s: float | None = None,
    session=None,
):
    """The daemon's energy report for the slots from ``since`` to ``until`` (see ``report_window``).

    Reads the decision log from the store, the TASK instances from EMR and their metrics from
    CloudWatch (unless ``measure`` is False). Raises ConfigError when the store has no decided
    slot in the window; StoreError, ActuationError and MetricsError from the adapters.
    """
    from autoscaler.app import compose
    from autoscaler.core.energy.accounting import EnergyReport, calibrated, counterfactual_schedules, modelled_schedule

    slot_s = settings.slot_s
    first, end = report_window(since, until, time.time() if now_s is None else now_s, slot_s)
    if not Path(settings.store_path).exists():
        raise ConfigError(f"{settings.store_path}: no job store here; has the daemon run with this config?")
    from autoscaler.core.controller import Decision

    with compose.report_store(settings) as store:
        decisions = {d.slot: d for d in map(Decision.from_json, store.decisions())}
    decided = sorted(slot for slot in decisions if first <= slot < end)
    if not decided:
        known = f"slots {min(decisions)}..{max(decisions)} ({_utc(min(decisions) * slot_s)} to {_utc((max(decisions) + 1) * slot_s)})" if decisions else "none"
        raise ConfigError(
            f"no slot decided between {_utc(first * slot_s)} and {_utc(end * slot_s)} in {settings.store_path}; decided: {known}"
        )
    # Report from the first decided slot; a slot the daemon missed keeps the nodes of the last one.
    first = decided[0]
    n_slots = end - first
    nodes, running, load = np.zeros(n_slots), np.zeros(n_slots), np.zeros(n_slots)
    nodes_by_tenant: list[dict[str, int]] = []
    missing = 0
    for t in range(n_slots):
        decision = decisions.get(first + t)
        nodes_by_tenant.append(dict(decision.nodes_by_tenant) if decision is not None else {})
        if decision is None:
            missing += 1
            nodes[t] = nodes[t - 1] if t else 0.0
            continue
        nodes[t], running[t], load[t] = decision.nodes, decision.running, decision.load
    assigned = np.minimum(running, nodes)
    notes = [
        f"Actual: {settings.policy} as the daemon ran it, slots {first}..{end - 1}; follow and no provisioning "
        f"({readable.count_text(settings.cluster.max_nodes, 'node')}) are modelled from its decision log, {options.model.name} power model, "
        f"{options.boot_s:g} s of idle power per node started.",
    ]
    if missing:
        notes.append(
            f"{missing:,} of the {readable.count_text(n_slots, 'slot')} {'has' if missing == 1 else 'have'} no decision (daemon down): "
            f"{'its' if missing == 1 else 'their'} nodes are the last decided."
        )
    notes.append(
        "Follow runs all the work released in the window inside it; work the run deferred past the window's "
        "end is not charged to it, so a short window flatters deferral."
    )
    modelled = modelled_schedule(f"{settings.policy} (run)", nodes, assigned, slot_s, options.model, options.boot_s)
    actual = modelled
    if measure:
        actual, measured_notes = _measured(settings, modelled, first, n_slots, assigned, options, session)
        notes += measured_notes
    schedules = [
        modelled_schedule(name, capacity, work, slot_s, options.model, options.boot_s)
        for name, (capacity, work) in counterfactual_schedules(load, settings.cluster.max_nodes).items()
    ]
    if actual.source == "measured" and modelled.energy_wh > 0:
        # The counterfactuals never ran, so they cannot be measured; the model may be off for this
        # cluster (idle CPUs, other I/O). Scaling them by the run's measured/modelled ratio compares
        # like with like: the % saved is the model's, the Wh are anchored to the measurement.
        factor = actual.energy_wh / modelled.energy_wh
        schedules = [calibrated(energy, factor) for energy in schedules]
        notes.append(
            f"The run measured {actual.energy_wh / 1000:,.3f} kWh where the model gives {modelled.energy_wh / 1000:,.3f} kWh: "
            f"follow and no provisioning are modelled and scaled by that ratio, {factor:.3f}."
        )
    return EnergyReport(
        f"EMR cluster {settings.cluster.id}",
        first * slot_s,
        slot_s,
        (*schedules, actual),
        options.model,
        options.boot_s,
        notes=tuple(notes),
        nodes_by_tenant=tuple(nodes_by_tenant),
    )


def _measured(settings, modelled, first: int, n_slots: int, assigned: np.ndarray, options: EnergyOptions, session):
    """The actual schedule from CloudWatch: measured cells by eq. (13), cells of a running node without
    usable data filled in by the model at the slot's utilisation, and the notes that say how many of each.
    When EMR or CloudWatch cannot be read, the run stays modelled and a note says why. Datapoints out of
    bounds are treated as missing, each (instance, metric) of them logged once as a warning; when that
    leaves nothing measured, MetricsError refuses the report (``autoscaler.core.energy.accounting.measured_schedule``)."""
    from autoscaler.core.energy.accounting import measured_schedule
    from autoscaler.core.energy.metric_queries import utc_text

    if settings.slot_s % 60:
        return modelled, [f"slot_s = {settings.slot_s:g} is not a whole number of minutes, CloudWatch's period: nothing measured."]
    try:
        read = _read_metrics(settings, first, n_slots, options, session)
    except (ActuationError, MetricsError) as error:
        log.warning("measurement_failed", error=str(error))
        return modelled, [f"Measuring failed ({error}); the run is modelled. `--no-measure` skips measuring."]
    if isinstance(read, str):
        return modelled, [read]
    instance_count, up, metrics, model, notes = read
    utilisation = np.divide(assigned, modelled.nodes, out=np.zeros(n_slots), where=modelled.nodes > 0)
    run = measured_schedule(modelled.schedule, metrics, up, utilisation, model)
    for record in run.out_of_bounds:
        log.warning(
            "metric_out_of_bounds",
            instance_id=record.instance_id,
            metric=record.metric,
            time=utc_text(record.time_s),
            value=record.value,
            datapoints=record.count,
            message=record.message,
        )
    notes.append(
        f"Measured: {run.counted_count:,} of {readable.count_text(run.up_count, 'node-slot')} from CloudWatch "
        f"({readable.count_text(instance_count, 'TASK instance')}); {run.held_count:,} held a missing datapoint from the slot "
        f"before; {run.modelled_count:,} had no data and {'is' if run.modelled_count == 1 else 'are'} modelled at the slot's "
        "utilisation. Start-up energy is inside the measured power."
    )
    if run.out_of_bounds:
        shown = run.out_of_bounds[:MAX_BOUNDS_NOTES]
        more = len(run.out_of_bounds) - len(shown)
        notes.append(
            f"Out of bounds, so treated as missing: {readable.count_text(sum(r.count for r in run.out_of_bounds), 'datapoint')} of "
            f"{readable.count_text(len(run.out_of_bounds), 'instance metric')}. " + "; ".join(r.message for r in shown)
            + (f"; and {more:,} more instance metric{'' if more == 1 else 's'} (each one logged)." if more else ".")
        )
    if run.clipped_count:
        notes.append(
            f"{readable.count_text(run.clipped_count, 'CPUUtilization datapoint')} a little above 100 % "
            f"{'was' if run.clipped_count == 1 else 'were'} read as 100 %."
        )
    return run.energy, notes


MAX_BOUNDS_NOTES = 5
"""Out-of-bounds (instance, metric) series the report's notes spell out; the log has every one."""


def _read_metrics(settings, first: int, n_slots: int, options: EnergyOptions, session):
    """(TASK instances listed, up mask (n_slots, n_instances), their metrics, the power model without the
    terms of metrics no node reported, notes), or one note saying why nothing can be measured."""
    from autoscaler.app import compose
    from autoscaler.core.energy.metric_queries import METRIC_NAMES

    slot_s = int(settings.slot_s)
    instances = compose.task_instances_source(settings, session).task_instances()
    start_s, end_s = first * slot_s, (first + n_slots) * slot_s
    slot_starts = start_s + np.arange(n_slots) * slot_s
    up = np.array(
        [[i.start_s < s + slot_s and (i.end_s is None or i.end_s > s) for i in instances] for s in slot_starts], dtype=bool
    ).reshape(n_slots, len(instances))
    if not up.any():
        return f"No TASK instance was up in these slots according to EMR ({len(instances)} listed): nothing measured."
    reader = compose.metrics_reader(settings, session)
    instance_ids = [i.instance_id for i in instances]
    metrics = reader.read(instance_ids, start_s, end_s, slot_s, max_hold_slots=options.max_hold_slots)
    # A metric no running node reported at all is not a gap but a metric this instance type does
    # not publish (AWS reports Disk* only for instance-store volumes): its power term is left out.
    # One whose datapoints were all out of bounds was reported, so it stays, and its cells are missing.
    absent = [
        name
        for name in METRIC_NAMES
        if np.isnan(metrics.metric(name)[up]).all() and not metrics.rejected[:, :, METRIC_NAMES.index(name)][up].any()
    ]
    if "CPUUtilization" in absent:
        return "CloudWatch has no CPUUtilization for the TASK instances in these slots: nothing measured."
    model = options.model
    notes = []
    if absent:
        terms = {"alpha_disk": ("DiskReadBytes", "DiskWriteBytes"), "alpha_dops": ("DiskReadOps", "DiskWriteOps"), "alpha_net": ("NetworkIn", "NetworkOut")}
        model = dataclasses.replace(model, **{term: 0.0 for term, names in terms.items() if set(names) & set(absent)})
        present = [name for name in METRIC_NAMES if name not in absent]
        metrics = reader.read(instance_ids, start_s, end_s, slot_s, present, max_hold_slots=options.max_hold_slots)
        notes.append(f"Not reported by any TASK instance: {', '.join(absent)}; their power terms are left out of the measured energy.")
    return len(instances), up, metrics, model, notes


def daily_report(settings, session=None) -> None:
    """Yesterday's report (UTC), for the daemon: logged per schedule, published and emailed as the
    config's [report] says. Raises what ``live_report``, ``publish`` and ``email`` raise."""
    from autoscaler.app.energy_report import energy_png, markdown

    options = EnergyOptions(
        settings.report.power_model, settings.report.boot_s, settings.report.max_hold_slots, settings.report.node_vcpus
    )
    report = live_report(settings, options, session=session)
    if settings.carbon.source is not None:
        report = _daily_signal(report, settings)
    for energy in report.schedules:
        costs = {}
        if report.signal is not None:
            used, saved = report_keys(report.signal)[:2]
            costs = {used: round(report.cost(energy.schedule), 3), saved: round(report.cost_saved(energy.schedule), 3)}
        log.info(
            "energy",
            schedule=energy.schedule,
            source=energy.source,
            energy_wh=round(energy.energy_wh, 3),
            saved_wh=round(report.saved_wh(energy.schedule), 3),
            node_slots=energy.node_slots,
            nodes_started=energy.switch_ons,
            since=_utc(report.start_s),
            slots=report.n_slots,
            **costs,
        )
    failures = []
    if settings.report.email_to:
        try:
            email(report, markdown(report), energy_png(report), settings, session)
        except AutoscalerError as error:
            failures.append(f"email: {error}")
    if settings.report.publish_metrics:
        try:
            publish(report, settings, session)
        except AutoscalerError as error:
            failures.append(f"publish: {error}")
    if failures:
        raise DeliveryError("; ".join(failures), transport="email" if settings.report.email_to else "cloudwatch")


def _daily_signal(report, settings):
    """The daily report with the config's [carbon] signal, or, when it cannot be read or covers no slot
    of the day, without it: logged as a warning and said in a note, so the energy report still goes out."""
    from autoscaler.core.energy.accounting import with_signal

    try:
        return with_signal(report, report_signal(None, None, settings))
    except AutoscalerError as error:
        log.warning("report_signal_failed", error=str(error))
        note = f"No CO2 or cost: the [carbon] signal could not be used ({error})."
        return dataclasses.replace(report, notes=(*report.notes, note))


def report_keys(signal) -> tuple[str, str, str, str]:
    """The JSON keys of a schedule's cost: (used, saved against the baseline, saved against no
    provisioning, % reduction against the baseline), in grams CO2eq or dollars."""
    if signal.is_carbon:
        return "co2_g", "co2_saved_g", "co2_saved_vs_no_provisioning_g", "co2_reduction_percent"
    return "cost_usd", "cost_saved_usd", "cost_saved_vs_no_provisioning_usd", "cost_reduction_percent"


def _json_number(value: float):
    return None if math.isnan(value) else value


def signal_document(report) -> tuple[dict, dict[str, dict], list[dict]]:
    """The JSON of a report's signal: ({source, unit, converted_from, cost_unit, slots_covered,
    slots_left_out, first_left_out_s}, {schedule: its cost fields}, [per tenant: tenant, node_slots,
    co2_g or cost_usd, share_percent] (empty without a tenant breakdown))."""
    from autoscaler.core.energy.accounting import NO_PROVISIONING

    signal = report.signal
    covered = signal.covered
    left_out = np.flatnonzero(~covered)
    summary = {
        "source": signal.source,
        "unit": signal.unit,
        "converted_from": signal.converted_from,
        "cost_unit": signal.cost_unit,
        "slots_covered": int(covered.sum()),
        "slots_left_out": int(left_out.size),
        "first_left_out_s": report.start_s + int(left_out[0]) * report.slot_s if left_out.size else None,
    }
    used, saved, saved_np, percent = report_keys(signal)
    names = [e.schedule for e in report.schedules]
    per_schedule = {
        e.schedule: {
            used: report.cost(e.schedule),
            saved: report.cost_saved(e.schedule),
            saved_np: report.cost_saved(e.schedule, NO_PROVISIONING) if NO_PROVISIONING in names else None,
            percent: _json_number(report.cost_reduction_percent(e.schedule)),
        }
        for e in report.schedules
    }
    tenants = []
    if report.nodes_by_tenant is not None:
        costs = report.tenant_costs()
        total = sum(cost for _, cost in costs.values())
        tenants = [
            {"tenant": tenant, "node_slots": node_slots, used: cost, "share_percent": 100 * cost / total if total > 0 else None}
            for tenant, (node_slots, cost) in costs.items()
        ]
    return summary, per_schedule, tenants


def deliver(report, args: argparse.Namespace, settings, out: Console, err: Console) -> int:
    """Print the report, write its files, publish its metrics and email it, as the arguments ask."""
    from autoscaler.adapters.files import write_all_atomic
    from autoscaler.app.energy_report import energy_png, markdown, slots_csv, table_rows

    text = markdown(report)
    if args.format == "json":
        header, rows = table_rows(report)
        document = {
            "title": report.title,
            "start_s": report.start_s,
            "slot_s": report.slot_s,
            "power_model": report.model.name,
            "boot_s": report.boot_s,
            "schedules": [
                {
                    "schedule": e.schedule,
                    "source": e.source,
                    "energy_wh": e.energy_wh,
                    "boot_energy_wh": e.boot_energy_wh,
                    "node_slots": e.node_slots,
                    "switch_ons": e.switch_ons,
                    "reduction_percent": _json_number(report.reduction_percent(e.schedule)),
                    "metric_totals": e.metric_totals,
                }
                for e in report.schedules
            ],
            "notes": list(report.notes),
        }
        if report.signal is not None:
            summary, per_schedule, tenants = signal_document(report)
            document["signal"] = summary
            for entry in document["schedules"]:
                entry.update(per_schedule[entry["schedule"]])
            if report.nodes_by_tenant is not None:
                document["tenants"] = tenants
        sys.stdout.write(json.dumps(document) + "\n")
    else:
        out.print(text, markup=False, highlight=False)
    png = energy_png(report) if (args.out is not None or args.email) else b""
    if args.out is not None:
        written = write_all_atomic(
            {args.out / "energy.md": text, args.out / "energy-slots.csv": slots_csv(report), args.out / "energy.png": png}
        )
        err.print("wrote " + ", ".join(str(p) for p in written), highlight=False)
    if args.publish:
        if settings is None:
            raise ConfigError("report: --publish needs --config (the CloudWatch region and endpoint)")
        publish(report, settings)
        names = "EnergyWh and SavedWh"
        if report.signal is not None:
            from autoscaler.adapters.cloudwatch_publish import CO2_METRICS, COST_METRICS

            names = "EnergyWh, SavedWh, " + " and ".join(CO2_METRICS if report.signal.is_carbon else COST_METRICS)
        err.print(f"published {names} to CloudWatch", highlight=False)
    if args.email:
        if settings is None:
            raise ConfigError("report: --email needs --config with [report] email_to and email_from")
        email(report, text, png, settings)
        err.print(f"emailed to {', '.join(settings.report.email_to)}", highlight=False)
    return 0


def publish(report, settings, session=None) -> None:
    """EnergyWh (the actual schedule's energy) and SavedWh (against follow), one datapoint at the report's
    end with the dimension ClusterId; with a signal also Co2Grams and Co2SavedGrams (or CostDollars and
    CostSavedDollars) over the slots it covers. CloudWatch adds up datapoints: publish each window once."""
    from autoscaler.app import compose

    actual = report.schedules[-1]
    publisher = compose.energy_publisher(settings, session)
    end_s = report.start_s + report.n_slots * report.slot_s
    cost = None
    if report.signal is not None:
        cost = ("co2" if report.signal.is_carbon else "price", report.cost(actual.schedule), report.cost_saved(actual.schedule))
    publisher.publish(actual.energy_wh, report.saved_wh(actual.schedule), end_s, cluster_id=settings.cluster.id, cost=cost)


def email(report, text: str, png: bytes, settings, session=None, ssl_context=None) -> str:
    """Send the report (Markdown body, PNG attached) by the config's SMTP server or SES; returns the message id."""
    from autoscaler.adapters.mail import build_report_message

    options = settings.report
    if not options.email_to or not options.email_from:
        raise ConfigError("report: --email needs [report] email_to (a list of addresses) and email_from in the config")
    message = build_report_message(
        options.email_from,
        options.email_to,
        f"Energy report: {report.title}",
        text,
        [("energy.png", png, "image/png")],
    )
    return mail_sender(settings, session, ssl_context).send(message)


def mail_sender(settings, session=None, ssl_context=None):
    """The sender of the config's [report] (:func:`autoscaler.app.compose.mail_sender`, which builds it)."""
    from autoscaler.app import compose

    return compose.mail_sender(settings, session, ssl_context)


def _utc(seconds: float) -> str:
    return readable.utc_text(seconds, layout="text")
