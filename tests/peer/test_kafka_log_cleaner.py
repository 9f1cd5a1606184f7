"""Port of Kafka's ``LogCleanerTest`` (core, kafka.log): behaviour only, through the
cleaner's own API (``LogCleaner.clean_now`` over a real ``SegmentedLogManager`` on disk).
What applies: keys kept at their latest offset, deletes, keyless records, a partial clean
when the offset map is full, large records, segment grouping. Transactions, producer
state, leader epochs and the FakeOffsetMap injections do not apply (no transactions
here; the offset map is the cleaner's own)."""

from __future__ import annotations

from pathlib import Path

from compactlog.compactor.log_cleaner import group_segments_by_size
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.types import Record
from tests.compactor.log_cleaner.test_log_cleaner import Clock, open_all

SEGMENT = {"cleanup.policy": "compact", "segment.bytes": "1024", "retention.ms": "-1"}


def key(i: int) -> bytes:
    return b"%d" % i


def fill_until(m: SegmentedLogManager, topic: str, segments: int, value: bytes = b"") -> None:
    """Append ``record(offset, offset)`` (LogCleanerTest's ``record``) until the log has
    ``segments`` segments."""
    log = m.get_log(topic)
    while len(log.segments) < segments:
        end = m.log_end_offset(topic)
        m.append(topic, [Record(key(end), value or key(end))])


def keys_in_log(m: SegmentedLogManager, topic: str) -> list[int]:
    """LogTestUtils.keysInLog: the keys of records that have a value, in offset order."""
    read = m.read(topic, m.log_start_offset(topic), 0)
    return [int(x.key) for x in read if x.key is not None and x.value is not None]


def offsets_in_log(m: SegmentedLogManager, topic: str) -> list[int]:
    return [x.id.entry_id for x in m.read(topic, m.log_start_offset(topic), 0)]


def test_clean_segments(tmp_path: Path) -> None:
    """LogCleanerTest.testCleanSegments, with real duplicates for its FakeOffsetMap:
    keys 1, 3, 5, 7, 9 written again later survive only at their later offsets."""
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", SEGMENT)
    fill_until(m, "t", 3)
    first = m.log_end_offset("t")
    for k in (1, 3, 5, 7, 9):
        m.append("t", [Record(key(k), b"again")])
    fill_until(m, "t", 5)
    leo = m.log_end_offset("t")
    c.clean_now("t")
    read = m.read("t", 0, 0)
    at = {int(x.key or b"-1"): x.id.entry_id for x in read}
    assert [at[k] for k in (1, 3, 5, 7, 9)] == list(range(first, first + 5))
    assert len(read) == len(at)  # each key once
    assert set(at) == set(range(first)) | set(range(first + 5, leo))
    m.close()


def test_cleaning_with_deletes(tmp_path: Path) -> None:
    """LogCleanerTest.testCleaningWithDeletes: none of the keys deleted still has a value."""
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", SEGMENT)
    fill_until(m, "t", 2)
    leo = m.log_end_offset("t")
    for k in range(0, leo, 2):
        m.append("t", [Record(key(k), None)])
    fill_until(m, "t", 4)
    c.clean_now("t")
    kept = set(keys_in_log(m, "t"))
    assert not kept & set(range(0, leo, 2))
    assert set(range(1, leo, 2)) <= kept
    m.close()


def test_cleaning_with_unkeyed_messages(tmp_path: Path) -> None:
    """LogCleanerTest.testCleaningWithUnkeyedMessages: a pass drops every keyless record,
    counts them, and the log shrinks by their size."""
    m, c = open_all(tmp_path, Clock())
    m.create_topic("t", SEGMENT)
    log = m.get_log("t")
    while len(log.segments) < 2:
        m.append("t", [Record(None, b"x" * 20)])
    unkeyed = m.log_end_offset("t")
    m.append("t", [Record(b"k", b"v")])
    log.roll()
    before = sum(s.size for s in log.segments)
    result = c.clean_now("t")
    assert result.keyless_dropped == unkeyed - (len(offsets_in_log(m, "t")) - 1)
    assert offsets_in_log(m, "t")[-1] == unkeyed
    assert sum(s.size for s in m.get_log("t").segments) < before
    m.close()


def test_partial_segment_clean(tmp_path: Path) -> None:
    """LogCleanerTest.testPartialSegmentClean: with room in the offset map for one key, a
    pass cleans up to where the map filled; later passes finish the job."""
    m, c = open_all(tmp_path, Clock(), buffer=48)
    m.create_topic("t", SEGMENT)
    for k in (0, 0, 1, 1, 0):
        m.append("t", [Record(key(k), b"v")])
    m.get_log("t").roll()
    c.clean_now("t")
    assert offsets_in_log(m, "t") == [1, 2, 3, 4]
    for _ in range(2):
        c.clean_now("t")
    assert offsets_in_log(m, "t") == [3, 4]
    m.close()


def test_large_message(tmp_path: Path) -> None:
    """LogCleanerTest.testLargeMessage: records far above the cleaner's read buffer (here
    each is larger than the whole dedupe buffer) clean as small ones do."""
    m, c = open_all(tmp_path, Clock())
    big = 64 * 1024
    config = {**SEGMENT, "segment.bytes": str(big * 16), "max.message.bytes": str(big * 2)}
    m.create_topic("t", config)
    for k in (1, 2, 1, 3, 2):
        m.append("t", [Record(key(k), bytes([k]) * big)])
    m.get_log("t").roll()
    c.clean_now("t")
    survivors = m.read("t", 0, 0)
    assert [(x.id.entry_id, x.key) for x in survivors] == [(2, b"1"), (3, b"3"), (4, b"2")]
    assert all(len(x.value or b"") == big for x in survivors)
    m.close()


def test_segment_grouping(tmp_path: Path) -> None:
    """LogCleanerTest.testSegmentGrouping: groups stay under the size and index limits,
    every segment in exactly one group, in order."""
    m, _c = open_all(tmp_path, Clock())
    m.create_topic("t", {**SEGMENT, "segment.bytes": "300"})
    fill_until(m, "t", 12)
    segments = list(m.get_log("t").segments[:-1])
    size = max(s.size for s in segments)
    for max_size in (size, 2 * size, 5 * size, 10**9):
        groups = group_segments_by_size(segments, max_size, 10**9, 2**31)
        assert [s for g in groups for s in g] == segments
        assert all(len(g) == 1 or sum(s.size for s in g) <= max_size for g in groups)
    assert len(group_segments_by_size(segments, 10**9, 10**9, 2**31)) == 1
    m.close()
