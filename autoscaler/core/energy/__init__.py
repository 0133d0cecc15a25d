"""Energy, pure (paper: dynamic deferral, §VII-B, eq. (11)-(14)): ``power`` (the VM power model),
``accounting`` (a schedule's energy, measured from its nodes' metrics or modelled, and the report
against follow and no provisioning), ``metric_queries`` (CloudWatch GetMetricData queries and the
missing-data rule, no boto3), ``signal`` (carbon and price signals) and ``forecast_archive`` (forecasts
with their issue times). Nothing here does I/O; the adapters read the files, URLs and metrics."""
