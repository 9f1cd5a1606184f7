"""The key digests a compacted ledger stores beside its batches: made when a run writes
a batch, read back by a past view's merge (``as_of``) in step with the batches.

Phase two writes each COMPACTED batch with its messages' key digests (``key_digests``:
the offset map's SipHash-2-4-128, 16 bytes a message), in the server's WriteBatch
(``LedgerStoreCompactionStorage``) or, from a compaction worker, into a second SST file
ingested with the batches' (``digests_sst``); ``storage.compacted_digests`` frames them
with a CRC and the batch's own CRC. A merge past the horizon then probes the raw tail's
offset map with the stored digests instead of hashing the ledger's keys again (issue 29:
that hashing was half of what a past view cost above a compacted read and a phase one of
the tail). A record that is missing (a ledger written before digests were stored) or
does not check (``StoredDigests.of``) is not used: the merge hashes that batch's keys, as
before, so the answer is the same either way, and damage is logged once a view.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from compactlog.compactor.log_cleaner.batch_scan import key_digests
from compactlog.errors import CorruptData
from compactlog.storage import batch as codec
from compactlog.storage.compacted_digests import checked
from compactlog.storage.ledger_scans import LedgerScans

log = logging.getLogger(__name__)

__all__ = ["StoredDigests", "digests_sst", "key_digests", "packed_digests"]


def packed_digests(data: bytes, where: str) -> bytes:
    """The key digests of a packed COMPACTED batch's messages."""
    return key_digests(codec.payload_of(data, codec.check(data, where)), where)


def digests_sst(sst: Path) -> Path:
    """The worker's second SST file, of the digest records, beside ``sst``."""
    return sst.with_name(sst.stem + ".digests.sst")


class StoredDigests:
    """A compacted ledger's digest records, read in step with its batches, in order."""

    def __init__(self, scans: LedgerScans, ledger_id: int) -> None:
        self.ledger_id = ledger_id
        self._records: Iterator[tuple[int, bytes]] = scans.digest_records(ledger_id)
        self.damaged = 0  # records that did not check (their batches were hashed)
        self._next = self._read()

    def _read(self) -> tuple[int, bytes] | None:
        """The next record; None at the end, or where the store cannot read the range
        (an unreadable block: the rest of the batches are hashed)."""
        try:
            return next(self._records, None)
        except CorruptData as exc:
            self._damage(exc)
            self._records = iter(())
            return None

    def _damage(self, exc: CorruptData) -> None:
        if not self.damaged:
            log.warning("%s; the keys of the batch are hashed instead", exc)
        self.damaged += 1

    def of(self, at: int, data: bytes | memoryview, count: int) -> memoryview | None:
        """The checked digests of the batch ``data`` at position ``at``; None when it has
        no record, or one that does not check (logged: ``compactlog check`` names it)."""
        while self._next is not None and self._next[0] < at:
            self._next = self._read()
        if self._next is None or self._next[0] != at:
            return None
        where = f"compacted ledger {self.ledger_id} key digests at {at}"
        try:
            return checked(self._next[1], data, count, where)
        except CorruptData as exc:
            self._damage(exc)
            return None
