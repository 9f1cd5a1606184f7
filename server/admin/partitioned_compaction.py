"""Compaction of a partitioned topic: every partition, and the aggregate status.

Each partition is an ordinary topic with its own run (in a compaction worker process,
``compactor.workers``), so ``Compact {NAME}`` starts one run a partition (they run side
by side, up to ``compaction.max.concurrent``) and ``GetCompactionStatus {NAME}`` folds
their statuses: RUNNING while any runs, ERROR if any failed, CANCELLED if any was
cancelled, SUCCESS once any succeeded, else NOT_RUN; ``last_run`` sums the partitions'
last runs (``duration_ms``: the longest) and ``partitions`` lists each status in order.
The partitions are ``(index, NAME-partition-i)`` pairs: every partition, or in a store
slot under partition placement those the slot holds, named by their true index.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from compactlog.errors import CompactionNotRunning, CompactionRunning
from compactlog.v1 import compactlog_pb2 as pb

POLL_S = 0.05


class PartitionCompactions(Protocol):
    def compact(self, topic: str, wait: bool) -> pb.CompactionStatus: ...

    def status(self, topic: str) -> pb.CompactionStatus: ...

    def cancel(self, topic: str) -> pb.CompactionStatus: ...


_FOLD_ORDER = (
    pb.CompactionStatus.RUNNING,
    pb.CompactionStatus.ERROR,
    pb.CompactionStatus.CANCELLED,
    pb.CompactionStatus.SUCCESS,
)
_SUMMED = ("read", "kept", "removed", "tombstones", "keyless_dropped", "bytes_in", "bytes_out")


Parts = Sequence[tuple[int, str]]  # (partition index, partition topic), in order


def aggregate(
    statuses: Sequence[pb.CompactionStatus], indices: Sequence[int] | None = None
) -> pb.CompactionStatus:
    """One status for the partitioned topic, the partitions' own inside; ``indices``
    are the statuses' partition indices (default 0, 1, ...), named in ``last_error``."""
    out = pb.CompactionStatus()
    states = {s.state for s in statuses}
    out.state = next((s for s in _FOLD_ORDER if s in states), pb.CompactionStatus.NOT_RUN)
    numbers = range(len(statuses)) if indices is None else indices
    out.last_error = "; ".join(
        f"partition {i}: {s.last_error}"
        for i, s in zip(numbers, statuses, strict=True)
        if s.last_error
    )
    runs = [s.last_run for s in statuses if s.HasField("last_run")]
    if runs:
        for name in _SUMMED:
            setattr(out.last_run, name, sum(getattr(r, name) for r in runs))
        out.last_run.duration_ms = max(r.duration_ms for r in runs)
        out.last_run.engine = runs[0].engine
    out.partitions.extend(statuses)
    return out


def status(compactions: PartitionCompactions, parts: Parts) -> pb.CompactionStatus:
    return aggregate([compactions.status(name) for _i, name in parts], [i for i, _n in parts])


def compact(
    compactions: PartitionCompactions, topic: str, parts: Parts, wait: bool
) -> pb.CompactionStatus:
    """Start a run on every partition (none when one is running already: ALREADY_EXISTS,
    as for one topic); with ``wait``, return once every run has ended."""
    for i, name in parts:
        if compactions.status(name).state == pb.CompactionStatus.RUNNING:
            raise CompactionRunning(
                f"a compaction of {topic!r} is running (partition {i})", topic=topic
            )
    for _i, name in parts:
        compactions.compact(name, wait=False)
    while wait:
        current = status(compactions, parts)
        if current.state != pb.CompactionStatus.RUNNING:
            return current
        time.sleep(POLL_S)
    return status(compactions, parts)


def cancel(compactions: PartitionCompactions, topic: str, parts: Parts) -> pb.CompactionStatus:
    """Cancel every partition's active run; none active is COMPACTION_NOT_RUNNING."""
    cancelled = 0
    for _i, name in parts:
        try:
            compactions.cancel(name)
            cancelled += 1
        except CompactionNotRunning:
            continue
    if not cancelled:
        raise CompactionNotRunning(f"no compaction of {topic!r} is running", topic=topic)
    return status(compactions, parts)
