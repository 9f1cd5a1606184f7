"""Start-up recovery of one topic directory (Kafka's LogLoader rules).

1. ``.deleted`` files and ``.tmp`` leftovers are unlinked: their deletion was already decided.
2. ``.cleaned`` files are unlinked, and every ``.swap`` whose base offset is at or above the
   smallest ``.cleaned`` base is unlinked too: the cleaner renames ``.cleaned`` → ``.swap`` in
   descending order, so such a swap may belong to a replacement that never finished its
   renames. A crash before all renames to ``.swap`` therefore gives back the original data.
3. ``.log`` segments are opened; a segment holding offsets at or after the recovery point is
   CRC-validated record by record and truncated at the first bad record, and every later
   segment is dropped. Missing or inconsistent indexes are rebuilt.
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
    bases = sorted(b for n in names if n.endswith(LOG_EXT) and (b := _base_of(n)) is not None)
    for name in names:  # index files whose segment is gone
        b = _base_of(name)
        if (
            b is not None
            and not name.endswith((LOG_EXT, SWAP))
            and b not in bases
            and b not in swap_bases
        ):
            unlink_quietly(directory / name)

    segments: list[LogSegment] = []
    truncated = False
    for i, base in enumerate(bases):
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        must_check = next_base is None or next_base > recovery_point
        seg, cut = LogSegment.open(directory, base, params, recover=must_check)
        segments.append(seg)
        if cut:
            truncated = True
            log.warning(
                "%s: truncated segment %d at byte %d (torn or corrupt record)",
                directory.name,
                base,
                seg.size,
            )
            for later in bases[i + 1 :]:
                _unlink_segment_files(directory, later)
            break

    for base in sorted(swap_bases):
        swap, _ = LogSegment.open(directory, base, params, suffix=SWAP, recover=True)
        hi = max(swap.next_offset, base + 1)
        old = [
            s
            for s in segments
            if base <= s.base_offset < hi or (s.base_offset < base < s.next_offset)
        ]
        for seg in old:
            seg.close_index_files()
            _unlink_segment_files(directory, seg.base_offset)
            segments.remove(seg)
        swap.rename("")
        segments.append(swap)
        segments.sort(key=lambda s: s.base_offset)
        log.info("%s: completed the swap of cleaned segment %d", directory.name, base)
    return segments, truncated
