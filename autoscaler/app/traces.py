"""The traces shipped with the package, and how a command's TRACE argument names one.

Every option that takes a trace (``replay --trace``, ``sweep --trace``, ``report --replay``,
``run --replay``) goes through :func:`open_trace`, so they all read the same names the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from autoscaler.adapters.files import require_regular_file
from autoscaler.core.errors import ConfigError


@dataclass(frozen=True)
class ShippedTrace:
    """A SWIM trace in ``autoscaler/data/`` (BSD licence beside it, ``LICENSE-SWIM``)."""

    name: str
    file_name: str
    title: str


SHIPPED = {
    "A": ShippedTrace("A", "FB-2009_samples_24_times_1hr_0.tsv", "Workload A"),
    "B": ShippedTrace("B", "FB-2009_samples_24_times_1hr_1.tsv", "Workload B"),
}
"""The deferral paper's Workloads A and B (Facebook 2009, SWIM samples 0 and 1), by name."""

DEFAULT_NAME = "A"
ALIASES = {"default": DEFAULT_NAME}

TRACE_NAMES_HELP = (
    "'A' or 'default' (the shipped Workload A), 'B' (the shipped Workload B), or a file path; "
    "those names always mean the shipped traces: write ./A for a file named A"
)
"""What a TRACE argument may be, in the words every --help uses."""


def shipped(text: str | None) -> ShippedTrace | None:
    """The shipped trace ``text`` names ('A', 'B', 'default'; None means the default), else None."""
    if text is None:
        return SHIPPED[DEFAULT_NAME]
    name = ALIASES.get(text.strip(), text.strip())
    return SHIPPED.get(name)


@contextmanager
def open_trace(text: str | None, flag: str = "--trace") -> Iterator[tuple[Path, str]]:
    """(path to read, how to name it in output) for a TRACE argument, as a context manager.

    ``text``: None or 'default' for Workload A, 'A' or 'B' for a shipped trace, anything else a
    file path. The names win over a file of the same name in the working folder, so a command
    means the same wherever it is run; ``./A`` reads such a file. Raises ConfigError naming
    ``flag`` for an empty text, or for a FIFO or a device (reading a FIFO blocks). Whether the path exists is left to the reader (TraceError).
    """
    trace = shipped(text)
    if trace is not None:
        with resources.as_file(resources.files("autoscaler") / "data" / trace.file_name) as path:
            yield path, f"{trace.title} ({trace.file_name}, embedded)"
        return
    if not str(text).strip():
        raise ConfigError(f"{flag}: expected 'A', 'B', 'default' or a file path, got an empty string")
    require_regular_file(text, flag)
    yield Path(text), str(text)


def label(text: str | None) -> str:
    """A short name for a TRACE argument in tables and figures: 'Workload A (embedded)', or the file's name."""
    trace = shipped(text)
    return f"{trace.title} (embedded)" if trace is not None else Path(str(text)).name


def shadowed_file(text: str | None) -> Path | None:
    """A file in the working folder that ``text`` would name if it were not a shipped trace's name
    (it is not read: :func:`open_trace` reads the shipped trace), else None."""
    if text is None or shipped(text) is None:
        return None
    path = Path(text)
    return path if path.exists() else None
