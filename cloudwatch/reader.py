"""Re-export of :mod:`autoscaler.adapters.cloudwatch_reader` under its top-level name."""

from autoscaler.adapters.cloudwatch_reader import *  # noqa: F401,F403
