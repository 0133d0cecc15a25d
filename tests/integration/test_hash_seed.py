"""A replay is the same run whatever Python's hash seed: the slot loop never lets a set's order (which
PYTHONHASHSEED changes from one process to the next) decide what it does.

It did once: the states a slot observed were applied to the queue in a set's order, so the running
jobs, and with them the runs seen finished, were read in an order that changed from process to
process; the length-error window then kept other runs, and a week's compare gave 55,058 or 55,196
jobs overran from one run to the next. Here 30 jobs start together in slot 0 and end together
before slot 2: the runs the length errors are told of must come in one order, the steps', in every
process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    from autoscaler.app.compare import CompareInputs, policy_on_twin
    from autoscaler.app.config import Settings
    from autoscaler.core.learned import LengthErrors
    from autoscaler.core.model import Job, StepSpec
    from autoscaler.core.twin import TwinConfig

    seen = []
    record = LengthErrors.record

    def recorded(self, length_s, run_s, learned=False):
        seen.append(round(run_s))
        return record(self, length_s, run_s, learned)

    LengthErrors.record = recorded
    # 30 jobs of 400-458 s, due at once: released in slot 0, RUNNING at slot 1 (300 s), done by slot 2.
    jobs = tuple(Job(f"j{i:02d}", f"j{i:02d}", "t", 0.0, 400.0 + 2 * i, 400.0 + 2 * i, StepSpec(args=("true",))) for i in range(30))
    policy_on_twin(CompareInputs(jobs, 4, Settings(deadline_slots=0), TwinConfig(provision_s=0.0), 0, 100), "hold", 0)
    print("runs", seen)
    """
)


def runs_seen(hash_seed: str) -> str:
    environment = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=environment, check=True, timeout=300)
    return [line for line in done.stdout.splitlines() if line.startswith("runs ")][-1]


def test_the_runs_seen_finished_come_in_the_steps_order_under_every_hash_seed():
    orders = {seed: runs_seen(seed) for seed in ("1", "2", "3", "4")}
    # Each job ran its own length, 400 + 2i s: the runs are the 30 lengths, in the order the steps were added.
    assert orders["1"] == f"runs {[400 + 2 * i for i in range(30)]}"
    assert len(set(orders.values())) == 1, orders
