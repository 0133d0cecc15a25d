"""Each online policy's one slot as the controller runs it: m_t, x_t, its new state, and the rule
that set m_t in words (``Decision.reason`` and ``Decision.why``).

Every step has one signature, ``step(before, slot) -> SlotStep``: ``before`` is the policy's own
state from the last slot (None at a start), ``slot`` what the slot brings (:class:`SlotInput`).
The policy table (:data:`autoscaler.core.policies.POLICY_TABLE`) names the step of each policy and
of its carbon-aware variant, so ``tick`` looks the policy up instead of branching on its name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from autoscaler.core.carbon_window import CarbonWindow, SignalUnavailable
from autoscaler.core.defaults import CARBON_SHORT_DEFERRAL_S
from autoscaler.core.model import CostParams
from autoscaler.core.policies.carbon import (
    DEFAULT_MAX_REGRET,
    HEDGE_BANDS,
    CarbonDecision,
    CarbonState,
    carbon_step,
    short_deadline_slots,
    window_slots,
)
from autoscaler.core.policies.carbon import NAME as CARBON_NAME
from autoscaler.core.policies.gcp import GcpState, binding_deadline, gcp_step
from autoscaler.core.policies.hold import HoldState, forced_capacity, hold_step, leading_rule
from autoscaler.core.policies.vfw import VfwState, step_bounds, vfw_step
from autoscaler.core.readable import count_text, duration_text


@dataclass(frozen=True, eq=False)
class SlotInput:
    """What one slot brings a policy.

    ``arrivals``: the units of work arriving now by deadline index, shape (nu+1,) (L_t is their sum).
    ``policy``: the name outputs use ("gcp-u", "hold" ...). ``deadline_slots``: D; ``delta``: vfw's
    look-ahead in slots; ``slot_s``: the slot length, seconds; ``cost``: e0, e1, beta, uncapped (the
    controller clamps nodes itself). hold+carbon only: ``window``, the signal for this slot, or None
    and ``missing``, why there is none. hold only: ``keep_busy``, switch no server off while it has
    queued work to run (``hold_step``; the daemon under "node-seconds"). hold+carbon only:
    ``max_regret`` and ``short_deferral_s``, its regret cap against follow and how far it defers
    then (``carbon_step``).
    """

    arrivals: np.ndarray
    policy: str
    deadline_slots: int
    delta: int
    slot_s: float
    cost: CostParams
    window: CarbonWindow | None = None
    missing: SignalUnavailable | None = None
    keep_busy: bool = False
    max_regret: float = DEFAULT_MAX_REGRET
    short_deferral_s: float = CARBON_SHORT_DEFERRAL_S

    @property
    def load(self) -> float:
        """L_t, servers' worth of work arriving now."""
        return float(self.arrivals.sum())


@dataclass(frozen=True)
class SlotStep:
    """A policy's slot: m_t (``capacity``) and x_t (``assigned``) in servers, its new ``state``, the
    reason code for m_t (one of the policy's ``reasons`` in the table) and ``why``, in one sentence with
    its figures. ``carbon``: hold+carbon's decision (its mode and weights), None for the others.
    ``binding_slots``: when the deadlines set m_t (hold's r_t), the j+1 slots within which the work
    that binds is due (the controller names the job), else None."""

    capacity: float
    assigned: float
    state: object
    reason: str
    why: str
    carbon: CarbonDecision | None = None
    binding_slots: int | None = None


def follow_slot(before: None, slot: SlotInput) -> SlotStep:
    """follow: m_t = x_t = L_t, no state."""
    load = slot.load
    return SlotStep(load, load, None, "follow", f"follow runs m_t = L_t = {load:.4g}, the work that arrived for this slot")


def gcp_slot(before: GcpState | None, slot: SlotInput) -> SlotStep:
    """gcp and gcp-u: GCP-OPT's first slope over the queued work by deadline (paper: deferral, §IV)."""
    state = before or GcpState.empty(slot.arrivals.shape[0] - 1)
    capacity, after = gcp_step(state, slot.arrivals, slot.cost)
    work, slots = binding_deadline(np.array(after.unassigned))
    why = (
        f"{slot.policy} runs m_t = {capacity:.4g} = max_j Y_j/(j+1), the flat rate that meets every queued deadline "
        f"(GCP-OPT (7)'s first slope): {work:.4g} node-slots of work are due within {count_text(slots, 'slot')}"
    )
    return SlotStep(capacity, capacity, after, "deadlines", why)


def hold_slot(before: HoldState | None, slot: SlotInput) -> SlotStep:
    """hold: r_t, or servers kept on through a valley (:mod:`autoscaler.core.policies.hold`)."""
    # The work by deadline index: each job's units due by its own start-by slot (the controller's nu).
    state = before or HoldState.empty(slot.deadline_slots, slot.cost, queue_slots=slot.arrivals.shape[0] - 1)
    capacity, assigned, after = hold_step(state, slot.arrivals, slot.deadline_slots, slot.cost, keep_busy=slot.keep_busy)
    reason, why = _hold_words(state, after, slot.arrivals, capacity, assigned, slot.cost, slot.keep_busy)
    binding = forced_capacity(state, slot.arrivals)[2] if reason == "deadlines" else 0
    return SlotStep(capacity, assigned, after, reason, why, binding_slots=binding or None)


def vfw_slot(before: VfwState | None, slot: SlotInput) -> SlotStep:
    """vfw: LOPT (4) outside a valley, VOPT (5) inside one (paper: deferral, §IV)."""
    state = before or VfwState.empty(slot.deadline_slots)
    capacity, after = vfw_step(state, slot.load, slot.deadline_slots, slot.delta)
    need_now, allowed = step_bounds(state, after, slot.deadline_slots, slot.delta)
    if after.valley > 0:
        reason, why = "valley", (
            f"vfw fills a valley (slot {after.valley} of {slot.delta + 1}, VOPT (5)): m_t = {capacity:.4g} of the "
            f"{allowed:.4g} units released and not yet run, {need_now:.4g} of them due now"
        )
    else:
        reason, why = "deadlines", (
            f"vfw runs m_t = {capacity:.4g} (LOPT (4)): {need_now:.4g} units released {slot.deadline_slots} slots ago are due now, "
            f"and it runs no more than the {allowed:.4g} released by {count_text(slot.delta, 'slot')} ago, spread over "
            f"{slot.deadline_slots + 1} slots"
        )
    return SlotStep(capacity, capacity, after, reason, why)


def hold_carbon_slot(before: CarbonState | None, slot: SlotInput) -> SlotStep:
    """hold+carbon: hold's work deferred inside its deadline into the slots where the signal is low
    (:mod:`autoscaler.core.policies.carbon`); hold's carbon-blind decision without a signal."""
    state = before or CarbonState.empty(slot.deadline_slots, slot.cost)
    window = slot.window
    step, after = carbon_step(
        state,
        slot.load,
        slot.deadline_slots,
        slot.cost,
        None if window is None else window.values,
        None if window is None else window.reference,
        None if window is None else window.band,
        slot.max_regret,
        short_deadline_slots(slot.deadline_slots, slot.cost, slot.slot_s, slot.short_deferral_s),
    )
    reason, why = _carbon_words(state, after, step, slot)
    return SlotStep(step.capacity, step.assigned, after, reason, why, carbon=step)


def _hold_words(
    before: HoldState, after: HoldState, load, capacity: float, assigned: float, params: CostParams, keep_busy: bool = False
) -> tuple[str, str]:
    forced, work, slots = forced_capacity(before, load)
    due = f"{work:.4g} node-slots of work are due within {count_text(slots, 'slot')}" if slots else "no work is queued in the policy"
    if capacity <= forced * (1 + 1e-12) + 1e-12:
        return "deadlines", f"hold runs m_t = r_t = {capacity:.4g} = max_j Y_j/(j+1), what the deadlines force: {due}"
    if keep_busy and capacity <= before.capacity * (1 + 1e-12) + 1e-12 and assigned >= capacity * (1 - 1e-12) - 1e-12:
        return "held", (
            f"hold keeps m_t = {capacity:.4g} on (m_{{t-1}} = {before.capacity:.4g}) where the deadlines force r_t = {forced:.4g} "
            f"({due}): its nodes have queued work to run (x_t = m_t), so none is switched off"
        )
    how = "inside a hold its guard allowed" if after.holding else "by its rules' hold level"
    return "held", (
        f"hold keeps m_t = {capacity:.4g} on (m_{{t-1}} = {before.capacity:.4g}) where the deadlines force r_t = {forced:.4g} "
        f"({due}): a valley held {how}, leading rule '{leading_rule(after, params)}'; x_t = {assigned:.4g} of it runs queued work"
    )


def _best_gain_words(window: CarbonWindow) -> str:
    """"cleaner (best 3.1 %, within 2.4 bands)" or the like: the largest forecast gain over now and
    how many of its error bands it is, for a window the hedge left flat."""
    values, band = window.values, window.band
    now = float(values[0])
    if now <= 0 or values.shape[0] < 2:
        return "cleaner or dirtier"
    gains = (now - values[1:]) / now
    best = int(np.argmax(gains))
    if gains[best] <= 0:
        return "cleaner"
    bands = (now - float(values[1 + best])) / float(band[1 + best]) if band is not None and band[1 + best] > 0 else math.inf
    return f"cleaner (the best gain {gains[best]:.1%}, {bands:.1f} bands)"


def _carbon_words(before: CarbonState, after: CarbonState, step: CarbonDecision, slot: SlotInput) -> tuple[str, str]:
    """hold+carbon's rule for m_t in words: the signal now against the day's mean and the window's
    cleanest slot ("carbon"); hold's own reason when the signal is flat; "no_signal" and why not."""
    load, window = slot.load, slot.window
    _, hold_why = hold_words = _hold_words(before.hold, after.hold, load, step.capacity, step.assigned, slot.cost)
    span = duration_text(window_slots(slot.deadline_slots) * slot.slot_s)
    if window is None:
        missing = slot.missing
        assert missing is not None
        return "no_signal", f"{CARBON_NAME}: no signal for this slot ({missing.reason}: {missing.detail}), so hold's carbon-blind decision: {hold_why}"
    now = f"{window.value_now:.4g} {window.unit} now"
    if step.mode == "flat":
        return hold_words[0], f"{CARBON_NAME}: the signal is flat over the next {span} ({now}), so hold's decision: {hold_why}"
    if step.mode in ("hedged", "capped"):
        short = duration_text(step.short_deadline_slots * slot.slot_s)
        short_words = _hold_words(before.short or HoldState.empty(step.short_deadline_slots, slot.cost), after.short, load, step.capacity, step.assigned, slot.cost)
        if step.mode == "capped":
            cause = (
                f"over the last {span} the run emitted {step.regret_share:.1%} more than follow (no deferral) would have, "
                f"beyond the cap of {slot.max_regret:.1%}"
            )
        else:
            cause = f"no slot in the next {span} is forecast {_best_gain_words(window)} than now ({now}) by more than {HEDGE_BANDS:g} of the forecast's recent errors"
        return short_words[0], f"{CARBON_NAME}: {cause}: short deferral, hold at D = {short}: {short_words[1]}"
    word = "cheapest" if window.unit.startswith("$") else "cleanest"
    if step.cheapest_in_slots == 0:
        where = f"this slot is the {word} in the next {span}"
    else:
        where = f"the {word} slot in the next {span} is in {duration_text(step.cheapest_in_slots * slot.slot_s)} ({step.weight_min:.2f}x)"
    queued = float(before.queue[1:].sum()) + load
    ahead = window.values.shape[0] - 1
    known = ahead - window.forecast_slots - window.persisted_slots
    return "carbon", (
        f"{CARBON_NAME}: {now}, {step.weight_now:.2f}x the day's mean; {where}; runs {step.assigned:.4g} of {queued:.4g} queued "
        f"(m_t = {step.capacity:.4g}); the {count_text(ahead, 'slot')} ahead: {known} known, {window.forecast_slots} forecast, "
        f"{window.persisted_slots} by the blend"
    )
