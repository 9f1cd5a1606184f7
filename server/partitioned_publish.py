"""Publish to a partitioned topic: route each record, store all or nothing, reply in order.

Keyed records go to ``toPositive(murmur2(key)) % partitions`` (``compactlog.partitioner``,
Kafka's default partitioner); keyless ones round-robin, per topic, from where the last
publish left off. The records of one request become one part per partition, appended
together: LEDGER parts in one RocksDB WriteBatch (``LedgerStore.append_across_start``:
all or nothing, also across a crash), SEGMENTED parts after every part was encoded and
checked (``SegmentedLogManager.append_across``: a bad record stores nothing; a crash
between two parts' file appends can leave the earlier parts, see docs/partitions.md).
The reply lists the ids in request order, each with its partition.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence

from compactlog.partitioner import partition_for_key, partition_name
from compactlog.server.broker import Broker
from compactlog.storage.batch import id_field, put_varint
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.storage.segmented.topic_log import SegmentAppended
from compactlog.storage.topic_log import Appended, Durable, IdRun
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb


class RoundRobin:
    """Where each partitioned topic's next keyless record goes."""

    def __init__(self) -> None:
        self._next: dict[str, itertools.count[int]] = {}
        self._lock = threading.Lock()

    def take(self, topic: str, n: int) -> int:
        """The first of ``n`` consecutive positions for ``topic``'s keyless records."""
        with self._lock:
            counter = self._next.setdefault(topic, itertools.count())
            first = next(counter)
            for _ in range(n - 1):
                next(counter)
            return first


def route(
    request: pb.PublishRequest, partitions: int, first_keyless: int
) -> tuple[dict[int, bytearray], list[tuple[int, int]]]:
    """Each partition's part (``PublishRequest.records`` wire bytes) and, for every record
    in request order, ``(partition, index within that partition's part)``."""
    parts: dict[int, bytearray] = {}
    counts: dict[int, int] = {}
    order: list[tuple[int, int]] = []
    keyless = first_keyless
    for record in request.records:
        if record.HasField("key"):
            partition = partition_for_key(record.key, partitions)
        else:
            partition = keyless % partitions
            keyless += 1
        body = record.SerializeToString()
        part = parts.setdefault(partition, bytearray())
        part.append(0x12)
        put_varint(part, len(body))
        part += body
        index = counts.get(partition, 0)
        counts[partition] = index + 1
        order.append((partition, index))
    return parts, order


def keyless_count(request: pb.PublishRequest) -> int:
    return sum(1 for record in request.records if not record.HasField("key"))


class SpreadAppend:
    """The parts of one publish (``Appended``): durable once every part is."""

    def __init__(
        self, parts: Sequence[tuple[int, Appended]], order: Sequence[tuple[int, int]]
    ) -> None:
        self.parts = list(parts)
        self.order = order
        self.runs: list[IdRun] = [run for _p, appended in parts for run in appended.runs]
        self.synced = all(appended.synced for _p, appended in parts)

    def on_durable(self, done: Durable) -> None:
        left = [len(self.parts)]
        lock = threading.Lock()

        def one(error: BaseException | None) -> None:
            with lock:
                if left[0] <= 0:
                    return
                left[0] = 0 if error is not None else left[0] - 1
                finished = left[0] == 0
            if finished:
                done(error)

        if not self.parts:
            done(None)
        for _partition, appended in self.parts:
            appended.on_durable(one)

    def reply(self) -> bytes:
        """``PublishResponse`` bytes: the ids in request order, each with its partition."""
        ids: dict[int, list[tuple[int, int]]] = {}
        for partition, appended in self.parts:
            ids[partition] = [
                (lid, e) for lid, first, n in appended.runs for e in range(first, first + n)
            ]
        out = bytearray()
        for partition, index in self.order:
            lid, entry = ids[partition][index]
            out += id_field(lid, entry, partition)
        return bytes(out) + (b"\x10\x01" if self.synced else b"")


def append_spread(
    broker: Broker, topic: PartitionedTopic, request: pb.PublishRequest, robin: RoundRobin
) -> SpreadAppend:
    """Route and append the records of ``request`` across ``topic``'s partitions."""
    first = robin.take(topic.name, keyless_count(request)) if topic.partitions else 0
    parts, order = route(request, topic.partitions, first)
    chosen = sorted(parts)
    wire = [(partition_name(topic.name, p), bytes(parts[p]), p) for p in chosen]
    appended: Sequence[Appended]
    if topic.kind == TopicKind.LEDGER:
        appended = broker.ledgers.append_across_start(wire)
    else:
        appended = [SegmentAppended(r) for r in broker.segments.append_across(wire)]
    return SpreadAppend(list(zip(chosen, appended, strict=True)), order)
