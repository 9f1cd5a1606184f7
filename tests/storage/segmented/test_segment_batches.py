"""Segment files of stored batches: the layout, bytes-level reads, and the one CRC check.

Every read goes through ``batch.check``: a flipped byte anywhere in a segment is
``CorruptData`` naming the topic, file and position — never other data, never a short
answer without an error — and start-up truncates only a tail that was never fsynced.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from compactlog.errors import CorruptData, OffsetOutOfRange
from compactlog.storage import batch
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.types import MessageId, Record
from compactlog.v1 import compactlog_pb2 as pb

SETTINGS = ServerSettings(topic_defaults={})
BIG = 1 << 30


class Clock:
    now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def open_manager(root: Path) -> SegmentedLogManager:
    return SegmentedLogManager(root, SETTINGS, clock=Clock(), start_threads=False)


def seg_path(root: Path, topic: str, base: int = 0) -> Path:
    return root / topic / f"{base:020d}.log"


def batches_of(path: Path) -> list[batch.BatchHeader]:
    data = path.read_bytes()
    out, p = [], 0
    while p < len(data):
        out.append(batch.check(data, str(path), p))
        p += out[-1].size
    return out


def ids(pieces: list[memoryview | bytes]) -> list[int]:
    resp = pb.ReadResponse.FromString(b"".join(pieces))
    return [m.id.entry_id for m in resp.messages]


def three_batches(m: SegmentedLogManager, topic: str = "t") -> None:
    m.create_topic(topic, {})
    for b in range(3):
        m.append(topic, [Record(b"k%d" % i, b"v%d" % (5 * b + i)) for i in range(5)])


def test_a_publish_is_one_batch_with_its_offsets_and_times(tmp_path: Path) -> None:
    m = open_manager(tmp_path)
    three_batches(m)
    m.append("t", [Record(b"a", b"x", {"p": "q"}, 123), Record(b"b", None, None, 456)])
    heads = batches_of(seg_path(tmp_path, "t"))
    assert [(h.first_id, h.last_id, h.count) for h in heads] == [
        (MessageId(0, 0), MessageId(0, 4), 5),
        (MessageId(0, 5), MessageId(0, 9), 5),
        (MessageId(0, 10), MessageId(0, 14), 5),
        (MessageId(0, 15), MessageId(0, 16), 2),
    ]
    now = int(Clock.now * 1000)
    assert all(h.publish_time_ms == now and h.attributes == 0 for h in heads)
    assert heads[-1].max_event_time_ms == 456 and heads[0].max_event_time_ms == now
    assert all(h.delete_horizon_ms == batch.NO_HORIZON for h in heads)
    m.close()


def test_read_payload_splices_and_trims_at_the_ends(tmp_path: Path) -> None:
    m = open_manager(tmp_path)
    three_batches(m)
    pieces, count, last = m.read_payload("t", 7, 100, 0, BIG)
    assert (ids(pieces), count, last) == (list(range(7, 15)), 8, 14)
    assert len(pieces) == 2  # the first batch is trimmed, the second spliced whole
    # A start inside a batch with max_messages spanning into the next one.
    pieces, count, last = m.read_payload("t", 3, 100, 4, BIG)
    assert (ids(pieces), count, last) == ([3, 4, 5, 6], 4, 6)
    assert ids(m.read_payload("t", 6, 12, 0, BIG)[0]) == list(range(6, 12))
    assert m.read_payload("t", 15, 100, 0, BIG) == ([], 0, None)
    assert m.read_payload("t", 4, 4, 0, BIG) == ([], 0, None)
    # The same records, byte for byte, as the decoded read.
    decoded = m.read("t", 2, 0)
    resp = pb.ReadResponse.FromString(b"".join(m.read_payload("t", 2, 15, 0, BIG)[0]))
    assert [(x.id.entry_id, x.key, x.value) for x in decoded] == [
        (x.id.entry_id, x.key, x.value) for x in resp.messages
    ]
    m.delete_records("t", 2)
    with pytest.raises(OffsetOutOfRange):
        m.read_payload("t", 1, 10, 0, BIG)
    m.close()


def test_read_payload_byte_limit_stops_between_batches(tmp_path: Path) -> None:
    m = open_manager(tmp_path)
    three_batches(m)
    one = sum(len(p) for p in m.read_payload("t", 5, 10, 0, BIG)[0])  # a whole batch
    two = one + sum(len(p) for p in m.read_payload("t", 10, 15, 0, BIG)[0])
    # A limit below one batch cuts it between messages; below one message, that message
    # still comes alone: a reader always makes progress.
    assert m.read_payload("t", 5, 15, 0, 1)[1:] == (1, 5)
    assert m.read_payload("t", 5, 15, 0, one)[1:] == (5, 9)
    assert m.read_payload("t", 5, 15, 0, two - 1)[1:] == (5, 9)
    assert m.read_payload("t", 5, 15, 0, two)[1:] == (10, 14)
    assert m.read_payload("t", 7, 15, 0, two - 1)[1:] == (8, 14)  # 7..9 trimmed: it fits
    m.close()


def test_append_request_takes_publish_request_bytes(tmp_path: Path) -> None:
    m = open_manager(tmp_path)
    m.create_topic("t", {"max.message.bytes": "100"})
    req = pb.PublishRequest(
        topic="t",
        records=[
            pb.Record(key=b"k", value=b"v", properties={"a": "b"}, event_time_ms=7),
            pb.Record(value=b""),
            pb.Record(key=b"gone"),
        ],
    )
    res = m.append_request("t", req.SerializeToString())
    assert (res.base_offset, res.count, res.offsets) == (0, 3, [0, 1, 2])
    got = m.read("t", 0, 0)
    assert [(x.key, x.value, dict(x.properties)) for x in got] == [
        (b"k", b"v", {"a": "b"}),
        (None, b"", {}),
        (b"gone", None, {}),
    ]
    assert got[0].event_time_ms == 7 and got[1].event_time_ms == int(Clock.now * 1000)
    big = pb.PublishRequest(records=[pb.Record(value=b"x"), pb.Record(value=b"y" * 200)])
    with pytest.raises(Exception, match=r"record 1 is \d+ bytes, over max\.message\.bytes=100"):
        m.append_request("t", big.SerializeToString())
    assert m.log_end_offset("t") == 3 and m.append_request("t", b"").count == 0
    m.close()


def _flip(path: Path, pos: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        byte = os.pread(fd, 1, pos)
        os.pwrite(fd, bytes([byte[0] ^ 0x10]), pos)
    finally:
        os.close(fd)


def test_a_flipped_byte_anywhere_in_a_closed_segment_is_corrupt_data(tmp_path: Path) -> None:
    m = open_manager(tmp_path)
    m.create_topic("t", {})
    m.append("t", [Record(b"a", b"1"), Record(None, b"2", {"h": "v"})])
    m.append("t", [Record(b"b", None)])
    m.append("t", [Record(b"c", b"")])
    m.get_log("t").roll()
    m.append("t", [Record(b"d", b"4")])
    three_batches(m, "other")
    path = seg_path(tmp_path, "t")
    good = [(x.id, x.key, x.value) for x in m.read("t", 0, 0)]
    for pos in range(path.stat().st_size):
        _flip(path, pos)
        with pytest.raises(CorruptData, match=rf"topic t, segment {path.name}, byte \d+"):
            m.read("t", 0, 0)
        with pytest.raises(CorruptData):
            m.read_payload("t", 0, 100, 0, BIG)
        with pytest.raises(CorruptData):
            m.read_payload("t", 3, 100, 0, BIG)  # a start after the batch does not help
        assert m.read_payload("t", 4, 5, 0, BIG)[2] == 4  # the next segment still reads
        assert m.read_payload("other", 0, 15, 0, BIG)[1] == 15
        _flip(path, pos)
    assert [(x.id, x.key, x.value) for x in m.read("t", 0, 0)] == good
    m.close()
    # After a restart too: the closed segment is kept whole, and still refuses to be read.
    size = path.stat().st_size
    _flip(path, size - 1)
    m = open_manager(tmp_path)
    assert path.stat().st_size == size
    with pytest.raises(CorruptData, match="CRC-32C mismatch"):
        m.read("t", 0, 0)
    assert [x.id.entry_id for x in m.read("t", 4, 0)] == [4]
    m.close()


def _crash(m: SegmentedLogManager) -> None:
    for one in m.logs().values():
        one.mark_deleted()


def test_damage_below_the_recovery_point_is_kept_not_truncated(tmp_path: Path) -> None:
    m = open_manager(tmp_path)
    three_batches(m)
    m.close()  # a clean shutdown: every offset is below the recovery point
    path = seg_path(tmp_path, "t")
    size = path.stat().st_size
    _flip(path, size // 2)
    m = open_manager(tmp_path)
    assert path.stat().st_size == size
    with pytest.raises(CorruptData, match=r"CRC-32C mismatch"):
        m.read("t", 0, 0)
    # The damaged segment is closed; appends go on at the next offset, readable.
    assert m.append("t", [Record(b"z", b"z")]).offsets == [15]
    assert [x.id.entry_id for x in m.read("t", 15, 0)] == [15]
    m.close()
    m = open_manager(tmp_path)
    assert path.stat().st_size == size and m.log_end_offset("t") == 16
    m.close()


def test_recovery_truncates_a_batch_whose_offsets_do_not_increase(tmp_path: Path) -> None:
    m = open_manager(tmp_path)
    three_batches(m)
    _crash(m)  # no recovery point: the whole active segment is tail
    path = seg_path(tmp_path, "t")
    size = path.stat().st_size
    run = batch.encode_request(batch.records_to_request([Record(b"x", b"y")]), 0, 0, 12, 1)
    forged = batch.pack(run.payload, 1, MessageId(0, 12), MessageId(0, 12), 1, 1)
    with open(path, "ab") as fh:
        fh.write(forged)  # a valid CRC, but offset 12 again
    m = open_manager(tmp_path)
    assert path.stat().st_size == size
    assert [x.id.entry_id for x in m.read("t", 0, 0)] == list(range(15))
    assert m.append("t", [Record(b"k", b"v")]).offsets == [15]
    m.close()
