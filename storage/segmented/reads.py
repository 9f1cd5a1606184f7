"""Reads across the segments of one log: the batches of an offset range, for the one reader.

A read of offsets ``[start, end)`` finds the segment holding ``start`` (bisect over base
offsets), the batch holding it (offset index), and from there hands every batch on as it
is stored to ``storage.read_range.read_chunks`` (the reader LEDGER topics use too), which
trims only the first and last. Every batch passes ``batch.check`` on the way
(``scan.iter_batches``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence

from compactlog.storage.batch import decode_message, walk
from compactlog.storage.read_range import Chunk, ViewBatch
from compactlog.storage.segmented.segment import LogSegment, SegmentGone
from compactlog.storage.types import MessageId, StoredMessage


def view_batches(
    segments: Sequence[LogSegment],
    bases: Sequence[int],
    active_size: int,
    start: int,
    end: int,
) -> Iterator[ViewBatch]:
    """Checked batches holding offsets ``start <= offset < end``, for the one reader
    (``storage.read_range.read_chunks``), which trims the batches at the ends.

    ``segments``/``bases`` are one snapshot of the log and ``active_size`` the size of its
    last segment taken with it: bytes past it may be an append still in progress.
    """
    lo = MessageId(0, start)
    last_seg = segments[-1]
    for seg in segments[max(bisect.bisect_right(bases, start) - 1, 0) :]:
        if seg.base_offset >= end:
            return
        stop = active_size if seg is last_seg else seg.size
        lost = seg.lost  # offsets its file lost (``sealed.py``): an error, never a skip
        for buf, p, header, _pos in seg.batches_from(
            start, stop if lost is None else min(stop, lost.position)
        ):
            if header.last_id < lo:
                continue
            if header.first_id.entry_id >= end:
                return
            yield memoryview(buf)[p : p + header.size], header, lo
        if lost is not None and lost.first < end and lost.last >= start:
            raise lost.error(seg.dir.name, seg.path())


# A fresh snapshot: (segments, bases, active size, start, end)
Snapshot = tuple[Sequence[LogSegment], Sequence[int], int, int, int]


def resuming(
    segments: Sequence[LogSegment],
    bases: Sequence[int],
    active_size: int,
    start: int,
    end: int,
    fresh: Callable[[int, int], Snapshot],
) -> Iterator[ViewBatch]:
    """``view_batches``; when a segment of the snapshot was replaced or deleted since and
    its file is gone (``SegmentGone``), go on from ``fresh(start, end)``, a new snapshot,
    after the last batch handed out. A segment gone from a snapshot that is still current
    is damage, raised as it is."""
    while True:
        try:
            for item in view_batches(segments, bases, active_size, start, end):
                yield item
                start = max(start, item[1].last_id.entry_id + 1)
            return
        except SegmentGone:
            old = set(segments)
            segments, bases, active_size, start, end = fresh(start, end)
            if old <= set(segments):
                raise
            if start >= end:
                return


def pieces(chunk: Chunk | None) -> tuple[list[memoryview | bytes], int, int | None]:
    """A chunk as ``(payload pieces, count, last offset or None)``."""
    if chunk is None or chunk.last_id is None:
        return [], 0, None
    return list(chunk.parts), chunk.count, chunk.last_id.entry_id


def decode(chunks: Iterator[Chunk], where: str) -> list[StoredMessage]:
    """Domain messages of the chunks' records (tools, tests)."""
    out: list[StoredMessage] = []
    for chunk in chunks:
        data = chunk.to_bytes()
        out.extend(decode_message(data[s:e]) for *_w, s, e in walk(data, where))
    return out
