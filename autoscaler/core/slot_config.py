"""What the controller is configured with (:class:`ControllerConfig`): the policy, its deadlines and
costs, the node bounds, the tenants and the slot grid. Times in seconds, deadlines in slots."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from autoscaler.core import defaults
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import MIB, CostParams, require_positive
from autoscaler.core.policies import ONLINE_POLICIES as CONTROLLER_POLICIES
from autoscaler.core.policies import POLICY_TABLE, UNIFORM_DEADLINE_POLICIES
from autoscaler.core.policies.vfw import default_delta

__all__ = ["CONTROLLER_POLICIES", "TICKS_PER_SLOT", "UNIFORM_DEADLINE_POLICIES", "WORK_MODELS", "ControllerConfig"]

WORK_MODELS = ("job-slots", "node-seconds")
"""How the policy's work is counted (``ControllerConfig.work_model``): "job-slots", the paper's
active-job model (paper: deferral, §VI-A: a job is one server in every slot it touches), or
"node-seconds", the node time the operator pays (a job is the fraction of each slot it runs)."""

TICKS_PER_SLOT = 60
"""Under "node-seconds" a job's share of a slot is counted in whole ticks of 1/60 slot (5 s of a
5-minute slot), rounded up, so the flow of work adds and takes away whole numbers exactly; the
policy is handed ticks / TICKS_PER_SLOT server-slots."""


@dataclass(frozen=True)
class ControllerConfig:
    """What the controller needs to know; times in seconds, deadlines in slots; defaults from
    :mod:`autoscaler.core.defaults`. ``policy``: one of the policy table's online policies
    (``CONTROLLER_POLICIES``). ``max_deadline_slots``: the largest deadline gcp and hold track (a
    job's later start-by slot is planned as this far); a job's work is never cut by it
    (``slot_work.job_units``). ``deadline_slots``: D, the uniform deadline of gcp-u and vfw, hold's
    smoothing, and the deadline of a job submitted without one.

    ``tenants_n``: n, the number of tenants dynamic DRF divides the cluster for (a tenant
    arriving beyond n shares only what the first n left). ``node_disk_bytes_s`` and
    ``node_network_bytes_s``: one node's disk and network rates, which put a demand vector's
    CPU seconds, disk bytes and network bytes on one scale (defaults: the §V-A rates of
    ``LengthModel``, 100 MB/s disk, 10 MB/s network).

    ``release_margin_slots``: g >= 0, how many slots before its start-by slot s (``start_by_slot``:
    the slot of deadline - length) a queued job becomes *due*. A due job is released even beyond the
    policy's nodes (up to ``max_nodes``, earliest start-by first); a job not due yet is released only
    onto the policy's free nodes. So, nodes allowing, a job goes out by the first slot decided among
    s-g .. s (``release_by_slot``: s - g), or earlier on the policy's nodes, and g slots in a row may
    go undecided (the daemon down, a slot skipped) without it becoming late; a job submitted with less
    slack than g (submit slot > s - g) is due in its first slot. Late and missed still count from s
    itself (``autoscaler.core.lateness``), and ``Decision.at_risk`` too; overload (``Decision.overloaded``)
    is judged on the jobs at or past s, so a job released early takes a node only if one is free
    below ``max_nodes`` and never changes the DRF split. The margin moves releases, never m_t.
    g = 0 is the rule without a margin: a job is due in its start-by slot exactly. ``provision_s``: the
    seconds a node asked for takes to be usable (0: at once, the paper's; EMR about 330, the cluster
    twin's): the margin is at least ceil(provision_s / slot_s) slots (``due_margin_slots``), so no job
    due in its start-by slot waits for a node still booting.

    ``work_model``: one of ``WORK_MODELS``. "job-slots" (the paper's model): a job is one unit in
    each slot it touches, m_t counts servers busy with one job each, and a slot releases at most one
    job per node. "node-seconds": a job is, in each slot it runs, the fraction of the slot it runs,
    in ticks of 1/``TICKS_PER_SLOT`` slot rounded up (a 30 s job of a 300 s slot: 6 ticks = 0.1; a
    700 s job from a slot start: 1, 1, 1/3), m_t is server-slots of node time, and a slot releases
    jobs while the node time they need in it fits in the nodes' (``release.dispatch``), so short
    jobs share a node.

    ``carbon``: run ``hold`` as hold+carbon (:mod:`autoscaler.core.policies.carbon`), deferring work
    inside its deadline into the slots where a cost signal (``tick``'s ``carbon_window``) is low;
    only a policy whose table row has one (``hold``) has a carbon-aware variant (ConfigError for another).
    ``carbon_max_regret``: hold+carbon's regret cap against follow (``[carbon] max_regret``,
    :data:`autoscaler.core.policies.carbon.DEFAULT_MAX_REGRET`), a share >= 0;
    ``carbon_short_deferral_s``: how far it defers then, seconds (``[carbon] short_deferral_s``).
    """

    policy: str = defaults.POLICY
    deadline_slots: int = defaults.DEADLINE_SLOTS
    slot_s: float = defaults.SLOT_S
    epoch_s: float = 0.0
    min_nodes: int = 0
    max_nodes: int = defaults.MAX_NODES
    max_deadline_slots: int = defaults.MAX_DEADLINE_SLOTS
    cost: CostParams = field(default_factory=CostParams)
    delta: int | None = None
    tenants_n: int = defaults.TENANTS_N
    node_disk_bytes_s: float = 100.0 * MIB
    node_network_bytes_s: float = 10.0 * MIB
    release_margin_slots: int = defaults.RELEASE_MARGIN_SLOTS
    provision_s: float = 0.0
    carbon: bool = False
    work_model: str = WORK_MODELS[0]
    carbon_max_regret: float = defaults.CARBON_MAX_REGRET
    carbon_short_deferral_s: float = defaults.CARBON_SHORT_DEFERRAL_S

    def __post_init__(self) -> None:
        if self.work_model not in WORK_MODELS:
            raise ConfigError(f"work_model: expected one of {', '.join(WORK_MODELS)}, got {self.work_model!r}")
        margin = self.release_margin_slots
        if isinstance(margin, bool) or not isinstance(margin, int) or margin < 0:
            raise ConfigError(f"release_margin_slots must be a whole number of slots >= 0, got {margin!r}")
        if isinstance(self.provision_s, bool) or not isinstance(self.provision_s, (int, float)) or not 0 <= self.provision_s <= 3600:
            raise ConfigError(f"provision_s: expected seconds from a resize to a usable node in 0..3600, got {self.provision_s!r}")
        regret = self.carbon_max_regret
        if isinstance(regret, bool) or not isinstance(regret, (int, float)) or not (0 <= regret <= 1 or regret == math.inf):
            raise ConfigError(f"carbon max_regret: expected a share of follow's emissions in 0..1 (0.01 = 1 %) or inf (no cap), got {regret!r}")
        short = self.carbon_short_deferral_s
        if isinstance(short, bool) or not isinstance(short, (int, float)) or not (math.isfinite(short) and 0 <= short <= 7 * 86_400):
            raise ConfigError(f"carbon short_deferral_s: expected seconds in 0..604800 (7200 = 2 h), got {short!r}")
        if self.policy not in CONTROLLER_POLICIES:
            raise ConfigError(f"policy: expected one of {', '.join(CONTROLLER_POLICIES)}, got {self.policy!r}")
        if self.carbon and POLICY_TABLE[self.policy].carbon_online is None:
            carbon_aware = [name for name in CONTROLLER_POLICIES if POLICY_TABLE[name].carbon_online is not None]
            variants = ", ".join(str(POLICY_TABLE[name].carbon) for name in carbon_aware)
            only = " or ".join(repr(name) for name in carbon_aware)
            raise ConfigError(
                f"carbon: only policy {only} has a carbon-aware variant ({variants}), got policy {self.policy!r}: "
                f"set policy = \"{carbon_aware[0]}\" or remove [carbon] source"
            )
        if not (0 <= self.min_nodes <= self.max_nodes):
            raise ConfigError(f"nodes: expected 0 <= min_nodes <= max_nodes, got {self.min_nodes} and {self.max_nodes}")
        if self.deadline_slots < 0 or self.max_deadline_slots < 1:
            raise ConfigError("deadline_slots must be >= 0 and max_deadline_slots >= 1")
        if self.tenants_n < 1:
            raise ConfigError(f"tenants_n must be >= 1 (the tenants dynamic DRF plans for), got {self.tenants_n}")
        for name in ("slot_s", "node_disk_bytes_s", "node_network_bytes_s"):
            require_positive(name, getattr(self, name))
        if POLICY_TABLE[self.policy].needs_delta and not (0 < self.vfw_delta < self.deadline_slots):
            raise ConfigError(
                f"vfw needs 0 < delta < deadline_slots, got delta = {self.vfw_delta} with deadline_slots = {self.deadline_slots}"
            )

    @property
    def policy_key(self) -> str:
        """What the saved policy state depends on; a restart with another key starts it afresh."""
        key = f"{self.policy}/D={self.deadline_slots}/nu={self.nu}/delta={self.vfw_delta}/slot_s={self.slot_s:g}"
        if POLICY_TABLE[self.policy].learns_costs:
            # hold's learned rules (and so its state's shape) follow from beta/e0; its costs from e1 too.
            key += f"/e0={self.cost.e0:g}/e1={self.cost.e1:g}/beta={self.cost.beta:g}"
            if self.carbon:
                key += "/carbon"
        if self.work_model != WORK_MODELS[0]:
            # The work saved in the state is in the model's units: another model rebuilds it.
            key += f"/work={self.work_model}"
        return key

    @property
    def ticks_per_unit(self) -> int:
        """Ticks of the policy's work flow per server-slot: 1 under "job-slots" (a unit is a job's
        slot), ``TICKS_PER_SLOT`` under "node-seconds"."""
        return 1 if self.work_model == WORK_MODELS[0] else TICKS_PER_SLOT

    @property
    def policy_name(self) -> str:
        """The policy as outputs name it: ``hold+carbon`` for hold with ``carbon``, else ``policy``."""
        return str(POLICY_TABLE[self.policy].carbon) if self.carbon else self.policy

    @property
    def vfw_delta(self) -> int:
        return self.delta if self.delta is not None else default_delta(self.deadline_slots)

    @property
    def due_margin_slots(self) -> int:
        """How many slots before its start-by slot a queued job is due: ``release_margin_slots``, or
        the slots a node asked for now takes to be usable, ceil(``provision_s`` / ``slot_s``), if more:
        a job due at its start-by slot released onto a node still booting would start after it.

        Under "node-seconds", one slot more than the boot: a slot's release packs jobs into the nodes'
        whole slot of node time, a booting node's too, so the jobs packed onto a node asked for now run
        one after another from when it is up, which may be a slot later. Released g = ceil(p/s) + 1
        slots ahead, every node is up by the slot before the job's start-by slot, and the work queued
        ahead of it on the cluster (first added, first started) is at most the nodes' slot: it starts
        by its start-by slot (greedy list scheduling: every node stays busy until it does)."""
        boot = math.ceil(self.provision_s / self.slot_s - 1e-9)
        if self.work_model != WORK_MODELS[0]:
            boot += 1
        return max(self.release_margin_slots, boot)

    @property
    def plans_start_by(self) -> bool:
        """Whether the policy plans each job's units to the job's own start-by slot (``hold``, the
        daemon's default: r_t comes from the real queue), not to D from its submission. hold+carbon
        keeps the uniform D of its LP window."""
        return POLICY_TABLE[self.policy].daemon_deadlines == "start_by" and not self.carbon

    @property
    def nu(self) -> int:
        """Largest deadline the policy's work vector holds."""
        if self.plans_start_by:
            return max(self.deadline_slots, self.max_deadline_slots)
        return self.deadline_slots if self.policy in UNIFORM_DEADLINE_POLICIES else self.max_deadline_slots

    def slot_of(self, time_s: float) -> int:
        return math.floor((time_s - self.epoch_s) / self.slot_s)
