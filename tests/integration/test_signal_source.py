"""load_signal against a real HTTP server on 127.0.0.1 and real files on disk."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from local_http import serving

from autoscaler.adapters.signal_source import load_forecast, load_signal
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
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("time,value\n2026-01-01T00:00:00,1\n2026-01-01T00:30:00Z,1\n")
    with pytest.raises(TraceError, match=rf"^{re.escape(str(mixed))}:3: .*has a zone but line 2's time has none"):
        load_signal(str(mixed), unit="$/kWh")
    naive = tmp_path / "naive.csv"
    naive.write_text("time,value\n2026-01-01T00:00:00,1\n2026-01-01T00:30:00,1\n")
    assert load_signal(str(naive), unit="$/kWh").notes == (f"{naive}: times carry no zone: read as UTC",)


def test_other_schemes_and_bad_timeout_are_refused():
    with pytest.raises(ConfigError, match=r"not ftp://"):
        load_signal("ftp://example.org/x.csv")
    with pytest.raises(ConfigError, match="timeout_s"):
        load_signal("x.csv", timeout_s=0)


# -- a fetch is bounded as a whole, in time and in bytes (issue 20, finding 8) ---------------------------


class _Misbehaving:
    """A source that sends its headers, then a byte every half second (``/trickle``) or bytes without end
    (``/endless``).

    Each stops by itself after a while (33 s, 64 MiB), so a reader that does not bound the whole fetch
    fails the test instead of hanging it. ``sent``: the bytes of body written so far; ``gone``: set when
    the client closed the connection."""

    def __init__(self) -> None:
        self.sent = 0
        self.gone = threading.Event()


@pytest.fixture()
def misbehaving() -> Iterator[tuple[str, _Misbehaving]]:
    state = _Misbehaving()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/csv")
            if self.path.startswith("/trickle"):
                self.send_header("Content-Length", "1000")
            self.end_headers()
            try:
                if self.path.startswith("/trickle"):
                    for byte in b"time,value\n" * 6:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        state.sent += 1
                        if state.gone.wait(timeout=0.5):
                            return
                else:
                    chunk = b"2026-01-01T00:00:00Z,1\n" * 4096
                    while state.sent < 64 * 2**20:
                        self.wfile.write(chunk)
                        state.sent += len(chunk)
            except OSError:
                state.gone.set()  # the client closed the connection

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as base:
        try:
            yield base, state
        finally:
            state.gone.set()


def test_a_source_that_trickles_a_byte_a_second_is_cut_at_timeout_s_for_the_whole_fetch(misbehaving):
    base, state = misbehaving
    with pytest.raises(TraceError, match=r"/trickle: no complete answer within 2 s \(\d+ bytes? read\)$"):
        load_signal(f"{base}/trickle", unit="gCO2eq/kWh", timeout_s=2)
    # Each byte comes well within the timeout, so a per-read timeout never fires; the bound is on the fetch.
    assert state.sent < 6 * 11


def test_a_source_with_an_endless_body_is_cut_at_max_bytes(misbehaving):
    base, state = misbehaving
    with pytest.raises(TraceError, match=r"/endless: the answer is larger than 1 MiB \(max_bytes\); a signal is a few MB at most"):
        load_signal(f"{base}/endless", unit="gCO2eq/kWh", timeout_s=30, max_bytes=2**20)
    assert state.gone.wait(timeout=30)  # the connection was closed, not read to the end
    assert state.sent < 64 * 2**20


def test_a_url_with_a_user_and_password_is_refused_by_name_without_the_password():
    with pytest.raises(ConfigError) as info:
        load_signal("http://user:s3cret@127.0.0.1:9/carbon.csv", unit="gCO2eq/kWh")
    message = str(info.value)
    assert "user:password@" in message and "http://127.0.0.1:9/carbon.csv" in message
    assert "s3cret" not in message


# -- forecasts as issued ---------------------------------------------------------------------------


def electricity_maps_forecast(updated_at: str, value: float) -> str:
    points = [{"datetime": f"2026-03-29T0{h}:00:00.000Z", "carbonIntensity": value} for h in range(1, 4)]
    return json.dumps({"zone": "DE", "forecast": points, "updatedAt": updated_at})


def test_a_folder_of_forecasts_is_an_archive_sorted_by_issue_time(tmp_path):
    from autoscaler.core.energy.forecast_archive import ForecastArchive

    folder = tmp_path / "issues"
    folder.mkdir()
    (folder / "a.json").write_text(electricity_maps_forecast("2026-03-29T00:50:00Z", 300))
    (folder / "b.json").write_text(electricity_maps_forecast("2026-03-29T00:10:00Z", 200))
    (folder / "notes.txt").write_text("not read")
    archive = load_forecast(str(folder))
    assert isinstance(archive, ForecastArchive) and archive.source == str(folder)
    assert [issue.signal.source for issue in archive.issues] == [str(folder / "b.json"), str(folder / "a.json")]
    assert [issue.signal.values[0] for issue in archive.issues] == [200.0, 300.0]
    (folder / "c.json").write_text(json.dumps({"zone": "DE", "forecast": []}))
    with pytest.raises(TraceError, match=rf"^{re.escape(str(folder / 'c.json'))}: updatedAt: expected the time the forecast was issued"):
        load_forecast(str(folder))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceError, match=rf"^{re.escape(str(empty))}: a folder of forecasts with no \.json file"):
        load_forecast(str(empty))


def test_json_lines_over_http_are_an_archive_and_a_plain_series_stays_a_series(site):
    from autoscaler.core.energy.forecast_archive import ForecastArchive
    from autoscaler.core.energy.signal import Signal

    base, state = site
    state.bodies["/issues.jsonl"] = (electricity_maps_forecast("2026-03-29T00:50:00Z", 3) + "\n" + electricity_maps_forecast("2026-03-29T00:10:00Z", 2)).encode()
    archive = load_forecast(f"{base}/issues.jsonl?token=t")
    assert isinstance(archive, ForecastArchive) and [issue.signal.values[0] for issue in archive.issues] == [2.0, 3.0]
    assert "token" not in archive.source
    assert isinstance(load_forecast(f"{base}/price.csv", unit="$/kWh"), Signal)
