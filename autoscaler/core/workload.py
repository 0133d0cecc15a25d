"""Workload curves from SWIM MapReduce traces (paper: dynamic deferral, §V-A and §VI-A).

A SWIM trace lists jobs with their submit time and the bytes each phase moves. We estimate each
job's length from those bytes (§V-A), then count per slot the jobs released (submitted) and the
jobs active (running); the active curve is the paper's L_t (Fig. 8). A user whose data is already
a load curve skips all that through ``read_load_curve`` and ``workload_from_curve``.

Pure: numpy only; reading the input file is the only I/O.

Over 600 lines, one module: the trace reader, the length estimate (§V-A) and the load curves built
from them share the trace's units and the error messages that name its lines.
"""

from __future__ import annotations

import math
import os

import numpy as np

from autoscaler.core import defaults
from autoscaler.core.errors import ConfigError, TraceError
from autoscaler.core.model import MAX_SLOTS, MIB, LengthModel, LoadByDeadline, Trace, TraceJob, Workload
from autoscaler.core.readable import count_text

TRACE_DAY_S = 86400.0
"""Span of the SWIM Facebook samples: one day (paper: deferral, §VI-A)."""

_SWIM_COLUMNS = (
    "job id",
    "submit time s",
    "inter-job gap s",
    "map input bytes",
    "shuffle bytes",
    "reduce output bytes",
)
_LOAD_CURVE_HEADER = ("slot", "released")

MAX_LOAD_TOTAL = 1e300
"""Largest total of a load curve, in server-slots. Costs multiply it by beta and by the
horizon's switches; float64 ends at 1.8e308, so a larger total turns costs and savings into
inf and NaN. No real load comes near it: a total this large is bytes or an overflow upstream."""


def read_swim(path: str | os.PathLike, *, skip_bad_lines: bool = False, skip_flag: str | None = None) -> Trace:
    """Read a SWIM trace: 6 tab-separated columns per line, one job per line.

    An optional 7th column gives each job's deadline in slots (on every line or none).

    Columns: job id, submit time (s), inter-job gap (s), map input bytes S, shuffle bytes S',
    reduce output bytes S'' (paper: deferral, §V-A). Blank lines are ignored. Jobs come back
    sorted by submit time (stable); ``out_of_order_lines`` counts lines whose submit time is
    smaller than the previous kept line's.

    A malformed line (wrong column count, empty or duplicate job id, a field that is not a
    finite number >= 0) raises ``TraceError(path, line, message)`` with the 1-based line and
    the column at fault. With ``skip_bad_lines=True`` such lines are dropped and counted in
    ``skipped_lines`` instead; of duplicate ids the first is kept. ``skip_flag``, if given, is the
    option that sets ``skip_bad_lines``, named in a malformed line's message.

    A file that starts with gzip's magic bytes is decompressed first (``trace.tsv.gz``).

    Raises TraceError naming the file if it is missing, unreadable, not UTF-8 or holds no jobs;
    if more than half of its lines are malformed (even with ``skip_bad_lines``), more than
    half are out of submit-time order, or submit times go back while column 3 never does
    (columns 2 and 3 swapped): the file is then not a SWIM trace as read, and the message
    says what was seen.
    """
    name = os.fspath(path)
    text = _read_text(name)
    jobs: list[TraceJob] = []
    seen_ids: dict[str, int] = {}
    skipped = 0
    first_bad = (0, "")
    out_of_order = 0
    previous_submit_s = -math.inf
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            job = _parse_swim_line(line, line_no, seen_ids)
            if jobs and (job.deadline_slots is None) != (jobs[0].deadline_slots is None):
                raise ValueError(
                    f"expected {'7' if jobs[0].deadline_slots is not None else '6'} columns like the first job's "
                    "line: the 7th column (deadline slots) goes on every line or on none"
                )
        except ValueError as exc:
            if not skip_bad_lines:
                hint = f"; {skip_flag} skips such lines and counts them" if skip_flag else ""
                raise TraceError(name, line_no, f"{exc}{hint}") from None
            if not skipped:
                first_bad = (line_no, str(exc))
            skipped += 1
            continue
        seen_ids[job.job_id] = line_no
        if job.submit_s < previous_submit_s:
            out_of_order += 1
        previous_submit_s = job.submit_s
        jobs.append(job)
    if not jobs:
        detail = f" ({skipped} bad lines skipped)" if skipped else ""
        raise TraceError(name, None, f"no jobs in the trace{detail}")
    lines = len(jobs) + skipped
    if 2 * skipped > lines:
        raise TraceError(
            name,
            None,
            f"{skipped:,} of {lines:,} lines ({100 * skipped / lines:.0f} %) are malformed and would be skipped; "
            f"the first, line {first_bad[0]}: {first_bad[1]}. Expected SWIM's tab-separated columns: "
            f"{', '.join(_SWIM_COLUMNS)}",
        )
    if 2 * out_of_order > len(jobs) or (out_of_order and len(jobs) >= 3 and _rises(job.gap_s for job in jobs)):
        raise TraceError(name, None, _out_of_order_message(jobs, out_of_order))
    if out_of_order:
        jobs.sort(key=lambda job: job.submit_s)  # list.sort is stable
    return Trace(path=name, jobs=tuple(jobs), skipped_lines=skipped, out_of_order_lines=out_of_order)


def _out_of_order_message(jobs: list[TraceJob], out_of_order: int) -> str:
    """What a mostly unsorted trace looks like, and what to check."""
    text = (
        f"{out_of_order:,} of {len(jobs):,} lines ({100 * out_of_order / len(jobs):.0f} %) have a submit time "
        "(column 2) smaller than the line before; a SWIM trace lists jobs in submit order. "
    )
    if _rises(job.gap_s for job in jobs):
        text += "Column 3 (the inter-job gap) never goes back and mostly rises, as submit times do: columns 2 and 3 look swapped. "
    return text + (
        f"Expected the columns in this order: {', '.join(_SWIM_COLUMNS)}; "
        "if the lines are only shuffled, sort them by column 2 first (sort -t$'\\t' -k2,2g)"
    )


def _rises(values) -> bool:
    """Whether the values never decrease and rise on at least half of the steps, as submit times do."""
    steps = np.diff(np.fromiter(values, dtype=float))
    return bool(steps.size and (steps >= 0).all() and 2 * np.count_nonzero(steps > 0) >= steps.size)


def read_load_curve(path: str | os.PathLike) -> np.ndarray:
    """Read a load curve L_t from a CSV with header ``slot,released``; returns shape (max_slot+1,).

    Slots are whole numbers >= 0, unique, in any order; slots not listed are zero. ``released``
    is a finite number >= 0 (servers' worth of work; fractions allowed).

    Raises TraceError naming the file and line for a missing/unreadable/non-UTF-8 file, a bad
    header, a bad number, a duplicate slot, a file with no rows, or the line where the running
    total passes ``MAX_LOAD_TOTAL``.
    """
    name = os.fspath(path)
    text = _read_text(name)
    header_seen = False
    total = 0.0
    rows: dict[int, float] = {}
    row_lines: dict[int, int] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(",")]
        if not header_seen:
            if tuple(field.lower() for field in fields) != _LOAD_CURVE_HEADER:
                raise TraceError(name, line_no, f"expected header 'slot,released', got {line.strip()!r}")
            header_seen = True
            continue
        if len(fields) != 2:
            raise TraceError(name, line_no, f"expected 2 comma-separated columns (slot,released), got {len(fields)}")
        slot = _parse_whole(fields[0])
        if slot is None:
            raise TraceError(name, line_no, f"column 1 (slot): expected a whole number >= 0, got {fields[0]!r}")
        if slot >= MAX_SLOTS:
            raise TraceError(name, line_no, f"column 1 (slot): expected a slot below {MAX_SLOTS:,}, got {fields[0]!r}")
        if slot in rows:
            raise TraceError(name, line_no, f"column 1 (slot): slot {slot} already given on line {row_lines[slot]}")
        released = _parse_non_negative(fields[1])
        if released is None:
            raise TraceError(name, line_no, f"column 2 (released): expected a finite number >= 0, got {fields[1]!r}")
        total += released
        if total > MAX_LOAD_TOTAL:
            raise TraceError(
                name,
                line_no,
                f"column 2 (released): the total load reaches {total:.4g} server-slots here, more than "
                f"{MAX_LOAD_TOTAL:g}: costs and savings of such a load overflow float64 (max 1.8e308); "
                "expected servers' worth of work per slot",
            )
        rows[slot] = released
        row_lines[slot] = line_no
    if not header_seen:
        raise TraceError(name, None, "empty file: expected header 'slot,released' and at least one row")
    if not rows:
        raise TraceError(name, None, "no rows after the header 'slot,released'")
    slots = np.fromiter(rows.keys(), dtype=np.int64, count=len(rows))
    load = np.zeros(int(slots.max()) + 1, dtype=float)
    load[slots] = np.fromiter(rows.values(), dtype=float, count=len(rows))
    return load


def estimate_length_s(
    map_input_bytes: np.ndarray | float,
    shuffle_bytes: np.ndarray | float,
    reduce_output_bytes: np.ndarray | float,
    model: LengthModel = LengthModel(),
) -> np.ndarray:
    """Estimated run time T_J in seconds of MapReduce jobs (paper: deferral, §V-A, after [18]).

    Takes byte sizes S, S', S'' (any broadcastable shapes, scalars allowed) and returns T_J with
    the broadcast shape (a 0-d array for scalars). Sizes are converted to MB = MiB to match the
    MB/s and s/MB rates of ``model``.

    X = ceil(S/block) and Y = ceil(S''/block), each at least 1;
    T_m = S/(X V_i) + f(S/X) + S'/(X V_o); T_s = S'/(X Y V_n); T_r = g(S'/Y) + S''/(Y V_o);
    f(x) = map_s_per_mb * x, g(x) = reduce_s_per_mb * x.
    T_J = T_m + λ_r (X T_s + T_r)                 if T_m < M T_s,
    T_J = λ_m T_m + M T_s + λ_r (X T_s + T_r)     otherwise.

    Readings where the paper leaves room: g takes the shuffle data per reducer S'/Y, as the
    paper's equation writes it (its prose only says "input size"); M is ``model.map_slots``,
    or X when that is None (all mappers in one round, consistent with λ_m = 1); λ_m and λ_r are
    ``model.map_rounds`` and ``model.reduce_rounds`` as given (the paper's §VI-A uses 1 and 1).

    Raises ConfigError if a size is negative, NaN or infinite.
    """
    map_mb, shuffle_mb, output_mb = (array / MIB for array in _checked_sizes(map_input_bytes, shuffle_bytes, reduce_output_bytes))
    # Absurd rates may overflow to infinity; callers refuse an infinite length with a clear error.
    with np.errstate(over="ignore", invalid="ignore"):
        return _length_s(map_mb, shuffle_mb, output_mb, model)


def _checked_sizes(*sizes: np.ndarray | float) -> list[np.ndarray]:
    """S, S', S'' as float arrays; ConfigError naming the first size that is negative, NaN or infinite."""
    checked = []
    for label, values in zip(("map_input_bytes", "shuffle_bytes", "reduce_output_bytes"), sizes):
        array = np.asarray(values, dtype=float)
        bad = ~(np.isfinite(array) & (array >= 0))
        if bad.any():
            first_bad = np.unravel_index(int(np.argmax(bad)), array.shape) if array.ndim else ()
            raise ConfigError(
                f"{label} must be finite numbers >= 0 (bytes), got {float(array[first_bad])!r} at index {first_bad}"
            )
        checked.append(array)
    return checked


def _length_s(map_mb: np.ndarray, shuffle_mb: np.ndarray, output_mb: np.ndarray, model: LengthModel) -> np.ndarray:
    block_mb = model.block_bytes / MIB
    mappers = np.maximum(1.0, np.ceil(map_mb / block_mb))  # X
    reducers = np.maximum(1.0, np.ceil(output_mb / block_mb))  # Y

    map_s = map_mb / (mappers * model.read_mb_s) + model.map_s_per_mb * (map_mb / mappers) + shuffle_mb / (
        mappers * model.write_mb_s
    )
    shuffle_s = shuffle_mb / (mappers * reducers * model.network_mb_s)
    reduce_s = model.reduce_s_per_mb * (shuffle_mb / reducers) + output_mb / (reducers * model.write_mb_s)

    map_slots = mappers if model.map_slots is None else float(model.map_slots)  # M
    reduce_part_s = model.reduce_rounds * (mappers * shuffle_s + reduce_s)
    overlapped_s = map_s + reduce_part_s
    waiting_s = model.map_rounds * map_s + map_slots * shuffle_s + reduce_part_s
    return np.asarray(np.where(map_s < map_slots * shuffle_s, overlapped_s, waiting_s))


def job_nodes(
    map_input_bytes: np.ndarray | float,
    reduce_output_bytes: np.ndarray | float,
    containers_per_node: int | None,
    model: LengthModel = LengthModel(),
) -> np.ndarray:
    """w, the whole nodes each job runs on at once (paper: deferral, §V-A's task counts), shape the
    sizes' broadcast shape, int64 >= 1.

    The mappers that run at once, X = ceil(S/block) (at most M = ``model.map_slots`` when set),
    or the reducers Y = ceil(S''/block), whichever is more, each at least 1, are containers;
    ``containers_per_node`` of them fit a node (a TASK instance type's YARN capacity), so w =
    ceil(max(X, Y) / containers_per_node). ``containers_per_node`` None: every job is one node
    (w = 1), the model of every figure before widths. Raises ConfigError for a size that is
    negative, NaN or infinite, or a ``containers_per_node`` that is not a whole number >= 1.
    """
    map_bytes, output_bytes = _checked_sizes(map_input_bytes, 0.0, reduce_output_bytes)[::2]
    if containers_per_node is None:
        return np.ones(np.broadcast(map_bytes, output_bytes).shape, dtype=np.int64)
    if isinstance(containers_per_node, bool) or not isinstance(containers_per_node, (int, np.integer)) or containers_per_node < 1:
        raise ConfigError(f"containers_per_node: expected a whole number >= 1 (YARN containers a TASK node holds), got {containers_per_node!r}")
    mappers = np.maximum(1.0, np.ceil(map_bytes / model.block_bytes))  # X
    if model.map_slots is not None:
        mappers = np.minimum(mappers, float(model.map_slots))  # M at a time
    reducers = np.maximum(1.0, np.ceil(output_bytes / model.block_bytes))  # Y
    return np.ceil(np.maximum(mappers, reducers) / int(containers_per_node)).astype(np.int64)


def estimate_demand_vector(
    map_input_bytes: np.ndarray | float,
    shuffle_bytes: np.ndarray | float,
    reduce_output_bytes: np.ndarray | float,
    model: LengthModel = LengthModel(),
) -> np.ndarray:
    """Estimated resource use of MapReduce jobs: (CPU seconds, disk bytes, network bytes), shape (..., 3).

    From the same sizes S, S', S'' and rates as ``estimate_length_s`` (paper: deferral, §V-A):
    CPU seconds are the map and reduce compute f(S) + g(S') summed over all tasks; disk bytes are
    what the job reads and writes locally, S (map input) + S' (map output spilled for the
    shuffle) + S'' (reduce output); network bytes are the shuffle S'. These are the demand
    vectors of tenants for dynamic DRF (paper: dynamic DRF note, §2). Raises ConfigError if a
    size is negative, NaN or infinite.
    """
    map_bytes, shuffle, output = np.broadcast_arrays(*_checked_sizes(map_input_bytes, shuffle_bytes, reduce_output_bytes))
    with np.errstate(over="ignore"):
        cpu_s = model.map_s_per_mb * map_bytes / MIB + model.reduce_s_per_mb * shuffle / MIB
        return np.stack([cpu_s, map_bytes + shuffle + output, shuffle], axis=-1)


def workload_from_trace(
    trace: Trace,
    *,
    slot_s: float = defaults.SLOT_S,
    window_slots: int | None = None,
    length_model: LengthModel = LengthModel(),
    deadline_slots: np.ndarray | None = None,
    containers_per_node: int | None = None,
) -> Workload:
    """Released and active curves of a trace over a window of slots (paper: deferral, §VI-A, Fig. 8).

    A job submitted at s seconds is released in slot floor(s/slot_s); with estimated length T
    (``estimate_length_s``) it is active in slots floor(s/slot_s) .. max(first, ceil((s+T)/slot_s) - 1),
    so every job is active in at least its release slot. ``released`` and ``active`` have shape
    (window_slots,), in jobs per slot. The window defaults to the trace's day,
    round(86400/slot_s) slots (288 at 300 s).

    Jobs released at or after the window's end are not counted (``jobs_after_window``). With the
    default window, more than half of the trace's lines dropped (released after it, or malformed)
    raises TraceError saying what was seen: times in ms, a longer trace, other columns;
    ``n_jobs`` counts the jobs released inside the window, so ``released.sum() == n_jobs``.
    Job-slots past the end are dropped: ``clipped_jobs`` jobs ran past it, losing
    ``clipped_job_slots`` job-slots in all; jobs whose estimated length alone exceeds the
    window are named in ``notes`` (a warning for the operator; it and the TraceErrors' hints name the
    parameters to change, marked `window_slots`, `slot_s`, `block_bytes`, which the command line names by
    its flags). ``skipped_lines`` and ``out_of_order_lines`` are
    copied from the trace.

    ``deadline_slots`` (one per trace job, shape (n_jobs,), whole slots >= 0) adds
    ``active_by_deadline``, L_{d,t} (paper: deferral, §IV) as a :class:`LoadByDeadline`:
    one row per distinct deadline d, counting the active jobs whose deadline is d. Without it, jobs' own deadlines (the 7th column) are used if
    the trace has them.

    ``containers_per_node``: jobs run on w nodes each (``job_nodes``), and ``active`` and
    ``active_by_deadline`` count w in each slot a job is active (L_t = the sum of w over the active
    jobs, in node-slots); None (the default): w = 1, so ``active`` counts jobs.

    Raises ConfigError if slot_s is not a finite number > 0 or window_slots is not a whole number >= 1,
    or for a bad ``containers_per_node`` (``job_nodes``).
    """
    slot_s = _require_slot_s(slot_s)
    default_window = window_slots is None
    if deadline_slots is None and trace.jobs and trace.jobs[0].deadline_slots is not None:
        # Cut at 2**40 before numpy sees it; the window cut below is the one that matters.
        deadline_slots = np.array([min(job.deadline_slots, 2**40) for job in trace.jobs], dtype=np.int64)
    if window_slots is None:
        window_slots = max(1, round(TRACE_DAY_S / slot_s))
    elif isinstance(window_slots, bool) or not isinstance(window_slots, (int, np.integer)) or window_slots < 1:
        raise ConfigError(f"window_slots must be a whole number >= 1, got {window_slots!r}")
    window_slots = int(window_slots)
    if window_slots > MAX_SLOTS:
        raise ConfigError(
            f"a window of {window_slots:,} slots of {slot_s:g} s is more than the {MAX_SLOTS:,} slots planned at once: "
            "use longer slots or a shorter window"
        )

    n_total = len(trace.jobs)
    columns = [
        np.fromiter((getattr(job, attr) for job in trace.jobs), dtype=float, count=n_total)
        for attr in ("submit_s", "map_input_bytes", "shuffle_bytes", "reduce_output_bytes")
    ]
    submit_s, map_bytes, shuffle_bytes, output_bytes = columns
    if not (np.isfinite(submit_s) & (submit_s >= 0)).all():
        raise ConfigError(f"trace {trace.path!r}: submit times must be finite numbers >= 0")
    length_s = estimate_length_s(map_bytes, shuffle_bytes, output_bytes, length_model)

    if not np.isfinite(length_s).all():
        job = trace.jobs[int(np.argmax(~np.isfinite(length_s)))]
        raise ConfigError(
            f"{trace.path}: job {job.job_id!r} gets an infinite estimated length: check the length model's rates"
        )
    # Slot positions stay floats until clipped to the window, so no size or time overflows an int.
    position = submit_s / slot_s
    in_window = position < window_slots
    if not in_window.any():  # also an empty trace
        raise TraceError(
            trace.path,
            None,
            f"no job is submitted inside the window of {window_slots} slots ({window_slots * slot_s:g} s); "
            + (f"the first is at {submit_s.min():g} s" if submit_s.size else "no job of the trace is left to replay")
            + ": give a longer `window_slots` or times relative to the trace's start",
        )
    # Lines lost (released after the default window, or malformed) or out of order: more than
    # half of them means the file was read wrongly (ms, another column order, a longer trace).
    lost = trace.skipped_lines + int(n_total - in_window.sum()) + trace.out_of_order_lines
    if default_window and n_total and 2 * lost > n_total + trace.skipped_lines:
        raise TraceError(trace.path, None, _dropped_message(trace, submit_s, in_window, slot_s, window_slots))
    first_slot = np.floor(position[in_window]).astype(np.int64)
    end_position = np.maximum(first_slot + 1.0, np.ceil((submit_s[in_window] + length_s[in_window]) / slot_s))
    end_slot = np.minimum(end_position, window_slots).astype(np.int64)  # one past the last slot in the window

    released = np.bincount(first_slot, minlength=window_slots).astype(float)
    # Difference array: +w where a job starts, -w one past its last slot inside the window (w = 1
    # without containers_per_node; whole numbers either way, so the sums are exact).
    width = None
    if containers_per_node is not None:
        width = job_nodes(map_bytes, output_bytes, containers_per_node, length_model)[in_window].astype(float)
    starts = np.bincount(first_slot, weights=width, minlength=window_slots + 1)
    stops = np.bincount(np.minimum(end_slot, window_slots), weights=width, minlength=window_slots + 1)
    active = np.cumsum(starts - stops)[:window_slots].astype(float)

    by_deadline = None
    if deadline_slots is not None:
        deadline_slots = np.asarray(deadline_slots, dtype=np.int64)
        if deadline_slots.shape != (n_total,) or (deadline_slots < 0).any():
            raise ConfigError(f"deadline_slots must be {n_total} whole numbers >= 0, one per job")
        # A deadline past the window is cut to the window: stricter, so still met, and it bounds nu.
        job_deadline = np.minimum(deadline_slots[in_window], window_slots)
        by_deadline = _load_by_deadline(job_deadline, first_slot, end_slot, window_slots, width)

    overrun = end_position - window_slots
    return Workload(
        notes=_long_job_notes(trace, length_s, in_window, window_slots * slot_s, length_model),
        source=trace.path,
        slot_s=slot_s,
        released=released,
        active=active,
        n_jobs=int(in_window.sum()),
        clipped_jobs=int((overrun > 0).sum()),
        clipped_job_slots=int(round(float(overrun[overrun > 0].sum()))),
        jobs_after_window=int(n_total - in_window.sum()),
        skipped_lines=trace.skipped_lines,
        out_of_order_lines=trace.out_of_order_lines,
        active_by_deadline=by_deadline,
    )


LONG_JOBS_NAMED = 5
"""Jobs longer than the window named one by one in the warning; the rest are counted."""


def _long_job_notes(trace: Trace, length_s: np.ndarray, in_window: np.ndarray, window_s: float, model: LengthModel) -> tuple[str, ...]:
    """A warning naming the jobs inside the window whose estimated length (§V-A) exceeds the window.

    Such an estimate is most often one reducer (Y = ceil(S''/block) = 1 for a small output) taking
    a whole shuffle, or sizes in the wrong unit; the clipped curves then hide it.
    """
    long = np.flatnonzero(in_window & (length_s > window_s))
    if long.size == 0:
        return ()
    long = long[np.argsort(-length_s[long], kind="stable")]
    block = model.block_bytes
    named = []
    for i in long[:LONG_JOBS_NAMED]:
        job = trace.jobs[int(i)]
        mappers = max(1, math.ceil(job.map_input_bytes / block))
        reducers = max(1, math.ceil(job.reduce_output_bytes / block))
        named.append(
            f"{job.job_id} {length_s[i] / 3600:,.1f} h ({mappers:,} mapper{'s' * (mappers != 1)}, "
            f"{reducers:,} reducer{'s' * (reducers != 1)} for {job.shuffle_bytes / 2**30:,.4g} GiB of shuffle)"
        )
    more = f", and {long.size - LONG_JOBS_NAMED:,} more" if long.size > LONG_JOBS_NAMED else ""
    return (
        f"{long.size:,} job{'s' * (long.size != 1)} {'have' if long.size != 1 else 'has'} an estimated length longer "
        f"than the window ({window_s / 3600:,.4g} h) and {'are' if long.size != 1 else 'is'} clipped at its end: "
        + "; ".join(named)
        + more
        + ". Check the sizes (bytes) and the length model's rates (`block_bytes`, `network_mb_s` ...)",
    )


def _are(count: int) -> str:
    return "is" if count == 1 else "are"


def _dropped_message(trace: Trace, submit_s: np.ndarray, in_window: np.ndarray, slot_s: float, window_slots: int) -> str:
    """Why most of a trace would be left out of the default window or reordered, and what to try."""
    lines = len(trace.jobs) + trace.skipped_lines
    after = int((~in_window).sum())
    window_s = window_slots * slot_s
    last_s = float(submit_s.max())
    seen = []
    if after:
        seen.append(f"{count_text(after, 'job')} {_are(after)} submitted after the window's end at {window_s:,.0f} s ({window_slots:,} slots of {slot_s:g} s)")
    if trace.out_of_order_lines:
        seen.append(f"{count_text(trace.out_of_order_lines, 'line')} {_are(trace.out_of_order_lines)} out of submit-time order")
    if trace.skipped_lines:
        seen.append(f"{count_text(trace.skipped_lines, 'line')} {_are(trace.skipped_lines)} malformed")
    lost = after + trace.out_of_order_lines + trace.skipped_lines
    text = (
        f"{lost:,} of {lines:,} lines ({100 * min(lost, lines) / lines:.0f} %) would be dropped or reordered: "
        + "; ".join(seen)
        + f". Submit times (column 2) run from {float(submit_s.min()):,.0f} to {last_s:,.0f} s ({last_s / TRACE_DAY_S:,.1f} days). "
    )
    if 0.1 * window_s <= last_s / 1000 <= 1.5 * window_s:
        text += f"If they are in milliseconds, divide columns 2 and 3 by 1000 (they would span {last_s / 1000 / 3600:,.3g} h). "
    slots_needed = math.floor(last_s / slot_s) + 1
    if after and slots_needed <= MAX_SLOTS:
        text += f"If the trace is longer than a day, give `window_slots` {slots_needed} (slots of {slot_s:g} s) to replay all of it. "
    elif after and last_s <= 400 * TRACE_DAY_S:
        text += (
            f"If the trace is longer than a day, give a longer `slot_s` and a `window_slots` covering {last_s:,.0f} s "
            f"(at most {MAX_SLOTS:,} slots). "
        )
    elif after:
        text += "Submit times this large look like byte counts. "
    return text + f"If the columns are in another order, SWIM's is: {', '.join(_SWIM_COLUMNS)}"


def deadline_rows(trace: Trace, slot_s: float, window_slots: int, deadline_slots: np.ndarray | None = None) -> tuple[int, int]:
    """(K, nu): the distinct deadlines of the jobs inside the window, cut to the window as
    ``workload_from_trace`` cuts them, and the largest; the shape of its L_{d,t} before it is built.

    ``deadline_slots``: one per trace job, shape (n_jobs,); else the trace's own 7th column.
    Raises ConfigError if there are neither.
    """
    slot_s = _require_slot_s(slot_s)
    if deadline_slots is None:
        if not trace.jobs or trace.jobs[0].deadline_slots is None:
            raise ConfigError(f"{trace.path}: no job deadlines to count")
        deadline_slots = np.array([min(job.deadline_slots, 2**40) for job in trace.jobs], dtype=np.int64)
    submit_s = np.fromiter((job.submit_s for job in trace.jobs), dtype=float, count=len(trace.jobs))
    inside = np.minimum(np.asarray(deadline_slots, dtype=np.int64)[submit_s / slot_s < window_slots], window_slots)
    if inside.size == 0:
        return 0, 0
    return int(np.unique(inside).size), int(inside.max())


def _load_by_deadline(
    job_deadline: np.ndarray, first_slot: np.ndarray, end_slot: np.ndarray, window_slots: int, nodes: np.ndarray | None = None
) -> LoadByDeadline:
    """L_{d,t} with one row per distinct deadline: each job counts its w (``nodes``; None: 1) in its deadline's row from its
    first slot up to (not including) its end slot. Takes K x (window_slots + 1) floats, K the
    distinct deadlines, and nothing of the size nu x window_slots."""
    deadlines, row = np.unique(job_deadline, return_inverse=True)
    width = window_slots + 1
    # One difference array for all rows, +1 where a job starts and -1 one past its end, summed
    # along each row in place: exact, the counts being whole numbers far below 2**53.
    steps = np.bincount(
        np.concatenate([row * width + first_slot, row * width + end_slot]),
        weights=np.concatenate([np.ones(row.size), -np.ones(row.size)]) if nodes is None else np.concatenate([nodes, -nodes]),
        minlength=deadlines.size * width,
    ).reshape(deadlines.size, width)
    np.cumsum(steps, axis=1, out=steps)
    return LoadByDeadline(deadlines=deadlines.astype(np.int64), load=steps[:, :window_slots])


def workload_from_curve(load: np.ndarray, *, slot_s: float = defaults.SLOT_S, source: str = "curve") -> Workload:
    """Wrap a load curve L_t, shape (n_slots,), as a Workload with released = active = load, n_jobs = 0.

    Raises ConfigError if load is empty, not 1-D, or has a value that is not finite and >= 0,
    if its total passes ``MAX_LOAD_TOTAL``, or if slot_s is not a finite number > 0.
    """
    slot_s = _require_slot_s(slot_s)
    try:
        curve = np.array(load, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"load curve {source!r} must be numbers: {exc}") from None
    if curve.ndim != 1 or curve.size == 0:
        raise ConfigError(f"load curve {source!r} must have shape (n_slots,) with n_slots >= 1, got {curve.shape}")
    bad = ~(np.isfinite(curve) & (curve >= 0))
    if bad.any():
        slot = int(np.argmax(bad))
        raise ConfigError(f"load curve {source!r}: slot {slot} must be a finite number >= 0, got {curve[slot]!r}")
    with np.errstate(over="ignore"):
        running = np.cumsum(curve)
    if not running[-1] <= MAX_LOAD_TOTAL:
        slot = int(np.argmax(~(running <= MAX_LOAD_TOTAL)))
        raise ConfigError(
            f"load curve {source!r}: the total load passes {MAX_LOAD_TOTAL:g} server-slots at slot {slot}: "
            "costs and savings of such a load overflow float64 (max 1.8e308)"
        )
    return Workload(source=source, slot_s=slot_s, released=curve, active=curve.copy(), n_jobs=0)


MAX_TRACE_BYTES = 2 * 1024**3
"""Largest trace or load curve read: 2 GiB (the whole file is held in memory)."""


def _read_text(name: str) -> str:
    try:
        with open(name, "rb") as handle:
            if not os.path.isfile(name):
                raise TraceError(name, None, "not a regular file (a device, pipe or folder); expected a trace file")
            if os.fstat(handle.fileno()).st_size > MAX_TRACE_BYTES:
                raise TraceError(name, None, f"larger than {MAX_TRACE_BYTES // 1024**3} GiB; expected a trace that fits in memory")
            raw = handle.read()
    except FileNotFoundError:
        raise TraceError(name, None, "no such file") from None
    except OSError as exc:
        raise TraceError(name, None, f"cannot read: {exc.strerror or exc}") from None
    if raw[:2] == _GZIP_MAGIC:
        raw = _gunzip(name, raw)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_no = raw.count(b"\n", 0, exc.start) + 1
        raise TraceError(name, line_no, f"not UTF-8 text (byte {exc.start}: {exc.reason})") from None


_GZIP_MAGIC = b"\x1f\x8b"


def _gunzip(name: str, raw: bytes) -> bytes:
    """The decompressed bytes of a gzip file, read a MiB at a time up to ``MAX_TRACE_BYTES``."""
    import gzip
    import io
    import zlib

    chunks: list[bytes] = []
    total = 0
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
            while chunk := stream.read(2**20):
                total += len(chunk)
                if total > MAX_TRACE_BYTES:
                    raise TraceError(name, None, f"decompresses to more than {MAX_TRACE_BYTES // 1024**3} GiB; expected a trace that fits in memory")
                chunks.append(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(name, None, f"starts like a gzip file but cannot be decompressed ({exc}); give the trace as text or as a whole .gz") from None
    return b"".join(chunks)


def _parse_swim_line(line: str, line_no: int, seen_ids: dict[str, int]) -> TraceJob:
    """One SWIM line as a TraceJob; ValueError with the column and what was expected otherwise."""
    fields = line.split("\t")
    deadline_slots = None
    if len(fields) == len(_SWIM_COLUMNS) + 1:
        deadline_slots = _parse_whole(fields.pop())
        if deadline_slots is None:
            raise ValueError(f"column 7 (deadline slots): expected a whole number >= 0, got {line.split(chr(9))[-1].strip()!r}")
    if len(fields) != len(_SWIM_COLUMNS):
        expected = f"{len(_SWIM_COLUMNS)} tab-separated columns ({', '.join(_SWIM_COLUMNS)}), and optionally a 7th: deadline slots"
        raise ValueError(f"expected {expected}, got {len(fields)}")
    job_id = fields[0].strip()
    if not job_id:
        raise ValueError("column 1 (job id): expected a non-empty id")
    if job_id in seen_ids:
        raise ValueError(f"column 1 (job id): {job_id!r} already used on line {seen_ids[job_id]}")
    numbers = []
    for column, text in enumerate(fields[1:], start=2):
        value = _parse_non_negative(text)
        if value is None:
            raise ValueError(
                f"column {column} ({_SWIM_COLUMNS[column - 1]}): expected a finite number >= 0, got {text.strip()!r}"
            )
        numbers.append(value)
    return TraceJob(job_id, *numbers, deadline_slots=deadline_slots)


def _parse_non_negative(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _parse_whole(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        as_float = _parse_non_negative(text)
        if as_float is None or not as_float.is_integer():
            return None
        value = int(as_float)
    return value if value >= 0 else None


def _require_slot_s(slot_s: float) -> float:
    if isinstance(slot_s, bool) or not isinstance(slot_s, (int, float, np.floating, np.integer)):
        raise ConfigError(f"slot_s must be a finite number > 0 (seconds), got {slot_s!r}")
    if not (math.isfinite(slot_s) and slot_s > 0):
        raise ConfigError(f"slot_s must be a finite number > 0 (seconds), got {slot_s!r}")
    return float(slot_s)
