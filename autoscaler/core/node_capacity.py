"""What one TASK node offers YARN, and the width w (whole nodes) a job's vCPU and memory demand needs.

A job declares its width as ``--nodes w``, or as the vCPUs and memory its containers take together;
then w is the least number of whole TASK nodes whose YARN capacity holds both:

    w = max(1, ceil(V / c), ceil(1024 G / m))

with V the vCPUs, G the memory in GiB, c a node's YARN vCPUs and m its YARN memory in MiB
(``yarn.nodemanager.resource.memory-mb``).

Source of the memory figures: Amazon EMR Release Guide, "Task configuration", default values of
``yarn.nodemanager.resource.memory-mb`` per instance type (without HBase), as published in
awsdocs/amazon-emr-release-guide, doc_source/emr-hadoop-task-config.md. The vCPUs are the EC2
instance type's, which EMR gives YARN by default (``yarn.nodemanager.resource.cpu-vcores``). Only the
m5, c5 and r5 types whose figures were read there are listed; any other type is told through
``cluster.task_yarn_vcpus`` and ``cluster.task_yarn_memory_mb``.

Pure: no files, no clock, no AWS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from numbers import Real

from autoscaler.core.errors import ConfigError

MIB_PER_GIB = 1024
"""YARN counts memory in MiB; a job's memory is given in GiB."""

TASK_YARN_CAPACITY: dict[str, tuple[int, int]] = {
    # instance type: (vCPUs, yarn.nodemanager.resource.memory-mb)
    "m5.xlarge": (4, 12288),
    "m5.2xlarge": (8, 24576),
    "m5.4xlarge": (16, 57344),
    "m5.8xlarge": (32, 122880),
    "m5.12xlarge": (48, 188416),
    "m5.16xlarge": (64, 253952),
    "m5.24xlarge": (96, 385024),
    "c5.xlarge": (4, 6144),
    "c5.2xlarge": (8, 12288),
    "c5.4xlarge": (16, 24576),
    "c5.9xlarge": (36, 65536),
    "c5.12xlarge": (48, 90112),
    "c5.18xlarge": (72, 139264),
    "c5.24xlarge": (96, 188416),
    "r5.xlarge": (4, 24576),
    "r5.2xlarge": (8, 57344),
    "r5.4xlarge": (16, 122880),
    "r5.8xlarge": (32, 253952),
    "r5.12xlarge": (48, 385024),
    "r5.16xlarge": (64, 516096),
    "r5.24xlarge": (96, 778240),
}
"""EMR's default YARN capacity of one node, per EC2 instance type (see the module's source)."""

DEFAULT_TASK_INSTANCE_TYPE = "m5.xlarge"
"""The TASK type assumed unless told: the one the twin prices (autoscaler.core.twin.PRICE_PER_NODE_HOUR)."""


@dataclass(frozen=True)
class NodeCapacity:
    """One TASK node's YARN capacity: ``vcpus`` and ``memory_mb`` (MiB), and ``source``, words naming
    where the figures come from ("m5.xlarge's YARN capacity"), which refusals quote.

    Raises ConfigError unless both are whole numbers >= 1.
    """

    vcpus: int
    memory_mb: int
    source: str

    def __post_init__(self) -> None:
        for name in ("vcpus", "memory_mb"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"node capacity {name}: expected a whole number >= 1, got {value!r} ({self.source})")

    @property
    def memory_gib(self) -> float:
        return self.memory_mb / MIB_PER_GIB


_TOLD = (("task_yarn_vcpus", "yarn.nodemanager.resource.cpu-vcores"), ("task_yarn_memory_mb", "yarn.nodemanager.resource.memory-mb"))
"""The settings that tell a TASK node's YARN capacity, and the YARN setting each one is."""


def task_capacity(instance_type: str, vcpus: int | None = None, memory_mb: int | None = None) -> NodeCapacity:
    """The YARN capacity of one TASK node of ``instance_type``: ``vcpus`` and ``memory_mb`` where given
    (both, or either one over the table's figure), else :data:`TASK_YARN_CAPACITY`'s.

    Raises ConfigError naming the keys to set when the type is not in the table and a figure is missing.
    """
    known = TASK_YARN_CAPACITY.get(instance_type)
    if known is None and (vcpus is None or memory_mb is None):
        missing = [told for told, value in zip(_TOLD, (vcpus, memory_mb)) if value is None]
        keys = " and ".join(f"cluster.{key}" for key, _ in missing)
        yarn = " and ".join(setting for _, setting in missing)
        raise ConfigError(
            f"cluster.task_instance_type {instance_type!r}: its YARN capacity is not in the table of EMR's defaults "
            f"({', '.join(TASK_YARN_CAPACITY)}); set {keys} (the node's {yarn})"
        )
    if vcpus is None and memory_mb is None:
        return NodeCapacity(known[0], known[1], f"{instance_type}'s YARN capacity")
    return NodeCapacity(
        vcpus if vcpus is not None else known[0],
        memory_mb if memory_mb is not None else known[1],
        f"{instance_type}'s YARN capacity as configured",
    )


def nodes_for(vcpus: float | None, memory_gib: float | None, capacity: NodeCapacity) -> int:
    """w = max(1, ceil(vcpus / capacity.vcpus), ceil(1024 * memory_gib / capacity.memory_mb)): the least
    whole number of nodes whose YARN capacity holds both (an absent demand asks nothing).

    The division is exact on the numbers as written (12.3 GiB is 12.3, not the float next to it), so a
    demand of exactly k nodes needs k, never k + 1. Raises ConfigError for a demand that is not a
    finite number > 0.
    """
    need = 1
    for name, value, per_node in (("vcpus", vcpus, capacity.vcpus), ("memory_gib", memory_gib, Fraction(capacity.memory_mb, MIB_PER_GIB))):
        if value is None:
            continue
        exact = _exact(name, value)
        need = max(need, math.ceil(exact / per_node))
    return need


def _exact(name: str, value: float) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)) or float(value) <= 0:
        raise ConfigError(f"{name}: expected a finite number > 0, got {value!r}")
    # repr gives the shortest decimal that reads back as the same float: the number the user wrote.
    return Fraction(repr(float(value)))
