"""The compactors' per-record work, one call per stored batch: the twin of ``_batch_scan.c``.

Each function walks the message records of one checked batch payload (``storage.batch``'s
walk: ids, key flags, keys, byte ranges), hashes keys and probes or fills an offset map
table (the two buffers of ``offset_map.SkimpyOffsetMap``, probed as ``_offset_map_py``
does), and answers for the whole batch, so the callers' loops run once a batch:

- ``digest_keys`` and ``map_digests``: the LogCleaner's offset map, key -> latest offset
  in ``[start, end)``, in two halves (the compiled twin digests batches on several
  threads, and one thread maps them in log order);
- ``survivors``: the LogCleaner's rewrite, the bytes of the records that survive;
- ``digest_positions`` and ``exchange_digested``: phase one, key -> ``position << 1 |
  live`` with the run's figures, in two halves (digests on several threads, the map in
  order on one);
- ``winner_bits``: phase two's selection through phase one's map, as bits;
- ``select_batch``: phase two, the records whose bit is set, framed for a new batch;
- ``live_bitmap``: phase one's map turned into a bitmap of the live winners;
- ``key_digests``: a compacted batch's key digests, stored beside it, and
  ``unsuperseded``: the as_of merge over them (or over the keys, hashed).

A malformed payload raises ``MalformedPayload`` (the whole payload is walked, also when a
function stopped early); the callers name the batch in the ``CorruptData`` they raise.
"""

from __future__ import annotations

import struct
from array import array

from compactlog.compactor.log_cleaner._offset_map_py import FULL, NEW, _find, digest
from compactlog.storage.batch import HAS_KEY, VALUE_NON_EMPTY, VALUE_PRESENT, codec
from compactlog.storage.batch import put_varint as _put_varint

LIVE = HAS_KEY | VALUE_NON_EMPTY  # a keyed record with a non-empty value

Walked = list[tuple[int, int, int, bytes | None, int, int]]


def _exchange(
    hashes: bytearray, offsets: array[int], key_hash: bytes, value: int, can_add: bool
) -> int:
    slot = _find(hashes, offsets, key_hash)
    if slot < 0:
        return FULL
    stored = offsets[slot]
    if not stored:
        if not can_add:
            return FULL
        hashes[slot << 4 : (slot << 4) + 16] = key_hash
    offsets[slot] = value + 1
    return stored - 1 if stored else NEW


def _walk(payload: bytes | memoryview) -> Walked:
    result: Walked = codec.walk(payload)
    return result


def _in_bits(bits: bytearray, first: int, off: int) -> bool:
    return off >= first and (off - first) >> 3 < len(bits)


_DIGESTED = struct.Struct("<q16s")  # digest_keys' entry: offset, key digest


def digest_keys(
    payload: bytes | memoryview,
    start: int,
    end: int,
    hashes: bytearray | None = None,
    offsets: array[int] | None = None,
) -> bytes:
    """For each keyed record with ``start <= offset < end``, in log order, 24 bytes: its
    offset (int64, little-endian) and its key's digest. (The table, when given, is the
    one these entries go to next: the compiled twin prefetches their slots.)"""
    return b"".join(
        _DIGESTED.pack(off, digest(key))
        for _l, off, flags, key, _s, _e in _walk(payload)
        if key is not None and flags & HAS_KEY and start <= off < end
    )


def map_digests(
    hashes: bytearray,
    offsets: array[int],
    digests: bytes,
    size: int,
    max_entries: int,
    bits: bytearray,
    bits_first: int,
) -> tuple[int, int, int]:
    """Map each key of ``digest_keys``' entries, in order, to its offset;
    ``(mapped, size, stop)``: stop is the offset of the first new key that found the map
    full (it and the entries after it are not mapped), or -1. Bit ``offset - bits_first``
    of ``bits`` (where it has one) is set for each offset mapped and cleared for the one
    it replaced, so the bits set are the latest offset of each key: ``survivors`` reads
    them instead of digesting and probing."""
    if len(digests) % _DIGESTED.size:
        raise ValueError("map_digests: 24 bytes an entry")
    mapped = 0
    for off, key_hash in _DIGESTED.iter_unpack(digests):
        old = _exchange(hashes, offsets, key_hash, off, size < max_entries)
        if old == FULL:
            return mapped, size, off
        size += old == NEW
        mapped += 1
        if old >= 0 and _in_bits(bits, bits_first, old):
            bits[(old - bits_first) >> 3] &= ~(1 << ((old - bits_first) & 7)) & 0xFF
        if _in_bits(bits, bits_first, off):
            bits[(off - bits_first) >> 3] |= 1 << ((off - bits_first) & 7)
    return mapped, size, -1


def survivors(
    hashes: bytearray,
    offsets: array[int],
    payload: bytes | memoryview,
    expired: bool,
    bits: bytearray,
    bits_first: int,
    bits_end: int,
) -> tuple[bytes, int, int, int, int, int, int, int]:
    """The records that survive: keyed, not superseded by a later offset of their key in
    the map, and not a tombstone whose batch's delete horizon has passed (``expired``).
    An offset in ``[bits_first, bits_end)`` that ``bits`` covers is the latest of its key
    when its bit is set (``map_digests``); any other is looked up in the table.
    ``(their bytes, kept, first offset, last offset, 1 if a tombstone is kept, records
    read, keyless dropped, tombstones removed)``."""
    parts: list[bytes | memoryview] = []
    view = memoryview(payload)
    covered_end = min(bits_end, bits_first + 8 * len(bits))
    kept = first = last = tomb_kept = keyless = removed = 0
    walked = _walk(payload)
    for _l, off, flags, key, s, e in walked:
        if key is None:
            keyless += 1
            continue
        if bits_first <= off < covered_end:
            bit = off - bits_first
            superseded = not bits[bit >> 3] >> (bit & 7) & 1
        else:
            slot = _find(hashes, offsets, digest(key))
            superseded = off < (offsets[slot] - 1 if slot >= 0 else -1)
        tombstone = not flags & VALUE_PRESENT
        if superseded or (tombstone and expired):
            removed += tombstone
            continue
        tomb_kept |= tombstone
        parts.append(view[s:e])
        first = first if kept else off
        kept += 1
        last = off
    return b"".join(parts), kept, first, last, tomb_kept, len(walked), keyless, removed


def unsuperseded(
    hashes: bytearray,
    offsets: array[int],
    payload: bytes | memoryview,
    retain: bool,
    digests: bytes | memoryview | None = None,
    live_only: bool = False,
) -> tuple[bytes | memoryview, int, int, int, int, int]:
    """The records of one batch of a compacted ledger that a run over it and a later raw
    part keeps, the map holding the raw part's keys: keyed with a non-empty value and a
    key the map does not hold, or keyless when ``retain``. ``(their bytes as framed,
    count, first ledger, first entry, last ledger, last entry)``; when every record is
    kept, ``(payload, count, 0, 0, 0, 0)`` (no copy: the caller has the batch).
    ``digests``: the records' stored key digests (``key_digests``), used instead of
    hashing the keys; with ``live_only`` (a ``LIVE_ONLY`` batch) a batch that keeps all or
    none of its records is answered without walking it."""
    if digests is not None:
        if len(digests) % DIGEST:
            raise ValueError(f"unsuperseded: {DIGEST} bytes a digest")
        stored = [bytes(digests[i : i + DIGEST]) for i in range(0, len(digests), DIGEST)]
        if live_only:
            gone = sum(_held(hashes, offsets, d) for d in stored)
            if gone == 0:
                return payload, len(stored), 0, 0, 0, 0
            if gone == len(stored):
                return b"", 0, 0, 0, 0, 0
    walked = _walk(payload)
    if digests is not None and len(walked) != len(stored):
        raise ValueError(f"unsuperseded: {len(stored)} digests for {len(walked)} records")
    parts: list[bytes | memoryview] = []
    view = memoryview(payload)
    count = fl = fe = ll = le = 0
    for i, (lid, eid, flags, key, s, e) in enumerate(walked):
        if key is not None and flags & HAS_KEY:
            if flags & LIVE != LIVE:
                continue
            if _held(hashes, offsets, stored[i] if digests is not None else digest(key)):
                continue  # the raw part holds the key again
        elif not retain:
            continue
        parts.append(view[s:e])
        if not count:
            fl, fe = lid, eid
        ll, le = lid, eid
        count += 1
    if count and count == len(walked):
        return payload, count, 0, 0, 0, 0
    return b"".join(parts), count, fl, fe, ll, le


def _held(hashes: bytearray, offsets: array[int], key_digest: bytes) -> bool:
    slot = _find(hashes, offsets, key_digest)
    return slot >= 0 and offsets[slot] != 0


DIGEST = 16  # key_digests' bytes a record
_NO_DIGEST = bytes(DIGEST)


def key_digests(payload: bytes | memoryview) -> bytes:
    """For each record of a payload, in order, its key's digest (the offset map's),
    16 zero bytes for a keyless record."""
    return b"".join(
        digest(key) if key is not None and flags & HAS_KEY else _NO_DIGEST
        for _l, _e, flags, key, _s, _e2 in _walk(payload)
    )


_POSITION = struct.Struct("=II16s")  # digest_positions' entry: size, flags, key digest


def digest_positions(payload: bytes | memoryview) -> bytes:
    """For each record of a payload, in order, 24 bytes: its framed size, its flags and
    its key's digest (zeros when it has none)."""
    return b"".join(
        _POSITION.pack(e - s, flags, digest(key) if key is not None else _NO_DIGEST)
        for _l, _e, flags, key, s, e in _walk(payload)
    )


def exchange_digested(
    hashes: bytearray,
    offsets: array[int],
    entries: bytes,
    at: int,
    first: int,
    last: int,
    base: int,
    size: int,
    max_entries: int,
    retain: bool,
) -> tuple[int, int, int, int, int, int, int]:
    """Phase one over ``digest_positions``' entries at positions ``first..last`` of a
    batch whose first record is at position ``at``: each key -> ``(base + position) << 1
    | live``. ``(read, kept, tombstones, keyless, bytes_in, size, stop)``: stop is the
    position of the first key that found the map full (not counted), or -1."""
    if len(entries) % _POSITION.size:
        raise ValueError("exchange_digested: 24 bytes an entry")
    read = kept = tombs = keyless = bytes_in = 0
    for pos, (nbytes, flags, key_hash) in enumerate(_POSITION.iter_unpack(entries), at):
        if pos < first or pos > last:
            continue
        if flags & HAS_KEY:
            live = 1 if flags & VALUE_NON_EMPTY else 0
            value = (base + pos) << 1 | live
            old = _exchange(hashes, offsets, key_hash, value, size < max_entries)
            if old == FULL:
                return read, kept, tombs, keyless, bytes_in, size, pos
            if old == NEW:
                size += 1
                kept += live
            else:
                kept += live - (old & 1)
            tombs += 1 - live
        elif retain:
            kept += 1
        else:
            keyless += 1
        read += 1
        bytes_in += nbytes
    return read, kept, tombs, keyless, bytes_in, size, -1


def winner_bits(
    hashes: bytearray,
    offsets: array[int],
    payload: bytes | memoryview,
    at: int,
    first: int,
    last: int,
    base: int,
    retain: bool,
    tombstones: bool,
    bits: bytearray,
    bits_first: int,
) -> int:
    """Phase two's selection through phase one's map (when no bitmap fits): set bit
    ``position - bits_first`` of each entry at ``first..last`` that is live (or a
    tombstone, when ``tombstones``) and whose key the map holds at exactly
    ``(base + position) << 1 | live``, and of keyless entries when ``retain``; the count
    set."""
    count = 0
    nbits = len(bits)
    for pos, (_l, _e, flags, key, _s, _e2) in enumerate(_walk(payload), at):
        if pos < first or pos > last:
            continue
        if key is not None and flags & HAS_KEY:
            live = 1 if flags & VALUE_NON_EMPTY else 0
            if not (live or tombstones):
                continue
            slot = _find(hashes, offsets, digest(key))
            found = offsets[slot] - 1 if slot >= 0 else -1
            if found != (base + pos) << 1 | live:
                continue
        elif not retain:
            continue
        off = pos - bits_first
        if off < 0 or off >> 3 >= nbits:
            continue
        bits[off >> 3] |= 1 << (off & 7)
        count += 1
    return count


def select_batch(
    payload: bytes | memoryview,
    at: int,
    first: int,
    last: int,
    bits: bytes | bytearray,
    bits_first: int,
    limit: int,
) -> tuple[bytes, int, int, int, int, int, int, int, int]:
    """The records at positions ``first..last`` whose bit ``position - bits_first`` is set,
    at most ``limit`` of them, framed as payload records (``0x0A varint(n)`` + message):
    ``(records, count, message bytes, first ledger, first entry, last ledger, last entry,
    next position, not live)``; next is where a call for more would start, not live the
    records taken that are keyless or tombstones (a batch without any is ``LIVE_ONLY``)."""
    out = bytearray()
    count = body_bytes = fl = fe = ll = le = dead = 0
    pos = at - 1
    nxt = -1
    nbits = len(bits)
    for lid, eid, flags, _k, s, e in _walk(payload):
        pos += 1
        if nxt >= 0 or pos < first or pos > last:
            continue
        off = pos - bits_first
        if off < 0 or off >> 3 >= nbits or not bits[off >> 3] >> (off & 7) & 1:
            continue
        p = s + 1
        while payload[p] & 0x80:
            p += 1
        body = payload[p + 1 : e]
        out.append(0x0A)
        _put_varint(out, len(body))
        out += body
        if not count:
            fl, fe = lid, eid
        ll, le = lid, eid
        count += 1
        body_bytes += len(body)
        dead += flags & LIVE != LIVE
        if count >= limit:
            nxt = pos + 1
    return bytes(out), count, body_bytes, fl, fe, ll, le, pos + 1 if nxt < 0 else nxt, dead


def live_bitmap(offsets: array[int], bits: bytearray, tombstones: bool) -> int:
    """Set bit ``position`` of ``bits`` for every live entry of a phase-one table (stored
    value + 1 = ``(position << 1 | live) + 1``), and every tombstone when ``tombstones``;
    the count set."""
    count = 0
    for stored in offsets:
        if stored and (tombstones or not stored & 1):
            pos = (stored - 1) >> 1
            bits[pos >> 3] |= 1 << (pos & 7)
            count += 1
    return count
