"""load_signal against a real HTTP server on 127.0.0.1 and real files on disk."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from local_http import serving

from autoscaler.adapters.signal_source import load_signal
from autoscaler.core.errors import ConfigError, TraceError

UK = {
    "data": [
        {"from": "2026-03-29T00:00Z", "to": "2026-03-29T00:30Z", "intensity": {"forecast": 150, "actual": 140}},
        {"from": "2026-03-29T00:30Z", "to": "2026-03-29T01:00Z", "intensity": {"forecast": 160, "actual": None}},
    ]
}
CSV = "time,value\n2026-03-29T01:00:00+01:00,0.25\n2026-03-29T03:00:00+02:00,0.5\n"


class Site:
    """What the handler serves: path -> body; ``release`` holds back the answer to /slow."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {"/uk.json": json.dumps(UK).encode(), "/price.csv": CSV.encode(), "/latin1.csv": "time,value\n€".encode("cp1252")}
        self.release = threading.Event()
        self.paths: list[str] = []


@pytest.fixture()
def site() -> Iterator[tuple[str, Site]]:
    state = Site()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            state.paths.append(self.path)
            path = self.path.split("?", 1)[0]
            if path == "/slow":
                state.release.wait(timeout=60)
                body = json.dumps(UK).encode()
            elif path in state.bodies:
                body = state.bodies[path]
            else:
                self.send_error(404, "Not Found")
                return
            try:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up waiting

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as base:
        try:
            yield base, state
        finally:
            state.release.set()  # a handler held back on /slow answers, so the server can stop


def test_json_over_http(site):
    base, _ = site
    signal = load_signal(f"{base}/uk.json")
    assert signal.unit == "gCO2eq/kWh"
    assert signal.values.tolist() == [140, 160]
    assert signal.source == f"{base}/uk.json"


def test_csv_over_http_needs_and_uses_the_unit(site):
    base, _ = site
    signal = load_signal(f"{base}/price.csv", unit="$/kWh")
    assert signal.values.tolist() == [0.25, 0.5]
    # 01:00+01:00 and 03:00+02:00 are 00:00Z and 01:00Z, an hour apart across the spring change.
    assert signal.times_s[1] - signal.times_s[0] == 3600
    with pytest.raises(ConfigError, match="needs its unit"):
        load_signal(f"{base}/price.csv")


def test_http_404_names_the_url_without_its_query(site):
    base, state = site
    with pytest.raises(TraceError) as info:
        load_signal(f"{base}/missing.json?token=s3cret&region=GB")
    message = str(info.value)
    assert message == f"{base}/missing.json?...: HTTP 404 Not Found"
    assert "s3cret" not in message
    assert state.paths == ["/missing.json?token=s3cret&region=GB"]


def test_timeout_names_the_url(site):
    base, state = site
    with pytest.raises(TraceError, match=r"/slow: no answer within 0\.2 s$"):
        load_signal(f"{base}/slow", timeout_s=0.2)
    state.release.set()


def test_not_utf8_over_http(site):
    base, _ = site
    with pytest.raises(TraceError, match=r"/latin1\.csv: not UTF-8 text \(byte 11\)"):
        load_signal(f"{base}/latin1.csv", unit="$/kWh")


def test_nothing_listening_names_the_url():
    # Port 9 (discard) on 127.0.0.1: nothing listens there on a test machine, so the connection is refused.
    with pytest.raises(TraceError, match=r"^http://127\.0\.0\.1:9/x\.json: cannot fetch"):
        load_signal("http://127.0.0.1:9/x.json", timeout_s=5)


def test_local_file(tmp_path):
    path = tmp_path / "uk.json"
    path.write_text(json.dumps(UK), encoding="utf-8")
    signal = load_signal(str(path))
    assert signal.values.tolist() == [140, 160]
    assert signal.source == str(path)


def test_local_file_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "price.csv"
    path.write_bytes(b"\xef\xbb\xbf" + CSV.encode())
    assert load_signal(str(path), unit="$/kWh").values.tolist() == [0.25, 0.5]


def test_local_file_errors_name_the_path(tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(TraceError, match=rf"^{re.escape(str(missing))}: no such file$"):
        load_signal(str(missing), unit="$/kWh")
    with pytest.raises(TraceError, match=rf"^{re.escape(str(tmp_path))}: is a folder"):
        load_signal(str(tmp_path), unit="$/kWh")
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"time,value\n\xff\n")
    with pytest.raises(TraceError, match=rf"^{re.escape(str(bad))}: not UTF-8 text"):
        load_signal(str(bad), unit="$/kWh")
    naive = tmp_path / "naive.csv"
    naive.write_text("time,value\n2026-01-01T00:00:00,1\n")
    with pytest.raises(TraceError, match=rf"^{re.escape(str(naive))}:2: .*no zone"):
        load_signal(str(naive), unit="$/kWh")


def test_other_schemes_and_bad_timeout_are_refused():
    with pytest.raises(ConfigError, match=r"not ftp://"):
        load_signal("ftp://example.org/x.csv")
    with pytest.raises(ConfigError, match="timeout_s"):
        load_signal("x.csv", timeout_s=0)
