"""Publish to a partitioned topic: route each record, store all or nothing, reply in order.

Records are routed with Kafka's default partitioner (``compactlog.partitioner``) and the
request becomes one part per partition, appended together
(``LedgerStore.append_across_start``, ``SegmentedLogManager.append_across``); the reply
lists the ids in request order. Routing, the all-or-nothing guarantee of each engine and
the store slot's ``NOT_OWNER`` are in docs/partitions.md ("Inside the server").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from compactlog.errors import NotOwner
from compactlog.partitioner import partition_name
from compactlog.server.broker import Broker
from compactlog.storage.batch import id_field, route_records
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.storage.segmented.topic_log import SegmentAppended
from compactlog.storage.topic_log import Appended, Durable, IdRun
from compactlog.storage.types import TopicKind


class RoundRobin:
    """Where each partitioned topic's next keyless record goes."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def route(self, topic: str, raw: bytes, partitions: int) -> tuple[list[bytes], memoryview]:
        """The request's records by partition (``batch.route_records``, compiled), and
        ``(partition, index)`` of every record in request order (flat)."""
        with self._lock:
            first = self._next.get(topic, 0)
            parts, order, keyless = route_records(raw, partitions, first)
            self._next[topic] = first + keyless
        return parts, order


class SpreadAppend:
    """The parts of one publish (``Appended``): durable once every part is."""

    def __init__(self, parts: Sequence[tuple[int, Appended]], order: memoryview) -> None:
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
        return ordered_reply(self.order, lambda p, k: id_field(*ids[p][k], p), self.synced)


def ordered_reply(order: memoryview, id_of: Callable[[int, int], bytes], synced: bool) -> bytes:
    """``PublishResponse`` bytes of a publish split by ``route_records``: for every record
    in request order (``order``: partition, index in its part), ``id_of(partition, index)``
    (a ``MessageId`` as field 1, with its partition); ``synced`` only when every part was.
    One builder for the slot that stored the parts and for the front that sent them on."""
    out = bytearray()
    for k in range(0, len(order), 2):
        out += id_of(order[k], order[k + 1])
    return bytes(out) + (b"\x10\x01" if synced else b"")


def append_spread(
    broker: Broker, topic: PartitionedTopic, raw: bytes, robin: RoundRobin
) -> SpreadAppend:
    """Route and append the records of the PublishRequest ``raw`` across ``topic``'s
    partitions."""
    parts, order = robin.route(topic.name, raw, topic.partitions)
    chosen = [p for p, part in enumerate(parts) if part]
    foreign = [p for p in chosen if not broker.holds(partition_name(topic.name, p))]
    if foreign:
        raise NotOwner(
            f"records of this publish to {topic.name} go to partitions held by other store "
            f"slots ({', '.join(map(str, foreign))}): publish to the server's main address",
            topic=topic.name,
            partition=foreign[0],
        )
    wire = [(partition_name(topic.name, p), parts[p], p) for p in chosen]
    appended: Sequence[Appended]
    if topic.kind == TopicKind.LEDGER:
        appended = broker.ledgers.append_across_start(wire)
    else:
        appended = [SegmentAppended(r) for r in broker.segments.append_across(wire)]
    return SpreadAppend(list(zip(chosen, appended, strict=True)), order)
