"""What a replay will need, estimated from sizes before anything large is allocated (pure).

The figures are bytes held at the peak and value updates made by the online policies. The
per-slot constants were measured on this code (peak resident memory with ``/usr/bin/time -v``
over load curves of 20,000 to 200,000 slots; numpy 2, cvxpy 1.x with Clarabel); they are
estimates, on the high side, not promises.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_MEMORY_BUDGET_MB = 2048
"""Memory a replay may plan to use unless ``--memory-budget-mb`` says otherwise: 2 GiB."""

BASE_BYTES = 160 * 2**20
"""Python with numpy, scikit-learn, cvxpy and rich imported, before any curve."""

BYTES_PER_JOB = 1024
"""A trace job read: its line, its parsed record and its columns."""

OFFLINE_BYTES_PER_SLOT = 6_400
"""The offline LP (cvxpy canonicalisation and Clarabel's factorisation) per slot of its horizon:
about 6.2 KB measured at 20,000, 86,400 and 200,000 slots."""

NUMBER_BYTES = 64
"""One number of the JSON document or CSV: a Python float in a list, and its text."""

PLOT_BYTES_PER_SLOT = 4_000
"""replay.png (matplotlib, one panel per policy) per slot of the horizon: 3.3 KB measured."""

SIGNAL_BYTES_PER_SOURCE_BYTE = 2.0
"""A signal file read (``--carbon``, ``--forecast``), per byte of the file: its bytes and its text
while they are decoded, then three C doubles a point (time, value, line). Measured 1.8 (peak
resident memory less Python's, 10 years of 1-minute points, a 147 MB CSV: 320 MB)."""

SLOW_VALUE_UPDATES = 10**10
"""Above this many value updates an online policy's run is said up front to be long: 1.2e10 took
40 s here (3.4 ns a value, GCP on a 25,000-job trace in 1-second slots)."""


@dataclass(frozen=True)
class WorkloadSize:
    """The sizes that set a replay's cost, known once the trace is read and before its curves are built.

    ``n_deadlines``: K, the distinct job deadlines (rows of L_{d,t}); ``max_deadline``: nu.
    Both are None when there are no per-job deadlines (a load curve, or gcp not asked for).
    ``curve``: the input is a load curve, whose length (not --slot-s) sets n_slots.
    """

    n_slots: int
    slot_s: float
    n_jobs: int = 0
    n_deadlines: int | None = None
    max_deadline: int | None = None
    curve: bool = False


@dataclass(frozen=True)
class Need:
    """One part of an estimate: what it is, and the bytes it holds at the peak."""

    what: str
    bytes: int


@dataclass(frozen=True)
class Estimate:
    """The parts of a run's memory, and the value updates of its online policies."""

    needs: tuple[Need, ...]
    value_updates: dict[str, int]

    @property
    def total_bytes(self) -> int:
        return sum(need.bytes for need in self.needs)

    def slow_policies(self) -> list[str]:
        """Notes for the policies whose value updates exceed ``SLOW_VALUE_UPDATES``."""
        return [
            f"{name} makes up to {count:.2g} value updates (its work vector in every slot of its horizon); it may take a minute or more"
            for name, count in self.value_updates.items()
            if count > SLOW_VALUE_UPDATES
        ]


def signal_needs(sources: Iterable[tuple[str, str | None, int]]) -> tuple[Need, ...]:
    """The memory of reading each signal file: ``sources`` of (flag, path, file bytes); a source of
    0 bytes (none given, a URL, whose answer ``max_bytes`` bounds instead) is left out."""
    return tuple(
        Need(f"the {flag} signal {path} ({format_bytes(size)})", int(SIGNAL_BYTES_PER_SOURCE_BYTE * size)) for flag, path, size in sources if size > 0
    )


def signal_estimate(needs: tuple[Need, ...]) -> Estimate:
    """The estimate of reading the signals alone, checked before they are read."""
    return Estimate(needs=(Need("Python and its libraries", BASE_BYTES), *needs), value_updates={})


def replay_estimate(size: WorkloadSize, policies: list[str], deadline_slots: int, files: bool = False, signals: tuple[Need, ...] = ()) -> Estimate:
    """Bytes and value updates of ``autoscaler replay`` on a workload of ``size``.

    Per policy: its schedule, m_t and x_t over its horizon (n_slots + D, or n_slots + nu for
    gcp), with the checks' temporaries; the offline LP, ``OFFLINE_BYTES_PER_SLOT`` a slot; and
    L_{d,t} when the jobs have deadlines, K x (n_slots + 1) floats (:class:`~autoscaler.core.model.LoadByDeadline`). The document
    holds two numbers a slot for the curves and two a horizon slot per policy; ``files``
    (``--out``) adds the PNG and a second copy of the text. GCP, GCP-U and VFW update a work
    vector of nu + 1 (D + 1) values in each slot: (nu + 1) x horizon value updates at most.
    ``signals``: the signal files' needs (:func:`signal_needs`), held beside the rest.
    """
    n = size.n_slots
    needs = [Need("Python and its libraries", BASE_BYTES), *signals]
    if size.n_jobs:
        needs.append(Need(f"{size.n_jobs:,} trace jobs", size.n_jobs * BYTES_PER_JOB))
    needs.append(Need(f"curves L_t over {n:,} slots", 4 * n * 8))
    if size.n_deadlines is not None:
        needs.append(Need(f"L_(d,t): {size.n_deadlines:,} deadlines x {n + 1:,} slots", size.n_deadlines * (n + 1) * 8))
    numbers = 2 * n
    from autoscaler.core.policies import (  # numpy and scipy: not for the CLI's parser
        CLASS_DEADLINE_POLICIES,
        POLICY_TABLE,
        WORK_VECTOR_POLICIES,
    )

    updates: dict[str, int] = {}
    longest = n
    for name in policies:
        nu = size.max_deadline if name in CLASS_DEADLINE_POLICIES and size.max_deadline is not None else deadline_slots
        horizon = n + nu
        longest = max(longest, horizon)
        numbers += 2 * horizon
        needs.append(Need(f"{name}'s schedule over {horizon:,} slots", 8 * horizon * 8))
        if name in POLICY_TABLE and POLICY_TABLE[name].is_offline_lp:
            needs.append(Need(f"offline LP over {horizon:,} slots", horizon * OFFLINE_BYTES_PER_SLOT))
        if name in WORK_VECTOR_POLICIES:
            updates[name] = (nu + 1) * horizon
    copies = 2 if files else 1
    needs.append(Need(f"{numbers:,} numbers of the document{' and files' if files else ''}", copies * numbers * NUMBER_BYTES))
    if files:
        needs.append(Need(f"replay.png over {longest:,} slots", longest * PLOT_BYTES_PER_SLOT))
    return Estimate(needs=tuple(needs), value_updates=updates)


def over_budget(estimate: Estimate, budget_mb: float) -> str | None:
    """None when the estimate fits in ``budget_mb`` MiB, else what it needs against the budget, the
    figure and its three largest parts: "that needs about 7.64 GiB (offline LP over 1,000,002 slots
    5.96 GiB, ...), more than the 2 GiB budget"."""
    budget_bytes = budget_mb * 2**20
    if estimate.total_bytes <= budget_bytes:
        return None
    parts = sorted(estimate.needs, key=lambda need: -need.bytes)
    shown = ", ".join(f"{need.what} {format_bytes(need.bytes)}" for need in parts[:3])
    return f"that needs about {format_bytes(estimate.total_bytes)} ({shown}), more than the {format_bytes(budget_bytes)} budget"


def format_bytes(count: float) -> str:
    """1536 -> '1.5 KiB', 3 * 2**30 -> '3 GiB'; binary units."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    for unit in units:
        if count < 1024 or unit == units[-1]:
            return f"{count:.0f} {unit}" if count >= 100 or unit == "B" else f"{count:.3g} {unit}"
        count /= 1024
    raise AssertionError("unreachable")
