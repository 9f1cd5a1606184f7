"""The append path of LEDGER topics: encoding, placing entries in ledgers, durability.

Kept apart from the store because it is the hot path: entries are written straight
into one WriteBatch, ids are returned as runs ``(ledger, first entry, count)`` rather
than one object per message, and the server's fast path encodes protobuf ``Record``
messages directly (``encode_wire_records``) without an intermediate object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from compactlog.errors import RecordTooLarge
from compactlog.storage import keys
from compactlog.storage.codec import (
    HAS_KEY,
    ROLE_RAW,
    VALUE_NON_EMPTY,
    VALUE_PRESENT,
    LedgerMeta,
    encode_entry,
    key_block_part,
    key_flags,
)
from compactlog.storage.rocks import Batch
from compactlog.storage.types import MessageId, Record
from compactlog.v1 import compactlog_pb2 as pb

if TYPE_CHECKING:
    from compactlog.storage.ledger_store import LedgerStore
    from compactlog.storage.ledger_topic import LedgerTopic

IdRun = tuple[int, int, int]  # ledger id, first entry id, count
Encoded = list[tuple[bytes, bytes]]  # entry bytes, key-block part


def _too_large(index: int, size: int, limit: int) -> RecordTooLarge:
    return RecordTooLarge(
        f"record {index} is {size} bytes, over max.message.bytes={limit}; "
        "nothing of this batch was stored"
    )


def encode_records(records: Sequence[Record], now: int, limit: int) -> Encoded:
    out: Encoded = []
    for i, rec in enumerate(records):
        key = rec.key
        data = encode_entry(key, rec.value, rec.properties, now, rec.event_time_ms or now)
        if len(data) > limit:
            raise _too_large(i, len(data), limit)
        out.append((data, key_block_part(key_flags(key, rec.value), len(data), key)))
    return out


def encode_wire_records(records: Iterable[pb.Record], now: int, limit: int) -> Encoded:
    """Protobuf ``Record`` messages to entries in one pass (the server's publish path)."""
    out: Encoded = []
    message = pb.Message
    for i, rec in enumerate(records):
        entry = message(publish_time_ms=now, event_time_ms=rec.event_time_ms or now)
        flags = 0
        key = None
        # key_flags() inlined, with its constants: this loop runs once per record.
        if rec.HasField("key"):
            key = entry.key = rec.key
            flags = HAS_KEY
        if rec.HasField("value"):
            value = entry.value = rec.value
            flags |= VALUE_PRESENT | VALUE_NON_EMPTY if value else VALUE_PRESENT
        if rec.properties:
            entry.properties.update(rec.properties)
        data = entry.SerializeToString()
        if len(data) > limit:
            raise _too_large(i, len(data), limit)
        out.append((data, key_block_part(flags, len(data), key)))
    return out


def build_append(
    topic: LedgerTopic,
    encoded: Encoded,
    now: int,
    allocate: Callable[[str, int], LedgerMeta],
) -> tuple[list[IdRun], Batch]:
    """Place the entries in the current ledger, rolling over at the limits; one batch."""
    batch = Batch()
    runs: list[IdRun] = []
    cfg = topic.config
    put = batch.put_many
    pack = keys.entry_key
    rolled = False
    i = 0
    total = len(encoded)
    while i < total:
        cur = topic.current
        if (
            cur is None
            or cur.entries >= cfg.ledger_max_entries
            or cur.bytes >= cfg.ledger_max_bytes
        ):
            if cur is not None:
                cur.sealed = True
                batch.put(keys.ledger_meta_key(cur.ledger_id), cur.encode())
            cur = allocate(topic.name, ROLE_RAW)
            cur.first_publish_ms = now
            topic.add_ledger(cur)
            rolled = True
        first = cur.entries
        lid = cur.ledger_id
        stop = i + min(cfg.ledger_max_entries - first, total - i)
        room = cfg.ledger_max_bytes - cur.bytes
        nbytes = 0
        parts = []
        entry_id = first
        for data, part in encoded[i:stop]:
            put(pack(lid, entry_id), data)
            parts.append(part)
            entry_id += 1
            nbytes += len(data)
            if nbytes >= room:  # the ledger passes its byte limit by this one entry
                break
        count = entry_id - first
        runs.append((lid, first, count))
        batch.ops += count
        cur.entries = entry_id
        cur.bytes += nbytes
        cur.last_publish_ms = now
        i += count
        batch.put(keys.key_block_key(lid, first), b"".join(parts))
        batch.put(keys.ledger_meta_key(lid), cur.encode())
    if rolled:
        batch.put(keys.topic_key(topic.name), topic.record())
    return runs, batch


def ids_of(runs: Sequence[IdRun]) -> list[MessageId]:
    return [MessageId(lid, e) for lid, first, count in runs for e in range(first, first + count)]


class PendingAppend:
    """An append written to the WAL; ``wait`` returns once it is durable and visible."""

    def __init__(
        self, store: LedgerStore, topic: LedgerTopic, runs: list[IdRun], ticket: int
    ) -> None:
        self.store, self.topic, self.runs, self.ticket = store, topic, runs, ticket

    def wait_runs(self) -> list[IdRun]:
        if self.ticket:
            self.store.group_commit.wait(self.ticket)
            lid, first, count = self.runs[-1]
            with self.topic.lock:
                self.topic.confirm(MessageId(lid, first + count - 1))
            self.ticket = 0
        return self.runs

    def wait(self) -> list[MessageId]:
        return ids_of(self.wait_runs())
