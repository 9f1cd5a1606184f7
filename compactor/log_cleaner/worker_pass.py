"""A LogCleaner pass in a compaction worker: the job shipped there, and the server's side.

The worker opens the closed segments of the plan read-only (the files are immutable until
this very pass swaps them; a segment retention removed meanwhile aborts the pass), builds
the offset map in its own memory (one map a worker, ``dedupe.buffer.size / workers``
bytes, kept for its next pass) and writes each group's ``.cleaned`` segment beside the
originals. It then asks the server to swap it in (``SwapCleaned``): only the server
changes the log, with the same renames as an in-process pass, so the cleaner's state
machine, checkpoint and crash recovery are those of Kafka's whatever process cleaned.
While the server swaps one ``.cleaned`` segment in, the worker writes the next
(``finisher``): the link's requests and reports are sent from two threads.
A pass that fails or whose worker dies leaves at most two ``.cleaned`` segments (one
being swapped, the next being written), which the server removes at once (and start-up
recovery would).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compactlog.compactor.log_cleaner.cleaner import Cleaner
from compactlog.compactor.log_cleaner.offset_map import SkimpyOffsetMap
from compactlog.compactor.log_cleaner.plan import CleanPlan, PassStats
from compactlog.compactor.progress import CLEANING, Progress, RunCancelled, RunControl
from compactlog.compactor.throttle import Throttler, sleep_checking
from compactlog.compactor.two_phase.faults import fault_from_env
from compactlog.compactor.worker_link import WorkerLink, kill_self
from compactlog.compactor.workers import WorkerPool
from compactlog.errors import InvalidArgument
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import CleaningAborted, Log, LogSegment
from compactlog.storage.segmented.index import IndexCorrupt
from compactlog.storage.segmented.segment import CLEANED, SegmentGone
from compactlog.storage.segmented.swap import swap_in_cleaned


@dataclass(frozen=True)
class SwapCleaned:
    """Worker → server: swap the ``.cleaned`` segment at ``base_offset`` in for the
    closed segments at ``group_bases``."""

    base_offset: int
    group_bases: tuple[int, ...]


@dataclass(frozen=True)
class CleaningJob:
    plan: CleanPlan
    closed_bases: tuple[int, ...]
    active_base: int
    map_bytes: int
    load_factor: float
    io_buffer_size: int
    io_max_bytes_per_second: float
    threads: int

    def _offset_map(self, cache: dict[Any, Any]) -> SkimpyOffsetMap:
        key = ("offset-map", self.map_bytes, self.load_factor)
        if key not in cache:
            cache.clear()  # one map a worker: the budget is per process
            cache[key] = SkimpyOffsetMap(self.map_bytes, self.load_factor, lazy=True)
        found: SkimpyOffsetMap = cache[key]
        return found

    def run(self, link: WorkerLink) -> PassStats:
        params = self.plan.index_params()
        try:
            closed = [
                LogSegment.open_read_only(self.plan.directory, base, params)
                for base in self.closed_bases
            ]
        except IndexCorrupt as exc:
            if exc.damage is not None:  # the log's bytes, not a race: the log is uncleanable
                raise exc.damage from None
            raise CleaningAborted(f"{self.plan.name}: segments changed: {exc}") from None
        except (OSError, SegmentGone) as exc:
            raise CleaningAborted(f"{self.plan.name}: segments changed: {exc}") from None

        def swap(cleaned: LogSegment, group: list[LogSegment]) -> None:
            cleaned.close_index_files()
            link.request(SwapCleaned(cleaned.base_offset, tuple(s.base_offset for s in group)))
            cleaned.suffix = ""  # the server renamed the files: nothing here to remove

        def check() -> None:
            if link.poll_cancel():
                raise CleaningAborted(f"cleaning of {self.plan.name} was aborted")

        cleaner = Cleaner(
            self._offset_map(link.cache),
            self.io_buffer_size,
            Throttler(self.io_max_bytes_per_second, sleep=sleep_checking(check)),
            lambda _name: link.poll_cancel(),
            link,
            fault_from_env(crash=kill_self),
            self.threads,
            finish_behind=True,  # a swap waits for the server: the pass writes on meanwhile
        )
        try:
            return cleaner.clean(self.plan, closed, self.active_base, swap)
        except SegmentGone as exc:  # retention took a segment while the pass read it
            raise CleaningAborted(f"{self.plan.name}: segments changed: {exc}") from None


class _Watch:
    """The run's control, also cancelled when the cleaner manager aborts the pass."""

    def __init__(self, control: RunControl, is_aborted: Callable[[], bool]) -> None:
        self.control, self.is_aborted = control, is_aborted

    def report(self, progress: Progress) -> None:
        self.control.report(progress)

    @property
    def cancelled(self) -> bool:
        if self.is_aborted():
            return True
        try:
            self.control.check()
        except RunCancelled:
            return True
        return False


class WorkerPasses:
    """``PassRunner`` over the worker pool (the server's)."""

    def __init__(self, pool: WorkerPool, settings: ServerSettings) -> None:
        self.pool = pool
        self.settings = settings
        self.map_bytes = settings.log_cleaner_dedupe_buffer_size // pool.size
        SkimpyOffsetMap(min(self.map_bytes, 48), settings.log_cleaner_io_buffer_load_factor)

    def run(
        self, plan: CleanPlan, log: Log, is_aborted: Callable[[], bool], control: RunControl
    ) -> PassStats:
        segments = log.segments
        s = self.settings
        job = CleaningJob(
            plan,
            tuple(seg.base_offset for seg in segments[:-1]),
            segments[-1].base_offset,
            self.map_bytes,
            s.log_cleaner_io_buffer_load_factor,
            s.log_cleaner_io_buffer_size,
            s.log_cleaner_io_max_bytes_per_second,
            s.worker_threads,
        )

        control.report(Progress(CLEANING))  # watchers see the phase while a worker starts

        def on_request(body: object) -> None:
            if not isinstance(body, SwapCleaned):
                raise InvalidArgument(f"a cleaning worker cannot ask for {body!r}")
            swap_in_cleaned(log, body.base_offset, body.group_bases)

        try:
            stats = self.pool.run(
                job, on_request, _Watch(control, is_aborted), f"the cleaning of {plan.name!r}"
            )
        except RunCancelled as exc:
            _remove_cleaned(plan)
            raise CleaningAborted(str(exc)) from None
        except BaseException:
            _remove_cleaned(plan)
            raise
        assert isinstance(stats, PassStats)
        return stats


def _remove_cleaned(plan: CleanPlan) -> None:
    """What a failed pass left: one pass a topic at a time, so every ``.cleaned`` file in
    the directory is this pass's."""
    for path in plan.directory.glob(f"*{CLEANED}"):
        path.unlink(missing_ok=True)
