"""Loading a segment's indexes on open, or rebuilding them: what ``LogSegment.open`` runs.

An index is a cache of the ``.log`` file (``index.py``), so it is trusted only after a
sanity check (``load_indexes``): its last entries must point at batches that bear them
out, and the batches past the last offset entry are read and checked. Anything else
raises ``IndexCorrupt``, and the owner of the log rebuilds both indexes by a checked scan
of the whole file (``recover``); read-only and ``.cleaned`` segments are never repaired.

The scan truncates only a torn tail: bytes that hold offsets below the recovery point
were fsynced, so a bad batch among them is kept (``damaged_at``) and start-up deletes
nothing it could not read.

These are ``LogSegment``'s own methods moved out, so they set its figures (the record
count, the timestamps, ``next_offset``) and use its descriptor as the methods did.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from compactlog.errors import CorruptData
from compactlog.storage.batch import HEADER_SIZE
from compactlog.storage.segmented import lookups
from compactlog.storage.segmented.index import (
    INDEX_EXT,
    TIMEINDEX_EXT,
    IndexCorrupt,
    OffsetIndex,
    TimeIndex,
)

if TYPE_CHECKING:
    from compactlog.storage.segmented.segment import LogSegment

log = logging.getLogger(__name__)


def load_indexes(seg: LogSegment) -> None:
    """Trust the index files after a sanity check: the last offset entry must point at
    a batch of its offset, the last time entry at a batch of its timestamp, and the
    batches after the last offset entry are checked."""
    seg.offset_index = OffsetIndex.load(
        seg.path(INDEX_EXT), seg.base_offset, seg.params.max_index_bytes, seg.size
    )
    entry_offset, pos = seg.offset_index.lookup(seg.offset_index.last_offset())
    max_ts, max_off = -1, seg.base_offset
    last = seg.base_offset - 1
    try:
        for _b, _p, header, at in seg.batches(pos, seg.size):
            first = header.first_id.entry_id
            if at == pos and pos and first != entry_offset:
                raise IndexCorrupt(f"{seg.path(INDEX_EXT)}: last entry points elsewhere")
            if first <= last or header.first_id.ledger_id or header.last_id.ledger_id:
                raise IndexCorrupt(f"{seg.path()}: offsets out of order")
            last = header.last_id.entry_id
            if header.max_event_time_ms > max_ts:
                max_ts, max_off = header.max_event_time_ms, first
        if seg.size:
            first_batch = next(seg.batches(0, seg.size, chunk=HEADER_SIZE))
            seg.first_timestamp = first_batch[2].max_event_time_ms
        seg.next_offset = last + 1 if last >= seg.base_offset else seg.base_offset
        seg.time_index = TimeIndex.load(
            seg.path(TIMEINDEX_EXT),
            seg.base_offset,
            seg.params.max_index_bytes,
            seg.next_offset,
        )
        entries = seg.time_index.entries
        if entries and not lookups.time_entry_holds(
            seg, seg.time_index.timestamps[-1], seg.time_index.offsets[-1], seg.size
        ):
            raise IndexCorrupt(f"{seg.path(TIMEINDEX_EXT)}: last entry does not match")
    except CorruptData as exc:
        raise IndexCorrupt(str(exc), damage=exc) from None
    if not seg.index_trusted:
        raise IndexCorrupt(f"{seg.path(INDEX_EXT)}: an entry does not match its batch")
    seg.max_timestamp, seg.offset_of_max_timestamp = max_ts, max_off
    if seg.time_index.last_timestamp() >= max_ts and seg.time_index.entries:
        seg.max_timestamp = seg.time_index.last_timestamp()
        seg.offset_of_max_timestamp = seg.time_index.offsets[-1]
    seg._count = seg.batch_count = None


def recover(seg: LogSegment, recovery_point: int) -> bool:
    """Rebuild both indexes by a checked scan; return True if the file was truncated.

    The first bad batch (torn, flipped, or offsets not above the previous batch's) ends
    the scan. Kafka truncates there; so do we, but only in the tail: when every offset
    before the bad batch is below ``recovery_point``, the bad bytes hold offsets that
    were fsynced, so they are no torn write. They are kept (``damaged_at``), reads of
    them raise ``CorruptData``, and start-up deletes nothing it could not read.
    """
    seg._new_indexes()
    seg.index_trusted = True
    seg.next_offset, seg.max_timestamp = seg.base_offset, -1
    seg.offset_of_max_timestamp = seg.base_offset
    seg.first_timestamp, seg._count, seg.bytes_since_last_index_entry = None, 0, 0
    seg.batch_count = 0
    valid = 0
    last = seg.base_offset - 1
    try:
        for _b, _p, header, pos in seg.batches(0, seg.size):
            first = header.first_id.entry_id
            if first <= last or header.first_id.ledger_id or header.last_id.ledger_id:
                raise CorruptData(
                    f"{seg.where}, byte {pos}: offset {first} after {last}",
                    position=f"{seg.where}, byte {pos}",
                )
            last = header.last_id.entry_id
            seg.index_batch(first, last, header.count, header.max_event_time_ms, pos, header.size)
            valid = pos + header.size
    except CorruptData as exc:
        if last + 1 < recovery_point:
            seg.damaged_at = valid
            log.error("%s; kept: it holds offsets below the recovery point", exc)
        else:
            log.warning("%s; truncating the segment at byte %d", exc, valid)
    truncated = valid < seg.size and seg.damaged_at is None
    if truncated:
        with seg._fd() as fd:
            os.ftruncate(fd, valid)
        seg.size = valid
    seg.time_index.maybe_append(
        seg.max_timestamp, seg.offset_of_max_timestamp, skip_full_check=True
    )
    return truncated
