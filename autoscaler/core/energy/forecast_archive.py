"""Forecasts as they were issued: each forecast with the time it was issued, so that a replay at slot t
reads only what was known at t (no look-ahead).

Pure: readers parse text the caller has read (``autoscaler.adapters.signal_source`` reads files,
folders and URLs). An :class:`IssuedForecast` is one forecast (a :class:`~autoscaler.core.energy.signal.Signal`) and
its issue time; a :class:`ForecastArchive` is many, sorted by issue time.

One provider forecast document, with the time it was issued:

* WattTime v3 ``/v3/forecast``: ``{"data": [{"point_time", "value"}], "meta": {"generated_at", "units"}}``,
  lbs/MWh; the issue time is ``meta.generated_at``;
* Electricity Maps ``/v3/carbon-intensity/forecast``: ``{"zone", "forecast": [{"datetime",
  "carbonIntensity"}], "updatedAt"}``, gCO2eq/kWh (the API reference's example response); the issue
  time is ``updatedAt``;
* UK Carbon Intensity ``/intensity/{from}/fw48h``: ``{"data": [{"from", "to", "intensity":
  {"forecast", "actual"}}]}``, gCO2eq/kWh. It carries no issue time: the first point's ``from`` is
  taken as the issue time (the API publishes the forecast for the half hours from then on, so it was
  known by then at the latest), and ``intensity.forecast`` is read before ``intensity.actual``.

An archive of many issues:

* JSON lines (``.jsonl``): one provider document per line;
* a folder of provider documents, one issue per ``.json`` file, sorted by issue time, not by file name
  (the adapter reads the folder; :func:`read_forecast_documents` takes the texts);
* a long CSV with the header ``issued,time,value``: one point per line, the time the forecast was
  issued, the time of the point, its value; ISO-8601 times (all with a zone, or none: read as UTC, as
  :func:`autoscaler.core.energy.signal.read_csv`); the unit is given by the caller (``--carbon-unit``). Each row is
  issued at or before its time (:func:`read_forecast_csv` says why at, and refuses after). A provider
  document's points are kept as it gives them: it has one issue time for them all.

Bad input raises ``TraceError`` naming the file, the line (JSON lines, CSV) or item and what was
expected; an unknown unit ``ConfigError``.
"""

from __future__ import annotations

import json
import math
from array import array
from dataclasses import dataclass
from typing import Any

import numpy as np

from autoscaler.core import readable
from autoscaler.core.energy.signal import (
    _JSON_START,
    CsvTimes,
    Signal,
    _build,
    _check_unit,
    _csv_rows,
    _json_format,
    _load_json,
    _moment,
    in_grams,
    parse_time_s,
    read_electricity_maps,
    read_signal,
    read_uk_carbon,
    read_watttime,
    utc_text,
)
from autoscaler.core.errors import ConfigError, TraceError

ARCHIVE_CSV_HEADER = ("issued", "time", "value")


@dataclass(frozen=True, eq=False)
class IssuedForecast:
    """One forecast as issued: ``issued_s``, Unix seconds (UTC) it was issued at; ``signal``, its values.
    Raises TraceError naming the signal's source for an issue time that is not a finite number."""

    issued_s: float
    signal: Signal

    def __post_init__(self) -> None:
        if isinstance(self.issued_s, bool) or not isinstance(self.issued_s, (int, float, np.floating)) or not math.isfinite(self.issued_s):
            raise TraceError(self.signal.source, None, f"issue time: expected finite Unix seconds, got {self.issued_s!r}")
        object.__setattr__(self, "issued_s", float(self.issued_s))

    @property
    def end_s(self) -> float:
        """Unix seconds where the forecast's last step ends (its last point plus the median interval;
        a forecast of one point: that point's time)."""
        times_s = self.signal.times_s
        return float(times_s[-1]) + (self.signal.median_interval_s if times_s.size > 1 else 0.0)


@dataclass(frozen=True, eq=False)
class ForecastArchive:
    """Forecasts as issued, from one source.

    ``source``: the file, folder or URL, for messages. ``unit``: every issue's unit (one of
    ``autoscaler.core.energy.signal.UNITS``). ``issues``: sorted by ``issued_s`` here (given in any order).
    ``notes``: what the reader chose that a user should know (times read as UTC).
    Raises TraceError naming the source for no issues, an issue in another unit (naming it), or two
    issues issued at one time (naming both); ConfigError for an unknown unit.
    """

    source: str
    unit: str
    issues: tuple[IssuedForecast, ...]
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_unit(self.unit)
        issues = tuple(sorted(self.issues, key=lambda issue: issue.issued_s))
        if not issues:
            raise TraceError(self.source, None, "empty forecast archive: no issues (expected one forecast document, or line, per issue)")
        for issue in issues:
            if issue.signal.unit != self.unit:
                raise TraceError(
                    self.source, None,
                    f"{issue.signal.source} (issued {utc_text(issue.issued_s)}) is in {issue.signal.unit}, the archive's other issues in "
                    f"{self.unit}: an archive's issues are in one unit",
                )  # fmt: skip
        for before, after in zip(issues, issues[1:]):
            if before.issued_s == after.issued_s:
                raise TraceError(
                    self.source, None,
                    f"{before.signal.source} and {after.signal.source} are both issued at {utc_text(after.issued_s)}: which is newer is not known",
                )  # fmt: skip
        object.__setattr__(self, "issues", issues)

    @classmethod
    def of(cls, source: str, issues, notes: tuple[str, ...] = ()) -> ForecastArchive:
        """The archive of ``issues`` in the first one's unit (TraceError as the class, also for no issues)."""
        issues = tuple(issues)
        if not issues:
            raise TraceError(source, None, "empty forecast archive: no issues (expected one forecast document, or line, per issue)")
        return cls(source, issues[0].signal.unit, issues, notes)

    @property
    def issued_s(self) -> np.ndarray:
        """The issue times, shape (n_issues,), Unix seconds, increasing."""
        return np.array([issue.issued_s for issue in self.issues])


def archive_in_grams(archive: ForecastArchive) -> ForecastArchive:
    """The archive with every issue in the unit decisions are made by (:func:`autoscaler.core.energy.signal.in_grams`:
    lbs/MWh to gCO2eq/kWh, a price as it is)."""
    if archive.unit != "lbs/MWh":
        return archive
    issues = tuple(IssuedForecast(issue.issued_s, in_grams(issue.signal)) for issue in archive.issues)
    return ForecastArchive(archive.source, "gCO2eq/kWh", issues, archive.notes)


def issue_time_s(document: Any, source: str) -> float | None:
    """The issue time of a provider document already parsed, Unix seconds, or None when its format
    carries none (a WattTime document without ``meta.generated_at``, Electricity Maps history or a
    forecast without ``updatedAt``, UK Carbon Intensity). Raises TraceError naming the field for an
    issue time that is not an ISO-8601 time with a zone."""
    if not isinstance(document, dict):
        return None
    meta = document.get("meta")
    if isinstance(document.get("data"), list) and isinstance(meta, dict) and "generated_at" in meta:
        return _field_time(meta["generated_at"], source, "meta.generated_at")
    if isinstance(document.get("forecast"), list) and "updatedAt" in document:
        return _field_time(document["updatedAt"], source, "updatedAt")
    return None


def _field_time(text: Any, source: str, field: str) -> float:
    try:
        return parse_time_s(text)
    except ValueError as exc:
        raise TraceError(source, None, f"{field}: the time the forecast was issued: {exc}") from None


def read_issued_document(text: str, source: str) -> IssuedForecast:
    """One provider forecast document with its issue time (the module's list: WattTime v3
    ``meta.generated_at``, Electricity Maps ``updatedAt``, UK Carbon Intensity the first point's
    ``from``), in the format's own unit. Raises TraceError naming the source for a document of no
    known shape, a history document (not a forecast), a missing or bad issue time (naming the field),
    or a bad point (naming the item, as :mod:`autoscaler.core.energy.signal`'s readers do)."""
    document = _load_json(text, source)
    fmt, _unit = _json_format(document, source)
    if fmt == "WattTime":
        meta = document.get("meta")
        if not (isinstance(meta, dict) and "generated_at" in meta):
            raise TraceError(source, None, "meta.generated_at: expected the time the forecast was issued (WattTime v3 /v3/forecast carries it), found none")
        return IssuedForecast(_field_time(meta["generated_at"], source, "meta.generated_at"), read_watttime(text, source))
    if fmt == "Electricity Maps":
        if not isinstance(document.get("forecast"), list):
            raise TraceError(source, None, "expected an Electricity Maps forecast ('forecast' and 'updatedAt'), got a history document: it was not issued as a forecast")
        if "updatedAt" not in document:
            raise TraceError(source, None, "updatedAt: expected the time the forecast was issued (Electricity Maps /carbon-intensity/forecast carries it), found none")
        return IssuedForecast(_field_time(document["updatedAt"], source, "updatedAt"), read_electricity_maps(text, source))
    # UK Carbon Intensity carries no issue time: the first half hour's start is taken as it.
    signal = read_uk_carbon(text, source, prefer="forecast")
    return IssuedForecast(float(signal.times_s[0]), signal)


def read_forecast_lines(text: str, source: str) -> ForecastArchive:
    """An archive from JSON lines: one provider forecast document per line (``read_issued_document``),
    blank lines skipped; each issue's source is ``source:line``. Raises TraceError naming the source
    and the line for a bad document (and the item within it), TraceError as ``ForecastArchive``."""
    issues: list[IssuedForecast] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            issues.append(read_issued_document(line, f"{source}:{line_no}"))
        except TraceError as error:
            raise TraceError(source, line_no, _message(error)) from None
    return ForecastArchive.of(source, issues)


def read_forecast_documents(documents, source: str) -> ForecastArchive:
    """An archive from provider documents, one issue each (a folder's files): ``documents`` is an
    iterable of (name, text), ``name`` each issue's source. Sorted by issue time, not by name. Raises
    TraceError naming the document's name as ``read_issued_document``, and as ``ForecastArchive``;
    TraceError naming ``source`` when no issue has two points (:func:`at_least_two_points`)."""
    return at_least_two_points(ForecastArchive.of(source, [read_issued_document(text, name) for name, text in documents]))


ONE_POINT_RULE = "a point's value holds until the next point's time: one point covers no slot"


def at_least_two_points(forecast: Signal | ForecastArchive) -> Signal | ForecastArchive:
    """``forecast`` as it is when it can cover a slot: a series of two points or more, an archive with
    an issue of two points or more (an issue of one point covers none and is never read). Raises
    TraceError naming the forecast's source otherwise: "one forecast point; expected at least 2",
    or for an archive of several issues, how many there are of one point each."""
    if isinstance(forecast, Signal):
        sizes = [forecast.times_s.size]
    else:
        sizes = [issue.signal.times_s.size for issue in forecast.issues]
    if max(sizes) >= 2:
        return forecast
    if len(sizes) == 1:
        raise TraceError(forecast.source, None, f"one forecast point; expected at least 2 ({ONE_POINT_RULE})")
    raise TraceError(forecast.source, None, f"{len(sizes)} issues of one point each; expected an issue of at least 2 points ({ONE_POINT_RULE})")


def read_forecast_csv(text: str, source: str, unit: str) -> ForecastArchive:
    """An archive from a long CSV with the header ``issued,time,value`` (any case): the time each point's
    forecast was issued, the point's time, its value in ``unit``. The lines of one issue need not be
    together; within an issue the times must increase. Times all with a zone or all without (read as
    UTC, with a note in ``notes``).

    A row is issued at or before its time. Issued at its time is a forecast: a point's value holds
    from its time to the next point's (:class:`~autoscaler.core.energy.signal.Signal` is a step function), so it
    forecasts the interval that starts then, and a replay reads an issue only from the slot that
    starts at or after its issue time (:class:`~autoscaler.core.issued.IssuedSlots`), never before;
    UK Carbon Intensity's forecasts are issued at their first half hour's start by the same rule.
    Issued after its time, a value is a measurement, not a forecast (or the columns are swapped): refused.

    Within an issue each time is after the one before in UTC. Offsets mislabelled across a DST change
    (a summer time written with the winter offset) show as a time that goes back, or two rows of one
    issue and time in UTC (the same instant written twice, or two spellings of one issue time): the
    message says so; a gap they leave cannot be told from the data.

    Raises ConfigError for an unknown ``unit``; TraceError naming the line for a wrong header, a
    wrong column count, a bad or mixed time, a bad value, a row issued after its time (naming both
    times, and their UTC offsets when these differ by as much as the two times do: a DST change), or
    a time not after the one before in its issue (naming both lines' times, in UTC where they carry
    another offset, and suggesting mislabelled offsets, or local times read as UTC)."""
    _check_unit(unit)
    time_rule = CsvTimes(source, repeated=True)
    by_issue: dict[float, tuple[array, array, array]] = {}
    header_seen = False
    for line_no, row in _csv_rows(text, source):
        cells = [cell.strip() for cell in row]
        if not any(cells):
            continue
        if not header_seen:
            if tuple(cell.lower() for cell in cells) != ARCHIVE_CSV_HEADER:
                raise TraceError(source, line_no, f"expected the header 'issued,time,value', got {','.join(row)!r}")
            header_seen = True
            continue
        if len(cells) != 3:
            raise TraceError(source, line_no, f"expected 3 columns (issued, time, value), got {len(cells)}")
        issued_s = time_rule.time_s(cells[0], line_no)
        time_s = time_rule.time_s(cells[1], line_no)
        if time_s < issued_s:
            raise TraceError(source, line_no, _issued_after_text(cells[0], cells[1], issued_s, time_s))
        try:
            value = float(cells[2])
        except ValueError:
            raise TraceError(source, line_no, f"{utc_text(time_s)}: expected a number, got {readable.echo_text(cells[2])}") from None
        times_s, values, lines = by_issue.setdefault(issued_s, (array("d"), array("d"), array("q")))
        times_s.append(time_s)
        values.append(value)
        lines.append(line_no)
    if not header_seen:
        raise TraceError(source, None, "empty file: expected the header 'issued,time,value' and one point per line")
    _check_order(text, source, by_issue)
    issues = []
    for issued_s, (times_s, values, lines) in by_issue.items():
        name = f"{source} (issued {utc_text(issued_s)})"
        # Checked under the file's name, so that a bad point is named by the file and its line.
        checked = _build(source, unit, np.frombuffer(times_s, dtype=float), np.frombuffer(values, dtype=float), lambda i, lines=lines: (int(lines[i]), ""))
        issues.append(IssuedForecast(issued_s, Signal(checked.times_s, checked.values, unit, name)))
    return ForecastArchive(source, unit, tuple(issues), time_rule.notes)


def _offset(text: str):
    """The UTC offset a time's text carries (a timedelta), None for a time without a zone."""
    return _moment(text).utcoffset()


def _offset_text(offset) -> str:
    minutes = round(offset.total_seconds() / 60)
    return f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _shown_time(text: str, time_s: float) -> str:
    """A time as the file writes it, and its UTC instant when its offset is not UTC's."""
    offset = _offset(text)
    return text if not offset else f"{text} ({utc_text(time_s)})"


def _issued_after_text(issued_text: str, time_text: str, issued_s: float, time_s: float) -> str:
    """What is wrong with a row issued after its time: a DST mislabel when the two offsets differ by
    at least the gap, else swapped columns or a measurement among forecasts."""
    text = (
        f"issued {_shown_time(issued_text, issued_s)}, after the time it forecasts, {_shown_time(time_text, time_s)}: "
        "a forecast is issued at or before its time (a value given after its time is a measurement, not a forecast); "
    )
    offsets = _offset(issued_text), _offset(time_text)
    if None not in offsets and offsets[0] != offsets[1] and issued_s - time_s <= abs((offsets[0] - offsets[1]).total_seconds()):
        return text + f"the two times carry the offsets {_offset_text(offsets[0])} and {_offset_text(offsets[1])}: are they mislabelled across a DST change?"
    return text + "are the columns issued and time swapped? Leave out the rows for times before their issue"


def _check_order(text: str, source: str, by_issue: dict) -> None:
    """Raise the TraceError for the first line, in the file, whose time is not after the one before
    in its issue (``by_issue``: issue time -> (times, values, lines) in file order). Vectorised per
    issue: an archive of a year of day-ahead issues is most of a million rows."""
    first: tuple[int, float, int] | None = None  # (line, issue time, index in its issue)
    for issued_s, (times_s, _values, lines) in by_issue.items():
        times = np.frombuffer(times_s, dtype=float)
        back = np.flatnonzero(~(times[1:] > times[:-1]))
        if back.size and (first is None or lines[back[0] + 1] < first[0]):
            first = (int(lines[back[0] + 1]), issued_s, int(back[0]) + 1)
    if first is None:
        return
    line_no, issued_s, i = first
    times_s, _values, lines = by_issue[issued_s]
    before = int(lines[i - 1])
    message = _out_of_order_text(_cells_at(text, source, line_no), _cells_at(text, source, before), before, times_s[i], times_s[i - 1], issued_s)
    raise TraceError(source, line_no, message)


def _out_of_order_text(cells: list[str], before_cells: list[str], before_line: int, time_s: float, before_s: float, issued_s: float) -> str:
    """What is wrong with a row whose time is not after the one before in its issue (on line
    ``before_line``, its cells ``before_cells``): the times as written and in UTC, and how offsets
    mislabelled across a DST change, or local times without a zone, give it."""
    issued_text, time_text = cells[0], cells[1]
    before_issued_text, before_time_text = before_cells[0], before_cells[1]
    relation = "the same instant as" if time_s == before_s else "before"
    text = (
        f"time {_shown_time(time_text, time_s)} is {relation} line {before_line}'s {_shown_time(before_time_text, before_s)} "
        f"in the forecast issued {_shown_time(issued_text, issued_s)}"
    )
    if before_issued_text != issued_text:
        text += f", which line {before_line} writes {_shown_time(before_issued_text, issued_s)}"
    text += ": within an issue each time is after the one before"
    offsets = [_offset(cell) for cell in (issued_text, time_text, before_issued_text, before_time_text)]
    if offsets[0] is None:
        return text + (
            "; these times carry no zone and are read as UTC: if they are local times, the hour repeated when summer time ends "
            "comes twice (give them in UTC or with their offsets)"
        )
    if any(offsets):
        return text + "; the UTC offsets may be mislabelled across a DST change (a summer time written with the winter offset, or the other way round)"
    return text


def _cells_at(text: str, source: str, line_no: int) -> list[str]:
    """The cells of the CSV row on line ``line_no`` (read again for a message: rows are not kept)."""
    for number, row in _csv_rows(text, source):
        if number == line_no:
            return [cell.strip() for cell in row]
    raise ValueError(f"{source}: no row on line {line_no}")


def is_archive_csv(text: str) -> bool:
    """True when the text's first non-blank line is the header ``issued,time,value`` (any case)."""
    for line in text.splitlines():
        if line.strip():
            return tuple(cell.strip().lower() for cell in line.split(",")) == ARCHIVE_CSV_HEADER
    return False


def read_forecast(text: str, source: str, unit: str | None = None, unit_name: str = "the unit") -> Signal | ForecastArchive:
    """A forecast source's text as an archive when it carries issue times, else a plain signal:

    * JSON lines (``source`` ending ``.jsonl``, or JSON text holding more than one document) → an archive;
    * a long CSV whose header is ``issued,time,value`` → an archive (``unit`` required);
    * one provider document that carries an issue time (WattTime ``meta.generated_at``, Electricity
      Maps ``updatedAt``) → an archive of one issue;
    * anything else (CSV ``time,value``, UK Carbon Intensity, a document without an issue time) → a
      plain :class:`~autoscaler.core.energy.signal.Signal` (:func:`autoscaler.core.energy.signal.read_signal`), with no issue times.

    Raises ConfigError for a missing or unknown unit (CSV), TraceError as the readers, and naming
    ``source`` for a forecast that covers no slot: one point, or issues of one point each
    (:func:`at_least_two_points`)."""
    return at_least_two_points(_read_forecast(text, source, unit, unit_name))


def _read_forecast(text: str, source: str, unit: str | None, unit_name: str) -> Signal | ForecastArchive:
    if source.split("?", 1)[0].lower().endswith(".jsonl"):
        return read_forecast_lines(text, source)
    if _JSON_START.match(text):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            if exc.msg == "Extra data":
                return read_forecast_lines(text, source)
            raise TraceError(source, exc.lineno, f"not JSON: {exc.msg} (column {exc.colno})") from None
        if issue_time_s(document, source) is not None:
            return ForecastArchive.of(source, [read_issued_document(text, source)])
        return read_signal(text, source, unit, unit_name)
    if is_archive_csv(text):
        if unit is None:
            raise ConfigError(f"{source}: a CSV forecast archive needs its unit: give {unit_name}")
        return read_forecast_csv(text, source, unit)
    return read_signal(text, source, unit, unit_name)


def _message(error: TraceError) -> str:
    """A TraceError's message without its ``path:line:`` prefix."""
    where = f"{error.path}:{error.line}" if error.line is not None else error.path
    text = str(error)
    return text[len(where) + 2 :] if text.startswith(f"{where}: ") else text
