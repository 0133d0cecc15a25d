"""The daemon's carbon (or price) feed: the ``[carbon]`` source read now and then, turned into the
window hold+carbon decides each slot by.

``CarbonFeed.window`` reads the source (and the forecast source, if any) with
:func:`autoscaler.adapters.signal_source.load_signal` at most every ``refresh_s``; a read that fails
keeps the last good signal. The first read is at start-up (:func:`check_sources`), or else at the
first window. Later reads of a URL run in a background thread, one at a time, so a slow source never
delays a slot: the slots go on with the last good signal meanwhile, and a read's age counts from
when it finished. A local file unchanged since its last good read (the same bytes) is not parsed
again; one that changed is read in the slot up to ``IN_SLOT_READ_BYTES`` (it
takes milliseconds, and keeps a replay through the daemon deterministic), a larger one (an archive
of forecasts as issued: 39.5 MB, 0.84 million lines, took 4.1 s) in the background; the source and
the forecast are judged apart, so a small source read in the slot is never held back by a large forecast. It returns the slot's
:class:`~autoscaler.core.controller.CarbonWindow`, or None when there is no usable signal, with
``CarbonFeed.fallback`` saying why (:data:`~autoscaler.core.controller.SIGNAL_FALLBACKS`): the source
was never read ("unreadable", with the error), the last good read is older than
``max_staleness_s`` ("stale", with its age), or the signal does not cover the slot ("not_covering").
The per-slot values come from :func:`autoscaler.core.signal_slots.slot_window`, pure. Each read keeps
the earlier reads' points before its own first one, up to ``HISTORY_KEPT_S`` (11 days and one more),
so a source that serves only the last day still gives the blend the days it scores its forecasts
over once the daemon has run that long (:func:`autoscaler.core.energy.signal.with_history`).

The forecast is read as issued, never with look-ahead: an archive (a folder of provider documents,
JSON lines, CSV ``issued,time,value``, :func:`~autoscaler.adapters.signal_source.load_forecast`)
gives each slot the newest forecast issued by the slot's start. Each read of a forecast URL is an
issue of its own, kept while it covers a slot to come: issued at the document's issue time
(WattTime ``meta.generated_at``, Electricity Maps ``updatedAt``, UK's first half hour), or at the
time it was read for a document that carries none; a document issued after now is left out with
``carbon_forecast_issued_later``. A local file without issue times (CSV ``time,value``) is read as
before: every value as known.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
import threading
from collections import Counter
from collections.abc import Callable
from typing import Protocol

import structlog

from autoscaler.adapters.signal_source import _shown, load_forecast, load_signal
from autoscaler.core.controller import CarbonWindow, SignalUnavailable
from autoscaler.core.energy.forecast_archive import ForecastArchive, IssuedForecast, archive_in_grams
from autoscaler.core.energy.signal import Signal, in_grams, plausibility_notes, utc_text, with_history
from autoscaler.core.errors import AutoscalerError, ConfigError, TraceError
from autoscaler.core.forecast import EVALUATION_DAYS, WEEK_DAYS
from autoscaler.core.ports import Clock
from autoscaler.core.readable import duration_text, number_text
from autoscaler.core.signal_slots import slot_window

__all__ = ["CarbonFeed", "CarbonWindow", "carbon_feed"]


UNIT_NAME = "[carbon] unit"
"""Where the daemon's signal unit is set, for messages."""

IN_SLOT_READ_BYTES = 1 << 20
"""A local file that changed is read in the slot up to this size (a series of a year in half hours is
0.7 MiB, read in about 0.15 s); a larger one in the background, as a URL is."""

HISTORY_KEPT_S = (WEEK_DAYS + EVALUATION_DAYS + 2) * 86_400.0
"""Seconds of earlier reads kept before a read's first point: the 11 days the blend scores with
(``autoscaler.core.forecast.history_needed``) and a day to spare."""


class CarbonSettings(Protocol):
    """The ``[carbon]`` section as the feed reads it (``autoscaler.app.config.CarbonSettings`` is one):
    the signal's ``source`` and ``forecast`` (a path or an http(s) URL, or None), their ``unit``,
    ``refresh_s``, ``max_staleness_s`` and ``timeout_s`` (seconds)."""

    source: str | None
    forecast: str | None
    unit: str | None
    refresh_s: float
    max_staleness_s: float
    timeout_s: float


log = structlog.get_logger("autoscaler")


class CarbonFeed:
    """The ``[carbon]`` source (and forecast) as hold+carbon reads it, slot by slot.

    ``settings``: the ``[carbon]`` section (its ``source`` set); ``clock``: when each read happens
    (the age of the last good one is measured on it); ``load``: ``load_signal``'s signature (tests
    may pass another reader); ``load_forecast``: ``load_forecast``'s, for ``settings.forecast``.
    ``fallback``: why the last ``window`` returned None, else None.
    ``last_read_s``: when the last good read of the source finished, on ``clock`` (None: never).
    ``parsed``: how many reads of "source" and of "forecast" fetched and parsed them (a local file
    unchanged since its last good read is not), the start-up read (``seed``) aside.
    Raises ConfigError when ``settings.source`` is not set.
    """

    def __init__(
        self,
        settings: CarbonSettings,
        clock: Clock,
        load: Callable[..., Signal] = load_signal,
        load_forecast: Callable[..., Signal | ForecastArchive] = load_forecast,
    ) -> None:
        if not settings.source:
            raise ConfigError("carbon: a feed needs [carbon] source (a file path or an http(s) URL)")
        self.settings = settings
        self.clock = clock
        self._load = load
        self._load_forecast = load_forecast
        self._signal: Signal | None = None
        self._forecast: Signal | ForecastArchive | None = None
        self._fetched: dict[float, IssuedForecast] = {}  # a forecast URL's reads, by issue time
        self._tried_s: float | None = None
        self.last_read_s: float | None = None
        self.last_error: str = ""
        self.fallback: SignalUnavailable | None = None
        # The reader thread sets the signal, its time and the error together; a slot reads them together.
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        # The local files' identities at their last good read ("source", "forecast"): an unchanged file is not parsed again.
        self._identities: dict[str, tuple[str, int] | None] = {}
        self.parsed: Counter = Counter()

    @property
    def reading(self) -> bool:
        """True while a background read is under way."""
        return self._reader is not None and self._reader.is_alive()

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait up to ``timeout_s`` seconds (None: for good) for a background read under way to finish;
        True when none is under way any more (for a clean shutdown, and for tests)."""
        reader = self._reader
        if reader is not None:
            reader.join(timeout_s)
        return not self.reading

    def window(self, now_s: float, slot_s: float, deadline_slots: int, epoch_s: float = 0.0) -> CarbonWindow | None:
        """The window (:func:`slot_window`) of the slot holding ``now_s`` (slots of ``slot_s`` from
        ``epoch_s``), reading the sources first if ``refresh_s`` has passed since the last try; None
        (and ``fallback`` says why) without a usable signal. Never raises for the signal's sake."""
        self._refresh()
        self.fallback = None
        with self._lock:
            signal, forecast, read_s, error = self._signal, self._forecast, self.last_read_s, self.last_error
        if signal is None:
            under_way = "; a read is under way" if self.reading else ""
            return self._fail("unreadable", f"never read: {error or 'not tried yet'}{under_way}")
        age_s = self.clock.now_s() - read_s
        if age_s > self.settings.max_staleness_s:
            detail = (
                f"the last good read of {signal.source} is {duration_text(age_s)} old, more than max_staleness_s = "
                f"{number_text(self.settings.max_staleness_s)} s"
            )
            if error:
                detail += f"; the last read failed: {error}"
            elif self.reading:
                detail += "; a read is under way"
            return self._fail("stale", detail)
        slot_start_s = epoch_s + math.floor((now_s - epoch_s) / slot_s) * slot_s
        try:
            return slot_window(signal, forecast, slot_start_s, slot_s, deadline_slots)
        except AutoscalerError as error:
            return self._fail("not_covering", str(error))

    def _fail(self, reason: str, detail: str) -> None:
        self.fallback = SignalUnavailable(reason, detail)
        return None

    def _refresh(self) -> None:
        now_s = self.clock.now_s()
        if self._tried_s is not None and now_s - self._tried_s < self.settings.refresh_s:
            return
        if self.reading:
            return  # one read at a time: the one under way will do
        first = self._tried_s is None
        self._tried_s = now_s
        if first:
            self.read()
            return
        in_slot, later = [], []
        for key in self._keys():
            identity = self._identity(key)
            (later if self._off_the_slot(key, identity) else in_slot).append((key, identity))
        for key, identity in in_slot:
            self._read_one(key, identity)
        if later:
            self._reader = threading.Thread(target=lambda: [self._read_one(*read) for read in later], name="carbon-feed-read", daemon=True)
            self._reader.start()

    def _keys(self) -> list[str]:
        return ["source", "forecast"] if self.settings.forecast else ["source"]

    def _path(self, key: str) -> str:
        return self.settings.source if key == "source" else self.settings.forecast

    def _identity(self, key: str) -> tuple[str, int] | None:
        path = self._path(key)
        return None if _is_url(path) else _file_identity(path)

    def _off_the_slot(self, key: str, identity: tuple[str, int] | None) -> bool:
        """A read after the first runs in a thread for a URL, and for a local file that changed since
        its last good read and is over ``IN_SLOT_READ_BYTES`` (an archive of forecasts as issued takes
        seconds to parse); otherwise in the slot. The source and the forecast are judged apart."""
        if _is_url(self._path(key)):
            return True
        return identity is not None and identity != self._identities.get(key) and identity[-1] > IN_SLOT_READ_BYTES

    def read(self) -> None:
        """Read the source (and the forecast) now, in this thread; a read that fails keeps the last
        good signal and logs ``carbon_signal_read_failed``. Never raises for the signal's sake. A local
        file unchanged since its last good read (the same bytes) is not parsed again: the read is good
        and gives what it gave then."""
        for key in self._keys():
            self._read_one(key, self._identity(key))

    def _read_one(self, key: str, identity: tuple[str, int] | None) -> None:
        """Read ``key`` ("source" or "forecast"), whose local file has ``identity`` (None: a URL, or
        not a file), unless that is the identity of its last good read."""
        if identity is not None and identity == self._identities.get(key):
            if key == "source":
                with self._lock:
                    self.last_read_s, self.last_error = self.clock.now_s(), ""
            return
        self.parsed[key] += 1
        if key == "source":
            self._read_source(identity)
        else:
            self._read_forecast(identity)

    def _read_source(self, identity: tuple | None) -> None:
        settings = self.settings
        try:
            signal = in_grams(self._load(settings.source, unit=settings.unit, timeout_s=settings.timeout_s, unit_name=UNIT_NAME))
        except Exception as error:  # noqa: BLE001 - a feed that fails keeps its last good signal, whatever failed
            with self._lock:
                self.last_error = _error_text(error)
            log.warning("carbon_signal_read_failed", source=_named(settings.source), error=self.last_error, kept_last_good=self._signal is not None)
        else:
            finished_s = self.clock.now_s()  # the age of a read runs from when it finished
            with self._lock:
                signal = with_history(self._signal, signal, HISTORY_KEPT_S)
                self._signal, self.last_read_s, self.last_error = signal, finished_s, ""
                self._identities["source"] = identity
            _warn_if_implausible(signal)

    def _read_forecast(self, identity: tuple | None) -> None:
        settings = self.settings
        try:
            read = self._load_forecast(settings.forecast, unit=settings.unit, timeout_s=settings.timeout_s, unit_name=UNIT_NAME)
            forecast = self._as_issued(read, self.clock.now_s())
            if forecast is not None and self._signal is not None and forecast.unit != self._signal.unit:
                raise ConfigError(f"{forecast.source}: the forecast is in {forecast.unit}, the signal in {self._signal.unit}")
            if isinstance(forecast, ForecastArchive):
                for issue in forecast.issues:
                    issue.end_s  # noqa: B018 - each issue's interval computed here, in the reader, not in the next slot
        except Exception as error:  # noqa: BLE001 - as for the source
            # Without a forecast the window takes persistence: worth a line, not a fallback.
            log.warning(
                "carbon_forecast_read_failed", source=_named(settings.forecast), error=_error_text(error), kept_last_good=self._forecast is not None
            )
        else:
            with self._lock:
                self._forecast = forecast
                self._identities["forecast"] = identity
            if isinstance(read, Signal):
                _warn_if_implausible(read)

    def _as_issued(self, read: Signal | ForecastArchive, now_s: float) -> Signal | ForecastArchive | None:
        """The forecast the windows read, in grams: a local archive as it is (each window reads what
        was issued by its slot's start); a URL's read added to the issues fetched before (issued at
        its issue time, or now without one; one issued after now left out with a warning), those
        that end before now dropped; a local series without issue times as it is."""
        if not _is_url(self.settings.forecast or ""):
            return archive_in_grams(read) if isinstance(read, ForecastArchive) else in_grams(read)
        issues = read.issues if isinstance(read, ForecastArchive) else (IssuedForecast(now_s, read),)
        for issue in issues:
            if issue.issued_s > now_s:
                log.warning(
                    "carbon_forecast_issued_later", source=_named(self.settings.forecast), issued=utc_text(issue.issued_s), now=utc_text(now_s),
                    detail="a forecast issued after now is not read: is the clock or the source's time off?",
                )  # fmt: skip
                continue
            self._fetched[issue.issued_s] = IssuedForecast(issue.issued_s, in_grams(issue.signal))
        self._fetched = {issued_s: issue for issued_s, issue in self._fetched.items() if issue.end_s > now_s}
        if not self._fetched:
            return None
        return ForecastArchive.of(_named(self.settings.forecast), self._fetched.values())

    def seed(
        self, signal: Signal | None, forecast: Signal | ForecastArchive | None, error: str = "", identities: dict[str, tuple | None] | None = None
    ) -> None:
        """Take the start-up read (:func:`check_sources`) as this feed's first: ``signal`` None when it
        failed, with ``error`` saying why; the next read is ``refresh_s`` later. ``identities``: the
        local files' identities taken before that read ("source", "forecast"), so that an unchanged
        file is not parsed again."""
        now_s = self.clock.now_s()
        issued = self._as_issued(forecast, now_s) if forecast is not None else None
        identities = identities or {}
        with self._lock:
            self._tried_s = now_s
            if signal is not None:
                self._signal, self.last_read_s, self.last_error = in_grams(signal), now_s, ""
                self._identities["source"] = identities.get("source")
            else:
                self.last_error = error
            if issued is not None:
                self._forecast = issued
                self._identities["forecast"] = identities.get("forecast")


def _error_text(error: Exception) -> str:
    """The project's errors say what failed; anything else (a connection cut mid-read) is named by its type too."""
    return str(error) if isinstance(error, AutoscalerError) else f"{type(error).__name__}: {error}"


def _warn_if_implausible(signal: Signal) -> None:
    """Log ``carbon_signal_read_as`` for what the reader chose (times with no zone read as UTC), and
    ``carbon_signal_implausible`` for values implausible for the unit (it still decides by them: they
    may be right)."""
    notes = plausibility_notes(signal)
    for note in notes[: len(signal.notes)]:
        log.warning("carbon_signal_read_as", source=_named(signal.source), detail=note)
    for note in notes[len(signal.notes) :]:
        log.warning("carbon_signal_implausible", source=_named(signal.source), detail=note)


def _file_identity(path: str) -> tuple[str, int] | None:
    """(BLAKE2b digest of its bytes, size in bytes) of a regular file, None for anything else (a folder
    of documents is read every time, a missing file fails its read). By content, not modification
    time: a file rewritten within the file system's time step is still seen as changed. About 0.07 s
    for a 41 MB archive."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        digest = hashlib.blake2b(digest_size=16)
        size = 0
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
    except OSError:
        return None
    return (digest.hexdigest(), size)


def _is_url(source: str) -> bool:
    return source.lower().startswith(("http://", "https://"))


def _named(source: str) -> str:
    """A source for a log line: a URL without its query string or user (they may carry a token)."""
    return _shown(source) if _is_url(source) else source


def carbon_feed(settings: CarbonSettings, clock: Clock) -> CarbonFeed | None:
    """The feed of ``settings`` (``[carbon]``), or None when no source is set (carbon-blind)."""
    return CarbonFeed(settings, clock) if settings.source else None


def check_sources(
    settings: CarbonSettings,
    feed: CarbonFeed | None = None,
    load: Callable[..., Signal] = load_signal,
    load_forecast: Callable[..., Signal | ForecastArchive] = load_forecast,
) -> None:
    """Read the ``[carbon]`` source and forecast once, at start-up, so that a mistake in the config is
    a refusal (exit 2), not a daemon that runs carbon-blind for good with a warning every refresh.

    A local file that is missing or not a signal, and a unit that does not fit the signal (a CSV
    without one, a JSON in another unit), raise ConfigError naming the key. A URL that cannot be
    fetched now (no connection, an HTTP error, no answer, a body that is not a signal) only logs
    ``carbon_signal_read_failed``: the source may be down for a while, and the feed falls back slot by
    slot until it answers. ``feed``: given, it takes this read as its first (:meth:`CarbonFeed.seed`),
    so that no slot waits on a read.
    """
    read: dict[str, Signal | ForecastArchive | None] = {"source": None, "forecast": None}
    identities: dict[str, tuple | None] = {}
    error_text = ""
    for key, source in (("source", settings.source), ("forecast", settings.forecast)):
        if not source:
            continue
        identities[key] = None if _is_url(source) else _file_identity(source)
        try:
            reader = load if key == "source" else load_forecast
            read[key] = reader(source, unit=settings.unit, timeout_s=settings.timeout_s, unit_name=UNIT_NAME)
        except ConfigError as error:
            raise ConfigError(f"[carbon] {key}: {error}") from None
        except TraceError as error:
            if "://" not in source:
                raise ConfigError(f"[carbon] {key}: {error}") from None
            if key == "source":
                error_text = _error_text(error)
            log.warning("carbon_signal_read_failed", source=_named(source), error=_error_text(error), kept_last_good=False, at="start")
    if feed is not None:
        feed.seed(read["source"], read["forecast"], error_text, identities)
