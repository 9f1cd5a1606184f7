"""Pure-Python twin of ``_columns.c``: one serialized ``ReadResponse`` as the source's
column buffers, used where no C compiler was present at install (or with
``COMPACTLOG_NO_EXT=1``). Same function, same results, byte for byte.

``columns(data, end_ledger, end_entry)`` walks the response's messages (field 1) in
order and stops at the first whose id is at or past the end. It returns ``rows``,
``stopped``, the last id taken (ledger, entry), the key and value null counts, the
properties count, then fifteen buffers: key validity bits (LSB first), int32 offsets
and bytes; the same for the value; ledger ids, entry ids, publish and event times (µs,
int64, an event time of 0 shows the publish time); the properties' int32 map offsets,
then their keys' offsets and bytes and their values' offsets and bytes.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator


class MalformedResponse(ValueError):
    """The response's bytes are not the protobuf messages they should be."""


Field = tuple[int, int, int, int]  # number, wire type, start, end of its value


def _varint(buf: bytes, p: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if p >= end or shift > 63:
            raise MalformedResponse("truncated or overlong varint")
        c = buf[p]
        p += 1
        result |= (c & 0x7F) << shift
        if c < 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, p
        shift += 7


def _fields(buf: bytes, p: int, end: int) -> Iterator[Field]:
    """The fields of [p, end) one at a time: a bad one fails only when reached."""
    while p < end:
        tag, p = _varint(buf, p, end)
        wire, start = tag & 7, p
        if wire == 0:
            _, p = _varint(buf, p, end)
        elif wire == 2:
            n, start = _varint(buf, p, end)
            if n > end - start:
                raise MalformedResponse("field runs past its message")
            p = start + n
        elif wire in (1, 5):
            p += 8 if wire == 1 else 4
            if p > end:
                raise MalformedResponse("field runs past its message")
        else:
            raise MalformedResponse(f"unsupported wire type {wire}")
        yield tag >> 3, wire, start, p


def _id(buf: bytes, start: int, end: int) -> tuple[int, int]:
    ledger = entry = 0
    for number, wire, s, _ in _fields(buf, start, end):
        if wire == 0 and number in (1, 2):
            value, _ = _varint(buf, s, end)
            ledger, entry = (value, entry) if number == 1 else (ledger, value)
    return ledger, entry


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


class _Binary:
    def __init__(self) -> None:
        self.valid = bytearray()
        self.offsets = array("i", [0])
        self.data = bytearray()
        self.nulls = 0

    def add(self, row: int, value: bytes | None) -> None:
        if row % 8 == 0:
            self.valid.append(0)
        if value is None:
            self.nulls += 1
        else:
            self.valid[row >> 3] |= 1 << (row & 7)
            self.data += value
        self.offsets.append(_offset(len(self.data)))


def _offset(at: int) -> int:
    if at > 0x7FFFFFFF:
        raise MalformedResponse("a response's column passes 2 GiB")
    return at


class _Columns:
    def __init__(self) -> None:
        self.key, self.value = _Binary(), _Binary()
        self.ints = [array("q") for _ in range(4)]  # ledger, entry, publish, event
        self.map_offsets = array("i", [0])
        self.props = [array("i", [0]), bytearray(), array("i", [0]), bytearray()]

    def add_property(self, buf: bytes, start: int, end: int) -> None:
        k = v = b""
        for number, wire, s, e in _fields(buf, start, end):
            if wire == 2 and number == 1:
                k = buf[s:e]
            elif wire == 2 and number == 2:
                v = buf[s:e]
        key_offsets, key_data, value_offsets, value_data = self.props
        key_data += k
        key_offsets.append(_offset(len(key_data)))
        value_data += v
        value_offsets.append(_offset(len(value_data)))

    def add(self, row: int, buf: bytes, fields: list[Field], ledger: int, entry: int) -> None:
        key = value = None
        publish = event = 0
        for number, wire, s, e in fields:
            if wire == 2 and number == 2:
                key = buf[s:e]
            elif wire == 2 and number == 3:
                value = buf[s:e]
            elif wire == 2 and number == 4:
                self.add_property(buf, s, e)
            elif wire == 0 and number in (5, 6):
                v, _ = _varint(buf, s, e)
                publish, event = (v, event) if number == 5 else (publish, v)
        publish_us = _signed(publish) * 1000
        event_us = _signed(event) * 1000 if event else publish_us
        self.key.add(row, key)
        self.value.add(row, value)
        for column, v in zip(self.ints, (ledger, entry, publish_us, event_us), strict=True):
            column.append(_signed(v))
        self.map_offsets.append(len(self.props[0]) - 1)

    def buffers(self) -> list[bytes]:
        k, v = self.key, self.value
        out = [k.valid, k.offsets, k.data, v.valid, v.offsets, v.data, *self.ints]
        return [bytes(b) for b in (*out, self.map_offsets, *self.props)]


def columns(data: bytes, end_ledger: int, end_entry: int) -> tuple[object, ...]:
    """The response's messages before ``(end_ledger, end_entry)`` as column buffers."""
    buf = bytes(data)
    cols = _Columns()
    rows, stopped, last = 0, False, (0, 0)
    for number, wire, start, end in _fields(buf, 0, len(buf)):
        if number != 1 or wire != 2:
            continue
        fields = []
        ledger = entry = 0
        for field in _fields(buf, start, end):  # the id where met, as the C walk reads it
            fields.append(field)
            if field[0] == 1 and field[1] == 2:
                ledger, entry = _id(buf, field[2], field[3])
        if (ledger, entry) >= (end_ledger, end_entry):
            stopped = True
            break
        cols.add(rows, buf, fields, ledger, entry)
        last = (ledger, entry)
        rows += 1
    counts = (cols.key.nulls, cols.value.nulls, len(cols.props[0]) - 1)
    return (rows, stopped, *last, *counts, *cols.buffers())
