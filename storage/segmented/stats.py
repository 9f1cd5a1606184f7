"""GetTopic's figures of a SEGMENTED topic, computed so that damage cannot make them fail.

Describing a topic must always answer: a failure would drop the topic out of ListTopics
(a lost topic, as far as a user can see). A segment whose batches cannot all be read
counts the records before its damage; reads of the damage itself fail ``DATA_LOSS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from compactlog.errors import CorruptData
from compactlog.storage.segmented.segment import LogSegment

T = TypeVar("T")


@dataclass(frozen=True)
class SegmentedStats:
    entries: int
    bytes: int
    segments: int
    first_offset: int | None
    last_offset: int | None
    log_start_offset: int


def _readable(read: Callable[[], T], fallback: Callable[[], T]) -> T:
    try:
        return read()
    except CorruptData:
        return fallback()


def log_stats(
    segments: Sequence[LogSegment], start: int, first_offset: Callable[[], int | None]
) -> SegmentedStats:
    """Figures over one snapshot; ``first_offset`` reads the first offset at ``start``."""
    entries = sum(_readable(s.record_count, s.readable_count) for s in segments)
    first = segments[0]
    if start > first.base_offset:
        entries -= _readable(lambda: first.count_below(start), lambda: 0)
    end = max((s.next_offset for s in segments), default=start)
    first_off = _readable(first_offset, lambda: start if end > start else None)
    last = max((s.next_offset - 1 for s in segments if s.next_offset > s.base_offset), default=None)
    return SegmentedStats(
        entries=max(entries, 0),
        bytes=sum(s.size for s in segments),
        segments=len(segments),
        first_offset=first_off,
        last_offset=last if first_off is not None else None,
        log_start_offset=start,
    )
