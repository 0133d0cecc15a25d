"""CloudWatch: the EC2 metrics of the power model, read per slot, and the energy metrics we publish,
under the top-level name the project's layout gives it. Each module here re-exports the layered one:

- ``queries`` (pure): GetMetricData queries, the slot grid, the metrics' bounds, the missing-data
  rule, ``InstanceMetrics``: :mod:`autoscaler.core.energy.metric_queries`;
- ``reader``: the client factory and ``CloudWatchMetricsReader`` (GetMetricData):
  :mod:`autoscaler.adapters.cloudwatch_reader`;
- ``publish``: ``EnergyPublisher`` (PutMetricData of EnergyWh and SavedWh):
  :mod:`autoscaler.adapters.cloudwatch_publish`.

The project imports the layered modules, never these (an import contract in pyproject.toml checks it).
"""
