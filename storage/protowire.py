"""Protobuf wire primitives the codec's pure twin and the message decoder share.

Varints (unsigned 64-bit, at most ten bytes), skipping a field of any wire type the
messages use, and ``Message.id`` written as protobuf writes it (zero fields omitted), so
that stored bytes equal what the generated classes would emit. Malformed bytes raise
``MalformedPayload``, never ``IndexError``: a request's bytes are untrusted.
"""

from __future__ import annotations

_U64 = 1 << 64


class MalformedPayload(ValueError):
    """Bytes that are not the wire encoding this codec reads."""


def read_varint(buf: bytes, p: int, end: int) -> tuple[int, int]:
    """The varint at ``buf[p:end]`` and the position after it (protobuf wire format)."""
    result = 0
    shift = 0
    while True:
        if p >= end or shift > 63:
            raise MalformedPayload("truncated or overlong varint")
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & (_U64 - 1), p
        shift += 7


def put_varint(out: bytearray, n: int) -> None:
    """Append ``n`` (taken as unsigned 64-bit) as a varint."""
    n &= _U64 - 1
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def skip_field(buf: bytes, p: int, end: int, wire: int) -> int:
    """Position after a field's value of wire type ``wire`` starting at ``p``."""
    if wire == 0:
        return read_varint(buf, p, end)[1]
    if wire == 1:
        q = p + 8
    elif wire == 5:
        q = p + 4
    elif wire == 2:
        n, p = read_varint(buf, p, end)
        q = p + n
    else:
        raise MalformedPayload(f"unsupported wire type {wire}")
    if q > end:
        raise MalformedPayload("field runs past its message")
    return q


def id_field(ledger_id: int, entry_id: int, partition: int = 0) -> bytes:
    """``Message.id`` (field 1) as protobuf writes it: zero fields omitted. ``partition``
    (``MessageId.partition``, field 3) is set on the messages of a partitioned topic."""
    body = bytearray()
    if ledger_id:
        body.append(0x08)
        put_varint(body, ledger_id)
    if entry_id:
        body.append(0x10)
        put_varint(body, entry_id)
    if partition:
        body.append(0x18)
        put_varint(body, partition)
    return bytes([0x0A, len(body)]) + bytes(body)
