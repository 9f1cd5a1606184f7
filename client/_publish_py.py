"""send_async's per-message work, the pure twin of ``client/_publish.c``.

A ``Pending`` holds a producer's queued messages as the bytes of the PublishStream
requests they will go in (each begins with the topic field, ``head``) and one callback
list per request, so a queued message is a few bytes, not a protobuf object or a tuple:
``add`` writes a message's record into the pending request, sealing it first when the
message would take it past ``max_bytes`` and after when it holds ``max_messages`` or
``max_bytes``; ``take`` hands out the oldest request. Each call is atomic (the compiled
twin's run whole under the GIL; this one's under a lock of its own), so the producer's
condition only wakes its threads, when ``add``'s flags say so (and, after ``close``,
that nothing was added). ``call_back`` hands each
message of an answered request its ``MessageId``, made from the reply's first id and the
message's place, as it calls the message's callback; ``call_back_ids`` does so from
each wire id of a reply whose ids do not run (a partitioned topic's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["CLOSED", "CROWDED", "WAKE", "Pending", "call_back", "call_back_ids", "varint"]

WAKE = 1  # a request has its first message, or one was sealed
CROWDED = 2  # ``crowded`` messages are not called back yet
CLOSED = 4  # closed: nothing was added
Callback = Callable[[Any, Any], object]


def varint(n: int) -> bytes:
    """A protobuf varint of ``n`` (non-negative)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, data: bytes | None, what: str) -> bytes:
    if data is None:
        return b""
    if type(data) is not bytes:
        raise TypeError(f"{what} must be bytes or None, not {type(data).__name__}")
    return bytes((tag,)) + varint(len(data)) + data


class Pending:
    """Queued messages as requests: ``Pending(head, max_messages, max_bytes, crowded)``."""

    def __init__(self, head: bytes, max_messages: int, max_bytes: int, crowded: int) -> None:
        self._head = bytes(head)
        self._max_messages, self._max_bytes, self._crowded = max_messages, max_bytes, crowded
        self._lock = threading.Lock()
        self._sealed: list[tuple[bytearray, list[Callback]]] = []
        self._fresh()
        self.added = 0  # messages ever added
        self.unanswered = 0  # added and not yet answered
        self._closed = False

    def _fresh(self) -> None:
        self._callbacks: list[Callback] = []
        self._buf, self._bytes = bytearray(self._head), 0

    def _seal(self) -> None:
        self._sealed.append((self._buf, self._callbacks))
        self._fresh()

    def add(self, key: bytes | None, value: bytes | None, callback: Callback) -> int:
        """Queue a record of ``key`` and ``value`` (``None``: the field is absent); the
        flags: ``WAKE`` (a request has its first message, or one was sealed), ``CROWDED``
        (``crowded`` messages are not answered)."""
        body = _field(0x0A, key, "a key") + _field(0x12, value, "a value")
        return self._put(body, len(key or b"") + len(value or b""), callback)

    def add_encoded(self, record: bytes, size: int, callback: Callback) -> int:
        """``add`` for a ``Record`` already serialized, of ``size`` key and value bytes."""
        if type(record) is not bytes:
            raise TypeError("add_encoded(record: bytes, size, callback)")
        return self._put(record, size, callback)

    def _put(self, body: bytes, size: int, callback: Callback) -> int:
        with self._lock:
            if self._closed:
                return CLOSED
            flags = 0
            if self._callbacks and self._bytes + size > self._max_bytes:
                self._seal()
                flags |= WAKE
            self._buf += b"\x12" + varint(len(body)) + body
            self._callbacks.append(callback)
            self._bytes += size
            self.added += 1
            self.unanswered += 1
            if len(self._callbacks) == 1:
                flags |= WAKE
            if len(self._callbacks) >= self._max_messages or self._bytes >= self._max_bytes:
                self._seal()
                flags |= WAKE
            if self.unanswered >= self._crowded:
                flags |= CROWDED
            return flags

    def take(self) -> tuple[bytes, list[Callback]] | None:
        """The oldest request's bytes and callbacks (sealed, else the pending one), or
        None when nothing waits."""
        with self._lock:
            if self._sealed:
                buf, callbacks = self._sealed.pop(0)
            elif self._callbacks:
                buf, callbacks = self._buf, self._callbacks
                self._fresh()
            else:
                return None
            return bytes(buf), callbacks

    def answered(self, count: int) -> None:
        """``count`` messages were called back."""
        with self._lock:
            self.unanswered -= count

    def close(self) -> None:
        """Later adds add nothing (and return ``CLOSED``)."""
        with self._lock:
            self._closed = True

    @property
    def waiting(self) -> bool:
        """A request waits to be taken."""
        return bool(self._sealed or self._callbacks)

    @property
    def full(self) -> bool:
        """A sealed request waits to be taken."""
        return bool(self._sealed)


def call_back(
    callbacks: list[Callback],
    start: int,
    result: object,
    ledger: int,
    first: int,
    cls: type[tuple[int, int]],
) -> tuple[int, Exception | None]:
    """``callbacks[i](result, cls((ledger, first + i)))`` from ``start`` on, in order. When
    one raises, stop after it: ``(its index + 1, the exception)``; else ``(len, None)``."""
    new = tuple.__new__
    for i in range(start, len(callbacks)):
        try:
            callbacks[i](result, new(cls, (ledger, first + i)))
        except Exception as exc:
            return i + 1, exc
    return len(callbacks), None


def call_back_ids(
    callbacks: list[Callback], start: int, result: object, ids: Any, cls: type[tuple[int, int]]
) -> tuple[int, Exception | None]:
    """``call_back`` with each message's id read from the reply's ``ids[i]`` (its
    ``ledger_id``, ``entry_id`` and ``partition``, set as ``_partition`` when not 0)."""
    if len(ids) != len(callbacks):
        raise ValueError("call_back_ids: one id a callback")
    new = tuple.__new__
    for i in range(start, len(callbacks)):
        wire = ids[i]
        mid: Any = new(cls, (wire.ledger_id, wire.entry_id))
        if wire.partition:
            mid._partition = wire.partition
        try:
            callbacks[i](result, mid)
        except Exception as exc:
            return i + 1, exc
    return len(callbacks), None
