"""Ledger metadata layout, and the key flags every reader of keys shares.

Entries themselves are stored batches (``storage/batch.py``). Ledger meta::

    state:u8 (0 open, 1 sealed)  role:u8 (0 raw, 1 compacted)
    entries:u64  bytes:u64  first_publish_ms:i64  last_publish_ms:i64  topic:utf-8 (rest)
"""

from __future__ import annotations

import builtins
import struct
from dataclasses import dataclass

from compactlog.storage.batch import HAS_KEY, VALUE_NON_EMPTY, VALUE_PRESENT
from compactlog.storage.types import MessageId

_META = struct.Struct(">BBQQqq")

ROLE_RAW = 0
ROLE_COMPACTED = 1


def key_flags(key: bytes | None, value: bytes | None) -> int:
    flags = 0
    if key is not None:
        flags |= HAS_KEY
    if value is not None:
        flags |= VALUE_PRESENT
        if value:
            flags |= VALUE_NON_EMPTY
    return flags


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


__all__ = [
    "HAS_KEY",
    "ROLE_COMPACTED",
    "ROLE_RAW",
    "VALUE_NON_EMPTY",
    "VALUE_PRESENT",
    "LedgerMeta",
    "key_flags",
]
