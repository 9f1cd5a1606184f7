"""The read side of a RocksDB store, shared by the server's instance (``storage.rocks``)
and a compaction worker's secondary (``storage.rocks_secondary``): point reads and bounded
range scans whose every end is checked, because rocksdict's iterators end silently at an
unreadable block (docs/architecture.md, "Data integrity").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rocksdict import Rdict, RdictIter, ReadOptions

from compactlog.errors import StorageUnavailable, StoreClosed
from compactlog.storage.rocks_errors import wrap_error
from compactlog.storage.store_recovery import StoreFault


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
