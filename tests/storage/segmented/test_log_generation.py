"""A log's generation: kept by appends and rolls, changed by whatever else alters what the
log reads as (the Kafka listener's Fetch read-ahead trusts a prepared answer only while it
holds)."""

from __future__ import annotations

from pathlib import Path

from compactlog.compactor.log_cleaner import LogCleaner
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.segmented.topic_log import SegmentedTopicLog
from compactlog.storage.types import Record

SETTINGS = ServerSettings(topic_defaults={}, log_cleaner_backoff_ms=10)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "200", "retention.ms": "-1"}


class Clock:
    now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def fill(m: SegmentedLogManager, n: int) -> None:
    for i in range(n):
        m.append("t", [Record(b"k%d" % (i % 2), b"v%d" % i)])


def test_appends_and_rolls_keep_the_generation_and_nothing_else_does(tmp_path: Path) -> None:
    clock = Clock()
    m = SegmentedLogManager(tmp_path, SETTINGS, clock=clock, start_threads=False)
    m.create_topic("t", COMPACT)
    log = SegmentedTopicLog(m, "t")
    seen = [log.generation()]
    fill(m, 12)
    m.get_log("t").roll()
    assert log.generation() == seen[-1]  # appends and rolls only

    def changed() -> bool:
        now = log.generation()
        fresh = now not in seen
        seen.append(now)
        return fresh

    assert LogCleaner(m, SETTINGS, clock=clock).clean_now("t").removed > 0
    assert changed()  # the cleaner's swaps
    m.delete_records("t", 3)
    assert changed()
    m.update_config("t", {**COMPACT, "cleanup.policy": "compact,delete", "retention.ms": "1"})
    assert changed()
    clock.now += 60
    assert m.get_log("t").delete_old_segments() > 0
    assert changed()  # retention
    m.delete_topic("t")
    assert changed()  # a reader holding the deleted log sees it changed
    m.create_topic("t", COMPACT)
    assert SegmentedTopicLog(m, "t").generation() not in seen  # never an old log's number
    m.close()
