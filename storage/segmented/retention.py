"""Which segments retention deletes: always a prefix of the log (Kafka's rules).

A predicate looks at a segment and the one after it (None for the active segment); the
prefix ends at the first segment it rejects, and the empty active segment always stays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compactlog.storage.segmented.segment import LogSegment

Predicate = Callable[[LogSegment, LogSegment | None], bool]


def by_time(now_ms: int, retention_ms: int) -> Predicate:
    """Segments whose newest timestamp is older than ``retention.ms``."""
    return lambda seg, _next: now_ms - seg.largest_timestamp() > retention_ms


def by_size(segments: Sequence[LogSegment], retention_bytes: int) -> Predicate:
    """Whole segments while what remains stays at or above ``retention.bytes``."""
    excess = sum(s.size for s in segments) - retention_bytes

    def over_size(seg: LogSegment, _next: LogSegment | None) -> bool:
        nonlocal excess
        if excess - seg.size < 0:
            return False
        excess -= seg.size
        return True

    return over_size


def below(log_start_offset: int, next_offset: int) -> Predicate:
    """Segments wholly below the log start offset."""

    def wholly_below(seg: LogSegment, nxt: LogSegment | None) -> bool:
        if nxt is not None:
            return nxt.base_offset <= log_start_offset
        return log_start_offset >= next_offset

    return wholly_below


def doomed_prefix(segments: Sequence[LogSegment], predicate: Predicate) -> list[LogSegment]:
    doomed: list[LogSegment] = []
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        if (nxt is None and seg.size == 0) or not predicate(seg, nxt):
            break  # the empty active segment always stays
        doomed.append(seg)
    return doomed
