"""Kafka-style SEGMENTED topics: segment files with offset and time indexes, retention and
crash recovery. The LogCleaner that compacts them in place lives in
``compactlog.compactor.log_cleaner`` and reaches the logs through ``SegmentedLogManager``."""

from compactlog.storage.segmented.append import AppendResult
from compactlog.storage.segmented.log import CleaningAborted, Log
from compactlog.storage.segmented.manager import CleanerHooks, SegmentedLogManager
from compactlog.storage.segmented.segment import LogSegment
from compactlog.storage.segmented.stats import SegmentedStats

__all__ = [
    "AppendResult",
    "CleanerHooks",
    "CleaningAborted",
    "Log",
    "LogSegment",
    "SegmentedLogManager",
    "SegmentedStats",
]
