"""Pure-Python twin of ``storage/_batch.c``: the per-record work of the batch codec.

Both twins expose the same functions with byte-identical results (the tests run every
case through both); ``storage.batch`` picks the compiled one when it was built. The
layouts are drawn in ``storage/batch.py``. Nothing here checks a CRC or packs a batch
header: that is ``storage.batch``'s one job.

``encode_records`` turns the ``records`` field (2) of raw ``PublishRequest`` wire bytes
into stored message records, giving each its id and publish time; ``walk`` lists the
records of a payload with their ids, key flags, keys and byte ranges; ``check_publish``
(in ``_publish_check_py``) checks a request's bytes as protobuf's parse would.
"""

from __future__ import annotations

import array

from compactlog.partitioner import murmur2, to_positive
from compactlog.storage._publish_check_py import check_publish
from compactlog.storage.protowire import (
    MalformedPayload,
    id_field,
    put_varint,
    read_varint,
    skip_field,
)

_U64 = 1 << 64
_I64 = 1 << 63

HAS_KEY = 1
VALUE_NON_EMPTY = 2
VALUE_PRESENT = 4


def _message(
    record: bytes, rs: int, re: int, ident: bytes, publish_ms: int
) -> tuple[bytes, int, bytes | None, int]:
    """One Record (``record[rs:re]``) as Message fields: (fields, flags, key, event time)."""
    out = bytearray(ident)
    key: bytes | None = None
    key_field = value_field = b""
    props = bytearray()
    flags = 0
    event = 0
    p = rs
    while p < re:
        tag, p = read_varint(record, p, re)
        field, wire = tag >> 3, tag & 7
        q = skip_field(record, p, re, wire)
        if field == 1 and wire == 2:  # key -> Message.key (2); the last one wins
            n, s = read_varint(record, p, re)
            key = record[s:q]
            key_field = b"\x12" + record[p:q]
            flags |= HAS_KEY
        elif field == 2 and wire == 2:  # value -> Message.value (3)
            n, s = read_varint(record, p, re)
            value_field = b"\x1a" + record[p:q]
            flags = (flags & HAS_KEY) | VALUE_PRESENT | (VALUE_NON_EMPTY if n else 0)
        elif field == 3 and wire == 2:  # properties entry -> Message.properties (4)
            props += b"\x22" + record[p:q]
        elif field == 4 and wire == 0:  # event_time_ms -> Message.event_time_ms (6)
            event = read_varint(record, p, re)[0]
        p = q
    out += key_field + value_field + props
    if publish_ms:
        out.append(0x28)
        put_varint(out, publish_ms)
    event = event or (publish_ms & (_U64 - 1))
    if event:
        out.append(0x30)
        put_varint(out, event)
    signed = event - _U64 if event >= _I64 else event
    return bytes(out), flags, key, signed


_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
RUN_ENTRY = 12  # a key index run entry: hash u32, entry id u64 (big-endian)


def key_hash(key: bytes) -> int:
    """The key index's hash of a key: FNV-1a 64 folded to 32 bits, never 0 (0 marks a
    keyless record in an index block). Equal keys, equal hashes; a collision is
    resolved by comparing the stored key."""
    h = _FNV_OFFSET
    for b in key:
        h = ((h ^ b) * _FNV_PRIME) & (_U64 - 1)
    return ((h ^ (h >> 32)) & 0xFFFFFFFF) or 1


def block_entries(block: bytes, first_entry: int) -> bytes:
    """Run entries of a batch's index block (one u32 hash a record; 0: keyless)."""
    if len(block) % 4:
        raise MalformedPayload("key index block is not a whole number of hashes")
    return b"".join(
        block[i : i + 4] + (first_entry + i // 4).to_bytes(8, "big")
        for i in range(0, len(block), 4)
        if block[i : i + 4] != bytes(4)
    )


def sort_index(entries: bytes) -> bytes:
    """Key index run entries (hash u32, entry id u64) in byte order."""
    if len(entries) % RUN_ENTRY:
        raise MalformedPayload("key index run is not a whole number of entries")
    return b"".join(sorted(entries[i : i + RUN_ENTRY] for i in range(0, len(entries), RUN_ENTRY)))


def encode_records(
    request: bytes,
    pos: int,
    ledger_id: int,
    first_entry: int,
    publish_ms: int,
    max_count: int,
    room: int,
    partition: int = 0,
) -> tuple[bytes, bytes, int, int, int, int, int]:
    """Encode the Records of ``request[pos:]`` (PublishRequest field 2) as message records.

    Stops after ``max_count`` records, or after the record that brings the payload to
    ``room`` bytes or more. Returns ``(payload, index block, count, next pos, max event
    time, largest record size, its index)``; sizes are the message bytes without the id
    field (what ``max.message.bytes`` limits). Fields other than 2 are skipped. A
    ``partition`` other than 0 goes into every id (``MessageId.partition``). The index
    block holds ``key_hash(key)`` of each record, 0 for a keyless one (big-endian u32),
    and is empty when no record has a key: what ``storage.key_index`` stores beside the
    batch.
    """
    if partition < 0:
        raise ValueError("partition must be >= 0")
    end = len(request)
    if pos < 0 or pos > end:
        raise MalformedPayload("position outside the request")
    payload = bytearray()
    keyblock = bytearray()
    count = 0
    max_event = -_I64
    max_size = -1
    max_index = -1
    p = pos
    while p < end and count < max_count and len(payload) < room:
        tag, q = read_varint(request, p, end)
        field, wire = tag >> 3, tag & 7
        nxt = skip_field(request, q, end, wire)
        if field != 2 or wire != 2:
            p = nxt
            continue
        _n, rs = read_varint(request, q, end)
        ident = id_field(ledger_id, first_entry + count, partition)
        body, _flags, key, event = _message(request, rs, nxt, ident, publish_ms)
        payload.append(0x0A)
        put_varint(payload, len(body))
        payload += body
        size = len(body) - len(ident)
        keyblock += (key_hash(key) if key is not None else 0).to_bytes(4, "big")
        if size > max_size:
            max_size, max_index = size, count
        max_event = max(max_event, event)
        count += 1
        p = nxt
    # Skip trailing non-record fields so that "p == len(request)" means "all consumed".
    while p < end:
        tag, q = read_varint(request, p, end)
        if tag >> 3 == 2 and tag & 7 == 2:
            break
        p = skip_field(request, q, end, tag & 7)
    index = bytes(keyblock) if keyblock.strip(b"\0") else b""  # none for a keyless batch
    return bytes(payload), index, count, p, max_event, max_size, max_index


def _record_at(payload: bytes, p: int, end: int) -> tuple[int, int]:
    """Where the message of the record at ``p`` starts and ends (after its tag and length)."""
    if payload[p] != 0x0A:
        raise MalformedPayload(f"expected a message record at byte {p}")
    n, ms = read_varint(payload, p + 1, end)
    if ms + n > end:
        raise MalformedPayload(f"message record at byte {p} runs past the payload")
    return ms, ms + n


def _parse_id(buf: bytes, p: int, end: int) -> tuple[int, int]:
    ledger_id = entry_id = 0
    while p < end:
        tag, p = read_varint(buf, p, end)
        if tag == 0x08:
            ledger_id, p = read_varint(buf, p, end)
        elif tag == 0x10:
            entry_id, p = read_varint(buf, p, end)
        else:
            p = skip_field(buf, p, end, tag & 7)
    return ledger_id, entry_id


def walk(
    payload: bytes, start: int = 0, end: int = -1
) -> list[tuple[int, int, int, bytes | None, int, int]]:
    """Every message record of ``payload[start:end]``: ``(ledger, entry, flags, key,
    record start, record end)``; byte ranges include the record's own tag and length."""
    end = len(payload) if end < 0 else end
    if start < 0 or end > len(payload) or start > end:
        raise MalformedPayload("range outside the payload")
    out: list[tuple[int, int, int, bytes | None, int, int]] = []
    p = start
    while p < end:
        ms, me = _record_at(payload, p, end)
        ledger_id = entry_id = flags = 0
        key: bytes | None = None
        q = ms
        while q < me:
            tag, q = read_varint(payload, q, me)
            field, wire = tag >> 3, tag & 7
            r = skip_field(payload, q, me, wire)
            if field == 1 and wire == 2:
                _n, s = read_varint(payload, q, me)
                ledger_id, entry_id = _parse_id(payload, s, r)
            elif field == 2 and wire == 2:
                _n, s = read_varint(payload, q, me)
                key = bytes(payload[s:r])  # not a view pinning the payload (as in C)
                flags |= HAS_KEY
            elif field == 3 and wire == 2:
                vn, _s = read_varint(payload, q, me)
                flags = (flags & HAS_KEY) | VALUE_PRESENT | (VALUE_NON_EMPTY if vn else 0)
            q = r
        out.append((ledger_id, entry_id, flags, key, p, me))
        p = me
    return out


def _record_id(payload: bytes, ms: int, me: int) -> tuple[int, int]:
    q = ms
    while q < me:
        tag, q = read_varint(payload, q, me)
        r = skip_field(payload, q, me, tag & 7)
        if tag == 0x0A:
            _n, s = read_varint(payload, q, me)
            return _parse_id(payload, s, r)
        q = r
    return 0, 0


def span(
    payload: bytes, lo_ledger: int, lo_entry: int, hi_ledger: int, hi_entry: int, limit: int
) -> tuple[int, int, int, int, int]:
    """The byte range of the records with ``lo <= id <= hi``, at most ``limit`` of them,
    in a payload whose ids ascend: ``(begin, end, count, last ledger, last entry)``;
    count 0 when none is in range. Stops at the first id past ``hi``."""
    end = len(payload)
    lo, hi = (lo_ledger, lo_entry), (hi_ledger, hi_entry)
    begin = stop = -1
    count = 0
    last = (0, 0)
    p = 0
    while p < end and count < limit:
        ms, me = _record_at(payload, p, end)
        ident = _record_id(payload, ms, me)
        if ident > hi:
            break
        if ident >= lo:
            if begin < 0:
                begin = p
            stop, count, last = me, count + 1, ident
        p = me
    if count == 0:
        return 0, 0, 0, 0, 0
    return begin, stop, count, last[0], last[1]


def skip_records(payload: bytes, start: int, count: int) -> int:
    """Byte position after ``count`` message records from ``start`` (or the end)."""
    end = len(payload)
    if start < 0 or start > end:
        raise MalformedPayload("position outside the payload")
    p = start
    while count > 0 and p < end:
        n, ms = read_varint(payload, p + 1, end)
        p = ms + n
        count -= 1
    if p > end:
        raise MalformedPayload("message record runs past the payload")
    return p


def route_records(
    request: bytes, partitions: int, first_keyless: int
) -> tuple[list[bytes], bytes, int]:
    """The Records of ``request`` (PublishRequest field 2) by partition, as Kafka's default
    partitioner places them: keyed ones at ``toPositive(murmur2(key)) % partitions`` (the
    last key field wins, as in ``encode_records``), keyless ones round-robin from
    ``first_keyless``. Returns ``(each partition's records field bytes, order, keyless
    count)``; ``order`` holds, for every record in request order, its partition and its
    index in that partition's part as two native uint32s."""
    if not 1 <= partitions <= 65536:
        raise ValueError("partitions must be 1 to 65536")
    end = len(request)
    parts = [bytearray() for _ in range(partitions)]
    counts = [0] * partitions
    order = array.array("I")
    keyless = first_keyless
    p = 0
    while p < end:
        tag, q = read_varint(request, p, end)
        nxt = skip_field(request, q, end, tag & 7)
        if tag != 0x12:
            p = nxt
            continue
        _n, r = read_varint(request, q, end)
        key: bytes | None = None
        while r < nxt:
            t, r = read_varint(request, r, nxt)
            fe = skip_field(request, r, nxt, t & 7)
            if t == 0x0A:
                _kn, s = read_varint(request, r, nxt)
                key = bytes(request[s:fe])
            r = fe
        if key is not None:
            partition = to_positive(murmur2(key)) % partitions
        else:
            partition = keyless % partitions
            keyless += 1
        parts[partition] += request[p:nxt]
        order.append(partition)
        order.append(counts[partition])
        counts[partition] += 1
        p = nxt
    return [bytes(b) for b in parts], order.tobytes(), keyless - first_keyless


def id_runs(runs: list[tuple[int, int, int]]) -> bytes:
    """Wire bytes of ``repeated MessageId ids = 1`` for (ledger, first entry, count) runs."""
    out = bytearray()
    for ledger_id, first, count in runs:
        for entry_id in range(first, first + count):
            body = id_field(ledger_id, entry_id)
            out += body
    return bytes(out)


__all__ = [
    "HAS_KEY",
    "VALUE_NON_EMPTY",
    "VALUE_PRESENT",
    "MalformedPayload",
    "check_publish",
    "encode_records",
    "id_field",
    "id_runs",
    "put_varint",
    "read_varint",
    "route_records",
    "skip_records",
    "span",
    "walk",
]
