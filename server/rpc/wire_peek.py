"""The topic of a request, read from its wire bytes without parsing the message.

Every request of ``Log``, ``TopicAdmin`` and ``CompactionEngine`` that names a topic names
it in field 1 (``topic`` or ``name``); the calls that do not (``ListTopics``, and the
ledger-addressed ``AppendEntries``/``SealLedger`` whose field 1 is a varint) have no
length-delimited field 1. The front routes by it and a shard's slot server checks it,
both without paying for a protobuf parse of a publish's records.
"""

from __future__ import annotations

_WIRE_VARINT, _WIRE_I64, _WIRE_LEN, _WIRE_I32 = 0, 1, 2, 5


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def field_one(data: bytes) -> bytes | int | None:
    """Field 1 of a protobuf message: its bytes when length-delimited, its value when a
    varint, None when absent or when the bytes do not parse (the parser will say so)."""
    pos = 0
    try:
        while pos < len(data):
            tag, pos = _varint(data, pos)
            number, wire = tag >> 3, tag & 7
            if wire == _WIRE_VARINT:
                value, pos = _varint(data, pos)
                if number == 1:
                    return value
            elif wire == _WIRE_LEN:
                size, pos = _varint(data, pos)
                if number == 1:
                    return data[pos : pos + size] if pos + size <= len(data) else None
                pos += size
            elif wire == _WIRE_I64:
                pos += 8
            elif wire == _WIRE_I32:
                pos += 4
            else:
                return None
    except ValueError:
        return None
    return None


def topic_of(data: bytes) -> str | None:
    """The topic a request names (field 1 as text), or None when it names none."""
    value = field_one(data)
    if not isinstance(value, bytes):
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None
