"""Start-up recovery of one topic directory (Kafka's LogLoader rules).

1. ``.deleted`` files and ``.tmp`` leftovers are unlinked: their deletion was already decided.
2. ``.cleaned`` files are unlinked, and every ``.swap`` whose base offset is at or above the
   smallest ``.cleaned`` base is unlinked too: the cleaner renames ``.cleaned`` → ``.swap`` in
   descending order, so such a swap may belong to a replacement that never finished its
   renames. A crash before all renames to ``.swap`` therefore gives back the original data.
3. ``.log`` segments are opened; a segment holding offsets at or after the recovery point is
   checked batch by batch (length, magic, CRC-32C, increasing offsets). A bad batch in the
   tail (at or after the recovery point: a write the crash tore) truncates the segment
   there and every later segment is dropped, as in Kafka. A bad batch below the recovery
   point held fsynced data: it is kept and reads of it raise ``CorruptData``, because
   start-up never deletes what it could not read. Missing or inconsistent indexes are
   rebuilt.
4. Each surviving ``.swap`` (a complete cleaned segment) replaces the segments its offset range
   overlaps and is renamed to its final name: a crash after the renames to ``.swap`` gives
   the cleaned data.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from compactlog.storage.segmented.files import unlink_quietly
from compactlog.storage.segmented.segment import (
    CLEANED,
    DELETED,
    EXTENSIONS,
    LOG_EXT,
    SWAP,
    IndexParams,
    LogSegment,
)

log = logging.getLogger(__name__)


def _base_of(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head) if len(head) == 20 and head.isdigit() else None


def _unlink_segment_files(directory: Path, base: int, suffix: str = "") -> None:
    for ext in EXTENSIONS:
        unlink_quietly(directory / f"{base:020d}{ext}{suffix}")


def recover_log_dir(
    directory: Path, params: IndexParams, recovery_point: int
) -> tuple[list[LogSegment], bool]:
    """Bring a topic directory to a consistent state; return (segments by base, truncated)."""
    swap_bases = _drop_leftovers(directory)
    segments, truncated = _open_segments(directory, params, recovery_point)
    for base in sorted(swap_bases):
        _complete_swap(directory, params, recovery_point, segments, base)
    return segments, truncated


def _drop_leftovers(directory: Path) -> list[int]:
    """Steps 1 and 2 and orphaned index files; return the bases of complete swaps."""
    swap_bases: list[int] = []
    min_cleaned: int | None = None
    for name in sorted(os.listdir(directory)):
        path = directory / name
        base = _base_of(name)
        if name.endswith((DELETED, ".tmp")) and base is not None:
            path.unlink()
        elif name.endswith(CLEANED) and base is not None:
            min_cleaned = base if min_cleaned is None else min(min_cleaned, base)
            path.unlink()
        elif name.endswith(SWAP) and base is not None:
            if name.endswith(LOG_EXT + SWAP):
                swap_bases.append(base)
            else:
                path.unlink()  # swap indexes are rebuilt with the swap segment
    for base in [b for b in swap_bases if min_cleaned is not None and b >= min_cleaned]:
        log.info("%s: dropping incomplete swap segment %d", directory.name, base)
        _unlink_segment_files(directory, base, SWAP)
        swap_bases.remove(base)
    names = set(os.listdir(directory))
    live = {b for n in names if n.endswith(LOG_EXT) and (b := _base_of(n)) is not None}
    live.update(swap_bases)
    for name in names:  # index files whose segment is gone
        b = _base_of(name)
        if b is not None and not name.endswith((LOG_EXT, SWAP)) and b not in live:
            unlink_quietly(directory / name)
    return swap_bases


def _open_segments(
    directory: Path, params: IndexParams, recovery_point: int
) -> tuple[list[LogSegment], bool]:
    """Step 3: open every ``.log``, checking those that reach the recovery point."""
    names = os.listdir(directory)
    bases = sorted(b for n in names if n.endswith(LOG_EXT) and (b := _base_of(n)) is not None)
    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        must_check = next_base is None or next_base > recovery_point
        seg, cut = LogSegment.open(
            directory, base, params, recover=must_check, recovery_point=recovery_point
        )
        segments.append(seg)
        if cut:
            log.warning(
                "%s: truncated segment %d at byte %d (torn or corrupt batch)",
                directory.name,
                base,
                seg.size,
            )
            for later in bases[i + 1 :]:
                _unlink_segment_files(directory, later)
            return segments, True
    return segments, False


def _complete_swap(
    directory: Path, params: IndexParams, recovery_point: int, segments: list[LogSegment], base: int
) -> None:
    """Step 4: the swap replaces the segments its offsets overlap, and takes its name."""
    swap, _ = LogSegment.open(
        directory, base, params, suffix=SWAP, recover=True, recovery_point=recovery_point
    )
    hi = max(swap.next_offset, base + 1)
    old = [
        s for s in segments if base <= s.base_offset < hi or (s.base_offset < base < s.next_offset)
    ]
    for seg in old:
        seg.close_index_files()
        _unlink_segment_files(directory, seg.base_offset)
        segments.remove(seg)
    swap.rename("")
    segments.append(swap)
    segments.sort(key=lambda s: s.base_offset)
    log.info("%s: completed the swap of cleaned segment %d", directory.name, base)
