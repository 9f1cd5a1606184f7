"""LogCleaner: the cleaner threads, explicit passes and the cleaner's metrics.

Each of ``log.cleaner.threads`` threads loops: ask the LogCleanerManager for the filthiest
topic, run one pass with its own Cleaner (offset map of ``dedupe.buffer.size / threads``
bytes), record the result, or sleep ``log.cleaner.backoff.ms`` when nothing qualifies. A pass
that raises marks its topic uncleanable instead of killing the thread. ``clean_now`` runs a
pass on the caller's thread with a map borrowed from the same pool, so the memory budget
holds however passes are started; its ``RunControl`` sees the pass's progress (phase
``cleaning``) and may cancel it, which ends the pass as an abort does. ``abort`` stops a
pass of the cleaner threads (Kafka's abort-and-pause, then resume).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from compactlog.compactor.log_cleaner.checkpoint import FILE_NAME, CleanerCheckpoint
from compactlog.compactor.log_cleaner.cleaner import Cleaner, PassStats, Throttler
from compactlog.compactor.log_cleaner.manager import LogCleanerManager, LogToClean
from compactlog.compactor.log_cleaner.offset_map import SkimpyOffsetMap
from compactlog.compactor.progress import RunCancelled, RunControl
from compactlog.errors import TopicNotFound
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import CleaningAborted, Log, SegmentedLogManager
from compactlog.storage.segmented.version import server_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanerPassResult:
    read: int
    kept: int
    removed: int
    tombstones: int
    keyless_dropped: int
    bytes_in: int
    bytes_out: int
    duration_ms: int
    error: str | None = None


@dataclass(frozen=True)
class CleanerStats:
    max_dirty_percent: float
    recopy_percent: float
    last_clean_time_ms: int
    last_mb_per_sec: float
    buffer_utilization: float
    uncleanable_count: int
    passes: int


class LogCleaner:
    """Owns the cleaner threads and the LogCleanerManager; registers itself with storage."""

    def __init__(
        self,
        manager: SegmentedLogManager,
        settings: ServerSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.logs = manager
        self.settings = settings
        self.clock = clock
        self.cleaner_manager = LogCleanerManager(
            manager, CleanerCheckpoint(server_file(manager.root, FILE_NAME)), clock
        )
        manager.set_cleaner_hooks(self.cleaner_manager)
        self.threads = settings.log_cleaner_threads if settings.log_cleaner_enable else 0
        self._map_bytes = settings.log_cleaner_dedupe_buffer_size // max(self.threads, 1)
        SkimpyOffsetMap(
            min(self._map_bytes, 48), settings.log_cleaner_io_buffer_load_factor
        )  # validate
        self._maps: queue.Queue[SkimpyOffsetMap] = queue.Queue()
        self._maps_made = 0
        self._maps_lock = threading.Lock()
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        self._lock = threading.Lock()
        # The last pass of each topic, with the Log it ran on: a topic deleted and created
        # again is another Log, and the pass of the deleted one is not its result.
        self._results: dict[str, tuple[Log, CleanerPassResult]] = {}
        self._passes = 0
        self._last = (0.0, 0, 0.0, 0.0)  # recopy %, duration ms, MB/s, buffer utilization

    # ---- threads -----------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        for i in range(self.threads):
            t = threading.Thread(target=self._run, args=(i,), name=f"log-cleaner-{i}", daemon=True)
            t.start()
            self._workers.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._workers:
            t.join()
        self._workers.clear()
        self.logs.set_cleaner_hooks(None)

    def _run(self, thread_id: int) -> None:
        backoff = self.settings.log_cleaner_backoff_ms / 1000
        while not self._stop.is_set():
            try:
                job = self.cleaner_manager.grab_filthiest()
            except Exception:
                log.exception("log cleaner %d: choosing a log failed", thread_id)
                job = None
            if job is None:
                self._stop.wait(backoff)
                continue
            self._pass(job)

    # ---- passes ------------------------------------------------------------------------
    def _take_map(self) -> SkimpyOffsetMap:
        with self._maps_lock:
            if self._maps.empty() and self._maps_made < max(self.threads, 1):
                self._maps_made += 1
                return SkimpyOffsetMap(
                    self._map_bytes, self.settings.log_cleaner_io_buffer_load_factor
                )
        return self._maps.get()

    def clean_now(self, name: str, control: RunControl | None = None) -> CleanerPassResult:
        """One pass on ``name`` now (min compaction lag honoured, dirty ratio ignored)."""
        log_ = self.logs.get_log(name)
        if not log_.config.compact:
            return CleanerPassResult(
                0, 0, 0, 0, 0, 0, 0, 0, f"cleanup.policy of {name} does not include compact"
            )
        if control is not None:
            control.check()
        job = self.cleaner_manager.begin_forced(name)
        return self._pass(job, control)

    def abort(self, name: str) -> bool:
        """Stop the pass in progress on ``name``, if any (it keeps what it swapped in);
        True when there was one."""
        if self.cleaner_manager.state(name) != "InProgress":
            return False
        self.cleaner_manager.abort_and_pause(name)
        self.cleaner_manager.resume(name)
        return True

    def _pass(self, job: LogToClean, control: RunControl | None = None) -> CleanerPassResult:
        started = time.monotonic()
        offset_map = self._take_map()
        throttler = Throttler(self.settings.log_cleaner_io_max_bytes_per_second)
        cleaner = Cleaner(
            offset_map,
            self.settings.log_cleaner_io_buffer_size,
            throttler,
            self.cleaner_manager.is_aborted,
            control,
        )
        stats = PassStats()
        error: str | None = None
        end: int | None = None
        try:
            stats = cleaner.clean(job, int(self.clock() * 1000))
            end = stats.end_offset
        except (CleaningAborted, RunCancelled) as exc:
            error = str(exc)
        except Exception as exc:
            log.exception("cleaning of %s failed; marking it uncleanable", job.name)
            self.cleaner_manager.mark_uncleanable(job.name)
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self._maps.put(offset_map)
            self.cleaner_manager.done_cleaning(job.name, end)
        if end is not None:
            self.cleaner_manager.uncleanable.discard(job.name)
        seconds = time.monotonic() - started
        result = CleanerPassResult(
            stats.read,
            stats.kept,
            stats.removed,
            stats.tombstones,
            stats.keyless_dropped,
            stats.bytes_in,
            stats.bytes_out,
            int(seconds * 1000),
            error,
        )
        mb_per_sec = (stats.bytes_in + stats.bytes_out) / 1e6 / seconds if seconds > 0 else 0.0
        if error is None:
            log.info(
                "cleaned log %s (dirty section = [%d, %d]) in %.3f seconds, %.1f MB/sec: "
                "%d records read, %d kept, %d removed (%d tombstones, %d keyless); "
                "%.1f MB read, %.1f MB written; offset map %.1f%% full",
                job.name,
                job.first_dirty_offset,
                stats.end_offset,
                seconds,
                mb_per_sec,
                stats.read,
                stats.kept,
                stats.removed,
                stats.tombstones,
                stats.keyless_dropped,
                stats.bytes_in / 1e6,
                stats.bytes_out / 1e6,
                stats.buffer_utilization * 100,
            )
        with self._lock:
            self._results[job.name] = (job.log, result)
            self._passes += 1
            recopy = 100.0 * stats.bytes_out / stats.bytes_in if stats.bytes_in else 0.0
            self._last = (recopy, result.duration_ms, mb_per_sec, stats.buffer_utilization)
        return result

    def last_result(self, name: str) -> CleanerPassResult | None:
        """The last pass over the topic of this name as it is now (not a deleted one's)."""
        with self._lock:
            found = self._results.get(name)
        if found is None or not self.logs.has_topic(name):
            return None
        log_, result = found
        try:
            current = self.logs.get_log(name)
        except TopicNotFound:
            return None
        return result if current is log_ else None

    def stats(self) -> CleanerStats:
        with self._lock:
            recopy, duration, mbps, util = self._last
            passes = self._passes
        return CleanerStats(
            max_dirty_percent=self.cleaner_manager.max_dirty_percent,
            recopy_percent=recopy,
            last_clean_time_ms=duration,
            last_mb_per_sec=mbps,
            buffer_utilization=util,
            uncleanable_count=len(self.cleaner_manager.uncleanable),
            passes=passes,
        )
