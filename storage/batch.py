"""The stored batch: the one unit of storage and transfer for LEDGER and SEGMENTED topics.

A publish request becomes one batch (split only where a ledger rolls over). A LEDGER
entry value in RocksDB and a frame in a segment file are the same bytes, so both kinds
share this codec and its one CRC check. The payload is exactly what a ``ReadResponse``
(or ``ConsumeResponse``) carries in its ``repeated Message messages = 1`` field, ids
included, so a read concatenates stored payloads and trims only at the ends of a range.

Batch (all integers big-endian)::

    byte size  field
       0    4  length            u32  bytes after this field (64 + payload)
       4    4  crc               u32  CRC-32C (Castagnoli) of bytes 8 .. 4+length
       8    1  magic             u8   BATCH_MAGIC (2); 1 was the per-record format
       9    1  attributes        u8   bit0 COMPACTED: ids ascend but need not be contiguous
                                          bit1 LIVE_ONLY: every message has a key and a
                                          non-empty value (set by the two-phase compactor
                                          on batches with no tombstone or keyless message)
      10    2  reserved          u16  0
      12    4  count             u32  messages in the payload (>= 1)
      16    8  first_ledger      u64  id of the first message (SEGMENTED: 0)
      24    8  first_entry       u64                           (SEGMENTED: offset)
      32    8  last_ledger       u64  id of the last message
      40    8  last_entry        u64
      48    8  publish_time_ms   i64  of the first message (all of them, unless COMPACTED)
      56    8  max_event_time_ms i64  largest event time (Kafka's maxTimestamp)
      64    8  delete_horizon_ms i64  -1, or when the cleaner may drop its tombstones
      72    .  payload           count message records

Message record (protobuf wire format of ``Message``, fields in this order)::

    0x0A varint(n)                       field 1 of ReadResponse, n bytes follow
      0x0A len  [0x08 ledger] [0x10 entry]   id (zero fields omitted, as protobuf does)
      [0x12 varint(k) key]                   key, when present
      [0x1A varint(v) value]                 value, when present (may be empty)
      [0x22 varint(m) map entry]*            properties, in publish order
      [0x28 publish_time_ms] [0x30 event_time_ms]

The per-record work (building message records from a ``PublishRequest``'s bytes, walking
a payload) lives in a compiled twin, ``_batch.c``, with a pure-Python twin,
``_batch_py.py``, of identical behaviour, used where no compiler was present at install.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c

from compactlog.errors import CorruptData, InvalidArgument, MalformedRequest
from compactlog.storage import _batch_py
from compactlog.storage.message_decode import decode_message
from compactlog.storage.protowire import id_field, put_varint, read_varint
from compactlog.storage.types import MessageId, Record, StoredMessage
from compactlog.twins import load_twin

codec, COMPILED = load_twin("compactlog.storage._batch", _batch_py)
MalformedPayload = _batch_py.MalformedPayload  # the class both twins raise
HAS_KEY = _batch_py.HAS_KEY
VALUE_NON_EMPTY = _batch_py.VALUE_NON_EMPTY
VALUE_PRESENT = _batch_py.VALUE_PRESENT

BATCH_MAGIC = 2
COMPACTED = 1
LIVE_ONLY = 2
NO_HORIZON = -1
HEADER = struct.Struct(">IIBBHIQQQQqqq")
HEADER_SIZE = HEADER.size  # 72
LENGTH = struct.Struct(">I")
_CRC_END = 8  # the CRC covers everything after the crc field
_header_unpack = HEADER.unpack_from
_header_pack = HEADER.pack
_crc = crc32c.crc32c


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """A batch's fixed part, read back and checked."""

    size: int  # bytes of the whole batch, length field included
    attributes: int
    count: int
    first_id: MessageId
    last_id: MessageId
    publish_time_ms: int
    max_event_time_ms: int
    delete_horizon_ms: int

    @property
    def compacted(self) -> bool:
        return bool(self.attributes & COMPACTED)


def pack(
    payload: bytes,
    count: int,
    first_id: MessageId,
    last_id: MessageId,
    publish_time_ms: int,
    max_event_time_ms: int,
    attributes: int = 0,
    delete_horizon_ms: int = NO_HORIZON,
) -> bytes:
    """Frame a payload of ``count`` message records as one batch with its CRC."""
    head = _header_pack(
        HEADER_SIZE - 4 + len(payload),
        0,
        BATCH_MAGIC,
        attributes,
        0,
        count,
        first_id[0],
        first_id[1],
        last_id[0],
        last_id[1],
        publish_time_ms,
        max_event_time_ms,
        delete_horizon_ms,
    )
    crc = _crc(payload, _crc(memoryview(head)[_CRC_END:]))
    return head[:4] + crc.to_bytes(4, "big") + head[_CRC_END:] + payload


def check(data: bytes | memoryview, where: str, offset: int = 0) -> BatchHeader:
    """The header of the batch at ``data[offset:]`` after its length, magic and CRC pass.

    The one place a batch is trusted: every reader (reads, consumers, compactors, the
    cleaner, recovery) comes through here. ``where`` names the topic and position for
    the ``CorruptData`` raised when the bytes are not what was written.
    """
    avail = len(data) - offset
    if avail < HEADER_SIZE:
        raise CorruptData(
            f"{where}: batch of {avail} bytes is shorter than its header", position=where
        )
    (length, crc, magic, attributes, _r, count, fl, fe, ll, le, pt, met, dh) = _header_unpack(
        data, offset
    )
    size = length + 4
    if magic != BATCH_MAGIC:
        raise CorruptData(f"{where}: unknown batch magic {magic}", position=where)
    if size < HEADER_SIZE or size > avail:
        raise CorruptData(
            f"{where}: batch length {length} does not fit its {avail} bytes", position=where
        )
    if _crc(memoryview(data)[offset + _CRC_END : offset + size]) != crc:
        raise CorruptData(f"{where}: batch CRC-32C mismatch", position=where)
    if count < 1 or (fl, fe) > (ll, le):
        raise CorruptData(f"{where}: batch header is inconsistent", position=where)
    return BatchHeader(size, attributes, count, MessageId(fl, fe), MessageId(ll, le), pt, met, dh)


def payload_of(data: bytes | memoryview, header: BatchHeader, offset: int = 0) -> memoryview:
    return memoryview(data)[offset + HEADER_SIZE : offset + header.size]


def peek_first_entry(data: bytes, offset: int = 0) -> int:
    """The first entry id a batch at ``offset`` claims, before checking it; -1 when the
    bytes there are too few or do not start a batch of this format."""
    if len(data) - offset < HEADER_SIZE:
        return -1
    fields = _header_unpack(data, offset)
    return int(fields[7]) if fields[2] == BATCH_MAGIC else -1


def peek_length(data: bytes, offset: int = 0) -> int:
    """The size a batch at ``offset`` claims (length field included), before checking it."""
    return int(LENGTH.unpack_from(data, offset)[0]) + 4


# ---- building batches ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EncodedRun:
    """Records of a request encoded for one ledger: a batch payload and its key index block."""

    payload: bytes
    index_block: bytes  # per keyed record: key_hash(key), entry id (storage.key_index)
    count: int
    next_pos: int
    max_event_time_ms: int
    max_size: int
    max_size_index: int


def encode_request(
    request: bytes,
    pos: int,
    ledger_id: int,
    first_entry: int,
    publish_ms: int,
    max_count: int = 2**31,
    room: int = 2**62,
    partition: int = 0,
) -> EncodedRun:
    """Encode PublishRequest records from ``pos`` (see ``_batch_py.encode_records``);
    ``partition`` goes into every id (the messages of ``NAME-partition-i``)."""
    try:
        args = (request, pos, ledger_id, first_entry, publish_ms, max_count, room, partition)
        out = codec.encode_records(*args)
    except MalformedPayload as exc:
        raise MalformedRequest(
            f"malformed publish request: {exc}", request="PublishRequest"
        ) from None
    return EncodedRun(*out)


def publish_topic(request: bytes) -> str:
    """The topic of raw ``PublishRequest`` bytes, once the codec has checked them as
    protobuf's parse would (``_publish_check_py``), so that a malformed request is
    refused before anything of it is stored; one walk, no message built."""
    try:
        return str(codec.check_publish(request))
    except MalformedPayload as exc:
        raise MalformedRequest(
            f"malformed publish request: {exc}", request="PublishRequest"
        ) from None


def route_records(
    request: bytes, partitions: int, first_keyless: int
) -> tuple[list[bytes], memoryview, int]:
    """The records of raw ``PublishRequest`` bytes split by partition, Kafka's default
    partitioner's way (see ``_batch_py.route_records``): each partition's ``records``
    field bytes (a PublishRequest of its own), ``(partition, index)`` of every record in
    request order (a flat uint32 view), and how many keyless records took a turn."""
    try:
        parts, order, keyless = codec.route_records(request, partitions, first_keyless)
    except MalformedPayload as exc:
        raise MalformedRequest(
            f"malformed publish request: {exc}", request="PublishRequest"
        ) from None
    return parts, memoryview(order).cast("I"), keyless


def _bytes_field(out: bytearray, tag: int, data: bytes) -> None:
    out.append(tag)
    put_varint(out, len(data))
    out += data


def records_to_request(records: Sequence[Record]) -> bytes:
    """Domain records as the ``records`` field of a PublishRequest, so in-process appends
    go through the same encoder as the wire (one codec)."""
    out = bytearray()
    for i, rec in enumerate(records):
        body = bytearray()
        if rec.key is not None:
            if not isinstance(rec.key, bytes):
                raise InvalidArgument(f"record {i}: key must be bytes or None")
            _bytes_field(body, 0x0A, rec.key)
        if rec.value is not None:
            if not isinstance(rec.value, bytes):
                raise InvalidArgument(f"record {i}: value must be bytes or None")
            _bytes_field(body, 0x12, rec.value)
        for name, value in (rec.properties or {}).items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise InvalidArgument(f"record {i}: properties must map strings to strings")
            entry = bytearray()
            _bytes_field(entry, 0x0A, name.encode())
            _bytes_field(entry, 0x12, value.encode())
            _bytes_field(body, 0x1A, bytes(entry))
        if rec.event_time_ms:
            body.append(0x20)
            put_varint(body, rec.event_time_ms & (2**64 - 1))
        _bytes_field(out, 0x12, bytes(body))
    return bytes(out)


def frame_messages(bodies: Sequence[bytes]) -> bytes:
    """Message bodies (``Message`` wire bytes, id included) as payload records."""
    out = bytearray()
    for body in bodies:
        _bytes_field(out, 0x0A, body)
    return bytes(out)


def record_body(payload: bytes | memoryview, start: int, end: int) -> bytes:
    """The ``Message`` bytes of the record at ``payload[start:end]`` (tag and length off)."""
    p = start + 1
    while payload[p] & 0x80:
        p += 1
    return bytes(payload[p + 1 : end])


# ---- reading payloads ---------------------------------------------------------------

# (ledger, entry, flags, key, record start, record end) within a payload
Walked = tuple[int, int, int, bytes | None, int, int]


def walk(payload: bytes | memoryview, where: str) -> list[Walked]:
    try:
        result: list[Walked] = codec.walk(payload)
        return result
    except MalformedPayload as exc:
        raise CorruptData(f"{where}: {exc}", position=where) from None


def skip_records(payload: bytes | memoryview, start: int, count: int) -> int:
    return int(codec.skip_records(payload, start, count))


def select(
    data: bytes | memoryview,
    header: BatchHeader,
    start: MessageId,
    stop: MessageId,
    limit: int,
    where: str,
    offset: int = 0,
) -> tuple[memoryview, int, MessageId | None]:
    """The message records of a checked batch with ``start <= id <= stop``, at most
    ``limit`` of them: ``(payload slice, count, last id)``. A batch wholly inside the
    range is returned as it is stored; only batches at the ends of a range are trimmed.
    """
    payload = payload_of(data, header, offset)
    first, last, count = header.first_id, header.last_id, header.count
    if start <= first and last <= stop and count <= limit:
        return payload, count, last
    if start > last or stop < first or start > stop or limit <= 0:
        return payload[:0], 0, None
    if not header.compacted and first.ledger_id == last.ledger_id:
        # Contiguous ids: positions follow from the ids, no record is parsed.
        lo = start.entry_id - first.entry_id if start > first else 0
        hi = stop.entry_id - first.entry_id if stop < last else count - 1
        n = min(limit, hi - lo + 1)
        begin = skip_records(payload, 0, lo)
        end = skip_records(payload, begin, n)
        return payload[begin:end], n, MessageId(first.ledger_id, first.entry_id + lo + n - 1)
    try:
        begin, end, n, last_ledger, last_entry = codec.span(
            payload, start[0], start[1], stop[0], stop[1], limit
        )
    except MalformedPayload as exc:
        raise CorruptData(f"{where}: {exc}", position=where) from None
    if n == 0:
        return payload[:0], 0, None
    # Ids ascend within a batch, so the records in range are one contiguous byte range.
    return payload[begin:end], n, MessageId(last_ledger, last_entry)


def id_runs(runs: Sequence[tuple[int, int, int]], partition: int = 0) -> bytes:
    """``repeated MessageId ids = 1`` wire bytes for (ledger, first entry, count) runs;
    ``partition`` (a partition's appends) goes into every id."""
    if not partition:
        return bytes(codec.id_runs(list(runs)))
    return b"".join(
        id_field(lid, e, partition) for lid, first, n in runs for e in range(first, first + n)
    )


def decode_batch(data: bytes, where: str) -> list[StoredMessage]:
    header = check(data, where)
    payload = bytes(payload_of(data, header))
    return [decode_message(payload[s:e]) for *_rest, s, e in walk(payload, where)]


__all__ = [
    "BATCH_MAGIC",
    "COMPACTED",
    "COMPILED",
    "HAS_KEY",
    "HEADER_SIZE",
    "NO_HORIZON",
    "VALUE_NON_EMPTY",
    "VALUE_PRESENT",
    "BatchHeader",
    "EncodedRun",
    "MalformedPayload",
    "check",
    "decode_batch",
    "decode_message",
    "encode_request",
    "frame_messages",
    "id_field",
    "id_runs",
    "pack",
    "payload_of",
    "peek_length",
    "put_varint",
    "read_varint",
    "record_body",
    "records_to_request",
    "select",
    "skip_records",
    "walk",
]
