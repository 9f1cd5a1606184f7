"""What one cleaner pass is given (``CleanPlan``) and what it reports (``PassStats``).

Plain data: the server plans a pass and a compaction worker process runs it, so both
travel through the worker's pipe as they are; the pass itself is ``cleaner.Cleaner``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compactlog.compactor.log_cleaner.manager import LogToClean
from compactlog.storage.config import SegmentedTopicConfig
from compactlog.storage.segmented.segment import IndexParams

__all__ = ["CleanPlan", "PassStats"]


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


@dataclass(frozen=True)
class CleanPlan:
    """What one pass cleans; plain data, so that a worker process can run it."""

    name: str
    directory: Path
    first_dirty_offset: int
    first_uncleanable_offset: int
    log_start_offset: int
    config: SegmentedTopicConfig
    now_ms: int
    dry_run: bool = False  # a preview: every read and count of the pass, nothing written

    @classmethod
    def of(cls, job: LogToClean, now_ms: int, dry_run: bool = False) -> CleanPlan:
        log = job.log
        return cls(
            job.name,
            log.dir,
            job.first_dirty_offset,
            job.first_uncleanable_offset,
            log.log_start_offset,
            log.config,
            now_ms,
            dry_run,
        )

    def index_params(self) -> IndexParams:
        return IndexParams(self.config.index_interval_bytes, self.config.segment_index_bytes)
