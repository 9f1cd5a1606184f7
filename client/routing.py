"""Producer-side routing for partitioned topics: Kafka's default partitioner, as the server.

A request whose records all land on one partition goes straight to ``NAME-partition-i``
(keyed records by ``toPositive(murmur2(key)) % partitions``, keyless ones round-robin);
a request spanning partitions goes to ``NAME`` and the server splits it, so that it stays
all-or-nothing (CONTRACT section 9).
"""

from __future__ import annotations

import itertools
import threading

from compactlog.partitioner import partition_for_key, partition_name
from compactlog.v1 import compactlog_pb2 as pb


class PartitionRouter:
    def __init__(self, topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self._keyless = itertools.count()
        self._lock = threading.Lock()

    def target(self, request: pb.PublishRequest) -> str:
        """The topic to publish ``request`` to."""
        chosen: set[int] = set()
        for record in request.records:
            if record.HasField("key"):
                chosen.add(partition_for_key(record.key, self.partitions))
            else:
                with self._lock:
                    chosen.add(next(self._keyless) % self.partitions)
            if len(chosen) > 1:
                return self.topic
        if len(chosen) == 1:
            return partition_name(self.topic, chosen.pop())
        return self.topic
