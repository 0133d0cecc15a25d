"""The carbon feed: per-slot windows worked by hand, and the feed against a real HTTP server and real files."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler

import numpy as np
import pytest
from local_http import serving

from autoscaler.adapters import carbon_feed as carbon_feed_module
from autoscaler.adapters.carbon_feed import CarbonFeed, carbon_feed
from autoscaler.adapters.fakes import SimulatedClock
from autoscaler.adapters.signal_source import load_forecast, load_signal
from autoscaler.app.config import CarbonSettings
from autoscaler.core.energy.signal import Signal, with_history
from autoscaler.core.errors import ConfigError, TraceError
from autoscaler.core.signal_slots import covered_means, slot_window

HOUR_S = 3600.0
T0 = datetime(2026, 6, 1, 12, tzinfo=timezone.utc).timestamp()  # a slot boundary on every grid used here


def iso(time_s: float) -> str:
    return datetime.fromtimestamp(time_s, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def csv_text(start_s: float, step_s: float, values) -> str:
    return "time,value\n" + "".join(f"{iso(start_s + i * step_s)},{v:g}\n" for i, v in enumerate(values))


def hourly(start_s: float, values, unit: str = "gCO2eq/kWh", source: str = "s.csv") -> Signal:
    return Signal(start_s + HOUR_S * np.arange(len(values)), np.array(values, dtype=float), unit, source)


# -- the pure window -------------------------------------------------------------------------------


def test_a_signal_that_repeats_every_day_is_forecast_as_yesterday_with_no_band():
    # Hourly slots (P = 24), D = 2: slots 0..6. Five days of the same day, 100 + hour, up to now
    # (slot 0, hour 23: 123). Yesterday's values (and yesterday's with today's offset, 0) have made no
    # error, the latest value and the day's mean have: the blend is the same hour a day earlier,
    # 100 + (k - 1) for slot k = 1..6, and its band is nil.
    actual = hourly(T0 - 119 * HOUR_S, [100.0 + i % 24 for i in range(120)])
    window = slot_window(actual, None, T0, HOUR_S, 2)
    assert window.values.tolist() == pytest.approx([123.0, 100.0, 101.0, 102.0, 103.0, 104.0, 105.0], rel=1e-6)
    assert window.band.tolist() == pytest.approx([0.0] * 7, abs=1e-3)
    assert window.value_now == 123.0 and window.unit == "gCO2eq/kWh"
    assert window.reference == pytest.approx(111.5)  # mean of 100 .. 123
    assert (window.forecast_slots, window.persisted_slots) == (0, 6)


def test_a_day_of_history_is_too_little_to_score_yesterday_so_the_blend_is_the_value_now():
    # One day only: no issue time has a known target a day after a known value, so yesterday is not scored.
    actual = hourly(T0 - 23 * HOUR_S, [100.0 + i for i in range(24)])
    window = slot_window(actual, None, T0, HOUR_S, 2)
    assert window.values.tolist() == [123.0] * 7
    assert window.reference == pytest.approx(111.5)


def test_actual_values_then_the_forecast_then_the_blend():
    # The series also covers slot 1 (77, then its one-hour step); the forecast covers slots 1-2.
    days = [100.0 + i % 24 for i in range(120)]
    actual = hourly(T0 - 119 * HOUR_S, days + [77.0])
    forecast = hourly(T0 + HOUR_S, [50.0, 60.0], source="f.csv")
    window = slot_window(actual, forecast, T0, HOUR_S, 2)
    assert window.values.tolist() == pytest.approx([123.0, 77.0, 60.0, 102.0, 103.0, 104.0, 105.0], rel=1e-6)
    assert (window.forecast_slots, window.persisted_slots) == (1, 4)


def test_persistence_not_known_takes_the_value_now_and_the_mean_is_of_what_is_known():
    actual = hourly(T0 - HOUR_S, [300.0, 200.0])  # slots -1 and 0 only
    window = slot_window(actual, None, T0, HOUR_S, 2)
    assert window.values.tolist() == [200.0] * 7
    assert window.reference == pytest.approx(250.0)


def test_half_hour_values_average_into_hourly_slots_and_a_hole_is_nan():
    signal = Signal(T0 + 1800.0 * np.array([0, 1, 2, 3, 6, 7]), np.array([100.0, 200.0, 300.0, 500.0, 50.0, 70.0]), "gCO2eq/kWh", "s.csv")
    means = covered_means(signal, T0, HOUR_S, 4)
    assert means[0] == 150.0
    # 1.5 h from the point at 01:30 to the next (3 x the median 30 min): a gap, in both slots it touches.
    assert np.isnan(means[1]) and np.isnan(means[2])
    assert means[3] == 60.0


def test_a_signal_that_does_not_cover_now_is_refused_naming_the_slot():
    actual = hourly(T0 - 30 * HOUR_S, [100.0] * 5)
    with pytest.raises(TraceError, match=r"does not cover the slot decided, 2026-06-01T12:00:00Z to 2026-06-01T13:00:00Z"):
        slot_window(actual, None, T0, HOUR_S, 1)
    with pytest.raises(ConfigError, match=r"the forecast is in \$/kWh"):
        slot_window(hourly(T0, [1.0, 2.0]), hourly(T0, [1.0, 2.0], unit="$/kWh"), T0, HOUR_S, 1)


# -- the feed against a server and files ----------------------------------------------------------------


class _Served:
    """What the test server answers: a status and a body the test changes, and the GETs it saw."""

    def __init__(self) -> None:
        self.status = 200
        self.body = ""
        self.hits = 0


def _answering(served: _Served, content_type: str) -> type[BaseHTTPRequestHandler]:
    """A handler that answers every GET with ``served``'s status and body, counting the GETs."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            served.hits += 1
            body = served.body.encode() if served.status == 200 else b"server error"
            self.send_response(served.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args):
            pass

    return Handler


@pytest.fixture()
def server():
    served = _Served()
    with serving(_answering(served, "text/csv")) as base:
        yield served, f"{base}/carbon.csv?token=secret"


def settled(feed: CarbonFeed, now_s: float, slot_s: float):
    """The feed's window once a read the slot started in the background has finished: what the next
    slot sees (the slot itself goes on with the last good read)."""
    feed.window(now_s, slot_s, 1)
    assert feed.join(timeout_s=60)
    return feed.window(now_s, slot_s, 1)


def test_the_feed_reads_at_most_every_refresh_and_keeps_the_last_good_read_until_stale(server):
    served, url = server
    slot_s = 300.0
    # Two days of 5-minute points: 400 g all yesterday, 200 g from now on, so any window is covered.
    served.body = csv_text(T0 - 86_400.0, slot_s, [400.0] * 288 + [200.0] * 288)
    clock = SimulatedClock(T0)
    settings = CarbonSettings(source=url, unit="gCO2eq/kWh", refresh_s=600, max_staleness_s=1800, timeout_s=5)
    feed = CarbonFeed(settings, clock)
    window = settled(feed, clock.now_s(), slot_s)
    assert window.values.tolist() == [200.0] * 4 and served.hits == 1
    assert window.reference == pytest.approx((287 * 400.0 + 200.0) / 288)  # the last day: 287 slots at 400, now at 200
    assert "token" not in window.source
    served.body = csv_text(T0 - 86_400.0, slot_s, [400.0] * 288 + [100.0] * 288)
    clock.advance(slot_s)
    assert settled(feed, clock.now_s(), slot_s).value_now == 200.0 and served.hits == 1  # within refresh_s: not read again
    clock.advance(slot_s)
    assert settled(feed, clock.now_s(), slot_s).value_now == 100.0 and served.hits == 2  # T0 + 600: read again
    served.status = 500
    seen = []
    for _ in range(6):  # T0 + 900 .. T0 + 2400: the last good read (T0 + 600) is at most 1800 s old
        clock.advance(slot_s)
        window = settled(feed, clock.now_s(), slot_s)
        seen.append(None if window is None else window.value_now)
    assert seen == [100.0] * 6
    assert "HTTP 500" in feed.last_error and "secret" not in feed.last_error
    clock.advance(slot_s)  # T0 + 2700: 2100 s old
    assert settled(feed, clock.now_s(), slot_s) is None
    assert feed.fallback.reason == "stale"
    assert "35 min old, more than max_staleness_s = 1,800 s" in feed.fallback.detail
    assert "HTTP 500" in feed.fallback.detail
    assert served.hits == 2 + 3  # tried at T0 + 1200, 1800 and 2400: refresh_s after each try, failed or not
    served.status = 200
    clock.advance(slot_s)  # T0 + 3000: 600 s after the last try
    assert settled(feed, clock.now_s(), slot_s).value_now == 100.0 and feed.fallback is None


def test_a_file_that_never_existed_is_unreadable_from_the_first_slot(tmp_path):
    clock = SimulatedClock(T0)
    feed = carbon_feed(CarbonSettings(source=str(tmp_path / "none.csv"), unit="gCO2eq/kWh"), clock)
    assert feed.window(T0, 300.0, 2) is None
    assert feed.fallback.reason == "unreadable"
    assert "none.csv" in feed.fallback.detail and "no such file" in feed.fallback.detail
    assert carbon_feed(CarbonSettings(), clock) is None


def test_a_file_in_lbs_per_mwh_is_read_in_grams_and_one_that_ends_before_now_does_not_cover(tmp_path):
    path = tmp_path / "watt.csv"
    path.write_text(csv_text(T0 - HOUR_S, 300.0, [1000.0] * 24))
    clock = SimulatedClock(T0)
    feed = CarbonFeed(CarbonSettings(source=str(path), unit="lbs/MWh"), clock)
    window = feed.window(T0 + 10.0, 300.0, 1)
    assert window.unit == "gCO2eq/kWh" and window.value_now == pytest.approx(453.59237)
    clock.advance(86_400.0)  # read again; the file ends 23 h before the slot
    assert feed.window(clock.now_s(), 300.0, 1) is None
    assert feed.fallback.reason == "not_covering" and "does not cover the slot decided" in feed.fallback.detail


def test_a_forecast_source_fills_the_slots_ahead(tmp_path):
    actual, forecast = tmp_path / "actual.csv", tmp_path / "forecast.csv"
    actual.write_text(csv_text(T0 - 2 * HOUR_S, HOUR_S, [300.0, 300.0, 250.0]))
    forecast.write_text(csv_text(T0 + HOUR_S, HOUR_S, [90.0, 80.0]))
    feed = CarbonFeed(CarbonSettings(source=str(actual), forecast=str(forecast), unit="gCO2eq/kWh"), SimulatedClock(T0))
    window = feed.window(T0, HOUR_S, 2)
    # Slots 1-2 forecast; 3-6 persistence from slots -21 .. -18, not known: the value now.
    assert window.values.tolist() == [250.0, 90.0, 80.0, 250.0, 250.0, 250.0, 250.0]
    assert (window.forecast_slots, window.persisted_slots) == (2, 4)


def test_a_refresh_of_a_url_runs_off_the_slot_and_the_slot_keeps_the_last_good_read(server):
    served, url = server
    served.body = csv_text(T0 - 86_400.0, 300.0, [400.0] * 288 + [200.0] * 288)
    clock = SimulatedClock(T0)
    feed = CarbonFeed(CarbonSettings(source=url, unit="gCO2eq/kWh", refresh_s=600, max_staleness_s=1800, timeout_s=5), clock)
    assert feed.window(T0, 300.0, 1).value_now == 200.0  # the first read, in the slot: there is nothing else yet
    served.body = csv_text(T0 - 86_400.0, 300.0, [400.0] * 288 + [100.0] * 288)
    clock.advance(600.0)
    # The slot that starts the refresh does not wait for it (the daemon's test holds such a read);
    # once it has finished, the next slot sees it.
    assert feed.window(clock.now_s(), 300.0, 1) is not None
    assert feed.join(timeout_s=60)
    assert feed.window(clock.now_s(), 300.0, 1).value_now == 100.0 and served.hits == 2


def test_the_daemon_warns_of_a_signal_implausible_for_its_unit(tmp_path):
    import structlog

    path = tmp_path / "prices.csv"
    path.write_text(csv_text(T0 - HOUR_S, 300.0, [0.05, 0.12, 0.2] * 8))
    with structlog.testing.capture_logs() as logs:
        feed = CarbonFeed(CarbonSettings(source=str(path), unit="gCO2eq/kWh"), SimulatedClock(T0))
        assert feed.window(T0, 300.0, 1) is not None  # a warning, not a refusal: the values may be right
    warned = [line for line in logs if line["event"] == "carbon_signal_implausible"]
    assert len(warned) == 1 and "0.05 to 0.2 gCO2eq/kWh" in warned[0]["detail"]


def test_the_daemon_names_carbon_unit_for_a_csv_source_without_one(tmp_path):
    from autoscaler.adapters.carbon_feed import check_sources

    path = tmp_path / "grid.csv"
    path.write_text(csv_text(T0, HOUR_S, [300.0, 310.0]))
    with pytest.raises(ConfigError, match=r"^\[carbon\] source: .*a CSV signal needs its unit: give \[carbon\] unit"):
        check_sources(CarbonSettings(source=str(path)))


def test_a_forecast_of_one_point_in_the_config_is_refused_at_start_naming_the_key(tmp_path):
    from autoscaler.adapters.carbon_feed import check_sources

    source, forecast = tmp_path / "grid.csv", tmp_path / "issued.csv"
    source.write_text(csv_text(T0, HOUR_S, [300.0, 310.0]))
    forecast.write_text(f"issued,time,value\n{iso(T0)},{iso(T0 + HOUR_S)},290\n")
    with pytest.raises(ConfigError) as info:
        check_sources(CarbonSettings(source=str(source), forecast=str(forecast), unit="gCO2eq/kWh"))
    assert str(info.value).startswith(f"[carbon] forecast: {forecast}: one forecast point; expected at least 2")


@pytest.mark.parametrize("fields", [{"unit": "gCO2eq/kWh"}, {"refresh_s": 600}, {"timeout_s": 5}, {"max_staleness_s": 9000}])
def test_a_carbon_section_with_fields_but_no_source_is_a_config_error(fields):
    # Without a source the daemon would run carbon-blind, the fields doing nothing.
    with pytest.raises(ValueError, match=r"\[carbon\] has .* but no source"):
        CarbonSettings(**fields)
    assert CarbonSettings().source is None  # an empty section (or none) is carbon-blind, as before
    assert CarbonSettings(refresh_s=1800.0, timeout_s=10.0).source is None  # and so are the defaults written out


# -- forecasts as issued ---------------------------------------------------------------------------


def long_csv(issues) -> str:
    """CSV issued,time,value: ``issues`` is (issued_s, first_s, values) with hourly values."""
    rows = ["issued,time,value"]
    for issued_s, first_s, values in issues:
        rows.extend(f"{iso(issued_s)},{iso(first_s + i * HOUR_S)},{v:g}" for i, v in enumerate(values))
    return "\n".join(rows) + "\n"


def test_a_forecast_archive_gives_each_slot_only_what_was_issued_by_its_start(tmp_path):
    actual, archive = tmp_path / "actual.csv", tmp_path / "issued.csv"
    actual.write_text(csv_text(T0 - 23 * HOUR_S, HOUR_S, [100.0] * 23 + [250.0, 260.0]))  # to T0 + 2 h
    # Issued an hour before T0: 90 from T0 on. Issued at T0 + 1 h: 7 (no other source has it).
    archive.write_text(long_csv([(T0 - HOUR_S, T0, [90.0] * 12), (T0 + HOUR_S, T0 + HOUR_S, [7.0] * 12)]))
    clock = SimulatedClock(T0)
    feed = CarbonFeed(CarbonSettings(source=str(actual), forecast=str(archive), unit="gCO2eq/kWh", refresh_s=60), clock)
    window = feed.window(T0, HOUR_S, 2)
    # Slot 1 is actual (260); slots 2-6 the first issue's 90: the second is issued after T0.
    assert window.values.tolist() == [250.0, 260.0, 90.0, 90.0, 90.0, 90.0, 90.0]
    assert (window.forecast_slots, window.persisted_slots) == (5, 0)
    clock.advance(HOUR_S)
    window = feed.window(T0 + HOUR_S, HOUR_S, 2)
    assert window.values.tolist() == [260.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0]


def test_slot_window_reads_the_newest_issue_by_the_slot_start_not_one_issued_inside_it():
    from autoscaler.core.energy.forecast_archive import ForecastArchive, IssuedForecast

    actual = hourly(T0 - 119 * HOUR_S, [100.0 + i % 24 for i in range(120)])
    older = IssuedForecast(T0 - 2 * HOUR_S, hourly(T0, [50.0, 51.0, 52.0], source="older"))
    inside = IssuedForecast(T0 + 60.0, hourly(T0, [1.0, 1.0, 1.0], source="inside"))  # issued a minute into the slot
    window = slot_window(actual, ForecastArchive.of("a", [older, inside]), T0, HOUR_S, 2)
    # Slots 1-2 from the older issue; 3-6 the blend, yesterday's (slots -21 .. -18: 102 .. 105).
    assert window.values.tolist() == pytest.approx([123.0, 51.0, 52.0, 102.0, 103.0, 104.0, 105.0], rel=1e-6)


@pytest.fixture()
def forecast_server():
    served = _Served()
    with serving(_answering(served, "application/json")) as base:
        yield served, f"{base}/v3/forecast?region=X&token=secret"


def watttime_forecast(generated_s: float, first_s: float, values_lbs) -> str:
    import json

    data = [{"point_time": iso(first_s + i * HOUR_S), "value": v} for i, v in enumerate(values_lbs)]
    return json.dumps({"data": data, "meta": {"generated_at": iso(generated_s), "units": "lbs_co2_per_mwh"}})


def test_each_read_of_a_forecast_url_is_an_issue_and_one_issued_after_now_is_left_out(tmp_path, forecast_server):
    import structlog

    from autoscaler.core.energy.signal import GRAMS_PER_POUND

    served, url = forecast_server
    actual = tmp_path / "actual.csv"
    actual.write_text(csv_text(T0 - 23 * HOUR_S, HOUR_S, [100.0] * 24 + [100.0] * 3))
    served.body = watttime_forecast(T0 - 600.0, T0, [1000.0] * 12)  # 1000 lbs/MWh = 453.59237 g/kWh
    clock = SimulatedClock(T0)
    settings = CarbonSettings(source=str(actual), forecast=url, unit="gCO2eq/kWh", refresh_s=60, timeout_s=5)
    feed = CarbonFeed(settings, clock)
    window = feed.window(T0, HOUR_S, 2)
    assert window.values[4:].tolist() == pytest.approx([GRAMS_PER_POUND] * 3)  # slots 4-6: past the actual values
    # The next read is issued two hours from now: left out with a warning; the first issue is kept.
    served.body = watttime_forecast(T0 + 3 * HOUR_S, T0, [2000.0] * 12)
    clock.advance(HOUR_S)
    with structlog.testing.capture_logs() as logs:
        feed.window(T0 + HOUR_S, HOUR_S, 2)
        assert feed.join(timeout_s=60)
        window = feed.window(T0 + HOUR_S, HOUR_S, 2)
    assert window.values[3:].tolist() == pytest.approx([GRAMS_PER_POUND] * 4)
    later = [line for line in logs if line["event"] == "carbon_forecast_issued_later"]
    assert later and later[0]["issued"] == iso(T0 + 3 * HOUR_S) and "secret" not in later[0]["source"]
    # Issued by now, it is read and newer than the first.
    served.body = watttime_forecast(T0 + HOUR_S + 60.0, T0, [2000.0] * 12)
    clock.advance(120.0)
    feed.window(T0 + HOUR_S + 120.0, HOUR_S, 2)
    assert feed.join(timeout_s=60)
    clock.advance(HOUR_S - 120.0)
    window = feed.window(T0 + 2 * HOUR_S, HOUR_S, 2)
    assert window.values[3:].tolist() == pytest.approx([2 * GRAMS_PER_POUND] * 4)


def test_the_daemon_notes_a_signal_whose_times_carry_no_zone(tmp_path):
    import structlog

    path = tmp_path / "fr.csv"
    path.write_text("Time,Carbon Intensity\n" + "".join(f"{iso(T0 + (i - 3) * HOUR_S)[:-1].replace('T', ' ')},{300 + i}\n" for i in range(6)))
    with structlog.testing.capture_logs() as logs:
        feed = CarbonFeed(CarbonSettings(source=str(path), unit="gCO2eq/kWh"), SimulatedClock(T0))
        assert feed.window(T0, HOUR_S, 1).value_now == 303.0  # 12:00 UTC, read as UTC
    noted = [line for line in logs if line["event"] == "carbon_signal_read_as"]
    assert len(noted) == 1 and noted[0]["detail"] == f"{path}: times carry no zone: read as UTC"


# -- history kept across reads ---------------------------------------------------------------------


def test_with_history_keeps_earlier_points_before_the_read_and_drops_them_across_a_gap():
    earlier = hourly(T0, [1.0, 2.0, 3.0, 4.0])  # T0 .. T0 + 3 h
    read = hourly(T0 + 2 * HOUR_S, [30.0, 40.0, 50.0])  # from T0 + 2 h: revises 3 and 4
    joined = with_history(earlier, read, keep_s=10 * HOUR_S)
    assert joined.values.tolist() == [1.0, 2.0, 30.0, 40.0, 50.0]
    assert (joined.times_s - T0).tolist() == [0.0, HOUR_S, 2 * HOUR_S, 3 * HOUR_S, 4 * HOUR_S]
    assert with_history(earlier, read, keep_s=HOUR_S).values.tolist() == [2.0, 30.0, 40.0, 50.0]  # one hour kept
    later = hourly(T0 + 6 * HOUR_S, [9.0, 9.0])  # earlier ends at T0 + 4 h: a 2-hour gap
    assert with_history(earlier, later, keep_s=10 * HOUR_S) is later
    assert with_history(hourly(T0, [1.0, 2.0], unit="lbs/MWh"), read, keep_s=10 * HOUR_S) is read
    assert with_history(None, read, keep_s=10 * HOUR_S) is read


def test_a_source_that_serves_only_its_last_day_builds_up_the_days_the_blend_scores(tmp_path):
    # Every hour the file holds only the last 24 hours of a day that repeats (100 + hour of day). A
    # feed that kept only its last read would have one day: the blend would be the value now
    # (test_a_day_of_history_is_too_little_...). Kept across five days of reads, the history lets the
    # blend score yesterday, which has made no error: the same window as with five days at once.
    path = tmp_path / "last-day.csv"
    clock = SimulatedClock(T0 - 96 * HOUR_S)
    settings = CarbonSettings(source=str(path), unit="gCO2eq/kWh", refresh_s=HOUR_S, max_staleness_s=2 * HOUR_S, timeout_s=5)
    feed = CarbonFeed(settings, clock)
    while clock.now_s() <= T0:
        now_s = clock.now_s()
        first_s = now_s - 23 * HOUR_S
        path.write_text(csv_text(first_s, HOUR_S, [100.0 + ((first_s - T0) / HOUR_S + 23 + i) % 24 for i in range(24)]))
        window = feed.window(now_s, HOUR_S, 2)
        clock.advance(HOUR_S)
    assert window.values.tolist() == pytest.approx([123.0, 100.0, 101.0, 102.0, 103.0, 104.0, 105.0], rel=1e-6)
    assert window.band.tolist() == pytest.approx([0.0] * 7, abs=1e-3)


# -- reading local files: only when they changed, large ones off the slot -----------------------------------


class CountingLoad:
    """``load_signal`` (or ``load_forecast``) that counts its calls and may hold each until released."""

    def __init__(self, load, hold: bool = False) -> None:
        self.load, self.calls = load, 0
        self.started, self.go = threading.Event(), threading.Event()
        if not hold:
            self.go.set()

    def __call__(self, source, **kwargs):
        self.calls += 1
        self.started.set()
        assert self.go.wait(timeout=60)
        return self.load(source, **kwargs)


def test_a_local_file_unchanged_since_its_last_good_read_is_not_parsed_again_and_one_rewritten_is(tmp_path):
    path = tmp_path / "carbon.csv"
    path.write_text(csv_text(T0 - HOUR_S, 300.0, [300.0] * 48))
    load = CountingLoad(load_signal)
    clock = SimulatedClock(T0)
    feed = CarbonFeed(CarbonSettings(source=str(path), unit="gCO2eq/kWh", refresh_s=600, max_staleness_s=900), clock, load=load)
    assert feed.window(T0, 300.0, 1).value_now == 300.0 and load.calls == 1
    clock.advance(600.0)
    # Read again, not parsed: the read is good, so its age starts again (1,200 s after the first
    # read, past max_staleness_s, the slot still has a signal).
    assert feed.window(clock.now_s(), 300.0, 1).value_now == 300.0 and load.calls == 1
    assert feed.last_read_s == clock.now_s()
    clock.advance(600.0)
    assert feed.window(clock.now_s(), 300.0, 1) is not None and load.calls == 1
    # The same size, written at once: the content differs, so it is read.
    path.write_text(csv_text(T0 - HOUR_S, 300.0, [200.0] * 48))
    clock.advance(600.0)
    assert feed.window(clock.now_s(), 300.0, 1).value_now == 200.0 and load.calls == 2


def test_a_large_local_file_that_changed_is_read_off_the_slot_and_the_slot_keeps_the_last_good_read(tmp_path, monkeypatch):
    path = tmp_path / "carbon.csv"
    path.write_text(csv_text(T0 - HOUR_S, 300.0, [300.0] * 48))
    monkeypatch.setattr(carbon_feed_module, "IN_SLOT_READ_BYTES", 100)  # the file is about 1.5 kB
    load = CountingLoad(load_signal)
    clock = SimulatedClock(T0)
    feed = CarbonFeed(CarbonSettings(source=str(path), unit="gCO2eq/kWh", refresh_s=600), clock, load=load)
    assert feed.window(T0, 300.0, 1).value_now == 300.0  # the first read, in the slot
    path.write_text(csv_text(T0 - HOUR_S, 300.0, [100.0] * 48))
    load.go.clear()  # the next read waits until let go
    clock.advance(600.0)
    assert feed.window(clock.now_s(), 300.0, 1).value_now == 300.0  # decided while the read waits
    assert load.started.wait(timeout=60) and feed.reading
    load.go.set()
    assert feed.join(timeout_s=60)
    assert feed.window(clock.now_s(), 300.0, 1).value_now == 100.0 and load.calls == 2


def test_a_small_source_that_changed_is_read_in_the_slot_while_a_large_forecast_is_read_off_it(tmp_path, monkeypatch):
    source, archive = tmp_path / "actual.csv", tmp_path / "issued.csv"
    source.write_text(csv_text(T0 - 23 * HOUR_S, HOUR_S, [100.0] * 24))  # to T0 + 1 h
    archive.write_text(long_csv([(T0 - HOUR_S, T0, [90.0] * 48)]))
    monkeypatch.setattr(carbon_feed_module, "IN_SLOT_READ_BYTES", (source.stat().st_size + archive.stat().st_size) // 2)
    forecast_load = CountingLoad(load_forecast)
    clock = SimulatedClock(T0)
    feed = CarbonFeed(CarbonSettings(source=str(source), forecast=str(archive), unit="gCO2eq/kWh", refresh_s=600), clock, load_forecast=forecast_load)
    assert feed.window(T0, HOUR_S, 2).value_now == 100.0
    # An hour on, the source has the new hour (500) and the archive a new issue (7).
    source.write_text(csv_text(T0 - 23 * HOUR_S, HOUR_S, [100.0] * 24 + [500.0]))
    archive.write_text(long_csv([(T0 - HOUR_S, T0, [90.0] * 48), (T0 + HOUR_S, T0 + HOUR_S, [7.0] * 48)]))
    forecast_load.go.clear()
    clock.advance(HOUR_S)
    window = feed.window(clock.now_s(), HOUR_S, 2)
    assert window.value_now == 500.0 and window.values[1] == 90.0  # the source read in the slot; the forecast not yet
    assert forecast_load.started.wait(timeout=60) and feed.reading and feed.parsed == {"source": 2, "forecast": 2}
    forecast_load.go.set()
    assert feed.join(timeout_s=60)
    assert feed.window(clock.now_s(), HOUR_S, 2).values[1] == 7.0
