"""A Fetch read's spare: the stored batch a read took from the log but could not give
starts the next read of that partition, unread again, only while the log's generation
says nothing but appends happened since; after a cleaner pass the next read goes back to
the log and never gives a record the cleaner removed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog.compactor.log_cleaner import LogCleaner
from compactlog.server.kafka.errors import ErrorCode
from compactlog.server.kafka.fetch_read import Read, Wanted, read_partition
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.segmented.topic_log import SegmentedTopicLog
from compactlog.storage.types import Record

SETTINGS = ServerSettings(topic_defaults={}, log_cleaner_backoff_ms=10)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "20000", "retention.ms": "-1"}
BATCHES, BATCH, KEYS = 6, 40, 20
LIMIT = 6000  # one batch of 40 x ~100 B records fits, two do not


class Watched(SegmentedTopicLog):
    """The topic's log, noting the first offset of each range read from it."""

    asked: list[int]

    def batches(self, start: Any, stop: Any, compacted: bool) -> Iterator[Any]:
        self.asked.append(start.entry_id)
        return super().batches(start, stop, compacted)


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Watched]:
    m = SegmentedLogManager(tmp_path, SETTINGS, start_threads=False)
    m.create_topic("t", COMPACT)
    for b in range(BATCHES):  # an append a stored batch
        offsets = range(b * BATCH, (b + 1) * BATCH)
        m.append("t", [Record(b"k%02d" % (i % KEYS), b"v%05d" % i + b"x" * 90) for i in offsets])
    m.get_log("t").roll()  # the cleaner cleans only rolled segments
    watched = Watched(m, "t")
    watched.asked = []
    yield watched
    m.close()


def read(log: Watched, offset: int, spare: Any = None) -> Read:
    got = read_partition(Wanted("t", 0, offset, LIMIT, log), LIMIT, True, spare)
    assert got.error == ErrorCode.none
    return got


def test_the_next_read_starts_from_the_spare_and_gives_what_a_fresh_one_does(
    log: Watched,
) -> None:
    first = read(log, 0)
    assert first.next_offset == BATCH and first.spare is not None
    fresh = read(log, first.next_offset)
    log.asked.clear()
    reused = read(log, first.next_offset, first.spare)
    assert (reused.records, reused.next_offset) == (fresh.records, fresh.next_offset)
    assert reused.next_offset == 2 * BATCH
    assert log.asked == [2 * BATCH]  # the log was asked only for what follows the spare


def test_after_a_cleaner_pass_the_spare_is_not_used(log: Watched) -> None:
    first = read(log, 0)
    assert first.spare is not None
    # every key is written again in the last batch: the cleaner keeps only that one
    assert LogCleaner(log.manager, SETTINGS).clean_now("t").removed > 0
    log.asked.clear()
    after = read(log, first.next_offset, first.spare)
    assert log.asked == [first.next_offset]  # read from the log again
    assert after.next_offset == BATCHES * BATCH  # the last batch, not the spare's
    assert after.records == read(log, first.next_offset).records
