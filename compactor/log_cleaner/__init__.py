"""Kafka's LogCleaner for SEGMENTED topics: in-place compaction of closed segments.

``offset_map`` (fixed-budget key → offset map), ``checkpoint`` (first dirty offsets),
``manager`` (selection policy and cleaning states), ``cleaner`` (the mechanism of one pass)
and ``log_cleaner`` (threads, explicit passes, metrics)."""

from compactlog.compactor.log_cleaner.cleaner import Cleaner
from compactlog.compactor.log_cleaner.groups import group_segments_by_size
from compactlog.compactor.log_cleaner.log_cleaner import CleanerPassResult, CleanerStats, LogCleaner
from compactlog.compactor.log_cleaner.manager import LogCleanerManager, LogToClean
from compactlog.compactor.log_cleaner.offset_map import SkimpyOffsetMap
from compactlog.compactor.throttle import Throttler

__all__ = [
    "Cleaner",
    "CleanerPassResult",
    "CleanerStats",
    "LogCleaner",
    "LogCleanerManager",
    "LogToClean",
    "SkimpyOffsetMap",
    "Throttler",
    "group_segments_by_size",
]
