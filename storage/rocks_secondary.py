"""A compaction worker's side of RocksDB: ``SecondaryRocksDB`` reads another process's
store without a lock on it, and ``SstWriter`` writes the SST files the server then
ingests (``RocksDB.ingest``). With ``storage.rocks`` the only modules that import
rocksdict; their reads go through ``RocksReads`` and verify checksums as the server's do.
"""

from __future__ import annotations

import gc
from pathlib import Path

from rocksdict import AccessType, Options, Rdict, SstFileWriter

from compactlog.errors import StoreClosed
from compactlog.storage.rocks_errors import open_error, wrap_error
from compactlog.storage.rocks_options import table_options
from compactlog.storage.rocks_reads import RocksReads
from compactlog.storage.writeback import Writeback

__all__ = ["SecondaryRocksDB", "SstWriter"]


class SecondaryRocksDB(RocksReads):
    """A read-only view of another process's store (RocksDB's secondary instance).

    It sees the primary as of the last ``catch_up`` (SST files and WAL alike, synced or
    not), takes no lock on the primary's directory and writes only to its own
    ``secondary_path`` (info log). ``max_open_files = -1`` as RocksDB requires: files the
    primary deletes meanwhile stay readable while open here. Reads verify checksums as
    the primary's do.
    """

    def __init__(self, path: Path, secondary_path: Path) -> None:
        self.path = path
        secondary_path.mkdir(parents=True, exist_ok=True)
        opts = Options(raw_mode=True)
        opts.set_max_open_files(-1)
        opts.set_paranoid_checks(True)
        try:
            self._db = Rdict(str(path), opts, access_type=AccessType.secondary(str(secondary_path)))
        except Exception as exc:
            raise open_error(path, exc) from None

    def catch_up(self) -> None:
        """Apply what the primary wrote since the last catch-up."""
        try:
            self.db.try_catch_up_with_primary()
        except StoreClosed:
            raise
        except Exception as exc:
            raise wrap_error(exc, "catching up with the primary") from None

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

    def __init__(self, path: Path, bytes_per_sync: int = 0) -> None:
        """``bytes_per_sync``: start the file's writeback every so many bytes
        (``storage.writeback``: RocksDB's ``bytes_per_sync``, which its SstFileWriter does
        not take from the options) instead of leaving all of it to ``finish``'s fsync: a
        compaction worker's file then reaches the disk in small pieces, and the server's
        WAL fsync (one ext4 journal with it) never waits behind the whole file."""
        self.path = path
        self._writer = SstFileWriter(options=table_options())
        try:
            self._writer.open(str(path))
        except Exception as exc:
            raise wrap_error(exc, f"creating {path.name}", path) from None
        self.keys = 0
        self._writeback = Writeback(path, bytes_per_sync)

    def put(self, key: bytes, value: bytes) -> None:
        try:
            self._writer[key] = value
        except Exception as exc:
            raise wrap_error(exc, f"writing {self.path.name}") from None
        self.keys += 1
        self._writeback.wrote(len(key) + len(value))

    def finish(self) -> int:
        """Write the file out (synced) and close it; return its size."""
        try:
            self._writer.finish()
        except Exception as exc:
            raise wrap_error(exc, f"finishing {self.path.name}") from None
        finally:
            self._writeback.close()
        return self.path.stat().st_size
