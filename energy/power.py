"""Re-export of :mod:`autoscaler.core.energy.power` under its top-level name."""

from autoscaler.core.energy.power import *  # noqa: F401,F403
