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
        """A stored cursor, strictly: anything but the shape ``encode`` writes is
        ``ValueError`` (a cursor read wrong would redeliver or skip messages)."""
        obj = json.loads(data)
        if not isinstance(obj, dict) or set(obj) != {"mark_delete", "acked", "properties"}:
            raise ValueError("cursor is not an object of mark_delete, acked, properties")
        raw_mark, raw_acked, props = obj["mark_delete"], obj["acked"], obj["properties"]
        mark = None if raw_mark is None else _message_id(raw_mark)
        if not isinstance(raw_acked, list):
            raise ValueError("cursor acked is not a list")
        if not isinstance(props, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in props.items()
        ):
            raise ValueError("cursor properties are not a map of strings")
        return cls(
            name=name,
            mark_delete=mark,
            acked={_message_id(i) for i in raw_acked},
            properties=dict(props),
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


def _message_id(raw: object) -> MessageId:
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not all(type(v) is int and 0 <= v < 2**64 for v in raw)
    ):
        raise ValueError(f"not a message id: {str(raw)[:40]}")
    return MessageId(raw[0], raw[1])
