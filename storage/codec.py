"""Byte formats of ledger entries, key blocks and ledger metadata.

Entry value: the protobuf wire encoding of ``compactlog.v1.Message`` without its
``id`` field (key=2, value=3, properties=4, publish_time_ms=5, event_time_ms=6). A
read response is then assembled by merging these bytes into a ``Message`` and setting
the id, with no per-field Python work on the hot path.

Key block (one per appended batch run within a ledger, keyed by its first entry id)::

    repeat count times:
      flags:u8   bit0 = has key, bit1 = value non-empty, bit2 = value present
      size:u32   length of the entry value in bytes
      klen:u32   key length (0 when keyless)
      key:klen

Ledger meta::

    state:u8 (0 open, 1 sealed)  role:u8 (0 raw, 1 compacted)
    entries:u64  bytes:u64  first_publish_ms:i64  last_publish_ms:i64  topic:utf-8 (rest)
"""

from __future__ import annotations

import builtins
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from compactlog.storage.types import MessageId, StoredMessage
from compactlog.v1 import compactlog_pb2 as pb

HAS_KEY = 1
VALUE_NON_EMPTY = 2
VALUE_PRESENT = 4

_KEY_HEAD = struct.Struct(">BII")
_key_head_pack = _KEY_HEAD.pack
_key_head_unpack_from = _KEY_HEAD.unpack_from

_META = struct.Struct(">BBQQqq")

ROLE_RAW = 0
ROLE_COMPACTED = 1


def encode_entry(
    key: bytes | None,
    value: bytes | None,
    properties: Mapping[str, str] | None,
    publish_time_ms: int,
    event_time_ms: int,
) -> bytes:
    msg = pb.Message(publish_time_ms=publish_time_ms, event_time_ms=event_time_ms)
    if key is not None:
        msg.key = key
    if value is not None:
        msg.value = value
    if properties:
        msg.properties.update(properties)
    return msg.SerializeToString()


def decode_entry(ledger_id: int, entry_id: int, data: bytes) -> StoredMessage:
    msg = pb.Message.FromString(data)
    return StoredMessage(
        id=MessageId(ledger_id, entry_id),
        key=msg.key if msg.HasField("key") else None,
        value=msg.value if msg.HasField("value") else None,
        properties=dict(msg.properties),
        publish_time_ms=msg.publish_time_ms,
        event_time_ms=msg.event_time_ms,
    )


def publish_time_of(data: bytes) -> int:
    return int(pb.Message.FromString(data).publish_time_ms)


def key_flags(key: bytes | None, value: bytes | None) -> int:
    flags = 0
    if key is not None:
        flags |= HAS_KEY
    if value is not None:
        flags |= VALUE_PRESENT
        if value:
            flags |= VALUE_NON_EMPTY
    return flags


def key_block_part(flags: int, size: int, key: bytes | None) -> bytes:
    if key is None:
        return _key_head_pack(flags, size, 0)
    return _key_head_pack(flags, size, len(key)) + key


def iter_key_block(
    first_entry_id: int, block: bytes
) -> Iterator[tuple[int, int, int, bytes | None]]:
    """Yield (entry_id, flags, size, key) for each entry of a key block."""
    pos = 0
    entry_id = first_entry_id
    end = len(block)
    head = _KEY_HEAD.size
    while pos < end:
        flags, size, klen = _key_head_unpack_from(block, pos)
        pos += head
        key = block[pos : pos + klen] if flags & HAS_KEY else None
        pos += klen
        yield entry_id, flags, size, key
        entry_id += 1


@dataclass(slots=True)
class LedgerMeta:
    """Mutable in memory under the owning topic's lock; persisted with each append."""

    ledger_id: int
    topic: str
    role: int = ROLE_RAW
    sealed: bool = False
    entries: int = 0
    bytes: int = 0
    first_publish_ms: int = 0
    last_publish_ms: int = 0

    def encode(self) -> builtins.bytes:
        return (
            _META.pack(
                1 if self.sealed else 0,
                self.role,
                self.entries,
                self.bytes,
                self.first_publish_ms,
                self.last_publish_ms,
            )
            + self.topic.encode()
        )

    @classmethod
    def decode(cls, ledger_id: int, data: builtins.bytes) -> LedgerMeta:
        sealed, role, entries, nbytes, first_ms, last_ms = _META.unpack_from(data)
        return cls(
            ledger_id=ledger_id,
            topic=data[_META.size :].decode(),
            role=role,
            sealed=bool(sealed),
            entries=entries,
            bytes=nbytes,
            first_publish_ms=first_ms,
            last_publish_ms=last_ms,
        )

    @property
    def last_id(self) -> MessageId | None:
        return MessageId(self.ledger_id, self.entries - 1) if self.entries else None
