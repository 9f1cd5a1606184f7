"""Retention and DeleteRecords of one log, and the deferred deletion of the files they drop.

``retention.py`` decides which segments go (always a prefix of the log); this module
takes them out of the log: a new segment list without them (readers holding the old one
resume on a fresh snapshot, ``Log.batches``), the log start offset raised to the first
segment that stays, and each dropped segment's files renamed to ``.deleted`` at once and
unlinked ``file.delete.delay.ms`` later (``delete_expired_files``, the scheduler's job),
after its descriptor is released so the unlinked file's space is freed. When every
segment qualifies the log rolls first: it always keeps one, empty, active segment. A
crash before the unlink leaves ``.deleted`` files, which start-up recovery unlinks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from compactlog.errors import OffsetOutOfRange
from compactlog.storage.config import SegmentedTopicConfig
from compactlog.storage.segmented import retention
from compactlog.storage.segmented.files import unlink_quietly
from compactlog.storage.segmented.manifest import SegmentManifest
from compactlog.storage.segmented.segment import DELETED, EXTENSIONS, LogSegment

log = logging.getLogger(__name__)


class LogRetention:
    """Base of Log: needs its lock, offsets, segment list, config, clock and roll."""

    name: str
    config: SegmentedTopicConfig
    log_start_offset: int
    next_offset: int
    _lock: threading.RLock
    manifest: SegmentManifest
    _pending_deletes: list[tuple[int, LogSegment, list[Path]]]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        raise NotImplementedError

    def _set_segments(self, segments: Sequence[LogSegment]) -> None:
        raise NotImplementedError

    def now_ms(self) -> int:
        raise NotImplementedError

    def _check_open(self) -> None:
        raise NotImplementedError

    def _set_log_start(self, offset: int) -> None:
        raise NotImplementedError

    def roll(self) -> LogSegment:
        raise NotImplementedError

    def delete_old_segments(self) -> int:
        """Apply retention by time and size (delete policy) and by log start offset."""
        with self._lock:
            self._check_open()
            now = self.now_ms()
            cfg = self.config
            deleted = 0
            if cfg.delete and cfg.retention_ms >= 0:
                deleted += self._delete_prefix(retention.by_time(now, cfg.retention_ms), "time")
            if cfg.delete and cfg.retention_bytes >= 0:
                over = retention.by_size(self.segments, cfg.retention_bytes)
                deleted += self._delete_prefix(over, "size")
            deleted += self._delete_below_log_start()
            self.delete_expired_files(now)
            return deleted

    def _delete_below_log_start(self) -> int:
        below = retention.below(self.log_start_offset, self.next_offset)
        return self._delete_prefix(below, "log start offset")

    def _delete_prefix(self, predicate: retention.Predicate, reason: str) -> int:
        segs = list(self.segments)
        doomed = retention.doomed_prefix(segs, predicate)
        if not doomed:
            return 0
        if doomed[-1] is segs[-1]:
            self.roll()  # every segment qualifies: keep one empty active segment
        kept = [s for s in self.segments if s not in doomed]
        if kept[0].base_offset > self.log_start_offset:
            self._set_log_start(kept[0].base_offset)  # refused: nothing dropped
        self._set_segments(kept)
        self.manifest.remove(doomed)
        for seg in doomed:
            self._async_delete(seg)
        log.info("%s: deleted %d segment(s) by %s retention", self.name, len(doomed), reason)
        return len(doomed)

    def delete_records(self, before_offset: int) -> None:
        """Raise the log start offset (DeleteRecords) and drop the segments wholly below it."""
        with self._lock:
            self._check_open()
            if before_offset > self.next_offset:
                raise OffsetOutOfRange(
                    f"offset {before_offset} is beyond the log end offset "
                    f"{self.next_offset} of {self.name}",
                    topic=self.name,
                    offset=before_offset,
                    log_end_offset=self.next_offset,
                )
            if before_offset > self.log_start_offset:
                self._set_log_start(before_offset)
                self._delete_below_log_start()

    def _async_delete(self, seg: LogSegment) -> None:
        """Rename to ``.deleted`` now, unlink after ``file.delete.delay.ms``."""
        seg.close_index_files()
        seg.rename(DELETED)
        paths = [seg.path(ext) for ext in EXTENSIONS]
        due = self.now_ms() + self.config.file_delete_delay_ms
        self._pending_deletes.append((due, seg, paths))

    def delete_expired_files(self, now_ms: int | None = None, force: bool = False) -> None:
        with self._lock:
            now = self.now_ms() if now_ms is None else now_ms
            due = [(s, p) for t, s, p in self._pending_deletes if force or t <= now]
            self._pending_deletes = [
                (t, s, p) for t, s, p in self._pending_deletes if not (force or t <= now)
            ]
        for seg, paths in due:
            seg.release()  # an evicted descriptor must not keep the unlinked file's space
            for path in paths:
                unlink_quietly(path)
