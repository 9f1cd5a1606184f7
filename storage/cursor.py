"""Durable cursors (subscriptions) of LEDGER topics.

A cursor is Pulsar's ManagedCursor reduced to what survives a restart: the
mark-delete position (every id at or before it is acknowledged), the ids acknowledged
individually beyond it, and a properties map (the compactor keeps
``CompactedTopicLedger`` there). All three are one JSON value written in one batch, so
they change together. The read position is in memory only: after a restart delivery
resumes after the mark-delete position, so unacknowledged messages come again.

The read position has a lock of its own, held only to compare and assign: Consume moves
it from the server's event loop once a response is ready (a failed Consume moves nothing),
and Acknowledge raises it from a storage thread, so neither may wait on disk I/O.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from compactlog.storage.types import MessageId

COMPACTION_SUBSCRIPTION = "__compaction"
COMPACTED_LEDGER_PROPERTY = "CompactedTopicLedger"


@dataclass
class Cursor:
    name: str
    mark_delete: MessageId | None = None  # None: nothing acknowledged yet
    acked: set[MessageId] = field(default_factory=set)
    properties: dict[str, str] = field(default_factory=dict)
    read_position: MessageId | None = None  # last id delivered (memory only)
    _position_lock: threading.Lock = field(
        default_factory=threading.Lock, repr=False, compare=False
    )

    def encode(self) -> bytes:
        return json.dumps(
            {
                "mark_delete": list(self.mark_delete) if self.mark_delete is not None else None,
                "acked": sorted(list(i) for i in self.acked),
                "properties": self.properties,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, name: str, data: bytes) -> Cursor:
        obj = json.loads(data)
        mark = MessageId(*obj["mark_delete"]) if obj["mark_delete"] is not None else None
        return cls(
            name=name,
            mark_delete=mark,
            acked={MessageId(*i) for i in obj["acked"]},
            properties=dict(obj["properties"]),
            read_position=mark,
        )

    def is_acked(self, msg_id: MessageId) -> bool:
        return (self.mark_delete is not None and msg_id <= self.mark_delete) or msg_id in self.acked

    def acknowledge(
        self,
        msg_id: MessageId,
        cumulative: bool,
        successor: Callable[[MessageId | None], MessageId | None],
    ) -> None:
        """Apply an ack and move mark-delete over any run of acked ids that now follows it."""
        if cumulative:
            if self.mark_delete is None or msg_id > self.mark_delete:
                self.mark_delete = msg_id
        elif not self.is_acked(msg_id):
            self.acked.add(msg_id)
        while True:
            nxt = successor(self.mark_delete)
            if nxt is None or nxt not in self.acked:
                break
            self.mark_delete = nxt
        if self.mark_delete is not None:
            mark = self.mark_delete
            self.acked = {i for i in self.acked if i > mark}
        self.deliver(self.mark_delete)

    def deliver(self, last: MessageId | None, rewound: bool = False) -> None:
        """Delivery reached ``last``: the read position moves forward to it, or, for a
        delivery that began with a rewind to the mark-delete position, is set to it."""
        with self._position_lock:
            current = self.read_position
            if rewound or current is None or (last is not None and last > current):
                self.read_position = last
