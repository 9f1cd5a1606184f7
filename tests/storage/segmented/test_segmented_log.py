"""SegmentedLogManager / Log: appends, rolls, reads, retention, recovery — real files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from compactlog.errors import (
    InvalidTopicName,
    OffsetOutOfRange,
    RecordTooLarge,
    TopicExists,
    TopicNotFound,
)
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.types import MessageId, Record


class Clock:
    def __init__(self, start_s: float = 1_700_000_000.0) -> None:
        self.now = start_s

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: int) -> None:
        self.now += ms / 1000


SETTINGS = ServerSettings(topic_defaults={})


@pytest.fixture
def clock() -> Clock:
    return Clock()


def open_manager(root: Path, clock: Clock) -> SegmentedLogManager:
    return SegmentedLogManager(root, SETTINGS, clock=clock, start_threads=False)


def seg_files(root: Path, topic: str, ext: str = ".log") -> list[str]:
    return sorted(n for n in os.listdir(root / topic) if n.endswith(ext))


def fill(m: SegmentedLogManager, topic: str, n: int, key: bytes | None = b"k") -> None:
    for i in range(n):
        m.append(topic, [Record(key, b"value-%d" % i)])


def test_append_and_read_keep_everything(tmp_path: Path, clock: Clock) -> None:
    m = open_manager(tmp_path, clock)
    m.create_topic("t", {})
    res = m.append(
        "t",
        [
            Record(b"a", b"1", {"h": "v"}, 0),
            Record(None, b"", None, 42),
            Record(b"b", None),
            Record(b"", b"x"),
        ],
    )
    assert res.offsets == [0, 1, 2, 3]
    msgs = m.read("t", 0, 0)
    assert [x.id for x in msgs] == [MessageId(0, i) for i in range(4)]
    assert (msgs[0].key, msgs[0].value, dict(msgs[0].properties)) == (b"a", b"1", {"h": "v"})
    assert msgs[0].event_time_ms == msgs[0].publish_time_ms == int(clock.now * 1000)
    assert (msgs[1].key, msgs[1].value, msgs[1].event_time_ms) == (None, b"", 42)
    assert (msgs[2].value, msgs[3].key) == (None, b"")
    assert m.read("t", 2, 1)[0].id.entry_id == 2
    assert m.read("t", 4, 10) == []
    assert m.log_end_offset("t") == 4
    m.close()


def test_roll_on_segment_bytes_keeps_a_batch_whole(tmp_path: Path, clock: Clock) -> None:
    m = open_manager(tmp_path, clock)
    m.create_topic("t", {"segment.bytes": "300"})
    m.append("t", [Record(b"k", b"v" * 50) for _ in range(5)])  # one batch > segment.bytes
    assert m.stats("t").segments == 1
    m.append("t", [Record(b"k", b"v")])
    assert seg_files(tmp_path, "t") == [f"{0:020d}.log", f"{5:020d}.log"]
    assert m.stats("t").entries == 6
    m.close()


def test_roll_on_segment_ms_and_full_index(tmp_path: Path, clock: Clock) -> None:
    m = open_manager(tmp_path, clock)
    m.create_topic("t", {"segment.ms": "1000"})
    fill(m, "t", 2)
    clock.advance_ms(1001)
    fill(m, "t", 1)
    assert m.stats("t").segments == 2
    m.create_topic("i", {"segment.index.bytes": "16", "index.interval.bytes": "0"})
    fill(m, "i", 6)
    assert m.stats("i").segments >= 2
    assert [x.id.entry_id for x in m.read("i", 0, 0)] == list(range(6))
    m.close()


def test_reads_out_of_range_and_offset_for_timestamp(tmp_path: Path, clock: Clock) -> None:
    m = open_manager(tmp_path, clock)
    m.create_topic("t", {"segment.bytes": "200", "index.interval.bytes": "0"})
    for i in range(20):
        m.append("t", [Record(b"k", b"v", None, 1000 + 10 * i)])
    assert m.offset_for_timestamp("t", 1055) == 6
    assert m.offset_for_timestamp("t", 0) == 0
    assert m.offset_for_timestamp("t", 99999) is None
    m.delete_records("t", 7)
    with pytest.raises(OffsetOutOfRange):
        m.read("t", 6, 1)
    assert m.offset_for_timestamp("t", 0) == 7
    assert m.read("t", 7, 1)[0].id.entry_id == 7
    with pytest.raises(OffsetOutOfRange):
        m.delete_records("t", 21)
    m.close()


def test_log_start_retention_seed_example(tmp_path: Path, clock: Clock) -> None:
    """Segments with base offsets 0, 11, 23 and log start offset 25: the first two go."""
    m = open_manager(tmp_path, clock)
    m.create_topic("t", {"retention.ms": "-1"})
    log = m.get_log("t")
    fill(m, "t", 11)
    log.roll()
    fill(m, "t", 12)
    log.roll()
    fill(m, "t", 5)
    assert [s.base_offset for s in log.segments] == [0, 11, 23]
    log.log_start_offset = 25  # as DeleteRecords would, without its immediate deletion
    m.enforce_retention("t")
    assert [s.base_offset for s in log.segments] == [23]
    assert m.stats("t").entries == 3 and m.stats("t").first_offset == 25
    m.close()


def test_size_and_time_retention_counts(tmp_path: Path, clock: Clock) -> None:
    m = open_manager(tmp_path, clock)
    overrides = {"segment.bytes": "100", "retention.ms": "-1"}
    m.create_topic("s", overrides)
    fill(m, "s", 10)  # one batch of ~100 B each, one per segment
    size = max(s.size for s in m.get_log("s").segments)
    limit = 4 * size + size // 2
    m.update_config("s", {**overrides, "retention.bytes": str(limit)})
    m.enforce_retention("s")
    st = m.stats("s")
    # Kafka's rule: whole segments go while what remains stays >= retention.bytes.
    assert st.bytes >= limit and st.bytes - size < limit
    assert (st.segments, st.log_start_offset, st.entries) == (5, 5, 5)

    m.create_topic("t", {"segment.bytes": "100", "retention.ms": "1000"})
    for i in range(4):
        m.append("t", [Record(b"k", b"v", None, int(clock.now * 1000) + i * 600)])
    clock.advance_ms(2000)  # now - ts: 2000, 1400, 800, 200 → the first two expired
    m.enforce_retention("t")
    assert m.stats("t").segments == 2 and m.log_start_offset("t") == 2
    m.close()


def test_all_expired_keeps_one_empty_active_segment(tmp_path: Path, clock: Clock) -> None:
    m = open_manager(tmp_path, clock)
    m.create_topic(
        "t", {"segment.bytes": "100", "retention.ms": "10", "file.delete.delay.ms": "500"}
    )
    fill(m, "t", 5)
    clock.advance_ms(100)
    m.enforce_retention("t")
    st = m.stats("t")
    assert (st.segments, st.entries, st.bytes, st.log_start_offset) == (1, 0, 0, 5)
    assert (st.first_offset, st.last_offset) == (None, None)
    assert seg_files(tmp_path, "t") == [f"{5:020d}.log"]
    assert len(seg_files(tmp_path, "t", ".deleted")) == 15  # waiting for file.delete.delay.ms
    clock.advance_ms(501)
    m.get_log("t").delete_expired_files()
    assert seg_files(tmp_path, "t", ".deleted") == []
    assert m.append("t", [Record(b"k", b"v")]).offsets == [5]
    m.close()


def test_record_too_large_leaves_nothing(tmp_path: Path, clock: Clock) -> None:
    m = open_manager(tmp_path, clock)
    m.create_topic("t", {"max.message.bytes": "200"})
    with pytest.raises(
        RecordTooLarge, match=r"record 1 is 2\d\d bytes, over max\.message\.bytes=200"
    ):
        m.append("t", [Record(b"k", b"v" * 100), Record(b"k", b"v" * 200), Record(b"k", b"v")])
    assert m.log_end_offset("t") == 0 and m.read("t", 0, 0) == []
    assert m.stats("t").bytes == 0
    # The limit is per record (each is checked), not per batch.
    assert m.append("t", [Record(b"k", b"v" * 150)] * 3).offsets == [0, 1, 2]
    m.close()


def test_flush_messages_reports_synced(tmp_path: Path, clock: Clock) -> None:
    m = open_manager(tmp_path, clock)
    m.create_topic("t", {"flush.messages": "2"})
    assert not m.append("t", [Record(b"k", b"v")]).synced
    assert m.append("t", [Record(b"k", b"v")]).synced
    m.create_topic("u", {"flush.ms": "0"})
    assert m.append("u", [Record(b"k", b"v")]).synced
    m.close()


def test_topics_persist_across_restart(tmp_path: Path, clock: Clock) -> None:
    m = open_manager(tmp_path, clock)
    m.create_topic("a.b-c_1", {"retention.ms": "-1", "segment.bytes": "1000"})
    with pytest.raises(TopicExists):
        m.create_topic("a.b-c_1", {})
    with pytest.raises(InvalidTopicName):
        m.create_topic("../x", {})
    fill(m, "a.b-c_1", 30)
    m.delete_records("a.b-c_1", 3)
    m.close()
    m = open_manager(tmp_path, clock)
    assert m.topic_names() == ["a.b-c_1"]
    assert m.overrides("a.b-c_1") == {"retention.ms": "-1", "segment.bytes": "1000"}
    assert m.config("a.b-c_1").segment_bytes == 1000
    assert m.log_start_offset("a.b-c_1") == 3 and m.log_end_offset("a.b-c_1") == 30
    m.update_config("a.b-c_1", {"segment.bytes": "2000"})
    assert m.config("a.b-c_1").retention_ms == 604800000
    m.delete_topic("a.b-c_1")
    with pytest.raises(TopicNotFound):
        m.read("a.b-c_1", 0, 1)
    assert not m.has_topic("a.b-c_1") and os.listdir(tmp_path) == ["~server"]
    m.close()


def _crash(m: SegmentedLogManager) -> None:
    """Drop the manager without a clean shutdown (no flush of the recovery point)."""
    for log in m.logs().values():
        log.mark_deleted()


@pytest.mark.parametrize("damage", ["torn", "flipped"])
def test_corrupted_tail_is_truncated(tmp_path: Path, clock: Clock, damage: str) -> None:
    m = open_manager(tmp_path, clock)
    m.create_topic("t", {})
    fill(m, "t", 10)
    path = tmp_path / "t" / f"{0:020d}.log"
    size = path.stat().st_size
    _crash(m)
    data = bytearray(path.read_bytes())
    if damage == "torn":
        data = data[: size - 7]
    else:
        data[size - 20] ^= 0x04  # a bit inside the last batch's payload
    path.write_bytes(bytes(data))
    m = open_manager(tmp_path, clock)
    assert [x.id.entry_id for x in m.read("t", 0, 0)] == list(range(9))
    assert path.stat().st_size < size
    assert m.append("t", [Record(b"k", b"v")]).offsets == [9]
    m.close()


def test_missing_and_corrupt_indexes_are_rebuilt(tmp_path: Path, clock: Clock) -> None:
    m = open_manager(tmp_path, clock)
    m.create_topic("t", {"segment.bytes": "2000", "index.interval.bytes": "100"})
    fill(m, "t", 100)
    m.close()
    files = seg_files(tmp_path, "t", ".index")
    (tmp_path / "t" / files[0]).unlink()
    (tmp_path / "t" / files[1]).write_bytes(b"\x00\x00\x00\x05\x00\x00\x00")
    m = open_manager(tmp_path, clock)
    assert [x.id.entry_id for x in m.read("t", 0, 0)] == list(range(100))
    assert m.read("t", 57, 1)[0].id.entry_id == 57
    assert (tmp_path / "t" / files[0]).stat().st_size > 0
    m.close()


def test_concurrent_reads_while_appending(tmp_path: Path, clock: Clock) -> None:
    m = open_manager(tmp_path, clock)
    m.create_topic("t", {"segment.bytes": "500"})
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(200):
                got = [x.id.entry_id for x in m.read("t", 0, 0)]
                assert got == list(range(len(got)))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    fill(m, "t", 300)
    for t in threads:
        t.join()
    assert errors == []
    m.close()
