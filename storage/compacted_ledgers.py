"""Writing compacted ledgers: the part of ``LedgerStore`` a compaction's commit path uses.

A compacted ledger is made outside its topic's raw list (``create_ledger``), filled by
COMPACTED batches in order (``append_entries`` / ``append_compacted``, in the server) or
in one step from a worker's SST file (``ingest_ledger``), then sealed; only a commit of
the ``__compaction`` cursor makes it the topic's view.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from compactlog.errors import StorageError
from compactlog.storage import keys
from compactlog.storage.codec import ROLE_COMPACTED, LedgerMeta
from compactlog.storage.compacted_digests import digest_record
from compactlog.storage.ledger_append import compacted_batch, live_only
from compactlog.storage.ledger_scans import LedgerScans
from compactlog.storage.rocks import Batch, RocksDB


class CompactedLedgers(LedgerScans):
    """Base of LedgerStore: needs its RocksDB, its ledgers and a way to allocate one."""

    db: RocksDB
    _ledgers: dict[int, LedgerMeta]

    def _allocate_ledger(self, topic: str, role: int) -> LedgerMeta:
        raise NotImplementedError

    def create_ledger(self, topic: str, role: int = ROLE_COMPACTED) -> LedgerMeta:
        """A ledger outside the topic's raw list (a compacted ledger being written)."""
        self.topic(topic)
        meta = self._allocate_ledger(topic, role)
        self.db.put(keys.ledger_meta_key(meta.ledger_id), meta.encode())
        return meta

    def append_entries(
        self, ledger_id: int, entries: Sequence[tuple[int, bytes, bytes | None, int]]
    ) -> None:
        """Append ``(position, Message bytes with the original id, key, flags)`` to a
        compacted ledger as one COMPACTED batch; positions continue the ledger's."""
        meta = self._ledgers[ledger_id]
        if meta.sealed:
            raise StorageError(f"ledger {ledger_id} is sealed")
        if not entries:
            return
        first = entries[0][0]
        if first != meta.entries or entries[-1][0] != first + len(entries) - 1:
            raise StorageError(f"ledger {ledger_id}: appends must continue at {meta.entries}")
        data = compacted_batch(
            ledger_id, [data for _pos, data, _key, _flags in entries], live_only(entries)
        )
        self.append_compacted(ledger_id, first, len(entries), data)

    def append_compacted(
        self, ledger_id: int, first: int, count: int, data: bytes, digests: bytes | None = None
    ) -> None:
        """Append one packed COMPACTED batch of ``count`` entries at position ``first``;
        ``digests``: its messages' key digests, stored beside it in the same write
        (``storage.compacted_digests``)."""
        meta = self._ledgers[ledger_id]
        if meta.sealed:
            raise StorageError(f"ledger {ledger_id} is sealed")
        if first != meta.entries or count < 1:
            raise StorageError(f"ledger {ledger_id}: appends must continue at {meta.entries}")
        meta.entries += count
        meta.bytes += len(data)
        batch = Batch()
        batch.put(keys.entry_key(ledger_id, first), data)
        if digests is not None:
            batch.put(keys.digest_key(ledger_id, first), digest_record(data, count, digests))
        batch.put(keys.ledger_meta_key(ledger_id), meta.encode())
        self.db.write(batch)

    def seal_ledger(self, ledger_id: int) -> None:
        meta = self._ledgers[ledger_id]
        meta.sealed = True
        batch = Batch()
        batch.put(keys.ledger_meta_key(ledger_id), meta.encode())
        self.db.write(batch, sync=True)

    def ingest_ledger(
        self,
        ledger_id: int,
        sst: Path | None,
        entries: int,
        nbytes: int,
        digests_sst: Path | None = None,
    ) -> None:
        """Fill an empty compacted ledger from an SST file of its batches (written by a
        compaction worker: keys ``E ledger position`` only) and seal it; ``digests_sst``:
        a second file of their digest records (keys ``D ledger position``), ingested in
        the same step.

        The files are ingested in one step; the first and last batch are read back and
        checked before the ledger is sealed with the worker's counts, so a short or
        foreign file never becomes a ledger a commit could point at.
        """
        meta = self._ledgers.get(ledger_id)
        if meta is None or meta.sealed or meta.entries or meta.role != ROLE_COMPACTED:
            raise StorageError(f"ledger {ledger_id} is not an empty compacted ledger")
        if (sst is None) != (entries == 0):
            raise StorageError(f"ledger {ledger_id}: {entries} entries, SST file {sst}")
        if sst is not None:
            self.db.ingest(sst, *([digests_sst] if digests_sst is not None else []))
            first, last = self.batch_at(ledger_id, 0), self.batch_at(ledger_id, entries - 1)
            if first is None or first[0] != 0 or last is None or last[2].count + last[0] != entries:
                raise StorageError(f"ledger {ledger_id}: the ingested file lacks its batches")
        meta.entries, meta.bytes = entries, nbytes
        self.seal_ledger(ledger_id)
