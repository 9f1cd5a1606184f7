"""The in-process ``CompactionStorage`` over the RocksDB ``LedgerStore``.

Keys come from the per-batch key blocks (``storage.codec``), so phase one never reads
a payload. A reverse key read holds one ledger's key blocks at a time (bounded by
``ledger.max.bytes`` worth of keys, not by the topic). Phase two reads winners by point
lookups when they are sparse and by one range scan when they are dense.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from compactlog.compactor.two_phase.storage import (
    CompactionInput,
    KeyEntry,
    NewEntry,
    Segment,
    tail_segments,
)
from compactlog.errors import CommitConflict, DataLoss, TopicNotFound
from compactlog.storage import keys
from compactlog.storage.codec import ROLE_COMPACTED, iter_key_block
from compactlog.storage.cursor import COMPACTED_LEDGER_PROPERTY, COMPACTION_SUBSCRIPTION
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId

# Below this share of selected entries, point lookups beat scanning every entry.
SPARSE_SELECTION = 0.3


# The compactor runs in the server's process and holds the GIL while it scans; without a
# pause now and then, a publish waits out the interpreter's 5 ms switch interval at each of
# its several thread hand-offs (~40 ms p50 during a run, measured). sleep(0) releases the
# GIL so a waiting request thread runs at once.
YIELD_MASK = 1023  # entries between pauses


def _let_requests_run() -> None:
    time.sleep(0)


def backlog_bytes(store: LedgerStore, topic_name: str) -> int:
    """Estimated raw bytes after the ``__compaction`` mark-delete position (Pulsar's
    compaction backlog), pro rata inside the ledger holding the position."""
    topic = store.topic(topic_name)
    with topic.lock:
        cursor = topic.cursors.get(COMPACTION_SUBSCRIPTION)
        mark = cursor.mark_delete if cursor is not None else None
        total = 0
        for led in topic.ledgers:
            if not led.entries or (mark is not None and led.ledger_id < mark.ledger_id):
                continue
            if mark is not None and led.ledger_id == mark.ledger_id:
                left = max(0, led.entries - mark.entry_id - 1)
                total += led.bytes * left // led.entries
            else:
                total += led.bytes
        return total


class LedgerStoreCompactionStorage:
    """``CompactionStorage`` over a ``LedgerStore`` in this process."""

    def __init__(self, store: LedgerStore) -> None:
        self.store = store

    def begin(self, topic: str) -> CompactionInput:
        store = self.store
        t = store.topic(topic)
        with t.lock:
            if COMPACTION_SUBSCRIPTION not in t.cursors:
                store.open_cursor(topic, COMPACTION_SUBSCRIPTION)
            cursor = t.cursors[COMPACTION_SUBSCRIPTION]
            previous = t.compacted_ledger_id()
            prev_horizon = cursor.mark_delete if previous is not None else None
            stop = t.lac
            ledgers = [(led.ledger_id, led.entries) for led in t.ledgers]
            retain = t.config.compaction_retain_null_key
        segments: list[Segment] = []
        if previous is not None:
            meta = store.ledger(previous)
            if meta is None:
                raise DataLoss(f"compacted ledger {previous} of topic {topic!r} is missing")
            if meta.entries:
                segments.append(Segment(previous, 0, meta.entries - 1, True))
        horizon = prev_horizon
        if stop is not None and (prev_horizon is None or stop > prev_horizon):
            horizon = stop
            segments += tail_segments(ledgers, prev_horizon, stop)
        return CompactionInput(topic, previous, prev_horizon, horizon, tuple(segments), retain)

    # ---- reads ----------------------------------------------------------------------

    def _blocks(self, ledger_id: int, first: int, last: int) -> Iterator[tuple[int, bytes]]:
        db = self.store.db
        begin = db.last_key(
            keys.key_block_key(ledger_id, 0), keys.key_block_key(ledger_id, first + 1)
        )
        begin = begin or keys.key_block_key(ledger_id, first)
        for key, block in db.scan(begin, keys.ledger_ranges(ledger_id)[1][1]):
            block_first = keys.entry_ids(key)[1]
            if block_first > last:
                return
            _let_requests_run()
            yield block_first, block

    def _blocks_reversed(
        self, ledger_id: int, first: int, last: int
    ) -> Iterator[tuple[int, bytes]]:
        """Key blocks covering entries first..last, last block first."""
        begin = keys.key_block_key(ledger_id, 0)
        for key, block in self.store.db.scan_reverse(
            begin, keys.key_block_key(ledger_id, last + 1)
        ):
            block_first = keys.entry_ids(key)[1]
            _let_requests_run()
            yield block_first, block
            if block_first <= first:
                return

    def read_keys(self, segment: Segment, reverse: bool = False) -> Iterator[KeyEntry]:
        lid, first, last = segment.ledger_id, segment.first_entry, segment.last_entry
        if not reverse:
            for block_first, block in self._blocks(lid, first, last):
                for eid, flags, size, key in iter_key_block(block_first, block):
                    if first <= eid <= last:
                        yield eid, flags, size, key
            return
        # Newest first, one key block in memory at a time (not the ledger's whole list).
        for block_first, block in self._blocks_reversed(lid, first, last):
            for eid, flags, size, key in reversed(list(iter_key_block(block_first, block))):
                if first <= eid <= last:
                    yield eid, flags, size, key

    def read_entries(
        self, segment: Segment, select: bytearray | None = None
    ) -> Iterator[tuple[int, bytes]]:
        lid, first, last = segment.ledger_id, segment.first_entry, segment.last_entry
        if select is None:
            expected = first
            for _lid, eid, data in self.store.scan_ledger(lid, first, last):
                if eid != expected:
                    break
                expected += 1
                if not expected & YIELD_MASK:
                    _let_requests_run()
                yield eid, data
            if expected != last + 1:
                raise DataLoss(f"ledger {lid} lacks entry {expected} (read {first}..{last})")
            return
        wanted = sum(bin(b).count("1") for b in select)
        if wanted < SPARSE_SELECTION * segment.length:
            get, entry_key = self.store.db.get, keys.entry_key
            for i, byte in enumerate(select):
                if not i & (YIELD_MASK >> 3):
                    _let_requests_run()
                while byte:
                    low = byte & -byte
                    eid = first + i * 8 + low.bit_length() - 1
                    byte ^= low
                    found = get(entry_key(lid, eid))
                    if found is None:
                        raise DataLoss(f"ledger {lid} lacks entry {eid}")
                    yield eid, found
            return
        hits = 0
        for _lid, eid, data in self.store.scan_ledger(lid, first, last):
            off = eid - first
            if not off & YIELD_MASK:
                _let_requests_run()
            if select[off >> 3] >> (off & 7) & 1:
                hits += 1
                yield eid, data
        if hits != wanted:
            raise DataLoss(f"ledger {lid} lacks {wanted - hits} selected entries")

    # ---- writes ---------------------------------------------------------------------

    def create_ledger(self, topic: str) -> int:
        return self.store.create_ledger(topic, ROLE_COMPACTED).ledger_id

    def append(self, ledger_id: int, entries: Sequence[NewEntry]) -> None:
        self.store.append_entries(ledger_id, entries)

    def seal(self, ledger_id: int) -> None:
        self.store.seal_ledger(ledger_id)

    def delete_ledger(self, ledger_id: int) -> None:
        self.store.delete_ledger(ledger_id)

    def commit(
        self, topic: str, ledger_id: int, horizon: MessageId, expected_previous: int | None
    ) -> None:
        t = self.store.topic(topic)
        with t.lock:
            if t.deleted:
                raise TopicNotFound(f"topic {topic!r} was deleted during compaction")
            current = t.compacted_ledger_id()
            if current != expected_previous:
                raise CommitConflict(
                    f"compacted ledger of {topic!r} is {current}, expected {expected_previous}: "
                    "another compaction committed first"
                )
            cursor = t.cursors.get(COMPACTION_SUBSCRIPTION)
            properties = dict(cursor.properties) if cursor is not None else {}
            properties[COMPACTED_LEDGER_PROPERTY] = str(ledger_id)
            self.store.commit_cursor(topic, COMPACTION_SUBSCRIPTION, horizon, properties)
