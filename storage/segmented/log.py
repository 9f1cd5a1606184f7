"""Log: the segments of one SEGMENTED topic in one directory.

The segment list is copy-on-write: writers build a new tuple under the log's lock,
readers grab the current tuple and read without the lock (``log_reads.py``, where reads
also resume on a fresh snapshot when a segment of theirs was replaced or deleted).

Files beside the segments, checksummed (``state_file.py``): ``log-start-offset`` (raised by
DeleteRecords and retention; unreadable: the topic cannot be served, ``BadStateFile``) and
``recovery-point`` (every offset below it was fsynced; recovery validates from there;
unreadable: set aside, and only the last segment counts as unsynced; a log that ends
below it lost synced offsets, and goes offline), and ``segments.manifest`` (what each
sealed segment held: ``manifest.py``; checked at start by ``sealed.py``, so a segment cut
short or gone is a lost range, never a shorter log).

``generation`` changes when anything but an append changes what the log reads as
(retention, DeleteRecords, a cleaner's swap, a config change, deletion): a reader that
finds it as it was before its read knows the log still holds what it read.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from compactlog.errors import CompactlogError, StoreClosed, TopicNotFound, from_os_error
from compactlog.storage import batch
from compactlog.storage.config import SegmentedTopicConfig
from compactlog.storage.segmented import state_file
from compactlog.storage.segmented.append import AppendResult, pack_request
from compactlog.storage.segmented.log_reads import LogReads, segment_view
from compactlog.storage.segmented.log_retention import LogRetention
from compactlog.storage.segmented.log_swaps import CleaningAborted, LogSwaps
from compactlog.storage.segmented.manifest import SegmentManifest
from compactlog.storage.segmented.recovery import check_synced_end, recover_log_dir
from compactlog.storage.segmented.sealed import check_sealed
from compactlog.storage.segmented.segment import IndexParams, LogSegment
from compactlog.storage.segmented.state_file import BadStateFile
from compactlog.storage.types import Record

log = logging.getLogger(__name__)

__all__ = ["CleaningAborted", "Log"]

LOG_START_FILE = "log-start-offset"
RECOVERY_POINT_FILE = "recovery-point"
_MAX_RELATIVE = 2**32 - 1
# one counter for all logs: a topic deleted and created again shows a new generation
_GENERATIONS = itertools.count(1)


class Log(LogRetention, LogSwaps, LogReads):
    """Append, roll, flush, reads (``log_reads.py``) and retention (``log_retention.py``)
    of one topic; swap target of the cleaner (``log_swaps.py``)."""

    def __init__(
        self, directory: Path, config: SegmentedTopicConfig, clock: Callable[[], float]
    ) -> None:
        self.dir = directory
        self.name = directory.name
        self.config = config
        self.clock = clock
        self._lock = threading.RLock()
        self.generation = next(_GENERATIONS)
        self._closed = False
        self._deleted = False
        self._pending_deletes: list[tuple[int, LogSegment, list[Path]]] = []
        # Test hook: called with the name of each step of a swap, to simulate crashes there.
        self.swap_hook: Callable[[str], None] | None = None
        self.log_start_offset = state_file.read_int(directory / LOG_START_FILE) or 0
        try:
            saved_point = state_file.read_int(directory / RECOVERY_POINT_FILE)
        except BadStateFile as exc:
            state_file.set_aside(exc.path, str(exc))
            saved_point = None  # recovery then treats the whole last segment as unsynced
        self.manifest = SegmentManifest.load(directory)
        segments, truncated, recovery_point = recover_log_dir(
            directory, self.index_params(), saved_point, self.manifest.end()
        )
        segments, sealed_last = check_sealed(
            self.manifest, segments, self.log_start_offset, self.index_params()
        )
        check_synced_end(self.name, directory, segments, saved_point, self.log_start_offset)
        if not segments or sealed_last:  # the active segment is gone: start a new one
            end = max(
                self.log_start_offset, recovery_point, segments[-1].next_offset if segments else 0
            )
            segments.append(LogSegment.create(directory, end, self.index_params()))
        self._view = segment_view(segments)
        active = segments[-1]
        self.next_offset = max(active.next_offset, active.base_offset)
        if active.damaged_at is not None:
            # Its unreadable bytes hold offsets up to the recovery point: never reuse them.
            self.next_offset = max(self.next_offset, recovery_point)
        if (
            self.log_start_offset < segments[0].base_offset
            or self.log_start_offset > self.next_offset
        ):
            self._set_log_start(
                min(max(self.log_start_offset, segments[0].base_offset), self.next_offset)
            )
        self._unflushed = 0
        self._last_flush_ms = self.now_ms()
        if truncated or saved_point != self.next_offset:
            self._flush_all(list(segments))
        if active.damaged_at is not None:
            self.roll()  # appends go on in a readable segment

    # ---- helpers -----------------------------------------------------------------------
    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def index_params(self) -> IndexParams:
        return IndexParams(self.config.index_interval_bytes, self.config.segment_index_bytes)

    def _check_open(self) -> None:
        if self._deleted:
            raise TopicNotFound(f"topic {self.name} does not exist", topic=self.name)
        if self._closed:
            raise StoreClosed(f"topic {self.name} is closed", topic=self.name)

    def _changed(self) -> None:
        """Not an append changed what the log reads as (under the lock): a new generation."""
        self.generation = next(_GENERATIONS)

    def _set_log_start(self, offset: int) -> None:
        """Record the new log start, then move it: a write refused (DISK_FULL, ...) leaves
        the log as it was, never a start that a restart would take back."""
        state_file.write_int(self.dir / LOG_START_FILE, offset)
        self.log_start_offset = offset
        self._changed()

    def run_hook(self, step: str) -> None:
        if self.swap_hook is not None:
            self.swap_hook(step)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._view.segments

    def _set_segments(self, segments: Sequence[LogSegment]) -> None:
        """A new segment list without some of the old segments (retention, the cleaner's
        swaps), under the lock."""
        self._view = segment_view(segments)
        self._changed()

    @property
    def active_segment(self) -> LogSegment:
        return self._view.segments[-1]

    def update_config(self, config: SegmentedTopicConfig) -> None:
        with self._lock:
            self.config = config
            self._changed()

    # ---- writes ------------------------------------------------------------------------
    def append(self, records: Sequence[Record]) -> AppendResult:
        """Append domain records: the same encoder and path as a PublishRequest's bytes."""
        return self.append_request(batch.records_to_request(records))

    def append_request(self, request: bytes, partition: int = 0) -> AppendResult:
        """Append the records of raw ``PublishRequest`` bytes as one batch, whole, into the
        active segment (rolling first if needed). Nothing is stored if a record is over
        ``max.message.bytes``."""
        with self._lock:
            self._check_open()
            now = self.now_ms()
            base = self.next_offset
            packed = pack_request(
                request, base, now, self.config.max_message_bytes, self.name, partition
            )
            if not packed.count:
                return AppendResult(base, 0, False)
            last, max_ts = packed.last_offset, packed.max_event_time_ms
            self._maybe_roll(len(packed.data), max_ts, last)
            segment = self.active_segment
            before = segment.append_batch(packed.data, base, last, packed.count, max_ts)
            synced = False
            if (
                self._unflushed + packed.count >= self.config.flush_messages
                or now - self._last_flush_ms >= self.config.flush_ms
            ):
                try:
                    self._flush_active(now)
                except CompactlogError:
                    segment.rewind(before)  # not durable, so not acknowledged: not kept
                    self._changed()
                    raise
                synced = True
            else:
                self._unflushed += packed.count
            self.next_offset = last + 1
            return AppendResult(base, packed.count, synced)

    def _maybe_roll(self, batch_size: int, max_ts: int, last_offset: int) -> None:
        seg = self.active_segment
        if seg.size == 0:
            return
        cfg = self.config
        aged = seg.first_timestamp is not None and max_ts - seg.first_timestamp > cfg.max_segment_ms
        if (
            seg.size + batch_size > cfg.segment_bytes
            or aged
            or seg.is_full_index()
            or last_offset - seg.base_offset > _MAX_RELATIVE
        ):
            self.roll()

    def roll(self) -> LogSegment:
        """Close the active segment (final time-index entry, fsync) and start a new one."""
        with self._lock:
            old = self.active_segment
            if old.size == 0 and old.base_offset == self.next_offset:
                return old
            old.on_become_inactive()
            old.flush()
            old.close_index_files()  # only segments being written hold index descriptors
            try:
                new = LogSegment.create(self.dir, self.next_offset, self.index_params())
            except OSError as exc:
                raise from_os_error(
                    exc, f"rolling a new segment of {self.name}", self.dir
                ) from None
            self._view = segment_view([*self._view.segments, new])
            self.manifest.seal(old)
            self._unflushed = 0
            self._last_flush_ms = self.now_ms()
            self._save_recovery_point()
            log.debug("%s: rolled new segment %d", self.name, new.base_offset)
            return new

    def _flush_active(self, now: int) -> None:
        self.active_segment.flush()
        self._unflushed = 0
        self._last_flush_ms = now

    def _flush_all(self, segments: list[LogSegment]) -> None:
        for seg in segments:
            seg.flush()
        self._save_recovery_point()

    def _save_recovery_point(self) -> None:
        """Record that everything below ``next_offset`` is synced. A cache: when it cannot
        be written (a full disk) the old, lower point stays, and start-up recovery only
        checks more of the log; so the failure is logged, never raised."""
        try:
            state_file.write_int(self.dir / RECOVERY_POINT_FILE, self.next_offset)
        except CompactlogError as exc:
            log.warning(
                "%s: recovery point not saved (start-up will check more): %s", self.name, exc
            )

    def flush(self) -> None:
        with self._lock:
            self._check_open()
            self._flush_active(self.now_ms())

    def maybe_flush(self) -> None:
        """Flush when ``flush.ms`` has passed with unflushed records (the scheduler's job)."""
        with self._lock:
            now = self.now_ms()
            if (
                not self._closed
                and self._unflushed
                and now - self._last_flush_ms >= self.config.flush_ms
            ):
                self._flush_active(now)

    # ---- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        """Flush everything and record the recovery point (a clean shutdown)."""
        with self._lock:
            if self._closed:
                return
            active = self.active_segment
            active.on_close()
            self._flush_all([active])
            self.manifest.save_if_unsaved()
            self._closed = True
            self._changed()
            for seg in self.segments:
                seg.close_index_files()
                seg.release()
        self.delete_expired_files(force=True)

    def mark_deleted(self) -> None:
        """Stop serving (the topic is being deleted); descriptors close when readers let go."""
        with self._lock:
            self._closed = self._deleted = True
            self._changed()
            for _t, seg, _p in self._pending_deletes:
                seg.release()
            self._pending_deletes.clear()
            for seg in self.segments:
                seg.close_index_files()
                seg.release()

    @property
    def closed(self) -> bool:
        return self._closed
