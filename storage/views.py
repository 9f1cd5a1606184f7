"""The two ways to read a LEDGER topic: raw, and compacted (Pulsar's CompactedTopicImpl).

The compacted view is the compacted ledger's entries with id >= start, then raw
entries after the compaction horizon. Compacted entries carry their original id inside
their bytes (Message wire format including ``id``), so readers answer them verbatim;
the start point inside the compacted ledger is found by binary search over those ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from compactlog.errors import DataLoss
from compactlog.storage import keys
from compactlog.storage.cursor import COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

# (ledger id, entry id, bytes, bytes include the id field)
ViewEntry = tuple[int, int, bytes, bool]


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
            raise DataLoss(f"compacted ledger {lid} of topic {topic_name!r} is missing")
        return CompactedState(lid, meta.entries, cursor.mark_delete)


def original_id(data: bytes) -> MessageId:
    msg = pb.Message.FromString(data)
    return MessageId(msg.id.ledger_id, msg.id.entry_id)


def _compacted_start(store: LedgerStore, state: CompactedState, start: MessageId) -> int:
    """Index of the first compacted entry whose original id is >= start."""
    lo, hi = 0, state.entries
    while lo < hi:
        mid = (lo + hi) // 2
        data = store.db.get(keys.entry_key(state.ledger_id, mid))
        if data is None:
            raise DataLoss(f"compacted ledger {state.ledger_id} is missing entry {mid}")
        if original_id(data) < start:
            lo = mid + 1
        else:
            hi = mid
    return lo


def raw_view(
    store: LedgerStore, topic: str, start: MessageId, stop: MessageId
) -> Iterator[ViewEntry]:
    for lid, eid, data in store.scan(topic, start, stop):
        yield lid, eid, data, False


def compacted_view(
    store: LedgerStore, topic: str, start: MessageId, stop: MessageId
) -> Iterator[ViewEntry]:
    """Compacted entries with id >= start, then raw entries after the horizon.

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
            for entry in _compacted_entries(store, topic, state, start, stop):
                yield entry
                start = MessageId(entry[0], entry[1] + 1)
        except DataLoss:
            if _current_ledger(store, topic) == state.ledger_id:
                raise
            continue  # swapped under us: resume on the new compacted ledger
        if start <= state.horizon:
            start = MessageId(state.horizon.ledger_id, state.horizon.entry_id + 1)
        if start > stop:
            return
        yield from raw_view(store, topic, start, stop)
        return


def _current_ledger(store: LedgerStore, topic: str) -> int | None:
    t = store.topic(topic)
    with t.lock:
        return t.compacted_ledger_id()


def _compacted_entries(
    store: LedgerStore, topic: str, state: CompactedState, start: MessageId, stop: MessageId
) -> Iterator[ViewEntry]:
    first = _compacted_start(store, state, start)
    seen = first
    for _lid, _eid, data in store.scan_ledger(state.ledger_id, first, state.entries - 1):
        ident = original_id(data)
        if ident > stop:
            return
        seen += 1
        yield ident.ledger_id, ident.entry_id, data, True
    if seen < state.entries:
        raise DataLoss(f"compacted ledger {state.ledger_id} of {topic!r} is incomplete")


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
    data = store.db.get(keys.entry_key(state.ledger_id, state.entries - 1))
    if data is None:
        raise DataLoss(f"compacted ledger {state.ledger_id} of {topic!r} is missing its last entry")
    return original_id(data)
