"""Deadline-aware capacity provisioning for Hadoop/EMR clusters.

The pure core (workload curves, cost model, policies) follows the paper
"Dynamic Deferral of Workload for Capacity Provisioning in Data Centers"
(the deferral paper); adapters and the CLI sit on top of it.
"""

__version__ = "0.1.0"
