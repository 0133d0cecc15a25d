"""CloudWatch: the EC2 metrics of the power model, read per slot, and the energy metrics we publish.

``queries`` (pure): GetMetricData queries, the slot grid, the metrics' bounds, the missing-data
rule, ``InstanceMetrics``.
``reader``: the client factory and ``CloudWatchMetricsReader`` (GetMetricData).
``publish``: ``EnergyPublisher`` (PutMetricData of EnergyWh and SavedWh).
"""
