"""Re-export of :mod:`autoscaler.core.energy.accounting` under its top-level name."""

from autoscaler.core.energy.accounting import *  # noqa: F401,F403
