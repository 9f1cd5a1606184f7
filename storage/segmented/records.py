"""The on-disk record format of segment files.

A segment file is a plain concatenation of records; a Publish request becomes one run of
consecutive records written with a single ``write``. Every record is self-describing and
carries its own CRC, so recovery can validate a file record by record and truncate at the
first torn or flipped one, and the cleaner can copy a surviving record byte for byte
(offsets never change, so neither does the CRC)::

    byte  size  field
       0     4  length          uint32, bytes that follow this field (48 + key + value + headers)
       4     4  crc             uint32, CRC-32C (Castagnoli) of bytes 8 .. 4+length
       8     8  offset          int64, position of the record in the topic, from 0
      16     8  timestamp       int64, event time in ms (CreateTime; publish time if not given)
      24     8  publish_time    int64, log append time in ms
      32     8  delete_horizon  int64, ms after which the cleaner may drop this tombstone;
                                -1 until the first cleaner pass that keeps it
      40     4  key_length      int32, -1 = null key (keyless record)
      44     4  value_length    int32, -1 = null value (a tombstone when keyed)
      48     4  headers_length  int32, bytes of the header block
      52     .  key bytes, value bytes, header block

    header block: repeated { uint16 name_length, name (UTF-8), uint32 value_length, value (UTF-8) }

All integers are big-endian, as in Kafka's formats.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import crc32c

from compactlog.errors import InvalidArgument

HEADER = struct.Struct(">IIqqqqiii")
HEADER_SIZE = HEADER.size  # 52
LENGTH = struct.Struct(">I")
_CRC = struct.Struct(">I")
_HORIZON = struct.Struct(">q")
_NAME_LEN = struct.Struct(">H")
_VALUE_LEN = struct.Struct(">I")
NO_HORIZON = -1
# Smallest legal value of the length field: the fixed part after the length itself.
MIN_LENGTH = HEADER_SIZE - 4


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    """One record as read back from a segment."""

    offset: int
    timestamp: int
    publish_time: int
    delete_horizon: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, str]
    size: int  # bytes on disk, length prefix included


def encode_headers(headers: Mapping[str, str] | None) -> bytes:
    if not headers:
        return b""
    parts: list[bytes] = []
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidArgument("record properties must map strings to strings")
        nb = name.encode()
        vb = value.encode()
        if len(nb) > 0xFFFF:
            raise InvalidArgument("record property name longer than 65535 bytes")
        parts += (_NAME_LEN.pack(len(nb)), nb, _VALUE_LEN.pack(len(vb)), vb)
    return b"".join(parts)


def decode_headers(block: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    p = 0
    n = len(block)
    while p < n:
        (nl,) = _NAME_LEN.unpack_from(block, p)
        p += 2
        name = block[p : p + nl].decode()
        p += nl
        (vl,) = _VALUE_LEN.unpack_from(block, p)
        p += 4
        out[name] = block[p : p + vl].decode()
        p += vl
    return out


def encode_record(
    offset: int,
    timestamp: int,
    publish_time: int,
    key: bytes | None,
    value: bytes | None,
    headers: bytes = b"",
    delete_horizon: int = NO_HORIZON,
) -> bytes:
    """Encode one record; ``headers`` is an already encoded header block."""
    kl = -1 if key is None else len(key)
    vl = -1 if value is None else len(value)
    length = MIN_LENGTH + max(kl, 0) + max(vl, 0) + len(headers)
    body = b"".join(
        (
            HEADER.pack(
                0, 0, offset, timestamp, publish_time, delete_horizon, kl, vl, len(headers)
            )[8:],
            key or b"",
            value or b"",
            headers,
        )
    )
    return LENGTH.pack(length) + _CRC.pack(crc32c.crc32c(body)) + body


def encode_batch(
    base_offset: int,
    publish_time: int,
    records: Sequence[tuple[bytes | None, bytes | None, Mapping[str, str] | None, int]],
) -> tuple[bytes, int, int]:
    """Encode (key, value, properties, event_time) tuples at consecutive offsets.

    Returns (bytes, max timestamp, offset of the max timestamp).
    """
    parts: list[bytes] = []
    max_ts = -1
    max_ts_offset = base_offset
    for i, (key, value, props, event_time) in enumerate(records):
        if key is not None and not isinstance(key, bytes):
            raise InvalidArgument("record key must be bytes or None")
        if value is not None and not isinstance(value, bytes):
            raise InvalidArgument("record value must be bytes or None")
        ts = event_time if event_time else publish_time
        if ts > max_ts:
            max_ts, max_ts_offset = ts, base_offset + i
        parts.append(
            encode_record(base_offset + i, ts, publish_time, key, value, encode_headers(props))
        )
    return b"".join(parts), max_ts, max_ts_offset


def with_delete_horizon(record: bytes, horizon: int) -> bytes:
    """The same record with its delete horizon set and its CRC recomputed."""
    buf = bytearray(record)
    _HORIZON.pack_into(buf, 32, horizon)
    _CRC.pack_into(buf, 4, crc32c.crc32c(bytes(buf[8:])))
    return bytes(buf)


def decode_at(buf: bytes, p: int) -> DecodedRecord:
    """Decode the record starting at ``p`` (which must be complete in ``buf``)."""
    length, _crc, off, ts, pt, horizon, kl, vl, hl = HEADER.unpack_from(buf, p)
    q = p + HEADER_SIZE
    key = None if kl < 0 else bytes(buf[q : q + kl])
    q += max(kl, 0)
    value = None if vl < 0 else bytes(buf[q : q + vl])
    q += max(vl, 0)
    headers = decode_headers(bytes(buf[q : q + hl])) if hl else {}
    return DecodedRecord(off, ts, pt, horizon, key, value, headers, 4 + length)


def check_record(buf: bytes, p: int, n: int) -> int:
    """Validate the record at ``p``; return its end position, or -1 if it is torn or corrupt."""
    if p + HEADER_SIZE > n:
        return -1
    length, crc, _off, _ts, _pt, _h, kl, vl, hl = HEADER.unpack_from(buf, p)
    end: int = p + 4 + length
    if length < MIN_LENGTH or end > n:
        return -1
    if kl < -1 or vl < -1 or hl < 0 or MIN_LENGTH + max(kl, 0) + max(vl, 0) + hl != length:
        return -1
    if crc32c.crc32c(memoryview(buf)[p + 8 : end]) != crc:
        return -1
    return end


def iter_records(buf: bytes, start: int = 0, end: int | None = None) -> Iterator[DecodedRecord]:
    """Decode complete records of ``buf[start:end]`` (no CRC check: recovery did that)."""
    n = len(buf) if end is None else end
    p = start
    while p + HEADER_SIZE <= n:
        (length,) = LENGTH.unpack_from(buf, p)
        if p + 4 + length > n:
            return
        yield decode_at(buf, p)
        p += 4 + length
