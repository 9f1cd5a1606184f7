"""send_async's per-message work, the pure twin of ``client/_publish.c``.

``append`` writes one record into the pending PublishRequest's bytes (a ``bytearray`` that
starts with the topic field, ``request_head``), so a queued message is a few bytes, not a
protobuf object or a tuple; ``call_back`` hands each message of an answered request its
``MessageId``, made from the reply's first id and the message's place, as it calls the
message's callback. The compiled twin does the same faster (``compactlog.twins``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["append", "call_back", "varint"]


def varint(n: int) -> bytes:
    """A protobuf varint of ``n`` (non-negative)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, data: bytes | None) -> bytes:
    if data is None:
        return b""
    return bytes((tag,)) + varint(len(data)) + data


def append(buf: bytearray, key: bytes | None, value: bytes | None) -> int:
    """Add one ``PublishRequest.records`` entry of ``key`` and ``value`` (``None``: the
    field is absent) to ``buf``; return ``len(key) + len(value)``."""
    for what, data in (("a key", key), ("a value", value)):
        if data is not None and type(data) is not bytes:
            raise TypeError(f"{what} must be bytes or None, not {type(data).__name__}")
    if type(buf) is not bytearray:
        raise TypeError("append: buf must be a bytearray")
    record = _field(0x0A, key) + _field(0x12, value)
    buf += b"\x12" + varint(len(record)) + record
    return len(key or b"") + len(value or b"")


def call_back(
    callbacks: list[Callable[[Any, Any], object]],
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
