"""Under a cap M with no schedule, the replay says the smallest M that works, and that M works."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.app.cli import main
from autoscaler.core.errors import InfeasibleError
from autoscaler.core.model import CostParams
from autoscaler.core.policies import plan, smallest_max_servers


def _by_every_run(load: np.ndarray, deadline_slots: int) -> float:
    """max over runs i..j of sum L / (j - i + 1 + D), by trying every run."""
    return max(load[i : j + 1].sum() / (j - i + 1 + deadline_slots) for i in range(load.size) for j in range(i, load.size))


@pytest.mark.parametrize(
    "load, deadline_slots, expected",
    [
        ([0, 0, 0, 0, 10], 0, 10.0),  # the prefix density (10 / 5 slots) would say 2
        ([0, 0, 0, 0, 10], 1, 5.0),
        ([4, 4, 4], 1, 3.0),  # all three slots: 12 work in 3 + 1 slots
        ([9, 0, 0, 0, 1], 2, 3.0),
    ],
)
def test_offline_smallest_cap_by_hand(load, deadline_slots, expected):
    load = np.array(load, dtype=float)
    assert smallest_max_servers("offline", load, deadline_slots, CostParams()) == pytest.approx(expected, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(load=st.lists(st.integers(0, 30), min_size=1, max_size=14).filter(any), deadline_slots=st.integers(0, 4))
def test_offline_smallest_cap_is_exact_for_the_lp(load, deadline_slots):
    load = np.array(load, dtype=float)
    cap = smallest_max_servers("offline", load, deadline_slots, CostParams())
    assert cap == pytest.approx(_by_every_run(load, deadline_slots), rel=1e-12)
    plan("offline", load, deadline_slots, CostParams(max_servers=cap * (1 + 1e-6)))
    with pytest.raises(InfeasibleError):
        plan("offline", load, deadline_slots, CostParams(max_servers=cap * (1 - 1e-3)))


@pytest.mark.parametrize("name", ["gcp-u", "vfw"])
def test_online_smallest_cap_is_the_uncapped_peak_and_works(name):
    load = np.array([0, 3, 9, 14, 2, 0, 0, 11, 6, 1], dtype=float)
    cap = smallest_max_servers(name, load, 3, CostParams())
    assert cap == pytest.approx(plan(name, load, 3, CostParams()).capacity.max())
    plan(name, load, 3, CostParams(max_servers=cap))
    with pytest.raises(InfeasibleError):
        plan(name, load, 3, CostParams(max_servers=cap * 0.999))


def test_the_replay_names_the_smallest_cap(capsys):
    assert main(["replay", "--policy", "offline", "--max-servers", "10"]) == 2
    message = capsys.readouterr().err
    # Workload A at D = 2: slots 276..287 hold 986 job-slots, due within 12 + 2 slots: 986/14 = 70.43.
    assert "with at most M = 10 servers; the smallest cap that works for offline is M = 70.4286 (--max-servers)" in message
    assert main(["replay", "--policy", "offline", "--max-servers", "70.4286", "--format", "csv"]) == 0
    assert main(["replay", "--policy", "offline,gcp-u,vfw", "--max-servers", "10"]) == 2
    assert "is M = 103 for all of them: offline 70.4286, gcp-u 85.1797, vfw 103" in capsys.readouterr().err
