"""The read side of a Log: snapshots of its segment list, reads, time lookups and stats.

The segment list is copy-on-write (``SegmentView``): writers build a new tuple under the
log's lock, readers grab the current tuple and read without the lock. Segment files are
reached through the process's LRU of descriptors (``handles.py``); a read whose snapshot
holds a segment that was since replaced or deleted, and whose file is gone, resumes on a
fresh snapshot from the next offset it has not yet handed out. So reads are safe against
rolls, retention and the cleaner's swaps without a descriptor per segment.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from compactlog.errors import OffsetOutOfRange
from compactlog.storage.read_range import Chunk, ViewBatch, read_chunks
from compactlog.storage.segmented.reads import decode, pieces, resuming
from compactlog.storage.segmented.segment import LogSegment
from compactlog.storage.segmented.stats import SegmentedStats, log_stats
from compactlog.storage.types import MessageId, StoredMessage

__all__ = ["LogReads", "SegmentView", "segment_view"]


@dataclass(frozen=True)
class SegmentView:
    bases: tuple[int, ...]
    segments: tuple[LogSegment, ...]


def segment_view(segments: Sequence[LogSegment]) -> SegmentView:
    return SegmentView(tuple(s.base_offset for s in segments), tuple(segments))


class LogReads:
    """Base of Log: needs its lock, name, offsets, segment view and open check."""

    name: str
    log_start_offset: int
    next_offset: int
    _lock: threading.RLock
    _view: SegmentView

    @property
    def active_segment(self) -> LogSegment:
        raise NotImplementedError

    def _check_open(self) -> None:
        raise NotImplementedError

    def batches(self, start: int, end: int, clamp: bool = False) -> Iterator[ViewBatch]:
        """Checked batches of offsets ``[start, end)`` over one snapshot of the segment
        list. A start below the log start offset is OUT_OF_RANGE, or, with ``clamp``,
        moves up to it (a subscription whose position retention passed)."""
        view, active_size, start, end = self._snapshot(start, end, clamp)
        if start >= end:
            return iter(())
        return resuming(view.segments, view.bases, active_size, start, end, self._fresh)

    def _fresh(
        self, start: int, end: int
    ) -> tuple[Sequence[LogSegment], Sequence[int], int, int, int]:
        """A new snapshot for a read that found a segment of its old one gone."""
        view, active_size, start, end = self._snapshot(start, end, clamp=True)
        return view.segments, view.bases, active_size, start, end

    def _snapshot(self, start: int, end: int, clamp: bool) -> tuple[SegmentView, int, int, int]:
        with self._lock:
            self._check_open()
            if start < self.log_start_offset:
                if not clamp:
                    raise OffsetOutOfRange(
                        f"offset {start} is below the log start offset "
                        f"{self.log_start_offset} of {self.name}",
                        topic=self.name,
                        offset=start,
                        log_start_offset=self.log_start_offset,
                    )
                start = self.log_start_offset
            return self._view, self._view.segments[-1].size, start, min(end, self.next_offset)

    def _chunks(self, start: int, end: int, max_messages: int, max_bytes: int) -> Iterator[Chunk]:
        limit = max_messages if max_messages > 0 else 2**62
        stop = MessageId(0, max(end, 1) - 1)
        return read_chunks(
            self.batches(start, end), f"topic {self.name!r}", stop, limit, limit, max_bytes
        )

    def read(self, start_offset: int, max_messages: int) -> list[StoredMessage]:
        """Messages from ``start_offset`` (or the next surviving offset after it), decoded."""
        return decode(self._chunks(start_offset, 2**63, max_messages, 2**62), f"topic {self.name}")

    def read_payload(
        self, start_offset: int, end_offset: int, max_messages: int, max_bytes: int
    ) -> tuple[list[memoryview | bytes], int, int | None]:
        """Stored message records of offsets ``[start_offset, end_offset)`` as they are on
        disk: ``(pieces, count, last offset or None)``. The pieces concatenated are the
        bytes of a ``ReadResponse`` of at most ``max_bytes`` unless its first message alone
        is more (``read_range.read_chunks``)."""
        return pieces(next(self._chunks(start_offset, end_offset, max_messages, max_bytes), None))

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """First offset at or after the log start whose timestamp is >= ``timestamp_ms``."""
        with self._lock:
            self._check_open()
            view, active_size, start = self._view, self.active_segment.size, self.log_start_offset
        for seg in view.segments:
            # a damaged segment's figures stop at its damage: scan it (and meet the damage)
            skip = seg.next_offset <= start or seg.max_timestamp < timestamp_ms
            if skip and (seg.damaged_at is None or seg.lost is not None):  # lost: manifest's
                continue
            end = active_size if seg is view.segments[-1] else seg.size
            lost = seg.lost
            found = seg.find_offset_by_timestamp(
                timestamp_ms, end if lost is None else min(end, lost.position), start
            )
            if found is not None:
                return found
            if lost is not None:  # the first such record may be among the lost ones
                raise lost.error(self.name, seg.path())
        return None

    def stats(self) -> SegmentedStats:
        """GetTopic's figures (``stats.py``: a damaged segment does not make them fail)."""
        with self._lock:
            self._check_open()
            view, start, end = self._view, self.log_start_offset, self.next_offset
            return log_stats(
                view.segments, start, lambda: pieces(next(self._chunks(start, end, 1, 1), None))[2]
            )
