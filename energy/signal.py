"""Re-export of :mod:`autoscaler.core.energy.signal` under its top-level name."""

from autoscaler.core.energy.signal import *  # noqa: F401,F403
