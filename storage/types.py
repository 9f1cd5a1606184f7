"""Domain values shared by the storage engine, the compactor and the server."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from compactlog.records import MessageId as MessageId
from compactlog.records import Record as Record


class TopicKind(enum.IntEnum):
    """Values match ``compactlog.v1.TopicKind``."""

    LEDGER = 1
    SEGMENTED = 2


EARLIEST_ID = MessageId(0, 0)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored, with the id and publish time the log gave it."""

    id: MessageId
    key: bytes | None
    value: bytes | None
    properties: Mapping[str, str] = field(default_factory=dict)
    publish_time_ms: int = 0
    event_time_ms: int = 0
