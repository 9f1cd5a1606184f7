"""Start-up recovery of one topic directory (Kafka's LogLoader rules, plus distrust).

1. ``.tmp`` leftovers are unlinked. ``.cleaned`` files are unlinked (a pass that never
   reached its swap), and every ``.swap`` whose base offset is at or above the smallest
   ``.cleaned`` base is unlinked too: such a swap may belong to a replacement that never
   finished its renames, and the original segments are still live. ``.deleted`` files
   stay until step 4 has decided every swap: they may be needed again.
2. ``.log`` segments are opened; a segment holding offsets at or after the recovery point is
   checked batch by batch (length, magic, CRC-32C, increasing offsets). A bad batch in the
   tail (at or after the recovery point: a write the crash tore) truncates the segment
   there and every later segment is dropped, as in Kafka. A bad batch below the recovery
   point held fsynced data: it is kept and reads of it raise ``CorruptData``, because
   start-up never deletes what it could not read. Missing or inconsistent indexes are
   rebuilt. Without a readable recovery point only the last segment counts as unsynced.
3. Each surviving ``.swap`` (a complete cleaned segment) is read end to end first: every
   batch must pass its CRC, offsets must increase, and the file must end where its last
   batch does. One that passes replaces the segments its offset range overlaps and takes
   its final name (a crash after the renames to ``.swap`` gives the cleaned data). One
   that fails never replaces anything: it is set aside (``*.bad-<ms>``), and the
   ``.deleted`` originals it was replacing are renamed back, so the data as it was before
   the pass is served. If those originals are gone too, the offsets are unreadable and
   the topic cannot be served (``CorruptData``; the manager takes it offline).
4. Remaining ``.deleted`` files are unlinked: their deletion was decided and not undone.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from compactlog.errors import CorruptData
from compactlog.storage.segmented import state_file
from compactlog.storage.segmented.files import unlink_quietly
from compactlog.storage.segmented.segment import (
    CLEANED,
    DELETED,
    EXTENSIONS,
    LOG_EXT,
    SWAP,
    IndexParams,
    LogSegment,
    file_name,
)

log = logging.getLogger(__name__)


def _base_of(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head) if len(head) == 20 and head.isdigit() else None


def _unlink_segment_files(directory: Path, base: int, suffix: str = "") -> None:
    for ext in EXTENSIONS:
        unlink_quietly(directory / f"{base:020d}{ext}{suffix}")


@dataclass
class _Leftovers:
    swaps: list[int] = field(default_factory=list)  # bases of complete-looking swaps
    deleted: set[int] = field(default_factory=set)  # bases of .deleted log files


def recover_log_dir(
    directory: Path, params: IndexParams, recovery_point: int | None, sealed_end: int = 0
) -> tuple[list[LogSegment], bool, int]:
    """Bring a topic directory to a consistent state; return (segments by base, truncated,
    the recovery point used). ``sealed_end``: every offset below it is in a segment the
    manifest lists as sealed (synced), never a torn tail to truncate."""
    leftovers = _drop_leftovers(directory)
    if recovery_point is None:
        bases = _live_bases(directory)
        recovery_point = bases[-1] if bases else 0
    recovery_point = max(recovery_point, sealed_end)
    segments, truncated = _open_segments(directory, params, recovery_point)
    for base in sorted(leftovers.swaps):
        _complete_swap(directory, params, recovery_point, segments, base, leftovers)
    for base in sorted(leftovers.deleted):
        _unlink_segment_files(directory, base, DELETED)
    _drop_orphan_indexes(directory)
    for seg in segments[:-1]:
        seg.close_index_files()  # only the active segment is written
    return segments, truncated, recovery_point


def _live_bases(directory: Path) -> list[int]:
    names = os.listdir(directory)
    return sorted(b for n in names if n.endswith(LOG_EXT) and (b := _base_of(n)) is not None)


def _drop_leftovers(directory: Path) -> _Leftovers:
    """Step 1; return the bases of complete swaps and of ``.deleted`` segments."""
    found = _Leftovers()
    min_cleaned: int | None = None
    for name in sorted(os.listdir(directory)):
        path = directory / name
        base = _base_of(name)
        if base is None:
            continue
        if name.endswith(".tmp"):
            path.unlink()
        elif name.endswith(DELETED):
            if name.endswith(LOG_EXT + DELETED):
                found.deleted.add(base)
        elif name.endswith(CLEANED):
            min_cleaned = base if min_cleaned is None else min(min_cleaned, base)
            path.unlink()
        elif name.endswith(SWAP):
            if name.endswith(LOG_EXT + SWAP):
                found.swaps.append(base)
            else:
                path.unlink()  # swap indexes are rebuilt with the swap segment
    for name in sorted(os.listdir(directory)):  # a .deleted index without its log: Kafka
        base = _base_of(name)  # removes every .deleted file; nothing can restore this one
        if base is not None and name.endswith(DELETED) and base not in found.deleted:
            unlink_quietly(directory / name)
    for base in [b for b in found.swaps if min_cleaned is not None and b >= min_cleaned]:
        log.info("%s: dropping incomplete swap segment %d", directory.name, base)
        _unlink_segment_files(directory, base, SWAP)
        found.swaps.remove(base)
    return found


def _drop_orphan_indexes(directory: Path) -> None:
    names = set(os.listdir(directory))
    live = {b for n in names if n.endswith(LOG_EXT) and (b := _base_of(n)) is not None}
    for name in names:  # index files whose segment is gone
        b = _base_of(name)
        if b is not None and name.endswith((".index", ".timeindex")) and b not in live:
            unlink_quietly(directory / name)


def _open_segments(
    directory: Path, params: IndexParams, recovery_point: int
) -> tuple[list[LogSegment], bool]:
    """Step 2: open every ``.log``, checking those that reach the recovery point."""
    bases = _live_bases(directory)
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
    directory: Path,
    params: IndexParams,
    recovery_point: int,
    segments: list[LogSegment],
    base: int,
    leftovers: _Leftovers,
) -> None:
    """Step 3: a swap that reads whole replaces the segments its offsets overlap."""
    swap = LogSegment(directory, base, SWAP, params)
    swap.size = swap.path().stat().st_size
    try:
        swap.verify()
    except CorruptData as exc:
        swap.release()
        _set_aside_swap(directory, base, str(exc))
        _restore_originals(directory, params, recovery_point, segments, base, leftovers)
        return
    swap.recover(recovery_point)  # whole, so this only rebuilds its indexes
    hi = max(swap.next_offset, base + 1)
    old = [
        s for s in segments if base <= s.base_offset < hi or (s.base_offset < base < s.next_offset)
    ]
    for seg in old:
        seg.close_index_files()
        seg.release()
        _unlink_segment_files(directory, seg.base_offset)
        segments.remove(seg)
    swap.rename("")
    segments.append(swap)
    segments.sort(key=lambda s: s.base_offset)
    log.info("%s: completed the swap of cleaned segment %d", directory.name, base)


def _set_aside_swap(directory: Path, base: int, problem: str) -> None:
    for ext in EXTENSIONS:
        path = directory / file_name(base, ext, SWAP)
        if path.exists():
            state_file.set_aside(path, problem)


def _restore_originals(
    directory: Path,
    params: IndexParams,
    recovery_point: int,
    segments: list[LogSegment],
    base: int,
    leftovers: _Leftovers,
) -> None:
    """Rename back the ``.deleted`` segments a damaged swap was replacing: those from its
    base up to the next live segment (retention's ``.deleted`` lie below every live one)."""
    above = [s.base_offset for s in segments if s.base_offset > base]
    limit = min(above) if above else None
    restore = sorted(b for b in leftovers.deleted if b >= base and (limit is None or b < limit))
    for b in restore:
        leftovers.deleted.discard(b)
        for ext in EXTENSIONS:
            src = directory / file_name(b, ext, DELETED)
            if src.exists():
                os.replace(src, directory / file_name(b, ext))
        seg, _ = LogSegment.open(
            directory, b, params, recover=True, recovery_point=max(recovery_point, 2**63)
        )
        segments.append(seg)
        log.warning("%s: restored segment %d that a damaged swap replaced", directory.name, b)
    segments.sort(key=lambda s: s.base_offset)
    covered = any(s.base_offset <= base < max(s.next_offset, s.base_offset + 1) for s in segments)
    if not restore and not covered:
        raise CorruptData(
            f"{directory / file_name(base, LOG_EXT, SWAP)} is damaged and the segments it "
            "replaced are gone: its offsets cannot be read"
        )


def check_synced_end(
    name: str, directory: Path, segments: list[LogSegment], saved: int | None, start: int
) -> None:
    """Every offset below the recovery point ``saved`` was synced: a log whose segments end
    below it (the active one emptied or deleted while stopped) lost data no crash can lose,
    and is not served (``CorruptData``: the topic goes offline). A damaged last segment is
    served up to its damage instead (``DATA_LOSS`` beyond)."""
    end = segments[-1].next_offset if segments else start
    if saved is None or end >= saved or (segments and segments[-1].damaged_at is not None):
        return
    for seg in segments:
        seg.close_index_files()
    raise CorruptData(
        f"{name}: the log ends at offset {end}, but every offset below {saved} was synced: "
        "a segment was emptied, cut or deleted",
        path=directory,
    )
