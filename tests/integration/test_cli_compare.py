"""`autoscaler compare`: every policy and baseline on the same twin and jobs, checked against what must
hold whatever the policies decide (the same work everywhere, the bound below everything, the carbon
signal's arithmetic), its outputs, and its refusals before any work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from autoscaler.app.cli import main
from autoscaler.app.traces import SHIPPED

TRACE_A = Path(__file__).parents[2] / "autoscaler" / "data" / SHIPPED["A"].file_name
EVERY_RUN = ("hold", "gcp-u", "vfw", "follow", "gcp", "fixed", "managed", "managed-dampened", "custom-rules", "bound")


@pytest.fixture(scope="module")
def three_hours(tmp_path_factory) -> Path:
    """Workload A's first three hours: about 700 real jobs, a few seconds a compare."""
    lines = [line for line in TRACE_A.read_text().splitlines() if float(line.split("\t")[1]) < 3 * 3600]
    path = tmp_path_factory.mktemp("trace") / "a-3h.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def document(three_hours, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("out")
    import contextlib
    import io

    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert main(["compare", "--trace", str(three_hours), "-D", "30m,1h", "--format", "json", "--out", str(out), "--workers", "2"]) == 0
    return json.loads(text.getvalue()), out


def test_every_run_at_every_deadline_does_the_same_work_and_none_beats_the_bound(document):
    doc, _ = document
    runs = doc["runs"]
    assert sorted({(r["name"], r["deadline_slots"]) for r in runs}) == sorted((name, d) for name in EVERY_RUN for d in (6, 12))
    for d in (6, 12):
        at_d = {r["name"]: r for r in runs if r["deadline_slots"] == d}
        bound = at_d.pop("bound")
        busy = {name: r["busy_node_hours"] for name, r in at_d.items()}
        # Without --length-error every job runs its estimate: the same busy node-hours under every run,
        # and the bound's work is that too.
        assert max(busy.values()) - min(busy.values()) < 1e-6, busy
        assert bound["busy_node_hours"] == pytest.approx(busy["managed"], rel=1e-9)
        for name, r in at_d.items():
            assert r["jobs"] == doc["jobs"], name
            assert r["node_hours"] >= r["busy_node_hours"] - 1e-9, name
            assert r["node_hours"] >= bound["node_hours"] - 1e-6, name
            assert r["energy_kwh"] >= bound["energy_kwh"] - 1e-6, name
            assert r["cost_usd"] == pytest.approx(r["node_hours"] * doc["twin"]["price_per_node_hour_usd"], rel=1e-9)
        # The baselines release every job when it is submitted: none late.
        for name in ("fixed", "managed", "managed-dampened", "custom-rules"):
            assert at_d[name]["jobs_released_late"] == 0, name


def test_the_json_names_each_figures_unit_and_the_png_is_written(document):
    doc, out = document
    assert set(doc["units"]) >= {"node_hours", "cost_usd", "energy_kwh", "co2_kg", "wait_p50_s", "wait_p95_s", "jobs_finished_after_deadline"}
    assert doc["deadline_s"] == [1800.0, 3600.0]
    assert json.loads((out / "compare.json").read_text()) == doc
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_worker_and_two_give_the_same_figures(three_hours, capsys):
    argv = ["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "hold,managed,fixed,bound", "--format", "json"]
    assert main([*argv, "--workers", "1"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert main([*argv, "--workers", "2"]) == 0
    assert json.loads(capsys.readouterr().out) == one


def test_a_flat_carbon_signal_makes_every_runs_kg_its_kwh_times_the_intensity(three_hours, flat_signal, capsys):
    carbon = flat_signal(250, 48)
    argv = ["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "hold,fixed,managed,bound", "--format", "json"]
    assert main([*argv, "--carbon", str(carbon), "--carbon-unit", "gCO2eq/kWh"]) == 0
    # fixed's nodes boot before the trace's start: that energy is in its kWh and in its kg.
    for run in json.loads(capsys.readouterr().out)["runs"]:
        assert run["co2_kg"] == pytest.approx(run["energy_kwh"] * 0.250, rel=1e-6), run["name"]
        assert run["co2_uncovered_slots"] in (0, None), run["name"]


def test_a_carbon_signal_shorter_than_the_runs_is_said_and_the_bound_still_priced(three_hours, flat_signal, capsys):
    carbon = flat_signal(400, 2)
    argv = ["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "hold,bound", "--format", "json"]
    assert main([*argv, "--carbon", str(carbon), "--carbon-unit", "gCO2eq/kWh"]) == 0
    captured = capsys.readouterr()
    runs = {r["name"]: r for r in json.loads(captured.out)["runs"]}
    assert runs["hold"]["co2_uncovered_slots"] > 0
    assert runs["hold"]["co2_kg"] < runs["hold"]["energy_kwh"] * 0.4
    assert 0 < runs["bound"]["co2_kg"] <= runs["hold"]["co2_kg"]
    assert "its kgCO2 is over the slots --carbon covers" in captured.err


def test_under_a_length_error_the_bound_counts_the_same_true_work_as_every_run(three_hours, capsys):
    argv = ["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "hold,managed,bound", "--length-error", "1.5", "--format", "json"]
    assert main(argv) == 0
    runs = {r["name"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert runs["bound"]["busy_node_hours"] == pytest.approx(runs["managed"]["busy_node_hours"], rel=1e-9)
    assert runs["hold"]["busy_node_hours"] == pytest.approx(runs["managed"]["busy_node_hours"], rel=1e-9)
    for name in ("hold", "managed"):
        assert runs[name]["node_hours"] >= runs["bound"]["node_hours"] - 1e-6


def test_why_jobs_overran_adds_up_and_the_table_shows_it(three_hours, capsys):
    argv = ["compare", "--trace", str(three_hours), "-D", "30m", "--policy", "hold,managed", "--length-error", "1.5"]
    table, document = _table_and_json(argv, capsys)
    overran = 0
    for run in document["runs"]:
        causes = (run["overran_too_long"], run["overran_held"], run["overran_waited"])
        assert sum(causes) == run["jobs_finished_after_deadline"]
        overran += run["jobs_finished_after_deadline"]
        lines = [line for line in table.splitlines() if line.startswith("│ 30 min") and f" {run['name']} " in line]
        assert [[cell.strip() for cell in line.split("│")[3:-1]] for line in lines] == [[f"{n:,}" for n in (run["jobs_finished_after_deadline"], *causes)]]
    assert overran > 0 and "Why jobs overran" in table


def test_a_policy_that_cannot_drain_its_queue_is_a_row_that_says_so_and_the_others_stand(capsys, monkeypatch):
    # At 20 nodes Workload A takes about 32 hours; a loop cut at its horizon plus one slot (as if it
    # had stopped releasing) cannot drain it.
    from autoscaler.app import compare, replay_daemon

    monkeypatch.setattr(compare, "drain_end_slot", lambda horizon, *_: horizon + 1)
    monkeypatch.setattr(replay_daemon, "replay_end_slot", lambda horizon: horizon + 1)
    argv = ["compare", "--trace", "A", "-D", "30m", "--policy", "hold,managed", "--max-nodes", "20", "--format", "json", "--workers", "1"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    runs = {r["name"]: r for r in json.loads(captured.out)["runs"]}
    assert "cannot run them" in runs["hold"]["error"] and "node_hours" not in runs["hold"]
    assert runs["managed"]["error"] is None and runs["managed"]["jobs"] > 0
    assert "warning: hold at D = 30 min (6 slots) did not finish" in captured.err


def test_under_a_cap_below_what_the_deadlines_need_the_bound_names_the_smallest_cap_that_works(three_hours, capsys):
    argv = ["compare", "--trace", str(three_hours), "-D", "30m", "--policy", "hold,bound", "--max-nodes", "2", "--format", "json", "--workers", "1"]
    assert main(argv) == 0
    runs = {r["name"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    note = runs["bound"]["note"]
    needed = int(re.search(r"the deadlines need at least (\d+) nodes?, more than the cap of 2", note).group(1))
    assert f"give --max-nodes {needed} or more" in note
    # Checked by the LP itself on the same load: feasible at that cap, infeasible one node below.
    from autoscaler.app.cli.compare import _inputs
    from autoscaler.app.config import Settings
    from autoscaler.core.errors import InfeasibleError
    from autoscaler.core.twin import TwinConfig
    from autoscaler.core.twin_bound import twin_load, twin_lower_bound

    inputs = _inputs(str(three_hours), Settings(), TwinConfig(), None, 0, 2, None, 6, None, None)
    jobs = inputs.jobs_at(6)
    load = twin_load(jobs, inputs.twin, 300.0, 0.0, inputs.window_slots)
    twin_lower_bound(load, 6, 300.0, inputs.twin, max_nodes=needed)
    with pytest.raises(InfeasibleError):
        twin_lower_bound(load, 6, 300.0, inputs.twin, max_nodes=needed - 1)
    # Within a cap the deadlines fit, the bound says it holds within it.
    assert main([*argv[:-4], "--max-nodes", str(needed + 5), "--format", "json", "--workers", "1"]) == 0
    runs = {r["name"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert f"within the cap of {needed + 5} usable nodes (--max-nodes)" in runs["bound"]["note"]


def test_the_table_sets_each_run_against_managed_and_names_the_fixed_size(three_hours, capsys):
    assert main(["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "hold,managed,fixed", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "(%) against managed" in out
    assert re.search(r"hold\s*│\s*[\d,.]+ \([+-]\d+\.\d%\)", out)
    assert re.search(r"fixed: \d+ nodes always on", out)


def test_the_json_names_per_deadline_the_managed_variant_with_the_least_kwh_and_keeps_the_figures_raw(document):
    doc, _ = document
    by_deadline = doc["reference"]["by_deadline"]
    assert [r["deadline_slots"] for r in by_deadline] == doc["deadline_slots"]
    assert "least energy_kwh" in doc["reference"]["rule"] and doc["managed_dampen_s"] == 120.0
    for entry in by_deadline:
        variants = {r["name"]: r["energy_kwh"] for r in doc["runs"] if r["deadline_slots"] == entry["deadline_slots"] and r["name"].startswith("managed")}
        assert set(variants) == {"managed", "managed-dampened"}
        assert entry["name"] == min(variants, key=variants.get)
    assert all("against" not in key for run in doc["runs"] for key in run)  # no percentages in the JSON


def _table_and_json(argv: list[str], capsys) -> tuple[str, dict]:
    assert main([*argv, "--workers", "1"]) == 0
    table = capsys.readouterr().out
    assert main([*argv, "--workers", "1", "--format", "json"]) == 0
    return table, json.loads(capsys.readouterr().out)


def test_the_table_lists_managed_dampened_and_its_title_names_the_reference_it_is_set_against(three_hours, capsys):
    argv = ["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "hold,managed,managed-dampened"]
    table, doc = _table_and_json(argv, capsys)
    kwh = {r["name"]: r["energy_kwh"] for r in doc["runs"]}
    strongest = min(("managed", "managed-dampened"), key=kwh.get)
    other = ({"managed", "managed-dampened"} - {strongest}).pop()
    assert doc["reference"]["by_deadline"] == [{"deadline_slots": 12, "deadline_s": 3600.0, "name": strongest}]
    assert f"(%) against {strongest}, the managed variant (managed or managed-dampened) with the least kWh" in table
    assert re.search(rf"│ {strongest}\s*│\s*[\d,.]+\s*│", table)  # the reference: no (%)
    assert re.search(rf"│ {other}\s*│\s*[\d,.]+ \(\+\d+\.\d%\)", table)  # the other: above it
    assert "managed-dampened: a step asks for a node once it has waited 120 s" in table


def test_with_no_wait_the_tie_goes_to_managed_and_without_the_dampened_run_managed_is_the_reference(three_hours, capsys):
    argv = ["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "managed,managed-dampened", "--managed-dampen-s", "0"]
    table, doc = _table_and_json(argv, capsys)
    managed, dampened = doc["runs"]
    assert (managed["energy_kwh"], managed["node_hours"]) == (dampened["energy_kwh"], dampened["node_hours"])
    assert doc["reference"]["by_deadline"][0]["name"] == "managed" and "(%) against managed, the managed" in table
    table, doc = _table_and_json(["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "hold,managed"], capsys)
    # With one managed variant run, the title does not speak of a choice among variants.
    assert doc["reference"]["by_deadline"][0]["name"] == "managed" and "(%) against managed" in table
    assert "the managed variant" not in table
    _, doc = _table_and_json(["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "hold"], capsys)
    assert doc["reference"]["by_deadline"][0]["name"] is None


def test_dampened_with_no_wait_bills_workload_a_as_managed_did_before_it_existed(capsys):
    # Workload A at D = 2 h under managed, as `compare --format json` printed it at commit 3f9db85,
    # before managed-dampened: with --managed-dampen-s 0 both runs give those figures to the last bit.
    argv = ["compare", "--trace", "A", "-D", "2h", "--policy", "managed,managed-dampened", "--managed-dampen-s", "0", "--format", "json"]
    assert main([*argv, "--workers", "1"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["name"] for r in runs] == ["managed", "managed-dampened"]
    for run in runs:
        figures = (run["node_hours"], run["energy_kwh"], run["scale_events"], run["peak_nodes"], run["wait_p95_s"])
        assert figures == (850.4702798733703, 72.52224908232654, 2776, 89, 251.0), run["name"]


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "1e9"])
def test_a_bad_managed_dampen_s_is_refused_naming_the_flag_before_the_trace_is_read(value, tmp_path, capsys):
    out = tmp_path / "out"
    missing = tmp_path / "no-such-trace.tsv"
    assert main(["compare", "--trace", str(missing), "--out", str(out), f"--managed-dampen-s={value}"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--managed-dampen-s: expected a finite number of seconds >= 0 and <= 86,400 (a day), got" in err
    assert "no-such-trace" not in err and not out.exists()


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--managed-dampen-s", "two minutes", "argument --managed-dampen-s: invalid float value: 'two minutes'"),
        ("--step-concurrency", "abc", "argument --step-concurrency: expected a whole number in 1..256 (EMR's StepConcurrencyLevel), got 'abc'"),
    ],
)
def test_a_value_that_is_not_a_number_is_refused_by_the_parser_naming_the_flag(tmp_path, capsys, flag, value, message):
    try:
        code = main(["compare", "--trace", str(tmp_path / "no-such-trace.tsv"), flag, value])
    except SystemExit as exited:  # refused by argparse, before any work
        code = exited.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_the_help_gives_managed_dampen_s_its_default(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--managed-dampen-s SECONDS managed-dampened: a step counts as pending work" in help_text
    assert "only once it has waited this long, s; 0 is managed (default: 120.0)" in help_text


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["-D", "abc"], "--deadline: expected"),
        (["-D", "7m"], "--deadline"),
        (["-D", "30d"], "--deadline: D"),
        (["--policy", "hold,nope"], "--policy: expected a comma list of"),
        (["--provision-s", "-5"], "--provision-s (provision_s): expected a finite number >= 0 and <= 3600, got -5.0"),
        (["--provision-s", "1e9"], "--provision-s (provision_s): expected a finite number >= 0 and <= 3600"),
        (["--price-per-node-hour", "0"], "--price-per-node-hour (price_per_node_hour): expected a finite number > 0"),
        (["--price-per-node-hour", "nan"], "--price-per-node-hour (price_per_node_hour): expected a finite number > 0 and <= 1000, got nan"),
        (["--length-error", "-0.1"], "--length-error (length_error_sigma): expected a finite number >= 0 and <= 5, got -0.1"),
        (["--step-concurrency", "0"], "--step-concurrency (step_concurrency): expected a whole number in 1..256"),
        (["--max-nodes", "10", "--fixed-nodes", "11"], "--fixed-nodes 11 is above --max-nodes 10"),
        (["--max-nodes", "10", "--min-nodes", "11"], "--min-nodes 11 is above --max-nodes 10"),
        (["--carbon-unit", "gCO2eq/kWh"], "--carbon-unit without --carbon"),
        (["--policy", "hold,hold"], "--policy: hold given more than once"),
        (["--window", "200000"], "--window 200,000 and --deadline of 72 slots"),
    ],
)
def test_bad_input_is_refused_naming_the_flag_and_value_before_any_work(flags, message, three_hours, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compare", "--trace", str(three_hours), "--out", str(out), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-nodes", "0"], "argument --max-nodes: expected a whole number >= 1, got '0'"),
        (["--length-error", "-1"], "--length-error (length_error_sigma): expected a finite number >= 0 and <= 5, got -1.0"),
        (["--deadline", "-1"], "--deadline: '-1' has a negative deadline (-1)"),
        (["--max-nodes", "10", "--min-nodes", "11"], "--min-nodes 11 is above --max-nodes 10"),
        (["--window", "200000"], "--window 200,000 and --deadline of 72 slots: 200,072 slots, more than the 105,120 compare runs"),
        (["--window", "12", "-D", "30m,2h"], "--deadline: D = 24 slots is longer than the window (12 slots); give a D of at most 12"),
    ],
)
def test_a_flag_out_of_range_is_refused_before_the_trace_is_looked_at(flags, message, tmp_path, capsys):
    missing = tmp_path / "no-such-trace.tsv"  # the flag's refusal comes first, so no trace is opened
    try:
        code = main(["compare", "--trace", str(missing), *flags])
    except SystemExit as exited:  # refused by argparse
        code = exited.code
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and message in err, err
    assert "no-such-trace" not in err


@pytest.mark.parametrize("kind", ["parent is a file", "compare.json is a folder"])
def test_an_out_folder_that_cannot_take_the_files_is_refused_before_any_work(kind, three_hours, tmp_path, capsys):
    if kind == "parent is a file":
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "sub"
        expected = "exists and is not a folder"
    else:
        out = tmp_path / "out"
        (out / "compare.json").mkdir(parents=True)
        expected = "compare.json is a folder"
    assert main(["compare", "--trace", str(three_hours), "--policy", "managed", "--out", str(out)]) == 2
    assert expected in capsys.readouterr().err


def test_a_load_curve_has_no_jobs_to_compare(tmp_path, capsys):
    curve = tmp_path / "load.csv"
    curve.write_text("slot,released\n0,1\n1,2\n")
    assert main(["compare", "--trace", str(curve)]) == 2
    assert "compare needs a SWIM trace of jobs" in capsys.readouterr().err


def test_a_trace_of_two_days_is_compared_whole_by_default(tmp_path, capsys):
    # Workload A's first hour, and again a day later: every job is in the window (576 slots).
    first_hour = [line.split("\t") for line in TRACE_A.read_text().splitlines() if float(line.split("\t")[1]) < 3600]
    shifted = [[f"late-{c[0]}", str(float(c[1]) + 86400), *c[2:]] for c in first_hour]
    trace = tmp_path / "two-days.tsv"
    trace.write_text("\n".join("\t".join(c) for c in first_hour + shifted) + "\n")
    assert main(["compare", "--trace", str(trace), "-D", "1h", "--policy", "managed", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["jobs"], doc["window_slots"]) == (2 * len(first_hour), 576)
    assert doc["runs"][0]["jobs"] == 2 * len(first_hour)


def test_node_seconds_chosen_in_the_config_shares_nodes_and_still_does_all_the_work(three_hours, tmp_path, capsys):
    # compare runs the daemon's slot loop with the config's work_model: under "node-seconds" short
    # jobs share nodes, so fewer node-hours are billed for the same busy node-hours, none below the
    # bound, and no job goes out after its start-by slot.
    runs = {}
    for model in ("job-slots", "node-seconds"):
        config = tmp_path / f"{model}.toml"
        config.write_text(f'work_model = "{model}"\n')
        argv = ["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "hold,follow,bound", "--config", str(config), "--format", "json", "--workers", "1"]
        assert main(argv) == 0
        runs[model] = {r["name"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    bound = runs["node-seconds"]["bound"]
    for name in ("hold", "follow"):
        paper, shared = runs["job-slots"][name], runs["node-seconds"][name]
        assert shared["busy_node_hours"] == pytest.approx(paper["busy_node_hours"], rel=1e-9)
        assert bound["node_hours"] - 1e-6 <= shared["node_hours"] < paper["node_hours"], name
        assert shared["jobs_released_late"] == 0, name


@pytest.mark.parametrize(
    ("config_text", "message"),
    [
        ("restart_penalty = 1e308\n", "restart_penalty: must be <= 1,000,000,000,000, got 1e+308"),
        ('objective = "paper"\nbeta = 1e308\n', "beta: must be <= 1,000,000,000,000"),
        ('objective = "carbon"\n[carbon]\nsource = "deploy/carbon-daily.csv"\nunit = "gCO2eq/kWh"\n', "compare decides carbon-blind"),
    ],
)
def test_costs_that_overflow_and_a_carbon_objective_compare_cannot_follow_are_refused(config_text, message, three_hours, tmp_path, capsys):
    config = tmp_path / "config.toml"
    config.write_text(config_text)
    assert main(["compare", "--trace", str(three_hours), "--policy", "hold", "-D", "1h", "--config", str(config)]) == 2
    assert message in capsys.readouterr().err


def test_run_replay_says_when_the_controller_does_not_count_the_twins_boot(tmp_path, capsys):
    config = tmp_path / "config.toml"
    config.write_text("provision_s = 0\n")
    assert main(["run", "--replay", "A", "--dry-run", "--policy", "follow", "--config", str(config)]) == 0
    captured = capsys.readouterr()
    assert "the config's provision_s is 0 s" in captured.err
    assert "max |m_t - follow planned on the jobs' node time| (autoscaler replay plans job-slots)" in captured.out
    # The default counts the twin's 330 s: no note.
    assert main(["run", "--replay", "A", "--dry-run", "--policy", "hold"]) == 0
    assert "provision_s is" not in capsys.readouterr().err


def test_the_twins_boot_is_what_the_policies_price_a_restart_at(three_hours, capsys):
    # --provision-s 600: the controller is told the twin's boot, for its margin and its costs alike:
    # a restart is 60.30 W x 600 s / 3600 = 10.05 Wh, beta half of it (the default 330 s gives 5.5275).
    assert main(["compare", "--trace", str(three_hours), "--policy", "hold", "-D", "1h", "--provision-s", "600", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["objective"]["beta"] == pytest.approx(60.30 * 600 / 3600 / 2, rel=1e-3)
    assert "boot 600 s" in captured.err


def test_a_deadline_shorter_than_the_boot_is_said(three_hours, capsys):
    assert main(["compare", "--trace", str(three_hours), "--policy", "hold", "-D", "0,1h"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "at D = 0 s (0 slots), less than the 330 s a node takes to be usable" in err
    assert "at D = 1 h" not in err


def test_a_trace_longer_than_compare_runs_is_refused_naming_the_trace_not_a_flag_not_given(tmp_path, capsys):
    trace = tmp_path / "far.tsv"
    trace.write_text("job0\t999999999\t0\t1048576\t0\t0\n")
    assert main(["compare", "--trace", str(trace), "-D", "2h"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{trace}: its jobs are submitted up to 999,999,999 s" in err and "give --window" in err
    assert "--window 3,333,600" not in err


def test_our_runs_plan_on_the_nodes_the_step_concurrency_lets_work(three_hours, capsys):
    # One-node jobs, at most 4 steps at once: a node beyond the 4th never runs a job. Before the daemon
    # was told, hold and follow asked for up to the 40 of --max-nodes through A's bursts, and billed the
    # idle ones; now no more than 4, while every job still runs.
    argv = ["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "hold,follow,managed", "--max-nodes", "40", "--step-concurrency", "4"]
    assert main([*argv, "--format", "json", "--workers", "1"]) == 0
    runs = {r["name"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    for name in ("hold", "follow"):
        assert runs[name]["jobs"] == runs["managed"]["jobs"], name
        assert runs[name]["peak_nodes"] <= 4, name


def test_a_bound_held_back_by_the_step_concurrency_says_to_raise_it_not_the_nodes(three_hours, capsys):
    # 40 nodes but 2 steps at once: the cap is 2 usable nodes. The LP itself names the least cap that
    # meets the deadlines (N feasible, N - 1 not: test above); with one-node jobs it is N steps at once.
    argv = ["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "bound", "--max-nodes", "40", "--step-concurrency", "2"]
    assert main([*argv, "--format", "json", "--workers", "1"]) == 0
    note = json.loads(capsys.readouterr().out)["runs"][0]["note"]
    needed = int(note.split("the deadlines need at least ")[1].split(" node")[0])
    assert 2 < needed <= 40
    assert f"give --step-concurrency {needed} or more (a least cap by LP (3)" in note
    assert "--max-nodes" not in note.split("give ")[1]



def test_with_a_carbon_signal_each_run_has_its_risk_against_follow_by_day(three_hours, flat_signal, capsys):
    carbon = flat_signal(250, 48)
    argv = ["compare", "--trace", str(three_hours), "-D", "1h", "--policy", "hold,follow,managed", "--carbon", str(carbon), "--carbon-unit", "gCO2eq/kWh"]
    assert main([*argv, "--format", "json"]) == 0
    runs = {r["name"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert "carbon_risk" not in runs["follow"]
    for name in ("hold", "managed"):
        risk = runs[name]["carbon_risk"]
        # Three hours: one day, so the expected cut and the worst day are the whole run's against follow's.
        ratio = runs[name]["co2_kg"] / runs["follow"]["co2_kg"]
        assert risk["days"] == 1 and risk["expected_cut"] == pytest.approx(1 - ratio, rel=1e-9) and risk["worst_day_regret"] == pytest.approx(ratio - 1, rel=1e-9)
        assert risk["days_above_follow"] == (ratio > 1)
    assert main(argv) == 0
    assert "Carbon risk against follow (no deferral), by day of the compare" in capsys.readouterr().out


@pytest.mark.parametrize(("max_nodes", "step_concurrency", "noted"), [(30, 4, True), (3, 4, False)])
def test_compare_says_when_the_step_concurrency_keeps_nodes_beyond_it_idle(tmp_path, capsys, max_nodes, step_concurrency, noted):
    trace = tmp_path / "ten.tsv"
    trace.write_text("".join(f"j{i}\t{i}\t0\t{64 * 2**20}\t0\t0\n" for i in range(10)))
    argv = ["compare", "--trace", str(trace), "-D", "2h", "--policy", "follow", "--max-nodes", str(max_nodes)]
    assert main([*argv, "--step-concurrency", str(step_concurrency), "--format", "json"]) == 0
    said = " ".join(capsys.readouterr().err.split())
    note = f"at most {step_concurrency} steps run at once (--step-concurrency, EMR's StepConcurrencyLevel), so no run keeps more than {step_concurrency} of the {max_nodes} nodes"
    assert (note in said) is noted


def test_a_run_that_overran_more_jobs_than_the_reference_is_marked_and_said(three_hours, capsys):
    # Each run's overran cell is marked exactly when its count is above the reference's, by the JSON's counts.
    argv = ["compare", "--trace", str(three_hours), "-D", "0", "--policy", "hold,follow,managed", "--length-error", "1.5"]
    table, document = _table_and_json(argv, capsys)
    overran = {run["name"]: run["jobs_finished_after_deadline"] for run in document["runs"]}
    worse = [name for name in ("hold", "follow") if overran[name] > overran["managed"]]
    for name, count in overran.items():
        row = next(line for line in table.splitlines() if line.startswith(f"│ {name} "))
        assert f" {count:,} *" in row if name in worse else f" {count:,} *" not in row
    if worse:
        assert f"* more jobs overran than managed's {overran['managed']:,} under {', '.join(worse)}" in table
    else:
        assert "more jobs overran than" not in table


def test_jobs_submitted_in_the_last_slot_run_at_d_0(tmp_path, capsys):
    # Three jobs come in the day's last slot, after its decision: the daemon's poll puts them in the store,
    # and the policy must still run them. At D = 0 hold ran 2 of 4 jobs (and looked cheaper) before.
    trace = tmp_path / "last.tsv"
    trace.write_text("j0\t100\t0\t0\t0\t0\nj1\t86350\t0\t0\t0\t0\nj2\t86380\t0\t0\t0\t0\nj3\t86399\t0\t0\t0\t0\n")
    assert main(["compare", "--trace", str(trace), "-D", "0", "--policy", "hold,follow,managed", "--format", "json", "--workers", "1"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert {run["name"]: run["jobs"] for run in document["runs"]} == {"hold": 4, "follow": 4, "managed": 4}
