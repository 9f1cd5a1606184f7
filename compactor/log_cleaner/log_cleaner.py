"""LogCleaner: the cleaner threads, explicit passes and the cleaner's figures.

Each of ``log.cleaner.threads`` threads loops: ask the LogCleanerManager for the filthiest
topic, run one pass, record the result, or sleep ``log.cleaner.backoff.ms`` when nothing
qualifies. A pass that raises marks its topic uncleanable instead of killing the thread
(a worker that died, a cancel or an abort does not: the log is not at fault). Where the
pass runs is the ``PassRunner``'s business: in this process with an offset map of
``dedupe.buffer.size / threads`` bytes (``InProcessPasses``, the default), or in a
compaction worker (``worker_pass.WorkerPasses``, the server's). ``clean_now`` runs a pass
on the caller's thread through the same runner, so the memory budget holds however
passes are started; its ``RunControl`` sees the pass's progress (phase ``cleaning``) and
may cancel it, which ends the pass as an abort does (a background pass gets a control of
its own, ``control(name)``). ``preview`` runs a dry pass the same way: the figures of the
pass ``clean_now`` would run, nothing written, no state or figure of the cleaner changed.
``abort`` stops a pass of the cleaner threads (Kafka's abort-and-pause, then resume).

The figures are Kafka's (``kafka.log:type=LogCleaner``, ``LogCleanerManager``) in base
units: the largest offset-map utilisation and clean time over the last pass of each
thread, the last recopy ratio, the largest dirty ratio seen at selection, the time since
a cleaner thread last looked for work, and the uncleanable topics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from compactlog.compactor.log_cleaner.checkpoint import FILE_NAME, CleanerCheckpoint
from compactlog.compactor.log_cleaner.manager import LogCleanerManager, LogToClean
from compactlog.compactor.log_cleaner.passes import InProcessPasses, PassRunner
from compactlog.compactor.log_cleaner.plan import CleanPlan, PassStats
from compactlog.compactor.log_cleaner.uncleanable import FAULT_RETRY_S, RETRY_S
from compactlog.compactor.progress import LocalRunControl, RunCancelled, RunControl
from compactlog.compactor.workers import WorkerCrashed
from compactlog.errors import (
    CompactionRunning,
    CorruptData,
    DiskFull,
    FileLimit,
    NotCompacted,
    StorageUnavailable,
    TopicNotFound,
)
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
    """Kafka's LogCleaner figures, in base units (ratios 0-1, seconds)."""

    max_buffer_utilization: float
    recopy_ratio: float
    max_clean_time_s: float
    max_dirty_ratio: float
    time_since_last_run_s: float
    uncleanable_count: int
    passes: int
    last_throughput_bytes_per_s: float


@dataclass(frozen=True)
class _Last:
    utilization: float
    recopy: float
    seconds: float
    bytes_per_s: float


PassListener = Callable[[str, CleanerPassResult], None]
PREVIEW_TRIES = 3  # a dry run that found the log changed under it reads it again


def _result(stats: PassStats, seconds: float, error: str | None = None) -> CleanerPassResult:
    return CleanerPassResult(
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


class LogCleaner:
    """Owns the cleaner threads and the LogCleanerManager; registers itself with storage."""

    def __init__(
        self,
        manager: SegmentedLogManager,
        settings: ServerSettings,
        clock: Callable[[], float] = time.time,
        passes: PassRunner | None = None,
    ) -> None:
        self.logs = manager
        self.settings = settings
        self.clock = clock
        self.cleaner_manager = LogCleanerManager(
            manager, CleanerCheckpoint(server_file(manager.root, FILE_NAME)), clock
        )
        manager.set_cleaner_hooks(self.cleaner_manager)
        self.threads = settings.log_cleaner_threads if settings.log_cleaner_enable else 0
        self.passes: PassRunner = passes or InProcessPasses(settings, self.threads)
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        self._lock = threading.Lock()
        # The last pass of each topic, with the Log it ran on: a topic deleted and created
        # again is another Log, and the pass of the deleted one is not its result.
        self._results: dict[str, tuple[Log, CleanerPassResult]] = {}
        self._controls: dict[str, RunControl] = {}
        self._listeners: list[PassListener] = []
        self._passes = 0
        self._last: deque[_Last] = deque(maxlen=max(self.threads, 1))
        self._last_run = time.monotonic()

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
            self._last_run = time.monotonic()
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
    def check_compacts(self, name: str) -> None:
        """Refuse an explicit pass that cannot help: ``NotCompacted`` when ``name``'s
        cleanup.policy leaves out compact (no pass, and no preview of one, applies to it:
        NOT_COMPACTED), ``CorruptData`` while its log is marked uncleanable and unchanged
        (the cause in the message; ``uncleanable.py``)."""
        log_ = self.logs.get_log(name)
        if not log_.config.compact:
            raise NotCompacted(
                f"cleanup.policy of {name} is {log_.config.cleanup_policy!r}, without "
                "compact: no cleaner pass applies to it",
                topic=name,
                cleanup_policy=log_.config.cleanup_policy,
            )
        cause = self.cleaner_manager.uncleanable_cause(name)
        if cause is not None:
            raise CorruptData(
                f"the log of {name} is uncleanable until its damage is removed (or "
                f"{RETRY_S:.0f} s pass): {cause}",
                topic=name,
            )

    def busy(self, name: str) -> bool:
        """A pass (background or explicit), a preview or a pause holds ``name`` now."""
        return self.cleaner_manager.state(name) is not None

    def clean_now(self, name: str, control: RunControl | None = None) -> CleanerPassResult:
        """One pass on ``name`` now (min compaction lag honoured, dirty ratio ignored);
        ``NotCompacted`` for a topic that does not compact."""
        self.check_compacts(name)
        if control is not None:
            control.check()
        job = self.cleaner_manager.begin_forced(name)
        return self._pass(job, control)

    def preview(self, name: str, control: RunControl | None = None) -> CleanerPassResult:
        """The figures of the pass ``clean_now`` would run now, from a dry run of it through
        the same runner (a worker's in the server): the same plan, reads, offset map and
        survivors, the output batches packed and counted, nothing written or swapped, the
        checkpoint and the cleaner's figures untouched. The topic is InProgress meanwhile,
        so a pass cannot start under it nor it under a pass (``CompactionRunning``).
        ``control``: its progress, and its cancel (``RunCancelled``)."""
        control = control or LocalRunControl()
        self.check_compacts(name)
        for _ in range(PREVIEW_TRIES):
            job = self.cleaner_manager.begin_forced(name)
            started = time.monotonic()
            plan = CleanPlan.of(job, int(self.clock() * 1000), dry_run=True)
            try:
                job.log.check_nothing_lost()
                stats = self.passes.run(
                    plan, job.log, lambda: self.cleaner_manager.is_aborted(name), control
                )
                return _result(stats, time.monotonic() - started)
            except CleaningAborted:
                control.check()  # cancelled: no second try
                if not self.logs.has_topic(name):
                    raise TopicNotFound(f"topic {name} was deleted", topic=name) from None
            finally:
                self.cleaner_manager.done_cleaning(name, None)
        raise CompactionRunning(
            f"the log of {name} changed under {PREVIEW_TRIES} previews in a row "
            "(retention, records deleted); try again",
            topic=name,
        )

    def abort(self, name: str) -> bool:
        """Stop the pass in progress on ``name``, if any (it keeps what it swapped in);
        True when there was one."""
        if self.cleaner_manager.state(name) != "InProgress":
            return False
        self.cleaner_manager.abort_and_pause(name)
        self.cleaner_manager.resume(name)
        return True

    def on_pass(self, listener: PassListener) -> None:
        """Call ``listener(topic, result)`` after every pass, background or explicit."""
        self._listeners.append(listener)

    def control(self, name: str) -> RunControl | None:
        """The control of the pass running on ``name`` (progress, cancel), if any."""
        with self._lock:
            return self._controls.get(name)

    def _pass(self, job: LogToClean, control: RunControl | None = None) -> CleanerPassResult:
        started = time.monotonic()
        self._last_run = started
        control = control or LocalRunControl()
        with self._lock:
            self._controls[job.name] = control
        plan = CleanPlan.of(job, int(self.clock() * 1000))
        stats = PassStats()
        error: str | None = None
        end: int | None = None
        try:
            job.log.check_nothing_lost()  # a pass would write a lost range in for good
            stats = self.passes.run(
                plan, job.log, lambda: self.cleaner_manager.is_aborted(job.name), control
            )
            end = stats.end_offset
        except Exception as exc:
            error = self._pass_failed(job.name, exc)
        finally:
            job.log.save_swaps()
            with self._lock:
                self._controls.pop(job.name, None)
            self.cleaner_manager.done_cleaning(job.name, end)
        if end is not None:
            self.cleaner_manager.cleaned(job.name)
        return self._record(job, stats, time.monotonic() - started, error)

    def _pass_failed(self, name: str, exc: Exception) -> str:
        """Why a pass of log ``name`` stopped, logged, and the log marked uncleanable where
        the fault may be the log's (or, for a while, the disk's)."""
        if isinstance(exc, WorkerCrashed):  # not the log's fault: tried again, but said why
            log.warning("cleaning of %s stopped: %s", name, exc)
            return str(exc)
        if isinstance(exc, (CleaningAborted, RunCancelled)):
            return str(exc)
        error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, (DiskFull, StorageUnavailable, FileLimit)):  # the disk's fault
            self.cleaner_manager.mark_uncleanable(name, error, damage=False)
            log.warning(
                "cleaning of %s failed; tried again in %.0f s: %s", name, FAULT_RETRY_S, error
            )
        elif self.cleaner_manager.mark_uncleanable(name, error):
            log.error("cleaning of %s failed; marking it uncleanable", name, exc_info=exc)
        else:
            log.warning("cleaning of %s failed again; still uncleanable: %s", name, error)
        return error

    def _record(
        self, job: LogToClean, stats: PassStats, seconds: float, error: str | None
    ) -> CleanerPassResult:
        """A finished pass's result kept, its figures logged and counted, its listeners told."""
        result = _result(stats, seconds, error)
        if error is None:
            self._log_pass(job, stats, seconds)
        with self._lock:
            self._results[job.name] = (job.log, result)
            self._passes += 1
            recopy = stats.bytes_out / stats.bytes_in if stats.bytes_in else 0.0
            rate = (stats.bytes_in + stats.bytes_out) / seconds if seconds > 0 else 0.0
            self._last.append(_Last(stats.buffer_utilization, recopy, seconds, rate))
        for listener in self._listeners:
            try:
                listener(job.name, result)
            except Exception:
                log.exception("a cleaner pass listener failed")
        return result

    @staticmethod
    def _log_pass(job: LogToClean, stats: PassStats, seconds: float) -> None:
        mb_per_sec = (stats.bytes_in + stats.bytes_out) / 1e6 / seconds if seconds > 0 else 0.0
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
            last = list(self._last)
            passes = self._passes
        return CleanerStats(
            max_buffer_utilization=max((x.utilization for x in last), default=0.0),
            recopy_ratio=last[-1].recopy if last else 0.0,
            max_clean_time_s=max((x.seconds for x in last), default=0.0),
            max_dirty_ratio=self.cleaner_manager.max_dirty_ratio,
            time_since_last_run_s=time.monotonic() - self._last_run,
            uncleanable_count=self.cleaner_manager.uncleanable_count(),
            passes=passes,
            last_throughput_bytes_per_s=last[-1].bytes_per_s if last else 0.0,
        )
