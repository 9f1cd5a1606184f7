"""Domain values shared by the storage engine, the compactor and the server."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple


class TopicKind(enum.IntEnum):
    """Values match ``compactlog.v1.TopicKind``."""

    LEDGER = 1
    SEGMENTED = 2


class MessageId(NamedTuple):
    """(ledger_id, entry_id); tuples order the way ids do. SEGMENTED: (0, offset)."""

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"

    def next(self) -> MessageId:
        """The smallest id after this one (a bound for ranges, not always a stored id)."""
        return MessageId(self.ledger_id, self.entry_id + 1)


EARLIEST_ID = MessageId(0, 0)


class Record(NamedTuple):
    """A record as a producer sends it. ``key is None``: keyless; ``value is None``: null."""

    key: bytes | None
    value: bytes | None
    properties: Mapping[str, str] | None = None
    event_time_ms: int = 0  # 0 = use publish time


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored, with the id and publish time the log gave it."""

    id: MessageId
    key: bytes | None
    value: bytes | None
    properties: Mapping[str, str] = field(default_factory=dict)
    publish_time_ms: int = 0
    event_time_ms: int = 0


def is_ledger_tombstone(key: bytes | None, value: bytes | None) -> bool:
    """LEDGER topics follow Pulsar: a keyed record with a null or empty value deletes the key."""
    return key is not None and not value


def is_segment_tombstone(key: bytes | None, value: bytes | None) -> bool:
    """SEGMENTED topics follow Kafka: only a null value is a tombstone."""
    return key is not None and value is None
