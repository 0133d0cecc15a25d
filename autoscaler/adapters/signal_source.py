"""Read a cost signal (carbon intensity or price) from a local file or an http(s) URL.

The parsing is ``energy.signal.read_signal``; this module only fetches the text, with errors that name
the path or URL. A URL's query string is left out of messages (it may carry an API token).
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from autoscaler.core.errors import ConfigError, TraceError
from energy.signal import Signal, read_signal


def _shown(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]  # never a user:password@
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", "")) + ("?..." if parts.query else "")


def _fetch(url: str, name: str, timeout_s: float) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "application/json, text/csv;q=0.9, */*;q=0.5"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        raise TraceError(name, None, f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise TraceError(name, None, f"no answer within {timeout_s:g} s") from None
        raise TraceError(name, None, f"cannot fetch: {exc.reason}") from None
    except TimeoutError:
        raise TraceError(name, None, f"no answer within {timeout_s:g} s") from None
    except OSError as exc:
        raise TraceError(name, None, f"cannot fetch: {exc.strerror or exc}") from None


def load_signal(path_or_url: str, unit: str | None = None, timeout_s: float = 10) -> Signal:
    """Read a signal from a local path or an ``http://`` / ``https://`` URL and parse it with
    ``read_signal`` (``unit`` is needed for CSV). ``timeout_s``: seconds to wait for the server to
    connect and for each read.

    Raises ConfigError for another URL scheme or a timeout_s <= 0; TraceError naming the path or URL
    when the file is missing or unreadable, the server answers with an HTTP error status, does not
    answer within ``timeout_s``, the bytes are not UTF-8, or the text is not a valid signal.
    """
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
        raw = _fetch(path_or_url, name, timeout_s)
    elif "://" in path_or_url:
        raise ConfigError(f"signal source {path_or_url!r}: only a local path or an http(s) URL is read, not {scheme}://")
    else:
        name = path_or_url
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
    return read_signal(text, name, unit)
