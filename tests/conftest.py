"""Settings and fixtures for every test.

Hypothesis checks by default that each example runs within 200 ms and that data is generated
quickly: a timing assertion that a busy machine fails. The profile loaded here drops both;
speed is measured in benchmarks/, never asserted. It also draws the same examples on every run
(``derandomize``), so a run's verdict is the code's, not the draw's; ``HYPOTHESIS_PROFILE=explore``
draws new ones each run, to search for failures (the examples that failed once are pinned as tests).

Tests marked ``long`` (over ~10 s) are collected first: the suite runs on several processes
(pytest-xdist, ``addopts`` in pyproject.toml), and a long test started last would keep one of them
running alone at the end.

``autoscaler.app.logs.configure_logging`` (called by ``autoscaler run`` and the other commands when a
test calls ``cli.main``) adds a root handler bound to the ``sys.stderr`` of that moment, which in a
test is pytest's capture stream, closed when the test ends. Left in place, the handler would take
the records that the servers' threads of later tests log (aiosmtpd's ``mail.log``, werkzeug under
moto) and fail on the closed stream with ``--- Logging error ---``. So each test gets back the
logging setup it started with.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import HealthCheck, settings

settings.register_profile("untimed", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.register_profile("explore", parent=settings.get_profile("untimed"), derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "untimed"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` first, each group in collection order (a stable sort)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    named_levels = {
        name: logger.level for name, logger in logging.Logger.manager.loggerDict.items() if isinstance(logger, logging.Logger)
    }
    structlog_config = structlog.get_config()
    try:
        yield
    finally:
        for handler in root.handlers[:]:  # pytest's own (its log capture of this phase) stay
            if handler not in handlers and not type(handler).__module__.startswith("_pytest"):
                root.removeHandler(handler)
        root.setLevel(level)
        for name, logger in logging.Logger.manager.loggerDict.items():
            if isinstance(logger, logging.Logger):
                logger.setLevel(named_levels.get(name, logging.NOTSET))
        structlog.configure(**structlog_config)


@pytest.fixture
def no_autoscaler_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No AUTOSCALER_* variable of the machine running the tests leaks into the settings read."""
    for name in list(os.environ):
        if name.upper().startswith("AUTOSCALER_"):
            monkeypatch.delenv(name)
