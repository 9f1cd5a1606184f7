"""LogSegment: one ``<20-digit base offset>.log`` file of stored batches, with two indexes.

The file is a concatenation of batches (``storage/batch.py``; ``scan.py`` reads them): a
Publish appends one batch, whose header carries its first and last offset as ids
``(0, offset)``. Both indexes point at batch starts, as Kafka's do: the offset index maps
a batch's first offset to its file position, the time index a largest-timestamp-so-far to
the first offset of the batch holding it (timestamps are the batches' max event times).

The ``.log`` file is reached through the process-wide LRU of descriptors
(``handles.py``): opened by its current name on a miss, so the server holds a bounded
number of files whatever the segment count. Renames (``.cleaned`` → ``.swap`` → final,
final → ``.deleted``) take the segment's name lock, which an open takes too, so an open
never looks for a name that is being changed. An open descriptor keeps reading the same
bytes across renames and unlinks; once a retired segment's file is unlinked and its
descriptor evicted, reads raise ``SegmentGone`` and the log resumes the read on a fresh
snapshot of its segment list (``Log.batches``).

Index entries are checked against the batch they point at whenever they are used (the
batch at an offset-index entry's position must start at that entry's offset; the batch
a time-index entry names must carry that entry's timestamp): a wrong entry makes the
lookup fall back to a scan from the start of the segment, never skip records.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from compactlog.errors import CompactlogError, CorruptData, TopicNotFound, from_os_error
from compactlog.storage.batch import select
from compactlog.storage.segmented import lookups, segment_append, segment_recovery
from compactlog.storage.segmented.handles import HANDLES, new_key
from compactlog.storage.segmented.index import (
    INDEX_EXT,
    TIMEINDEX_EXT,
    IndexCorrupt,
    OffsetIndex,
    TimeIndex,
)
from compactlog.storage.segmented.manifest_check import LostRange
from compactlog.storage.segmented.scan import READ_CHUNK, Checked, iter_batches
from compactlog.storage.segmented.segment_append import SegmentMark
from compactlog.storage.types import MessageId

log = logging.getLogger(__name__)

LOG_EXT = ".log"
EXTENSIONS = (LOG_EXT, INDEX_EXT, TIMEINDEX_EXT)
CLEANED = ".cleaned"
SWAP = ".swap"
DELETED = ".deleted"
_ALL = MessageId(2**64 - 1, 2**64 - 1)


def file_name(base_offset: int, ext: str, suffix: str = "") -> str:
    return f"{base_offset:020d}{ext}{suffix}"


class SegmentGone(CorruptData):
    """The segment's file is no longer there (a retired segment past its delete delay)."""


@dataclass
class IndexParams:
    index_interval_bytes: int
    max_index_bytes: int


class LogSegment:
    """Batches with offsets in ``[base_offset, next segment's base)``, plus two indexes."""

    def __init__(self, directory: Path, base_offset: int, suffix: str, params: IndexParams) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.suffix = suffix
        self.handle_key = new_key()
        self.index_trusted = True  # False once an index entry failed its check (lookups.py)
        self.torn = False  # a failed append's bytes could not be cut back yet
        self._name_lock = threading.Lock()
        self.params = params
        self.size = 0
        self.next_offset = base_offset
        self.first_timestamp: int | None = None
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_last_index_entry = 0
        self._count: int | None = 0
        self.batch_count: int | None = 0  # None: not counted (indexes loaded, not scanned)
        self.lost: LostRange | None = None  # offsets its file lost (``sealed.py``)
        # Position of a bad batch that recovery kept because it holds fsynced offsets.
        self.damaged_at: int | None = None
        self.offset_index: OffsetIndex
        self.time_index: TimeIndex

    # ---- files -------------------------------------------------------------------------
    def path(self, ext: str = LOG_EXT, suffix: str | None = None) -> Path:
        return self.dir / file_name(
            self.base_offset, ext, self.suffix if suffix is None else suffix
        )

    # ---- the descriptor (handles.py) --------------------------------------------------
    def open_fd(self) -> int:
        with self._name_lock:
            return os.open(self.path(), os.O_RDWR)

    @contextlib.contextmanager
    def _fd(self) -> Iterator[int]:
        """The descriptor, pinned for one system call (only the open raises FileNotFound)."""
        try:
            with HANDLES.use(self) as fd:
                yield fd
        except FileNotFoundError:
            if not self.dir.exists():
                raise TopicNotFound(f"topic {self.dir.name} was deleted") from None
            raise SegmentGone(f"{self.where}: the segment file is gone") from None

    def pread(self, length: int, position: int) -> bytes:
        with self._fd() as fd:
            return os.pread(fd, length, position)

    def release(self) -> None:
        """Close the descriptor now (the segment is deleted, replaced or shut down)."""
        HANDLES.drop(self.handle_key)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # also at interpreter exit
            HANDLES.forget(self.handle_key)

    @property
    def where(self) -> str:
        """Topic and file, for the messages of ``CorruptData``."""
        return f"topic {self.dir.name}, segment {self.path().name}"

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, params: IndexParams, suffix: str = ""
    ) -> LogSegment:
        """A new empty segment; stale files of the same name are truncated."""
        fd = os.open(
            directory / file_name(base_offset, LOG_EXT, suffix),
            os.O_RDWR | os.O_CREAT | os.O_TRUNC,
            0o644,
        )
        os.close(fd)
        seg = cls(directory, base_offset, suffix, params)
        seg._new_indexes()
        return seg

    def _new_indexes(self) -> None:
        self.offset_index = OffsetIndex.create(
            self.path(INDEX_EXT), self.base_offset, self.params.max_index_bytes
        )
        self.time_index = TimeIndex.create(
            self.path(TIMEINDEX_EXT), self.base_offset, self.params.max_index_bytes
        )

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        params: IndexParams,
        suffix: str = "",
        *,
        recover: bool,
        recovery_point: int,
    ) -> tuple[LogSegment, bool]:
        """Open an existing segment. Returns (segment, truncated).

        With ``recover`` (or when an index fails its sanity check) every batch is checked,
        the indexes are rebuilt, and the file is truncated at the first bad batch if that
        batch lies at or after ``recovery_point`` (see ``recover``).
        """
        seg = cls(directory, base_offset, suffix, params)
        with seg._fd() as fd:
            seg.size = os.fstat(fd).st_size
        if not recover:
            try:
                seg._load_indexes()
                return seg, False
            except (IndexCorrupt, OSError):
                pass
        return seg, seg.recover(recovery_point)

    @classmethod
    def open_read_only(cls, directory: Path, base_offset: int, params: IndexParams) -> LogSegment:
        """A closed segment opened by another process (a cleaning worker): read through
        read-only descriptors, indexes loaded into memory and never written. IndexCorrupt
        (or SegmentGone, a segment retention removed) instead of any repair: only the
        server that owns the log may change its files."""
        seg = _ReadOnlySegment(directory, base_offset, "", params)
        with seg._fd() as fd:
            seg.size = os.fstat(fd).st_size
        seg._load_indexes()
        return seg

    @classmethod
    def open_cleaned(cls, directory: Path, base_offset: int, params: IndexParams) -> LogSegment:
        """A ``.cleaned`` segment another process wrote, for a swap: its indexes must load
        and the batches past the last index entry must check, else IndexCorrupt; it is
        never repaired (a truncated copy must not replace whole segments)."""
        seg = cls(directory, base_offset, CLEANED, params)
        with seg._fd() as fd:
            seg.size = os.fstat(fd).st_size
        seg._load_indexes()
        return seg

    def _load_indexes(self) -> None:
        """Trust the index files after a sanity check (``segment_recovery.load_indexes``)."""
        segment_recovery.load_indexes(self)

    def recover(self, recovery_point: int) -> bool:
        """Rebuild both indexes by a checked scan, truncating a torn tail; return True if
        the file was truncated (``segment_recovery.recover``)."""
        return segment_recovery.recover(self, recovery_point)

    def rename(self, new_suffix: str) -> None:
        """Rename the three files; the log file goes last so recovery keys on it."""
        with self._name_lock:
            for ext in (INDEX_EXT, TIMEINDEX_EXT, LOG_EXT):
                src = self.path(ext)
                if src.exists():
                    os.replace(src, self.path(ext, new_suffix))
            self.offset_index.path = self.path(INDEX_EXT, new_suffix)
            self.time_index.path = self.path(TIMEINDEX_EXT, new_suffix)
            self.suffix = new_suffix

    # ---- writes ------------------------------------------------------------------------
    def index_batch(
        self, first: int, last: int, count: int, max_ts: int, position: int, size: int
    ) -> None:
        """Account one batch at ``position`` (in the file, or about to be), as Kafka does:
        an offset-index entry once ``index.interval.bytes`` were written since the last."""
        if self.first_timestamp is None:
            self.first_timestamp = max_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_ts, first
        if self.bytes_since_last_index_entry > self.params.index_interval_bytes:
            self.offset_index.append(first, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size
        self.next_offset = last + 1
        if self._count is not None:
            self._count += count
        if self.batch_count is not None:
            self.batch_count += 1

    def rewind(self, mark: SegmentMark) -> None:
        """Undo everything appended since ``mark`` (``segment_append.rewind``)."""
        segment_append.rewind(self, mark)

    def append_batch(
        self, data: bytes, first: int, last: int, count: int, max_ts: int
    ) -> SegmentMark:
        """Append one packed batch, checked (``segment_append.append_batch``): never a
        partial batch visible or acknowledged. Returns the mark to ``rewind`` to."""
        return segment_append.append_batch(self, data, first, last, count, max_ts)

    def on_become_inactive(self) -> None:
        """Record the final max timestamp so retention and lookups see it after a restart."""
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
        )

    def flush(self) -> None:
        """Sync the log (its failure is the caller's: the batches are not durable), then
        the indexes: a cache that a load checks and rebuilds, so an index that cannot be
        synced is logged and never fails the data's flush."""
        with self._fd() as fd:
            try:
                os.fsync(fd)
            except OSError as exc:
                raise from_os_error(exc, f"syncing {self.where}", self.path()) from None
        for index in (self.offset_index, self.time_index):
            try:
                index.flush()
            except CompactlogError as exc:
                log.warning(
                    "%s: index not synced (rebuilt at the next load if needed): %s", self.where, exc
                )

    def on_close(self) -> None:
        """The active segment at a clean stop: its final time-index entry (``on_become_
        inactive``) is a cache too; a disk that refuses it does not fail the stop."""
        try:
            self.on_become_inactive()
        except CompactlogError as exc:
            log.warning("%s: last time-index entry not written: %s", self.where, exc)

    def close_index_files(self) -> None:
        self.offset_index.close()
        self.time_index.close()

    # ---- reads -------------------------------------------------------------------------
    def is_full_index(self) -> bool:
        return self.offset_index.is_full() or self.time_index.is_full()

    def largest_timestamp(self) -> float:
        """Largest batch timestamp, or the file's mtime when the segment has no batches.
        A damaged segment's figures cover only the batches before its damage, so the later
        of the two counts: retention never takes it for older than it may be."""
        if self.lost is not None and self.max_timestamp >= 0:
            return self.max_timestamp  # its manifest entry's: the file's mtime is the damage's
        if self.damaged_at is not None:
            return max(self.max_timestamp, self.last_modified_ms())
        if self.max_timestamp >= 0 and self.next_offset > self.base_offset:
            return self.max_timestamp
        return self.last_modified_ms()

    def last_modified_ms(self) -> int:
        with self._fd() as fd:
            return int(os.fstat(fd).st_mtime * 1000)

    def batches(self, start: int, end: int, chunk: int = READ_CHUNK) -> Iterator[Checked]:
        """The checked batches of the file bytes ``[start, end)``."""
        return iter_batches(self.pread, start, end, self.where, chunk)

    def batches_from(self, offset: int, end: int, chunk: int = READ_CHUNK) -> Iterator[Checked]:
        """Checked batches from the one holding ``offset`` (or an earlier one) to byte
        ``end``, found by the offset index and checked against it (``lookups.py``)."""
        return lookups.batches_from(self, offset, end, chunk)

    def split_points(self, start: int, end: int, every: int) -> list[int]:
        """Checked batch starts in ``(start, end)``, ``every`` bytes apart or more, where
        the bytes can be cut into pieces read side by side (``lookups.py``)."""
        return lookups.split_points(self, start, end, every)

    def record_count(self) -> int:
        if self._count is None:
            self._count = sum(h.count for _b, _p, h, _a in self.batches(0, self.size))
        return self._count

    def readable_count(self) -> int:
        """Records in the batches before the first damaged one (statistics only)."""
        total = 0
        with contextlib.suppress(CorruptData):
            for _b, _p, header, _a in self.batches(0, self.size):
                total += header.count
        return total

    def count_below(self, offset: int) -> int:
        """How many records of this segment have an offset below ``offset``."""
        stop = MessageId(0, offset - 1)
        total = 0
        for buf, p, header, pos in self.batches(0, self.size):
            if header.first_id > stop:
                break
            where = f"{self.where}, byte {pos}"
            total += select(buf, header, MessageId(0, 0), stop, header.count, where, p)[1]
        return total

    def find_offset_by_timestamp(
        self, timestamp: int, max_position: int, min_offset: int
    ) -> int | None:
        """First offset >= ``min_offset`` here whose event time is >= ``timestamp``."""
        return lookups.find_offset_by_timestamp(self, timestamp, max_position, min_offset)

    def verify(self) -> int:
        """Check every batch end to end (CRC, increasing offsets, the file ends where the
        last batch does); return the record count. ``CorruptData`` on anything else."""
        last, count, end, batches = self.base_offset - 1, 0, 0, 0
        for _b, _p, header, pos in self.batches(0, self.size):
            first = header.first_id.entry_id
            if first <= last or header.first_id.ledger_id or header.last_id.ledger_id:
                raise CorruptData(f"{self.where}, byte {pos}: offset {first} after {last}")
            last, count, end = header.last_id.entry_id, count + header.count, pos + header.size
            batches += 1
        if end != self.size:
            raise CorruptData(f"{self.where}: {self.size - end} bytes after the last batch")
        self.batch_count = batches
        return count


class _ReadOnlySegment(LogSegment):
    """``open_read_only``'s segments: their descriptors cannot write."""

    def open_fd(self) -> int:
        with self._name_lock:
            return os.open(self.path(), os.O_RDONLY)


__all__ = ["CLEANED", "DELETED", "EXTENSIONS", "LOG_EXT", "SWAP", "IndexParams", "LogSegment"]
