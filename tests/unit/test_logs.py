"""Logging: JSON lines with an ISO UTC timestamp and a level, secrets redacted before rendering."""

from __future__ import annotations

import io
import json
import logging
import time
from datetime import datetime, timedelta

import pytest
import structlog

from autoscaler.app.logs import configure_logging, redact_secrets
from autoscaler.core.errors import ConfigError


@pytest.fixture(autouse=True)
def restore_logging():
    """Each test configures logging from scratch and leaves no handler or level behind."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def json_lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_output_is_one_parseable_object_per_line() -> None:
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    log = structlog.get_logger("autoscaler")
    log.info("slot", slot=7, nodes=3)
    log.warning("late", job_id="j1")
    first, second = json_lines(stream)
    assert first["event"] == "slot" and first["slot"] == 7 and first["nodes"] == 3
    assert first["level"] == "info" and second["level"] == "warning"
    stamp = datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00"))
    assert stamp.utcoffset() == timedelta(0)


def test_password_and_nested_token_are_redacted_and_other_fields_kept() -> None:
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    smtp = {"host": "localhost", "auth": {"user": "ops", "api_token": "t0ps3cret"}}
    structlog.get_logger().info("mail", smtp_password="hunter2", smtp=smtp, tenant="ads")
    (line,) = json_lines(stream)
    assert line["smtp_password"] == "***"
    assert line["smtp"]["auth"]["api_token"] == "***"
    assert line["smtp"]["auth"]["user"] == "ops"
    assert line["smtp"]["host"] == "localhost"
    assert line["tenant"] == "ads"
    assert "hunter2" not in stream.getvalue() and "t0ps3cret" not in stream.getvalue()
    # The caller's dict is not changed by the redaction.
    assert smtp["auth"]["api_token"] == "t0ps3cret"


def test_redact_secrets_key_names_case_insensitively_and_inside_lists() -> None:
    event = {
        "event": "x",
        "AWS_SECRET_ACCESS_KEY": "s",
        "Credentials": {"AccessKeyId": "a"},
        "access_key": "k",
        "tokens": [{"session_token": "t", "name": "n"}],
        "job_id": "j-1",
        "nodes": 4,
    }
    out = redact_secrets(None, "info", event)
    assert out["AWS_SECRET_ACCESS_KEY"] == "***"
    assert out["Credentials"] == "***"
    assert out["access_key"] == "***"
    assert out["tokens"] == "***"  # the key itself names tokens
    assert (out["job_id"], out["nodes"], out["event"]) == ("j-1", 4, "x")
    assert redact_secrets(None, "info", {"jobs": [{"api_key": "k", "id": 1}]})["jobs"] == [{"api_key": "***", "id": 1}]


def test_standard_library_records_render_the_same_way() -> None:
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    logging.getLogger("apscheduler.scheduler").warning("Run time of job %s was missed", "slot")
    (line,) = json_lines(stream)
    assert line["event"] == "Run time of job slot was missed"
    assert line["level"] == "warning" and line["logger"] == "apscheduler.scheduler"
    assert "timestamp" in line


def test_level_filters_lower_events() -> None:
    stream = io.StringIO()
    configure_logging("json", stream=stream, level="warning")
    structlog.get_logger().info("quiet")
    structlog.get_logger().error("loud")
    assert [line["event"] for line in json_lines(stream)] == ["loud"]


def test_exceptions_are_rendered_inside_the_json_line() -> None:
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        structlog.get_logger().exception("failed")
    (line,) = json_lines(stream)
    assert "RuntimeError: boom" in line["exception"]


def test_auto_is_json_on_a_pipe_and_console_on_a_terminal() -> None:
    pipe = io.StringIO()
    configure_logging("auto", stream=pipe)
    structlog.get_logger().info("hello", token="abc")
    assert json.loads(pipe.getvalue())["token"] == "***"

    terminal = FakeTerminal()
    configure_logging("auto", stream=terminal)
    structlog.get_logger().info("hello", token="abc")
    text = terminal.getvalue()
    assert "hello" in text and "***" in text and "abc" not in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_console_format_is_human_readable() -> None:
    stream = io.StringIO()
    configure_logging("console", stream=stream)
    structlog.get_logger().info("slot", nodes=3)
    assert "slot" in stream.getvalue() and "nodes=3" in stream.getvalue()


def test_reconfiguring_replaces_the_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("json", stream=first)
    configure_logging("json", stream=second)
    structlog.get_logger().info("once")
    assert first.getvalue() == "" and len(json_lines(second)) == 1


def test_default_stream_is_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json")
    structlog.get_logger().info("to stderr")
    captured = capsys.readouterr()
    assert captured.out == "" and json.loads(captured.err)["event"] == "to stderr"


def test_unknown_format_or_level_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="log_format"):
        configure_logging("yaml")
    with pytest.raises(ConfigError, match="log level"):
        configure_logging("json", level="loud")


def test_the_step_endpoints_listener_logs_as_json_lines_too() -> None:
    # uvicorn logs a bad request at warning; with its own log config that line was plain text
    # ("WARNING:  Invalid HTTP request received.") in the middle of the JSON log.
    import socket

    from starlette.applications import Starlette

    from autoscaler.app.serve_http import Listener

    stream = io.StringIO()
    configure_logging("json", stream=stream)
    listener = Listener(Starlette(), "127.0.0.1", 0).start()
    try:
        with socket.create_connection((listener.host, listener.port), timeout=10) as client:
            client.sendall(b"NOT HTTP\r\n\r\n")
            client.recv(1024)  # uvicorn answers 400 and closes
        deadline = time.monotonic() + 30
        while "Invalid HTTP request" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        listener.stop()
    lines = json_lines(stream)
    assert {"event": "Invalid HTTP request received.", "level": "warning", "logger": "uvicorn.error"}.items() <= next(
        line for line in lines if line["event"].startswith("Invalid HTTP")
    ).items()
