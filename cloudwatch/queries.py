"""Re-export of :mod:`autoscaler.core.energy.metric_queries` under its top-level name."""

from autoscaler.core.energy.metric_queries import *  # noqa: F401,F403
