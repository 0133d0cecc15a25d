"""VM power model and energy accounting (paper: dynamic deferral, §VII-B, eq. (11)-(14)), under the
top-level name the project's layout gives it. The code lives in the layers it belongs to; each module
here re-exports one of them, so ``energy.power`` and ``autoscaler.core.energy.power`` are the same
names:

- ``power``, ``accounting``, ``signal``, ``forecast_archive``: pure, in :mod:`autoscaler.core.energy`
  (``PowerModel`` and the named models; a schedule's energy, measured or modelled, and the report
  against follow and no provisioning; carbon and price signals; forecasts with their issue times);
- ``report``: the report's text, CSV and PNG, in :mod:`autoscaler.app.energy_report`.

The project imports the layered modules, never these (an import contract in pyproject.toml checks it).
"""
