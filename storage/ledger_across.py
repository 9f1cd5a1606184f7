"""One publish across several LEDGER topics (the partitions of a partitioned topic).

Every part is encoded and checked into one RocksDB WriteBatch, under the locks of all
the topics it touches (taken in name order, so two such publishes cannot deadlock), and
written once: a record over ``max.message.bytes`` in any part stores nothing in any
topic, and a crash stores all parts or none (RocksDB applies a WriteBatch atomically, in
the WAL and on recovery). The parts share one group-commit ticket.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING

from compactlog.errors import TopicNotFound
from compactlog.storage.codec import LedgerMeta
from compactlog.storage.ledger_append import IdRun, PendingAppend, build_append
from compactlog.storage.rocks import Batch
from compactlog.storage.types import MessageId

if TYPE_CHECKING:
    from compactlog.storage.ledger_store import LedgerStore
    from compactlog.storage.ledger_topic import LedgerTopic

UndoPoint = tuple[int, list[tuple[LedgerMeta, bool, int, int, int, int]]]


def append_across(
    store: LedgerStore,
    parts: Sequence[tuple[str, bytes, int]],
    now: int,
    allocate: Callable[[str, int], LedgerMeta],
) -> list[PendingAppend]:
    """``(topic, request, partition)`` parts written in one WriteBatch; one
    ``PendingAppend`` a part, in the order given."""
    topics = [store.topic(name) for name, _request, _partition in parts]
    with ExitStack() as locks:
        for topic in sorted({t.name: t for t in topics}.values(), key=lambda t: t.name):
            locks.enter_context(topic.lock)
        for topic in topics:
            if topic.deleted:
                raise TopicNotFound(f"topic {topic.name!r} does not exist", topic=topic.name)
        undo: list[tuple[LedgerTopic, UndoPoint]] = []
        batch = Batch()
        every: list[list[IdRun]] = []
        before: list[LedgerMeta | None] = []
        try:
            for topic, (_name, request, partition) in zip(topics, parts, strict=True):
                undo.append((topic, topic.undo_point()))
                before.append(topic.current)
                runs = build_append(topic, request, now, allocate, batch, partition)
                every.append(runs)
            if batch.ops:
                store.db.write(batch)
        except BaseException:
            for topic, point in reversed(undo):
                topic.rollback(point)  # memory must not run ahead of disk
            raise
        for current, runs in zip(before, every, strict=True):
            store.key_indexer.appended(current, runs)
        ticket = store.group_commit.ticket() if store.fsync and batch.ops else 0
        out = []
        for topic, runs in zip(topics, every, strict=True):
            if runs and not store.fsync:
                lid, first, count = runs[-1]
                topic.confirm(MessageId(lid, first + count - 1))
            out.append(PendingAppend(store, topic, runs, ticket if runs else 0))
        return out
