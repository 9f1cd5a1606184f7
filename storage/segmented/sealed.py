"""Start-up check of a log's sealed segments against ``segments.manifest`` (``manifest.py``).

After recovery (``recovery.py``) has opened the segment files, each sealed one is compared
with its entry (``manifest_check.compare``: size and last offset always, the batch count
where recovery scanned the file). A segment gone, cut short or ending early keeps its place
in the log with the offsets it lost (``LogSegment.lost``; a gone one becomes a
``MissingSegment``), so a read that reaches them fails ``DATA_LOSS`` naming the topic, the
file and the offsets, and offsets are never reused; the rest of the log reads and appends
as before. That is what a Kafka user expects of a partition with a bad segment: the data
around it served, the damage an error rather than a skip, and DeleteRecords (or retention)
past it as the way to give it up, which drops its entry.

Not damage: an entry wholly below the log start offset (retention deleted it and the
crash came before the manifest was rewritten), an entry without batches, a segment the
manifest does not list yet (sealed after its last write: added, as recovery found it),
and a ``swap`` line whose cleaned segment is what the files hold.

Without a usable manifest (a data dir from before it, or a damaged file, set aside) one is
built from the sealed segments found, each read whole first; when one is not whole, none
is built (logged; ``compactlog check`` reports it) and the next start tries again.
"""

from __future__ import annotations

import logging
from pathlib import Path

from compactlog.errors import CorruptData
from compactlog.storage.segmented.index import INDEX_EXT, TIMEINDEX_EXT, OffsetIndex, TimeIndex
from compactlog.storage.segmented.manifest import PendingSwap, SegmentManifest, figures_of
from compactlog.storage.segmented.manifest_check import Figures, LostRange, compare, missing
from compactlog.storage.segmented.segment import IndexParams, LogSegment

log = logging.getLogger(__name__)


class MissingSegment(LogSegment):
    """A sealed segment whose file is gone: its offsets, none of its bytes."""

    def flush(self) -> None:
        """Nothing of it is written."""


def found_figures(seg: LogSegment) -> Figures:
    last = max(seg.next_offset, seg.base_offset) - 1
    return Figures(seg.base_offset, last, seg.size, seg.batch_count, seg.max_timestamp)


def check_sealed(
    manifest: SegmentManifest, segments: list[LogSegment], log_start: int, params: IndexParams
) -> tuple[list[LogSegment], bool]:
    """The log's segments with the damage marked; True when the last one is sealed, so a
    new active segment must follow it."""
    if manifest.entries is None:
        _build(manifest, segments)
        return segments, False
    entries = manifest.entries
    live = {s.base_offset: s for s in segments}
    changed = _settle_swap(manifest, entries, live)
    top = max(entries, default=-1)
    for seg in segments:
        expected = entries.get(seg.base_offset)
        if expected is not None:
            _compare(seg, expected)
        elif seg is not segments[-1]:  # sealed after the manifest's last write
            entries[seg.base_offset] = figures_of(seg)
            changed = True
            if seg.base_offset < top:
                log.warning(
                    "%s: segment %d was not in the manifest; added", seg.dir, seg.base_offset
                )
    result = list(segments)
    for base, expected in sorted(entries.items()):
        if base in live:
            continue
        if expected.last < log_start or not expected.batches:
            del entries[base]  # nothing readable lost: retention's, or empty
            changed = True
        else:
            result.append(_missing(segments, expected, params, manifest.path.parent))
    result.sort(key=lambda s: s.base_offset)
    if changed:
        manifest.save_or_log("start-up")
    return result, bool(result) and result[-1].base_offset in entries


def _settle_swap(
    manifest: SegmentManifest, entries: dict[int, Figures], live: dict[int, LogSegment]
) -> bool:
    """Decide a swap a crash interrupted: done when the files hold its cleaned segment (or,
    when that kept nothing, none of the segments it replaced)."""
    swap: PendingSwap | None = manifest.swap
    if swap is None:
        return False
    manifest.swap = None
    at = live.get(swap.figures.base)
    others = [b for b in swap.replaces if b in live and b != swap.figures.base]
    done = (at is not None and compare(swap.figures, found_figures(at)) is None) or (
        at is None and not others and not swap.figures.batches
    )
    if done and not others:
        for base in swap.replaces:
            entries.pop(base, None)
        entries[swap.figures.base] = swap.figures
    return True


def _compare(seg: LogSegment, expected: Figures) -> None:
    mismatch = compare(expected, found_figures(seg), seg.damaged_at is not None)
    if mismatch is None:
        return
    log.error(
        "topic %s: sealed segment %s %s%s",
        seg.dir.name,
        seg.path().name,
        mismatch.describe(),
        "; reads of them fail DATA_LOSS" if mismatch.lost else "",
    )
    if mismatch.lost is not None:
        first, last = mismatch.lost
        position = seg.damaged_at if seg.damaged_at is not None else seg.size
        seg.lost = LostRange(first, last, position, mismatch.what)
        seg.next_offset = max(seg.next_offset, last + 1)
        seg.max_timestamp = max(seg.max_timestamp, expected.max_ts)


def _missing(
    segments: list[LogSegment], expected: Figures, params: IndexParams, directory: Path
) -> LogSegment:
    seg = MissingSegment(directory, expected.base, "", params)
    seg.offset_index = OffsetIndex(seg.path(INDEX_EXT), expected.base, params.max_index_bytes)
    seg.time_index = TimeIndex(seg.path(TIMEINDEX_EXT), expected.base, params.max_index_bytes)
    seg.next_offset, seg.max_timestamp = expected.last + 1, expected.max_ts
    mismatch = missing(expected)
    seg.lost = LostRange(expected.base, expected.last, 0, "the segment file is gone")
    log.error(
        "topic %s: sealed segment %s %s; reads of them fail DATA_LOSS",
        directory.name,
        seg.path().name,
        mismatch.describe(),
    )
    return seg


def _build(manifest: SegmentManifest, segments: list[LogSegment]) -> None:
    """A manifest from the sealed segments found, each read whole first; none when one is
    not (logged: ``compactlog check`` reports it too)."""
    sealed = segments[:-1]
    entries: dict[int, Figures] = {}
    for seg in sealed:
        try:
            if seg.damaged_at is not None:
                raise CorruptData(f"{seg.where}: a batch at byte {seg.damaged_at} fails its check")
            seg.verify()
        except CorruptData as exc:
            log.error("%s not built: %s; the next start tries again", manifest.path, exc)
            return
        entries[seg.base_offset] = figures_of(seg)
    manifest.entries = entries
    manifest.save_or_log("building it")
    if manifest.problem is not None:
        log.warning("%s rebuilt from %d sealed segments", manifest.path, len(sealed))
    elif sealed:
        log.info(
            "%s built from %d sealed segments (a log from before it)", manifest.path, len(sealed)
        )
