"""Decision as the decision log stores it: the JSON round trip, and logs written before it had one."""

from __future__ import annotations

import dataclasses
import json

import pytest

from autoscaler.core.controller import ControllerConfig, Decision, PolicyState, explain, tick
from autoscaler.core.errors import StoreError
from autoscaler.core.model import Job, StepSpec

TAU = 300.0

# A decision as the daemon logged it before Decision.to_json: dataclasses.asdict(decision) | {"solve_ms": ...},
# with x_t under its former name.
OLD_LOG = {
    "slot": 17, "capacity": 2.25, "work": 1.5, "nodes": 4, "release": ["a", "b"], "late": ["b"], "at_risk": 1,
    "queue_depth": 3, "running": 4, "rounding_node_slots": 1.75, "overloaded": False, "nodes_wanted": 4,
    "missed": ["b"], "missed_by_tenant": {"ads": 1}, "nodes_by_tenant": {"ads": 3, "etl": 1}, "load": 2.0,
    "worse_than_follow": False, "warning": "", "solve_ms": 0.42,
}  # fmt: skip


def test_an_old_log_entry_reads_with_work_as_assigned():
    decision = Decision.from_json(OLD_LOG)
    assert decision.assigned == 1.5
    assert decision.release == ("a", "b") and decision.late == ("b",) and decision.missed == ("b",)
    assert decision.nodes_by_tenant == {"ads": 3, "etl": 1} and decision.solve_ms == 0.42
    assert (decision.slot, decision.capacity, decision.nodes, decision.queue_depth) == (17, 2.25, 4, 3)


def test_an_older_log_entry_without_load_or_work_takes_the_defaults():
    bare = {k: OLD_LOG[k] for k in ("slot", "capacity", "nodes", "release", "late", "at_risk", "queue_depth", "running", "rounding_node_slots")}
    decision = Decision.from_json(bare)
    assert decision.assigned == 2.25  # x_t = m_t: what every policy but hold runs
    assert (decision.load, decision.overloaded, decision.missed, decision.solve_ms) == (0.0, False, (), 0.0)


def test_to_json_is_plain_json_and_reads_back_equal():
    config = ControllerConfig(policy="follow", slot_s=TAU, max_nodes=1)
    jobs = [Job(f"j{i}", "n", "ads", 0.0, TAU, 60.0, StepSpec(args=("true",))) for i in range(3)]
    decision, _ = tick(0.0, jobs, PolicyState(), config)
    decision = dataclasses.replace(decision, solve_ms=1.25, held_for_steps=("j9", "j8"))
    document = decision.to_json()
    assert document["held_for_steps"] == ["j9", "j8"]
    assert json.loads(json.dumps(document)) == document  # lists, plain numbers and strings only
    assert Decision.from_json(document) == decision
    assert Decision.from_json(json.loads(json.dumps(dataclasses.asdict(decision)))) == decision  # the daemon's asdict too


def test_a_broken_entry_is_refused_naming_the_field():
    with pytest.raises(StoreError, match="no 'nodes'"):
        Decision.from_json({"slot": 1, "capacity": 1.0})
    with pytest.raises(StoreError, match="slot 17: 'release' must be a list of job ids"):
        Decision.from_json(OLD_LOG | {"release": "a"})
    with pytest.raises(StoreError, match="'nodes' must be a whole number"):
        Decision.from_json(OLD_LOG | {"nodes": 2.5})


# -- every decision explains itself: each reason code on a case worked by hand -------------------------


def job(job_id: str, submit_s: float, length_s: float, deadline_s: float, tenant: str = "t", **fields) -> Job:
    return Job(job_id, job_id, tenant, submit_s, deadline_s, length_s, StepSpec(args=("true",)), **fields)


def run(jobs: list[Job], config: ControllerConfig, slots: int) -> list[Decision]:
    """Tick every slot with the jobs submitted so far; released jobs run for their length."""
    live: dict[str, Job] = {}
    state = PolicyState()
    decisions = []
    for t in range(slots):
        live.update({j.job_id: j for j in jobs if config.slot_of(j.submit_s) == t})
        live = {i: j for i, j in live.items() if not (j.state == "running" and j.released_s + j.length_s <= t * TAU)}
        decision, state = tick(t * TAU, list(live.values()), state, config)
        decisions.append(decision)
        for job_id in decision.release:
            live[job_id] = dataclasses.replace(live[job_id], state="running", released_s=t * TAU)
    return decisions


def test_idle_when_there_is_nothing_to_run():
    decision, _ = tick(0.0, [], PolicyState(), ControllerConfig(policy="hold", slot_s=TAU))
    assert (decision.capacity, decision.nodes, decision.reason) == (0.0, 0, "idle")
    assert decision.why == "m_t = 0 and no job is queued or running: no nodes"


def test_follow_runs_what_arrived():
    # Two one-slot jobs due in 3 slots: follow runs m_0 = L_0 = 2 on 2 nodes.
    jobs = [job("a", 0.0, 60.0, 3 * TAU), job("b", 1.0, 60.0, 3 * TAU)]
    decision, _ = tick(0.0, jobs, PolicyState(), ControllerConfig(policy="follow", slot_s=TAU))
    assert (decision.capacity, decision.nodes, decision.reason) == (2.0, 2, "follow")
    assert "m_t = L_t = 2," in decision.why


@pytest.mark.parametrize("policy", ["gcp-u", "hold"])
def test_deadlines_give_the_flat_rate_of_the_queued_work(policy):
    # D = 1, two one-slot units at slot 0: Y = (0, 2), max(0/1, 2/2) = 1 server: 2 units due within 2 slots.
    # No release margin: with one, "b" (start-by slot 1) would be due now and raise the nodes.
    jobs = [job("a", 0.0, 60.0, 2 * TAU), job("b", 1.0, 60.0, 2 * TAU)]
    config = ControllerConfig(policy=policy, deadline_slots=1, slot_s=TAU, release_margin_slots=0)
    decision, _ = tick(0.0, jobs, PolicyState(), config)
    assert (decision.capacity, decision.nodes, decision.reason) == (1.0, 1, "deadlines")
    assert "2 node-slots of work are due within 2 slots" in decision.why and "= 1 =" in decision.why


def test_hold_keeps_servers_on_through_a_valley_it_has_learned():
    # test_hold's load [2, 2, 0, 0, 0] x 12 at D = 0: from the second valley on hold keeps about 2
    # servers on with nothing queued, so the deadlines force r_t = 0 while m_t ~ 2.
    jobs = [job(f"j{t}-{k}", t * TAU, 60.0, t * TAU + 60.0) for t in range(62) if t % 5 < 2 for k in range(2)]
    decisions = run(jobs, ControllerConfig(policy="hold", deadline_slots=0, slot_s=TAU), 62)
    valley = decisions[57]
    assert valley.capacity >= 1.9 and valley.nodes == 2 and valley.release == ()
    assert valley.reason == "held"
    assert "where the deadlines force r_t = 0 (no work is queued in the policy)" in valley.why and "leading rule '" in valley.why
    assert decisions[55].reason == "deadlines"  # a busy slot: 2 units due now, r_t = 2


def test_vfw_fills_a_valley():
    # D = 2, delta = 1; L = (0, 2, 0): at slot 2 L falls back across l^delta (L_1 = 2) with area
    # L_2 - L_1 = -2 < 0, a valley; VOPT may run all 2 units released, spread over 3 slots: m_2 = 2/3.
    jobs = [job("a", TAU, 60.0, 10 * TAU), job("b", TAU + 1, 60.0, 10 * TAU)]
    decisions = run(jobs, ControllerConfig(policy="vfw", deadline_slots=2, slot_s=TAU), 3)
    assert decisions[1].reason == "deadlines" and decisions[1].capacity == 0.0  # LOPT: nothing released by delta slots ago
    assert decisions[1].nodes == 0
    assert decisions[2].reason == "valley" and decisions[2].capacity == pytest.approx(2 / 3)
    assert "slot 1 of 2" in decisions[2].why and "of the 2 units released and not yet run" in decisions[2].why


def test_due_jobs_raise_the_nodes_and_the_first_is_named():
    # gcp-u, D = 1: two units give m_0 = 1, but both jobs start by slot 0 (deadline 0.5 slot, 60 s
    # long): b1 takes the policy's node and b2 (EDF: same start-by, deadline and submit, then id) an extra one.
    jobs = [job("b1", 0.0, 60.0, 0.5 * TAU), job("b2", 0.0, 60.0, 0.5 * TAU)]
    decision, _ = tick(0.0, jobs, PolicyState(), ControllerConfig(policy="gcp-u", deadline_slots=1, slot_s=TAU))
    assert (decision.capacity, decision.nodes, decision.release, decision.reason) == (1.0, 2, ("b1", "b2"), "due_jobs")
    assert "from 1 (ceil(m_t), m_t = 1) to 2 for 1 job at (or past) their start-by slot, first 'b2' (start-by slot 0)" in decision.why


def test_running_jobs_keep_their_nodes():
    # A 60 s job released at slot 0 is still running at slot 1 (EMR says so): follow's m_1 = 0, 1 node kept.
    config = ControllerConfig(policy="follow", slot_s=TAU)
    first, state = tick(0.0, [job("a", 0.0, 60.0, 3 * TAU)], PolicyState(), config)
    assert first.release == ("a",)
    decision, _ = tick(TAU, [job("a", 0.0, 60.0, 3 * TAU, state="running", released_s=0.0)], state, config)
    assert (decision.capacity, decision.nodes, decision.reason) == (0.0, 1, "running")
    assert "for 1 job still running" in decision.why


def test_min_nodes_keep_nodes_on():
    config = ControllerConfig(policy="follow", slot_s=TAU, min_nodes=2)
    decision, _ = tick(0.0, [job("a", 0.0, 60.0, 3 * TAU)], PolicyState(), config)
    assert (decision.capacity, decision.nodes, decision.reason) == (1.0, 2, "min_nodes")
    assert decision.why == "m_t = 1 needs 1 node; min_nodes keeps 2 on"


def test_max_nodes_caps_what_the_policy_wants():
    # Three 3-slot jobs released at slot 0 under max_nodes = 4; then the cap is lowered to 2: follow's
    # m_1 = 3 units of the running jobs, nothing is queued, so the nodes are capped (not overloaded).
    jobs = [job(f"j{i}", 0.0, 3 * TAU, 6 * TAU) for i in range(3)]
    config = ControllerConfig(policy="follow", slot_s=TAU, max_nodes=4)
    first, state = tick(0.0, jobs, PolicyState(), config)
    assert len(first.release) == 3
    running = [dataclasses.replace(j, state="running", released_s=0.0) for j in jobs]
    decision, _ = tick(TAU, running, state, dataclasses.replace(config, max_nodes=2))
    assert (decision.capacity, decision.nodes, decision.overloaded, decision.reason) == (3.0, 2, False, "max_nodes")
    assert decision.why == "m_t = 3 wants 3 nodes, capped at max_nodes = 2"


def test_overload_says_how_the_free_nodes_were_shared():
    # test_controller's three tenants: shares 2/3, 2/3, 1/3, 18 jobs due now, 5 nodes: 2 : 2 : 1.
    demand = {"A": (100.0, 0.0, 0.0), "B": (0.0, 1e9, 0.0), "C": (50.0, 0.0, 0.0)}
    jobs = [job(f"{t}{i}", offset + i, 60.0, offset + i + 60.0, tenant=t, demand_vector=demand[t]) for offset, t in enumerate("ABC") for i in range(6)]
    config = ControllerConfig(policy="follow", slot_s=TAU, max_nodes=5, tenants_n=3)
    decision, _ = tick(0.0, jobs, PolicyState(), config)
    assert decision.reason == "overloaded"
    assert "18 nodes wanted (ceil(m_t) = 18; 0 running and 18 due), more than max_nodes = 5" in decision.why
    assert "the 5 free nodes went by dynamic DRF share, released now: A 2, B 2, C 1" in decision.why


def test_explain_gives_the_slot_in_a_few_lines():
    jobs = [job("b1", 0.0, 60.0, 0.5 * TAU), job("b2", 0.0, 60.0, 0.5 * TAU)]
    decision, _ = tick(0.0, jobs, PolicyState(), ControllerConfig(policy="gcp-u", deadline_slots=1, slot_s=TAU))
    assert explain(decision).splitlines() == [
        "slot 0: m_t = 1 servers, x_t = 1, L_t = 2; 2 nodes",
        "released 2 jobs (b1, b2); 0 of them late; 0 missed their start-by slot",
        "after it: 0 jobs queued (0 with their start-by slot now or next), 2 running",
        f"why (raised for due jobs): {decision.why}",
    ]
    held = dataclasses.replace(decision, held_for_steps=tuple(f"h{i}" for i in range(7)))
    assert explain(held).splitlines()[1].endswith("; 7 jobs held for EMR's step limit (h0, h1, h2, h3, h4, ... (2 more))")
    assert "why (not recorded)" in explain(Decision.from_json(OLD_LOG))
