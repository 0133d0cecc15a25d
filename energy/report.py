"""Re-export of :mod:`autoscaler.app.energy_report` under its top-level name."""

from autoscaler.app.energy_report import *  # noqa: F401,F403
