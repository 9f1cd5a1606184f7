"""The Log service's calls on a partitioned topic ``NAME``: its partitions, merged.

``MergedLog`` stands for ``NAME`` where the service needs a topic (its name for change
signals, ``gone``, the kind for metrics) and knows its partitions' ``TopicLog``s; the
merging itself is ``log.partitioned_reading``. Acknowledge goes to the partition the id
names (``MessageId.partition``); GetLastMessageId lists every partition's last id.

The partitions are the ones this store holds (``Broker.held_partitions``), each with its
true index: all of them, but in a store slot under partition placement only the slot's
own; an id naming a partition held by another slot is ``NOT_OWNER`` there.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Generic, TypeVar

from compactlog.errors import MalformedRequest, NotOwner
from compactlog.partitioner import partition_name
from compactlog.server.broker import Broker
from compactlog.server.log.partitioned_reading import MergedReadSession, check_partition
from compactlog.server.rpc.convert import id_to_pb
from compactlog.storage import batch as codec
from compactlog.storage.key_history import KeyHistory, key_history
from compactlog.storage.topic_log import ReadableLog, TopicLog
from compactlog.storage.types import MessageId, TopicKind
from compactlog.v1 import compactlog_pb2 as pb

if TYPE_CHECKING:
    from compactlog.server.log.service import LogService


L = TypeVar("L", bound=ReadableLog)


class Merged(Generic[L]):
    """A partitioned topic read as one: its (held) partitions' views, ``(index, view)``
    in partition order, out of ``partitions`` in all, merged by a Read."""

    def __init__(self, name: str, kind: TopicKind, parts: list[tuple[int, L]], partitions: int):
        self.name = name
        self.kind = kind
        self.parts = parts
        self.partitions = partitions

    @property
    def logs(self) -> list[L]:
        return [log for _i, log in self.parts]

    def gone(self) -> bool:
        return any(log.gone() for log in self.logs)

    def read_session(self, req: pb.ReadRequest, per_response: int) -> MergedReadSession:
        return MergedReadSession(self.name, self.parts, self.partitions, req, per_response)


class MergedPast(Merged[ReadableLog]):
    """A partitioned topic's past (a Read with ``as_of_time_ms`` on ``NAME``): each
    partition's compacted view as of the last id it had at that time, merged as a Read of
    the present is."""


class MergedLog(Merged[TopicLog]):
    """A partitioned topic as the Log service reads it (its present: every call)."""

    def of_id(self, msg_id: pb.MessageId) -> TopicLog:
        """The partition an id of this topic belongs to (Acknowledge)."""
        index = check_partition(self.name, msg_id.partition, self.partitions)
        for i, log in self.parts:
            if i == index:
                return log
        raise NotOwner(
            f"partition {index} of topic {self.name} is held by another store slot: "
            "call the server's main address",
            topic=self.name,
            partition=str(index),
        )

    def last_ids(self, compacted: bool) -> pb.GetLastMessageIdResponse:
        """Each partition's last id; ``id``: the greatest of them (ledger ids grow
        store-wide, so on LEDGER topics that is the partition written last)."""
        resp = pb.GetLastMessageIdResponse()
        best: tuple[MessageId, int] | None = None
        for i, log in self.parts:
            last = log.last_id(compacted)
            if last is None:
                continue
            out = id_to_pb(last, resp.partitions.add())
            out.partition = i
            if best is None or last > best[0]:
                best = (last, i)
        if best is not None:
            id_to_pb(best[0], resp.id)
            resp.id.partition = best[1]
        return resp


def merged_log(broker: Broker, name: str) -> MergedLog | None:
    """``NAME``'s held partitions as one ``MergedLog`` when it is a partitioned topic,
    else None (the Log service's calls and the subscription admin's alike)."""
    topic = broker.partitioned.get(name)
    if topic is None:
        return None
    held = broker.held_partitions(name, topic.partitions)
    parts = [(i, broker.log(partition_name(name, i))) for i in held]
    return MergedLog(name, topic.kind, parts, topic.partitions)


def merged_key_history(logs: list[TopicLog], key: bytes, limit: int) -> KeyHistory:
    """GetKeyHistory on ``NAME``: every partition's answer (a key lives in one partition
    unless partitions were added since), merged by publish time, each partition's own
    order kept."""
    answers = [key_history(log, key, limit) for log in logs]
    found = KeyHistory(truncated=any(a.truncated for a in answers))

    def publish_time(record: bytes) -> int:
        return codec.decode_message(record).publish_time_ms

    for record in heapq.merge(*(a.records for a in answers), key=publish_time):
        if not found.add(record, limit):
            break
    return found


class PartitionedCalls:
    """The partitioned side of one ``LogService``."""

    def __init__(self, service: LogService) -> None:
        self.service = service

    def merged(self, name: str) -> MergedLog | None:
        """``NAME``'s partitions when it is a partitioned topic, else None."""
        return merged_log(self.service.broker, name)

    def past(
        self, merged: MergedLog, as_of: MessageId | None, as_of_time_ms: int | None
    ) -> MergedPast:
        """``as_of_time_ms`` on ``NAME`` reads every partition's past at that time; an
        ``as_of`` id names one partition's log position, so it is refused here (read
        that partition's past on ``NAME-partition-i``)."""
        name = merged.name
        if as_of is not None:
            raise MalformedRequest(
                f"{name!r} is a partitioned topic: as_of names a position of one partition; "
                f"read that partition ({partition_name(name, 0)} ...) or use as_of_time_ms",
                request="ReadRequest",
                field="as_of",
                topic=name,
            )
        broker = self.service.broker  # its as_of_view refuses SEGMENTED partitions
        views = [(i, broker.as_of_view(log.name, None, as_of_time_ms)) for i, log in merged.parts]
        return MergedPast(name, merged.kind, views, merged.partitions)
