"""A log whose pass fails on its own bytes is marked uncleanable (Kafka's
uncleanable-partitions-count), tried again only after a change or a backoff, and an
explicit pass of it answers CORRUPT_DATA with the cause; a race (a segment retention took)
is not the log's fault. Real files, a real worker process."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactlog.compactor.log_cleaner import LogCleaner
from compactlog.compactor.log_cleaner.uncleanable import FAULT_RETRY_S, RETRY_S
from compactlog.compactor.log_cleaner.worker_pass import WorkerPasses
from compactlog.compactor.workers import WorkerPool
from compactlog.errors import CorruptData
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.types import Record

SETTINGS = ServerSettings(topic_defaults={}, log_cleaner_dedupe_buffer_size=24 * 1024)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "200", "retention.ms": "-1"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def damaged(root: Path, clock: Clock) -> SegmentedLogManager:
    """A compacted topic of several closed segments, one byte of the second flipped."""
    m = SegmentedLogManager(root, SETTINGS, clock=clock, start_threads=False)
    m.create_topic("t", COMPACT)
    for i in range(20):
        m.append("t", [Record(b"k%d" % (i % 3), b"v%d" % i)])
    m.get_log("t").roll()
    path = m.get_log("t").segments[1].path()
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    return m


@pytest.mark.parametrize("where", ["worker", "in-process"])
def test_damage_marks_the_log_uncleanable_and_a_pass_refuses_it(
    tmp_path: Path, pool: WorkerPool, where: str
) -> None:
    clock = Clock()
    m = damaged(tmp_path, clock)
    passes = WorkerPasses(pool, SETTINGS) if where == "worker" else None
    cleaner = LogCleaner(m, SETTINGS, clock=clock, passes=passes)
    result = cleaner.clean_now("t")
    assert result.error is not None and "CRC-32C mismatch" in result.error
    assert cleaner.stats().uncleanable_count == 1  # the worker's damage is not a race
    assert cleaner.cleaner_manager.grab_filthiest() is None  # the background skips it
    with pytest.raises(CorruptData) as refused:  # an explicit pass says why, runs nothing
        cleaner.clean_now("t")
    assert refused.value.metadata["topic"] == "t"
    assert "uncleanable" in str(refused.value) and "CRC-32C mismatch" in str(refused.value)
    m.close()


def test_the_mark_lifts_after_the_backoff_or_a_change(tmp_path: Path) -> None:
    clock = Clock()
    m = damaged(tmp_path, clock)
    cleaner = LogCleaner(m, SETTINGS, clock=clock)
    cleaner.clean_now("t")
    manager = cleaner.cleaner_manager
    assert manager.uncleanable_cause("t") is not None
    clock.now += RETRY_S  # the backoff ran out: the background tries it once more
    job = manager.grab_filthiest()
    assert job is not None and job.name == "t"
    manager.done_cleaning("t", None)
    manager.mark_uncleanable("t", "CorruptData: again")  # as the pass it ran would
    assert manager.grab_filthiest() is None
    damaged_base = m.get_log("t").segments[1].base_offset
    m.delete_records("t", m.get_log("t").segments[2].base_offset)  # the damage goes
    assert manager.uncleanable_cause("t") is None
    result = cleaner.clean_now("t")
    assert result.error is None and cleaner.stats().uncleanable_count == 0
    assert m.log_start_offset("t") > damaged_base
    m.close()


def test_a_disk_fault_holds_the_log_back_briefly_and_is_no_damage(tmp_path: Path) -> None:
    """A pass that met a full disk or lost permission (``damage=False``) says nothing
    about the log: not counted as uncleanable, an explicit pass runs at once, and the
    background tries again after ``FAULT_RETRY_S``, not ``RETRY_S``."""
    clock = Clock()
    m = SegmentedLogManager(tmp_path, SETTINGS, clock=clock, start_threads=False)
    m.create_topic("t", COMPACT)
    for i in range(20):
        m.append("t", [Record(b"k%d" % (i % 3), b"v%d" % i)])
    m.get_log("t").roll()
    cleaner = LogCleaner(m, SETTINGS, clock=clock)
    manager = cleaner.cleaner_manager
    manager.mark_uncleanable("t", "DiskFull: no space", damage=False)
    assert manager.uncleanable_cause("t") is None and cleaner.stats().uncleanable_count == 0
    assert manager.grab_filthiest() is None  # held back: not a hundred passes a second
    clock.now += FAULT_RETRY_S
    job = manager.grab_filthiest()
    assert job is not None and job.name == "t"
    manager.done_cleaning("t", None)
    manager.mark_uncleanable("t", "DiskFull: no space", damage=False)
    assert cleaner.clean_now("t").error is None  # an explicit pass is not refused
    assert manager.uncleanable_cause("t") is None and not manager.uncleanable
    m.close()
