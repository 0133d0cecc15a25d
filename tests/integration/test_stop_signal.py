"""SIGTERM or Ctrl-C stops the daemon's loop after the slot under way, whenever it lands: also in the
middle of the write of a log line (the daemon logs a line per slot, so a signal sent as one shows up
lands there often), where a handler that itself writes to the log fails before it stops anything."""

from __future__ import annotations

import io
import logging
import signal
import sys
from types import SimpleNamespace

import pytest
import structlog

from autoscaler.adapters.clock import WallClock
from autoscaler.app.daemon import run_forever
from autoscaler.app.logs import configure_logging


class SignalInFirstWrite(io.RawIOBase):
    """The bytes under the log stream: its first write raises SIGTERM half-way, as a signal sent by
    another process lands in the daemon's write of a log line; the handler runs inside that write."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.signalled = False

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if not self.signalled:
            self.signalled = True
            signal.raise_signal(signal.SIGTERM)
        self.written += data
        return len(data)


class LoopWentOn(BaseException):
    """Raised by the slot after the signal: the loop should have stopped; not an Exception, so the
    loop's own handling of a failed slot does not take it."""


@pytest.fixture
def restore_logging_and_signals():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    before = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    yield
    for number, handler in before.items():
        signal.signal(number, handler)
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def test_a_signal_that_lands_in_the_write_of_a_log_line_still_stops_the_loop_after_the_slot(restore_logging_and_signals, monkeypatch):
    raw = SignalInFirstWrite()
    # The daemon's log goes to stderr (line-buffered, as Python opens it), where logging also reports
    # a line it failed to write.
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", line_buffering=True))
    configure_logging("json")
    slots = []

    def run_slot() -> None:
        slots.append(len(slots))
        if len(slots) > 3:
            raise LoopWentOn(f"slot {len(slots)} ran after SIGTERM")
        structlog.get_logger("autoscaler").info("slot", slot=len(slots))

    runner = SimpleNamespace(run_slot=run_slot, clock=WallClock(), config=SimpleNamespace(epoch_s=0.0), release_between_slots=lambda: None)
    try:
        run_forever(runner, slot_s=0.01, misfire_grace_s=1.0)
    except LoopWentOn as went_on:
        pytest.fail(f"the signal was lost: {went_on}; the log:\n{raw.written.decode(errors='replace')}")
    logging.getLogger().handlers[0].flush()
    assert raw.signalled and slots == [0]
    events = [line for line in raw.written.decode().splitlines() if line.startswith("{")]
    assert [e.split('"event": "')[1].split('"')[0] for e in events] == ["slot", "stopping"]


SIGNAL_INSIDE_THE_STOPS_LOCK = """
import os, signal, threading, sys
from types import SimpleNamespace
from autoscaler.adapters.clock import WallClock
from autoscaler.app import daemon

class SignalledInsideItsLock(threading.Event):
    # The loop's stop event, whose first wait is interrupted by Ctrl-C while it holds its own lock: a
    # handler that sets the event from there waits for that lock in the same thread, for ever.
    sent = False

    def wait(self, timeout=None):
        # Only the loop's own waits count: once the daemon's handler is in place (a thread's start
        # waits on an event of this kind too, before it).
        handler = signal.getsignal(signal.SIGINT)
        if not SignalledInsideItsLock.sent and callable(handler) and handler is not signal.default_int_handler:
            SignalledInsideItsLock.sent = True
            with self._cond:
                os.kill(os.getpid(), signal.SIGINT)
                sum(range(1000))  # the handler runs at a bytecode boundary here, the lock held
        return super().wait(timeout)

signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever the test run left it as (an ignored SIGINT is inherited)
daemon.threading.Event = SignalledInsideItsLock
runner = SimpleNamespace(run_slot=lambda: None, clock=WallClock(), config=SimpleNamespace(epoch_s=0.0), release_between_slots=lambda: [])
daemon.run_forever(runner, slot_s=3600.0, misfire_grace_s=60.0)
print("stopped")
"""


def test_a_signal_while_the_loop_holds_its_stop_events_lock_still_stops_it():
    # The walkthrough's dry run once ignored Ctrl-C and SIGTERM for minutes: the handler set the
    # stop event from inside that event's own wait. Run in a process of its own, so a hang is a
    # timeout here and not a hung test run.
    import subprocess

    done = subprocess.run([sys.executable, "-c", SIGNAL_INSIDE_THE_STOPS_LOCK], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout.splitlines()[-1:]) == (0, ["stopped"]), done.stderr[-2000:]
    assert "stopping" in done.stdout and "signal=SIGINT" in done.stdout
