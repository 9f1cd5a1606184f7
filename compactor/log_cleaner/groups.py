"""How a cleaning pass groups the segments it rewrites: each group becomes one ``.cleaned``
segment, so a group must fit one segment's limits (``segment.bytes``,
``segment.index.bytes``) and its offsets must stay within 32 bits of its base offset
(the offset index stores them relative to it)."""

from __future__ import annotations

from collections.abc import Sequence

from compactlog.storage.segmented import LogSegment

_MAX_RELATIVE = 2**32 - 1


def group_segments_by_size(
    segments: Sequence[LogSegment], max_size: int, max_index_size: int, end_offset: int
) -> list[list[LogSegment]]:
    """Consecutive runs whose total log and index sizes and offset span fit one segment."""
    groups: list[list[LogSegment]] = []
    segs = list(segments)
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_size = segs[i].size
        index_size = segs[i].offset_index.size_in_bytes
        time_size = segs[i].time_index.size_in_bytes
        i += 1
        while i < len(segs):
            seg = segs[i]
            last = (segs[i + 1].base_offset if i + 1 < len(segs) else end_offset) - 1
            if (
                log_size + seg.size > max_size
                or index_size + seg.offset_index.size_in_bytes > max_index_size
                or time_size + seg.time_index.size_in_bytes > max_index_size
                or last - group[0].base_offset > _MAX_RELATIVE
            ):
                break
            group.append(seg)
            log_size += seg.size
            index_size += seg.offset_index.size_in_bytes
            time_size += seg.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups
