"""release_margin_slots: a queued job is due that many slots before its start-by slot, so as many
undecided slots in a row never make it late; late and missed still count from the start-by slot."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slot_simulation import simulate_slots

from autoscaler.app.config import load_settings
from autoscaler.core.controller import ControllerConfig, PolicyState, release_by_slot, start_by_slot, tick
from autoscaler.core.errors import ConfigError
from autoscaler.core.lateness import slots_late
from autoscaler.core.model import Job, StepSpec

TAU = 300.0


def job(job_id: str, submit_s: float, length_s: float, deadline_s: float) -> Job:
    return Job(job_id, job_id, "t", submit_s, deadline_s, length_s, StepSpec(args=("true",)))


def simulate(jobs: list[Job], config: ControllerConfig, slots: int, skipped: frozenset[int] = frozenset()):
    """Tick every slot but the ``skipped`` ones (the daemon down); released jobs run for their
    length. Returns the decisions and every job as it ended (released_s set once released)."""
    run = simulate_slots(jobs, config, slots, skipped=skipped)
    return run.decisions, {**run.ended, **run.live}


def late_jobs(ended: dict[str, Job], config: ControllerConfig, now_s: float) -> list[str]:
    """Late by autoscaler.core.lateness (released after its start-by slot, or still queued past it)."""
    return sorted(job_id for job_id, j in ended.items() if slots_late(j, config, now_s) > 0)


def six_jobs_one_node() -> list[Job]:
    """gcp: six one-slot jobs at slot 0, all with start-by slot 5; 6 units over 7 slots give
    m_t = 6/7, one node, so EDF releases one a slot and the last goes in its start-by slot, 5."""
    return [job(f"j{i}", 0.0, 60.0, 6 * TAU + 30.0) for i in range(6)]


def test_without_a_margin_losing_the_start_by_slot_makes_a_job_late_and_with_one_it_does_not():
    config = ControllerConfig(policy="gcp", slot_s=TAU, max_deadline_slots=12, release_margin_slots=0)
    jobs = six_jobs_one_node()
    assert {start_by_slot(j, config) for j in jobs} == {5}
    decisions, ended = simulate(jobs, config, 10)
    assert [len(d.release) for d in decisions[:6]] == [1, 1, 1, 1, 1, 1]  # the last one in slot 5, in time
    assert late_jobs(ended, config, 10 * TAU) == []
    _, ended = simulate(jobs, config, 10, skipped=frozenset({5}))
    assert late_jobs(ended, config, 10 * TAU) == ["j5"]  # released in slot 6
    margin = dataclasses.replace(config, release_margin_slots=1)
    decisions, _ = simulate(jobs, margin, 10)
    assert [len(d.release) for d in decisions[:6]] == [1, 1, 1, 1, 2, 0]  # both left are due in slot 4
    assert decisions[4].reason == "due_jobs" and decisions[4].late == () and decisions[4].missed == ()
    assert [d.capacity for d in decisions] == pytest.approx([d.capacity for d in simulate(jobs, config, 10)[0]])
    for lost in range(10):
        _, ended = simulate(jobs, margin, 10, skipped=frozenset({lost}))
        assert late_jobs(ended, margin, 10 * TAU) == [], lost


slack_jobs = st.lists(
    st.tuples(
        st.floats(0, 16 * TAU),  # submit
        st.floats(1, 3 * TAU),  # length
        st.integers(1, 6),  # slack in slots beyond the length: start-by slot >= submit slot + 1
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=25, deadline=None)
@given(spec=slack_jobs, policy=st.sampled_from(["hold", "gcp-u", "gcp", "vfw", "follow"]), deadline_slots=st.integers(2, 4))
def test_with_a_margin_of_one_no_single_lost_slot_makes_a_job_late(spec, policy, deadline_slots):
    """Every job with at least one slot between its submit and start-by slots (one with none is
    late whenever its only slot is lost) is released in time whichever single slot goes undecided,
    judged by autoscaler.core.lateness from the jobs as they ended, not from the decisions' own words."""
    jobs = []
    for i, (submit, length, slack) in enumerate(spec):
        deadline = (math.floor(submit / TAU) + slack) * TAU + length + 1.0
        jobs.append(job(f"j{i}", submit, length, deadline))
    config = ControllerConfig(policy=policy, deadline_slots=deadline_slots, slot_s=TAU, max_nodes=10_000, max_deadline_slots=12)
    assert all(start_by_slot(j, config) >= config.slot_of(j.submit_s) + 1 for j in jobs)
    horizon = 26
    for lost in range(horizon - 3):
        decisions, ended = simulate(jobs, config, horizon, skipped=frozenset({lost}))
        assert all(j.released_s is not None for j in ended.values()), lost  # none lost
        assert late_jobs(ended, config, horizon * TAU) == [], lost
        assert not any(d.late or d.missed for d in decisions), lost


def test_a_job_with_less_slack_than_the_margin_is_released_at_once():
    # vfw's m_t is 0 in its first slots (LOPT runs only work released delta slots ago): a job whose
    # start-by slot is the next slot goes now with a margin of 2, on a node raised for it.
    config = ControllerConfig(policy="vfw", deadline_slots=2, slot_s=TAU, release_margin_slots=2)
    soon = job("soon", 0.0, 60.0, TAU + 100.0)
    assert start_by_slot(soon, config) == 1 and release_by_slot(soon, config) == -1
    decision, _ = tick(0.0, [soon], PolicyState(), config)
    assert (decision.capacity, decision.release, decision.nodes, decision.reason) == (0.0, ("soon",), 1, "due_jobs")
    decision, _ = tick(0.0, [soon], PolicyState(), dataclasses.replace(config, release_margin_slots=0))
    assert (decision.release, decision.nodes) == ((), 0)  # without one it waits for slot 1


def test_early_releases_take_free_nodes_only_and_lateness_still_counts_from_the_start_by_slot():
    # max_nodes = 1, two jobs with start-by slot 1 are due in slot 0 by the margin: one takes the
    # node; the other is neither missed nor overloading (no job is at its start-by slot yet).
    config = ControllerConfig(policy="vfw", deadline_slots=2, slot_s=TAU, max_nodes=1, release_margin_slots=1)
    jobs = [job("a", 0.0, 60.0, TAU + 100.0), job("b", 1.0, 60.0, TAU + 100.0)]
    first, state = tick(0.0, jobs, PolicyState(), config)
    assert (first.release, first.overloaded, first.missed, first.late, first.at_risk) == (("a",), False, (), (), 1)
    done = [dataclasses.replace(jobs[1])]  # "a" finished within the slot
    second, _ = tick(TAU, done, state, config)
    assert (second.release, second.late, second.missed) == (("b",), (), ())  # in its start-by slot: in time


def test_the_margin_is_a_setting_with_a_default_of_one_slot(tmp_path: Path):
    path = tmp_path / "config.toml"
    path.write_text('[cluster]\nid = "j-ABC"\n')
    assert load_settings(path).release_margin_slots == 1
    assert load_settings(path).controller_config(0.0).release_margin_slots == 1
    path.write_text('release_margin_slots = 3\n[cluster]\nid = "j-ABC"\n')
    assert load_settings(path).controller_config(0.0).release_margin_slots == 3
    path.write_text('release_margin_slots = -1\n[cluster]\nid = "j-ABC"\n')
    with pytest.raises(ConfigError, match="release_margin_slots: must be >= 0, got -1"):
        load_settings(path)
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="release_margin_slots must be a whole number of slots >= 0"):
            ControllerConfig(release_margin_slots=bad)


@pytest.mark.parametrize(("provision_s", "margin", "due_margin"), [(0.0, 1, 1), (330.0, 1, 2), (300.0, 1, 1), (601.0, 1, 3), (330.0, 4, 4), (330.0, 0, 2)])
def test_the_margin_is_at_least_the_slots_a_node_takes_to_boot(provision_s, margin, due_margin):
    config = ControllerConfig(slot_s=TAU, release_margin_slots=margin, provision_s=provision_s)
    assert config.due_margin_slots == due_margin
    # A job that must start by slot 9 is due from slot 9 - due_margin.
    assert release_by_slot(job("j", 0.0, 60.0, 9 * TAU + 100.0), config) == 9 - due_margin


def test_with_a_330_s_boot_a_due_job_goes_out_two_slots_early_onto_a_node_that_is_up_in_time():
    # With m_t = 0 (dispatch alone) only being due releases a job: with the 1-slot margin in slot 8,
    # with a 330 s boot in slot 7 (ceil(330/300) = 2 slots before its start-by slot 9), so the node
    # asked for then is usable at 7 x 300 + 330 s, before slot 9 begins.
    from autoscaler.core.release import dispatch

    late_start = job("j", 0.0, 60.0, 9 * TAU + 100.0)  # start-by slot 9
    for provision_s, first_due in ((0.0, 8), (330.0, 7)):
        config = ControllerConfig(slot_s=TAU, release_margin_slots=1, provision_s=provision_s, max_nodes=5)
        released = [t for t in range(10) if dispatch(t, 0.0, [late_start], config).release]
        assert released[0] == first_due, provision_s
    with pytest.raises(ConfigError, match="provision_s: expected seconds from a resize to a usable node in 0..3600"):
        ControllerConfig(provision_s=-1.0)
