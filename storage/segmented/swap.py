"""Swapping in a ``.cleaned`` segment written by another process (a cleaning worker).

The worker reads closed segments and writes the cleaned copy beside them; the server,
which owns the log, checks the copy and swaps it in with the log's own renames
(``Log.replace_segments``: ``.cleaned`` → ``.swap`` → old ``.deleted`` → final name), so
start-up recovery resolves a crash during the swap exactly as for an in-process pass.
"""

from __future__ import annotations

from collections.abc import Sequence

from compactlog.errors import CorruptData
from compactlog.storage.segmented.files import unlink_quietly
from compactlog.storage.segmented.index import IndexCorrupt
from compactlog.storage.segmented.log import CleaningAborted, Log
from compactlog.storage.segmented.segment import CLEANED, EXTENSIONS, LogSegment, file_name


def remove_cleaned(log: Log, base_offset: int) -> None:
    for ext in EXTENSIONS:
        unlink_quietly(log.dir / file_name(base_offset, ext, CLEANED))


def swap_in_cleaned(log: Log, base_offset: int, group_bases: Sequence[int]) -> None:
    """Swap the ``.cleaned`` segment at ``base_offset`` in for the closed segments at
    ``group_bases``. CleaningAborted, and the file removed, when those segments are no
    longer all there, or the file does not load whole or reaches past the group."""
    segments = log.segments  # one copy-on-write snapshot
    closed = {s.base_offset: s for s in segments[:-1]}
    old = [closed[b] for b in group_bases if b in closed]
    later = [s.base_offset for s in segments if group_bases and s.base_offset > group_bases[-1]]
    try:
        if not old or len(old) != len(group_bases) or base_offset != group_bases[0]:
            raise CleaningAborted(f"{log.name}: segments changed during cleaning")
        try:
            new = LogSegment.open_cleaned(log.dir, base_offset, log.index_params())
        except (IndexCorrupt, CorruptData, OSError) as exc:
            raise CleaningAborted(f"{log.name}: the cleaned segment is unusable: {exc}") from None
        try:
            if later and new.next_offset > later[0]:
                raise CleaningAborted(f"{log.name}: cleaned segment {base_offset} overlaps")
            log.run_hook("cleaned")
            log.replace_segments(new, old)
        except CleaningAborted:
            new.close_index_files()
            raise
    except CleaningAborted:
        remove_cleaned(log, base_offset)
        raise
