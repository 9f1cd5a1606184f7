"""Cleaner: the mechanism of one cleaning pass over one log (no policy, no threads).

Segments hold stored batches (``storage/batch.py``); every batch read here passes
``batch.check`` and its records are listed by ``batch.walk`` (ids, key flags, keys, byte
ranges), so no record is decoded.

1. Build the offset map over the dirty section ``[first dirty, first uncleanable)``: for each
   keyed record, key digest → offset. When the map is full the pass ends its section at the
   first record that did not fit (``end``); the next pass starts there.
2. Rewrite every segment below ``end`` (the active segment never), grouped so that a group
   fits in ``segment.bytes`` and ``segment.index.bytes``, each group into one ``.cleaned``
   segment named after its first segment, offsets and order kept. A record survives if it has
   a key, no later offset of its key is in the map, and — for a tombstone (a keyed record
   with a null value; an empty value is a value) — its batch's delete horizon has not
   passed. Survivors are copied byte for byte into new batches (``rewrite.BatchWriter``);
   a batch holding a tombstone kept for the first time gets the horizon
   ``now + delete.retention.ms``.
3. Swap each group in (``Log.replace_segments``: ``.cleaned`` → ``.swap`` → old ``.deleted``
   → final names); the caller then checkpoints ``end``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from compactlog.compactor.log_cleaner.manager import LogToClean
from compactlog.compactor.log_cleaner.offset_map import FIRST_HALF, SkimpyOffsetMap, md5
from compactlog.compactor.log_cleaner.rewrite import BatchWriter
from compactlog.compactor.progress import CLEANING, NoControl, Progress, RunControl
from compactlog.storage.batch import (
    NO_HORIZON,
    VALUE_PRESENT,
    BatchHeader,
    payload_of,
    walk,
)
from compactlog.storage.segmented import CleaningAborted, Log, LogSegment
from compactlog.storage.segmented.segment import CLEANED

_MAX_RELATIVE = 2**32 - 1
PACE_BYTES = 64 * 1024
# Survivors of one batch: (record byte runs, count, first offset, last offset, horizon)
Survivors = tuple[list[memoryview], int, int, int, int]


@dataclass
class PassStats:
    read: int = 0
    kept: int = 0
    removed: int = 0
    tombstones: int = 0
    keyless_dropped: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    map_records: int = 0
    end_offset: int = 0
    buffer_utilization: float = 0.0


@dataclass
class _Tally:
    read: int = 0
    keyless: int = 0
    tombstones: int = 0


class Throttler:
    """Keeps the cleaner's I/O under ``log.cleaner.io.max.bytes.per.second``."""

    def __init__(
        self,
        bytes_per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        check_interval_s: float = 0.1,
    ) -> None:
        self.rate = bytes_per_second
        self.clock, self.sleep, self.interval = clock, sleep, check_interval_s
        self._start = clock()
        self._observed = 0.0
        self.slept = 0.0

    def maybe_throttle(self, nbytes: int) -> None:
        if self.rate >= 1e300:
            return
        self._observed += nbytes
        elapsed = self.clock() - self._start
        if elapsed < self.interval and self._observed < self.rate * self.interval:
            return
        wanted = self._observed / self.rate
        if wanted > elapsed:
            self.sleep(wanted - elapsed)
            self.slept += wanted - elapsed
        self._start = self.clock()
        self._observed = 0.0


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


class Cleaner:
    """Runs passes with one offset map; one Cleaner per thread."""

    def __init__(
        self,
        offset_map: SkimpyOffsetMap,
        io_buffer_size: int,
        throttler: Throttler,
        is_aborted: Callable[[str], bool],
        control: RunControl | None = None,
    ) -> None:
        self.map = offset_map
        self.chunk = max(io_buffer_size, 64 * 1024)
        self.quantum = PACE_BYTES  # read between throttling, abort checks, progress reports
        self.throttler = throttler
        self.is_aborted = is_aborted
        self.control = control or NoControl()
        self.progress = Progress(CLEANING)
        self._rewrite_base = 0

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

    def clean(self, job: LogToClean, now_ms: int) -> PassStats:
        """One pass; returns its figures, ``end_offset`` being the next first dirty offset."""
        stats = PassStats()
        log = job.log
        self.map.clear()
        start, stop = job.first_dirty_offset, job.first_uncleanable_offset
        self.progress = Progress(CLEANING, 0, 2 * (stop - start) + start - log.log_start_offset)
        self.control.report(self.progress)
        end = self.build_offset_map(job, stats)
        mapped = end - start
        self.progress = Progress(
            CLEANING, mapped, mapped + end - log.log_start_offset, self.progress.bytes_read
        )
        self._rewrite_base = mapped - log.log_start_offset  # + offset rewritten = done
        self._report(mapped)
        stats.end_offset = end
        stats.buffer_utilization = self.map.utilization
        segments = log.segments
        to_clean = [s for s in segments[:-1] if s.base_offset < end]
        cfg = log.config
        horizon = now_ms + cfg.delete_retention_ms
        for group in group_segments_by_size(
            to_clean, cfg.segment_bytes, cfg.segment_index_bytes, end
        ):
            self._check_aborted(job.name)
            self.clean_segments(log, group, now_ms, horizon, stats, job.name)
        self._report(self.progress.total)
        return stats

    def build_offset_map(self, job: LogToClean, stats: PassStats) -> int:
        """Map the dirty section; return the offset where it stopped (exclusive)."""
        start, end = job.first_dirty_offset, job.first_uncleanable_offset
        put = self.map.put_hash
        hashes, offsets, slots = self.map.table()
        first_half = FIRST_HALF.unpack_from
        segments = job.log.segments
        mapped = since = 0
        try:
            for i, seg in enumerate(segments[:-1]):
                if segments[i + 1].base_offset <= start:
                    continue
                if seg.base_offset >= end:
                    break
                scan = (
                    seg.batches_from(start, seg.size, self.chunk)
                    if start > seg.base_offset
                    else seg.batches(0, seg.size, self.chunk)
                )
                for buf, p, header, at in scan:
                    first, last = header.first_id.entry_id, header.last_id.entry_id
                    if last < start:
                        continue
                    walked = walk(payload_of(buf, header, p), f"{seg.where}, byte {at}")
                    if first < start or last >= end:  # only the ends of the section
                        walked = [w for w in walked if start <= w[1] < end]
                    for _l, off, _f, key, _s, _e in walked:
                        if key is not None:
                            digest = md5(key).digest()
                            # Inlined first probe of put_hash: most keys repeat.
                            slot = first_half(digest)[0] % slots
                            if offsets[slot] and hashes.startswith(digest, slot << 4):
                                offsets[slot] = off + 1
                            elif not put(digest, off):
                                return int(off)
                            mapped += 1
                    if last >= end:
                        return end
                    since += header.size
                    if since >= self.quantum:
                        self._pace(job.name, since)
                        self._report(last + 1 - start, since)
                        since = 0
        finally:
            stats.map_records += mapped
        return end

    def _pace(self, name: str, nbytes: int) -> None:
        self.throttler.maybe_throttle(nbytes)
        self._check_aborted(name)

    def clean_segments(
        self,
        log: Log,
        group: list[LogSegment],
        now_ms: int,
        horizon: int,
        stats: PassStats,
        name: str,
    ) -> None:
        """Rewrite ``group`` into one ``.cleaned`` segment and swap it in."""
        cleaned = LogSegment.create(
            log.dir, group[0].base_offset, log.index_params(), suffix=CLEANED
        )
        try:
            self._copy_survivors(cleaned, group, now_ms, horizon, stats, name)
            newest = max(s.last_modified_ms() for s in group)
            cleaned.flush()
            os.utime(cleaned.path(), ns=(newest * 1_000_000, newest * 1_000_000))
            log.run_hook("cleaned")
            log.replace_segments(cleaned, group)
        except Exception:
            if cleaned.suffix == CLEANED:
                cleaned.close_index_files()
                for path in (cleaned.path(ext) for ext in (".log", ".index", ".timeindex")):
                    path.unlink(missing_ok=True)
            raise

    def _copy_survivors(
        self,
        cleaned: LogSegment,
        group: list[LogSegment],
        now_ms: int,
        horizon: int,
        stats: PassStats,
        name: str,
    ) -> None:
        writer = BatchWriter(cleaned)
        tally = _Tally()
        since = 0
        for seg in group:
            stats.bytes_in += seg.size
            for buf, p, header, at in seg.batches(0, seg.size, self.chunk):
                where = f"{seg.where}, byte {at}"
                payload = payload_of(buf, header, p)
                kept = self._survivors(payload, header, now_ms, horizon, where, tally)
                if kept is not None:
                    parts, count, first, last, tomb_horizon = kept
                    writer.add(parts, count, first, last, header, tomb_horizon)
                since += header.size
                if since >= self.quantum:
                    self._pace(name, since)
                    self._report(self._rewrite_base + header.last_id.entry_id + 1, since)
                    since = 0
        writer.flush()
        cleaned.on_become_inactive()
        stats.read += tally.read
        stats.kept += writer.records
        stats.removed += tally.read - writer.records
        stats.keyless_dropped += tally.keyless
        stats.tombstones += tally.tombstones
        stats.bytes_out += cleaned.size
        self._report(self.progress.done, written=cleaned.size)

    def _survivors(
        self,
        payload: memoryview,
        header: BatchHeader,
        now_ms: int,
        horizon: int,
        where: str,
        tally: _Tally,
    ) -> Survivors | None:
        """The records of one batch that survive, as runs of adjacent record bytes."""
        get = self.map.get_hash
        hashes, offsets, slots = self.map.table()
        first_half = FIRST_HALF.unpack_from
        expired = 0 <= header.delete_horizon_ms <= now_ms
        carried = header.delete_horizon_ms if header.delete_horizon_ms >= 0 else horizon
        parts: list[memoryview] = []
        run_start = run_end = -1
        kept = first = last = 0
        tomb_horizon = NO_HORIZON
        walked = walk(payload, where)
        for _l, off, flags, key, s, e in walked:
            if key is None:  # flags & HAS_KEY is clear
                tally.keyless += 1
                continue
            digest = md5(key).digest()
            # Inlined first probe of get_hash.
            slot = first_half(digest)[0] % slots
            found = offsets[slot]
            if found and hashes.startswith(digest, slot << 4):
                found -= 1
            else:
                found = get(digest)
            tombstone = not flags & VALUE_PRESENT
            if off < found or (tombstone and expired):
                tally.tombstones += tombstone  # a superseded or expired tombstone
                continue
            if tombstone:
                tomb_horizon = carried
            if s != run_end:
                if run_end >= 0:
                    parts.append(payload[run_start:run_end])
                run_start = s
            run_end = e
            first = first if kept else off
            kept += 1
            last = off
        tally.read += len(walked)
        if not kept:
            return None
        parts.append(payload[run_start:run_end])
        return parts, kept, first, last, tomb_horizon
