"""Re-export of :mod:`autoscaler.core.energy.forecast_archive` under its top-level name."""

from autoscaler.core.energy.forecast_archive import *  # noqa: F401,F403
