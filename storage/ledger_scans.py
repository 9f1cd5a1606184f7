"""The read side of the ledger store: batches of a ledger, checked as they are read.

Every scan is one bounded RocksDB iteration per ledger (a live iterator is a
point-in-time view) that starts at the batch holding the first wanted entry (a
seek-for-prev) and passes every batch through ``batch.check``: a CRC mismatch is
``CorruptData`` naming the topic, ledger and entry, never bytes served as if whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from compactlog.errors import CorruptData
from compactlog.storage import batch as codec
from compactlog.storage import keys
from compactlog.storage.batch import BatchHeader
from compactlog.storage.codec import LedgerMeta
from compactlog.storage.ledger_topic import LedgerTopic
from compactlog.storage.rocks_reads import RocksReads
from compactlog.storage.types import MessageId

# (position of the batch's first message in its ledger, batch bytes, checked header)
StoredBatch = tuple[int, bytes, BatchHeader]
# (entry id or compacted position, flags, record size, key)
KeyEntry = tuple[int, int, int, bytes | None]


def where(topic: str, ledger_id: int, entry: int) -> str:
    return f"topic {topic!r} ledger {ledger_id} entry {entry}"


class LedgerScans:
    """Base of LedgerStore: needs only its RocksDB and its topic and ledger lookups."""

    db: RocksReads

    def topic(self, name: str) -> LedgerTopic:
        raise NotImplementedError

    def ledger(self, ledger_id: int) -> LedgerMeta | None:
        raise NotImplementedError

    def _owner(self, ledger_id: int) -> str:
        meta = self.ledger(ledger_id)
        return meta.topic if meta is not None else "?"

    def batch_at(self, ledger_id: int, position: int) -> StoredBatch | None:
        """The batch holding ``position`` of a ledger (None past its end)."""
        topic = self._owner(ledger_id)
        begin = keys.entry_key(ledger_id, 0)
        try:
            key = self.db.last_key(begin, keys.entry_key(ledger_id, position + 1))
            data = None if key is None else self.db.get(key)
        except CorruptData as exc:
            raise CorruptData(f"{where(topic, ledger_id, position)}: {exc}") from None
        if key is None or data is None:
            return None
        first = keys.entry_ids(key)[1]
        header = codec.check(data, where(topic, ledger_id, first))
        if position >= first + header.count:
            return None
        return first, data, header

    def batches(
        self, ledger_id: int, first: int = 0, last: int = keys.MAX_ID
    ) -> Iterator[StoredBatch]:
        """Checked batches holding positions ``first..last`` of a ledger, in order. An
        unreadable RocksDB block on the way is ``CorruptData`` naming the position."""
        topic = self._owner(ledger_id)
        at = first
        try:
            begin = self.db.last_key(
                keys.entry_key(ledger_id, 0), keys.entry_key(ledger_id, first + 1)
            ) or keys.entry_key(ledger_id, first)
            entry_ids, check = keys.entry_ids, codec.check
            end = keys.ledger_range(ledger_id)[1]
            for key, data in self.db.scan(begin, end, fill_cache=False):
                at = entry_ids(key)[1]
                if at > last:
                    return
                header = check(data, where(topic, ledger_id, at))
                yield at, data, header
                at += header.count
        except CorruptData as exc:
            if str(exc).startswith("RocksDB"):
                raise CorruptData(f"{where(topic, ledger_id, at)}: {exc}") from None
            raise

    def digest_records(self, ledger_id: int) -> Iterator[tuple[int, bytes]]:
        """``(position, digest record)`` of a compacted ledger's batches that have one, in
        order (``storage.compacted_digests``; the caller checks each against its batch)."""
        entry_ids = keys.entry_ids
        for key, value in self.db.scan(*keys.digest_range(ledger_id)):
            yield entry_ids(key)[1], value

    def batches_reversed(self, ledger_id: int, first: int, last: int) -> Iterator[StoredBatch]:
        """Checked batches holding positions ``first..last``, last batch first."""
        topic = self._owner(ledger_id)
        begin = keys.entry_key(ledger_id, 0)
        at = last
        try:
            for key, data in self.db.scan_reverse(begin, keys.entry_key(ledger_id, last + 1)):
                at = keys.entry_ids(key)[1]
                yield at, data, codec.check(data, where(topic, ledger_id, at))
                if at <= first:
                    return
        except CorruptData as exc:
            if str(exc).startswith("RocksDB"):
                raise CorruptData(f"{where(topic, ledger_id, at)}: {exc}") from None
            raise

    def raw_batches(self, name: str, start: MessageId, stop: MessageId) -> Iterator[StoredBatch]:
        """Checked raw batches holding ids ``start..stop``, ledger after ledger.

        Batches must tile each ledger: the first holds the first wanted entry, each next
        one starts where the last ended, and the last reaches the last wanted entry the
        ledger has. A hole is ``CorruptData``, unless retention or a deletion removed the
        ledger meanwhile (then the ledger is simply no longer there to read).
        """
        topic = self.topic(name)
        for meta in topic.ledgers_between(start, stop):
            lid = meta.ledger_id
            first = start.entry_id if lid == start.ledger_id else 0
            last = stop.entry_id if lid == stop.ledger_id else keys.MAX_ID
            last = min(last, meta.entries - 1)
            if first > last:
                continue
            expected = first
            for at, data, header in self.batches(lid, first, last):
                if at > expected or at + header.count <= expected:
                    self._hole(topic, meta, expected)
                expected = at + header.count
                yield at, data, header
            if expected <= last:
                self._hole(topic, meta, expected)

    def _hole(self, topic: LedgerTopic, meta: LedgerMeta, entry: int) -> None:
        with topic.lock:
            gone = topic.deleted or all(led is not meta for led in topic.ledgers)
        if not gone:
            raise CorruptData(
                f"{where(topic.name, meta.ledger_id, entry)}: batch missing",
                topic=topic.name,
                ledger=meta.ledger_id,
                entry=entry,
            )

    def keys_of(self, ledger_id: int, first: int, last: int, reverse: bool) -> Iterator[KeyEntry]:
        """Keys of positions ``first..last`` of a ledger, from its checked batches."""
        topic = self._owner(ledger_id)
        scan = self.batches_reversed if reverse else self.batches
        for at, data, header in scan(ledger_id, first, last):
            walked = codec.walk(codec.payload_of(data, header), where(topic, ledger_id, at))
            items = enumerate(walked, at)
            for pos, (_l, _e, flags, key, s, e) in reversed(list(items)) if reverse else items:
                if first <= pos <= last:
                    yield pos, flags, e - s, key

    def find_by_timestamp(self, name: str, timestamp_ms: int) -> MessageId | None:
        """First confirmed id published at or after ``timestamp_ms``: batch headers hold
        the publish time, so no message is decoded."""
        topic = self.topic(name)
        lac = topic.lac
        if lac is None:
            return None
        for meta in topic.ledgers_between(MessageId(0, 0), lac):
            if meta.entries == 0 or meta.last_publish_ms < timestamp_ms:
                continue
            for _at, _data, header in self.batches(meta.ledger_id):
                if header.first_id > lac:
                    return None
                if header.publish_time_ms >= timestamp_ms:
                    return header.first_id
        return None


def ledgers_under(
    db: RocksReads,
    span: tuple[bytes, bytes],
    ledger_of: Callable[[bytes], int],
    ledger_span: Callable[[int], tuple[bytes, bytes]],
) -> Iterator[int]:
    """The ledger ids holding a key in ``span`` (a key range ordered by ledger id), one
    seek per ledger: ``ledger_of`` reads a key's ledger, ``ledger_span`` gives that
    ledger's part of the range, which is skipped whole."""
    begin, end = span
    while (key := next(iter(db.scan_keys(begin, end)), None)) is not None:
        lid = ledger_of(key)
        yield lid
        begin = ledger_span(lid)[1]
