"""The objective: what e0, e1 and beta of eq. (2) are priced in, derived from what the operator pays.

Every policy minimises eq. (2), sum_t (e0*m_t + e1*x_t) + beta*sum_t |m_t - m_{t-1}| (paper: deferral,
eq. (1)-(3)). The paper takes e0 = 1, e1 = 0, beta = 12 server-slots; an operator pays in watt-hours
or dollars, and a restart costs what the energy model or the bill says. :func:`derive_costs` turns
the power model, the slot length, the boot time and the price into e0, e1 and beta, and says how:

* ``energy`` (Wh): e0 = idle power x slot_s / 3600 per server-slot; e1 = (busy - idle power) x
  slot_s / 3600 per unit of work; a restart R = idle power x boot_s / 3600 (the energy model's
  boot, ``autoscaler.core.energy.accounting``: a node switched on draws idle power for boot_s before it works)
  plus ``restart_penalty``.
* ``cost`` ($): e0 = price per node-hour x slot_s / 3600 per server-slot; e1 = 0 (a busy node costs
  what an idle one does); R = price x max(boot_s, 60 s) / 3600 (EC2 and EMR bill the provisioning
  time, per second with a 60 s minimum) plus ``restart_penalty``.
* ``carbon`` (Wh, weighted): the energy costs. The weights come from the carbon signal where a
  policy decides by it (hold+carbon, offline with ``--carbon``: e0_t = w_t*e0, e1_t = w_t*e1 with
  w_t the slot's signal over the day's mean, ``autoscaler.core.policies.carbon``), so a restart
  costs beta Wh at the day's mean intensity. The signal, not the objective, turns the weighting on
  (``energy`` with a signal decides the same); ``carbon`` says a signal is meant, and the settings and
  command lines refuse it without one.
* ``paper``: the given e0, e1 and beta, unchanged (the paper's figures reproduce with its 1, 0, 12).

Why beta = R / 2: eq. (2), LP (3) and every policy charge beta on every change of m_t, once when a
server is switched on and once when it is switched off (``autoscaler.core.cost.schedule_cost``
charges beta*|m_t - m_{t-1}|, the last switch-off included). One off-then-on cycle of a server, what
a restart costs, is so 2*beta. Hold's break-even (``autoscaler.core.policies.hold.break_even_slots``,
W = ceil(2*beta/e0)) then compares R with e0 per idle slot: under ``energy`` W = boot_s / slot_s
slots, an idle node held longer than it takes to boot one costs more than booting it again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

from autoscaler.core import defaults
from autoscaler.core.errors import ConfigError
from autoscaler.core.model import CostParams
from autoscaler.core.twin import MIN_BILLED_S

OBJECTIVES = ("energy", "cost", "carbon", "paper")
"""What eq. (2) is priced in: the power model's watt-hours, the bill's dollars, watt-hours weighted by
the carbon signal, or the paper's server-slots as given."""

DEFAULT_OBJECTIVE = defaults.OBJECTIVE
"""The objective unless told otherwise, "energy": the tool is sold as saving energy, and energy is what
the power model, the energy report and the twin's kWh measure; the paper's beta = 12 server-slots
prices a restart (2*beta) at 24 idle slots where the energy model's boot is one."""

S_PER_HOUR = 3600.0

UNITS = {"energy": "Wh", "cost": "$", "carbon": "Wh (weighted by the carbon signal)", "paper": "server-slots"}
"""The unit of e0 (per server-slot), e1 (per unit of work in a slot) and beta (per switch) under each objective."""


@dataclass(frozen=True)
class DerivedCosts:
    """eq. (2)'s e0, e1 and beta under ``objective``, in ``unit``; ``restart`` is what one
    off-then-on cycle of a server costs (2*beta); ``derivation``: one human line per figure,
    how it follows from its inputs."""

    objective: str
    e0: float
    e1: float
    beta: float
    unit: str
    derivation: tuple[str, ...]

    @property
    def restart(self) -> float:
        """One server switched off and on again: 2*beta, in ``unit``."""
        return 2.0 * self.beta

    def cost_params(self, max_servers: float | None = None) -> CostParams:
        """These costs as the policies take them (``max_servers``: the cap M, None for none)."""
        return CostParams(e0=self.e0, e1=self.e1, beta=self.beta, max_servers=max_servers)

    def to_dict(self) -> dict:
        """The costs as JSON: objective, e0, e1, beta, unit and the derivation's lines."""
        return {
            "objective": self.objective,
            "e0": self.e0,
            "e1": self.e1,
            "beta": self.beta,
            "unit": self.unit,
            "derivation": list(self.derivation),
        }


def _input(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name}: expected a finite number >= 0, got {value!r}")
    return float(value)


def _figure(value: float) -> str:
    """A cost as the derivation prints it: four significant digits at least, no exponent for usual sizes."""
    if value == 0:
        return "0"
    if 1e-4 <= abs(value) < 1e6:
        return f"{value:.4f}".rstrip("0").rstrip(".") if abs(value) >= 1 else f"{value:.6f}".rstrip("0")
    return f"{value:.4g}"


def derive_costs(
    objective: str,
    *,
    slot_s: float,
    idle_power_w: float,
    busy_power_w: float,
    boot_s: float,
    price_per_node_hour: float,
    restart_penalty: float = defaults.RESTART_PENALTY,
    given: CostParams | None = None,
) -> DerivedCosts:
    """e0, e1 and beta of eq. (2) under ``objective`` (one of :data:`OBJECTIVES`), with their derivation.

    ``slot_s``: the slot length, s; ``idle_power_w`` and ``busy_power_w``: a node's power idle and at
    full load, W (the power model's idle and peak power); ``boot_s``: seconds a started node boots
    (drawing idle power, billed) before it works; ``price_per_node_hour``: $ per node-hour;
    ``restart_penalty``: added to each restart, in the objective's unit (wear, risk); ``given``: the
    paper's costs, used as they are under ``paper`` (default: e0 = 1, e1 = 0, beta = 12). See the
    module's docstring for each objective's formulas and why beta is half a restart.

    Raises ConfigError naming ``objective`` for an unknown objective, and naming the input for one that
    is not a finite number >= 0 (``slot_s`` must be > 0, ``busy_power_w`` at least ``idle_power_w``).
    """
    if objective not in OBJECTIVES:
        raise ConfigError(f"objective: expected one of {', '.join(OBJECTIVES)}, got {objective!r}")
    slot_s = _input("slot_s", slot_s)
    if slot_s == 0:
        raise ConfigError("slot_s: expected a finite number > 0, got 0")
    idle_w = _input("idle_power_w", idle_power_w)
    busy_w = _input("busy_power_w", busy_power_w)
    if busy_w < idle_w:
        raise ConfigError(f"busy_power_w: expected at least idle_power_w ({idle_w:g} W), got {busy_w:g} W")
    boot_s = _input("boot_s", boot_s)
    price = _input("price_per_node_hour", price_per_node_hour)
    penalty = _input("restart_penalty", restart_penalty)
    unit = UNITS[objective]
    if objective == "paper":
        given = given if given is not None else CostParams()
        if penalty:
            raise ConfigError(
                f"restart_penalty: {penalty:g} is for objectives energy, cost and carbon; under objective paper "
                "beta is given as it is (set beta instead)"
            )
        return DerivedCosts(
            objective, given.e0, given.e1, given.beta, unit,
            (
                f"e0 = {_figure(given.e0)} server-slots, e1 = {_figure(given.e1)}, beta = {_figure(given.beta)} per server switched on or off, as given (paper: deferral, §VI-A: 1, 0, 12)",
                f"a restart (off, then on) = 2 x beta = {_figure(2 * given.beta)} server-slots; hold's break-even 2 beta / e0 = {_figure(2 * given.beta / given.e0) if given.e0 else 'inf'} slots",
            ),
        )  # fmt: skip
    penalty_text = f" + restart_penalty {_figure(penalty)}" if penalty else ""
    if objective == "cost":
        e0 = price * slot_s / S_PER_HOUR
        billed_s = max(boot_s, MIN_BILLED_S)
        restart = price * billed_s / S_PER_HOUR + penalty
        lines = (
            f"e0 = ${_figure(price)}/node-hour x slot {_figure(slot_s)} s / 3600 = ${_figure(e0)} per server-slot",
            "e1 = $0: a busy node is billed as an idle one",
            f"a restart = ${_figure(price)}/node-hour x max(boot {_figure(boot_s)} s, {MIN_BILLED_S:g} s minimum bill) / 3600{penalty_text} = ${_figure(restart)}",
            f"beta = restart / 2 = ${_figure(restart / 2)} per server switched on or off (eq. (2) charges every switch, on and off)",
        )
        return DerivedCosts(objective, e0, 0.0, restart / 2, unit, lines)
    e0 = idle_w * slot_s / S_PER_HOUR
    e1 = (busy_w - idle_w) * slot_s / S_PER_HOUR
    restart = idle_w * boot_s / S_PER_HOUR + penalty
    lines = (
        f"e0 = idle power {idle_w:.2f} W x slot {_figure(slot_s)} s / 3600 = {_figure(e0)} Wh per server-slot",
        f"e1 = (busy {busy_w:.2f} W - idle {idle_w:.2f} W) x slot {_figure(slot_s)} s / 3600 = {_figure(e1)} Wh per unit of work in a slot",
        f"a restart = idle power {idle_w:.2f} W x boot {_figure(boot_s)} s / 3600{penalty_text} = {_figure(restart)} Wh",
        f"beta = restart / 2 = {_figure(restart / 2)} Wh per server switched on or off (eq. (2) charges every switch, on and off)",
    )
    if objective == "carbon":
        lines += ("carbon: these watt-hours, each slot's e0 and e1 weighted by the carbon signal over the day's mean where a policy decides by it",)
    return DerivedCosts(objective, e0, e1, restart / 2, unit, lines)
