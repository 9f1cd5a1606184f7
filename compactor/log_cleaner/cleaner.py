"""Cleaner: the mechanism of one cleaning pass over one log (no policy).

Segments hold stored batches (``storage/batch.py``); every batch read here passes
``batch.check`` and its records are walked, hashed and looked up in the offset map in one
call per batch (``batch_scan``: a compiled twin and a pure-Python one), so no record is
decoded and none costs a Python loop iteration. A pass may read and scan on several
threads (``fanout``: pieces of segments side by side, their results taken in log order by
the pass's own thread, which alone fills the map and writes).

1. Build the offset map over the dirty section ``[first dirty, first uncleanable)``: for each
   keyed record, key digest → offset. When the map is full the pass ends its section at the
   first record that did not fit (``end``); the next pass starts there. Beside the map, a
   bitmap of the section's offsets keeps a bit set for each key's latest offset (one bit
   an offset, when that is at most an eighth of the map's bytes): the rewrite then answers
   for a dirty record from its bit, without digesting its key again or probing the map.
2. Rewrite every segment below ``end`` (the active segment never), grouped so that a group
   fits in ``segment.bytes`` and ``segment.index.bytes``, each group into one ``.cleaned``
   segment named after its first segment, offsets and order kept; a group whose survivors
   fit beside the previous group's joins its ``.cleaned`` segment (``joins``). A record
   survives if it has a key, no later offset of its key is in the map, and — for a
   tombstone (a keyed record with a null value; an empty value is a value) — its batch's
   delete horizon has not passed. Survivors are copied byte for byte into new batches
   (``rewrite.BatchWriter``); a batch holding a tombstone kept for the first time gets the
   horizon ``now + delete.retention.ms``.
3. Sync each group's ``.cleaned`` segment and hand it to ``swap``, which swaps it in
   (``Log.replace_segments``: ``.cleaned`` → ``.swap`` → old ``.deleted`` → final names), in
   log order; in a worker, on a thread of its own while the pass writes the next one
   (``finisher``). The caller then checkpoints ``end``.

A dry run (``CleanPlan.dry_run``: PreviewCompaction) does steps 1 and 2 as a pass would,
reads, map, survivors and packed batches alike, but counts the batches' bytes instead of
writing them (``rewrite.CountedBatches``) and swaps nothing: its figures are the pass's.

A pass is described by a ``CleanPlan`` (plain data) and reads the closed segments it is
given, so it runs the same in the server's process (the log's own segments, ``swap`` a
call) and in a compaction worker (segments opened read-only, ``swap`` a request to the
server, which alone changes the log: ``worker_pass``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from itertools import chain, islice

from compactlog.compactor.log_cleaner.batch_scan import (
    COMPILED,
    NO_BITS,
    digest_keys,
    map_digests,
    survivors,
)
from compactlog.compactor.log_cleaner.fanout import ONE_THREAD, Fanout, Piece
from compactlog.compactor.log_cleaner.finisher import Finisher, discard
from compactlog.compactor.log_cleaner.groups import group_segments_by_size
from compactlog.compactor.log_cleaner.joins import Survived, Unit, joined
from compactlog.compactor.log_cleaner.offset_map import SkimpyOffsetMap
from compactlog.compactor.log_cleaner.plan import CleanPlan, PassStats
from compactlog.compactor.log_cleaner.rewrite import BatchSink, BatchWriter, CountedBatches
from compactlog.compactor.progress import CLEANING, NoControl, Progress, RunControl
from compactlog.compactor.throttle import Throttler
from compactlog.storage.batch import NO_HORIZON, payload_of
from compactlog.storage.segmented import CleaningAborted, LogSegment
from compactlog.storage.segmented.segment import CLEANED

# Bytes read between throttling, abort checks and progress reports: every 64 KiB under a
# throttle (``log.cleaner.io.max.bytes.per.second``), which must hold small passes too;
# without one every 1 MiB (each look costs a lock, a pipe poll in a worker and a report).
PACE_BYTES = 64 * 1024
UNTHROTTLED_PACE_BYTES = 1024 * 1024


# Swap a written ``.cleaned`` segment in for the group of closed segments it replaces.
Swap = Callable[[LogSegment, list[LogSegment]], None]


def _no_fault(point: str) -> None:
    pass


@dataclass
class _Tally:
    read: int = 0
    keyless: int = 0
    tombstones: int = 0


class Cleaner:
    """Runs passes with one offset map, one pass at a time. A pass reads and scans on
    ``threads`` threads (``fanout``) when the compiled scans are there to let go of the
    GIL and no throttle holds it back; else on its caller's alone. ``finish_behind``: each
    ``.cleaned`` segment is synced and swapped on a thread of its own while the pass
    writes the next (``finisher``; a worker's passes, whose ``swap`` asks the server)."""

    def __init__(
        self,
        offset_map: SkimpyOffsetMap,
        io_buffer_size: int,
        throttler: Throttler,
        is_aborted: Callable[[str], bool],
        control: RunControl | None = None,
        fault: Callable[[str], None] = _no_fault,
        threads: int = 1,
        finish_behind: bool = False,
    ) -> None:
        self.fault = fault
        self.finish_behind, self.finisher = finish_behind, Finisher(False)
        self.threads = threads if COMPILED and not throttler.limited else 1
        self.fan = ONE_THREAD  # the pass's own while one runs
        self.map = offset_map
        self.chunk = max(io_buffer_size, 64 * 1024)
        self.quantum = PACE_BYTES if throttler.limited else UNTHROTTLED_PACE_BYTES
        self.throttler = throttler
        self.is_aborted = is_aborted
        self.control = control or NoControl()
        self.progress = Progress(CLEANING)
        self._rewrite_base = 0
        self.latest = NO_BITS  # this pass's bitmap of the latest offsets (module docstring)
        self.mapped = (0, 0)  # the offsets the map took, [first dirty, end)

    def _check_aborted(self, name: str) -> None:
        if self.is_aborted(name):
            raise CleaningAborted(f"cleaning of {name} was aborted")
        self.control.check()

    def _report(self, done: int, nbytes: int = 0, written: int = 0) -> None:
        """Progress in offsets: those mapped, then those rewritten (``total`` their sum)."""
        p = self.progress
        self.progress = Progress(
            CLEANING, done, p.total, p.bytes_read + nbytes, p.bytes_written + written
        )
        self.control.report(self.progress)

    def clean(
        self, plan: CleanPlan, closed: Sequence[LogSegment], active_base: int, swap: Swap
    ) -> PassStats:
        """One pass over the ``closed`` segments (the active one starts at
        ``active_base``); returns its figures, ``end_offset`` being the next first dirty
        offset."""
        stats = PassStats()
        start, stop = plan.first_dirty_offset, plan.first_uncleanable_offset
        self.map.fit(stop - start)
        nbytes = (stop - start + 7) // 8
        self.latest = bytearray(nbytes) if nbytes <= self.map.fit_bytes // 8 else NO_BITS
        head = plan.log_start_offset
        self.progress = Progress(CLEANING, 0, 2 * (stop - start) + start - head)
        self.control.report(self.progress)
        self.fan = Fanout(self.threads)
        self.finisher = Finisher(self.finish_behind)
        try:
            with self.fan:
                with self.finisher:  # the last segment swapped (or given up) before the end
                    stats = self._clean(plan, closed, active_base, swap, stats)
                self._report(self.progress.total)
                return stats
        finally:
            self.latest, self.mapped, self.fan = NO_BITS, (0, 0), ONE_THREAD
            self.finisher = Finisher(False)

    def _clean(
        self,
        plan: CleanPlan,
        closed: Sequence[LogSegment],
        active_base: int,
        swap: Swap,
        stats: PassStats,
    ) -> PassStats:
        start, head = plan.first_dirty_offset, plan.log_start_offset
        end = self.build_offset_map(plan, closed, active_base, stats)
        self.mapped = (start, end)
        mapped = end - start
        self.progress = Progress(CLEANING, mapped, mapped + end - head, self.progress.bytes_read)
        self._rewrite_base = mapped - head  # + offset rewritten = done
        self._report(mapped)
        stats.end_offset = end
        stats.buffer_utilization = self.map.utilization
        self.fault("after_offset_map")
        to_clean = [s for s in closed if s.base_offset < end]
        cfg = plan.config
        horizon = plan.now_ms + cfg.delete_retention_ms
        groups = group_segments_by_size(to_clean, cfg.segment_bytes, cfg.segment_index_bytes, end)
        # one stream over every group's pieces: the threads read the next group's while
        # this one's segment is finished and swapped
        pieces = [[p for seg in group for p in self.fan.pieces(seg, seg.size)] for group in groups]
        lasts = [g[0].base_offset - 1 for g in groups[1:]] + [end - 1] * bool(groups)
        scan = partial(self._survivors, plan.now_ms, horizon)
        with closing(self.fan.ordered(scan, (p for ps in pieces for p in ps))) as sifted:

            def units() -> Iterator[Unit]:
                for group, group_pieces, last in zip(groups, pieces, lasts, strict=True):
                    self._check_aborted(plan.name)
                    yield group, last, chain.from_iterable(islice(sifted, len(group_pieces)))

            outputs = joined(units(), cfg.segment_bytes, cfg.segment_index_bytes, not cfg.delete)
            for group, survived in outputs:
                self.clean_segments(plan, group, horizon, stats, swap, survived)
        return stats

    def build_offset_map(
        self, plan: CleanPlan, closed: Sequence[LogSegment], active_base: int, stats: PassStats
    ) -> int:
        """Map the dirty section; return the offset where it stopped (exclusive). Its
        pieces are read and digested on the pass's threads (``fanout``); this thread maps
        the digests in log order (``batch_scan.map_digests``): no record reaches Python."""
        start, end = plan.first_dirty_offset, plan.first_uncleanable_offset
        since = 0
        pieces = self._dirty_pieces(closed, active_base, start, end)
        with closing(self.fan.ordered(partial(self._digested, start, end), pieces)) as done:
            for digests, last, size in chain.from_iterable(done):
                mapped, stop = map_digests(self.map, digests, self.latest, start)
                stats.map_records += mapped
                since += size
                if stop >= 0 or last >= end:
                    self._report(self.progress.done, since)
                    return stop if stop >= 0 else end
                if since >= self.quantum:
                    self._pace(plan.name, since)
                    self._report(last + 1 - start, since)
                    since = 0
        self._report(self.progress.done, since)
        return end

    def _dirty_pieces(
        self, closed: Sequence[LogSegment], active_base: int, start: int, end: int
    ) -> Iterator[Piece]:
        ends = [s.base_offset for s in closed[1:]] + [active_base] if closed else []
        for seg, seg_end in zip(closed, ends, strict=True):
            if seg_end <= start:
                continue
            if seg.base_offset >= end:
                break
            yield from self.fan.pieces(seg, seg.size, start)

    def _digested(self, start: int, end: int, piece: Piece) -> Iterator[tuple[bytes, int, int]]:
        """A piece's batches as ``(digests, last offset, bytes)``, up to the one holding
        ``end`` (on one of the pass's threads; on one thread, each key's slot is
        prefetched as it is digested, for the ``map_digests`` that follows)."""
        seg_where = piece.seg.where
        near = self.map if self.fan.threads == 1 else None
        for buf, p, header, at in piece.batches(self.chunk):
            last = header.last_id.entry_id
            if last < start:
                continue
            where = f"{seg_where}, byte {at}"
            yield (
                digest_keys(payload_of(buf, header, p), start, end, where, near),
                last,
                header.size,
            )
            if last >= end:
                return

    def _pace(self, name: str, nbytes: int) -> None:
        self.throttler.maybe_throttle(nbytes)
        self._check_aborted(name)

    def clean_segments(
        self,
        plan: CleanPlan,
        group: list[LogSegment],
        horizon: int,
        stats: PassStats,
        swap: Swap,
        sifted: Iterator[Survived],
    ) -> None:
        """Rewrite ``group`` into one ``.cleaned`` segment and hand it to the finisher,
        which syncs it and has ``swap`` put it in (``_finish``); ``sifted``: the survivors
        of the group's batches, in order (``_survivors``; groups ``joins.joined`` adds to
        ``group`` while they are taken). A dry run packs the same batches and only counts
        their bytes."""
        if plan.dry_run:
            self._copy_survivors(CountedBatches(), group, sifted, stats, plan.name)
            return
        cleaned = LogSegment.create(
            plan.directory, group[0].base_offset, plan.index_params(), suffix=CLEANED
        )
        try:
            self._copy_survivors(cleaned, group, sifted, stats, plan.name)
            cleaned.on_become_inactive()
            # from here the finishing owns the files (inline, it removed them if it failed)
            self.finisher.submit(partial(self._finish, cleaned, group, swap))
        except Exception:
            discard(cleaned)
            raise

    def _finish(self, cleaned: LogSegment, group: list[LogSegment], swap: Swap) -> None:
        """Sync ``cleaned`` (its mtime the group's newest) and swap it in for ``group``;
        the files removed if that fails before the swap took them."""
        try:
            newest = max(s.last_modified_ms() for s in group)
            cleaned.flush()
            os.utime(cleaned.path(), ns=(newest * 1_000_000, newest * 1_000_000))
            self.fault("after_cleaned")
            swap(cleaned, group)
        except Exception:
            discard(cleaned)
            raise

    def _copy_survivors(
        self,
        cleaned: BatchSink,
        group: list[LogSegment],
        sifted: Iterator[Survived],
        stats: PassStats,
        name: str,
    ) -> None:
        writer = BatchWriter(cleaned)
        tally = _Tally()
        since = 0
        for kept, header, (read, keyless, tombstones) in sifted:
            tally.read += read
            tally.keyless += keyless
            tally.tombstones += tombstones
            if kept is not None:
                parts, count, first, last, tomb_horizon = kept
                writer.add(parts, count, first, last, header, tomb_horizon)
            since += header.size
            if since >= self.quantum:
                self._pace(name, since)
                self._report(self._rewrite_base + header.last_id.entry_id + 1, since)
                since = 0
        writer.flush()
        stats.bytes_in += sum(seg.size for seg in group)
        stats.read += tally.read
        stats.kept += writer.records
        stats.removed += tally.read - writer.records
        stats.keyless_dropped += tally.keyless
        stats.tombstones += tally.tombstones
        stats.bytes_out += cleaned.size
        self._report(self.progress.done, since, written=cleaned.size)

    def _survivors(self, now_ms: int, horizon: int, piece: Piece) -> Iterator[Survived]:
        """Each batch of a piece with the records that survive in it (one
        ``batch_scan.survivors`` call a batch, on one of the pass's threads)."""
        seg_where = piece.seg.where
        for buf, p, header, at in piece.batches(self.chunk):
            expired = 0 <= header.delete_horizon_ms <= now_ms
            carried = header.delete_horizon_ms if header.delete_horizon_ms >= 0 else horizon
            data, kept, first, last, tomb_kept, read, keyless, tombstones = survivors(
                self.map,
                payload_of(buf, header, p),
                expired,
                f"{seg_where}, byte {at}",
                self.latest,
                self.mapped,
            )
            counts = (read, keyless, tombstones)
            if not kept:
                yield None, header, counts
                continue
            horizon_kept = carried if tomb_kept else NO_HORIZON
            yield ([data], kept, first, last, horizon_kept), header, counts
