"""protobuf ⇄ client values and request building, without a server."""

from __future__ import annotations

import pytest

from compactlog import errors
from compactlog.client import _convert as cv
from compactlog.client.reader import read_request
from compactlog.client.types import Message, MessageId, Record
from compactlog.v1 import compactlog_pb2 as pb


def test_record_str_is_utf8_and_none_is_absent() -> None:
    msg = cv.record_to_pb(("ké", None))
    assert msg.key == "ké".encode()
    assert not msg.HasField("value")
    keyless = cv.record_to_pb((None, b""))
    assert not keyless.HasField("key")
    assert keyless.HasField("value") and keyless.value == b""  # empty is not null


def test_record_forms() -> None:
    full = cv.record_to_pb(Record(b"k", b"v", {"a": "b"}, 42))
    assert (full.key, full.value, dict(full.properties), full.event_time_ms) == (
        b"k",
        b"v",
        {"a": "b"},
        42,
    )
    assert cv.record_to_pb(("k", "v", {"a": "b"}, 42)) == full
    assert cv.record_to_pb((bytearray(b"k"), memoryview(b"v"))).value == b"v"


@pytest.mark.parametrize("bad", [("only-key",), (1, b"v"), "kv", ("k", "v", None, 0, "extra")])
def test_bad_records_are_invalid_argument(bad: object) -> None:
    with pytest.raises(errors.InvalidArgument):
        cv.record_to_pb(bad)  # type: ignore[arg-type]


def test_message_from_pb_keeps_absence() -> None:
    msg = pb.Message(id=pb.MessageId(ledger_id=3, entry_id=7), publish_time_ms=5)
    out = cv.message_from_pb(msg)
    assert out == Message(MessageId(ledger_id=3, entry_id=7), None, None, {}, 5, 0)
    assert str(out.id) == "3:7"
    msg.key = b""
    msg.value = b""
    assert cv.message_from_pb(msg).key == b"" and cv.message_from_pb(msg).value == b""


def test_topic_and_status_from_pb() -> None:
    info = pb.TopicInfo(
        name="t",
        kind=pb.SEGMENTED,
        config={"b": "2", "a": "1"},
        stats=pb.TopicStats(entries=3, last_id=pb.MessageId(entry_id=2)),
    )
    topic = cv.topic_from_pb(info)
    assert topic.kind == "segmented"
    assert list(topic.config) == ["a", "b"]
    assert topic.stats.first_id is None and topic.stats.last_id == MessageId(
        ledger_id=0, entry_id=2
    )
    assert cv.topic_from_pb(pb.TopicInfo(name="u")).kind == "ledger"

    status = cv.status_from_pb(pb.CompactionStatus(state=pb.CompactionStatus.RUNNING))
    assert status.state == "RUNNING" and status.running
    assert status.last_run is None and status.horizon is None
    done = cv.status_from_pb(
        pb.CompactionStatus(
            state=pb.CompactionStatus.SUCCESS,
            horizon=pb.MessageId(ledger_id=1, entry_id=9),
            last_run=pb.CompactionRun(read=4, kept=3, removed=1, engine="local"),
        )
    )
    assert done.horizon == MessageId(ledger_id=1, entry_id=9)
    assert done.last_run is not None and done.last_run.removed == 1


def test_kind_and_config() -> None:
    assert cv.kind_to_pb("SEGMENTED") == pb.SEGMENTED
    with pytest.raises(errors.InvalidArgument):
        cv.kind_to_pb("queue")
    assert cv.config_to_pb({"a": True, "b": 5, "c": "x"}) == {"a": "true", "b": "5", "c": "x"}


def test_read_request_starts() -> None:
    assert read_request("t").WhichOneof("start") == "position"
    assert read_request("t", "latest").position == pb.LATEST
    by_id = read_request("t", MessageId(ledger_id=2, entry_id=5), max_messages=3, follow=True)
    assert (by_id.message_id.ledger_id, by_id.message_id.entry_id) == (2, 5)
    assert by_id.max_messages == 3 and by_id.follow
    assert read_request("t", (1, 0)).WhichOneof("start") == "message_id"
    assert read_request("t", start_timestamp_ms=99).timestamp_ms == 99
    for bad in ("middle", (1, 2, 3), (-1, 0)):
        with pytest.raises(errors.InvalidArgument):
            read_request("t", bad)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgument):
        read_request("t", "latest", start_timestamp_ms=1)
    with pytest.raises(errors.InvalidArgument):
        read_request("t", max_messages=-1)
