"""``TopicLog`` over one LEDGER topic of the RocksDB ledger store."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from compactlog.storage.cursor import Cursor
from compactlog.storage.group_commit import SyncTicket
from compactlog.storage.ledger_append import PendingAppend
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.read_range import ViewBatch
from compactlog.storage.spanning import SpanningPart
from compactlog.storage.types import MessageId, TopicKind
from compactlog.storage.views import compacted_view, last_compacted_id, raw_view


class LedgerTopicLog:
    kind = TopicKind.LEDGER

    def __init__(self, store: LedgerStore, name: str, partition: int = 0) -> None:
        self.store = store
        self.name = name
        self.partition = partition  # set on NAME-partition-i: goes into every id
        self.topic = store.topic(name)  # TopicNotFound when there is none

    def gone(self) -> bool:
        return self.topic.deleted or self.topic.closed

    def visible_end(self) -> MessageId | None:
        return self.topic.lac

    def last_id(self, compacted: bool) -> MessageId | None:
        return last_compacted_id(self.store, self.name) if compacted else self.topic.lac

    def earliest(self) -> MessageId:
        return MessageId(0, 0)

    def latest(self) -> MessageId:
        lac = self.topic.lac
        return MessageId(0, 0) if lac is None else lac.next()

    def at_time(self, timestamp_ms: int) -> MessageId:
        found = self.store.find_by_timestamp(self.name, timestamp_ms)
        return found if found is not None else self.latest()

    def check_start(self, msg_id: MessageId) -> MessageId:
        return msg_id  # a start compaction or retention removed reads from the next one

    def batches(self, start: MessageId, stop: MessageId, compacted: bool) -> Iterator[ViewBatch]:
        view = compacted_view if compacted else raw_view
        reading = self.store.key_indexer.reading
        for batch in view(self.store, self.name, start, stop):
            reading()  # the key index's merges wait for this reader's pause
            yield batch

    def open_cursor(
        self,
        subscription: str,
        latest: bool,
        read_compacted: bool = False,
        properties: dict[str, str] | None = None,
    ) -> Cursor:
        return self.store.open_cursor(self.name, subscription, latest, read_compacted, properties)

    def cursor_in_memory(self, subscription: str, read_compacted: bool) -> Cursor | None:
        """(A change of ``read_compacted`` is a durable write: ``open_cursor``.)"""
        if self.gone():
            return None
        cursor = self.topic.cursors.get(subscription)
        if cursor is None or cursor.reads_compacted != read_compacted:
            return None
        return cursor

    def subscriptions(self) -> list[Cursor]:
        with self.topic.lock:
            return [self.topic.cursors[name] for name in sorted(self.topic.cursors)]

    def delete_subscription(self, subscription: str) -> None:
        self.store.delete_cursor(self.name, subscription)

    def reset_subscription(self, subscription: str, start: MessageId) -> Cursor:
        return self.store.reset_cursor(self.name, subscription, start)

    def backlog(self, cursor: Cursor) -> int:
        return self.store.backlog(self.name, cursor)

    def delivered(self, cursor: Cursor, last: MessageId | None, rewound: bool = False) -> None:
        cursor.deliver(last, rewound)

    def acknowledge(self, subscription: str, msg_id: MessageId, cumulative: bool) -> SyncTicket:
        return self.store.acknowledge_start(self.name, subscription, msg_id, cumulative)

    def acknowledge_list(self, subscription: str, ids: Sequence[MessageId]) -> SyncTicket:
        return self.store.acknowledge_list_start(self.name, subscription, ids)

    def append_request(self, request: bytes, part: SpanningPart | None = None) -> PendingAppend:
        return self.store.append_request_start(self.name, request, self.partition, part)

    def append_requests(
        self,
        requests: Sequence[tuple[bytes, SpanningPart | None]],
        chains: Sequence[int] | None = None,
    ) -> list[PendingAppend | Exception]:
        return self.store.append_requests_start(self.name, requests, self.partition, chains)
