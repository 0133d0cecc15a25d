"""A per-slot cost signal (grid carbon intensity or a price) for carbon- and price-aware deferral.

Pure: readers parse text the caller has read (``autoscaler.adapters.signal_source`` reads files and
URLs). A ``Signal`` is a step function: ``values[i]`` holds from ``times_s[i]`` to ``times_s[i + 1]``,
the last value for the series' median interval. ``resample`` turns it into one mean value per slot.

Formats read:

* CSV with a two-column header ``time,<any name>`` (``time,value``, ``Time,Carbon Intensity``), ISO-8601
  times with a zone (``Z`` or ``+hh:mm``), any resolution; a file whose times ALL carry no zone is read
  as UTC, with a note (``Signal.notes``), and one that mixes the two is refused naming the first line
  that differs;
* WattTime v3 JSON (``/v3/historical``, ``/v3/forecast``): ``{"data": [{"point_time", "value"}], "meta"}``,
  lbs/MWh (``meta.units`` = ``lbs_co2_per_mwh``);
* Electricity Maps JSON (``/carbon-intensity/history``, ``/forecast``): ``{"history" | "forecast":
  [{"datetime", "carbonIntensity"}]}``, gCO2eq/kWh;
* UK Carbon Intensity API JSON (``/intensity/...``): ``{"data": [{"from", "to", "intensity":
  {"forecast", "actual"}}]}``, gCO2eq/kWh, the actual value where there is one, else the forecast.

Every time is converted to UTC Unix seconds, so a series whose offsets change at a DST change
(``+01:00`` then ``+02:00``) sorts by the instant, not by the local clock.

Bad input raises ``TraceError`` naming the source, the line (CSV) or item (JSON) and the UTC time;
a wrong argument (an unknown unit, a slot length <= 0) raises ``ConfigError``.

Over 600 lines, one module: each reader returns a Signal and shares its checks (zones, units,
plausibility) and ``resample``; they are one format's parsing each, and most of the length is their messages.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from numbers import Real
from typing import Any

import numpy as np

from autoscaler.core import readable
from autoscaler.core.errors import ConfigError, TraceError

GRAMS_PER_POUND = 453.59237
"""The international avoirdupois pound, exactly (1959 agreement)."""

MAX_GRAMS_PER_KWH = 5_000.0
"""No grid emits more than about 1,200 gCO2eq/kWh (lignite plants); above 5,000 a value is a unit or
typing error."""

UNITS = ("gCO2eq/kWh", "lbs/MWh", "$/kWh", "$/node-hour")

MAX_VALUE_BY_UNIT = {
    "gCO2eq/kWh": MAX_GRAMS_PER_KWH,
    "lbs/MWh": MAX_GRAMS_PER_KWH * 1000.0 / GRAMS_PER_POUND,
    "$/kWh": 100.0,
    "$/node-hour": 1_000.0,
}
"""The largest value taken as real, per unit. 5,000 gCO2eq/kWh is about 11,023 lbs/MWh. Retail and
spot electricity prices stay well below 100 $/kWh even in scarcity pricing (ERCOT's cap is 5 $/kWh);
the largest cloud instances cost a few hundred dollars an hour."""

PLAUSIBLE_MEDIAN_BY_UNIT = {
    "gCO2eq/kWh": (1.0, 1_300.0, "a price in $/kWh", "a series in lbs/MWh"),
    "lbs/MWh": (1.0 * 1000.0 / GRAMS_PER_POUND, 1_300.0 * 1000.0 / GRAMS_PER_POUND, "a price in $/kWh", "a series in gCO2eq/kWh per MWh"),
    "$/kWh": (1e-3, 5.0, "a price per Wh", "a carbon intensity in gCO2eq/kWh, or a price per MWh"),
    "$/node-hour": (1e-3, 200.0, "a price per node-second", "a price per node-day or per month"),
}
"""(low, high, what a median below low is likely to be, what one above high is) per unit. Grids run
from about 1 gCO2eq/kWh (hydro: Quebec, Iceland) to 1,200 (lignite); electricity sells from a few
tenths of a cent to scarcity caps of about 5 $/kWh; cloud nodes cost from cents to about 100 $ an
hour. A median outside is a warning, not a refusal: a unit mistake the ceiling does not catch."""

GAP_FACTOR = 2.0
"""A step longer than this many median intervals inside a resampled window is a gap, not a step."""

WATTTIME_UNITS = "lbs_co2_per_mwh"


@dataclass(frozen=True, eq=False)
class Signal:
    """A cost signal as a step function.

    ``times_s``: shape (n,), float Unix seconds (UTC), strictly increasing, the start of each interval.
    ``values``: shape (n,), float, finite, >= 0 and at most ``MAX_VALUE_BY_UNIT[unit]``.
    ``unit``: one of ``UNITS``. ``source``: the file name or URL, for messages. ``notes``: what the
    reader chose that a user should know (times with no zone read as UTC); :func:`plausibility_notes`
    gives them first.
    Raises ConfigError for an unknown unit, TraceError for an empty series or a bad point.
    """

    times_s: np.ndarray
    values: np.ndarray
    unit: str
    source: str
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        times_s = np.asarray(self.times_s, dtype=float)
        values = np.asarray(self.values, dtype=float)
        if times_s.ndim != 1 or values.shape != times_s.shape:
            raise TraceError(self.source, None, f"times and values must be two 1-D arrays of one length, got shapes {times_s.shape} and {values.shape}")
        _check_points(self.source, self.unit, times_s, values, lambda i: (None, f"point {i}"))
        object.__setattr__(self, "times_s", times_s)
        object.__setattr__(self, "values", values)

    @cached_property
    def median_interval_s(self) -> float:
        """The median time between consecutive points, in seconds; the length of the last step
        (computed once: a slot's window reads it for every issue of an archive).
        Raises TraceError for a single point, which has no interval."""
        if self.times_s.size < 2:
            raise TraceError(self.source, None, "one point only: a series needs two points to give its interval")
        return float(np.median(np.diff(self.times_s)))


def with_history(earlier: Signal | None, read: Signal, keep_s: float) -> Signal:
    """``read`` with the points of ``earlier`` that come before its first time and at most ``keep_s``
    seconds before it, when the two join up: a source that serves only the last day (as live APIs
    do) then builds up the days of history a forecast scores with, read after read.

    Where they overlap, ``read`` wins (a provider may revise a value). ``earlier`` is left out when it
    is None, in another unit, or ends more than one of its intervals before ``read`` starts (a gap: a
    step function would carry its last value across it). ``keep_s``: seconds >= 0. Pure; the notes
    are ``read``'s.
    """
    if earlier is None or earlier.unit != read.unit or earlier.times_s.size < 2 or read.times_s.size == 0:
        return read
    first_s = float(read.times_s[0])
    if float(earlier.times_s[-1]) + earlier.median_interval_s < first_s - 1e-6:
        return read
    kept = (earlier.times_s < first_s) & (earlier.times_s >= first_s - keep_s)
    if not kept.any():
        return read
    return Signal(
        np.concatenate([earlier.times_s[kept], read.times_s]),
        np.concatenate([earlier.values[kept], read.values]),
        read.unit,
        read.source,
        read.notes,
    )


def utc_text(time_s: float) -> str:
    """Unix seconds as an ISO-8601 UTC time to the second (``2026-03-29T01:00:00Z``), for messages:
    :func:`autoscaler.core.readable.utc_text`, which never raises (a time past year 9999 is given in seconds)."""
    return readable.utc_text(time_s, precision="second")


NAIVE_UTC_NOTE = "times carry no zone: read as UTC"
"""The note on a CSV file whose every time has no zone (``2019-12-20 00:30:00``)."""


def parse_time_s(text: Any, naive_utc: bool = False) -> float:
    """An ISO-8601 time with a zone (``Z``, ``+hh:mm``) as Unix seconds; with ``naive_utc``, a time
    with no zone is read as UTC. Raises ValueError, with what was expected, for a time without a zone
    (unless ``naive_utc``) or one that does not parse."""
    moment = _moment(text)
    if moment.utcoffset() is None:
        if not naive_utc:
            raise ValueError(f"time {text!r} has no zone: add Z or an offset such as +01:00")
        moment = moment.replace(tzinfo=timezone.utc)
    return _seconds(moment, text)


def _moment(text: Any) -> datetime:
    """``text`` as a datetime, naive or not; ValueError saying what was expected when it is not a time."""
    if not isinstance(text, str):
        raise ValueError(f"expected an ISO-8601 time as a string, got {text!r}")
    stripped = text.strip()
    # Python 3.10's fromisoformat does not read a trailing Z.
    iso = stripped[:-1] + "+00:00" if stripped[-1:] in ("Z", "z") else stripped
    try:
        return datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(f"expected an ISO-8601 time such as 2026-03-29T01:00:00Z, got {text!r}") from None


def _seconds(moment: datetime, text: str) -> float:
    time_s = moment.timestamp()
    if not readable.FIRST_TIME_S <= time_s <= readable.LAST_TIME_S:
        raise ValueError(
            f"time {text!r} is {'after' if time_s > 0 else 'before'} {utc_text(readable.LAST_TIME_S if time_s > 0 else readable.FIRST_TIME_S)} "
            "in UTC, outside the calendar"
        )
    return time_s


class CsvTimes:
    """A CSV file's times read under one rule: every time carries a zone, or none does and all are
    read as UTC. The first time read sets the rule; ``time_s`` raises TraceError naming the line of a
    time that breaks it (and the first time's line), or of a time that does not parse. ``repeated``:
    the file repeats its time texts (an archive of forecasts as issued): each is parsed once.
    ``notes``: (``NAIVE_UTC_NOTE`` for the source) when the times were read as UTC, else ()."""

    def __init__(self, source: str, repeated: bool = False) -> None:
        self.source = source
        self.zoned: bool | None = None
        self.first_line: int | None = None
        # repeated: each text parsed once. An archive of forecasts as issued repeats every issue time
        # and point time dozens of times (a day ahead in half hours: 48 of each), and parsing them was
        # most of its read; a plain series' times are all different, so it keeps none.
        self._read: dict[str, tuple[bool, float]] | None = {} if repeated else None

    def time_s(self, text: str, line_no: int) -> float:
        """The Unix seconds of the time ``text`` on line ``line_no``."""
        known = None if self._read is None else self._read.get(text)
        if known is not None:
            return known[1]  # it kept the rule when it was parsed, and the rule never changes
        try:
            moment = _moment(text)
        except ValueError as exc:
            raise TraceError(self.source, line_no, str(exc)) from None
        zoned = moment.utcoffset() is not None
        self._check_zone(zoned, text, line_no)
        try:
            time_s = _seconds(moment if zoned else moment.replace(tzinfo=timezone.utc), text)
        except ValueError as exc:
            raise TraceError(self.source, line_no, str(exc)) from None
        if self._read is not None:
            self._read[text] = (zoned, time_s)
        return time_s

    def _check_zone(self, zoned: bool, text: str, line_no: int) -> None:
        """The first time read sets the rule; a later one that breaks it raises TraceError naming both lines."""
        if self.zoned is None:
            self.zoned, self.first_line = zoned, line_no
        elif zoned != self.zoned:
            has, first = ("has a zone", "has none") if zoned else ("has no zone", "has one")
            raise TraceError(
                self.source, line_no,
                f"time {text!r} {has} but line {self.first_line}'s time {first}: a file's times all carry a zone, or none does (then all are read as UTC)",
            )  # fmt: skip

    @property
    def notes(self) -> tuple[str, ...]:
        return (f"{self.source}: {NAIVE_UTC_NOTE}",) if self.zoned is False else ()


def _check_unit(unit: Any) -> None:
    if unit not in UNITS:
        raise ConfigError(f"unknown signal unit {unit!r}: expected one of {', '.join(UNITS)}")


def _check_points(source: str, unit: str, times_s, values, place: Callable[[int], tuple[int | None, str]]) -> None:
    """Refuse an empty series, a time that is not after the one before, and a value that is NaN,
    infinite, negative or above the unit's ceiling. ``times_s``, ``values``: shape (n,);
    ``place(i)``: (line or None, label) of point i, for the message about the first bad point.
    Vectorised: a series of millions of points is checked in a few numpy passes."""
    _check_unit(unit)
    times_s = np.asarray(times_s, dtype=float)
    values = np.asarray(values, dtype=float)
    if times_s.size == 0:
        raise TraceError(source, None, "empty series: no points")
    ceiling = MAX_VALUE_BY_UNIT[unit]
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(times_s) | ~np.isfinite(values) | (values < 0) | (values > ceiling)
        bad[1:] |= ~(times_s[1:] > times_s[:-1])
    first = np.flatnonzero(bad)
    if first.size:
        _point_error(source, unit, times_s, values, place, int(first[0]), ceiling)


def _point_error(source: str, unit: str, times_s: np.ndarray, values: np.ndarray, place, i: int, ceiling: float) -> None:
    """Raise the TraceError for point ``i``, the first bad one (see ``_check_points``)."""
    time_s, value = float(times_s[i]), float(values[i])
    line, label = place(i)
    if not math.isfinite(time_s):
        raise TraceError(source, line, f"{label + ': ' if label else ''}time is not finite")
    when = utc_text(time_s)
    prefix = f"{label} ({when}): " if label else f"{when}: "
    if i > 0 and not time_s > float(times_s[i - 1]):
        previous_s = float(times_s[i - 1])
        previous_line, previous_label = place(i - 1)
        before = previous_label or f"line {previous_line}"
        kind = "duplicate" if time_s == previous_s else "decreasing"
        raise TraceError(
            source, line, f"{prefix}{kind} time: {utc_text(time_s)} is not after {utc_text(previous_s)} ({before}); times must strictly increase"
        )
    if not math.isfinite(value):
        raise TraceError(source, line, f"{prefix}expected a finite value, got {value!r}")
    if value < 0:
        raise TraceError(source, line, f"{prefix}expected a value >= 0 {unit}, got {value!r}")
    if value > ceiling:
        raise TraceError(source, line, f"{prefix}value {value!r} {unit} is above {ceiling:.6g} {unit}: a unit or typing error?")


def _number(value: Any, source: str, label: str, field: str) -> float:
    # bool is an int in Python; true/false in a JSON file is not a number.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceError(source, None, f"{label}: {field}: expected a number, got {value!r}")
    return float(value)


def _build(source: str, unit: str, times_s, values, places) -> Signal:
    """The Signal of points read, checked first with ``places`` (a list of (line, label), or a
    callable giving point i's) so that a bad point is named by its line or item."""
    times_s, values = np.asarray(times_s, dtype=float), np.asarray(values, dtype=float)
    _check_points(source, unit, times_s, values, places if callable(places) else places.__getitem__)
    return Signal(times_s, values, unit, source)


def read_csv(text: str, source: str, unit: str) -> Signal:
    """Read CSV with a header of two columns, the first named ``time`` (any case), the second any name
    (``value``, ``Carbon Intensity``), and one point per line: an ISO-8601 time, a number. Blank lines
    are skipped. Times carry a zone, or none of them does: then they are read as UTC and the signal
    notes it (``NAIVE_UTC_NOTE``; a file such as France's 2020 series, ``2019-12-20 00:30:00``).
    Raises ConfigError for an unknown ``unit``; TraceError naming the line for a wrong header, a wrong
    column count, a time with no zone in a file whose first time has one (or the other way round), a
    bad time, a bad value, or a time not after the one before."""
    _check_unit(unit)
    # Flat arrays of C doubles: a ten-year series of 1-minute points is 5 million of each.
    times_s = array("d")
    values = array("d")
    lines = array("q")
    header_seen = False
    time_rule = CsvTimes(source)
    for line_no, row in _csv_rows(text, source):
        if not row or all(not cell.strip() for cell in row):
            continue
        cells = [cell.strip() for cell in row]
        for cell in cells:
            if "\n" in cell or "\r" in cell:
                # A time and a number never hold a line break: a quote opened on this line and not closed.
                raise TraceError(
                    source, line_no, f"a field runs over the lines after it: an unclosed quote (\") on this line? A signal's fields are a time and a number; got {readable.echo_text(cell.splitlines()[0])} and {readable.count_text(len(cell.splitlines()) - 1, 'line')} after it"
                )
        if not header_seen:
            if len(cells) != 2 or cells[0].lower() != "time" or not cells[1]:
                raise TraceError(
                    source, line_no, f"expected the header 'time,value' (two columns, the first named time, the second any name: 'Time,Carbon Intensity'), got {','.join(row)!r}"
                )
            header_seen = True
            continue
        if len(cells) != 2:
            raise TraceError(source, line_no, f"expected 2 columns (time, value), got {len(cells)}")
        time_s = time_rule.time_s(cells[0], line_no)
        try:
            value = float(cells[1])
        except ValueError:
            raise TraceError(source, line_no, f"{utc_text(time_s)}: expected a number, got {readable.echo_text(cells[1])}") from None
        times_s.append(time_s)
        values.append(value)
        lines.append(line_no)
    if not header_seen:
        raise TraceError(source, None, "empty file: expected the header 'time,value' and one point per line")
    signal = _build(source, unit, np.frombuffer(times_s, dtype=float), np.frombuffer(values, dtype=float), lambda i: (int(lines[i]), ""))
    if time_rule.notes:
        return Signal(signal.times_s, signal.values, unit, source, time_rule.notes)
    return signal


def _csv_rows(text: str, source: str):
    """(line number, cells) of each CSV row. A field past the csv module's limit (128 KiB) is
    nearly always one stray quote that swallowed the lines after it: a TraceError names its line.
    Text without a quote is split at its commas, as the csv module would, at a fraction of the cost."""
    if '"' not in text:
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        # Lines found in place: io.StringIO would hold a second copy of the text, 4 bytes a character.
        start, end_of_text, line_no = 0, len(text), 0
        while start < end_of_text:
            end = text.find("\n", start)
            if end < 0:
                end = end_of_text
            line_no += 1
            yield line_no, text[start:end].split(",")
            start = end + 1
        return
    reader = csv.reader(io.StringIO(text))
    line_no = 0
    while True:
        line_no = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            limit = csv.field_size_limit()
            if "field larger than field limit" in str(exc):
                raise TraceError(
                    source, line_no, f"a field runs past {limit:,} characters: an unclosed quote (\") on this line? A signal's fields are a time and a number"
                ) from None
            raise TraceError(source, line_no, f"not CSV: {exc}") from None
        yield line_no, row


def _load_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(source, exc.lineno, f"not JSON: {exc.msg} (column {exc.colno})") from None


def _items(document: Any, key: str, source: str) -> list[Any]:
    if not isinstance(document, dict) or not isinstance(document.get(key), list):
        raise TraceError(source, None, f"expected a JSON object with a list {key!r}")
    return document[key]


def _item(item: Any, source: str, label: str, fields: tuple[str, ...]) -> dict:
    if not isinstance(item, dict) or any(field not in item for field in fields):
        raise TraceError(source, None, f"{label}: expected an object with {', '.join(map(repr, fields))}, got {item!r}")
    return item


def _time(item: dict, field: str, source: str, label: str) -> float:
    try:
        return parse_time_s(item[field])
    except ValueError as exc:
        raise TraceError(source, None, f"{label}: {field}: {exc}") from None


def _json_points(
    items: list[Any],
    source: str,
    key: str,
    fields: tuple[str, ...],
    value_of: Callable[[dict, str, float], tuple[Any, str, str]],
    unit: str,
) -> Signal:
    """The signal in ``unit`` of a JSON list ``items`` (named ``key[i]`` in messages): each an object with
    ``fields``, the first its time. ``value_of(item, label, time_s)`` gives the item's raw value, the field it
    came from and how a message names the item. Raises TraceError naming the item (``_item``, ``_time``, ``_number``)."""
    times_s: list[float] = []
    values: list[float] = []
    places: list[tuple[int | None, str]] = []
    for i, raw in enumerate(items):
        label = f"{key}[{i}]"
        item = _item(raw, source, label, fields)
        time_s = _time(item, fields[0], source, label)
        value, field, where = value_of(item, label, time_s)
        times_s.append(time_s)
        values.append(_number(value, source, where, field))
        places.append((None, label))
    return _build(source, unit, times_s, values, places)


def read_watttime(text: str, source: str) -> Signal:
    """Read WattTime v3 JSON (``/v3/historical``, ``/v3/forecast``): ``data`` items with ``point_time``
    and ``value``, in lbs/MWh. Raises TraceError for ``meta.units`` other than ``lbs_co2_per_mwh``
    (naming it), a missing field, a naive time or a bad value (naming the item and time)."""
    document = _load_json(text, source)
    items = _items(document, "data", source)
    meta = document.get("meta")
    if isinstance(meta, dict) and "units" in meta and meta["units"] != WATTTIME_UNITS:
        raise TraceError(source, None, f"meta.units is {meta['units']!r}: only {WATTTIME_UNITS!r} (read as lbs/MWh) is read")
    return _json_points(items, source, "data", ("point_time", "value"), lambda item, label, time_s: (item["value"], "value", label), "lbs/MWh")


def read_electricity_maps(text: str, source: str) -> Signal:
    """Read Electricity Maps JSON: ``history`` or ``forecast`` items with ``datetime`` and
    ``carbonIntensity``, in gCO2eq/kWh. A null intensity is refused (naming the item), not filled.
    Raises TraceError as ``read_watttime``."""
    document = _load_json(text, source)
    if not isinstance(document, dict):
        raise TraceError(source, None, "expected a JSON object with a list 'history' or 'forecast'")
    key = "history" if "history" in document else "forecast"
    items = _items(document, key, source)
    return _json_points(
        items, source, key, ("datetime", "carbonIntensity"),
        lambda item, label, time_s: (item["carbonIntensity"], "carbonIntensity", f"{label} ({utc_text(time_s)})"), "gCO2eq/kWh",
    )  # fmt: skip


def read_uk_carbon(text: str, source: str, prefer: str = "actual") -> Signal:
    """Read UK Carbon Intensity API JSON: ``data`` items with ``from``, ``to`` and ``intensity`` {``forecast``,
    ``actual``}, in gCO2eq/kWh. Takes ``actual``, else ``forecast`` where ``actual`` is null or absent;
    with ``prefer="forecast"`` (a forecast as issued: an actual value came later) the other way round.
    ``from`` is the interval start. Raises TraceError as ``read_watttime``, also when both are null."""
    document = _load_json(text, source)
    items = _items(document, "data", source)
    first_field, second_field = ("forecast", "actual") if prefer == "forecast" else ("actual", "forecast")

    def intensity_of(item: dict, label: str, time_s: float) -> tuple[Any, str, str]:
        intensity = item["intensity"]
        if not isinstance(intensity, dict):
            raise TraceError(source, None, f"{label} ({utc_text(time_s)}): intensity: expected an object with 'forecast' and 'actual', got {intensity!r}")
        value = intensity.get(first_field)
        field = f"intensity.{first_field}"
        if value is None:
            value, field = intensity.get(second_field), f"intensity.{second_field}"
        if value is None:
            raise TraceError(source, None, f"{label} ({utc_text(time_s)}): neither intensity.actual nor intensity.forecast has a value")
        return value, field, f"{label} ({utc_text(time_s)})"

    return _json_points(items, source, "data", ("from", "intensity"), intensity_of, "gCO2eq/kWh")


def read_signal(text: str, source: str, unit: str | None = None, unit_name: str = "the unit") -> Signal:
    """Read a signal in any of the formats above, told apart by shape: JSON with ``history`` or
    ``forecast`` (Electricity Maps), JSON ``data`` whose first item has ``point_time`` (WattTime) or
    ``from`` (UK Carbon Intensity), else CSV. ``unit`` is required for CSV; for JSON it may only repeat
    the format's own unit. ``unit_name``: where the caller's unit comes from, for messages
    (``--carbon-unit``, ``[carbon] unit``). Raises ConfigError for a missing or contradicting unit,
    TraceError for a file of no known shape or with bad points."""
    if unit is not None:
        _check_unit(unit)
    if _JSON_START.match(text):
        document = _load_json(text, source)
        fmt, fmt_unit = _json_format(document, source)
        reader = {"WattTime": read_watttime, "Electricity Maps": read_electricity_maps, "UK Carbon Intensity": read_uk_carbon}[fmt]
        if unit is not None and unit != fmt_unit:
            if unit == "gCO2eq/kWh" and fmt_unit == "lbs/MWh":
                return to_grams_per_kwh(reader(text, source))
            raise ConfigError(
                f"{source}: {fmt} JSON is in {fmt_unit}, not {unit}{'' if unit_name == 'the unit' else f' ({unit_name})'}: "
                f"leave {unit_name} out (the file names its own)"
                + (", or give gCO2eq/kWh to have it converted" if fmt_unit == "lbs/MWh" else "")
            )
        return reader(text, source)
    if unit is None:
        raise ConfigError(f"{source}: a CSV signal needs its unit: give {unit_name}, one of {', '.join(UNITS)}")
    return read_csv(text, source, unit)


_JSON_START = re.compile(r"\s*[{\[]")
"""A JSON document's first character after white space; matched at the start, never copying a large text."""


def _json_format(document: Any, source: str) -> tuple[str, str]:
    if isinstance(document, dict):
        if isinstance(document.get("history"), list) or isinstance(document.get("forecast"), list):
            return "Electricity Maps", "gCO2eq/kWh"
        data = document.get("data")
        if isinstance(data, list) and data and isinstance(data[0], dict):
            if "point_time" in data[0]:
                return "WattTime", "lbs/MWh"
            if "from" in data[0] and "intensity" in data[0]:
                return "UK Carbon Intensity", "gCO2eq/kWh"
        if isinstance(data, list) and not data:
            raise TraceError(source, None, "empty series: 'data' has no items")
    raise TraceError(
        source,
        None,
        "JSON of no known shape: expected WattTime v3 ({'data': [{'point_time', 'value'}]}), Electricity Maps "
        "({'history' or 'forecast': [{'datetime', 'carbonIntensity'}]}) or UK Carbon Intensity ({'data': [{'from', 'to', 'intensity'}]})",
    )


def plausibility_notes(signal: Signal) -> tuple[str, ...]:
    """Warnings about values implausible for the signal's unit, at both ends: every value 0 (the signal
    tells no slot from another), or a median below or above ``PLAUSIBLE_MEDIAN_BY_UNIT``'s range (a
    price given as gCO2eq/kWh, grams given as $/kWh), after what the reader noted (``signal.notes``:
    times read as UTC). Empty for a plausible signal read as it was written; pure."""
    return tuple(signal.notes) + _value_notes(signal)


def _value_notes(signal: Signal) -> tuple[str, ...]:
    values = signal.values
    if not values.any():
        what = "CO2" if signal.unit in ("gCO2eq/kWh", "lbs/MWh") else "cost"
        return (
            f"{signal.source}: every value is 0 {signal.unit}: the signal tells no slot from another, so the carbon-aware "
            f"policies decide as the carbon-blind ones and every schedule's {what} is 0; is this the right series?",
        )
    low, high, below, above = PLAUSIBLE_MEDIAN_BY_UNIT[signal.unit]
    median = float(np.median(values))
    if low <= median <= high:
        return ()
    side, likely = ("below", below) if median < low else ("above", above)
    return (
        f"{signal.source}: values {readable.number_text(float(values.min()))} to {readable.number_text(float(values.max()))} {signal.unit} "
        f"(median {readable.number_text(median)}) are implausible: {side} the {readable.number_text(low)} to {readable.number_text(high)} "
        f"{signal.unit} real series have; {likely} given as {signal.unit}? Check the signal's unit",
    )


def to_grams_per_kwh(signal: Signal) -> Signal:
    """The signal in gCO2eq/kWh: lbs/MWh times 453.59237 g/lb over 1000 kWh/MWh; gCO2eq/kWh as it is.
    Raises ConfigError for a price, which is not a carbon intensity."""
    if signal.unit == "gCO2eq/kWh":
        return signal
    if signal.unit != "lbs/MWh":
        raise ConfigError(f"{signal.source}: {signal.unit} is a price, not a carbon intensity")
    return Signal(signal.times_s.copy(), signal.values * (GRAMS_PER_POUND / 1000.0), "gCO2eq/kWh", signal.source, signal.notes)


def in_grams(signal: Signal) -> Signal:
    """The signal in the unit every route decides and costs by: a carbon intensity in gCO2eq/kWh
    (lbs/MWh converted by :func:`to_grams_per_kwh`), a price as it is. The one place the daemon's
    feed, the replay's placement and the report choose to convert."""
    return to_grams_per_kwh(signal) if signal.unit == "lbs/MWh" else signal


def resample(signal: Signal, start_s: float, slot_s: float, n_slots: int) -> np.ndarray:
    """The time-weighted mean of the signal over each slot [start_s + k*slot_s, start_s + (k+1)*slot_s).

    Shape (n_slots,), in ``signal.unit``. The signal is a step function: each value holds from its time to
    the next one, the last for the series' median interval. Raises ConfigError for a slot_s <= 0, an
    n_slots < 1 or a start that is not finite; TraceError naming the source and the UTC times for a
    series of one point, a window the series does not cover (which part is missing), or a step inside
    the window longer than ``GAP_FACTOR`` median intervals (a gap).
    """
    if isinstance(start_s, bool) or not (isinstance(start_s, Real) and math.isfinite(start_s)):
        raise ConfigError(f"resample: start_s must be a finite number of Unix seconds, got {start_s!r}")
    if isinstance(slot_s, bool) or not (isinstance(slot_s, Real) and math.isfinite(slot_s) and slot_s > 0):
        raise ConfigError(f"resample: slot_s must be a finite number > 0, got {slot_s!r}")
    if isinstance(n_slots, bool) or not isinstance(n_slots, (int, np.integer)) or n_slots < 1:
        raise ConfigError(f"resample: n_slots must be an integer >= 1, got {n_slots!r}")
    median_s = signal.median_interval_s
    # Times relative to the first point keep the running integral's rounding small.
    origin_s = float(signal.times_s[0])
    edges_s = np.append(signal.times_s - origin_s, signal.times_s[-1] - origin_s + median_s)
    window_start_s = float(start_s) - origin_s
    window_end_s = window_start_s + float(slot_s) * int(n_slots)
    missing: list[str] = []
    if window_start_s < edges_s[0]:
        missing.append(f"from {utc_text(start_s)} to {utc_text(origin_s)} (before the first point)")
    if window_end_s > edges_s[-1]:
        missing.append(
            f"from {utc_text(origin_s + edges_s[-1])} to {utc_text(origin_s + window_end_s)} "
            f"(after the last point at {utc_text(signal.times_s[-1])} and its {median_s:g} s step)"
        )
    if missing:
        raise TraceError(
            signal.source,
            None,
            f"does not cover the window {utc_text(start_s)} to {utc_text(origin_s + window_end_s)}: missing {' and '.join(missing)}",
        )
    steps_s = np.diff(edges_s)
    overlaps = (edges_s[1:] > window_start_s) & (edges_s[:-1] < window_end_s)
    gaps = np.flatnonzero(overlaps & (steps_s > GAP_FACTOR * median_s))
    if gaps.size:
        i = int(gaps[0])
        raise TraceError(
            signal.source,
            None,
            f"gap of {steps_s[i]:g} s from {utc_text(origin_s + edges_s[i])} to {utc_text(origin_s + edges_s[i + 1])} inside the window "
            f"(more than {GAP_FACTOR:g} x the median interval of {median_s:g} s)",
        )
    integral = np.concatenate(([0.0], np.cumsum(signal.values * steps_s)))
    bounds_s = window_start_s + float(slot_s) * np.arange(int(n_slots) + 1)
    # The running integral is piecewise linear between edges, so interpolating it is exact.
    at_bounds = np.interp(bounds_s, edges_s, integral)
    return np.diff(at_bounds) / float(slot_s)


def covered_means(signal: Signal, start_s: float, slot_s: float, n_slots: int) -> np.ndarray:
    """The signal's mean over each slot [start_s + k*slot_s, start_s + (k+1)*slot_s), shape (n_slots,),
    NaN for a slot the signal does not cover (before its first point, after its last step, or across
    a gap: :func:`resample`'s rules). Halves the range where it is not covered, so a
    series with one hole costs O(log n_slots) resamples."""
    try:
        return resample(signal, start_s, slot_s, n_slots)
    except TraceError:
        if n_slots == 1:
            return np.array([math.nan])
    half = n_slots // 2
    return np.concatenate([covered_means(signal, start_s, slot_s, half), covered_means(signal, start_s + half * slot_s, slot_s, n_slots - half)])
