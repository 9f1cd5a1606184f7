"""Durable cursors (subscriptions), the same for both topic kinds.

A cursor is Pulsar's ManagedCursor reduced to what survives a restart:

- the mark-delete position: every id at or before it is acknowledged;
- the ids acknowledged individually beyond it, as ranges (``storage.ack_ranges``);
- ``delivered``: the furthest the subscription's reads have gone (the read position's
  high-water mark). An id after it was never given to this subscription, and neither
  was an id that does not exist: acknowledging one is NOT_DELIVERED and changes nothing;
- a properties map (the compactor keeps ``CompactedTopicLedger`` there).

The read position itself is in memory only: after a restart, or a consumer's
``redeliver_unacknowledged``, delivery resumes after the mark-delete position, so
unacknowledged messages come again (``delivered`` stays, so their acks still count).

Every change reports what it changed (``CursorChange``): the store writes that (the
head when the position or ``delivered`` moved, one record per range written or removed)
rather than the whole cursor, so an ack costs O(log n) however many ids are acknowledged
individually. LEDGER cursors live in RocksDB (``storage.ledger_store``), SEGMENTED ones
in a journal beside the segments (``storage.segmented.consumer_offsets``).

Subscriptions whose name begins with ``__`` are the server's own (``__compaction``):
clients may neither consume nor acknowledge on them (``storage.names``).

The read position has a lock of its own, held only to compare and assign: Consume moves
it from the server's event loop once a response is ready (a failed Consume moves nothing),
and Acknowledge raises it from a storage thread, so neither may wait on disk I/O. For the
same reason ``delivered`` is only raised in memory there; it is written with the cursor's
next write (an ack), so after a restart an ack of a message delivered since the last ack
is NOT_DELIVERED until that message is delivered again (as it will be: it was not acked).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from compactlog.errors import NotDelivered
from compactlog.storage.ack_ranges import AckedRanges, RangeChanges
from compactlog.storage.types import MessageId

COMPACTION_SUBSCRIPTION = "__compaction"
COMPACTED_LEDGER_PROPERTY = "CompactedTopicLedger"
# Set ("true") on a subscription whose consumers read the compacted view: the compactor
# keeps tombstones in the compacted ledger until its mark-delete position passed them.
READ_COMPACTED_PROPERTY = "ReadCompacted"
RESERVED_SUBSCRIPTION_PREFIX = "__"
# The subscription type (EXCLUSIVE, SHARED, FAILOVER) a subscription was created with,
# kept among its properties so that it survives a restart; absent: EXCLUSIVE.
SUBSCRIPTION_TYPE_PROPERTY = "subscriptionType"

Successor = Callable[[MessageId | None], MessageId | None]


@dataclass
class CursorChange:
    """What one operation changed: the head (position, delivered, properties) and ranges."""

    head: bool = False
    ranges: RangeChanges = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.head or bool(self.ranges)


_HEAD_KEYS = {"mark_delete", "delivered", "properties"}
_LEGACY_HEAD_KEYS = {"mark_delete", "acked", "properties"}


def _optional_id(raw: object) -> MessageId | None:
    return None if raw is None else message_id(raw)


def _list(msg_id: MessageId | None) -> list[int] | None:
    return list(msg_id) if msg_id is not None else None


@dataclass
class Cursor:
    name: str
    mark_delete: MessageId | None = None  # None: nothing acknowledged yet
    acked: AckedRanges = field(default_factory=AckedRanges)
    properties: dict[str, str] = field(default_factory=dict)
    read_position: MessageId | None = None  # last id delivered since (re)start: memory only
    delivered: MessageId | None = None  # the furthest read_position ever went: persisted
    _position_lock: threading.Lock = field(
        default_factory=threading.Lock, repr=False, compare=False
    )
    _head_dirty: bool = field(default=False, repr=False, compare=False)  # delivered moved

    # ---- the persisted head -----------------------------------------------------------

    def head(self) -> dict[str, Any]:
        """Mark-delete position, ``delivered`` and properties, as JSON values."""
        return {
            "mark_delete": _list(self.mark_delete),
            "delivered": _list(self.delivered),
            "properties": self.properties,
        }

    @classmethod
    def from_head(cls, name: str, obj: object) -> Cursor:
        """A cursor from its head (the store adds its ranges), read strictly: anything but
        the shapes written is ``ValueError`` (a cursor read wrong would redeliver or skip
        messages). A head written before ranges existed lists its individually acked ids
        in ``acked`` instead of ``delivered``."""
        if not isinstance(obj, dict) or set(obj) not in (_HEAD_KEYS, _LEGACY_HEAD_KEYS):
            raise ValueError(f"cursor head is not an object of {', '.join(sorted(_HEAD_KEYS))}")
        props = obj["properties"]
        if not isinstance(props, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in props.items()
        ):
            raise ValueError("cursor properties are not a map of strings")
        mark = _optional_id(obj["mark_delete"])
        cursor = cls(name, mark, properties=dict(props), read_position=mark)
        cursor.delivered = _optional_id(obj.get("delivered")) or mark
        raw_acked = obj.get("acked", [])
        if not isinstance(raw_acked, list):
            raise ValueError("cursor acked is not a list")
        for item in raw_acked:
            cursor.acked.add(message_id(item), {})
        if cursor.acked:
            last = max(end for _start, end in cursor.acked)
            cursor.delivered = max(filter(None, [cursor.delivered, last]))
        return cursor

    @property
    def reads_compacted(self) -> bool:
        return self.properties.get(READ_COMPACTED_PROPERTY) == "true"

    def set_reads_compacted(self, compacted: bool) -> CursorChange:
        """Record how the subscription's consumers read (a change of the head, or none)."""
        if compacted == self.reads_compacted:
            return CursorChange()
        if compacted:
            self.properties[READ_COMPACTED_PROPERTY] = "true"
        else:
            self.properties.pop(READ_COMPACTED_PROPERTY, None)
        return CursorChange(head=True)

    # ---- reading ----------------------------------------------------------------------

    def is_acked(self, msg_id: MessageId) -> bool:
        return (self.mark_delete is not None and msg_id <= self.mark_delete) or msg_id in self.acked

    # ---- delivery and acknowledgement ----------------------------------------------------

    def deliver(self, last: MessageId | None, rewound: bool = False) -> None:
        """Delivery reached ``last``: the read position moves forward to it, or, for a
        delivery that began with a rewind to the mark-delete position, is set to it;
        ``delivered`` only ever rises (written with the next change of the cursor)."""
        with self._position_lock:
            current = self.read_position
            if rewound or current is None or (last is not None and last > current):
                self.read_position = last
            if last is not None and (self.delivered is None or last > self.delivered):
                self.delivered = last
                self._head_dirty = True

    def check_delivered(self, msg_id: MessageId, exists: Callable[[MessageId], bool]) -> bool:
        """Whether an ack of ``msg_id`` changes anything (False: at or before the
        mark-delete position, acked already); NotDelivered if it was never given out."""
        if self.mark_delete is not None and msg_id <= self.mark_delete:
            return False
        with self._position_lock:
            delivered = self.delivered
        if delivered is None or msg_id > delivered or not exists(msg_id):
            raise NotDelivered(
                f"message {msg_id} was never delivered to subscription {self.name!r}"
                + (f" (delivered up to {self.delivered})" if self.delivered is not None else ""),
                subscription=self.name,
                message_id=msg_id,
                delivered=self.delivered,
            )
        return True

    def acknowledge(
        self, msg_id: MessageId, cumulative: bool, successor: Successor
    ) -> CursorChange:
        """Apply an ack (checked with ``check_delivered`` first), then move the mark-delete
        position over the acked ranges that now follow it."""
        change = CursorChange()
        if self.mark_delete is not None and msg_id <= self.mark_delete:
            return change
        if cumulative:
            self._move_mark(msg_id, change)
        else:
            self.acked.add(msg_id, change.ranges)
        return self._advance(change, successor)

    def check_list(
        self, ids: Iterable[MessageId], exists: Callable[[MessageId], bool]
    ) -> list[MessageId]:
        """``check_delivered`` of every id before any is applied: those an ack changes,
        or NotDelivered for the first never given out (a list is acked whole or not)."""
        return [msg_id for msg_id in ids if self.check_delivered(msg_id, exists)]

    def acknowledge_list(self, ids: Iterable[MessageId], successor: Successor) -> CursorChange:
        """Individual acks of ``ids`` (checked with ``check_list``) as one change: each
        run of consecutive entries added as one range, then the mark-delete position moved
        once, so that the store writes the records the last of them left."""
        change = CursorChange()
        mark = self.mark_delete
        for start, end in runs(ids):
            if mark is not None and end <= mark:
                continue
            if mark is not None and start <= mark:  # only a run's tail is past the mark
                start = MessageId(end.ledger_id, mark.entry_id + 1)
            self.acked.add_run(start, end, change.ranges)
        return self._advance(change, successor)

    def _advance(self, change: CursorChange, successor: Successor) -> CursorChange:
        """Move the mark-delete position over the acked ranges that now follow it; the
        change, with the head when ``delivered`` rose."""
        while (first := self.acked.first()) is not None and self._next_is(first[0], successor):
            self._move_mark(first[1], change)
        self.deliver(self.mark_delete)
        change.head |= self._head_dirty  # a risen ``delivered`` goes with this write
        self._head_dirty = False
        return change

    def _next_is(self, start: MessageId, successor: Successor) -> bool:
        """``start`` is the first stored id after the mark-delete position. Within a ledger
        that is the next entry; across ledgers, or over gaps the cleaner left in a
        SEGMENTED log, the topic knows (``successor``)."""
        mark = self.mark_delete
        if mark is not None and mark.next() == start:
            return True
        return successor(mark) == start

    def _move_mark(self, mark: MessageId, change: CursorChange) -> None:
        self.mark_delete = mark
        self.acked.drop_through(mark, change.ranges)
        change.head = True

    def reset(self, mark: MessageId | None) -> CursorChange:
        """An administrator's reset (Pulsar's resetCursor): every acknowledgement is
        forgotten, the mark-delete position is ``mark`` (None: before the first message)
        and delivery starts again right after it. ``delivered`` only rises, so acks of
        messages given out before the reset still count."""
        change = CursorChange(head=True)
        for start, _end in list(self.acked):
            change.ranges[start] = None
        self.acked = AckedRanges()
        self.mark_delete = mark
        self.deliver(mark, rewound=True)
        self._head_dirty = False
        return change

    def set_position(self, mark: MessageId | None, properties: dict[str, str]) -> CursorChange:
        """The compactor's commit: a new position and properties at once."""
        change = CursorChange(head=True)
        self.properties = dict(properties)
        if mark is None:
            for start, _end in list(self.acked):
                change.ranges[start] = None
            self.acked = AckedRanges()
            self.mark_delete = None
            return change
        self._move_mark(mark, change)
        self.deliver(mark)
        self._head_dirty = False
        return change


def runs(ids: Iterable[MessageId]) -> list[tuple[MessageId, MessageId]]:
    """``ids`` sorted, as runs of consecutive entries of one ledger: ``(first, last)``
    each (an id given twice counts once)."""
    out: list[tuple[MessageId, MessageId]] = []
    ordered = sorted(ids)
    if not ordered:
        return out
    first = last = ordered[0]
    for msg_id in ordered:
        if msg_id.ledger_id == last.ledger_id and msg_id.entry_id <= last.entry_id + 1:
            last = msg_id
            continue
        out.append((first, last))
        first = last = msg_id
    out.append((first, last))
    return out


def message_id(raw: object) -> MessageId:
    """A stored ``[ledger_id, entry_id]``, strictly."""
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not all(type(v) is int and 0 <= v < 2**64 for v in raw)
    ):
        raise ValueError(f"not a message id: {str(raw)[:40]}")
    return MessageId(raw[0], raw[1])
