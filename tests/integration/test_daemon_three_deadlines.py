"""The daemon against moto with jobs of three deadlines, and its dry run, deciding the same.

hold plans each job to its own start-by slot (the slot of deadline - length, less its nodes' lead
time), not to the config's D, and releases the queue in EDF order of those slots (a job that does not
fit the node time left is passed over for smaller ones: first fit): of jobs submitted together with 30 minutes,
2 hours and 12 hours of slack (6, 24 and 144 slots of TAU), the long ones wait longest. As in
``test_dry_run_is_the_live_loop``, the dry run runs first on the store the test keeps submitting to
and must leave the cluster and that store as they were; the live daemon then runs the same slots
on the same cluster and simulated clock, its steps completed once their job's length has passed.
"""

from __future__ import annotations

import math
import statistics

import pytest

from autoscaler.adapters.sqlite_store import SqliteJobStore
from autoscaler.app import compose
from autoscaler.app.config import Settings
from autoscaler.core.controller import Decision
from autoscaler.core.edf import edf_key, release_by_slot, start_by_slot
from autoscaler.core.model import Job, StepSpec
from autoscaler.core.release import need_s

from conftest import REGION
from test_daemon import TAU
from test_dry_run_is_the_live_loop import dry_then_live

SLACK_SLOTS = {"short": 6, "medium": 24, "long": 144}
"""Slack (deadline - submit - length) of each kind of job, in slots of TAU: 30 min, 2 h and 12 h."""

LENGTHS_S = (15.0, 45.0, 120.0, 280.0, 420.0, 590.0)
"""Job lengths, from seconds to about two slots, dealt in turn."""


def three_deadline_jobs(arrivals: int, every_slots: int) -> list[Job]:
    """One job of each kind submitted together at each of ``arrivals`` times, ``every_slots`` slots
    apart and 37 s into their slot; deadline = submit + length + the kind's slack, so a job's
    start-by slot is its submit slot + its slack. Ids are "<kind>-<arrival>"."""
    jobs = []
    for arrival in range(arrivals):
        submit_s = arrival * every_slots * TAU + 37.0
        for k, (kind, slack_slots) in enumerate(SLACK_SLOTS.items()):
            length_s = LENGTHS_S[(3 * arrival + k) % len(LENGTHS_S)]
            job_id = f"{kind}-{arrival:02d}"
            deadline_s = submit_s + length_s + slack_slots * TAU
            jobs.append(Job(job_id, job_id, "trace", submit_s, deadline_s, length_s, StepSpec(args=("true",))))
    return jobs


def hold_settings(cluster_id: str, endpoint: str, store_path, provision_s: float = 0.0) -> Settings:
    """hold under "node-seconds" on slots of TAU; D = 2 slots is only the default deadline, which
    none of these jobs takes."""
    return Settings(
        policy="hold",
        work_model="node-seconds",
        deadline_slots=2,
        slot_s=TAU,
        provision_s=provision_s,
        cluster={"id": cluster_id, "region": REGION, "endpoint_url": endpoint, "max_nodes": 10_000},
        store_path=store_path,
    )


def released_slot(run) -> dict[str, int]:
    """The slot each job was released in, from a run's (slot, m_t, nodes, released ids)."""
    return {job_id: slot for slot, _, _, released in run for job_id in released}


def live_decisions(settings: Settings) -> list[Decision]:
    """The live run's decision log, after checking every job in its store went out."""
    with SqliteJobStore(settings.store_path) as store:
        assert {job.state for job in store.all_jobs()} <= {"running", "done"}
        return [Decision.from_json(record) for record in store.decisions()]


@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_jobs_of_three_deadlines_go_out_by_their_own_start_by_slots_the_long_ones_last_and_the_dry_run_agrees(
    emr_cluster_id, moto_endpoint, set_step_state, tmp_path
):
    client, cluster_id = emr_cluster_id
    jobs = three_deadline_jobs(arrivals=12, every_slots=2)  # 36 jobs over the first two hours

    def settings_at(store: str) -> Settings:
        return hold_settings(cluster_id, moto_endpoint, tmp_path / store)

    config = compose.controller_config(settings_at("live.db"))
    by_id = {job.job_id: job for job in jobs}
    start_by = {job.job_id: start_by_slot(job, config) for job in jobs}
    slots = max(start_by.values()) + 2  # past the last start-by slot: every job had to go out
    _, live = dry_then_live(client, cluster_id, set_step_state, settings_at, jobs, slots)

    # Every job went out, by its own start-by slot; with nodes to spare (max_nodes 10,000), by the
    # slot it became due, g = due_margin_slots before that.
    released = released_slot(live)
    assert sorted(released) == sorted(by_id)
    assert {j: (released[j], start_by[j]) for j in by_id if released[j] > start_by[j]} == {}
    assert {j: released[j] for j in by_id if released[j] > release_by_slot(by_id[j], config)} == {}
    decisions = live_decisions(settings_at("live.db"))
    assert len(decisions) == slots and not any(d.late or d.missed for d in decisions)

    # EDF on the start-by slots, with first fit: a slot releases a job while one submitted by then with
    # an earlier start-by slot (or deadline at the same one) stays queued only when that one needs
    # more of the slot than the node time left, which the later, smaller one fits.
    for slot, *_, ids in live:
        left = [by_id[j] for j in by_id if by_id[j].submit_s < (slot + 1) * TAU and released[j] > slot]
        for out in (by_id[j] for j in ids):
            for passed in (job for job in left if edf_key(job, config) < edf_key(out, config)):
                assert need_s(passed, TAU) > need_s(out, TAU), (slot, passed.job_id, out.job_id)

    # So the long jobs wait longest: the median wait from the submit slot grows with the slack, and
    # some long job went out after the start-by slot of the short job submitted with it, which is as
    # late as hold would have let it wait under the short job's deadline.
    wait = {j: released[j] - config.slot_of(by_id[j].submit_s) for j in by_id}
    median = {kind: statistics.median(wait[j] for j in by_id if j.startswith(f"{kind}-")) for kind in SLACK_SLOTS}
    assert median["short"] <= median["medium"] <= median["long"] and median["short"] < median["long"], median
    assert any(released[j] > start_by[j.replace("long-", "short-")] for j in by_id if j.startswith("long-")), wait


@pytest.mark.parametrize("emr_cluster_id", [0], indirect=True)
def test_with_provision_s_due_jobs_go_out_as_many_slots_before_their_start_by_slot_as_a_node_boots(
    emr_cluster_id, moto_endpoint, set_step_state, tmp_path
):
    # 330 s of boot on 300 s slots: under node-seconds a job is due ceil(330 / 300) + 1 = 3 slots
    # before its start-by slot (the jobs packed onto a node asked for then have run by it).
    # A burst of 16 near-slot-long 30-minute jobs: hold plans each to the slot it is due in, 3 slots
    # before its start-by slot, and runs the burst at the flattest rate that meets those.
    client, cluster_id = emr_cluster_id
    burst = [
        Job(f"burst-{i:02d}", f"burst-{i:02d}", "trace", 37.0, 37.0 + 280.0 + 6 * TAU, 280.0, StepSpec(args=("true",))) for i in range(16)
    ]
    jobs = [*burst, *(job for job in three_deadline_jobs(arrivals=3, every_slots=2) if not job.job_id.startswith("long-"))]
    jobs.sort(key=lambda job: job.submit_s)

    def settings_at(store: str) -> Settings:
        return hold_settings(cluster_id, moto_endpoint, tmp_path / store, provision_s=330.0)

    config = compose.controller_config(settings_at("live.db"))
    assert config.due_margin_slots == 3 == math.ceil(330.0 / TAU) + 1
    by_id = {job.job_id: job for job in jobs}
    start_by = {job.job_id: start_by_slot(job, config) for job in jobs}
    slots = max(start_by.values()) + 2
    _, live = dry_then_live(client, cluster_id, set_step_state, settings_at, jobs, slots)

    released = released_slot(live)
    assert sorted(released) == sorted(by_id)
    early = {j: start_by[j] - released[j] for j in by_id}
    assert {j: gap for j, gap in early.items() if gap < config.due_margin_slots} == {}
    # Not by chance: hold plans each job to the slot it is due in (its start-by slot less the lead),
    # and the burst is more than its nodes run before then, so some job goes out in exactly that slot.
    decisions = live_decisions(settings_at("live.db"))
    assert not any(d.late or d.missed for d in decisions)
    assert any(gap == config.due_margin_slots for gap in early.values()), sorted(early.items())
