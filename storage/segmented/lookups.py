"""Index lookups of one segment, each checked against the batch it points at.

An index is a cache (``index.py``), so an entry is never trusted on its own word: the
batch at an offset-index entry's position must start at the entry's offset, and the
batch a time-index entry names (Kafka's ``(largest timestamp so far, offset)``) must
start at that offset and carry that timestamp as its max event time. An entry that fails
(a flipped byte the load-time sanity check could not see) makes that segment's index
untrusted for the rest of the process's life: lookups then scan from the start of the
segment, slower but never skipping a record. ``compactlog check`` reports such indexes;
the next start rebuilds one that fails its checks there.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from compactlog.errors import CorruptData
from compactlog.storage.batch import (
    HEADER_SIZE,
    BatchHeader,
    decode_message,
    payload_of,
    peek_first_entry,
    walk,
)
from compactlog.storage.segmented.scan import READ_CHUNK, Checked

if TYPE_CHECKING:
    from compactlog.storage.segmented.segment import LogSegment

log = logging.getLogger(__name__)


def distrust(seg: LogSegment, what: str, detail: str) -> None:
    if seg.index_trusted:
        seg.index_trusted = False
        log.error(
            "%s: %s entry is wrong (%s); lookups in this segment now scan from its start",
            seg.where,
            what,
            detail,
        )


def batches_from(
    seg: LogSegment, offset: int, end: int, chunk: int = READ_CHUNK
) -> Iterator[Checked]:
    """Checked batches of bytes ``[p, end)`` where ``p`` is the start of the batch holding
    ``offset`` (or of an earlier batch): callers skip batches below what they want."""
    entry_offset, pos = seg.offset_index.lookup(offset) if seg.index_trusted else (0, 0)
    if pos == 0:
        yield from seg.batches(0, end, chunk)
        return
    if pos >= end:
        return  # the indexed batch is not visible yet, so nothing at or after it is
    scan = seg.batches(pos, end, chunk)
    try:
        first = next(scan)
    except CorruptData as exc:
        distrust(seg, "offset index", f"position {pos}: {exc}")
    else:
        if first[2].first_id.entry_id == entry_offset:
            yield first
            yield from scan
            return
        distrust(
            seg, "offset index", f"({entry_offset}, {pos}) points at a batch of another offset"
        )
    yield from seg.batches(0, end, chunk)


def split_points(seg: LogSegment, start: int, end: int, every: int) -> list[int]:
    """Batch starts in ``(start, end)`` at least ``every`` bytes apart, so that the pieces
    between them can be read on several threads: offset-index entries, each checked by
    the header at its position (it must claim the entry's offset; the pieces' reads then
    check every batch). An entry that fails makes the index untrusted, and the segment
    one piece."""
    if not seg.index_trusted:
        return []
    index = seg.offset_index
    positions = index.positions
    points: list[int] = []
    i = bisect.bisect_left(positions, start + every)  # a cut a piece: no walk of the index
    while i < len(positions) and positions[i] < end:
        pos, offset = positions[i], index.offsets[i]
        claimed = peek_first_entry(seg.pread(HEADER_SIZE, pos))
        if claimed != offset:
            distrust(seg, "offset index", f"({offset}, {pos}) points at a batch of {claimed}")
            return []
        points.append(pos)
        i = bisect.bisect_left(positions, pos + every, i + 1)
    return points


def header_starting_at(seg: LogSegment, offset: int, end: int) -> BatchHeader | None:
    """The header of the batch whose first offset is ``offset``, if there is one."""
    for _b, _p, header, _pos in batches_from(seg, offset, end):
        first = header.first_id.entry_id
        if first == offset:
            return header
        if first > offset:
            return None
    return None


def time_entry_holds(seg: LogSegment, timestamp: int, offset: int, end: int) -> bool:
    if timestamp < 0 and offset == seg.base_offset:
        return True  # the entry a segment closed without batches gets
    header = header_starting_at(seg, offset, end)
    return header is not None and header.max_event_time_ms == timestamp


def find_offset_by_timestamp(
    seg: LogSegment, timestamp: int, max_position: int, min_offset: int
) -> int | None:
    """First offset >= ``min_offset`` in the segment whose event time is >= ``timestamp``.

    Batch headers skip whole batches; only a batch whose max event time reaches
    ``timestamp`` has its records decoded.
    """
    start = min_offset
    entry = seg.time_index.entry_before(timestamp) if seg.index_trusted else None
    if entry is not None and entry[1] > min_offset:
        ts, off = entry
        if time_entry_holds(seg, ts, off, max_position):
            start = off
        else:
            distrust(seg, "time index", f"({ts}, {off}) does not match its batch")
    for buf, p, header, pos in batches_from(seg, start, max_position):
        if header.last_id.entry_id < start or header.max_event_time_ms < timestamp:
            continue
        payload = bytes(payload_of(buf, header, p))
        for _l, off, _f, _k, s, e in walk(payload, f"{seg.where}, byte {pos}"):
            if off >= start and decode_message(payload[s:e]).event_time_ms >= timestamp:
                return off
    return None
