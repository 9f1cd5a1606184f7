"""The module that touches rocksdict (with ``storage.rocks_secondary`` and its options,
``storage.rocks_options``).

Everything else sees ``RocksDB``: bytes in, bytes out, bounded range scans, atomic batches
and our own error types (``storage.rocks_errors``); compaction workers read through a
``SecondaryRocksDB`` and write ``SstWriter`` files the server ingests (their side is
``storage.rocks_secondary``, the only other module that imports rocksdict). Nothing read back is
trusted (checksums verified, every scan's end checked, the WAL replayed in
absolute-consistency mode but for a crash's torn last record, ``storage.wal_tail``), and a
write the disk refused is answered with its cause until
the store reopens (``storage.store_recovery``). docs/architecture.md ("LEDGER topics: the
RocksDB layout" and "Data integrity") tells the long story.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
from pathlib import Path

from rocksdict import (
    AccessType,
    IngestExternalFileOptions,
    Rdict,
    WriteBatch,
    WriteOptions,
)

from compactlog.errors import (
    CompactlogError,
    CorruptData,
    StorageUnavailable,
    StoreClosed,
    StoreLocked,
)
from compactlog.storage import file_limits
from compactlog.storage.rocks_errors import is_locked, open_error, wrap_error
from compactlog.storage.rocks_options import TOLERATE_TAIL, store_options
from compactlog.storage.rocks_reads import RocksReads
from compactlog.storage.store_recovery import StoreFault, is_fault
from compactlog.storage.wal_tail import SyncedMark, TornTail, crash_tail

log = logging.getLogger(__name__)


class Batch:
    """An atomic group of writes; applied whole by ``RocksDB.write`` or not at all."""

    __slots__ = ("_wb", "ops", "put_many")

    def __init__(self) -> None:
        self._wb = WriteBatch(raw_mode=True)
        self.ops = 0
        # Hot loops call the batch's own put: no per-call wrapper cost.
        self.put_many = self._wb.put

    def put(self, key: bytes, value: bytes) -> None:
        self._wb.put(key, value)
        self.ops += 1

    def delete(self, key: bytes) -> None:
        self._wb.delete(key)
        self.ops += 1

    def delete_range(self, begin: bytes, end: bytes) -> None:
        """Delete keys in [begin, end)."""
        self._wb.delete_range(begin, end)
        self.ops += 1

    def take(self, staged: Staged) -> None:
        """Add ``staged``'s writes, in their order."""
        wb = self._wb
        for key, value, end in staged.writes:
            if value is not None:
                wb.put(key, value)
            elif end is None:
                wb.delete(key)
            else:
                wb.delete_range(key, end)
        self.ops += staged.ops


class Staged:
    """Writes held back from a shared ``Batch`` until their request is whole (rocksdict's
    WriteBatch has no save point): ``Batch.take`` adds them, or they are dropped. The
    methods are ``Batch``'s, so one builder fills either."""

    __slots__ = ("ops", "writes")

    def __init__(self) -> None:
        self.writes: list[tuple[bytes, bytes | None, bytes | None]] = []
        self.ops = 0

    def put(self, key: bytes, value: bytes) -> None:
        self.writes.append((key, value, None))
        self.ops += 1

    def delete(self, key: bytes) -> None:
        self.writes.append((key, None, None))
        self.ops += 1

    def delete_range(self, begin: bytes, end: bytes) -> None:
        self.writes.append((begin, None, end))
        self.ops += 1


Writes = Batch | Staged  # what a write builder fills


class RocksDB(RocksReads):
    """A RocksDB directory opened read-write by this process (or read-only, for tools)."""

    def __init__(
        self, path: Path, wal_recovery: str = "absolute-consistency", read_only: bool = False
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._wal_recovery = wal_recovery
        # The crash's torn WAL record the last open read past (``wal_tail``), else None.
        self.torn_tail: TornTail | None = None
        self._db: Rdict | None = self._open()
        # Past every acknowledged write: how an open tells a crash's torn tail (wal_tail).
        self._mark = None if read_only else self._open_mark()
        self._mark_failed = ""  # the last cause the mark's write failed for, logged once
        self.fault = StoreFault(path)
        self._sync_opts = WriteOptions()
        self._sync_opts.sync = True
        self._close_lock = threading.Lock()

    def _open_mark(self) -> SyncedMark | None:
        """The WAL's synced mark; None (logged) where it cannot be opened: the store
        serves on, and its next open tells a crash's torn tail by less."""
        try:
            return SyncedMark(self.path)
        except OSError as exc:
            log.warning("RocksDB store %s: the WAL's synced mark not opened: %s", self.path, exc)
            return None

    def _open(self) -> Rdict:
        """Open in the configured mode; where that refuses a WAL and its one flaw is a
        crash's unsynced last record (``wal_tail.crash_tail``), open again dropping it."""
        self.torn_tail = None
        try:
            return self._open_as(self._wal_recovery)
        except Exception as exc:
            if is_locked(exc):
                raise StoreLocked(f"{self.path} is in use by another process") from None
            error = open_error(self.path, exc)
        tail = None
        if isinstance(error, CorruptData) and self._wal_recovery == "absolute-consistency":
            tail = crash_tail(self.path)
        if tail is None:
            raise error
        try:
            db = self._open_as(TOLERATE_TAIL)
        except Exception:
            raise error from None
        level = logging.INFO if self.read_only else logging.WARNING
        log.log(level, "RocksDB store %s: %s", self.path, tail.describe(not self.read_only))
        self.torn_tail = tail
        return db

    def _open_as(self, wal_recovery: str) -> Rdict:
        # The column family's options given, not loaded from the store's OPTIONS file
        # (rocksdict's way with an existing store): a store made before keeps its tables
        # and writes new ones as ``table_options`` says.
        opts = store_options(wal_recovery)
        families = {"default": opts}
        if self.read_only:
            access = AccessType.read_only(False)
            return Rdict(str(self.path), opts, families, access_type=access)
        return Rdict(str(self.path), opts, families)

    def _failed(self, exc: Exception) -> CompactlogError:
        """rocksdict's error as ours; a fault that leaves RocksDB refusing writes is kept,
        so later writes wait for ``reopen`` (``storage.store_recovery``)."""
        error = wrap_error(exc, path=self.path)
        if is_fault(error) and self.fault is not None:
            self.fault.fail(error)
        return error

    def _writable(self) -> None:
        """Before a write: nothing to do, or the store's fault (again), or a reopen now
        that the probe says the cause is gone."""
        fault = self.fault
        if fault is None or fault.error is None:
            return
        with self._close_lock:
            if fault.error is not None and fault.ready():
                self.reopen()

    def reopen(self) -> None:
        """Close the store and open it again (RocksDB's way out of a background error);
        the caller holds ``_close_lock``. Reads meanwhile answer STORAGE_UNAVAILABLE."""
        old, self._db = self._db, None
        if old is not None:
            with contextlib.suppress(Exception):  # a store in its fault may fail its close
                old.close()
            del old
            _collect_holders(self.path)
        self._db = self._open()
        assert self.fault is not None
        self.fault.cleared()

    def write(self, batch: Batch, sync: bool = False) -> None:
        self._writable()
        try:
            if sync:
                # Its sequences start past ``before``: every record up to ``before`` plus
                # its count was written before its own, so its fsync covered them (the
                # latest sequence after it may be another writer's, not yet synced).
                covered = self.db.latest_sequence_number() + batch._wb.len()
                self.db.write(batch._wb, self._sync_opts)
                self._synced(covered)
            else:
                self.db.write(batch._wb)
        except (StoreClosed, StorageUnavailable):
            raise
        except Exception as exc:
            raise self._failed(exc) from None

    def put(self, key: bytes, value: bytes) -> None:
        batch = Batch()
        batch.put(key, value)
        self.write(batch)

    def sync_wal(self) -> None:
        """fsync the WAL: everything written before this call survives a power cut.

        rocksdict releases the GIL here, so other threads keep serving while it waits.
        """
        self._writable()
        try:
            written = self.db.latest_sequence_number()  # every write up to it is whole
            self.db.flush_wal(True)
        except (StoreClosed, StorageUnavailable):
            raise
        except Exception as exc:
            raise self._failed(exc) from None
        self._synced(written)

    def _synced(self, seq: int) -> None:
        """The mark past every write up to ``seq``, before any of them is answered. The
        mark only tells damage from a crash at the next open: a failure to write it
        fails no write, it is logged (and that open tells less)."""
        if self._mark is None:
            return
        try:
            self._mark.advance(seq)
        except OSError as exc:
            if str(exc) != self._mark_failed:  # once a cause, not once a sync
                log.warning(
                    "RocksDB store %s: the WAL's synced mark not written: %s", self.path, exc
                )
            self._mark_failed = str(exc)
        else:
            self._mark_failed = ""

    def flush(self) -> None:
        """Write the memtable to a table file (SST) and wait for it."""
        self._writable()
        try:
            self.db.flush(True)
        except (StoreClosed, StorageUnavailable):
            raise
        except Exception as exc:
            raise self._failed(exc) from None

    def ingest(self, sst: Path, *more: Path) -> None:
        """Add the keys of SST files (``SstWriter``; key ranges apart) in one atomic step,
        moving the files into the store. A key range no memtable key falls in (a new
        ledger's) needs no flush, so writers are held up only for the moment RocksDB
        assigns a sequence number."""
        opts = IngestExternalFileOptions()
        opts.set_move_files(True)
        self._writable()
        try:
            self.db.ingest_external_file([str(sst), *map(str, more)], opts)
        except (StoreClosed, StorageUnavailable):
            raise
        except Exception as exc:
            raise self._failed(exc) from None

    def compact_range(self, begin: bytes, end: bytes) -> None:
        try:
            self.db.compact_range(begin, end)
        except Exception as exc:
            raise wrap_error(exc, path=self.path) from None

    def close(self) -> None:
        """Flush and release the LOCK (live iterators keep it: collect them first)."""
        with self._close_lock:
            if self._db is None:
                return
            db, self._db = self._db, None
            try:
                if not self.read_only and (self.fault is None or self.fault.error is None):
                    db.flush_wal(True)
                db.close()
            except Exception as exc:
                if self.fault is None or self.fault.error is None:
                    raise wrap_error(exc, "closing", path=self.path) from None
                # a store in its fault state: every acknowledged write was synced before
                # the fault, and what failed was never acknowledged; nothing more to save
            finally:
                del db
                if self._mark is not None:
                    self._mark.close()
                _collect_holders(self.path)


def _collect_holders(path: Path) -> None:
    """After a store's close: collect the garbage that still holds it (an iterator in a
    reference cycle keeps the store, its LOCK and its files open), but only when its files
    are still held; a full collection costs tens of milliseconds in a large process."""
    if file_limits.holds_under(path):
        gc.collect()
