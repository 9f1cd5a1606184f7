"""Logs the cleaner cannot clean (Kafka's uncleanable partitions), and when to try again.

A pass that fails on the log's own bytes (a batch that fails its CRC, a segment that does
not load) would fail the same way at once: Kafka marks such a partition uncleanable and
counts it (``uncleanable-partitions-count``). Here the mark holds the cause and a
fingerprint of the log (its start offset; each closed segment's base, size and
modification time): the
background cleaner skips the log until the fingerprint changes (retention or DeleteRecords
removed the damage, a segment rolled, a file was restored) or ``RETRY_S`` passed, so a
damaged log is tried a few times an hour, not a hundred times a second. An explicit
Compact of a marked, unchanged log answers CORRUPT_DATA with the cause.

A pass that fails for want of space, permission or file handles (DISK_FULL,
STORAGE_UNAVAILABLE, FILE_LIMIT) says nothing about the log: it is held back too, so a
full disk is not retried a hundred times a second, but only for ``FAULT_RETRY_S``, it is
not counted as uncleanable, and an explicit Compact tries again at once (its run then
answers the cause, or succeeds once the cause is gone).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from compactlog.storage.segmented import Log

RETRY_S = 600.0  # a marked log is tried again this long after its last failed pass
FAULT_RETRY_S = 5.0  # a log held back by a disk fault is tried again this soon


def fingerprint(log: Log) -> tuple[tuple[int, int, int], ...]:
    """What must change for a failed pass to be worth trying again."""
    marks = [(log.log_start_offset, -1, -1)]
    for seg in log.segments[:-1]:
        try:
            mtime = os.stat(seg.path()).st_mtime_ns
        except OSError:
            mtime = -1
        marks.append((seg.base_offset, seg.size, mtime))
    return tuple(marks)


@dataclass(frozen=True)
class Uncleanable:
    """Why a log is marked, since when (clock seconds) and what it looked like then."""

    cause: str
    since: float
    segments: tuple[tuple[int, int, int], ...]
    damage: bool = True  # False: a disk fault held it back, not its own bytes

    def holds(self, log: Log, now: float) -> bool:
        """True while the mark still applies: the log unchanged and the backoff running."""
        backoff = RETRY_S if self.damage else FAULT_RETRY_S
        return now - self.since < backoff and fingerprint(log) == self.segments
