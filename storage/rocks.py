"""The module that touches rocksdict (with ``storage.rocks_secondary``).

Everything else sees ``RocksDB``: bytes in, bytes out, bounded range scans, atomic batches
and our own error types (``storage.rocks_errors``); compaction workers read through a
``SecondaryRocksDB`` and write ``SstWriter`` files the server ingests (their side is
``storage.rocks_secondary``, the only other module that imports rocksdict). Nothing read back is
trusted (checksums verified, every scan's end checked, the WAL replayed in
absolute-consistency mode), and a write the disk refused is answered with its cause until
the store reopens (``storage.store_recovery``). docs/architecture.md ("LEDGER topics: the
RocksDB layout" and "Data integrity") tells the long story.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from pathlib import Path

from rocksdict import (
    AccessType,
    DBCompressionType,
    DBRecoveryMode,
    IngestExternalFileOptions,
    Options,
    Rdict,
    RdictIter,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from compactlog.errors import (
    CompactlogError,
    StorageError,
    StorageUnavailable,
    StoreClosed,
    StoreLocked,
)
from compactlog.storage import file_limits
from compactlog.storage.rocks_errors import is_locked, open_error, wrap_error
from compactlog.storage.store_recovery import StoreFault, is_fault

WAL_RECOVERY_MODES = ("absolute-consistency", "point-in-time")


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


def table_options() -> Options:
    """Options of every table file written here: the store's own (its flushes and
    compactions) and a compaction worker's SSTs. Blocks are LZ4-compressed: every raw
    Read and both phases of a run decompress each block they read, and LZ4 does that
    several times faster than RocksDB's default Snappy at about the same size (a
    worker's run spent an eighth of its CPU in Snappy). Files written before keep their
    own compression: a table names it, so a store of both reads as one."""
    opts = Options(raw_mode=True)
    opts.set_compression_type(DBCompressionType.lz4())
    return opts


def _options(wal_recovery: str) -> Options:
    if wal_recovery not in WAL_RECOVERY_MODES:
        raise StorageError(f"unknown WAL recovery mode {wal_recovery!r}")
    opts = table_options()
    opts.create_if_missing(True)
    opts.set_max_background_jobs(2)
    opts.increase_parallelism(2)
    opts.set_paranoid_checks(True)
    if file_limits.BUDGET is not file_limits.UNLIMITED:  # a server: its share of the limit
        opts.set_max_open_files(file_limits.BUDGET.table_files)
    mode = (
        DBRecoveryMode.absolute_consistency()
        if wal_recovery == "absolute-consistency"
        else DBRecoveryMode.point_in_time()
    )
    opts.set_wal_recovery_mode(mode)
    return opts


class RocksReads:
    """The read side shared by the primary and a secondary instance."""

    path: Path
    _db: Rdict | None

    fault: StoreFault | None = None

    @property
    def db(self) -> Rdict:
        if self._db is None:
            if self.fault is not None and self.fault.error is not None:
                raise StorageUnavailable(
                    f"the store {self.path} is being reopened after: {self.fault.error}",
                    path=self.path,
                )
            raise StoreClosed("the store is closed")
        return self._db

    @staticmethod
    def _read_options(upper: bytes | None = None, fill_cache: bool = True) -> ReadOptions:
        ro = ReadOptions()
        ro.set_verify_checksums(True)
        if upper is not None:
            ro.set_iterate_upper_bound(upper)
        if not fill_cache:  # rocksdict's stub leaves out the flag its binding takes (v)
            ro.fill_cache(False)  # type: ignore[call-arg]
        return ro

    def get(self, key: bytes) -> bytes | None:
        try:
            value: bytes | None = self.db.get(key, read_opt=self._read_options())
            return value
        except StoreClosed:
            raise
        except Exception as exc:
            raise wrap_error(exc, f"reading key {key[:40]!r}") from None

    def _iter(self, upper: bytes | None, fill_cache: bool = True) -> RdictIter:
        return self.db.iter(self._read_options(upper, fill_cache))

    @staticmethod
    def _check_status(it: RdictIter, begin: bytes) -> None:
        """An iterator that went invalid: the end of the range, or an unreadable block."""
        try:
            it.status()
        except Exception as exc:
            raise wrap_error(exc, f"scanning from key {begin[:40]!r}") from None

    def scan(
        self, begin: bytes, end: bytes, fill_cache: bool = True
    ) -> Iterator[tuple[bytes, bytes]]:
        """Items with begin <= key < end, in key order.

        A live iterator is a point-in-time view, so the scan never sees writes made
        after it started (rocksdict's Snapshot iteration does; see ECOSYSTEM.md). An
        unreadable block on the way is ``CorruptData`` (see the module docstring).
        ``fill_cache=False`` leaves the block cache as it was: a long scan that reads
        each block once (a reader's pass over stored batches) would only evict what
        point reads keep there, and fault in fresh memory for blocks nobody reads again.
        """
        it = self._iter(end, fill_cache)
        it.seek(begin)
        valid, nxt, key, value = it.valid, it.next, it.key, it.value
        while valid():
            yield key(), value()
            nxt()
        self._check_status(it, begin)

    def scan_keys(self, begin: bytes, end: bytes) -> Iterator[bytes]:
        it = self._iter(end)
        it.seek(begin)
        while it.valid():
            yield it.key()
            it.next()
        self._check_status(it, begin)

    def scan_reverse(self, begin: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Items with begin <= key < end, largest key first (rocksdict's backwards
        iteration ignores a lower bound, so it is checked here)."""
        it = self._iter(None)
        it.seek_for_prev(end)
        while it.valid():
            key: bytes = it.key()
            if key < begin:
                return
            if key < end:
                yield key, it.value()
            it.prev()
        self._check_status(it, end)

    def last_key(self, begin: bytes, end: bytes) -> bytes | None:
        """The largest key in [begin, end), or None (backwards iteration ignores the
        lower bound in rocksdict, so it is checked here)."""
        it = self._iter(None)
        it.seek_for_prev(end)
        while it.valid():
            key: bytes = it.key()
            if key < end:
                return key if key >= begin else None
            it.prev()
        self._check_status(it, end)
        return None

    def seeker(self, end: bytes) -> Seeker:
        """One point-in-time iterator below ``end`` that may be sought many times (a key
        index lookup sees one ledger's index as one consistent state)."""
        return Seeker(self._iter(end))


class Seeker:
    """A live iterator sought again and again; each scan runs to its caller's stop."""

    def __init__(self, it: RdictIter) -> None:
        self._it = it

    def scan_from(self, begin: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Items from ``begin`` on (up to the seeker's end); the caller stops early or
        drains it before seeking again. An unreadable block is ``CorruptData``."""
        it = self._it
        it.seek(begin)
        while it.valid():
            yield it.key(), it.value()
            it.next()
        RocksReads._check_status(it, begin)


class RocksDB(RocksReads):
    """A RocksDB directory opened read-write by this process (or read-only, for tools)."""

    def __init__(
        self, path: Path, wal_recovery: str = "absolute-consistency", read_only: bool = False
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._opts = _options(wal_recovery)
        self._db: Rdict | None = self._open()
        self.fault = StoreFault(path)
        self._sync_opts = WriteOptions()
        self._sync_opts.sync = True
        self._close_lock = threading.Lock()

    def _open(self) -> Rdict:
        # The column family's options given, not loaded from the store's OPTIONS file
        # (rocksdict's way with an existing store): a store made before keeps its tables
        # and writes new ones as ``table_options`` says.
        families = {"default": self._opts}
        try:
            if self.read_only:
                access = AccessType.read_only(False)
                return Rdict(str(self.path), self._opts, families, access_type=access)
            return Rdict(str(self.path), self._opts, families)
        except Exception as exc:
            if is_locked(exc):
                raise StoreLocked(f"{self.path} is in use by another process") from None
            raise open_error(self.path, exc) from None

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
                self.db.write(batch._wb, self._sync_opts)
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
            self.db.flush_wal(True)
        except (StoreClosed, StorageUnavailable):
            raise
        except Exception as exc:
            raise self._failed(exc) from None

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
                _collect_holders(self.path)


def _collect_holders(path: Path) -> None:
    """After a store's close: collect the garbage that still holds it (an iterator in a
    reference cycle keeps the store, its LOCK and its files open), but only when its files
    are still held; a full collection costs tens of milliseconds in a large process."""
    if file_limits.holds_under(path):
        gc.collect()
