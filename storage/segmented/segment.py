"""LogSegment: one ``<20-digit base offset>.log`` file with its offset and time indexes.

Reads use ``os.pread`` on a descriptor the segment keeps open for its whole life, and the
descriptor is closed only when the last reference to the segment goes away. A reader that
took a snapshot of the segment list therefore keeps reading correct bytes while the cleaner
renames the file to ``.swap``/``.deleted`` or the delayed delete unlinks it.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from compactlog.storage.segmented.index import IndexCorrupt, OffsetIndex, TimeIndex
from compactlog.storage.segmented.records import (
    HEADER,
    HEADER_SIZE,
    LENGTH,
    check_record,
    decode_headers,
)
from compactlog.storage.types import MessageId, StoredMessage

LOG_EXT = ".log"
INDEX_EXT = ".index"
TIMEINDEX_EXT = ".timeindex"
EXTENSIONS = (LOG_EXT, INDEX_EXT, TIMEINDEX_EXT)
CLEANED = ".cleaned"
SWAP = ".swap"
DELETED = ".deleted"
_READ_CHUNK = 256 * 1024


def file_name(base_offset: int, ext: str, suffix: str = "") -> str:
    return f"{base_offset:020d}{ext}{suffix}"


class _Fd:
    """An OS descriptor closed when its last user lets go (see the module docstring)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


@dataclass
class IndexParams:
    index_interval_bytes: int
    max_index_bytes: int


class ChunkReader:
    """Reads ``[start, end)`` of a file in chunks that always end on a record boundary.

    The caller walks records in the returned buffer and hands back how many bytes it
    consumed; the unconsumed tail is carried into the next chunk.
    """

    def __init__(self, fd: int, start: int, end: int, chunk: int = _READ_CHUNK) -> None:
        self.fd, self.pos, self.end, self.chunk = fd, start, end, chunk
        self.buf = b""

    def next(self, consumed: int) -> bytes:
        rest = self.buf[consumed:]
        want = self.chunk
        if len(rest) >= 4:
            want = max(want, 4 + LENGTH.unpack_from(rest, 0)[0] - len(rest))
        want = min(want, self.end - self.pos)
        data = os.pread(self.fd, want, self.pos) if want > 0 else b""
        self.pos += len(data)
        self.buf = rest + data if rest else data
        return self.buf if data else b""


class LogSegment:
    """Records with offsets in ``[base_offset, next segment's base)``, plus two indexes."""

    def __init__(
        self, directory: Path, base_offset: int, suffix: str, fd: int, params: IndexParams
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.suffix = suffix
        self._fd = _Fd(fd)
        self.params = params
        self.size = 0
        self.next_offset = base_offset
        self.first_timestamp: int | None = None
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_last_index_entry = 0
        self._count: int | None = 0
        self.offset_index: OffsetIndex
        self.time_index: TimeIndex

    # ---- files -------------------------------------------------------------------------
    def path(self, ext: str = LOG_EXT, suffix: str | None = None) -> Path:
        return self.dir / file_name(
            self.base_offset, ext, self.suffix if suffix is None else suffix
        )

    @property
    def fd(self) -> int:
        return self._fd.fd

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
        seg = cls(directory, base_offset, suffix, fd, params)
        seg.offset_index = OffsetIndex.create(
            seg.path(INDEX_EXT), base_offset, params.max_index_bytes
        )
        seg.time_index = TimeIndex.create(
            seg.path(TIMEINDEX_EXT), base_offset, params.max_index_bytes
        )
        return seg

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        params: IndexParams,
        suffix: str = "",
        recover: bool = False,
    ) -> tuple[LogSegment, bool]:
        """Open an existing segment. Returns (segment, truncated).

        With ``recover`` (or when an index fails its sanity check) every record is
        CRC-validated, the indexes are rebuilt, and the file is truncated at the first bad
        record.
        """
        fd = os.open(directory / file_name(base_offset, LOG_EXT, suffix), os.O_RDWR, 0o644)
        seg = cls(directory, base_offset, suffix, fd, params)
        seg.size = os.fstat(fd).st_size
        if not recover:
            try:
                seg._load_indexes()
                return seg, False
            except (IndexCorrupt, OSError):
                pass
        return seg, seg.recover()

    def _load_indexes(self) -> None:
        self.offset_index = OffsetIndex.load(
            self.path(INDEX_EXT), self.base_offset, self.params.max_index_bytes, self.size
        )
        # Scan the tail after the last offset-index entry for the next offset and max timestamp.
        _, pos = self.offset_index.lookup(self.offset_index.last_offset())
        max_ts, max_off = -1, self.base_offset
        last = self.base_offset - 1
        consumed = pos
        try:
            for buf, p, q in self.iter_positions(pos):
                _l, _c, off, ts, *_ = HEADER.unpack_from(buf, p)
                if off <= last or off < self.base_offset or q - p < HEADER_SIZE:
                    raise IndexCorrupt(f"{self.path()}: offsets out of order")
                last = off
                if ts > max_ts:
                    max_ts, max_off = ts, off
                consumed += q - p
        except struct.error:
            raise IndexCorrupt(f"{self.path()}: bad record header") from None
        if consumed != self.size:
            raise IndexCorrupt(f"{self.path()}: torn record at the end")
        self.next_offset = last + 1 if last >= self.base_offset else self.base_offset
        self.time_index = TimeIndex.load(
            self.path(TIMEINDEX_EXT),
            self.base_offset,
            self.params.max_index_bytes,
            self.next_offset,
        )
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_off
        if self.time_index.last_timestamp() >= max_ts and self.time_index.entries:
            self.max_timestamp = self.time_index.last_timestamp()
            self.offset_of_max_timestamp = self.time_index.offsets[-1]
        self._count = None
        if self.size:
            self.first_timestamp = HEADER.unpack_from(os.pread(self.fd, HEADER_SIZE, 0))[3]

    def recover(self) -> bool:
        """Rebuild both indexes by a CRC-checked scan; truncate at the first bad record."""
        self.offset_index = OffsetIndex.create(
            self.path(INDEX_EXT), self.base_offset, self.params.max_index_bytes
        )
        self.time_index = TimeIndex.create(
            self.path(TIMEINDEX_EXT), self.base_offset, self.params.max_index_bytes
        )
        self.next_offset, self.max_timestamp, self.offset_of_max_timestamp = (
            self.base_offset,
            -1,
            self.base_offset,
        )
        self.first_timestamp, self._count, self.bytes_since_last_index_entry = None, 0, 0
        valid = 0
        reader = ChunkReader(self.fd, 0, self.size)
        buf = reader.next(0)
        bad = False
        while buf and not bad:
            p, n = 0, len(buf)
            while p < n:
                end = check_record(buf, p, n)
                if end < 0:
                    complete = n - p >= 4 and p + 4 + LENGTH.unpack_from(buf, p)[0] <= n
                    bad = complete or reader.pos >= reader.end
                    break
                _l, _c, off, ts, *_ = HEADER.unpack_from(buf, p)
                if off < self.next_offset:
                    bad = True
                    break
                self.index_record(off, ts, valid, end - p)
                valid += end - p
                p = end
            if not bad:
                buf = reader.next(p)
        truncated = valid < self.size
        if truncated:
            os.ftruncate(self.fd, valid)
            self.size = valid
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
        )
        return truncated

    def index_record(self, offset: int, timestamp: int, position: int, size: int) -> None:
        """Account one record at ``position`` (already in the file or about to be)."""
        if self.first_timestamp is None:
            self.first_timestamp = timestamp
        if timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = timestamp, offset
        if self.bytes_since_last_index_entry > self.params.index_interval_bytes:
            self.offset_index.append(offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size
        self.next_offset = offset + 1
        if self._count is not None:
            self._count += 1

    def rename(self, new_suffix: str) -> None:
        """Rename the three files; the log file goes last so recovery keys on it."""
        for ext in (INDEX_EXT, TIMEINDEX_EXT, LOG_EXT):
            src = self.path(ext)
            if src.exists():
                os.replace(src, self.path(ext, new_suffix))
        self.offset_index.path = self.path(INDEX_EXT, new_suffix)
        self.time_index.path = self.path(TIMEINDEX_EXT, new_suffix)
        self.suffix = new_suffix

    # ---- writes ------------------------------------------------------------------------
    def append_batch(
        self,
        data: bytes,
        first_offset: int,
        count: int,
        max_ts: int,
        max_ts_offset: int,
        first_ts: int,
    ) -> None:
        """Append a whole encoded batch (one write) and index it like a Kafka batch."""
        if self.first_timestamp is None:
            self.first_timestamp = first_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_ts_offset
        if self.bytes_since_last_index_entry > self.params.index_interval_bytes:
            self.offset_index.append(first_offset, self.size)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        os.pwrite(self.fd, data, self.size)
        self.size += len(data)
        self.bytes_since_last_index_entry += len(data)
        self.next_offset = first_offset + count
        if self._count is not None:
            self._count += count

    def write_raw(self, data: bytes) -> None:
        os.pwrite(self.fd, data, self.size)
        self.size += len(data)

    def on_become_inactive(self) -> None:
        """Record the final max timestamp so retention and lookups see it after a restart."""
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
        )

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()

    def close_index_files(self) -> None:
        self.offset_index.close()
        self.time_index.close()

    # ---- reads -------------------------------------------------------------------------
    def is_full_index(self) -> bool:
        return self.offset_index.is_full() or self.time_index.is_full()

    def largest_timestamp(self) -> float:
        """Largest record timestamp, or the file's mtime when the segment has no records."""
        if self.max_timestamp >= 0 and self.next_offset > self.base_offset:
            return self.max_timestamp
        return self.last_modified_ms()

    def last_modified_ms(self) -> int:
        return int(os.fstat(self.fd).st_mtime * 1000)

    def record_count(self) -> int:
        if self._count is None:
            self._count = sum(1 for _ in self.iter_positions())
        return self._count

    def iter_positions(
        self, start: int = 0, end: int | None = None
    ) -> Iterator[tuple[bytes, int, int]]:
        """Yield (chunk, record start, record end) for every record in ``[start, end)``."""
        reader = ChunkReader(self.fd, start, self.size if end is None else end)
        buf = reader.next(0)
        while buf:
            p, n = 0, len(buf)
            while p + 4 <= n:
                q = p + 4 + LENGTH.unpack_from(buf, p)[0]
                if q > n:
                    break
                yield buf, p, q
                p = q
            buf = reader.next(p)

    def read(self, start_offset: int, max_count: int, max_position: int) -> list[StoredMessage]:
        """Messages with offset >= ``start_offset`` among the bytes below ``max_position``.

        Decoded straight from the header unpacked once: this is the read hot path.
        """
        _, pos = self.offset_index.lookup(start_offset)
        out: list[StoredMessage] = []
        unpack = HEADER.unpack_from
        for buf, p, _q in self.iter_positions(min(pos, max_position), max_position):
            _len, _crc, off, ts, pt, _hz, kl, vl, hl = unpack(buf, p)
            if off < start_offset:
                continue
            q = p + HEADER_SIZE
            key = None if kl < 0 else bytes(buf[q : q + kl])
            q += kl if kl > 0 else 0
            value = None if vl < 0 else bytes(buf[q : q + vl])
            q += vl if vl > 0 else 0
            headers = decode_headers(bytes(buf[q : q + hl])) if hl else {}
            out.append(StoredMessage(MessageId(0, off), key, value, headers, pt, ts))
            if len(out) >= max_count:
                break
        return out

    def find_offset_by_timestamp(
        self, timestamp: int, max_position: int, min_offset: int
    ) -> int | None:
        """First offset >= ``min_offset`` in this segment whose timestamp is >= ``timestamp``."""
        start = max(self.time_index.lookup_before(timestamp), min_offset)
        _, pos = self.offset_index.lookup(start)
        for buf, p, _q in self.iter_positions(min(pos, max_position), max_position):
            _l, _c, off, ts, *_ = HEADER.unpack_from(buf, p)
            if ts >= timestamp and off >= min_offset:
                return int(off)
        return None

    def finish_rewrite(
        self, count: int, last_offset: int, first_ts: int | None, max_ts: int, max_ts_offset: int
    ) -> None:
        """Set the summary of a segment whose records the cleaner wrote with ``write_raw``."""
        self._count = count
        self.next_offset = last_offset + 1 if count else self.base_offset
        self.first_timestamp = first_ts
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_ts_offset
        self.on_become_inactive()
