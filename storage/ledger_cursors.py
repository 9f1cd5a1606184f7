"""The cursors of LEDGER topics in RocksDB: a base of ``LedgerStore``.

Each cursor is a head record (``C topic \\0 subscription``: mark-delete, delivered,
properties as JSON) and one record per range of ids acked individually beyond the
mark-delete position (``A topic \\0 subscription \\0 first id`` -> last id; see
``storage/keys.py``). A change writes the records it touched (``CursorChange``), in one
batch with the topic's lock held; an ack shares the group commit with appends
(``publish.durability``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from compactlog.errors import NotDelivered, SubscriptionNotFound
from compactlog.storage import keys
from compactlog.storage.cursor import Cursor, CursorChange
from compactlog.storage.group_commit import GroupCommit, SyncTicket
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.types import MessageId


def cursor_ops(batch: Batch, topic: str, cursor: Cursor, change: CursorChange) -> None:
    """The records a cursor change touches: the head, and each range written or gone."""
    if change.head:
        head = json.dumps(cursor.head(), separators=(",", ":")).encode()
        batch.put(keys.cursor_key(topic, cursor.name), head)
    for start, end in change.ranges.items():
        key = keys.ack_range_key(topic, cursor.name, *start)
        if end is None:
            batch.delete(key)
        else:
            batch.put(key, keys.ack_range_value(*end))


class LedgerCursors:
    """Base of LedgerStore: needs its RocksDB, its topics and its durability setting."""

    db: RocksDB
    fsync: bool
    group_commit: GroupCommit
    _topics: dict[str, LedgerTopic]

    def topic(self, name: str) -> LedgerTopic:
        raise NotImplementedError

    def open_cursor(
        self,
        name: str,
        subscription: str,
        latest: bool = False,
        read_compacted: bool | None = None,
        properties: dict[str, str] | None = None,
    ) -> Cursor:
        """The subscription's cursor, created (with ``properties``) at the earliest or
        latest id on first use. ``read_compacted`` (a Consume's) is recorded with the
        cursor, durably, when it changes: the compactor keeps tombstones for subscriptions
        reading compacted."""
        topic = self.topic(name)
        with topic.lock:
            cursor = topic.cursors.get(subscription)
            if cursor is None:
                cursor = Cursor(subscription, properties=dict(properties or {}))
                if latest:
                    cursor.mark_delete = cursor.read_position = cursor.delivered = topic.lac
                if read_compacted:
                    cursor.set_reads_compacted(True)
                batch = Batch()
                self._write_change(topic, cursor, CursorChange(head=True), batch)
                self.db.write(batch, sync=self.fsync)
                topic.cursors[subscription] = cursor
            elif read_compacted is not None:
                change = cursor.set_reads_compacted(read_compacted)
                if change:
                    batch = Batch()
                    self._write_change(topic, cursor, change, batch)
                    self.db.write(batch, sync=self.fsync)
            return cursor

    def _cursor(self, topic: LedgerTopic, subscription: str) -> Cursor:
        cursor = topic.cursors.get(subscription)
        if cursor is None:
            raise SubscriptionNotFound(
                f"subscription {subscription!r} does not exist on {topic.name!r}",
                topic=topic.name,
                subscription=subscription,
            )
        return cursor

    def _write_change(
        self, topic: LedgerTopic, cursor: Cursor, change: CursorChange, batch: Batch
    ) -> None:
        cursor_ops(batch, topic.name, cursor, change)

    def acknowledge(
        self, name: str, subscription: str, msg_id: MessageId, cumulative: bool
    ) -> Cursor:
        """Apply an ack and return once it is on disk."""
        cursor, ticket = self._acknowledge(name, subscription, msg_id, cumulative)
        if ticket:
            self.group_commit.wait(ticket)
        return cursor

    def acknowledge_start(
        self, name: str, subscription: str, msg_id: MessageId, cumulative: bool
    ) -> SyncTicket:
        """Apply an ack now (memory and WAL); the result tells when it is on disk. Acks
        share the group commit with appends: many consumers acknowledging at once cost
        one fsync, and no thread waits on one while holding the topic's lock. When no
        sync is running, this thread runs it (``sync_here``, after the lock): a lone
        consumer's ack waits for its fsync alone, not also for the syncer to wake."""
        _cursor, ticket = self._acknowledge(name, subscription, msg_id, cumulative)
        return self._synced_here(ticket)

    def _acknowledge(
        self, name: str, subscription: str, msg_id: MessageId, cumulative: bool
    ) -> tuple[Cursor, int]:
        """Acknowledge an id delivered to the subscription (NOT_DELIVERED otherwise, and
        nothing changes): only the records the ack changed are written, to the WAL; the
        ticket (0: nothing to wait for) is the group commit that makes them durable."""
        topic = self.topic(name)
        with topic.lock:
            cursor = self._cursor(topic, subscription)
            try:
                if not cursor.check_delivered(msg_id, topic.holds):
                    return cursor, 0
            except NotDelivered as exc:
                exc.metadata["topic"] = name
                raise
            change = cursor.acknowledge(msg_id, cumulative, topic.successor)
            return cursor, self._write_acks(topic, cursor, change)

    def acknowledge_list_start(
        self, name: str, subscription: str, ids: Sequence[MessageId]
    ) -> SyncTicket:
        """``acknowledge_start`` of many individual acks: every id checked first (one
        never delivered is NOT_DELIVERED and nothing changes), then one batch for them all,
        one group commit."""
        topic = self.topic(name)
        with topic.lock:
            cursor = self._cursor(topic, subscription)
            try:
                fresh = cursor.check_list(ids, topic.holds)
            except NotDelivered as exc:
                exc.metadata["topic"] = name
                raise
            ticket = self._write_acks(
                topic, cursor, cursor.acknowledge_list(fresh, topic.successor)
            )
        return self._synced_here(ticket)

    def _write_acks(self, topic: LedgerTopic, cursor: Cursor, change: CursorChange) -> int:
        """The records ``change`` left, written to the WAL; the ticket of the group commit
        that makes them durable (0: nothing to wait for), taken ``held``: the acking
        thread syncs it itself after the topic's lock (``_synced_here``), so it wakes no
        syncer for nothing."""
        if not change:
            return 0
        batch = Batch()
        self._write_change(topic, cursor, change, batch)
        self.db.write(batch)  # the WAL; synced by the group commit
        if not self.fsync:
            return 0
        with self.group_commit.held():
            return self.group_commit.ticket()

    def _synced_here(self, ticket: int) -> SyncTicket:
        """``ticket`` synced on this thread now unless a sync runs (whose end hands it to
        the syncer): a lone ack waits for its fsync alone."""
        if ticket:
            self.group_commit.sync_here()
        return SyncTicket(self.group_commit, ticket)

    def delete_cursor(self, name: str, subscription: str) -> None:
        """Drop a subscription: its head and every range record, in one synced write."""
        topic = self.topic(name)
        with topic.lock:
            self._cursor(topic, subscription)
            batch = Batch()
            batch.delete(keys.cursor_key(name, subscription))
            prefix = keys.ack_range_prefix(name, subscription)
            batch.delete_range(prefix, prefix[:-1] + b"\x01")
            self.db.write(batch, sync=True)
            del topic.cursors[subscription]

    def reset_cursor(self, name: str, subscription: str, start: MessageId) -> Cursor:
        """Move the subscription so that delivery starts again at ``start`` (inclusive),
        its acknowledgements forgotten; one synced write."""
        topic = self.topic(name)
        with topic.lock:
            cursor = self._cursor(topic, subscription)
            change = cursor.reset(topic.predecessor(start))
            batch = Batch()
            self._write_change(topic, cursor, change, batch)
            self.db.write(batch, sync=True)
            return cursor

    def backlog(self, name: str, cursor: Cursor) -> int:
        """Messages after the mark-delete position not acknowledged individually."""
        topic = self.topic(name)
        with topic.lock:
            mark = cursor.mark_delete
            total = 0
            for led in topic.ledgers:
                if mark is None or led.ledger_id > mark.ledger_id:
                    total += led.entries
                elif led.ledger_id == mark.ledger_id:
                    total += max(0, led.entries - mark.entry_id - 1)
            return max(0, total - cursor.acked.ids())

    def commit_cursor(
        self,
        name: str,
        subscription: str,
        mark_delete: MessageId | None,
        properties: dict[str, str],
        extra: Callable[[Batch], None] | None = None,
    ) -> None:
        """Set position and properties in one atomic, synced write (plus ``extra`` ops)."""
        topic = self.topic(name)
        with topic.lock:
            cursor = topic.cursors.get(subscription) or Cursor(subscription)
            change = cursor.set_position(mark_delete, properties)
            batch = Batch()
            self._write_change(topic, cursor, change, batch)
            if extra is not None:
                extra(batch)
            self.db.write(batch, sync=True)
            topic.cursors[subscription] = cursor
