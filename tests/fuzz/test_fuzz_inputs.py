"""Fuzzing the input edges: SWIM traces, load curves, TOML settings, `autoscaler submit` and `autoscaler drf`.

Each edge gets mutated valid inputs (columns dropped, doubled or inserted, fields replaced by text, huge
numbers, negatives, NaN and infinities, Unicode, NUL bytes, CRLF, blank lines, bytes that are not UTF-8)
and odd files (binary, empty, a folder, a missing path). The contract checked on every input:

* the library refuses with an ``AutoscalerError`` subclass, never another exception;
* the CLI exits 0, or exits 2 with one message line on stderr (``autoscaler: error: ...``, or argparse's
  usage and one ``error:`` line) and no traceback; the one exception is the settings' list of bad fields,
  a header line and one indented line per field;
* a refused input leaves nothing behind: the SQLite store holds the same jobs, and no ``--yarn-out`` or
  ``--out`` file or folder appears;
* an accepted input is valid by the reader's own contract (finite numbers >= 0, unique ids, ...), and the
  CLI's accepted output exists and can be read back.

The default run tries ``FAST_EXAMPLES`` inputs per edge; ``pytest -m slow`` tries ``SLOW_EXAMPLES``.
``benchmarks/fuzz_report.py`` runs the same generators and tabulates the outcomes per edge.

The inputs that once escaped as tracebacks (undecodable argv bytes, a NUL in a configured path, an
agent name XML cannot hold, an unbounded ``drf --n``) are drawn by the generators and also pinned,
each with its minimal input, by a test at the end of this file.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import os
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.core.errors import AutoscalerError, ConfigError

FAST_EXAMPLES = 60
SLOW_EXAMPLES = 2000
SLOW_REPLAY_EXAMPLES = 1000
"""An accepted replay renders a PNG (about 0.1 s), so the long run tries fewer of them."""

FUZZ_SETTINGS = settings(
    max_examples=FAST_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
SLOW_SETTINGS = settings(FUZZ_SETTINGS, max_examples=SLOW_EXAMPLES)
SLOW_REPLAY_SETTINGS = settings(FUZZ_SETTINGS, max_examples=SLOW_REPLAY_EXAMPLES)

# Demands spanning 1e-300..1e308 make numpy warn of overflow inside the DRF step; the shares that come
# out are checked finite and feasible below, so the warning is noise here.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


# -- outcomes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one input did: ``verdict`` is "accepted", "refused" or "unexpected"; ``kind`` is the error
    class of a refusal or what went wrong for "unexpected"; ``detail`` is the message."""

    verdict: str
    kind: str = ""
    detail: str = ""


ACCEPTED = Outcome("accepted")


def refused(kind: str, detail: str = "") -> Outcome:
    return Outcome("refused", kind, detail)


def unexpected(kind: str, detail: str = "") -> Outcome:
    return Outcome("unexpected", kind, detail)


def assert_clean(outcome: Outcome) -> None:
    assert outcome.verdict in ("accepted", "refused"), f"{outcome.kind}: {outcome.detail}"


def _library_call(function: Callable[[], object]) -> tuple[object, Outcome | None]:
    """(result, None) if ``function`` returned; (None, refusal) for an AutoscalerError; (None, unexpected) otherwise."""
    try:
        return function(), None
    except AutoscalerError as exc:
        return None, refused(type(exc).__name__, str(exc))
    except Exception as exc:  # noqa: BLE001 - anything else is what the fuzzing looks for
        return None, unexpected(type(exc).__name__, repr(exc))


# -- files ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileInput:
    """An input path: a file with ``content``, a folder, or nothing at all."""

    kind: str  # "file", "directory" or "missing"
    content: bytes = b""

    def materialise(self, path: Path) -> Path:
        if self.kind == "file":
            path.write_bytes(self.content)
        elif self.kind == "directory":
            path.mkdir()
        return path


def _chance(draw, one_in: int) -> bool:
    """True about once in ``one_in`` draws; shrinks to False."""
    return draw(st.integers(0, one_in - 1)) == one_in - 1


def _mutations(draw, most: int = 3) -> int:
    """How many mutations to apply: none in about half the inputs, so that valid ones are common too."""
    return draw(st.integers(1, most)) if _chance(draw, 2) else 0


NASTY_TEXTS = (
    "", " ", "-1", "-0", "-0.0", "-1e-9", "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e309", "-1e309",
    "1e-400", "9" * 400, "9" * 5000, "0x1F", "1_000", "1,5", "1.5.2", "1e", "e5", ".", "--1", "+7", " 7 ",
    "7\r", "\u00a07", "\ufeff1", "1 2", "\u0663", "\u00b2", "\u00bd", "\x00", "1\x00", "None", "null", "true",
    "\u202e9", "\U0001f600", "\t", "\n", "'", '"', "\\",
)  # fmt: skip
"""Field values that trip number and text parsers: signs, NaN and infinity spellings, overflow, digit-group
separators, non-ASCII digits, NUL, whitespace and line breaks inside a field."""

_TEXT = st.characters(blacklist_categories=("Cs",))
_XML_ILLEGAL = {chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"} | {"\ufffe", "\uffff"}
_XML_SAFE_TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters=sorted(_XML_ILLEGAL))


def nasty_fields(xml_safe: bool = False) -> st.SearchStrategy[str]:
    texts = st.text(_XML_SAFE_TEXT if xml_safe else _TEXT, max_size=10)
    fixed = [t for t in NASTY_TEXTS if not (xml_safe and set(t) & _XML_ILLEGAL)]
    return st.one_of(
        st.sampled_from(fixed),
        st.integers(-(2**70), 2**70).map(str),
        st.floats().map(repr),
        texts,
    )


BAD_BYTES = (b"\xff", b"\xfe", b"\x80", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xef\xbb\xbf")
CONTROL_BYTES = (b"\x00", b"\x1a", b"\r", b"\x0b", b"\x85")


@st.composite
def encoded_files(draw, lines: list[str], control_bytes: bool = True) -> FileInput:
    """``lines`` joined by LF, CRLF or CR, maybe with a BOM, then a few byte-level cuts and insertions."""
    newline = draw(st.sampled_from(["\n", "\n", "\n", "\r\n", "\r\n", "\r"]))
    text = newline.join(lines) + draw(st.sampled_from([newline, ""]))
    if _chance(draw, 16):
        text = "\ufeff" + text
    raw = text.encode("utf-8")
    insertable = BAD_BYTES + (CONTROL_BYTES if control_bytes else ())
    for _ in range(draw(st.integers(1, 2)) if _chance(draw, 4) else 0):
        at = draw(st.integers(0, len(raw)))
        operation = draw(st.sampled_from(["insert", "truncate"]))
        if operation == "insert":
            raw = raw[:at] + draw(st.sampled_from(insertable)) + raw[at:]
        else:
            raw = raw[:at]
    return FileInput("file", raw)


@st.composite
def odd_files(draw) -> FileInput:
    """A binary file, an empty one, a folder or a missing path."""
    return draw(
        st.one_of(
            st.just(FileInput("file", b"")),
            st.just(FileInput("missing")),
            st.just(FileInput("directory")),
            st.binary(min_size=1, max_size=300).map(lambda raw: FileInput("file", raw)),
        )
    )


def _files_from(lines: st.SearchStrategy[list[str]], control_bytes: bool = True) -> st.SearchStrategy[FileInput]:
    @st.composite
    def build(draw) -> FileInput:
        if _chance(draw, 10):
            return draw(odd_files())
        return draw(encoded_files(draw(lines), control_bytes=control_bytes))

    return build()


def _mutate_rows(draw, rows: list[list[str]], operations: int, nasty: st.SearchStrategy[str]) -> list[list[str]]:
    """Apply ``operations`` random column mutations to the rows of a table (each a list of fields)."""
    for _ in range(operations):
        if not rows:
            break
        row = rows[draw(st.integers(0, len(rows) - 1))]
        at = draw(st.integers(0, max(0, len(row) - 1)))
        operation = draw(st.sampled_from(["replace", "replace", "drop", "duplicate", "insert", "repeat row"]))
        if operation == "replace" and row:
            row[at] = draw(nasty)
        elif operation == "drop" and row:
            del row[at]
        elif operation == "duplicate" and row:
            row.insert(at, row[at])
        elif operation == "insert":
            row.insert(at, draw(nasty))
        elif operation == "repeat row":
            rows.insert(draw(st.integers(0, len(rows))), list(row))
    return rows


def _with_blank_lines(draw, lines: list[str], blanks: tuple[str, ...]) -> list[str]:
    for _ in range(draw(st.integers(0, 2))):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(blanks)))
    return lines


# -- SWIM traces ---------------------------------------------------------------------------------

with resources.as_file(resources.files("autoscaler") / "data" / "FB-2009_samples_24_times_1hr_0.tsv") as _trace:
    SAMPLE_ROWS = tuple(tuple(line.split("\t")) for line in _trace.read_text().splitlines()[:400])


@st.composite
def _swim_row(draw) -> list[str]:
    if draw(st.booleans()):
        return list(draw(st.sampled_from(SAMPLE_ROWS)))
    job_id = draw(st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,9}", fullmatch=True))
    submit_s = draw(st.integers(0, 86_399))
    gap_s = draw(st.integers(0, 600))
    sizes = draw(st.lists(st.integers(0, 10**12), min_size=3, max_size=3))
    return [job_id, str(submit_s), str(gap_s), *map(str, sizes)]


@st.composite
def swim_lines(draw) -> list[str]:
    rows = draw(st.lists(_swim_row(), min_size=1, max_size=10, unique_by=lambda row: row[0]))
    if _chance(draw, 4):  # the optional 7th column, deadline slots
        for row in rows:
            row.append(str(draw(st.integers(0, 300))))
    rows = _mutate_rows(draw, rows, _mutations(draw), nasty_fields())
    separators = ["\t"] * len(rows)
    if _chance(draw, 6):
        separators[draw(st.integers(0, len(rows) - 1))] = draw(st.sampled_from([" ", ",", "\t\t", ";", "  "]))
    lines = [separator.join(row) for separator, row in zip(separators, rows, strict=True)]
    return _with_blank_lines(draw, lines, ("", " ", "\t", "\t" * 5))


def swim_files(include_known_bugs: bool = True) -> st.SearchStrategy[FileInput]:
    return _files_from(swim_lines())


@dataclass(frozen=True)
class SwimCase:
    file: FileInput
    skip_bad_lines: bool = False


def swim_cases(include_known_bugs: bool = True) -> st.SearchStrategy[SwimCase]:
    return st.builds(SwimCase, swim_files(include_known_bugs), st.booleans())


def run_swim(case: SwimCase) -> Outcome:
    """read_swim, then the workload curves of what it accepted."""
    from autoscaler.core.workload import read_swim, workload_from_trace

    with tempfile.TemporaryDirectory() as folder:
        path = case.file.materialise(Path(folder) / "trace.tsv")
        trace, refusal = _library_call(lambda: read_swim(path, skip_bad_lines=case.skip_bad_lines))
        if refusal is not None:
            return refusal
    problem = _trace_problem(trace)
    if problem:
        return unexpected("accepted an invalid trace", problem)
    _, refusal = _library_call(lambda: workload_from_trace(trace))
    return refusal or ACCEPTED


def _trace_problem(trace) -> str | None:
    jobs = trace.jobs
    if not jobs:
        return "no jobs"
    ids = [job.job_id for job in jobs]
    if len(set(ids)) != len(ids) or any(not job_id or job_id != job_id.strip() for job_id in ids):
        return f"job ids not unique and non-empty: {ids!r}"
    for job in jobs:
        numbers = (job.submit_s, job.gap_s, job.map_input_bytes, job.shuffle_bytes, job.reduce_output_bytes)
        if not all(isinstance(v, float) and math.isfinite(v) and v >= 0 for v in numbers):
            return f"job {job.job_id!r}: {numbers!r}"
    deadlines = [job.deadline_slots for job in jobs]
    if not (all(d is None for d in deadlines) or all(isinstance(d, int) and d >= 0 for d in deadlines)):
        return f"deadline slots {deadlines!r}"
    submits = [job.submit_s for job in jobs]
    if submits != sorted(submits):
        return "jobs not sorted by submit time"
    return None


# -- load curves ---------------------------------------------------------------------------------

_GOOD_HEADERS = ("slot,released", "Slot,Released", " slot , released ", "SLOT,RELEASED")
_BAD_HEADERS = ("released,slot", "slot;released", "slot,released,extra", "slot", "", "slot,", "slot released", "\ufeffslot,released")
_ODD_SLOTS = ("999999", "1000000", "1" * 25, "3.0", "3.5", "-1", "1e6", "999999.0", "1e-3")


@st.composite
def load_curve_lines(draw) -> list[str]:
    slots = draw(st.lists(st.integers(0, 400), min_size=0 if _chance(draw, 10) else 1, max_size=10, unique=True))
    released = st.one_of(st.integers(0, 50).map(str), st.floats(0, 100).map(repr), st.floats(0, 100).map("{:.3f}".format))
    rows = [[str(slot), draw(released)] for slot in slots]
    if rows and _chance(draw, 4):
        rows[draw(st.integers(0, len(rows) - 1))][0] = draw(st.sampled_from(_ODD_SLOTS))
    rows = _mutate_rows(draw, rows, _mutations(draw, 2), nasty_fields())
    lines = [",".join(row) for row in rows]
    header = draw(st.sampled_from(_GOOD_HEADERS)) if not _chance(draw, 10) else draw(st.sampled_from(_BAD_HEADERS))
    if not _chance(draw, 20):
        lines.insert(0, header)
    return _with_blank_lines(draw, lines, ("", " ", ",", " , "))


def load_curve_files(include_known_bugs: bool = True) -> st.SearchStrategy[FileInput]:
    return _files_from(load_curve_lines())


def run_load_curve(case: FileInput) -> Outcome:
    """read_load_curve, then the workload of what it accepted."""
    from autoscaler.core.model import MAX_SLOTS
    from autoscaler.core.workload import read_load_curve, workload_from_curve

    with tempfile.TemporaryDirectory() as folder:
        path = case.materialise(Path(folder) / "curve.csv")
        load, refusal = _library_call(lambda: read_load_curve(path))
        if refusal is not None:
            return refusal
    if not (isinstance(load, np.ndarray) and load.ndim == 1 and 1 <= load.size <= MAX_SLOTS):
        return unexpected("accepted an invalid curve", f"shape {np.shape(load)}")
    if not (np.isfinite(load).all() and (load >= 0).all()):
        return unexpected("accepted an invalid curve", f"values {load[:10]!r}")
    _, refusal = _library_call(lambda: workload_from_curve(load))
    return refusal or ACCEPTED


# -- TOML settings and AUTOSCALER_* variables ----------------------------------------------------


def _toml_string(text: str) -> str:
    escaped = []
    for char in text:
        if char in '"\\':
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def toml_value(value: object) -> str:
    """``value`` as TOML (nan and inf included: TOML has them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def _toml_key(key: str) -> str:
    return key if key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key) else _toml_string(key)


def toml_document(tables: dict[str, dict[str, object]]) -> str:
    """Top-level keys (table "") first, then one [table] per other entry."""
    lines = [f"{_toml_key(k)} = {toml_value(v)}" for k, v in tables.get("", {}).items()]
    for name, body in tables.items():
        if name:
            lines.append(f"[{_toml_key(name)}]")
            lines += [f"{_toml_key(k)} = {toml_value(v)}" for k, v in body.items()]
    return "\n".join(lines)


_TENANT = st.from_regex(r"[a-z][a-z0-9-]{0,9}", fullmatch=True)
_VALID_SETTINGS: dict[str, dict[str, st.SearchStrategy]] = {
    "": {
        "policy": st.sampled_from(["gcp-u", "gcp", "vfw", "follow"]),
        "delta": st.integers(1, 12),
        "deadline_slots": st.integers(0, 24),
        "slot_s": st.floats(1, 3600),
        "max_deadline_slots": st.integers(1, 288),
        "e0": st.floats(0, 100),
        "e1": st.floats(0, 100),
        "beta": st.floats(0, 100),
        "store_path": st.sampled_from(["autoscaler.db", "/var/lib/autoscaler/jobs.db", "jobs.db"]),
        "log_format": st.sampled_from(["auto", "json", "console"]),
        "misfire_grace_s": st.floats(0.1, 600),
        "known_tenants": st.lists(_TENANT, max_size=4),
        "tenants_n": st.integers(4, 20),
    },
    "cluster": {
        "id": st.from_regex(r"j-[0-9A-Z]{5,13}", fullmatch=True),
        "region": st.sampled_from(["us-east-1", "eu-west-1"]),
        "endpoint_url": st.sampled_from(["http://127.0.0.1:5000", "https://elasticmapreduce.us-east-1.amazonaws.com"]),
        "min_nodes": st.integers(0, 4),
        "max_nodes": st.integers(4, 50),
    },
    "report": {
        "power_model": st.sampled_from(["table-iii", "ccf-aws"]),
        "boot_s": st.floats(0, 600),
        "max_hold_slots": st.integers(0, 5),
        "daily": st.booleans(),
        "publish_metrics": st.booleans(),
        "email_to": st.lists(st.sampled_from(["ops@example.com", "me@example.org"]), max_size=2),
        "email_from": st.just("autoscaler@example.com"),
        "transport": st.sampled_from(["smtp", "ses"]),
        "smtp_host": st.sampled_from(["localhost", "smtp.example.com"]),
        "smtp_port": st.integers(1, 65535),
        "smtp_starttls": st.booleans(),
        "smtp_username": st.just("autoscaler"),
        "smtp_password_env": st.just("AUTOSCALER_SMTP_PASSWORD"),
        "ses_region": st.just("us-east-1"),
    },
}

def toml_values(nul: bool = True) -> st.SearchStrategy[object]:
    """Any TOML value: the wrong type for most fields, or out of range. ``nul``: strings may hold U+0000."""
    text = st.text(_TEXT if nul else st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
    scalars = st.one_of(
        text,
        st.integers(-(2**70), 2**70),
        st.floats(),
        st.booleans(),
        st.datetimes(timezones=st.one_of(st.none(), st.just(timezone.utc))),
    )
    keys = st.from_regex(r"[a-z_]{1,6}", fullmatch=True)
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)), max_leaves=6)


_OUT_OF_RANGE = st.sampled_from([-1, 0, -0.5, 10**30, 65536, -(2**63), 2**64, float("nan"), float("inf"), "", " ", "j-", "J-ABC", "x"])
_SYNTAX_BREAKS = ("=", '"', "[", "]", "[[", "{", "\\", "= =", "\n[cluster]\n", "\nkey\n", "'''", "\x00", "\ufeff")


@st.composite
def config_texts(draw, include_known_bugs: bool = True) -> str:
    # A path holding U+0000 (TOML's escape "\u0000") (pinned by a test below).
    toml_any = toml_values(nul=include_known_bugs)
    tables: dict[str, dict[str, object]] = {}
    for table, fields in _VALID_SETTINGS.items():
        chosen = draw(st.lists(st.sampled_from(sorted(fields)), max_size=4, unique=True))
        tables[table] = {name: draw(fields[name]) for name in chosen}
    if not _chance(draw, 8):
        tables["cluster"]["id"] = draw(_VALID_SETTINGS["cluster"]["id"])
    if not tables["report"] and draw(st.booleans()):
        del tables["report"]
    for _ in range(draw(st.integers(0, 2))):
        operations = ["wrong type", "out of range", "unknown key", "typo", "drop table"]
        operation = draw(st.sampled_from(operations + (["nul path"] if include_known_bugs else [])))
        table = draw(st.sampled_from(sorted(tables))) if tables else ""
        known = sorted(_VALID_SETTINGS.get(table, {}))
        if operation == "wrong type" and known:
            tables.setdefault(table, {})[draw(st.sampled_from(known))] = draw(toml_any)
        elif operation == "out of range" and known:
            tables.setdefault(table, {})[draw(st.sampled_from(known))] = draw(_OUT_OF_RANGE)
        elif operation == "unknown key":
            where = draw(st.sampled_from(["", "cluster", "report", "scheduler"]))
            tables.setdefault(where, {})[draw(st.from_regex(r"[a-z_]{1,12}", fullmatch=True))] = draw(toml_any)
        elif operation == "typo" and known:
            name = draw(st.sampled_from(known))
            cut = draw(st.integers(0, len(name) - 1))
            tables.setdefault(table, {})[name[:cut] + name[cut + 1 :]] = 1
        elif operation == "drop table" and table:
            del tables[table]
        elif operation == "nul path":
            where, name = draw(st.sampled_from([("", "store_path"), ("report", "smtp_password_file")]))
            tables.setdefault(where, {})[name] = draw(st.sampled_from(["\x00", "jobs\x00.db"]))
    text = toml_document(tables)
    if _chance(draw, 6):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(_SYNTAX_BREAKS)) + text[at:]
    if _chance(draw, 10) and "\n" in text:  # a repeated line: a duplicate key or table
        lines = text.split("\n")
        line = draw(st.sampled_from(lines))
        text = "\n".join(lines + [line])
    return text


def config_files(include_known_bugs: bool = True) -> st.SearchStrategy[FileInput]:
    return _files_from(config_texts(include_known_bugs).map(lambda text: text.split("\n")))


_ENV_FIELDS = {
    "AUTOSCALER_POLICY": st.sampled_from(["gcp-u", "vfw", "follow", "GCP-U", ""]),
    "AUTOSCALER_SLOT_S": st.sampled_from(["60", "300.5", "0", "-1", "nan", "inf", "1e999", "5 min"]),
    "AUTOSCALER_DEADLINE_SLOTS": st.sampled_from(["2", "0", "-3", "2.5", "1e3", "two"]),
    "AUTOSCALER_DELTA": st.sampled_from(["1", "0", "99999999999999999999999999", "null"]),
    "AUTOSCALER_TENANTS_N": st.sampled_from(["1", "10", "0", "[]"]),
    "AUTOSCALER_STORE_PATH": st.sampled_from(["jobs.db", "", "/nonexistent/jobs.db"]),
    "AUTOSCALER_CLUSTER__ID": st.sampled_from(["j-ABC123", "j-", "cluster", ""]),
    "AUTOSCALER_CLUSTER__MAX_NODES": st.sampled_from(["10", "0", "-1", "1e3", ""]),
    "AUTOSCALER_CLUSTER__MIN_NODES": st.sampled_from(["0", "3", "100", "x"]),
    "AUTOSCALER_CLUSTER__NODES": st.just("3"),
    "AUTOSCALER_CLUSTER": st.sampled_from(['{"id": "j-ABC123"}', '{"id": 5}', '"j-ABC"', "[1]", "not json", "{}"]),
    "AUTOSCALER_KNOWN_TENANTS": st.sampled_from(['["ads", "search"]', "ads,search", "[1, 2]", "[]", "{}"]),
    "AUTOSCALER_REPORT__SMTP_PORT": st.sampled_from(["25", "0", "70000", "smtp"]),
    "AUTOSCALER_REPORT__EMAIL_TO": st.sampled_from(['["ops@example.com"]', "ops@example.com", "[null]"]),
    "AUTOSCALER_REPORT": st.sampled_from(['{"daily": true}', '{"daily": "sometimes"}', "3", "{"]),
    "AUTOSCALER_UNKNOWN_FIELD": st.just("1"),
}
_ENV_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=5,
)


@st.composite
def environments(draw) -> dict[str, str]:
    names = draw(st.lists(st.sampled_from(sorted(_ENV_FIELDS)), max_size=3, unique=True))
    env = {}
    for name in names:
        env[name] = draw(st.one_of(_ENV_FIELDS[name], _ENV_TEXT, _json_values.map(json.dumps), nasty_fields().filter(lambda t: "\x00" not in t)))
    return env


@dataclass(frozen=True)
class ConfigCase:
    file: FileInput | None  # None: no file, the environment only
    env: dict[str, str] = field(default_factory=dict)


def config_cases(include_known_bugs: bool = True) -> st.SearchStrategy[ConfigCase]:
    no_env = st.just({})
    return st.one_of(
        st.builds(ConfigCase, config_files(include_known_bugs), no_env),
        st.builds(ConfigCase, st.one_of(st.none(), config_files(include_known_bugs)), environments()),
    )


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """Exactly ``env`` as the AUTOSCALER_* variables for the duration; the old ones restored after."""
    saved = {name: value for name, value in os.environ.items() if name.upper().startswith("AUTOSCALER_")}
    for name in saved:
        del os.environ[name]
    try:
        os.environ.update(env)
        yield
    finally:
        for name in [n for n in os.environ if n.upper().startswith("AUTOSCALER_")]:
            del os.environ[name]
        os.environ.update(saved)


def run_config(case: ConfigCase) -> Outcome:
    """load_settings, then the controller's view of what it accepted."""
    from autoscaler.app.config import load_settings

    with tempfile.TemporaryDirectory() as folder, environment(case.env):
        path = None if case.file is None else case.file.materialise(Path(folder) / "autoscaler.toml")
        loaded, refusal = _library_call(lambda: load_settings(path))
        if refusal is not None:
            return refusal
    numbers = (loaded.slot_s, loaded.e0, loaded.e1, loaded.beta, loaded.misfire_grace_s, loaded.report.boot_s)
    if not all(math.isfinite(v) and v >= 0 for v in numbers) or loaded.cluster.min_nodes > loaded.cluster.max_nodes:
        return unexpected("accepted invalid settings", repr(loaded))
    for name, path in (("store_path", loaded.store_path), ("report.smtp_password_file", loaded.report.smtp_password_file)):
        if path is not None and "\x00" in str(path):
            return unexpected("accepted a path holding a NUL", f"{name} = {str(path)!r}")
    _, refusal = _library_call(lambda: loaded.controller_config(epoch_s=0.0))
    if refusal is not None:
        return unexpected(f"accepted settings the controller refuses ({refusal.kind})", refusal.detail)
    return ACCEPTED


# -- the command line ----------------------------------------------------------------------------


@dataclass
class CliRun:
    code: int | None
    stdout: str
    stderr: str
    error: BaseException | None = None
    """What a handler raised and main printed."""
    escaped: BaseException | None = None
    """What escaped main (a bug)."""
    usage: bool = False
    """argparse refused the arguments."""


_SPIED = (
    ("autoscaler.app.cli.jobs", "_run_submit"),
    ("autoscaler.app.cli.drf", "_run_drf"),
    ("autoscaler.app.cli.replay", "_run_replay"),
    ("autoscaler.app.cli", "_check_out_folder"),
)
"""(module, function) whose exceptions are recorded."""


def call_main(argv: list[str]) -> CliRun:
    """``autoscaler.app.cli.main(argv)`` in this process, with stdout and stderr captured and the exception
    main turned into exit status 2 recorded (main prints only its message)."""
    import importlib

    import autoscaler.app.cli as cli

    raised: list[BaseException] = []

    def spy(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except BaseException as exc:
                raised.append(exc)
                raise

        return wrapper

    owners = [(importlib.import_module(module), name) for module, name in _SPIED]
    saved = {(owner, name): getattr(owner, name) for owner, name in owners}
    stdout, stderr = io.StringIO(), io.StringIO()
    run = CliRun(code=None, stdout="", stderr="")
    try:
        for (owner, name), function in saved.items():
            setattr(owner, name, spy(function))
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                run.code = cli.main(argv)
            except SystemExit as exc:
                run.code, run.usage = exc.code, True
            except Exception as exc:  # noqa: BLE001 - escaping main is the bug the fuzzing looks for
                run.escaped = exc
    finally:
        for (owner, name), function in saved.items():
            setattr(owner, name, function)
    run.stdout, run.stderr = stdout.getvalue(), stderr.getvalue()
    run.error = raised[-1] if raised else None
    return run


def cli_outcome(run: CliRun, leftovers: str = "") -> Outcome:
    """Classify a CLI run; ``leftovers`` names what a refused run left behind (a partial write), if anything.
    An accepted run is ACCEPTED here; the caller checks its output."""
    if run.escaped is not None:
        return unexpected(type(run.escaped).__name__, repr(run.escaped))
    if "Traceback" in run.stderr:
        return unexpected("traceback on stderr", run.stderr[-600:])
    if run.code == 0:
        if "error:" in run.stderr:
            return unexpected("exit 0 with an error message", run.stderr)
        return ACCEPTED
    if run.code != 2:
        return unexpected(f"exit status {run.code!r}", run.stderr)
    if leftovers:
        return unexpected("partial write", leftovers)
    lines = run.stderr.rstrip("\n").split("\n")
    if run.usage:
        # argparse's usage, then one "PROG: error: ..." line. "unrecognized arguments" echoes the arguments
        # as given, so one holding a newline carries the message onto the next line: that is still one message.
        errors = [i for i, line in enumerate(lines) if line.startswith(("autoscaler: error: ", "autoscaler ")) and ": error: " in line]
        if len(errors) != 1 or not lines[0].startswith("usage:") or (errors[0] != len(lines) - 1 and "unrecognized arguments" not in lines[errors[0]]):
            return unexpected("argparse message", run.stderr)
        return refused("usage", lines[errors[0]])
    starts = [i for i, line in enumerate(lines) if line.startswith("autoscaler: error: ")]
    if len(starts) != 1:
        return unexpected("no single 'autoscaler: error:' line", run.stderr)
    message = lines[starts[0] :]
    kind = type(run.error).__name__ if run.error is not None else "error"
    # One line, except the settings' list of bad fields: a header line and one indented line per field.
    listing = isinstance(run.error, ConfigError) and message[0].startswith("autoscaler: error: invalid settings in")
    if len(message) > 1 and not (listing and all(line.startswith("  ") for line in message[1:])):
        return unexpected("message on more than one line", run.stderr)
    return refused(kind, message[0])


def _tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a folder); SQLite's -wal/-shm files left out."""
    listing: dict[str, bytes | None] = {}
    for path in sorted(folder.rglob("*")):
        if path.name.endswith(("-wal", "-shm", "-journal")):
            continue
        listing[str(path.relative_to(folder))] = None if path.is_dir() else path.read_bytes()
    return listing


# -- autoscaler submit ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RelativeTime:
    """An ISO-8601 deadline ``offset_s`` from the moment of submission, written with a UTC offset or 'Z'."""

    offset_s: float
    utc_offset_min: int
    zulu: bool

    def render(self) -> str:
        zone = timezone(timedelta(minutes=self.utc_offset_min))
        moment = datetime.fromtimestamp(time.time() + self.offset_s, zone)
        text = moment.isoformat()
        return text.replace("+00:00", "Z") if self.zulu and self.utc_offset_min == 0 else text


SEED_JOB = ("seed-job", "seed", "ads", "1d", 60.0, ["echo", "seed"])
"""The job already in every seeded store: id, name, tenant, deadline, length_s, command."""

DEADLINE_TEXTS = (
    "2h", "90m", "1h30m", "45s", "1d", "600", "0", "0s", "1.5h", "366d", "367d", "1d1d", "h", "", " ", "2 h",
    "-1h", "1e3", "nan", "inf", "P1D", "2h30", "\u0663h", "9" * 400, "T", "now", "2026-11-29", "2026-11-29T18:00:00",
    "2030-01-01T00:00:00Z", "9999-12-31T23:59:59+00:00", "0001-01-01T00:00:00+14:00", "2026-02-30T00:00:00Z",
    "2026-11-29T25:00:00Z", "2026-11-29T18:00:00+24:00", "1970-01-01T00:00:00Z",
)  # fmt: skip
_DURATIONS = st.from_regex(r"(\d{1,3}(\.\d{1,2})?d)?(\d{1,3}h)?(\d{1,4}m)?(\d{1,5}s)?", fullmatch=True)
_RELATIVE = st.builds(
    RelativeTime,
    st.one_of(st.floats(-86400 * 400, 86400 * 400), st.sampled_from([3600.0, 86400.0, -60.0, 367 * 86400.0])),
    st.integers(-23 * 60, 23 * 60),
    st.booleans(),
)
_ARGV_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")


def argv_texts(undecodable: bool = True) -> st.SearchStrategy[str]:
    """Arguments as the OS passes them: no NUL; bytes that are not UTF-8 arrive as lone surrogates."""
    parts = [
        st.sampled_from(["etl", "ads", "search", "nightly etl", "x", "-", "--", "-1", "ünïcødé", "\U0001f600", " "]),
        st.text(_ARGV_CHARS, max_size=16),
    ]
    if undecodable:
        parts.append(st.binary(min_size=1, max_size=6).filter(lambda raw: b"\x00" not in raw).map(os.fsdecode))
    return st.one_of(*parts)


_SIZE_TEXTS = st.one_of(
    st.sampled_from(SAMPLE_ROWS).map(lambda row: row[3]),
    st.integers(0, 10**15).map(str),
    st.sampled_from(["1e308", "1.7976931348623157e308", "5e-324", "1e20"]),
    nasty_fields().filter(lambda t: "\x00" not in t),
)
_JARS = st.sampled_from(["app.jar", "s3://bucket/app.jar", "s3://b", "/usr/lib/x.jar", "app.zip", "", " .jar", "S3://B/X.JAR"])


def _valid_or_broken(draw, valid: st.SearchStrategy, broken: st.SearchStrategy, one_in: int = 5):
    """A valid value, or about once in ``one_in`` draws a broken one."""
    return draw(broken) if _chance(draw, one_in) else draw(valid)


_NUMBER_TEXTS = nasty_fields().filter(lambda t: "\x00" not in t)
_PROGRAMS = st.sampled_from(["echo", "spark-submit", "hadoop-streaming", "/usr/bin/env"])


@st.composite
def submit_options(draw, include_known_bugs: bool = True) -> tuple:
    """The options of one submission; each is valid about four times in five."""
    text = argv_texts()
    # Undecodable argv bytes in --name or --tenant (pinned by a test below).
    label = argv_texts(undecodable=include_known_bugs)
    options: list = []
    if draw(st.booleans()):
        valid_id = st.one_of(st.from_regex(r"[A-Za-z0-9._-]{1,64}", fullmatch=True), st.just(SEED_JOB[0]))
        options += ["--id", _valid_or_broken(draw, valid_id, st.one_of(st.from_regex(r"[a-z]{65,70}", fullmatch=True), text))]
    if options and options[1] == SEED_JOB[0] and draw(st.booleans()):
        # A retry of the seeded job: the same content, or one field changed.
        _, name, tenant, deadline, length_s, command = SEED_JOB
        options += ["--name", name, "--tenant", tenant, "--deadline", deadline, "--length-s", repr(length_s)]
        if draw(st.booleans()):
            options[draw(st.sampled_from([3, 5, 7, 9]))] = draw(st.sampled_from(["other", "1h", "61"]))
        return tuple(options + ["--command", *command])
    tenants = st.sampled_from(["ads", "search", "etl", "analytics"])
    names = st.one_of(st.sampled_from(["nightly etl", "wordcount", "x"]), st.text(_ARGV_CHARS, min_size=1, max_size=16).filter(lambda t: t.strip() and not t.startswith("-")))
    deadlines = st.one_of(st.sampled_from(["2h", "90m", "1h30m", "1d", "7200"]), _DURATIONS, _RELATIVE)
    for flag, valid, broken in (
        ("--name", names, label),
        ("--tenant", tenants, label),
        ("--deadline", deadlines, st.one_of(st.sampled_from(DEADLINE_TEXTS), text)),
    ):
        if not _chance(draw, 30):
            options += [flag, _valid_or_broken(draw, valid, broken)]
    good_length = st.one_of(st.sampled_from(["1", "60", "600", "3600", "0.001"]), st.floats(0.001, 86400).map(repr))
    length = _valid_or_broken(draw, st.sampled_from(["length", "sizes"]), st.sampled_from(["length", "sizes", "both", "neither"]))
    if length in ("length", "both"):
        options += ["--length-s", _valid_or_broken(draw, good_length, st.one_of(st.floats(min_value=0).map(repr), _NUMBER_TEXTS))]
    if length in ("sizes", "both"):
        count = _valid_or_broken(draw, st.just(3), st.sampled_from([0, 1, 2, 4]), one_in=10)
        options += ["--sizes", *(_valid_or_broken(draw, st.sampled_from(SAMPLE_ROWS).map(lambda row: row[3]), _SIZE_TEXTS) for _ in range(count))]
    # The width: --nodes, or vCPUs and memory (in all, or as containers), each now and then.
    widths = st.one_of(st.sampled_from(["1", "4", "32", "33"]), st.integers(1, 10_000).map(str))
    for flag, valid in (
        ("--nodes", widths),
        ("--vcpus", st.sampled_from(["1", "4", "16", "0.5", "129"])),
        ("--memory-gb", st.sampled_from(["1", "12", "48", "0.25", "1000"])),
        ("--container-vcpus", st.sampled_from(["1", "2", "8"])),
        ("--container-memory-gb", st.sampled_from(["1", "7", "16"])),
    ):
        if _chance(draw, 8):
            options += [flag, _valid_or_broken(draw, valid, _NUMBER_TEXTS)]
    step = _valid_or_broken(draw, st.sampled_from(["command", "jar"]), st.sampled_from(["command", "jar", "both", "neither"]))
    if step in ("jar", "both"):
        options += ["--jar", _valid_or_broken(draw, st.sampled_from(["app.jar", "s3://bucket/app.jar", "/usr/lib/x.jar"]), st.one_of(_JARS, text))]
        if _chance(draw, 3):
            options += ["--main-class", _valid_or_broken(draw, st.just("org.example.Main"), text)]
        if step == "jar" and _chance(draw, 2):
            options += ["--args", *draw(st.lists(text, max_size=3))]
    if step in ("command", "both"):
        arguments = draw(st.lists(st.one_of(st.sampled_from(["--deploy-mode", "cluster", "s3://b/app.py"]), text), max_size=4))
        program = [] if _chance(draw, 10) else [_valid_or_broken(draw, _PROGRAMS, st.one_of(text, st.just(" ")))]
        options += ["--command", *program, *arguments]
    return tuple(options)


@dataclass(frozen=True)
class SubmitCase:
    options: tuple
    """Everything after ``submit --store ... [--config ...]``; a RelativeTime is rendered when run."""
    store: str = "seeded"
    """seeded | directory | foreign | missing-folder | from-config (the config's store_path names the seeded store)
    | from-config-nul (the config's store_path holds a NUL)"""
    config: FileInput | str | None = None
    """None, "tenants" (a valid config with known_tenants ads, search, etl), or a generated config file."""


def submit_cases(include_known_bugs: bool = True) -> st.SearchStrategy[SubmitCase]:
    stores = ["seeded"] * 8 + ["directory", "foreign", "missing-folder", "from-config"]
    if include_known_bugs:
        stores.append("from-config-nul")
    configs = st.one_of(st.none(), st.none(), st.just("tenants"), config_files(include_known_bugs))
    return st.builds(SubmitCase, submit_options(include_known_bugs), st.sampled_from(stores), configs)


def _seed_store(path: Path) -> None:
    from autoscaler.adapters.sqlite_store import SqliteJobStore
    from autoscaler.core.intake import build_job

    job_id, name, tenant, deadline, length_s, command = SEED_JOB
    job = build_job(
        job_id=job_id, name=name, tenant=tenant, now_s=time.time(), deadline=deadline, length_s=length_s,
        sizes=None, jar=None, args=[], command=command,
    )  # fmt: skip
    with SqliteJobStore(path) as store:
        store.submit(job)


def _jobs(path: Path) -> list:
    from autoscaler.adapters.sqlite_store import SqliteJobStore

    with SqliteJobStore(path) as store:
        return store.all_jobs()


def run_submit(case: SubmitCase) -> Outcome:
    """`autoscaler submit`: accepted means the job is in the store; refused means the store and every
    file beside it are as they were."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        seeded = folder / "jobs.db"
        _seed_store(seeded)
        (folder / "a-folder").mkdir()
        (folder / "notes.txt").write_bytes(b"not a job store\n" * 20)
        store = {
            "seeded": seeded,
            "directory": folder / "a-folder",
            "foreign": folder / "notes.txt",
            "missing-folder": folder / "no-such-folder" / "jobs.db",
        }.get(case.store)
        argv = ["submit"] + (["--store", str(store)] if store is not None else [])
        config = case.config
        if case.store.startswith("from-config"):
            store_path = str(seeded) if case.store == "from-config" else str(folder / "jobs\x00.db")
            config = FileInput("file", toml_document({"": {"store_path": store_path}, "cluster": {"id": "j-ABC123"}}).encode())
        elif config == "tenants":
            config = FileInput("file", b'known_tenants = ["ads", "search", "etl"]\n[cluster]\nid = "j-ABC123"\n')
        if config is not None:
            argv += ["--config", str(config.materialise(folder / "autoscaler.toml"))]
        argv += [option.render() if isinstance(option, RelativeTime) else option for option in case.options]
        jobs_before, tree_before = _jobs(seeded), _tree(folder)
        with environment({}):
            run = call_main(argv)
        jobs_after, tree_after = _jobs(seeded), _tree(folder)
    changed = sorted(p for p in tree_before.keys() | tree_after.keys() if p != "jobs.db" and tree_before.get(p, 0) != tree_after.get(p, 0))
    leftovers = ""
    if jobs_after != jobs_before or changed:
        leftovers = f"jobs {len(jobs_before)} -> {len(jobs_after)}; files changed: {changed}"
    outcome = cli_outcome(run, leftovers)
    if outcome.verdict != "accepted":
        return outcome
    said = run.stdout.strip().rsplit(": ", 1)
    added = [job for job in jobs_after if job not in jobs_before]
    if said[0] == "queued" and len(added) == 1 and added[0].job_id == said[-1] and len(jobs_after) == len(jobs_before) + 1:
        return ACCEPTED
    if said[0] == "already queued" and jobs_after == jobs_before and said[-1] in {job.job_id for job in jobs_before}:
        return ACCEPTED
    return unexpected("accepted but the store disagrees", f"stdout {run.stdout!r}; jobs {len(jobs_before)} -> {len(jobs_after)}")


# -- autoscaler drf --demands --------------------------------------------------------------------

_RESOURCES = ("cpu", "mem", "disk", "net", "gpu")
_BAD_DRF_HEADERS = (
    "Agent,cpu", "agent", "agent,", "agent,cpu,cpu", "agent,,mem", "name,cpu", "\ufeffagent,cpu", '"agent",cpu', "agent;cpu",
    "agent,cpu,mem\x00",
)  # fmt: skip


@st.composite
def demand_lines(draw, include_known_bugs: bool = True) -> list[str]:
    # Agent names with a character XML 1.0 forbids (pinned by a test below).
    xml_safe = not include_known_bugs
    resources_ = draw(st.lists(st.sampled_from(_RESOURCES), min_size=1, max_size=4, unique=True))
    agent = st.one_of(st.from_regex(r"[a-z][a-z0-9_-]{0,7}", fullmatch=True), st.text(_XML_SAFE_TEXT if xml_safe else _TEXT, min_size=1, max_size=8))
    value = st.one_of(st.floats(0.01, 1).map(repr), st.sampled_from(["0", "1", "0.5", "1e6", "1e-300", "5e-324", "1e308"]))
    agents = draw(st.lists(agent, min_size=0 if _chance(draw, 10) else 1, max_size=8, unique=True))
    rows = [[name, *(draw(value) for _ in resources_)] for name in agents]
    rows = _mutate_rows(draw, rows, _mutations(draw), nasty_fields(xml_safe=xml_safe))
    if _chance(draw, 3):
        row = rows[draw(st.integers(0, len(rows) - 1))] if rows else []
        if row:
            change = draw(st.sampled_from(["all zero", "quoted comma", "open quote", "empty agent", "dotted agent"]))
            if change == "all zero":
                row[1:] = ["0"] * len(row[1:])
            elif change == "quoted comma":
                row[0] = f'"{row[0]},x"'
            elif change == "open quote":
                row[-1] = '"' + row[-1]
            elif change == "empty agent":
                row[0] = ""
            else:
                row[0] = "team.a"
    lines = [",".join(row) for row in rows]
    header = ",".join(["agent", *resources_]) if not _chance(draw, 10) else draw(st.sampled_from(_BAD_DRF_HEADERS))
    if not _chance(draw, 12):
        lines.insert(0, header)
    return _with_blank_lines(draw, lines, ("", " ", ","))


def _xml_legal(text: str) -> bool:
    return not (set(text) & _XML_ILLEGAL)


@dataclass(frozen=True)
class DrfCase:
    demands: FileInput
    n: str | None = None


def drf_cases(include_known_bugs: bool = True) -> st.SearchStrategy[DrfCase]:
    @st.composite
    def demands(draw) -> FileInput:
        if _chance(draw, 10):
            return draw(odd_files())
        return draw(encoded_files(draw(demand_lines(include_known_bugs)), control_bytes=include_known_bugs))

    files = demands()
    if not include_known_bugs:
        files = files.filter(lambda f: _xml_legal(f.content.decode("utf-8", "replace")))
    n_texts = ["1", "3", "8", "100", "1000000", "0", "-1", "x", "1e3", "\u0663"]
    if include_known_bugs:
        n_texts += ["1000000000000", "10" * 10]  # beyond the 10,000,000 agents drf accepts
    n = st.one_of(st.none(), st.none(), st.sampled_from(n_texts))
    return st.builds(DrfCase, files, n)


def run_drf(case: DrfCase) -> Outcome:
    """`autoscaler drf --demands CSV --yarn-out XML`: accepted means a well-formed allocation file with a
    queue per agent; refused means no file and no folder."""
    from autoscaler.app.cli import read_demands_csv

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        demands = case.demands.materialise(folder / "tenants.csv")
        yarn = folder / "out" / "fair-scheduler.xml"
        argv = ["drf", "--demands", str(demands), "--yarn-out", str(yarn), "--format", "json"]
        if case.n is not None:
            argv += ["--n", case.n]
        run = call_main(argv)
        leftovers = ", ".join(str(p.relative_to(folder)) for p in (folder / "out").rglob("*")) if (folder / "out").exists() else ""
        outcome = cli_outcome(run, leftovers or ("out/" if (folder / "out").exists() else ""))
        if outcome.verdict != "accepted":
            return outcome
        parsed, refusal = _library_call(lambda: read_demands_csv(demands))
        if refusal is not None:
            return unexpected("the CLI accepted what read_demands_csv refuses", refusal.detail)
        _, agents, matrix = parsed
        if not (matrix.ndim == 2 and np.isfinite(matrix).all() and (matrix >= 0).all() and (matrix > 0).any(axis=1).all()):
            return unexpected("accepted invalid demands", repr(matrix))
        if not yarn.exists():
            return unexpected("accepted but no --yarn-out file", run.stderr)
        try:
            queues = [queue.get("name") for queue in ET.parse(yarn).getroot().findall("queue")]
        except ET.ParseError as exc:
            return unexpected("--yarn-out file is not well-formed XML", f"{exc}; agents {agents!r}")
        if queues != agents:
            return unexpected("--yarn-out queues differ from the agents", f"{queues!r} != {agents!r}")
    # The final shares fit: sum_i x_i d_ir <= k/n for every resource r, with d_i scaled to a dominant share of 1.
    document = json.loads(run.stdout)
    shares = np.array(document["steps"][-1]["x"], dtype=float)
    used = shares @ (matrix / matrix.max(axis=1, keepdims=True))
    if not (np.isfinite(shares).all() and (shares >= 0).all() and (used <= len(agents) / document["n"] + 1e-9).all()):
        return unexpected("accepted demands got infeasible shares", f"x = {shares!r}, use {used!r}")
    return ACCEPTED


# -- autoscaler replay --trace ... --out ---------------------------------------------------------


@dataclass(frozen=True)
class ReplayCase:
    trace: FileInput
    suffix: str  # ".tsv": a SWIM trace; ".csv": a load curve
    skip_bad_lines: bool = False


def replay_cases(include_known_bugs: bool = True) -> st.SearchStrategy[ReplayCase]:
    return st.one_of(
        st.builds(ReplayCase, swim_files(include_known_bugs), st.just(".tsv"), st.booleans()),
        st.builds(ReplayCase, load_curve_files(include_known_bugs), st.just(".csv")),
    )


REPLAY_FILES = ("replay.png", "replay.json", "slots.csv", "summary.csv")


def run_replay(case: ReplayCase) -> Outcome:
    """`autoscaler replay --trace FILE --policy follow --window 48 --out DIR`: accepted means all four files;
    refused means no DIR at all."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        trace = case.trace.materialise(folder / f"trace{case.suffix}")
        out = folder / "out"
        argv = ["replay", "--trace", str(trace), "--policy", "follow", "--window", "48", "--format", "csv", "--out", str(out)]
        if case.skip_bad_lines:
            argv.append("--skip-bad-lines")
        run = call_main(argv)
        written = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
        outcome = cli_outcome(run, ", ".join(written) or ("out/" if out.exists() else ""))
        if outcome.verdict == "accepted" and written != sorted(REPLAY_FILES):
            return unexpected("accepted but --out holds the wrong files", repr(written))
        return outcome


# -- the edges, for this file and the report -----------------------------------------------------


@dataclass(frozen=True)
class Target:
    name: str
    cases: Callable[[bool], st.SearchStrategy]
    run: Callable[[object], Outcome]


TARGETS = (
    Target("read_swim", swim_cases, run_swim),
    Target("read_load_curve", load_curve_files, run_load_curve),
    Target("load_settings", config_cases, run_config),
    Target("autoscaler submit", submit_cases, run_submit),
    Target("autoscaler drf --demands", drf_cases, run_drf),
    Target("autoscaler replay --out", replay_cases, run_replay),
)


# -- fast tests (default run) --------------------------------------------------------------------


@FUZZ_SETTINGS
@given(swim_cases())
def test_swim_reader_accepts_valid_traces_and_refuses_the_rest_cleanly(case):
    assert_clean(run_swim(case))


@FUZZ_SETTINGS
@given(load_curve_files())
def test_load_curve_reader_accepts_valid_curves_and_refuses_the_rest_cleanly(case):
    assert_clean(run_load_curve(case))


@FUZZ_SETTINGS
@given(config_cases())
def test_settings_from_toml_and_environment_are_valid_or_refused_cleanly(case):
    assert_clean(run_config(case))


@FUZZ_SETTINGS
@given(submit_cases())
def test_submit_stores_the_job_or_refuses_with_the_store_unchanged(case):
    assert_clean(run_submit(case))


@FUZZ_SETTINGS
@given(drf_cases())
def test_drf_writes_a_yarn_file_or_refuses_without_writing(case):
    assert_clean(run_drf(case))


@FUZZ_SETTINGS
@given(replay_cases())
def test_replay_writes_every_output_or_refuses_without_writing(case):
    assert_clean(run_replay(case))


# -- long runs (-m slow) -------------------------------------------------------------------------


@pytest.mark.slow
@SLOW_SETTINGS
@given(swim_cases())
def test_swim_reader_long(case):
    assert_clean(run_swim(case))


@pytest.mark.slow
@SLOW_SETTINGS
@given(load_curve_files())
def test_load_curve_reader_long(case):
    assert_clean(run_load_curve(case))


@pytest.mark.slow
@SLOW_SETTINGS
@given(config_cases())
def test_settings_long(case):
    assert_clean(run_config(case))


@pytest.mark.slow
@SLOW_SETTINGS
@given(submit_cases())
def test_submit_long(case):
    assert_clean(run_submit(case))


@pytest.mark.slow
@SLOW_SETTINGS
@given(drf_cases())
def test_drf_long(case):
    assert_clean(run_drf(case))


@pytest.mark.slow
@SLOW_REPLAY_SETTINGS
@given(replay_cases())
def test_replay_long(case):
    assert_clean(run_replay(case))


# -- the harness itself --------------------------------------------------------------------------


def test_hand_picked_inputs_get_the_outcomes_a_reader_would_expect():
    valid_trace = FileInput("file", b"job0\t49\t49\t740773\t2339561\t627471\n")
    assert run_swim(SwimCase(valid_trace)) == ACCEPTED
    assert run_swim(SwimCase(FileInput("file", b"job0\t49\t49\tnan\t1\t1\n"))).kind == "TraceError"
    assert run_swim(SwimCase(FileInput("missing"))).kind == "TraceError"
    assert run_load_curve(FileInput("file", b"slot,released\n0,1.5\n")) == ACCEPTED
    assert run_load_curve(FileInput("directory")).kind == "TraceError"
    assert run_config(ConfigCase(None, {"AUTOSCALER_CLUSTER__ID": "j-ABC123"})) == ACCEPTED
    assert run_config(ConfigCase(FileInput("file", b"[cluster]\nid = 5\n"))).kind == "ConfigError"
    queued = SubmitCase(("--name", "n", "--tenant", "t", "--deadline", "2h", "--length-s", "60", "--command", "echo"))
    assert run_submit(queued) == ACCEPTED
    retried = SubmitCase(("--id", "seed-job", "--name", "seed", "--tenant", "ads", "--deadline", "1d", "--length-s", "60.0", "--command", "echo", "seed"))
    assert run_submit(retried) == ACCEPTED
    assert run_submit(SubmitCase(queued.options, store="foreign")).kind == "StoreError"
    assert run_submit(SubmitCase(queued.options[:-2])).kind == "ConfigError"  # no step
    assert run_submit(SubmitCase(("--name", "n"))).kind == "usage"
    assert run_drf(DrfCase(FileInput("file", b"agent,cpu,mem\nj1,0.2,0.1\nj2,0.1,0.4\n"))) == ACCEPTED
    assert run_drf(DrfCase(FileInput("file", b"agent,cpu\nj1,-1\n"))).kind == "TraceError"
    assert run_drf(DrfCase(FileInput("file", b"agent,cpu\nteam.a,1\n"))).kind == "ConfigError"  # not a YARN queue name
    assert run_replay(ReplayCase(valid_trace, ".tsv")) == ACCEPTED
    assert run_replay(ReplayCase(FileInput("file", b"slot,released\n-1,2\n"), ".csv")).kind == "TraceError"


def test_the_harness_calls_an_escaped_exception_and_a_multi_line_message_unexpected():
    assert cli_outcome(CliRun(code=None, stdout="", stderr="", escaped=ValueError("x"))).verdict == "unexpected"
    two_lines = CliRun(code=2, stdout="", stderr="autoscaler: error: a\nb\n", error=AutoscalerError("a\nb"))
    assert cli_outcome(two_lines).kind == "message on more than one line"
    left = CliRun(code=2, stdout="", stderr="autoscaler: error: a\n", error=AutoscalerError("a"))
    assert cli_outcome(left, "out/replay.png").kind == "partial write"
    # argparse echoes unrecognised arguments as given; a newline inside one is the user's, not a second message.
    echoed = CliRun(code=2, stdout="", stderr="usage: autoscaler [-h] COMMAND ...\nautoscaler: error: unrecognized arguments: a\nb\n", usage=True)
    assert cli_outcome(echoed).kind == "usage"


# -- inputs that once escaped as tracebacks, each pinned by its minimal input


@pytest.mark.parametrize("flag", ["--name", "--tenant"])
def test_submit_with_undecodable_argv_bytes_is_refused(flag):
    options = {"--name": "n", "--tenant": "t"}
    options[flag] = os.fsdecode(b"\xff")  # what `autoscaler submit --name $'\xff'` passes to main
    argv = [part for pair in options.items() for part in pair]
    outcome = run_submit(SubmitCase((*argv, "--deadline", "2h", "--length-s", "10", "--command", "echo")))
    assert outcome.verdict == "refused", outcome


def test_submit_with_undecodable_argv_bytes_elsewhere_is_fine():
    odd = os.fsdecode(b"\xff")
    case = SubmitCase(("--name", "n", "--tenant", "t", "--deadline", "2h", "--length-s", "10", "--command", "echo", odd))
    assert run_submit(case) == ACCEPTED


def test_a_store_path_with_a_nul_is_refused():
    outcome = run_submit(SubmitCase(("--name", "n", "--tenant", "t", "--deadline", "2h", "--length-s", "10", "--command", "echo"), store="from-config-nul"))
    assert outcome.verdict == "refused", outcome


@pytest.mark.parametrize("line", ['store_path = "\\u0000"', '[report]\nsmtp_password_file = "\\u0000"'])
def test_settings_refuse_a_path_holding_a_nul(line):
    document = f'{line}\n[cluster]\nid = "j-ABC123"\n' if line.startswith("store") else f'[cluster]\nid = "j-ABC123"\n{line}\n'
    assert run_config(ConfigCase(FileInput("file", document.encode()))).verdict == "refused"


def test_drf_refuses_agent_names_xml_cannot_hold():
    assert_clean(run_drf(DrfCase(FileInput("file", b"agent,cpu\n\x01,1\n"))))


@pytest.mark.parametrize("n", ["1000000000000", "10000000000000000000"])
def test_drf_refuses_an_n_too_large_to_allocate(n):
    assert_clean(run_drf(DrfCase(FileInput("file", b"agent,cpu\na,1\n"), n=n)))
