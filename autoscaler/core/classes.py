"""Deadline classes by k-means on job sizes (paper: deferral, §VI-A "Deadline assignment", Table II)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autoscaler.core.errors import ConfigError
from autoscaler.core.model import MIB, Trace


@dataclass(frozen=True)
class DeadlineClass:
    """One row of Table II: jobs in the class, their share, mean sizes in MB, and the class deadline."""

    jobs: int
    share_pct: float
    mean_map_input_mb: float
    mean_shuffle_mb: float
    mean_reduce_output_mb: float
    deadline_slots: int


@dataclass(frozen=True, eq=False)
class DeadlineAssignment:
    """Each job's deadline in slots, shape (n_jobs,), and the class table, most jobs first."""

    deadline_slots: np.ndarray
    classes: tuple[DeadlineClass, ...]
    raised_to_length: int


def assign_deadlines(
    trace: Trace,
    length_slots: np.ndarray,
    n_classes: int = 10,
    seed: int = 0,
) -> DeadlineAssignment:
    """k-means (scikit-learn, ``n_classes`` clusters, fixed ``seed``) on each job's (S, S', S'') in MB.

    Clusters are ranked by job count: the class with the most jobs gets deadline 1 slot,
    the next 2, ... up to ``n_classes``. A deadline shorter than the job's length
    (``length_slots``, shape (n_jobs,)) is raised to the length.
    Raises ConfigError with fewer distinct jobs than classes.
    """
    from sklearn.cluster import KMeans

    sizes_mb = np.array(
        [(j.map_input_bytes, j.shuffle_bytes, j.reduce_output_bytes) for j in trace.jobs], dtype=float
    ) / MIB
    if len(np.unique(sizes_mb, axis=0)) < n_classes:
        raise ConfigError(
            f"{trace.path}: k-means needs at least {n_classes} jobs of distinct sizes, got {len(np.unique(sizes_mb, axis=0))}"
        )
    labels = KMeans(n_clusters=n_classes, random_state=seed, n_init=10).fit_predict(sizes_mb)
    counts = np.bincount(labels, minlength=n_classes)
    # Most jobs first; ties by cluster label so the ranking is deterministic.
    rank_of_label = np.empty(n_classes, dtype=np.int64)
    rank_of_label[np.lexsort((np.arange(n_classes), -counts))] = np.arange(n_classes)
    class_deadline = rank_of_label[labels] + 1
    length_slots = np.asarray(length_slots, dtype=np.int64)
    deadlines = np.maximum(class_deadline, length_slots)
    classes = []
    for label in np.lexsort((np.arange(n_classes), -counts)):
        members = labels == label
        mean = sizes_mb[members].mean(axis=0)
        classes.append(
            DeadlineClass(
                jobs=int(counts[label]),
                share_pct=100.0 * counts[label] / len(labels),
                mean_map_input_mb=float(mean[0]),
                mean_shuffle_mb=float(mean[1]),
                mean_reduce_output_mb=float(mean[2]),
                deadline_slots=int(rank_of_label[label] + 1),
            )
        )
    return DeadlineAssignment(
        deadline_slots=deadlines,
        classes=tuple(classes),
        raised_to_length=int((deadlines > class_deadline).sum()),
    )


def job_length_slots(trace: Trace, slot_s: float, window_slots: int, length_model) -> np.ndarray:
    """Each job's estimated length in whole slots, counted only up to the window's end, shape (n_jobs,).

    Work past the window is clipped from L_t, so a deadline raised to a longer length
    would only stretch the horizon.
    """
    from autoscaler.core.workload import estimate_length_s

    submit_s = np.array([j.submit_s for j in trace.jobs], dtype=float)
    length_s = estimate_length_s(
        np.array([j.map_input_bytes for j in trace.jobs], dtype=float),
        np.array([j.shuffle_bytes for j in trace.jobs], dtype=float),
        np.array([j.reduce_output_bytes for j in trace.jobs], dtype=float),
        length_model,
    )
    # Floats until clipped to the window, so huge sizes or times cannot overflow an int.
    first = np.floor(submit_s / slot_s)
    slots = np.ceil((submit_s + length_s) / slot_s) - first
    return np.clip(np.nan_to_num(slots, nan=1.0, posinf=window_slots), 1, np.maximum(1, window_slots - first)).astype(np.int64)
