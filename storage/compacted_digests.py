"""Key digests stored beside a compacted ledger's batches, so a past view reads them
instead of hashing every key of the ledger again (``compactor/two_phase/as_of.py``).

A compacted ledger's batch at ``E ledger position`` has one digest record, written with
it (the same WriteBatch in the server, the same ingest from a worker's SST files)::

    b"D" ledger_id:u64 position:u64 -> digest record

    offset size  field      type
       0    4   crc        u32  CRC-32C (Castagnoli) of bytes 4 .. end
       4    4   batch_crc  u32  the crc field of the batch at E ledger position
       8    4   count      u32  the batch's messages
      12  16*n  digests         each message's key digest in order (the offset map's
                                SipHash-2-4-128, ``batch_scan.key_digests``); 16 zero
                                bytes for a keyless message

The storage layer only frames and checks records; the digests are the compactor's. A
record is used only when its CRC, its batch's CRC and its count match the batch read
(``checked``): anything else is damage, and the reader hashes the batch's keys as it
does for ledgers written before digests were stored, so a damaged record costs time,
never a wrong answer. ``compactlog check`` reports a damaged, missing or stray record.
Digest records go with their ledger (``LedgerStore._delete_ledger_ops``).
"""

from __future__ import annotations

import struct
from collections.abc import Container
from typing import Protocol

import crc32c

from compactlog.errors import CorruptData
from compactlog.storage import keys
from compactlog.storage.codec import ROLE_RAW, LedgerMeta
from compactlog.storage.ledger_scans import ledgers_under
from compactlog.storage.rocks_reads import RocksReads

DIGEST = 16
_HEAD = struct.Struct(">III")  # crc, batch_crc, count
_crc = crc32c.crc32c


def batch_crc(data: bytes | memoryview) -> int:
    """The crc field of a stored batch (``storage.batch``'s header, bytes 4 .. 8)."""
    return int.from_bytes(data[4:8], "big")


def digest_record(data: bytes | memoryview, count: int, digests: bytes) -> bytes:
    """The digest record of the stored batch ``data`` of ``count`` messages."""
    if len(digests) != DIGEST * count:
        raise ValueError(f"{len(digests)} digest bytes for {count} messages")
    body = _HEAD.pack(0, batch_crc(data), count)[4:] + digests
    return _crc(body).to_bytes(4, "big") + body


def checked(record: bytes, data: bytes | memoryview, count: int, where: str) -> memoryview:
    """The digests of a record that belongs to the batch ``data`` of ``count`` messages;
    ``CorruptData`` naming what does not match."""
    return checked_for(record, batch_crc(data), count, where)


def checked_for(record: bytes, crc_of_batch: int, count: int, where: str) -> memoryview:
    """``checked`` for the batch whose crc field is ``crc_of_batch``."""
    if len(record) < _HEAD.size:
        raise CorruptData(f"{where}: a digest record of {len(record)} bytes", position=where)
    crc, of_batch, n = _HEAD.unpack_from(record)
    view = memoryview(record)
    if _crc(view[4:]) != crc:
        raise CorruptData(f"{where}: digest record CRC-32C mismatch", position=where)
    if of_batch != crc_of_batch or n != count:
        raise CorruptData(f"{where}: the digest record is not its batch's", position=where)
    if len(record) != _HEAD.size + DIGEST * n:
        raise CorruptData(f"{where}: {len(record)} bytes for {n} digests", position=where)
    return view[_HEAD.size :]


class Report(Protocol):
    def problem(self, where: str, what: str) -> None: ...
    def note(self, where: str, what: str) -> None: ...
    def count(self, what: str, n: int = 1) -> None: ...


def check_ledger_digests(
    db: RocksReads, meta: LedgerMeta, batches: dict[int, tuple[int, int]] | None, report: Report
) -> None:
    """``compactlog check``'s part: every batch of a compacted ledger has one digest record
    that checks (``batches``: position -> (crc field, count); None when they could not be
    read, which is reported already); a ledger with none at all was written before
    digests were stored (a note); a raw ledger has none."""
    lid = meta.ledger_id
    where = f"topic {meta.topic!r} ledger {lid}"
    records = list(db.scan(*keys.digest_range(lid)))
    report.count("key digest records", len(records))
    if meta.role == ROLE_RAW:
        if records:
            report.problem(f"{where} key digests", "a raw ledger has key digests")
        return
    if batches is None:
        return
    if not records:
        if batches:
            report.note(
                where, "no key digests (written before they were stored): as_of hashes its keys"
            )
        return
    for key, value in records:
        at = keys.entry_ids(key)[1]
        batch = batches.pop(at, None)
        if batch is None:
            report.problem(f"{where} key digests at {at}", "no batch starts there")
            continue
        here = f"{where} key digests at {at}"
        try:
            checked_for(value, *batch, here)
        except CorruptData as exc:
            report.problem(here, str(exc).removeprefix(f"{here}: "))
    for at in sorted(batches):
        report.problem(
            f"{where} entry {at}", "the batch has no key digests (as_of hashes its keys)"
        )


def check_stray_digests(db: RocksReads, metas: Container[int], report: Report) -> None:
    """Digest records of ledgers that have no meta (nothing can reach them)."""
    ledger_of = keys.entry_ids
    for lid in ledgers_under(db, keys.digest_all(), lambda k: ledger_of(k)[0], keys.digest_range):
        if lid not in metas:
            report.problem(f"ledger {lid}", "key digests stored without a ledger meta")
