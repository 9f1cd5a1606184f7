"""The compactors' per-batch scans over a ``SkimpyOffsetMap``: one call per stored batch.

The LogCleaner (offset map, survivors), phase one (latest position per key) and phase two
(select the winners through the map, or copy those of a bitmap) each walk every record of
every batch they read; here each batch is one call into the compiled twin
(``_batch_scan.c``) when it was built, else into its pure-Python twin
(``_batch_scan_py.py``), with identical results (the tests run both; ``COMPACTLOG_NO_EXT=1``
picks the pure one, as for the batch codec). A malformed payload is ``CorruptData`` naming
the batch (``where``).
"""

from __future__ import annotations

from array import array
from typing import Protocol, cast

from compactlog.compactor.log_cleaner import _batch_scan_py
from compactlog.compactor.log_cleaner.offset_map import SkimpyOffsetMap
from compactlog.errors import CorruptData
from compactlog.storage.batch import MalformedPayload
from compactlog.twins import load_twin

Buffer = bytes | bytearray | memoryview
# survivors: (record bytes, kept, first, last, tombstone kept, read, keyless, tombstones)
Survived = tuple[bytes, int, int, int, int, int, int, int]
# exchange_digested: (read, kept, tombstones, keyless, bytes_in, size, stop)
Exchanged = tuple[int, int, int, int, int, int, int]
# select_batch: (records, count, message bytes, first ledger, first entry, last ledger,
# last entry, next position, not live)
Selected = tuple[bytes, int, int, int, int, int, int, int, int]
# unsuperseded: (records, count, first ledger, first entry, last ledger, last entry)
Kept = tuple[Buffer, int, int, int, int, int]


class ScanTwin(Protocol):
    """The functions both twins provide (``_batch_scan_py`` documents them)."""

    def digest_keys(
        self,
        payload: Buffer,
        start: int,
        end: int,
        hashes: bytearray | None = None,
        offsets: array[int] | None = None,
    ) -> bytes: ...

    def map_digests(
        self,
        hashes: bytearray,
        offsets: array[int],
        digests: bytes,
        size: int,
        max_entries: int,
        bits: bytearray,
        bits_first: int,
    ) -> tuple[int, int, int]: ...

    def survivors(
        self,
        hashes: bytearray,
        offsets: array[int],
        payload: Buffer,
        expired: bool,
        bits: bytearray,
        bits_first: int,
        bits_end: int,
    ) -> Survived: ...

    def digest_positions(self, payload: Buffer) -> bytes: ...

    def exchange_digested(
        self,
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
    ) -> Exchanged: ...

    def select_batch(
        self,
        payload: Buffer,
        at: int,
        first: int,
        last: int,
        bits: Buffer,
        bits_first: int,
        limit: int,
    ) -> Selected: ...

    def live_bitmap(self, offsets: array[int], bits: bytearray, tombstones: bool) -> int: ...

    def unsuperseded(
        self,
        hashes: bytearray,
        offsets: array[int],
        payload: Buffer,
        retain: bool,
        digests: Buffer | None = None,
        live_only: bool = False,
    ) -> Kept: ...

    def key_digests(self, payload: Buffer) -> bytes: ...

    def winner_bits(
        self,
        hashes: bytearray,
        offsets: array[int],
        payload: Buffer,
        at: int,
        first: int,
        last: int,
        base: int,
        retain: bool,
        tombstones: bool,
        bits: bytearray,
        bits_first: int,
    ) -> int: ...


_module, COMPILED = load_twin("compactlog.compactor.log_cleaner._batch_scan", _batch_scan_py)
twin = cast(ScanTwin, _module)


NO_BITS = bytearray()  # a pass that keeps no bitmap of the latest offsets
DIGEST_ENTRY = 24  # bytes of one ``digest_keys`` entry: offset, key digest


def digest_keys(
    payload: Buffer, start: int, end: int, where: str, near: SkimpyOffsetMap | None = None
) -> bytes:
    """The first half of the cleaner's ``put`` over one batch: each keyed record's offset
    and key digest (24 bytes), for ``start <= offset < end``, in log order. The compiled
    twin runs without the GIL, so threads digest batches side by side; ``near``: the map
    this thread puts them into next, whose slots are then prefetched."""
    try:
        if near is None:
            return twin.digest_keys(payload, start, end)
        hashes, offsets, _slots = near.table()
        return twin.digest_keys(payload, start, end, hashes, offsets)
    except MalformedPayload as exc:
        raise CorruptData(f"{where}: {exc}", position=where) from None


def map_digests(
    m: SkimpyOffsetMap, digests: bytes, latest: bytearray = NO_BITS, bits_first: int = 0
) -> tuple[int, int]:
    """The second half: map each key of ``digest_keys``' entries to its offset, in order;
    ``(keys mapped, offset of the first key that did not fit or -1)``; ``m.size``
    follows. ``latest``, a bitmap of the offsets from ``bits_first`` on, is kept with a
    bit set for each key's latest offset mapped so far. A map ``fit`` lets grow makes
    room for every entry first (``make_room``)."""
    m.make_room(len(digests) // DIGEST_ENTRY)
    hashes, offsets, _slots = m.table()
    mapped, m.size, stop = twin.map_digests(
        hashes, offsets, digests, m.size, m.max_entries, latest, bits_first
    )
    return mapped, stop


def survivors(
    m: SkimpyOffsetMap,
    payload: Buffer,
    expired: bool,
    where: str,
    latest: bytearray = NO_BITS,
    mapped: tuple[int, int] = (0, 0),
) -> Survived:
    """The records of one batch that survive cleaning against the map (``_batch_scan_py``);
    an offset in ``mapped`` (``[first, end)``, the offsets the map took) is looked up in
    ``latest`` (``map_digests``', bit 0 for ``first``) instead of being digested and
    probed."""
    hashes, offsets, _slots = m.table()
    try:
        return twin.survivors(hashes, offsets, payload, expired, latest, *mapped)
    except MalformedPayload as exc:
        raise CorruptData(f"{where}: {exc}", position=where) from None


def digest_positions(payload: Buffer, where: str) -> bytes:
    """Phase one's first half over one batch: each record's size, flags and key digest
    (``_batch_scan_py.digest_positions``; the compiled twin leaves the GIL, so threads
    digest batches side by side)."""
    try:
        return twin.digest_positions(payload)
    except MalformedPayload as exc:
        raise CorruptData(f"{where}: {exc}", position=where) from None


def exchange_digested(
    m: SkimpyOffsetMap,
    entries: bytes,
    at: int,
    first: int,
    last: int,
    base: int,
    retain: bool,
) -> Exchanged:
    """Its second half, in order (``_batch_scan_py.exchange_digested``); ``m.size``
    follows."""
    hashes, offsets, _slots = m.table()
    out = twin.exchange_digested(
        hashes, offsets, entries, at, first, last, base, m.size, m.max_entries, retain
    )
    m.size = out[5]
    return out


def select_batch(
    payload: Buffer,
    at: int,
    first: int,
    last: int,
    bits: Buffer,
    bits_first: int,
    limit: int,
    where: str,
) -> Selected:
    """Phase two over one batch (``_batch_scan_py.select_batch``)."""
    try:
        return twin.select_batch(payload, at, first, last, bits, bits_first, limit)
    except MalformedPayload as exc:
        raise CorruptData(f"{where}: {exc}", position=where) from None


def unsuperseded(
    m: SkimpyOffsetMap,
    payload: Buffer,
    retain: bool,
    where: str,
    digests: Buffer | None = None,
    live_only: bool = False,
) -> Kept:
    """A compacted batch's records a merge with a later raw part keeps, ``m`` mapping the
    raw part's keys (``_batch_scan_py.unsuperseded``; the payload itself when it keeps
    them all); ``digests``: the batch's stored key digests, checked by the caller, used
    instead of hashing its keys (``live_only``: the batch is ``LIVE_ONLY``)."""
    hashes, offsets, _slots = m.table()
    try:
        return twin.unsuperseded(hashes, offsets, payload, retain, digests, live_only)
    except MalformedPayload as exc:
        raise CorruptData(f"{where}: {exc}", position=where) from None
    except ValueError as exc:  # digests that do not fit the batch's records
        raise CorruptData(f"{where} key digests: {exc}", position=where) from None


def key_digests(payload: Buffer, where: str) -> bytes:
    """Each record's key digest (16 bytes, the offset map's; zeros for a keyless record)
    of one batch (``_batch_scan_py.key_digests``): what a compacted ledger stores beside
    the batch, so that a past view's merge probes them instead of hashing the keys."""
    try:
        return twin.key_digests(payload)
    except MalformedPayload as exc:
        raise CorruptData(f"{where}: {exc}", position=where) from None


def live_bitmap(m: SkimpyOffsetMap, bits: bytearray, tombstones: bool = False) -> int:
    """Phase one's live winners (and winning tombstones when ``tombstones``: a run that
    may keep them) as bits of ``bits`` (``_batch_scan_py.live_bitmap``)."""
    return twin.live_bitmap(m.table()[1], bits, tombstones)


def winner_bits(
    m: SkimpyOffsetMap,
    payload: Buffer,
    at: int,
    first: int,
    last: int,
    base: int,
    retain: bool,
    tombstones: bool,
    bits: bytearray,
    where: str,
) -> int:
    """Phase two's winners of one batch through the map, as bits ``position - first``
    (``_batch_scan_py.winner_bits``)."""
    hashes, offsets, _slots = m.table()
    try:
        return twin.winner_bits(
            hashes, offsets, payload, at, first, last, base, retain, tombstones, bits, first
        )
    except MalformedPayload as exc:
        raise CorruptData(f"{where}: {exc}", position=where) from None
