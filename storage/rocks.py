"""The one module that touches rocksdict.

Everything else sees ``RocksDB``: bytes in, bytes out, range scans bounded on both
sides, atomic batches, and our own error types instead of rocksdict's plain
``Exception`` ("IO error…", "Corruption…"). Raw mode throughout, so keys sort by
RocksDB's byte-wise comparator and other RocksDB tools can read the store.

Compaction workers (other processes) read the server's store through a
``SecondaryRocksDB`` (RocksDB's secondary instance: it tails the primary's MANIFEST and
WAL on ``catch_up``, holds no lock and writes nothing there) and write a new ledger as an
SST file (``SstWriter``) that the server then ``ingest``s in one step.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

from rocksdict import (
    AccessType,
    IngestExternalFileOptions,
    Options,
    Rdict,
    ReadOptions,
    SstFileWriter,
    WriteBatch,
    WriteOptions,
)

from compactlog.errors import StorageError, StoreClosed, StoreLocked


def _wrap(exc: Exception) -> StorageError:
    return StorageError(f"RocksDB: {exc}")


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


class RocksReads:
    """The read side shared by the primary and a secondary instance."""

    path: Path
    _db: Rdict | None

    @property
    def db(self) -> Rdict:
        if self._db is None:
            raise StoreClosed("the store is closed")
        return self._db

    def get(self, key: bytes) -> bytes | None:
        try:
            value: bytes | None = self.db.get(key)
            return value
        except StoreClosed:
            raise
        except Exception as exc:
            raise _wrap(exc) from None

    def scan(self, begin: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Items with begin <= key < end, in key order.

        A live iterator is a point-in-time view, so the scan never sees writes made
        after it started (rocksdict's Snapshot iteration does; see ECOSYSTEM.md).
        """
        ro = ReadOptions()
        ro.set_iterate_upper_bound(end)
        try:
            yield from self.db.items(from_key=begin, read_opt=ro)
        except StoreClosed:
            raise
        except Exception as exc:
            raise _wrap(exc) from None

    def scan_keys(self, begin: bytes, end: bytes) -> Iterator[bytes]:
        ro = ReadOptions()
        ro.set_iterate_upper_bound(end)
        try:
            yield from self.db.keys(from_key=begin, read_opt=ro)
        except Exception as exc:
            raise _wrap(exc) from None

    def scan_reverse(self, begin: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Items with begin <= key < end, largest key first (rocksdict's backwards
        iteration ignores a lower bound, so it is checked here)."""
        it = self.db.iter(ReadOptions())
        try:
            it.seek_for_prev(end)
            while it.valid():
                key: bytes = it.key()
                if key < begin:
                    return
                if key < end:
                    yield key, it.value()
                it.prev()
        except StoreClosed:
            raise
        except Exception as exc:
            raise _wrap(exc) from None

    def last_key(self, begin: bytes, end: bytes) -> bytes | None:
        """The largest key in [begin, end), or None (backwards iteration ignores the
        lower bound in rocksdict, so it is checked here)."""
        it = self.db.iter(ReadOptions())
        it.seek_for_prev(end)
        while it.valid():
            key: bytes = it.key()
            if key < end:
                return key if key >= begin else None
            it.prev()
        return None


class RocksDB(RocksReads):
    """A RocksDB directory opened read-write by this process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_max_background_jobs(2)
        opts.increase_parallelism(2)
        try:
            self._db: Rdict | None = Rdict(str(path), opts)
        except Exception as exc:
            if "lock" in str(exc).lower():
                raise StoreLocked(f"{path} is in use by another process") from None
            raise _wrap(exc) from None
        self._sync_opts = WriteOptions()
        self._sync_opts.sync = True
        self._close_lock = threading.Lock()

    def write(self, batch: Batch, sync: bool = False) -> None:
        try:
            if sync:
                self.db.write(batch._wb, self._sync_opts)
            else:
                self.db.write(batch._wb)
        except StoreClosed:
            raise
        except Exception as exc:
            raise _wrap(exc) from None

    def put(self, key: bytes, value: bytes) -> None:
        batch = Batch()
        batch.put(key, value)
        self.write(batch)

    def sync_wal(self) -> None:
        """fsync the WAL: everything written before this call survives a power cut.

        rocksdict releases the GIL here, so other threads keep serving while it waits.
        """
        try:
            self.db.flush_wal(True)
        except StoreClosed:
            raise
        except Exception as exc:
            raise _wrap(exc) from None

    def compact_range(self, begin: bytes, end: bytes) -> None:
        try:
            self.db.compact_range(begin, end)
        except Exception as exc:
            raise _wrap(exc) from None

    def ingest(self, sst: Path) -> None:
        """Add the keys of an SST file (``SstWriter``) in one atomic step, moving the file
        into the store. A key range no memtable key falls in (a new ledger's) needs no
        flush, so writers are held up only for the moment RocksDB assigns a sequence
        number."""
        opts = IngestExternalFileOptions()
        opts.set_move_files(True)
        try:
            self.db.ingest_external_file([str(sst)], opts)
        except StoreClosed:
            raise
        except Exception as exc:
            raise _wrap(exc) from None

    def close(self) -> None:
        """Flush and release the LOCK (live iterators keep it: collect them first)."""
        with self._close_lock:
            if self._db is None:
                return
            db, self._db = self._db, None
            try:
                db.flush_wal(True)
                db.close()
            finally:
                del db
                gc.collect()


class SecondaryRocksDB(RocksReads):
    """A read-only view of another process's store (RocksDB's secondary instance).

    It sees the primary as of the last ``catch_up`` (SST files and WAL alike, synced or
    not), takes no lock on the primary's directory and writes only to its own
    ``secondary_path`` (info log, MANIFEST copy). ``max_open_files = -1`` as RocksDB
    requires: files the primary deletes meanwhile stay readable while open here.
    """

    def __init__(self, path: Path, secondary_path: Path) -> None:
        self.path = path
        secondary_path.mkdir(parents=True, exist_ok=True)
        opts = Options(raw_mode=True)
        opts.set_max_open_files(-1)
        try:
            self._db = Rdict(str(path), opts, access_type=AccessType.secondary(str(secondary_path)))
        except Exception as exc:
            raise _wrap(exc) from None

    def catch_up(self) -> None:
        """Apply what the primary wrote since the last catch-up."""
        try:
            self.db.try_catch_up_with_primary()
        except StoreClosed:
            raise
        except Exception as exc:
            raise _wrap(exc) from None

    def close(self) -> None:
        if self._db is None:
            return
        db, self._db = self._db, None
        try:
            db.close()
        finally:
            del db
            gc.collect()


class SstWriter:
    """Writes one SST file for ``RocksDB.ingest``; keys must come in ascending order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = SstFileWriter(options=Options(raw_mode=True))
        try:
            self._writer.open(str(path))
        except Exception as exc:
            raise _wrap(exc) from None
        self.keys = 0

    def put(self, key: bytes, value: bytes) -> None:
        try:
            self._writer[key] = value
        except Exception as exc:
            raise _wrap(exc) from None
        self.keys += 1

    def finish(self) -> int:
        """Write the file out (synced) and close it; return its size."""
        try:
            self._writer.finish()
        except Exception as exc:
            raise _wrap(exc) from None
        return self.path.stat().st_size
