"""Where a LogCleaner pass runs: in this process (``InProcessPasses``: tools, tests) or in
a compaction worker (``worker_pass.WorkerPasses``: the server).

Either way the LogCleaner keeps the policy and the state machine; a runner only takes a
``CleanPlan`` and the log it is for, runs the ``Cleaner`` mechanism with an offset map of
its budget, and swaps each cleaned group in through the log (``swap_in``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Protocol

from compactlog.compactor.log_cleaner.cleaner import Cleaner
from compactlog.compactor.log_cleaner.offset_map import SkimpyOffsetMap
from compactlog.compactor.log_cleaner.plan import CleanPlan, PassStats
from compactlog.compactor.progress import RunControl
from compactlog.compactor.throttle import Throttler
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import Log, LogSegment


class PassRunner(Protocol):
    def run(
        self, plan: CleanPlan, log: Log, is_aborted: Callable[[], bool], control: RunControl
    ) -> PassStats:
        """One pass; CleaningAborted when ``is_aborted`` turned true or the log changed."""
        ...


def swap_in(log: Log) -> Callable[[LogSegment, list[LogSegment]], None]:
    """The in-process swap: the cleaned segment object goes straight into the log."""

    def swap(cleaned: LogSegment, group: list[LogSegment]) -> None:
        log.run_hook("cleaned")
        log.replace_segments(cleaned, group)

    return swap


class InProcessPasses:
    """Passes on the caller's thread; one offset map per cleaner thread, lent per pass, so
    the memory budget holds however passes are started."""

    def __init__(self, settings: ServerSettings, threads: int) -> None:
        self.settings = settings
        self.threads = max(threads, 1)
        self.map_bytes = settings.log_cleaner_dedupe_buffer_size // self.threads
        SkimpyOffsetMap(min(self.map_bytes, 48), settings.log_cleaner_io_buffer_load_factor)
        self._maps: queue.Queue[SkimpyOffsetMap] = queue.Queue()
        self._made = 0
        self._lock = threading.Lock()

    def _take_map(self) -> SkimpyOffsetMap:
        with self._lock:
            if self._maps.empty() and self._made < self.threads:
                self._made += 1
                return SkimpyOffsetMap(
                    self.map_bytes, self.settings.log_cleaner_io_buffer_load_factor, lazy=True
                )
        return self._maps.get()

    def run(
        self, plan: CleanPlan, log: Log, is_aborted: Callable[[], bool], control: RunControl
    ) -> PassStats:
        offset_map = self._take_map()
        try:
            cleaner = Cleaner(
                offset_map,
                self.settings.log_cleaner_io_buffer_size,
                Throttler(self.settings.log_cleaner_io_max_bytes_per_second),
                lambda _name: is_aborted(),
                control,
                threads=self.settings.worker_threads,
            )
            segments = log.segments
            return cleaner.clean(plan, segments[:-1], segments[-1].base_offset, swap_in(log))
        finally:
            self._maps.put(offset_map)
