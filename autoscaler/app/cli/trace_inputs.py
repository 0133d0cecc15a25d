"""The inputs replay, sweep and report read from their flags: the trace as workload curves (with
the memory check before the curves are built), the --carbon signal and its forecast, and the
slots of the signal a replay's policies may read."""

from __future__ import annotations

import argparse

import numpy as np
from rich.console import Console

from autoscaler.app.cli.arguments import with_flagged_notes
from autoscaler.app.traces import open_trace, shadowed_file, shipped
from autoscaler.core.errors import AutoscalerError, ConfigError
from autoscaler.core.model import MAX_SLOTS, LengthModel, Workload


def signal_needs(args: argparse.Namespace):
    """The memory of reading --carbon and --forecast (:func:`autoscaler.core.budget.signal_needs`)."""
    from autoscaler.adapters.signal_source import local_bytes
    from autoscaler.core.budget import signal_needs as needs

    return needs((flag, value, local_bytes(value)) for flag, value in (("--carbon", args.carbon), ("--forecast", args.forecast)))


def signal_inputs(args: argparse.Namespace):
    """(the --carbon Signal or None, the forecast: 'blend', 'persistence', 'perfect', a Signal or a ForecastArchive
    (forecasts as issued: a folder, JSON lines, CSV issued,time,value, a document with its issue time),
    start Unix seconds or None)."""
    from autoscaler.adapters.signal_source import load_forecast, load_signal
    from autoscaler.core.energy.signal import parse_time_s

    if args.carbon is None:
        given = [flag for flag, value in (("--carbon-unit", args.carbon_unit), ("--start", args.start)) if value is not None]
        if args.forecast != "blend":
            given.append("--forecast")
        if given:
            raise ConfigError(f"{', '.join(given)} without --carbon: give the signal with --carbon SOURCE")
        return None, "blend", None
    start_s = None
    if args.start is not None:
        try:
            start_s = parse_time_s(args.start)
        except ValueError as exc:
            raise ConfigError(f"--start: {exc}") from None
    signal = load_signal(args.carbon, args.carbon_unit, unit_name="--carbon-unit", flag="--carbon")
    forecast = args.forecast
    words = ("blend", "persistence", "perfect")
    if forecast.strip().lower() in words and forecast not in words:
        raise ConfigError(f"--forecast {forecast!r}: the forms are blend, persistence, perfect (lower case) or a file, folder or URL")
    if not forecast.strip():
        raise ConfigError("--forecast: expected blend, persistence, perfect or a file, folder or URL, got an empty value")
    if forecast not in words:
        # A JSON forecast names its own unit; a CSV one takes --carbon-unit, never a unit guessed from the signal.
        try:
            forecast = load_forecast(forecast, args.carbon_unit, unit_name="--carbon-unit", flag="--forecast")
        except AutoscalerError as error:
            raise ConfigError(f"--forecast: {error}") from None
    return signal, forecast, start_s


def load_workload(
    trace: str | None,
    *,
    slot_s: float,
    window_slots: int | None,
    skip_bad_lines: bool,
    length_model: LengthModel,
    deadline_classes: bool = False,
    classes_optional: bool = False,
    flag: str = "--trace",
    check_size=None,
    skip_flag: str | None = None,
    containers_per_node: int | None = None,
):
    """Read the trace into workload curves: ``trace`` is a name or a path as :func:`open_trace`
    reads it (None: Workload A); ``flag`` names the option in errors, ``skip_flag`` the option that
    sets ``skip_bad_lines`` (named in a malformed line's message; None: the command has none).

    With ``deadline_classes`` (and a SWIM trace without a deadline column) each job
    gets a k-means class deadline (§VI-A) and the workload carries L_{d,t}; with
    ``classes_optional`` a trace too small for k-means gets no classes instead of an error.
    ``check_size``: called with a :class:`~autoscaler.core.budget.WorkloadSize` once the input is
    read and before the curves are built, to refuse a run too large (it raises).
    ``containers_per_node``: a SWIM trace's jobs count w nodes each (``workload.job_nodes``); a load
    curve is already in servers and ignores it. Returns (Workload, DeadlineAssignment or None), the
    workload's notes naming the flags (``with_flagged_notes``).
    """
    from autoscaler.core import workload
    from autoscaler.core.budget import WorkloadSize
    from autoscaler.core.classes import assign_deadlines, job_length_slots

    assignment = None
    with open_trace(trace, flag) as (path, source):
        if path.name.lower().endswith((".csv", ".csv.gz")):
            load = workload.read_load_curve(path)
            if window_slots is not None:
                # The window cuts a longer curve and pads a shorter one with empty slots.
                load = np.pad(load[:window_slots], (0, max(0, window_slots - load.shape[0])))
            if check_size is not None:
                check_size(WorkloadSize(n_slots=load.shape[0], slot_s=slot_s, curve=True))
            result = workload.workload_from_curve(load, slot_s=slot_s, source=source)
        else:
            parsed = workload.read_swim(path, skip_bad_lines=skip_bad_lines, skip_flag=skip_flag)
            deadlines = None
            window = window_slots or max(1, round(workload.TRACE_DAY_S / slot_s))
            if deadline_classes and parsed.jobs[0].deadline_slots is None:
                try:
                    assignment = assign_deadlines(parsed, job_length_slots(parsed, slot_s, window, length_model))
                    deadlines = assignment.deadline_slots
                except ConfigError:
                    if not classes_optional:
                        raise
            if check_size is not None and window <= MAX_SLOTS:  # beyond, the curves refuse it themselves
                rows = (None, None)
                if deadlines is not None or parsed.jobs[0].deadline_slots is not None:
                    rows = workload.deadline_rows(parsed, slot_s, window, deadlines)
                check_size(WorkloadSize(n_slots=window, slot_s=slot_s, n_jobs=len(parsed.jobs), n_deadlines=rows[0], max_deadline=rows[1]))
            result = workload.workload_from_trace(
                parsed, slot_s=slot_s, window_slots=window_slots, length_model=length_model, deadline_slots=deadlines,
                containers_per_node=containers_per_node,
            )
            result = _with_source(result, source)
    return with_flagged_notes(result), assignment


def note_shadowed_file(trace: str | None, flag: str, err: Console) -> None:
    """Say so when a trace name (A, B, default) is also a file here: the name wins."""
    path = shadowed_file(trace)
    if path is not None:
        err.print(
            f"note: {flag} {trace} is the embedded {shipped(trace).title}; the file {trace} here is not read "
            f"(give ./{trace} to read it)",
            markup=False,
            highlight=False,
        )


def _with_source(w: Workload, source: str) -> Workload:
    from dataclasses import replace

    return replace(w, source=source)


def wanted_slots(workload: Workload, deadline: int, with_gcp: bool) -> int:
    """The slots a replay's policies may read of a signal: every slot scheduled (gcp: the window plus
    its largest class deadline) and the look-ahead of the last one (hold+carbon reads t..t+2D)."""
    wanted = workload.n_slots + 3 * deadline
    if with_gcp and workload.active_by_deadline is not None:
        from autoscaler.core.model import LoadByDeadline

        by_deadline = workload.active_by_deadline
        nu = by_deadline.max_deadline if isinstance(by_deadline, LoadByDeadline) else np.shape(by_deadline)[0] - 1
        wanted = max(wanted, workload.n_slots + int(nu))
    return wanted
