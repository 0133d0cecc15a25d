"""Re-export of :mod:`autoscaler.adapters.cloudwatch_publish` under its top-level name."""

from autoscaler.adapters.cloudwatch_publish import *  # noqa: F401,F403
