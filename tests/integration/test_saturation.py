"""A saturated cluster is kept busy: under overload the slot loop releases steps ahead of the nodes.

When the work due exceeds ``max_nodes``, EMR queues the steps released and YARN starts the next one
the moment a node frees. Releasing one short job per free node per slot left a capped cluster idle
for most of each slot (FB-2009 at 20 nodes did not finish in twice its horizon, where managed
scaling, which releases every job at once, did). Figures here are worked by hand from the rule in
``autoscaler.core.release`` (the slot's node time at the cap less what the running jobs still need,
then ``OVERLOAD_AHEAD_SLOTS`` of it more, less the work EMR still holds PENDING; the cap
binds ahead when the queued work does not fit the nodes the arriving work leaves spare), or read
off the twin's own records.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app.cli import main
from autoscaler.app.compare import CompareInputs, policy_on_twin
from autoscaler.app.config import Settings
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.release import MAX_ACTIVE_STEPS, OVERLOAD_AHEAD_SLOTS, dispatch
from autoscaler.core.twin import TwinConfig

TAU = 300.0


def job(job_id: str, length_s: float, tenant: str = "t", submit_s: float = 0.0, slack_s: float = 0.0, **fields) -> Job:
    return Job(job_id, job_id, tenant, submit_s, submit_s + length_s + slack_s, length_s, StepSpec(args=("true",)), **fields)


@dataclass(frozen=True)
class Limits:
    """A NodeLimits: 5-minute slots from 0, no due margin."""

    max_nodes: int
    slot_s: float = TAU
    epoch_s: float = 0.0
    min_nodes: int = 0
    due_margin_slots: int = 0


def limits(max_nodes: int) -> Limits:
    return Limits(max_nodes)


# -- the rule, by hand --------------------------------------------------------------------------


def test_a_capped_cluster_gets_two_slots_of_node_time_not_one_job_per_node():
    # 2 nodes, 100 due 30-s jobs: 2 nodes x 300 s = 600 node-seconds for the slot (20 jobs) and as
    # much again to wait PENDING (20 more): 40, where one job a free node gave 2.
    assert OVERLOAD_AHEAD_SLOTS == 1
    queued = [job(f"j{i:03d}", 30.0) for i in range(100)]
    d = dispatch(0, 0.0, queued, limits(2), work_model="node-seconds")
    assert d.overloaded
    assert d.release == tuple(f"j{i:03d}" for i in range(40))
    assert d.nodes == 2
    assert d.node_s_released == pytest.approx(1200.0)


def test_steps_still_pending_count_against_the_next_release():
    # Slot 1: 10 released at slot 0 still wait, PENDING (state "released"), 30 s each; one runs since
    # 290 s (10 s of it left). The slot: 600 - 300 - 10 = 290 node-seconds, 9 jobs fill 270 and a 10th
    # starts in the 20 left. Ahead, over this slot and the next: 2 x 600 - 300 PENDING - 10 running -
    # 300 just released = 590: 19 more fill 570 and a 20th starts in the 20 left. 30 in all, and with
    # the PENDING ones the 2 nodes' 1,200 s are full.
    pending = [job(f"p{i:02d}", 30.0, state="released", released_s=0.0) for i in range(10)]
    started = job("r", 20.0, state="running", released_s=0.0, run_start_s=290.0)
    queued = [job(f"q{i:02d}", 30.0) for i in range(60)]
    d = dispatch(1, 0.0, [*pending, started, *queued], limits(2), work_model="node-seconds")
    assert d.overloaded
    assert d.node_s_running == pytest.approx(310.0)
    assert d.release == tuple(f"q{i:02d}" for i in range(30))


def test_a_running_job_counts_from_its_start_not_its_release():
    # Released at 0, PENDING behind others, started at 250 s: at 300 s it still needs 200 s of its 250
    # (counted from its release, 0 s would be left, and it would be counted again as a whole 250).
    from autoscaler.core.release import running_need_s

    started = job("r", 250.0, state="running", released_s=0.0, run_start_s=250.0)
    assert running_need_s(started, 300.0, TAU) == pytest.approx(200.0)
    unseen = job("u", 250.0, state="running", released_s=0.0)
    assert running_need_s(unseen, 300.0, TAU) == pytest.approx(250.0)


def test_tenants_share_the_node_time_by_dominant_share_in_node_seconds():
    # One node, two tenants of equal share: a's jobs take 60 s, b's 30 s. The 600 node-seconds (the
    # slot and one ahead) are filled and split within one of a's jobs of 300 / 300; one job per turn
    # would give a twice b's time (400 / 200).
    queued = [job(f"a{i:02d}", 60.0, "a") for i in range(20)] + [job(f"b{i:02d}", 30.0, "b") for i in range(20)]
    d = dispatch(0, 0.0, queued, limits(1), dominant_shares={"a": 0.5, "b": 0.5}, work_model="node-seconds")
    a_s = sum(60.0 for i in d.release if i.startswith("a"))
    b_s = sum(30.0 for i in d.release if i.startswith("b"))
    assert 600.0 <= a_s + b_s < 660.0
    assert abs(a_s - b_s) <= 60.0


def test_the_cap_binds_ahead_when_held_work_would_not_fit_the_nodes_arrivals_leave_spare():
    # 4 nodes, nothing due now: 10 jobs of 300 s due by slot 3. At the cap they fit (4 x 4 slots =
    # 16 node-slots >= 10), so with no arrivals nothing is forced. With work arriving at 3.5 nodes a
    # slot, 0.5 node is spare: 2 node-slots by slot 3 < 10, so every node is fed now.
    queued = [job(f"j{i}", 300.0, slack_s=3 * TAU) for i in range(10)]
    calm = dispatch(0, 0.0, queued, limits(4), work_model="node-seconds", arrival_nodes=0.0)
    busy = dispatch(0, 0.0, queued, limits(4), work_model="node-seconds", arrival_nodes=3.5)
    assert not calm.overloaded and calm.release == ()
    assert busy.overloaded and len(busy.release) == 8  # a slot of 4 nodes, and as much ahead


def test_at_the_cap_a_short_job_due_sooner_goes_before_a_long_one_due_later():
    # One node, all of it wanted by the arrivals ahead: the cap binds. S (60 s) is due at 1,000 s, L
    # (2,000 s) at 2,400 s: L's start-by slot (400 s: slot 1) comes before S's (940 s: slot 3), but
    # S's deadline before L's. Both are released (the slot and one ahead), S first, so EMR's queue runs
    # S at 0-60 s and L at 60-2,060 s: both on time. By start-by slot, L would run first and S end at
    # 2,060 s, 1,060 s late.
    short, long = job("S", 60.0, slack_s=940.0), job("L", 2000.0, submit_s=0.0, slack_s=400.0)
    d = dispatch(0, 0.0, [long, short], limits(1), work_model="node-seconds", arrival_nodes=1.0)
    assert d.overloaded
    assert d.release == ("S", "L")


def test_the_paper_job_slots_model_still_gives_each_job_a_node_of_its_own():
    queued = [job(f"j{i:03d}", 30.0) for i in range(100)]
    d = dispatch(0, 0.0, queued, limits(2), work_model="job-slots")
    assert d.overloaded and len(d.release) == 2


# -- on the twin: no node idles while a job that fits it waits -----------------------------------


def run_on_twin(jobs: list[Job], policy: str, max_nodes: int, deadline_slots: int, provision_s: float):
    window_slots = max(1, math.ceil(max(j.submit_s for j in jobs) / TAU) + 1)
    inputs = CompareInputs(
        tuple(sorted(jobs, key=lambda j: j.submit_s)),
        window_slots,
        Settings(work_model="node-seconds", deadline_slots=deadline_slots),
        TwinConfig(provision_s=provision_s),
        0,
        max_nodes,
    )
    return policy_on_twin(inputs, policy, deadline_slots)


def idle_while_waiting_s(twin, jobs: list[Job]) -> float:
    """The longest time any usable node was idle (up, not booting, no job) while a job the daemon had
    been given (from the first slot start at or after its submit time) was not yet released to the
    twin: what releasing ahead must keep to rounding. Read from the twin's node and run records."""
    seen_s = {j.job_id: math.ceil(j.submit_s / TAU) * TAU for j in jobs}
    waits = sorted((seen_s[step.job_id], step.added_s) for step in twin.steps.values() if step.added_s > seen_s[step.job_id])
    busy: dict[int, list[tuple[float, float]]] = {}
    for _, node_id, start_s, end_s, _ in twin.runs:
        busy.setdefault(node_id, []).append((start_s, end_s))
    worst = 0.0
    for node in twin.nodes.values():
        end_s = node.removed_s if node.removed_s is not None else twin.now_s
        at = node.usable_s
        idle = []
        for start_s, stop_s in sorted(busy.get(node.node_id, [])):
            if start_s > at:
                idle.append((at, start_s))
            at = max(at, stop_s)
        if end_s > at:
            idle.append((at, end_s))
        for idle_from, idle_to in idle:
            overlap = sum(max(0.0, min(idle_to, w_to) - max(idle_from, w_from)) for w_from, w_to in waits)
            worst = max(worst, min(overlap, idle_to - idle_from))
    return worst


@st.composite
def bursts(draw):
    """A burst beyond the cap: (max_nodes, [(length_s, tenant, submit_s)]), 1-6 nodes, jobs of 1 s to
    3 slots submitted in the first 3 slots, at least three slots of the cap's node time in all."""
    max_nodes = draw(st.integers(1, 6))
    spec = draw(
        st.lists(
            st.tuples(st.one_of(st.integers(1, 900), st.sampled_from([1, 30, 299, 300, 301])), st.sampled_from("ab"), st.integers(0, 899)),
            min_size=5,
            max_size=60,
        )
    )
    assume(sum(length for length, _, _ in spec) >= 3 * max_nodes * TAU)
    return max_nodes, spec


@settings(max_examples=25, deadline=None)
@given(spec=bursts(), policy=st.sampled_from(["hold", "follow", "gcp-u"]), deadline_slots=st.sampled_from([0, 1]), provision_s=st.sampled_from([0.0, 330.0]))
def test_with_work_beyond_the_cap_no_usable_node_idles_while_a_job_waits_unreleased(spec, policy, deadline_slots, provision_s):
    max_nodes, lengths = spec
    jobs = [job(f"j{i:02d}", float(length), tenant, submit_s=float(submit)) for i, (length, tenant, submit) in enumerate(lengths)]
    twin = run_on_twin(jobs, policy, max_nodes, deadline_slots, provision_s)
    assert all(step.end_s is not None for step in twin.steps.values())
    assert len(twin.steps) == len(jobs)
    assert twin.peak_nodes <= max_nodes
    assert idle_while_waiting_s(twin, jobs) <= 1.0


def test_the_idle_measure_sees_a_node_left_idle_while_a_job_waits():
    # The measure itself, on a loop that cannot release ahead: the paper's job-slots model gives each
    # 30-s job a whole slot's node, so a capped node idles 270 s of each slot while jobs wait.
    jobs = [job(f"j{i:02d}", 30.0) for i in range(12)]
    inputs = CompareInputs(tuple(jobs), 1, Settings(work_model="job-slots", deadline_slots=0), TwinConfig(provision_s=0.0), 0, 2)
    twin = policy_on_twin(inputs, "follow", 0)
    assert idle_while_waiting_s(twin, jobs) == pytest.approx(270.0)


# -- the shipped traces drain at a cap far below their load ---------------------------------------


@pytest.mark.parametrize("trace", ["A", "B"])
def test_fb_2009_at_20_nodes_drains_with_no_more_node_hours_kwh_or_overran_jobs_than_managed(trace, capsys):
    # Through the command line, as an operator runs it: at 20 nodes the day's work takes about 32
    # hours. At 12 h hold once deferred A's night into a day at the cap (1,411 jobs overran, managed 417).
    argv = ["compare", "--trace", trace, "--max-nodes", "20", "-D", "2h,12h", "--policy", "hold,follow,managed", "--format", "json", "--workers", "1"]
    assert main(argv) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    for deadline_slots in (24, 144):
        at = {r["name"]: r for r in runs if r["deadline_slots"] == deadline_slots}
        managed = at.pop("managed")
        for name, ours in at.items():
            assert ours["jobs"] == managed["jobs"], (name, deadline_slots)
            assert ours["node_hours"] <= managed["node_hours"], (name, deadline_slots)
            assert ours["energy_kwh"] <= managed["energy_kwh"], (name, deadline_slots)
            assert ours["jobs_finished_after_deadline"] <= managed["jobs_finished_after_deadline"], (name, deadline_slots)


@settings(max_examples=300, deadline=None)
@given(
    spec=st.lists(st.tuples(st.one_of(st.floats(1.0, 2000.0), st.sampled_from([30.0, 300.0, 600.0])), st.integers(0, 8), st.sampled_from([1, 1, 2])), min_size=1, max_size=8),
    max_nodes=st.integers(1, 5),
    slot=st.integers(0, 3),
    running_s=st.sampled_from([0.0, 150.0, 600.0]),
    arrival_nodes=st.sampled_from([0.0, 0.5, 2.0, 6.0]),
)
def test_the_cap_binds_ahead_exactly_when_some_horizon_holds_more_due_work_than_the_spare_nodes(spec, max_nodes, slot, running_s, arrival_nodes):
    # By brute force over every horizon h: each job due by h (start-by slot s <= h) must have had
    # min(length, (h - s + 1) slots) x w by the end of h; against (max_nodes - arrivals) x the slots to h.
    from autoscaler.core.edf import start_by_slot
    from autoscaler.core.release import _cap_binds

    lim = limits(max_nodes)
    jobs = sorted(
        (Job(f"j{i}", "n", "t", 0.0, s * TAU + 1.0 + length, length, StepSpec(), nodes=w) for i, (length, s, w) in enumerate(spec)),
        key=lambda j: start_by_slot(j, lim),
    )
    starts = [max(start_by_slot(j, lim), slot) for j in jobs]
    spare_s = (max_nodes - arrival_nodes) * TAU
    expected = spare_s <= 0 or any(
        running_s + sum(min(j.length_s, (h - s + 1) * TAU) * j.nodes for j, s in zip(jobs, starts) if s <= h) > (h - slot + 1) * spare_s + 1e-6
        for h in set(starts)
    )
    assert _cap_binds(jobs, slot, running_s, lim, arrival_nodes) == expected


def test_a_cap_busy_with_long_jobs_keeps_pending_only_what_frees_before_the_next_slot():
    # 2 nodes, each running a job with 1,000 s left: nothing frees in this slot or the next (600 s),
    # so nothing goes ahead; counted for this slot only, 2 nodes x 300 s of 1-h jobs (2 of them) would
    # wait PENDING, holding the next due job behind them for an hour.
    running = [job(f"r{i}", 1300.0, state="running", released_s=0.0, run_start_s=0.0) for i in range(2)]
    queued = [job(f"q{i}", 3600.0) for i in range(4)]
    d = dispatch(1, 0.0, [*running, *queued], limits(2), work_model="node-seconds")
    assert d.overloaded and d.release == ()
    # One of them ends at 400 s (100 s into the slot): 200 s of this slot and 300 of the next are free
    # on its node, so one 1-h job (500 s of the horizon) goes, and no second.
    running[0] = job("r0", 400.0, state="running", released_s=0.0, run_start_s=0.0)
    d = dispatch(1, 0.0, [*running, *queued], limits(2), work_model="node-seconds")
    assert d.release == ("q0",)


def test_at_the_cap_a_long_job_at_its_start_by_slot_goes_before_short_ones_due_later():
    # 1 node, slot 2. A 3,000-s job must start in this slot (the nodes' lead time is 0 here) to meet
    # its deadline; ten 60-s jobs due before it have slack. By deadline alone they took the node and
    # the long job overran; it goes first, since it fits the node (its 300 s of the slot).
    long = job("long", 3000.0, slack_s=600.0)  # deadline 3,600 s: start by 600 s, slot 2
    short = [job(f"s{i}", 60.0, slack_s=2940.0) for i in range(10)]  # deadline 3,000 s
    d = dispatch(2, 0.0, [long, *short], limits(1), work_model="node-seconds")
    assert d.overloaded and d.release[0] == "long"
    # Two such jobs do not fit one node: one is late whatever is done, and the fewest late is by deadline.
    other = job("other", 3000.0, slack_s=601.0)
    d = dispatch(2, 0.0, [long, other, *short], limits(1), work_model="node-seconds")
    assert d.release[0] == "s0"


def test_at_the_cap_a_job_past_its_length_error_margin_but_not_its_estimate_is_still_on_time():
    # Slot 2, 1 node. "a" needs 300 s by 1,250 s: by its estimate it can start until slot 3, by its
    # 600-s margin it was due in slot 1. "b" (deadline 650 s) is late whatever happens. Classed by the
    # margin both were overdue and b, due sooner, took the node; a can still be on time, so it goes.
    a = job("a", 300.0, slack_s=950.0, start_margin_s=600.0)
    b = job("b", 300.0, slack_s=350.0)
    d = dispatch(2, 0.0, [a, b], limits(1), work_model="node-seconds")
    assert d.overloaded and d.release[0] == "a"


# -- EMR's limit of 256 steps PENDING and RUNNING ------------------------------------------------


def test_a_slot_adds_no_more_steps_than_emr_holds_pending_and_running():
    # 250 steps are out (state "released": PENDING at EMR), 100 30-s jobs are due at 300 nodes: all
    # 100 fit the nodes, but EMR holds 256 steps PENDING and RUNNING, so the slot adds q000-q005 and
    # keeps the other 94, in order, for when steps end.
    out = [job(f"p{i:03d}", 3600.0, state="released", released_s=0.0) for i in range(MAX_ACTIVE_STEPS - 6)]
    queued = [job(f"q{i:03d}", 30.0) for i in range(100)]
    d = dispatch(1, 0.0, [*out, *queued], limits(300), work_model="node-seconds")
    assert d.release == tuple(f"q{i:03d}" for i in range(6))
    assert d.step_limited == tuple(f"q{i:03d}" for i in range(6, 100))
    assert d.queue_depth == 100 - 6
    assert d.running == MAX_ACTIVE_STEPS


def test_with_256_steps_out_a_slot_adds_none_and_says_why():
    out = [job(f"p{i:03d}", 3600.0, state="released", released_s=0.0) for i in range(MAX_ACTIVE_STEPS)]
    d = dispatch(1, 0.0, [*out, job("q", 30.0)], limits(300), work_model="node-seconds")
    assert d.release == ()
    assert d.step_limited == ("q",)


def active_steps_peak(twin) -> int:
    """The most steps PENDING or RUNNING at once on the twin, from its records: +1 when a step is
    added, -1 when it ends (an end before an add at the same time)."""
    events = sorted([(s.added_s, 1) for s in twin.steps.values()] + [(s.end_s, -1) for s in twin.steps.values()])
    peak = active = 0
    for _, change in events:
        active += change
        peak = max(peak, active)
    return peak


@pytest.mark.parametrize("policy", ["hold", "follow"])
def test_a_burst_beyond_256_steps_runs_every_job_within_emrs_step_limit_and_keeps_the_nodes_busy(policy):
    # 3,000 30-s jobs at once on up to 300 nodes: the twin refuses a step beyond 256 PENDING and
    # RUNNING as EMR does (the job would fail), and 256 run at once, so none can wait PENDING: each
    # node freed takes the next job at the daemon's next poll between slots (release_poll_s, 30 s),
    # not at the next slot.
    jobs = [job(f"j{i:04d}", 30.0, slack_s=4 * 3600.0) for i in range(3000)]
    twin = run_on_twin(jobs, policy, 300, 48, 0.0)
    assert len(twin.steps) == len(jobs)
    assert all(step.end_s is not None for step in twin.steps.values())
    assert active_steps_peak(twin) <= MAX_ACTIVE_STEPS
    assert idle_while_waiting_s(twin, jobs) <= Settings().release_poll_s + 1e-6


def test_run_replay_counts_the_jobs_added_between_slots_as_released_not_late(tmp_path, capsys):
    # 600 jobs of a minute at once, 300 nodes, D = 2 slots: the first slot adds 256 and the polls
    # between slots the rest as steps end. The summary counts them all released and, as the store's
    # own late list says (an independent count), none late.
    trace = tmp_path / "burst.tsv"
    trace.write_text("".join(f"b{i:03d}\t{i * 0.05:.2f}\t0\t{64 * 2**20}\t0\t0\n" for i in range(600)))
    store_path = tmp_path / "replay.db"
    assert main(["run", "--replay", str(trace), "--max-nodes", "300", "-D", "2", "--store", str(store_path)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    released = int(re.search(r"jobs released │ ([\d,]+)", printed).group(1).replace(",", ""))
    late = int(re.search(r"jobs late \(missed their deadline\) │ ([\d,]+)", printed).group(1).replace(",", ""))
    with SqliteJobStore(store_path) as store:
        decided = sum(len(d["release"]) for d in store.decisions())
    assert main(["jobs", "--store", str(store_path), "--state", "late", "--format", "json"]) == 0
    listed_late = len(json.loads(capsys.readouterr().out))
    assert decided < 600  # some were added between slots
    assert released == 600
    assert late == listed_late == 0
