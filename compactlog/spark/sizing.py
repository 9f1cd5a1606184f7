"""How many entries one Spark partition of a read covers.

Every Spark task over a Python data source pays a fixed cost (a task launch, a Python
worker hand-over, a channel to the server): 1M messages read on ``local[2]`` in 10
partitions ran at 94k msg/s, in 2 at 124k (issue 29, the loaded 2-core box). So unless
``entriesPerPartition`` says otherwise, a query's ranges are cut into about one Spark
partition per core of the session (``defaultParallelism``, read when the source is
registered): each core reads one large range. A query over as many topic partitions as
cores reads one range a topic partition. Two bounds keep that sane. A range is not
cut below ``MIN_ENTRIES`` (a small read or micro-batch stays one partition per topic
partition, as Kafka's source reads it), nor left above ``MAX_ENTRIES``: a task reads its
range as a stream of response-sized batches, so its memory does not grow with the
range, but a retried task reads its whole range again and a huge topic on few cores
should still show progress task by task. ``minPartitions`` (Kafka source's option of that
name) asks for at least that many Spark partitions: where the query has fewer topic
partitions, the cut goes finer than either rule until the ranges make that many, below
``MIN_ENTRIES`` if need be (as Kafka's source, which then divides its partitions).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

MIN_ENTRIES = 100_000
MAX_ENTRIES = 5_000_000


def known_cores(cores: int) -> int:
    """``cores`` when the session told it (> 0), else this machine's CPUs: the planner
    runs on the driver, whose CPUs are a local master's cores."""
    return cores if cores > 0 else os.cpu_count() or 1


@dataclass(frozen=True)
class Sizing:
    """The cut of a query's ranges: every ``fixed`` entries when the option gives it,
    else about ``cores`` partitions over the query's entries, each of ``least`` to
    ``most`` entries; finer where that makes fewer than ``min_partitions``."""

    cores: int
    fixed: int | None = None
    least: int = MIN_ENTRIES
    most: int = MAX_ENTRIES
    min_partitions: int | None = None

    def entries(self, total: int, logs: int = 1) -> int:
        """Entries a Spark partition reads when the query's ranges, over ``logs`` topic
        partitions, hold ``total``. As many topic partitions as cores already give
        every core its own: then only ``most`` cuts (Kafka's source, too, splits topic
        partitions only when asked for more partitions than there are).

        With ``min_partitions`` above ``logs``, no more than ``total // min_partitions``
        (at least 1): every topic partition of ``n`` entries gives ``ceil(n / size)``
        ranges, so together at least ``min_partitions`` where ``total`` reaches it."""
        size = self._by_rule(total, logs)
        wanted = self.min_partitions
        if wanted is not None and logs < wanted:
            size = min(size, max(total // wanted, 1))
        return size

    def _by_rule(self, total: int, logs: int) -> int:
        if self.fixed is not None:
            return self.fixed
        if logs >= self.cores:
            return self.most
        share = -(-total // max(self.cores, 1))
        return min(max(share, self.least), self.most)
