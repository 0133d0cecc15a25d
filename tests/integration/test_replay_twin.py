"""`autoscaler run --replay --cluster twin`: the daemon's slot loop on the cluster twin, its bill at the
end, and its flags refused before any work when out of range."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autoscaler.app.cli import main
from autoscaler.app.replay_jobs import trace_jobs
from autoscaler.app.traces import SHIPPED
from autoscaler.core.workload import read_swim, workload_from_trace

TRACE_A = Path(__file__).parents[2] / "autoscaler" / "data" / SHIPPED["A"].file_name


def bill_row(out: str, label: str) -> str:
    match = re.search(rf"{re.escape(label)}\s*│\s*([^│]+?)\s*│", out)
    assert match, f"no row {label!r} in:\n{out}"
    return match.group(1)


def test_the_twins_bill_of_workload_a_does_the_traces_work_and_prices_its_energy_under_carbon(flat_signal, capsys):
    # A flat 200 gCO2eq/kWh over four days: the bill's kg must be its kWh x 0.2, whatever the nodes did.
    carbon = flat_signal(200, 96)
    code = main(["run", "--replay", "A", "--policy", "hold", "--cluster", "twin", "--carbon", str(carbon), "--carbon-unit", "gCO2eq/kWh"])
    out = capsys.readouterr().out
    assert code == 0
    assert "the cluster twin's bill" in out
    trace = read_swim(str(TRACE_A))
    slot_s = 300.0
    jobs = trace_jobs(trace, 2, slot_s, workload_from_trace(trace, slot_s=slot_s).n_slots * slot_s)
    assert bill_row(out, "jobs run") == f"{len(jobs):,}"
    # Without --length-error and no drain timing out, busy node-hours are the jobs' estimated lengths.
    assert bill_row(out, "jobs killed at the decommission timeout (runs), run again (jobs)") == "0, 0"
    busy_hours = float(bill_row(out, "booting, idle, busy node-hours").split(", ")[2])
    assert busy_hours == pytest.approx(sum(job.length_s for job in jobs) / 3600, abs=0.006)
    kwh = float(bill_row(out, "energy, kWh").replace(",", ""))
    assert float(bill_row(out, "CO2, kg").replace(",", "")) == pytest.approx(kwh * 0.2, abs=0.002)
    billed_hours = float(bill_row(out, "node-hours billed (per second, 60 s minimum)").replace(",", ""))
    assert float(bill_row(out, "cost, $").replace(",", "")) == pytest.approx(billed_hours * 0.240, abs=0.01)
    assert billed_hours >= busy_hours


def test_the_twin_is_the_default_and_the_instant_cluster_prints_no_bill(capsys):
    assert main(["run", "--replay", "A", "--policy", "hold", "--dry-run"]) == 0
    assert "the cluster twin's bill" in capsys.readouterr().out
    assert main(["run", "--replay", "A", "--policy", "hold", "--dry-run", "--cluster", "instant"]) == 0
    assert "the cluster twin's bill" not in capsys.readouterr().out


def test_a_step_concurrency_that_cannot_drain_the_queue_is_named_not_max_nodes(capsys):
    assert main(["run", "--replay", "A", "--dry-run", "--step-concurrency", "1"]) == 2
    err = capsys.readouterr().err
    assert "under --step-concurrency 1 the queue cannot drain" in err
    assert "1 step(s) at once x the" in err
    assert "--max-nodes" not in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--cluster", "twin", "--provision-s", "-5"], "--provision-s (provision_s): expected a finite number >= 0 and <= 3600, got -5.0"),
        (["--cluster", "twin", "--provision-s", "1e9"], "--provision-s (provision_s): expected a finite number >= 0 and <= 3600, got 1000000000.0"),
        (["--cluster", "twin", "--price-per-node-hour", "0"], "--price-per-node-hour (price_per_node_hour): expected a finite number > 0"),
        (["--cluster", "twin", "--price-per-node-hour", "nan"], "--price-per-node-hour (price_per_node_hour): expected a finite number > 0 and <= 1000, got nan"),
        (["--cluster", "twin", "--length-error", "-0.5"], "--length-error (length_error_sigma): expected a finite number >= 0 and <= 5, got -0.5"),
        (["--cluster", "twin", "--step-concurrency", "0"], "--step-concurrency (step_concurrency): expected a whole number in 1..256"),
        (["--cluster", "twin", "--step-concurrency", "300"], "got 300"),
        (["--cluster", "instant", "--provision-s", "30"], "--provision-s: for the cluster twin only, and this replay runs on --cluster instant"),
    ],
)
def test_bad_twin_flags_are_refused_naming_the_flag_and_value_before_any_work(flags, message, tmp_path, capsys):
    store = tmp_path / "replay.db"
    assert main(["run", "--replay", "A", "--store", str(store), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not store.exists()  # refused before the store was opened
