"""Per-step time of dynamic DRF: the linear-time step, the step's LP (cvxpy + CLARABEL) and water-filling.

At each k in 10^2..10^5 (n = k, m resources) one step is timed from a synthetic x^{k-1}: a random
non-increasing vector scaled so its busiest resource is used to exactly (k-1)/n, which is all the
step needs. Water-filling uses increments of 1e-3 / n (about 1000 rounds per step). A method is
skipped at larger k once one step of it took longer than --budget-s. Prints figures; asserts nothing.
Run: .venv/bin/python benchmarks/bench_drf.py
"""

from __future__ import annotations

import argparse
import time
import warnings
from functools import partial

import numpy as np

from autoscaler.core import fairshare
from autoscaler.core.errors import SolverError


def synthetic_state(k: int, n: int, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(normalised demands (k, m), x^{k-1} (k-1,)) valid as the input of step k."""
    demands = rng.uniform(0.0, 1.0, size=(k, m))
    demands[np.arange(k), rng.integers(0, m, size=k)] = 1.0
    previous = np.sort(rng.uniform(1.0, 3.0, size=k - 1))[::-1]
    previous *= ((k - 1) / n) / (previous @ demands[: k - 1]).max()
    return demands, previous


def timed_ms(call, repeats: int) -> tuple[float, tuple]:
    best = np.inf
    for _ in range(repeats):
        started = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - started)
    return best * 1e3, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resources", type=int, default=3, help="m")
    parser.add_argument("--budget-s", type=float, default=20.0, help="skip a method at larger k after a step this slow")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    too_slow: set[str] = set()
    warnings.filterwarnings("ignore", message="Solution may be inaccurate")
    fairshare.dynamic_drf_step_lp(*synthetic_state(10, 10, args.resources, rng)[:2], 10)  # import and compile cvxpy once
    print(f"m = {args.resources}; best of repeats, ms per step")
    print(f"{'k':>8} {'linear':>10} {'LP':>10} {'water-fill':>11}  |M_lin - M_LP|  M_lin - M_wf")
    for k in (10**2, 10**3, 10**4, 10**5):
        n = k
        d, previous = synthetic_state(k, n, args.resources, rng)
        linear_ms, (level, _) = timed_ms(partial(fairshare.dynamic_drf_step, d, previous, n), repeats=20)
        row = {"linear": f"{linear_ms:10.3f}", "LP": f"{'skipped':>10}", "wf": f"{'skipped':>11}"}
        gaps = ["", ""]
        if "LP" not in too_slow:
            try:
                lp_ms, (lp_level, _) = timed_ms(partial(fairshare.dynamic_drf_step_lp, d, previous, n), repeats=1)
            except SolverError as exc:
                lp_ms, row["LP"], gaps[0] = np.inf, f"{exc.status:>10}", "-"
            else:
                row["LP"] = f"{lp_ms:10.1f}"
                gaps[0] = f"{abs(level - lp_level):.1e}"
            if lp_ms / 1e3 > args.budget_s:  # an inaccurate solve also stops the LP column
                too_slow.add("LP")
        if "wf" not in too_slow:
            wf_ms, (wf_level, _) = timed_ms(partial(fairshare.dynamic_drf_step_water_filling, d, previous, n, 1e-3 / n), repeats=1)
            row["wf"] = f"{wf_ms:11.1f}"
            gaps[1] = f"{level - wf_level:.1e}"
            if wf_ms / 1e3 > args.budget_s:
                too_slow.add("wf")
        print(f"{k:>8} {row['linear']} {row['LP']} {row['wf']}  {gaps[0]:>13}  {gaps[1]:>11}", flush=True)


if __name__ == "__main__":
    main()
