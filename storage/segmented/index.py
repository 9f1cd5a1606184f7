"""Sparse offset and time indexes of one segment, searched by binary search.

Both are append-only files of fixed-width entries with offsets stored relative to the
segment's base offset (as in Kafka), mirrored in memory as arrays so that a lookup is a
``bisect`` and costs no I/O::

    .index      entry = uint32 relative first offset of a batch, uint32 its file position  (8 B)
    .timeindex  entry = int64 max timestamp so far, uint32 relative first offset of the
                        batch holding it                                               (12 B)

Entries point at batch starts (Kafka indexes batches, not records): a lookup gives a
batch from which a scan finds the offset or timestamp, reading whole batches only.

An index is a cache: a missing or inconsistent file is rebuilt from the log (see
``LogSegment.open``), so the files are only fsynced on flush and never on append. A
loaded index holds no descriptor; one is opened by the first append and closed when the
segment stops being written (``close``), so only segments being written hold one.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from array import array
from collections.abc import Iterator
from pathlib import Path

from compactlog.errors import from_os_error
from compactlog.storage.segmented.files import cut_back, write_all
from compactlog.storage.segmented.handles import HANDLES, new_key

INDEX_EXT = ".index"
TIMEINDEX_EXT = ".timeindex"

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")


class IndexCorrupt(Exception):
    """An index file that fails the sanity check; the caller rebuilds it. ``damage``: the
    check failed on the log's own bytes (a batch's CRC or framing), which no rebuild of
    an index repairs (a process that may not repair, a cleaning worker, says so)."""

    def __init__(self, message: str, damage: Exception | None = None) -> None:
        super().__init__(message)
        self.damage = damage


class _Index:
    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.entry.size)
        self.handle_key = new_key()
        self._dirty = False  # written since the last flush

    def open_fd(self) -> int:
        """For the LRU of descriptors (``handles.HANDLES``). Not O_APPEND: each entry is
        written at the end the entries in memory say, so a failed write's partial bytes
        are written over (or cut back) and never shift the entries after them."""
        return os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)

    def _create_file(self) -> None:
        try:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        except OSError as exc:
            raise from_os_error(exc, "creating an index file", self.path) from None

    @contextlib.contextmanager
    def _fd(self, doing: str) -> Iterator[int]:
        """The descriptor from the LRU, pinned for one call; an open that fails is ours."""
        try:
            with HANDLES.use(self) as fd:
                yield fd
        except OSError as exc:
            raise from_os_error(exc, doing, self.path) from None

    def _write(self, data: bytes) -> None:
        """Write one entry after the last, through the LRU of descriptors (so the files a
        process holds stay bounded however many topics are written). Checked: a failed
        write leaves the file as it was (``files.write_all``); the caller adds the entry
        to memory only after this returns."""
        if data:
            doing = "appending an index entry"
            with self._fd(doing) as fd:
                write_all(fd, data, self.size_in_bytes, doing, self.path)
            self._dirty = True

    def _read_entries(self) -> list[tuple[int, int]]:
        data = self.path.read_bytes()
        if len(data) % self.entry.size:
            raise IndexCorrupt(
                f"{self.path}: size {len(data)} is not a multiple of {self.entry.size}"
            )
        if len(data) // self.entry.size > self.max_entries:
            raise IndexCorrupt(f"{self.path}: more entries than segment.index.bytes allows")
        return list(self.entry.iter_unpack(data))

    @property
    def entries(self) -> int:
        raise NotImplementedError

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry.size

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def flush(self) -> None:
        if self._dirty:
            with self._fd("syncing an index file") as fd:
                try:
                    os.fsync(fd)
                except OSError as exc:
                    raise from_os_error(exc, "syncing an index file", self.path) from None
            self._dirty = False

    def keep_first(self, entries: int) -> None:
        """Forget every entry after the first ``entries``, in memory and in the file (the
        batch they point at was cut back)."""
        if entries >= self.entries:
            return
        self._drop_from(entries)
        with self._fd("cutting an index file back") as fd:
            cut_back(fd, entries * self.entry.size, self.path)

    def _drop_from(self, entries: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Let the descriptor go (the segment stops being written)."""
        HANDLES.drop(self.handle_key)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # also at interpreter exit
            HANDLES.forget(self.handle_key)


class OffsetIndex(_Index):
    """Maps an offset to the file position of a batch at or before the one holding it."""

    entry = _OFFSET_ENTRY

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self.offsets = array("q")
        self.positions = array("q")

    @classmethod
    def create(cls, path: Path, base_offset: int, max_bytes: int) -> OffsetIndex:
        index = cls(path, base_offset, max_bytes)
        index._create_file()
        return index

    @classmethod
    def load(cls, path: Path, base_offset: int, max_bytes: int, log_size: int) -> OffsetIndex:
        """Open an existing file; IndexCorrupt if missing or inconsistent with the log."""
        index = cls(path, base_offset, max_bytes)
        if not path.exists():
            raise IndexCorrupt(f"{path} is missing")
        last_rel, last_pos = -1, -1
        for rel, pos in index._read_entries():
            if rel <= last_rel or pos <= last_pos or pos >= max(log_size, 1):
                raise IndexCorrupt(f"{path}: entry ({rel}, {pos}) out of order or beyond the log")
            index.offsets.append(base_offset + rel)
            index.positions.append(pos)
            last_rel, last_pos = rel, pos
        return index

    @property
    def entries(self) -> int:
        return len(self.offsets)

    def last_offset(self) -> int:
        return self.offsets[-1] if self.offsets else self.base_offset

    def _drop_from(self, entries: int) -> None:
        del self.offsets[entries:]
        del self.positions[entries:]

    def append(self, offset: int, position: int) -> None:
        if self.offsets and (offset <= self.offsets[-1] or position <= self.positions[-1]):
            return
        self._write(self.entry.pack(offset - self.base_offset, position))
        self.offsets.append(offset)
        self.positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before ``offset``; (base, 0) if none."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.offsets[i], self.positions[i]


class TimeIndex(_Index):
    """Maps a timestamp to the offset from which a scan finds the first record at or after it.

    Each entry is (largest timestamp so far, first offset of the batch holding it);
    timestamps strictly grow.
    """

    entry = _TIME_ENTRY

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self.timestamps = array("q")
        self.offsets = array("q")

    @classmethod
    def create(cls, path: Path, base_offset: int, max_bytes: int) -> TimeIndex:
        index = cls(path, base_offset, max_bytes)
        index._create_file()
        return index

    @classmethod
    def load(cls, path: Path, base_offset: int, max_bytes: int, next_offset: int) -> TimeIndex:
        index = cls(path, base_offset, max_bytes)
        if not path.exists():
            raise IndexCorrupt(f"{path} is missing")
        last_ts = None
        for ts, rel in index._read_entries():
            if (last_ts is not None and ts <= last_ts) or base_offset + rel >= max(
                next_offset, base_offset + 1
            ):
                raise IndexCorrupt(f"{path}: entry ({ts}, {rel}) out of order or beyond the log")
            index.timestamps.append(ts)
            index.offsets.append(base_offset + rel)
            last_ts = ts
        return index

    @property
    def entries(self) -> int:
        return len(self.timestamps)

    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def _drop_from(self, entries: int) -> None:
        del self.timestamps[entries:]
        del self.offsets[entries:]

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add an entry if ``timestamp`` is a new maximum (and, normally, the index has room).
        An empty index reads as Kafka's: its last entry no timestamp (-1), so an empty
        segment's recovery or roll writes no ``(-1, base)`` entry that names no batch."""
        if timestamp <= (self.timestamps[-1] if self.timestamps else -1):
            return
        if not skip_full_check and self.is_full():
            return
        self._write(self.entry.pack(timestamp, offset - self.base_offset))
        self.timestamps.append(timestamp)
        self.offsets.append(offset)

    def entry_before(self, timestamp: int) -> tuple[int, int] | None:
        """The last entry with a timestamp below ``timestamp``, None when none."""
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        return None if i < 0 else (self.timestamps[i], self.offsets[i])
