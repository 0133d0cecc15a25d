"""Decision as the decision log stores it: the JSON round trip, and logs written before it had one."""

from __future__ import annotations

import dataclasses
import json

import pytest

from autoscaler.controller import ControllerConfig, Decision, PolicyState, tick
from autoscaler.errors import StoreError
from autoscaler.model import Job, StepSpec

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
    assert decision.assigned == 1.5 and decision.work == 1.5
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
    decision = dataclasses.replace(decision, solve_ms=1.25)
    document = decision.to_json()
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
