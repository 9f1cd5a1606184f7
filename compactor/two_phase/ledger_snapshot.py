"""Read-only snapshots of a LEDGER topic for PreviewCompaction and VerifyCompaction.

``plan`` is ``LedgerStoreCompactionStorage.begin`` without its one write (creating the
``__compaction`` cursor), so a preview changes nothing; ``compacted_view`` is what a
verification compares: the current compacted ledger, its horizon and the raw entries still
stored up to that horizon (retention may have removed older raw ledgers).
"""

from __future__ import annotations

from dataclasses import dataclass

from compactlog.compactor.two_phase.storage import CompactionInput, Segment, tail_segments
from compactlog.errors import DataLoss
from compactlog.storage.cursor import COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId


@dataclass(frozen=True)
class CompactedView:
    """The compacted ledger of a topic and the raw history it was computed from."""

    topic: str
    ledger_id: int | None  # the compacted ledger, None before the first run
    ledger: Segment | None  # its entries, None when it has none
    horizon: MessageId | None
    raw: tuple[Segment, ...]  # raw entries still stored with id <= horizon, in id order
    retain_null_key: bool


def plan(store: LedgerStore, topic: str) -> CompactionInput:
    """The input a run started now would read (previous compacted ledger + raw tail)."""
    t = store.topic(topic)
    with t.lock:
        cursor = t.cursors.get(COMPACTION_SUBSCRIPTION)
        previous = t.compacted_ledger_id()
        prev_horizon = cursor.mark_delete if previous is not None and cursor else None
        stop = t.lac
        ledgers = [(led.ledger_id, led.entries) for led in t.ledgers]
        retain = t.config.compaction_retain_null_key
    segments: list[Segment] = []
    if previous is not None:
        entries = _entries_of(store, topic, previous)
        if entries:
            segments.append(Segment(previous, 0, entries - 1, True))
    horizon = prev_horizon
    if stop is not None and (prev_horizon is None or stop > prev_horizon):
        horizon = stop
        segments += tail_segments(ledgers, prev_horizon, stop)
    return CompactionInput(topic, previous, prev_horizon, horizon, tuple(segments), retain)


def compacted_view(store: LedgerStore, topic: str) -> CompactedView:
    t = store.topic(topic)
    with t.lock:
        cursor = t.cursors.get(COMPACTION_SUBSCRIPTION)
        ledger_id = t.compacted_ledger_id()
        horizon = cursor.mark_delete if ledger_id is not None and cursor else None
        ledgers = [(led.ledger_id, led.entries) for led in t.ledgers]
        retain = t.config.compaction_retain_null_key
    if ledger_id is None or horizon is None:
        return CompactedView(topic, None, None, None, (), retain)
    entries = _entries_of(store, topic, ledger_id)
    ledger = Segment(ledger_id, 0, entries - 1, True) if entries else None
    raw = tuple(tail_segments(ledgers, None, horizon))
    return CompactedView(topic, ledger_id, ledger, horizon, raw, retain)


def _entries_of(store: LedgerStore, topic: str, ledger_id: int) -> int:
    meta = store.ledger(ledger_id)
    if meta is None:
        raise DataLoss(f"compacted ledger {ledger_id} of topic {topic!r} is missing")
    return int(meta.entries)
