"""The write half of a ``LogSegment``: a checked append, and its undo.

A batch is appended with one positioned write, looped over short writes
(``files.write_all``), before its index entries and the segment's figures move. Anything
that fails on the way (the write itself: a full disk, a lost permission, no file handle;
an index entry; the sync after it, in ``Log``) rewinds the segment to the ``SegmentMark``
taken before: the file cut back to the last whole batch, index entries dropped in memory
and on disk, the figures restored. So a batch is either whole and acknowledged or gone,
never half there (CONTRACT section 11: acknowledged means stored).

When even the cut fails, the segment is ``torn``: its file may end in bytes of a batch
nobody acknowledged, past ``size`` where no reader looks; the next append cuts them
first, and start-up recovery would truncate them as a torn tail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from compactlog.errors import CompactlogError
from compactlog.storage.segmented.files import TornTail, cut_back, write_all

if TYPE_CHECKING:
    from compactlog.storage.segmented.segment import LogSegment


@dataclass(frozen=True)
class SegmentMark:
    """A segment's size and figures at one moment (``mark``)."""

    size: int
    next_offset: int
    count: int | None
    batches: int | None
    first_timestamp: int | None
    max_timestamp: int
    offset_of_max: int
    bytes_since_index: int
    offset_entries: int
    time_entries: int


def mark(seg: LogSegment) -> SegmentMark:
    return SegmentMark(
        seg.size,
        seg.next_offset,
        seg._count,
        seg.batch_count,
        seg.first_timestamp,
        seg.max_timestamp,
        seg.offset_of_max_timestamp,
        seg.bytes_since_last_index_entry,
        seg.offset_index.entries,
        seg.time_index.entries,
    )


def rewind(seg: LogSegment, to: SegmentMark) -> None:
    """Undo everything appended since ``to``: the file cut back, index entries dropped
    (in memory and on disk), the figures as they were. ``TornTail`` (and ``torn`` set)
    when the file cannot be cut."""
    seg.size, seg.next_offset, seg._count = to.size, to.next_offset, to.count
    seg.batch_count = to.batches
    seg.first_timestamp = to.first_timestamp
    seg.max_timestamp, seg.offset_of_max_timestamp = to.max_timestamp, to.offset_of_max
    seg.bytes_since_last_index_entry = to.bytes_since_index
    with seg._fd() as fd:  # the log first: its bytes are what a reader could be served
        try:
            cut_back(fd, to.size, seg.path())
        except TornTail:
            seg.torn = True
            raise
    # Index entries past the mark are dropped from memory even when their file cannot be
    # cut: the next entry is written over them, and a load refuses entries past the log.
    seg.offset_index.keep_first(to.offset_entries)
    seg.time_index.keep_first(to.time_entries)


def append_batch(
    seg: LogSegment, data: bytes, first: int, last: int, count: int, max_ts: int
) -> SegmentMark:
    """Write ``data`` whole at the end of the segment, then account it, and return the mark
    taken before (for a caller whose sync then fails); on any failure the segment is as it
    was and the error (DISK_FULL, STORAGE_UNAVAILABLE, FILE_LIMIT or ``TornTail``) goes up."""
    before = mark(seg)
    with seg._fd() as fd:
        if seg.torn:
            cut_back(fd, before.size, seg.path())
            seg.torn = False
        try:
            write_all(fd, data, before.size, f"appending to {seg.where}", seg.path())
        except TornTail:
            seg.torn = True
            raise
    try:
        seg.index_batch(first, last, count, max_ts, before.size, len(data))
    except CompactlogError:
        rewind(seg, before)
        raise
    seg.size += len(data)
    return before
