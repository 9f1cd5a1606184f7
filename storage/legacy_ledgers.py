"""Format-1 ledgers, read strictly and converted to format 2 (``compactlog migrate``).

Format 1 kept one RocksDB entry per message (protobuf ``Message`` wire bytes: no ``id``
field in a raw ledger, the original id in a compacted ledger) and a key block per
appended run (``flags:u8 size:u32 klen:u32 key:klen`` per entry). Anything that is not
exactly what the old writer produced is ``LegacyFormatError``, so that the migration
stops rather than carrying damaged bytes into the new format.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import TypeVar

from compactlog.errors import CorruptData
from compactlog.storage import batch as codec
from compactlog.storage import keys
from compactlog.storage.codec import ROLE_COMPACTED, LedgerMeta
from compactlog.storage.rocks import Batch, RocksDB
from compactlog.storage.types import MessageId

_KEY_HEAD = struct.Struct(">BII")
_U64 = 1 << 64
ENTRY_KEY = struct.Struct(">cQQ")  # b"E"/b"K" ledger entry, as storage/keys.py draws them
LEDGER_KEY = struct.Struct(">cQ")
MAX_BATCH_BYTES = 1024 * 1024  # a converted batch's cap (and MAX_BATCH_MESSAGES messages)
MAX_BATCH_MESSAGES = 1000
_RECORD_OVERHEAD = 6  # a record's tag and length, at most, for the batch size cap


class LegacyFormatError(Exception):
    """Bytes that are not what the format-1 writer wrote."""


def _varint(buf: bytes, p: int, end: int) -> tuple[int, int]:
    try:
        return codec.read_varint(buf, p, end)
    except codec.MalformedPayload as exc:
        raise LegacyFormatError(str(exc)) from None


def _signed(n: int) -> int:
    return n - _U64 if n >= 1 << 63 else n


def _length_delimited(buf: bytes, p: int, end: int, what: str) -> tuple[int, int]:
    n, p = _varint(buf, p, end)
    if p + n > end:
        raise LegacyFormatError(f"{what} runs past its message")
    return p, p + n


def _parse_id(buf: bytes, p: int, end: int) -> MessageId:
    ledger_id = entry_id = 0
    last = 0
    while p < end:
        tag, p = _varint(buf, p, end)
        if tag not in (0x08, 0x10) or tag >> 3 <= last:
            raise LegacyFormatError(f"unexpected tag {tag:#x} in the message id")
        last = tag >> 3
        value, p = _varint(buf, p, end)
        if tag == 0x08:
            ledger_id = value
        else:
            entry_id = value
    return MessageId(ledger_id, entry_id)


def _check_property(buf: bytes, p: int, end: int) -> None:
    last = 0
    while p < end:
        tag, p = _varint(buf, p, end)
        if tag not in (0x0A, 0x12) or tag >> 3 <= last:
            raise LegacyFormatError(f"unexpected tag {tag:#x} in a property")
        last = tag >> 3
        s, p = _length_delimited(buf, p, end, "a property")
        try:
            buf[s:p].decode()
        except UnicodeDecodeError:
            raise LegacyFormatError("a property is not UTF-8") from None


# Message fields: number -> wire type (1 id, 2 key, 3 value, 4 property, 5 publish, 6 event)
_WIRE = {1: 2, 2: 2, 3: 2, 4: 2, 5: 0, 6: 0}


@dataclass(frozen=True, slots=True)
class LegacyEntry:
    ident: MessageId | None
    key: bytes | None
    flags: int
    publish_ms: int
    event_ms: int


def parse_entry(data: bytes) -> LegacyEntry:
    """A format-1 entry parsed strictly: what the old writer (protobuf ``Message``
    serialisation) produces, fields in number order, or ``LegacyFormatError``."""
    ident: MessageId | None = None
    key: bytes | None = None
    flags = publish = event = 0
    last = 0
    p, end = 0, len(data)
    while p < end:
        tag, p = _varint(data, p, end)
        number, wire = tag >> 3, tag & 7
        if _WIRE.get(number) != wire:
            raise LegacyFormatError(f"unexpected field {number} (wire type {wire})")
        if number < last or (number == last and number != 4):
            raise LegacyFormatError(f"field {number} out of order or repeated")
        last = number
        if wire == 0:
            value, p = _varint(data, p, end)
            if number == 5:
                publish = _signed(value)
            else:
                event = _signed(value)
            continue
        s, p = _length_delimited(data, p, end, f"field {number}")
        if number == 1:
            ident = _parse_id(data, s, p)
        elif number == 2:
            key = data[s:p]
        elif number == 3:
            flags = codec.VALUE_PRESENT | (codec.VALUE_NON_EMPTY if p > s else 0)
        else:
            _check_property(data, s, p)
    if key is not None:
        flags |= codec.HAS_KEY
    return LegacyEntry(ident, key, flags, publish, event)


def key_block_entries(block: bytes) -> Iterator[tuple[int, int, bytes | None]]:
    """``(flags, size, key)`` per entry of a format-1 key block, or ``LegacyFormatError``."""
    p, end = 0, len(block)
    if not end:
        raise LegacyFormatError("empty key block")
    while p < end:
        if end - p < _KEY_HEAD.size:
            raise LegacyFormatError("key block is torn")
        flags, size, klen = _KEY_HEAD.unpack_from(block, p)
        p += _KEY_HEAD.size
        if p + klen > end or (klen and not flags & codec.HAS_KEY):
            raise LegacyFormatError("key block is torn")
        yield flags, size, (block[p : p + klen] if flags & codec.HAS_KEY else None)
        p += klen


# ---- converting one ledger ----------------------------------------------------------


def key_block_range(ledger_id: int) -> tuple[bytes, bytes]:
    return (
        ENTRY_KEY.pack(keys.LEGACY_KEY_BLOCK_PREFIX, ledger_id, 0),
        LEDGER_KEY.pack(keys.LEGACY_KEY_BLOCK_PREFIX, ledger_id + 1)
        if ledger_id < keys.MAX_ID
        else b"L",
    )


_T = TypeVar("_T")


@contextlib.contextmanager
def closing(it: Iterator[_T]) -> Iterator[Iterator[_T]]:
    """A scan closed on leaving the block, errors included: a live RocksDB iterator would
    keep the store from closing while a traceback holds the frame."""
    try:
        yield it
    finally:
        if isinstance(it, Generator):
            it.close()


class _Group:
    """Message records of one batch being built."""

    __slots__ = ("at", "bodies", "event", "first", "last", "publish", "size")

    def __init__(self, at: int, ident: MessageId, publish: int) -> None:
        self.at = at  # position of the first message in its ledger: the batch key
        self.first = self.last = ident
        self.publish = publish
        self.event = -(1 << 63)
        self.bodies: list[bytes] = []
        self.size = 0


@dataclass(slots=True)
class Converted:
    batch: Batch
    meta: LedgerMeta
    entries: int
    batches: int


class LedgerConverter:
    def __init__(self, db: RocksDB, meta: LedgerMeta) -> None:
        self.db = db
        self.meta = meta
        self.compacted = meta.role == ROLE_COMPACTED
        self.out = Batch()
        self.group: _Group | None = None
        self.stored = 0
        self.batches = 0

    def where(self, entry: int) -> str:
        return f"topic {self.meta.topic!r} ledger {self.meta.ledger_id} entry {entry}"

    def bad(self, entry: int, why: str) -> CorruptData:
        return CorruptData(
            f"{self.where(entry)}: {why}; migration stopped, nothing of this ledger was "
            "converted (restore the entry, or delete the topic with a format-1 server, and "
            "run `compactlog migrate` again)"
        )

    def flush(self) -> None:
        group, self.group = self.group, None
        if group is None:
            return
        lid = self.meta.ledger_id
        payload = codec.frame_messages(group.bodies)
        count = len(group.bodies)
        # The new codec must read back exactly the ids just written.
        walked = codec.walk(payload, self.where(group.at))
        if (
            len(walked) != count
            or (walked[0][0], walked[0][1]) != group.first
            or (walked[-1][0], walked[-1][1]) != group.last
        ):
            raise self.bad(group.at, "its batch does not read back as written")
        if self.compacted:
            data = codec.pack(
                payload, count, group.first, group.last, 0, 0, attributes=codec.COMPACTED
            )
        else:
            data = codec.pack(payload, count, group.first, group.last, group.publish, group.event)
        self.out.put(keys.entry_key(lid, group.at), data)
        self.stored += len(data)
        self.batches += 1

    def add(self, at: int, ident: MessageId, entry: LegacyEntry, body: bytes) -> None:
        group = self.group
        publish = 0 if self.compacted else entry.publish_ms
        if group is not None and (
            len(group.bodies) >= MAX_BATCH_MESSAGES
            or group.size + len(body) > MAX_BATCH_BYTES
            or publish != group.publish
        ):
            self.flush()
            group = None
        if group is None:
            group = self.group = _Group(at, ident, publish)
        group.bodies.append(body)
        group.size += len(body) + _RECORD_OVERHEAD
        group.last = ident
        group.event = max(group.event, entry.event_ms)

    def entry(self, at: int, data: bytes, flags: int, size: int, key: bytes | None) -> MessageId:
        """Check one old entry against its key block and add it; its id."""
        try:
            parsed = parse_entry(data)
        except LegacyFormatError as exc:
            raise self.bad(at, f"format-1 entry is unreadable ({exc})") from None
        if size != len(data) or flags != parsed.flags or key != parsed.key:
            raise self.bad(at, "entry does not match its key block")
        lid = self.meta.ledger_id
        if self.compacted:
            if parsed.ident is None:
                raise self.bad(at, "compacted entry carries no original id")
            ident, body = parsed.ident, data
        else:
            if parsed.ident is not None:
                raise self.bad(at, "raw entry carries an id field")
            ident = MessageId(lid, at)
            body = codec.id_field(lid, at) + data
        self.add(at, ident, parsed, body)
        return ident

    def run(self) -> Converted:
        meta, db = self.meta, self.db
        lid = meta.ledger_id
        e_begin, e_end = keys.ledger_range(lid)
        k_begin, k_end = key_block_range(lid)
        # Applied in order: the old ranges go, then the batches land in the emptied range.
        self.out.delete_range(e_begin, e_end)
        self.out.delete_range(k_begin, k_end)
        expected = 0
        last_compacted: MessageId | None = None
        with (
            closing(db.scan(e_begin, e_end)) as entries,
            closing(db.scan(k_begin, k_end)) as blocks,
        ):
            for block_key, block in blocks:
                first = keys.entry_ids(block_key)[1]
                if first != expected:
                    why = "no key block covers it" if first > expected else "key blocks overlap"
                    raise self.bad(expected, why)
                try:
                    parts = list(key_block_entries(block))
                except LegacyFormatError as exc:
                    raise self.bad(first, f"format-1 key block is unreadable ({exc})") from None
                for flags, size, key in parts:
                    item = next(entries, None)
                    if item is None or keys.entry_ids(item[0])[1] != expected:
                        raise self.bad(expected, "entry is missing")
                    ident = self.entry(expected, item[1], flags, size, key)
                    if last_compacted is not None and ident <= last_compacted:
                        raise self.bad(expected, f"original id {ident} does not ascend")
                    if self.compacted:
                        last_compacted = ident
                    expected += 1
                self.flush()  # a key block never shares a batch with the next one
            extra = next(entries, None)
            if extra is not None:
                raise self.bad(keys.entry_ids(extra[0])[1], "entry is outside every key block")
        if expected != meta.entries:
            raise self.bad(expected, f"ledger holds {expected} entries, its meta {meta.entries}")
        new = LedgerMeta(
            ledger_id=lid,
            topic=meta.topic,
            role=meta.role,
            sealed=meta.sealed,
            entries=meta.entries,
            bytes=self.stored,
            first_publish_ms=meta.first_publish_ms,
            last_publish_ms=meta.last_publish_ms,
        )
        self.out.put(keys.ledger_meta_key(lid), new.encode())
        return Converted(self.out, new, expected, self.batches)
