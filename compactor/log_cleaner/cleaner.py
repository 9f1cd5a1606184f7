"""Cleaner: the mechanism of one cleaning pass over one log (no policy, no threads).

1. Build the offset map over the dirty section ``[first dirty, first uncleanable)``: for each
   keyed record, key digest → offset. When the map is full the pass ends its section at the
   first record that did not fit (``end``); the next pass starts there.
2. Rewrite every segment below ``end`` (the active segment never), grouped so that a group
   fits in ``segment.bytes`` and ``segment.index.bytes``, each group into one ``.cleaned``
   segment named after its first segment, offsets and order kept. A record survives if it has
   a key, no later offset of its key is in the map, and — for a tombstone — its delete
   horizon has not passed. A tombstone kept for the first time gets the horizon
   ``now + delete.retention.ms`` written into it.
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
from compactlog.storage.segmented import CleaningAborted, Log, LogSegment
from compactlog.storage.segmented.records import HEADER, HEADER_SIZE, with_delete_horizon
from compactlog.storage.segmented.segment import CLEANED, ChunkReader

_MAX_RELATIVE = 2**32 - 1


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
    ) -> None:
        self.map = offset_map
        self.chunk = max(io_buffer_size, 64 * 1024)
        self.throttler = throttler
        self.is_aborted = is_aborted

    def _check_aborted(self, name: str) -> None:
        if self.is_aborted(name):
            raise CleaningAborted(f"cleaning of {name} was aborted")

    def clean(self, job: LogToClean, now_ms: int) -> PassStats:
        """One pass; returns its figures, ``end_offset`` being the next first dirty offset."""
        stats = PassStats()
        log = job.log
        self.map.clear()
        end = self.build_offset_map(job, stats)
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
        return stats

    def build_offset_map(self, job: LogToClean, stats: PassStats) -> int:
        """Map the dirty section; return the offset where it stopped (exclusive)."""
        start, end = job.first_dirty_offset, job.first_uncleanable_offset
        put = self.map.put_hash
        hashes, offsets, slots = self.map.table()
        first_half = FIRST_HALF.unpack_from
        unpack = HEADER.unpack_from
        segments = job.log.segments
        mapped = 0
        try:
            for i, seg in enumerate(segments[:-1]):
                if segments[i + 1].base_offset <= start:
                    continue
                if seg.base_offset >= end:
                    break
                pos = seg.offset_index.lookup(start)[1] if start > seg.base_offset else 0
                reader = ChunkReader(seg.fd, pos, seg.size, self.chunk)
                buf = reader.next(0)
                while buf:
                    p, n = 0, len(buf)
                    while p + HEADER_SIZE <= n:
                        length, _c, off, _t, _pt, _h, kl, _vl, _hl = unpack(buf, p)
                        q = p + 4 + length
                        if q > n:
                            break
                        if off >= end:
                            return end
                        if kl >= 0 and off >= start:
                            digest = md5(buf[p + HEADER_SIZE : p + HEADER_SIZE + kl]).digest()
                            # Inlined first probe of put_hash: most keys repeat.
                            slot = first_half(digest)[0] % slots
                            if offsets[slot] and hashes.startswith(digest, slot << 4):
                                offsets[slot] = off + 1
                            elif not put(digest, off):
                                return int(off)
                            mapped += 1
                        p = q
                    self.throttler.maybe_throttle(p)
                    self._check_aborted(job.name)
                    buf = reader.next(p)
        finally:
            stats.map_records += mapped
        return end

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
        get = self.map.get_hash
        hashes, offsets, slots = self.map.table()
        first_half = FIRST_HALF.unpack_from
        unpack = HEADER.unpack_from
        interval = cleaned.params.index_interval_bytes
        oindex, tindex = cleaned.offset_index, cleaned.time_index
        out: list[bytes] = []
        pending = 0
        pos = since = count = 0
        max_ts, max_off, first_ts, last_off = -1, cleaned.base_offset, None, -1
        read = keyless = tombs = 0
        for seg in group:
            stats.bytes_in += seg.size
            reader = ChunkReader(seg.fd, 0, seg.size, self.chunk)
            buf = reader.next(0)
            while buf:
                p, n = 0, len(buf)
                while p + HEADER_SIZE <= n:
                    length, _c, off, ts, _pt, hz, kl, vl, _hl = unpack(buf, p)
                    q = p + 4 + length
                    if q > n:
                        break
                    read += 1
                    if kl < 0:
                        keyless += 1
                        p = q
                        continue
                    digest = md5(buf[p + HEADER_SIZE : p + HEADER_SIZE + kl]).digest()
                    # Inlined first probe of get_hash.
                    slot = first_half(digest)[0] % slots
                    found = offsets[slot]
                    if found and hashes.startswith(digest, slot << 4):
                        found -= 1
                    else:
                        found = get(digest)
                    if off < found:
                        if vl < 0:
                            tombs += 1  # a superseded tombstone
                    else:
                        if vl >= 0:
                            rec = buf[p:q]
                        elif hz < 0:
                            rec = with_delete_horizon(buf[p:q], horizon)
                        elif now_ms < hz:
                            rec = buf[p:q]
                        else:
                            tombs += 1
                            p = q
                            continue
                        if since > interval:
                            oindex.append(off, pos)
                            tindex.maybe_append(max_ts, max_off)
                            since = 0
                        if ts > max_ts:
                            max_ts, max_off = ts, off
                        if first_ts is None:
                            first_ts = ts
                        out.append(rec)
                        pos += q - p
                        since += q - p
                        pending += q - p
                        count += 1
                        last_off = off
                    p = q
                self.throttler.maybe_throttle(p)
                if pending >= self.chunk:
                    cleaned.write_raw(b"".join(out))
                    out.clear()
                    self.throttler.maybe_throttle(pending)
                    pending = 0
                self._check_aborted(name)
                buf = reader.next(p)
        if out:
            cleaned.write_raw(b"".join(out))
        cleaned.finish_rewrite(count, last_off, first_ts, max_ts, max_off)
        stats.read += read
        stats.kept += count
        stats.removed += read - count
        stats.keyless_dropped += keyless
        stats.tombstones += tombs
        stats.bytes_out += cleaned.size
