"""The read side of the ledger store: range scans of entries and of key blocks.

Every scan is one bounded RocksDB iteration per ledger (a live iterator is a
point-in-time view). Keys-only scans read the key blocks and never a payload, which is
what compaction phase one needs.
"""

from __future__ import annotations

from collections.abc import Iterator

from compactlog.storage import keys
from compactlog.storage.codec import iter_key_block, publish_time_of
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.rocks import RocksDB
from compactlog.storage.types import MessageId

Entry = tuple[int, int, bytes]  # ledger id, entry id, entry bytes
KeyEntry = tuple[int, int, int, int, bytes | None]  # ledger, entry, flags, size, key


class LedgerScans:
    """Base of LedgerStore: needs only its RocksDB and its topic lookup."""

    db: RocksDB

    def topic(self, name: str) -> LedgerTopic:
        raise NotImplementedError

    def scan_ledger(
        self, ledger_id: int, first_entry: int = 0, last_entry: int = keys.MAX_ID
    ) -> Iterator[Entry]:
        begin = keys.entry_key(ledger_id, first_entry)
        end = (
            keys.entry_key(ledger_id, last_entry + 1)
            if last_entry < keys.MAX_ID
            else keys.ledger_ranges(ledger_id)[0][1]
        )
        entry_ids = keys.entry_ids
        for key, value in self.db.scan(begin, end):
            lid, eid = entry_ids(key)
            yield lid, eid, value

    def scan(self, name: str, start: MessageId, stop: MessageId) -> Iterator[Entry]:
        """Raw entries with start <= id <= stop, ledger after ledger."""
        for meta in self.topic(name).ledgers_between(start, stop):
            first = start.entry_id if meta.ledger_id == start.ledger_id else 0
            last = stop.entry_id if meta.ledger_id == stop.ledger_id else keys.MAX_ID
            yield from self.scan_ledger(meta.ledger_id, first, last)

    def scan_ledger_keys(
        self, ledger_id: int, first_entry: int = 0, last_entry: int = keys.MAX_ID
    ) -> Iterator[KeyEntry]:
        """Keys of a ledger's entries from its key blocks, never touching payloads."""
        # A block starting before first_entry may cover it: start at the block holding it.
        begin = self.db.last_key(
            keys.key_block_key(ledger_id, 0), keys.key_block_key(ledger_id, first_entry + 1)
        )
        begin = begin or keys.key_block_key(ledger_id, first_entry)
        end = keys.ledger_ranges(ledger_id)[1][1]
        for key, block in self.db.scan(begin, end):
            block_first = keys.entry_ids(key)[1]
            if block_first > last_entry:
                return
            for eid, flags, size, k in iter_key_block(block_first, block):
                if eid > last_entry:
                    return
                if eid >= first_entry:
                    yield ledger_id, eid, flags, size, k

    def scan_keys(self, name: str, start: MessageId, stop: MessageId) -> Iterator[KeyEntry]:
        for meta in self.topic(name).ledgers_between(start, stop):
            first = start.entry_id if meta.ledger_id == start.ledger_id else 0
            last = stop.entry_id if meta.ledger_id == stop.ledger_id else keys.MAX_ID
            yield from self.scan_ledger_keys(meta.ledger_id, first, last)

    def find_by_timestamp(self, name: str, timestamp_ms: int) -> MessageId | None:
        """First confirmed id published at or after timestamp_ms."""
        topic = self.topic(name)
        lac = topic.lac
        if lac is None:
            return None
        for meta in topic.ledgers_between(MessageId(0, 0), lac):
            if meta.entries == 0 or meta.last_publish_ms < timestamp_ms:
                continue
            for lid, eid, data in self.scan_ledger(meta.ledger_id):
                if MessageId(lid, eid) > lac:
                    return None
                if publish_time_of(data) >= timestamp_ms:
                    return MessageId(lid, eid)
        return None
