"""The values every layer shares: a message's id and a record as a producer sends it.

They live in the core package, below the layers, so the client library hands back the
very ``MessageId`` and ``Record`` the storage engine uses without importing the storage
engine (``compactlog.storage.types`` re-exports both).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["MessageId", "Record"]


class MessageId(NamedTuple):
    """(ledger_id, entry_id); tuples order the way ids do. SEGMENTED: (0, offset)."""

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"

    def next(self) -> MessageId:
        """The smallest id after this one (a bound for ranges, not always a stored id)."""
        return MessageId(self.ledger_id, self.entry_id + 1)


class Record(NamedTuple):
    """A record as a producer sends it. ``key is None``: keyless; ``value is None``: null."""

    key: bytes | None
    value: bytes | None
    properties: Mapping[str, str] | None = None
    event_time_ms: int = 0  # 0 = use publish time
