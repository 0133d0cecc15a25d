"""Read a cost signal (carbon intensity or price) from a local file or an http(s) URL.

The parsing is ``autoscaler.core.energy.signal.read_signal``; this module only fetches the text, with errors that name
the path or URL. A URL's query string is left out of messages (it may carry an API token).

A fetch is bounded as a whole: ``timeout_s`` covers connecting, the headers and the whole body (each
socket wait gets only what is left of it, so a source that sends a byte a second cannot stretch it),
and a body past ``max_bytes`` is cut off instead of being read into memory.
"""

from __future__ import annotations

import ssl
import time
import urllib.parse
from http.client import HTTPConnection, HTTPException, HTTPSConnection
from pathlib import Path

from autoscaler.adapters.files import require_regular_file
from autoscaler.core.budget import format_bytes
from autoscaler.core.energy.forecast_archive import ForecastArchive, read_forecast, read_forecast_documents
from autoscaler.core.energy.signal import Signal, read_signal
from autoscaler.core.errors import ConfigError, TraceError

MAX_SIGNAL_BYTES = 256 * 2**20
"""The largest answer read from a signal URL: 256 MiB. Ten years of 1-minute CSV points is about
131 MB; an answer larger than this is a wrong URL or a source that never stops."""

MAX_REDIRECTS = 5
"""Redirects (301, 302, 303, 307, 308) followed before a fetch is refused, as browsers bound them."""

CHUNK_BYTES = 1 << 16

_REDIRECTS = (301, 302, 303, 307, 308)


def _shown(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]  # never a user:password@
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", "")) + ("?..." if parts.query else "")


def _connection(parts: urllib.parse.SplitResult, name: str, timeout_s: float) -> HTTPConnection:
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"signal source {name}: the port is not a number from 0 to 65535") from None
    if not parts.hostname:
        raise ConfigError(f"signal source {name}: the URL has no host")
    if parts.scheme == "https":
        return HTTPSConnection(parts.hostname, port, timeout=timeout_s, context=ssl.create_default_context())
    return HTTPConnection(parts.hostname, port, timeout=timeout_s)


def _fetch(url: str, name: str, timeout_s: float, max_bytes: int = MAX_SIGNAL_BYTES) -> bytes:
    """GET ``url`` within ``timeout_s`` seconds in all (monotonic clock) and at most ``max_bytes``,
    following up to MAX_REDIRECTS redirects. Raises TraceError naming ``name`` for an HTTP error
    status, no complete answer in time, an answer too large, or a connection that fails."""
    deadline = time.monotonic() + timeout_s
    received = 0

    def left_s() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        return remaining

    try:
        for _ in range(MAX_REDIRECTS + 1):
            parts = urllib.parse.urlsplit(url)
            connection = _connection(parts, name, left_s())
            try:
                connection.connect()
                sock = connection.sock  # kept: getresponse drops the connection's reference when the server closes
                target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
                connection.request("GET", target, headers={"Accept": "application/json, text/csv;q=0.9, */*;q=0.5", "User-Agent": "deferral-autoscaler"})
                sock.settimeout(left_s())
                response = connection.getresponse()
                if response.status in _REDIRECTS and response.getheader("Location"):
                    url = urllib.parse.urljoin(url, response.getheader("Location"))
                    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                        raise TraceError(name, None, f"redirected to a URL that is not http(s): {_shown(url)}")
                    continue
                if response.status >= 400:
                    raise TraceError(name, None, f"HTTP {response.status} {response.reason}")
                length = response.getheader("Content-Length")
                if length is not None and length.isdigit() and int(length) > max_bytes:
                    raise TraceError(name, None, _too_large(max_bytes))
                chunks: list[bytes] = []
                while True:
                    sock.settimeout(left_s())
                    # read1: what one socket read brings, so the deadline is looked at between reads.
                    chunk = response.read1(CHUNK_BYTES)
                    if not chunk:
                        return b"".join(chunks)
                    received += len(chunk)
                    if received > max_bytes:
                        raise TraceError(name, None, _too_large(max_bytes))
                    chunks.append(chunk)
            finally:
                connection.close()
        raise TraceError(name, None, f"more than {MAX_REDIRECTS} redirects")
    except TimeoutError:
        if not received:
            raise TraceError(name, None, f"no answer within {timeout_s:g} s") from None
        raise TraceError(name, None, f"no complete answer within {timeout_s:g} s ({received:,} byte{'' if received == 1 else 's'} read)") from None
    except (HTTPException, ssl.SSLError) as exc:
        raise TraceError(name, None, f"cannot fetch: {type(exc).__name__}: {exc}") from None
    except OSError as exc:
        raise TraceError(name, None, f"cannot fetch: {exc.strerror or exc}") from None


def _too_large(max_bytes: int) -> str:
    return f"the answer is larger than {format_bytes(max_bytes)} (max_bytes); a signal is a few MB at most: is this the right URL?"


def local_bytes(path_or_url: str | None) -> int:
    """The size in bytes of a local signal file (a folder of forecasts: its .json files), for the memory budget before it is read; 0 for
    None, a URL, a word such as ``persistence``, or a path that cannot be read (reading it says why)."""
    if not path_or_url or "://" in path_or_url:
        return 0
    try:
        path = Path(path_or_url)
        if path.is_dir():  # a folder of forecast documents: its .json files
            return sum(item.stat().st_size for item in path.iterdir() if item.suffix.lower() == ".json" and item.is_file())
        return path.stat().st_size if path.is_file() else 0
    except (OSError, ValueError):
        return 0


def load_signal(
    path_or_url: str,
    unit: str | None = None,
    timeout_s: float = 10,
    max_bytes: int = MAX_SIGNAL_BYTES,
    unit_name: str = "the unit",
    flag: str = "signal source",
) -> Signal:
    """Read a signal from a local path or an ``http://`` / ``https://`` URL and parse it with
    ``read_signal`` (``unit`` is needed for CSV). ``timeout_s``: seconds the whole fetch of a URL may
    take (connecting, headers and body); ``max_bytes``: the largest body read from a URL;
    ``unit_name``: where ``unit`` comes from, for messages (``--carbon-unit``, ``[carbon] unit``);
    ``flag``: where ``path_or_url`` comes from (``--carbon``, ``[carbon] source``).

    Raises ConfigError for another URL scheme, a URL with a user and password, or a timeout_s <= 0;
    ConfigError naming ``flag`` and the path for a FIFO or a device (never opened: reading a FIFO
    blocks); TraceError naming the path or URL when the file is missing or unreadable, the server answers with
    an HTTP error status, the answer is not complete within ``timeout_s`` or larger than
    ``max_bytes``, the bytes are not UTF-8, or the text is not a valid signal.
    """
    name, text = _read_text(path_or_url, timeout_s, max_bytes, flag)
    return read_signal(text, name, unit, unit_name)


def load_forecast(
    path_or_url: str,
    unit: str | None = None,
    timeout_s: float = 10,
    max_bytes: int = MAX_SIGNAL_BYTES,
    unit_name: str = "the unit",
    flag: str = "forecast source",
) -> Signal | ForecastArchive:
    """Read a forecast from a local path, a folder or an http(s) URL: a
    :class:`~autoscaler.core.energy.forecast_archive.ForecastArchive` when it carries issue times (a folder of
    provider documents, one issue per ``.json`` file; JSON lines; CSV ``issued,time,value``; one
    provider document with its issue time), else a plain Signal
    (:func:`autoscaler.core.energy.forecast_archive.read_forecast` tells them apart). Arguments as ``load_signal``.

    Raises as ``load_signal``; TraceError naming the folder when it holds no ``.json`` file, and
    naming the file (and line or item) for a document that is not a forecast with its issue time.
    """
    if isinstance(path_or_url, str) and "://" not in path_or_url and Path(path_or_url).is_dir():
        names = sorted(path for path in Path(path_or_url).iterdir() if path.suffix.lower() == ".json" and not path.name.startswith("."))
        if not names:
            raise TraceError(path_or_url, None, "a folder of forecasts with no .json file: expected one provider forecast document per issue")
        return read_forecast_documents((_read_text(str(path), timeout_s, max_bytes, flag) for path in names), path_or_url)
    name, text = _read_text(path_or_url, timeout_s, max_bytes, flag)
    return read_forecast(text, name, unit, unit_name)


def _read_text(path_or_url: str, timeout_s: float, max_bytes: int, flag: str) -> tuple[str, str]:
    """(the name messages give it, the UTF-8 text) of a local file or an http(s) URL; raises as ``load_signal``."""
    if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
        raise ConfigError(f"signal timeout_s must be a number > 0, got {timeout_s!r}")
    if not isinstance(path_or_url, str) or not path_or_url.strip():
        raise ConfigError(f"signal source: expected a file path or an http(s) URL, got {path_or_url!r}")
    try:
        scheme = urllib.parse.urlsplit(path_or_url).scheme.lower()
    except ValueError as exc:
        raise ConfigError(f"signal source {path_or_url!r}: not a valid URL ({exc}); expected a file path or an http(s) URL") from None
    if scheme in ("http", "https"):
        name = _shown(path_or_url)
        if "@" in urllib.parse.urlsplit(path_or_url).netloc:
            raise ConfigError(
                f"signal source {name}: a user:password@ in the URL is not sent; give the source's token the way its API "
                "takes it (most take it in the query string, which messages leave out)"
            )
        raw = _fetch(path_or_url, name, timeout_s, max_bytes)
    elif "://" in path_or_url:
        raise ConfigError(f"signal source {path_or_url!r}: only a local path or an http(s) URL is read, not {scheme}://")
    else:
        name = path_or_url
        require_regular_file(path_or_url, flag)
        try:
            raw = Path(path_or_url).read_bytes()
        except FileNotFoundError:
            raise TraceError(name, None, "no such file") from None
        except IsADirectoryError:
            raise TraceError(name, None, "is a folder, not a file") from None
        except OSError as exc:
            raise TraceError(name, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TraceError(name, None, f"not UTF-8 text (byte {exc.start})") from None
    del raw  # a long series is 100 MB or more: not held twice while it is parsed
    return name, text
