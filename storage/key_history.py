"""Log.GetKeyHistory: every raw message of one key, oldest first, tombstones included.

LEDGER topics answer from the key index (``storage/key_index.py``): per raw ledger of
the topic, the entry ids whose key hashes alike, then one checked batch read per batch
holding such an entry, where the real key is compared (a hash collision costs a read,
never a wrong message). Only confirmed ids are answered, as for readers.

SEGMENTED topics answer from what the log still holds (after retention, DeleteRecords
and the cleaner) by walking its batches with the codec's compiled twin and comparing
keys: a scan, cost proportional to the log's size (about 1 s per 10 M messages on the
project's VM), no index to keep or repair. Kafka keeps no key index either; the cleaner
and retention already bound what a SEGMENTED topic holds.

Answers are message records as stored (``Message`` wire bytes, ids included), so the
server splices them into the response without decoding.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from compactlog.storage import batch as codec
from compactlog.storage import key_index
from compactlog.storage.ledger_log import LedgerTopicLog
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.read_range import MAX_RESPONSE_BYTES
from compactlog.storage.topic_log import TopicLog
from compactlog.storage.types import MessageId


@dataclass
class KeyHistory:
    """Message records of one key in id order; ``truncated`` when more exist than were
    returned (``max_messages`` or the response byte cap stopped it)."""

    records: list[bytes] = field(default_factory=list)
    size: int = 0
    truncated: bool = False

    def add(self, record: bytes, limit: int) -> bool:
        """Take one record; False (and truncated) when it does not fit."""
        if (limit and len(self.records) >= limit) or (
            self.records and self.size + len(record) > MAX_RESPONSE_BYTES
        ):
            self.truncated = True
            return False
        self.records.append(record)
        self.size += len(record)
        return True

    def to_bytes(self) -> bytes:
        """The wire bytes of a response holding these messages (field 1, repeated)."""
        return b"".join(self.records)


def _ledger_records(
    store: LedgerStore, name: str, ledger_id: int, entries: list[int], key: bytes
) -> Iterator[bytes]:
    """The records of ``entries`` (ascending) of one ledger whose key is ``key``: each
    found by position in its checked batch (ids are contiguous in a raw batch), never by
    walking the whole batch."""
    at = 0
    while at < len(entries):
        found = store.batch_at(ledger_id, entries[at])
        if found is None:  # past the ledger's end (a deleted ledger): nothing more here
            return
        first, data, header = found
        where = f"topic {name!r} ledger {ledger_id} entry {first}"
        while at < len(entries) and entries[at] < first + header.count:
            wanted = MessageId(ledger_id, entries[at])
            record, count, _last = codec.select(data, header, wanted, wanted, 1, where)
            at += 1
            if count == 1 and codec.walk(record, where)[0][3] == key:
                yield bytes(record)


def ledger_history(store: LedgerStore, name: str, key: bytes, limit: int = 0) -> KeyHistory:
    topic = store.topic(name)  # TopicNotFound when there is none
    with topic.lock:
        ledgers = [led.ledger_id for led in topic.ledgers]
        lac = topic.lac
    out = KeyHistory()
    if lac is None:
        return out
    hashed = key_index.key_hash(key)
    for lid in ledgers:
        if lid > lac.ledger_id:
            break
        entries = key_index.lookup(store.db, lid, hashed)
        entries = [e for e in entries if MessageId(lid, e) <= lac]
        for record in _ledger_records(store, name, lid, entries, key):
            if not out.add(record, limit):
                return out
    return out


def scanned_history(log: TopicLog, key: bytes, limit: int = 0) -> KeyHistory:
    """Any ``TopicLog``'s raw view, walked (SEGMENTED topics; the LEDGER index's oracle)."""
    out = KeyHistory()
    end = log.visible_end()
    if end is None:
        return out
    start = log.earliest()
    for data, header, _start in log.batches(start, end, compacted=False):
        payload = codec.payload_of(data, header)
        where = f"topic {log.name!r} at {header.first_id}"
        for lid, entry, _flags, k, s, e in codec.walk(payload, where):
            wanted = k == key and start <= MessageId(lid, entry) <= end
            if wanted and not out.add(bytes(payload[s:e]), limit):
                return out
    return out


def key_history(log: TopicLog, key: bytes, limit: int = 0) -> KeyHistory:
    """GetKeyHistory of either kind: LEDGER through its key index, SEGMENTED by a scan."""
    if isinstance(log, LedgerTopicLog):
        return ledger_history(log.store, log.name, key, limit)
    return scanned_history(log, key, limit)
