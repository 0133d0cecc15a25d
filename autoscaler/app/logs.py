"""Logging setup: structlog events and the standard library's records (APScheduler, botocore)
rendered the same way, to one stream: JSON lines in production, a console view on a terminal.

Every event gets an ISO-8601 UTC ``timestamp`` and a ``level``; values whose key names a
secret are replaced by ``***`` before rendering.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from autoscaler.core.errors import ConfigError

LOG_FORMATS = ("auto", "json", "console")
REDACTED = "***"
SECRET_KEY = re.compile(r"password|secret|token|credential|access_key|api_key", re.IGNORECASE)


def redact_secrets(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: replace the value of every key matching SECRET_KEY with ``***``.

    Looks into nested dicts (and dicts inside lists and tuples), building copies so the
    caller's objects are never changed.
    """
    return _redact(event_dict)


def _redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: REDACTED if isinstance(key, str) and SECRET_KEY.search(key) else _redact(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return type(value)(_redact(item) for item in value)
    return value


QUIET_LOGGERS = ("botocore.credentials", "apscheduler")
"""Logged from WARNING up only."""


def configure_logging(fmt: str = "auto", stream: TextIO | None = None, level: int | str = logging.INFO) -> None:
    """Send structlog and standard-library logging to ``stream`` (default: stderr).

    ``fmt``: "json" for JSON lines, "console" for the human-readable renderer, "auto" for
    console when ``stream`` is a terminal and JSON otherwise. ``level``: the lowest level
    logged, e.g. ``logging.DEBUG`` or "debug". Calling it again replaces the previous setup.
    Raises ConfigError for an unknown ``fmt`` or ``level``.
    """
    if fmt not in LOG_FORMATS:
        raise ConfigError(f"log_format: expected one of {', '.join(LOG_FORMATS)}, got {fmt!r}")
    level_no = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(level_no, int):
        raise ConfigError(f"log level: expected debug, info, warning, error or critical, got {level!r}")
    stream = stream if stream is not None else sys.stderr
    console = fmt == "console" or (fmt == "auto" and _is_tty(stream))

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: list[Processor]
    if console:
        renderer = [structlog.dev.ConsoleRenderer(colors=_is_tty(stream))]
    else:
        renderer = [
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(default=str),
        ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, redact_secrets, *renderer],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    handler.set_name(_HANDLER_NAME)

    root = logging.getLogger()
    # Replace only our own handler: others (pytest's capture, an embedding app's) stay.
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level_no)
    # Libraries' routine lines (one per AWS client made, one per scheduler run) would bury ours.
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(level_no, logging.WARNING))

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


_HANDLER_NAME = "autoscaler"


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
