"""Numbers, durations and times as people write them, for messages and report headings ("10,000,000",
"4 h 10 min", "6.9 years", "2026-12-01T10:00Z"), instead of what a float prints ("1e+07",
"15000 s", "2.18273e+08 s")."""

from __future__ import annotations

import math
from datetime import datetime, timezone

YEAR_S = 365.25 * 86400.0


def duration_text(seconds: float) -> str:
    """``seconds`` in the largest units that read well: "0.5 s", "45 s", "5 min", "1 h 30 min",
    "26 h", "3 days 4 h", "6.9 years", "3.17e+300 years" (from a million years up). Whole minutes from an hour up, whole hours from two days up."""
    if not math.isfinite(seconds):
        return f"{seconds} s"
    if seconds < 0:
        return "-" + duration_text(-seconds)
    if seconds < 59.5:
        return f"{seconds:.0f} s" if seconds >= 10 or float(seconds).is_integer() else f"{seconds:.2g} s"
    if seconds < 3600 - 0.5:
        whole = round(seconds)
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min" + (f" {rest} s" if rest else "")
    if seconds < 2 * 86400 - 30:
        hours, minutes = divmod(round(seconds / 60), 60)
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    if seconds < YEAR_S:
        days, hours = divmod(round(seconds / 3600), 24)
        return f"{days} days" + (f" {hours} h" if hours else "")
    years = seconds / YEAR_S
    if years >= 1e6:  # a million years on is a mistake, not a plan: its digits would fill the message
        return f"{years:.3g} years"
    return f"{years:.1f} years" if years < 100 else f"{years:,.0f} years"


LAST_TIME_S = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()
"""9999-12-31T23:59:59Z, the last second Python's calendar (and ISO 8601's four-digit year) holds."""

FIRST_TIME_S = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
"""0001-01-01T00:00:00Z, the first."""


def utc_text(seconds: float, precision: str = "minute", layout: str = "iso") -> str:
    """Unix seconds as a UTC time, to the minute or (``precision="second"``) to the second: ISO 8601
    ("2026-12-01T10:00Z", "2026-12-01T10:00:00Z"), or with ``layout="text"`` as report headings and
    tables write it ("2026-12-01 10:00 UTC"). The one UTC formatter of the project; it never raises:
    a time no calendar holds is given as its seconds and which end it is past ("2.534e+11 s (Unix
    time, past year 9999)")."""
    clock = "%H:%M:%S" if precision == "second" else "%H:%M"
    pattern = f"%Y-%m-%d {clock} UTC" if layout == "text" else f"%Y-%m-%dT{clock}Z"
    if isinstance(seconds, float) and math.isnan(seconds):
        return "nan s (Unix time)"
    if seconds >= LAST_TIME_S + 1:
        return f"{seconds:.6g} s (Unix time, past year 9999)"
    if seconds < FIRST_TIME_S:
        return f"{seconds:.6g} s (Unix time, before year 1)"
    try:
        return datetime.fromtimestamp(seconds, timezone.utc).strftime(pattern)
    except (OverflowError, ValueError, OSError):
        return f"{seconds:.6g} s (Unix time)"


def number_text(value: float) -> str:
    """A number with thousands separators and no exponent: "10,000,000", "86,400", "0.5", "1,234.57"."""
    if not math.isfinite(value):
        return str(value)
    if float(value).is_integer() and abs(value) < 1e18:
        return f"{int(value):,}"
    if abs(value) >= 1e5:
        return f"{value:,.0f}"
    return f"{value:,.6g}" if abs(value) >= 1e-4 else f"{value:.3g}"


def count_text(n: int, noun: str) -> str:
    """``n`` with its noun, plural unless it is 1: "1 slot", "12,000 jobs"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


ECHO_MAX_CHARS = 200
"""The most of one given value a message echoes: a path or a list fits; a value pasted by mistake
(a 10,000-character --id, a field a stray quote ran to the end of a file) is shown by its start and
its length."""


def echo_text(value: str) -> str:
    """``value`` quoted as ``repr`` does, cut past :data:`ECHO_MAX_CHARS` characters to its start
    and its length: "'abc'", "'xxxx...'... (10,000 characters)"."""
    if len(value) <= ECHO_MAX_CHARS:
        return repr(value)
    return f"{value[:ECHO_MAX_CHARS]!r}... ({len(value):,} characters)"
