"""A marked part of a spanning publish appended to a LEDGER topic at most once.

The front may send a part again (after its own crash or a shard's, ``storage/spanning.py``);
the part's id runs are kept under ``keys.spanning_part_key`` in the same WriteBatch as its
records, so the second send finds them and answers with the first append's ids instead
of storing the records twice. The look-up and the write happen under the topic's lock, so
two sends of one part racing each other store it once.

Kept parts below the front's floor are forgotten by a range delete riding on a later
part's write, at most once per ``FORGET_EVERY`` of spanning ids (the front's ids count
microseconds), so range tombstones stay few.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from compactlog.errors import TopicNotFound
from compactlog.storage import keys
from compactlog.storage.codec import LedgerMeta
from compactlog.storage.ledger_append import PendingAppend, build_append
from compactlog.storage.rocks import Batch
from compactlog.storage.spanning import SpanningPart, decode_runs, encode_runs

if TYPE_CHECKING:
    from compactlog.storage.ledger_store import LedgerStore

FORGET_EVERY = 10_000_000  # ten seconds of spanning ids


class Forgetting:
    """The floor below which this store last forgot kept parts."""

    def __init__(self) -> None:
        self.floor = 0

    def due(self, floor: int) -> bool:
        return floor >= self.floor + FORGET_EVERY


def append_part(
    store: LedgerStore,
    name: str,
    request: bytes,
    partition: int,
    part: SpanningPart,
    now: int,
    allocate: Callable[[str, int], LedgerMeta],
) -> PendingAppend:
    """Append a marked part once; a part stored before answers with its stored ids (once
    those are synced, as a first append would)."""
    topic = store.topic(name)
    key = keys.spanning_part_key(part.txid, name)
    with topic.lock:
        if topic.deleted:
            raise TopicNotFound(f"topic {topic.name!r} does not exist", topic=topic.name)
        kept = store.db.get(key)
        if kept is not None:
            ticket = store.group_commit.ticket() if store.fsync else 0
            return PendingAppend(store, topic, decode_runs(kept), ticket)
        undo = topic.undo_point()
        before = topic.current
        batch = Batch()
        try:
            runs, _ = build_append(topic, request, now, allocate, partition, batch)
            batch.put(key, encode_runs(runs))
            forgetting = store.spanning_forgetting
            if forgetting.due(part.floor):
                batch.delete_range(*keys.spanning_parts_below(part.floor))
            store.db.write(batch)
        except BaseException:
            topic.rollback(undo)  # memory must not run ahead of disk
            raise
        if forgetting.due(part.floor):
            forgetting.floor = part.floor
        return store.appended(topic, before, runs)
