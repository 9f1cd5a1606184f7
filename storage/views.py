"""The two ways to read a LEDGER topic: raw, and compacted (Pulsar's CompactedTopicImpl).

Both yield checked stored batches covering an id range; the one reader
(``storage.read_range``) trims them at the ends and splices their payloads. The
compacted view is the compacted ledger's batches with ids >= start, then raw batches
after the compaction horizon. Compacted batches keep the original ids inside (their
headers carry the first and last), so the start batch is found by a binary search over
batch headers, not by decoding messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from compactlog.errors import DataLoss
from compactlog.storage import batch as codec
from compactlog.storage.cursor import COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_scans import StoredBatch
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.read_range import ViewBatch, read_chunks
from compactlog.storage.types import MessageId, StoredMessage


@dataclass(frozen=True)
class CompactedState:
    ledger_id: int
    entries: int
    horizon: MessageId


def compacted_state(store: LedgerStore, topic_name: str) -> CompactedState | None:
    topic = store.topic(topic_name)
    with topic.lock:
        lid = topic.compacted_ledger_id()
        cursor = topic.cursors.get(COMPACTION_SUBSCRIPTION)
        if lid is None or cursor is None or cursor.mark_delete is None:
            return None
        meta = store.ledger(lid)
        if meta is None:
            raise DataLoss(
                f"compacted ledger {lid} of topic {topic_name!r} is missing",
                topic=topic_name,
                ledger=lid,
            )
        return CompactedState(lid, meta.entries, cursor.mark_delete)


def _batch_at(store: LedgerStore, state: CompactedState, position: int) -> StoredBatch:
    found = store.batch_at(state.ledger_id, position)
    if found is None:
        raise DataLoss(
            f"compacted ledger {state.ledger_id} is missing entry {position}",
            ledger=state.ledger_id,
            entry=position,
        )
    return found


def _compacted_start(store: LedgerStore, state: CompactedState, start: MessageId) -> int:
    """Position of the first batch of the compacted ledger holding an id >= start. The
    first batch is looked at first: a read of the whole view (from EARLIEST, the common
    case) needs one batch read, not the ~log2(batches) of the search."""
    if state.entries == 0:
        return 0
    at, _data, header = _batch_at(store, state, 0)
    if header.last_id >= start:
        return at
    lo, hi = at + header.count, state.entries
    while lo < hi:
        at, _data, header = _batch_at(store, state, (lo + hi) // 2)
        if header.last_id < start:
            lo = at + header.count
        elif header.first_id >= start:
            hi = at
        else:
            return at  # this batch holds start
    return lo


def raw_view(
    store: LedgerStore, topic: str, start: MessageId, stop: MessageId
) -> Iterator[ViewBatch]:
    for _at, data, header in store.raw_batches(topic, start, stop):
        yield data, header, start


def compacted_view(
    store: LedgerStore, topic: str, start: MessageId, stop: MessageId
) -> Iterator[ViewBatch]:
    """Compacted batches with ids >= start, then raw batches after the horizon.

    A compaction may commit and delete the ledger this reader is on between reading the
    state and opening the scan; then the read resumes after the last id it yielded on
    the new compacted ledger, which covers a superset. A ledger missing while it is
    still the current one is DATA_LOSS, never a silent partial answer.
    """
    while True:
        state = compacted_state(store, topic)
        if state is None or start > state.horizon:
            yield from raw_view(store, topic, start, stop)
            return
        try:
            for _at, data, header in _compacted_batches(store, topic, state, start, stop):
                yield data, header, start
                start = max(start, header.last_id.next())
        except DataLoss:
            if _current_ledger(store, topic) == state.ledger_id:
                raise
            continue  # swapped under us: resume on the new compacted ledger
        start = max(start, state.horizon.next())
        if start > stop:
            return
        yield from raw_view(store, topic, start, stop)
        return


def _current_ledger(store: LedgerStore, topic: str) -> int | None:
    t = store.topic(topic)
    with t.lock:
        return t.compacted_ledger_id()


def _compacted_batches(
    store: LedgerStore, topic: str, state: CompactedState, start: MessageId, stop: MessageId
) -> Iterator[StoredBatch]:
    if state.entries == 0:
        return
    position = _compacted_start(store, state, start)
    seen = position
    for at, data, header in store.batches(state.ledger_id, position, state.entries - 1):
        if at != seen:
            break
        if header.first_id > stop:
            return
        seen = at + header.count
        yield at, data, header
    if seen < state.entries:
        raise DataLoss(
            f"compacted ledger {state.ledger_id} of {topic!r} is incomplete",
            topic=topic,
            ledger=state.ledger_id,
        )


def view_messages(
    store: LedgerStore, topic: str, start: MessageId, stop: MessageId, compacted: bool
) -> Iterator[StoredMessage]:
    """The view's messages decoded (tools and tests: reads send stored bytes as they are)."""
    view = compacted_view if compacted else raw_view
    for chunk in read_chunks(view(store, topic, start, stop), f"topic {topic!r}", stop, 1 << 30):
        payload = chunk.to_bytes()
        for *_ids, s, e in codec.walk(payload, f"topic {topic!r}"):
            yield codec.decode_message(payload[s:e])


def last_compacted_id(store: LedgerStore, topic: str) -> MessageId | None:
    """Last message of the compacted view: the raw tail's last, else the compacted ledger's."""
    t = store.topic(topic)
    state = compacted_state(store, topic)
    if state is None:
        return t.lac
    if t.lac is not None and t.lac > state.horizon:
        return t.lac
    if state.entries == 0:
        return None
    return _batch_at(store, state, state.entries - 1)[2].last_id
