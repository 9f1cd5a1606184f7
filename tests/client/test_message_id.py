"""``MessageId`` (CONTRACT section 13): text and bytes round trips, and the pair it extends."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactlog import records
from compactlog.client import Message, MessageId
from compactlog.client._convert import id_from_pb, id_to_pb, message_from_pb
from compactlog.client.reader import read_request
from compactlog.errors import InvalidArgument
from compactlog.v1 import compactlog_pb2 as pb

i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
i32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
ids = st.builds(MessageId, i64, i64, i32)


@given(ids)
def test_str_parse_round_trip(mid: MessageId) -> None:
    text = str(mid)
    assert MessageId.parse(text) == mid
    assert text.count(":") == (2 if mid.partition else 1)


@given(ids)
def test_serialize_deserialize_round_trip(mid: MessageId) -> None:
    data = mid.serialize()
    assert isinstance(data, bytes) and len(data) == 21
    back = MessageId.deserialize(data)
    assert back == mid and back.partition == mid.partition
    assert (back.ledger_id, back.entry_id) == (mid.ledger_id, mid.entry_id)


@given(ids)
def test_pickle_and_replace_keep_the_partition(mid: MessageId) -> None:
    assert pickle.loads(pickle.dumps(mid)) == mid
    assert mid._replace(entry_id=7).partition == mid.partition


@given(st.binary(max_size=30))
def test_deserialize_refuses_other_bytes(data: bytes) -> None:
    try:
        MessageId.deserialize(data)
    except InvalidArgument:
        return
    assert len(data) == 21 and data[0] == 1


@pytest.mark.parametrize("text", ["", "1", "1:2:3:4", "a:b", "1:x"])
def test_parse_refuses_other_text(text: str) -> None:
    with pytest.raises(InvalidArgument):
        MessageId.parse(text)


def test_partition_zero_is_the_plain_pair() -> None:
    plain = MessageId(3, 4)
    assert plain == (3, 4) and plain == (3, 4) and plain == records.MessageId(3, 4)
    assert hash(plain) == hash((3, 4)) and {(3, 4): 1}[plain] == 1
    ledger, entry = plain
    assert (ledger, entry, plain.partition, str(plain)) == (3, 4, 0, "3:4")
    other = MessageId(3, 4, partition=2)
    assert other != plain and other != (3, 4) and str(other) == "3:4:2"
    assert MessageId(1, 9) < MessageId(2, 0)
    assert MessageId.earliest == MessageId(-1, -1) and MessageId.latest > MessageId(2**40, 0)


def test_wire_conversion_keeps_ids_and_fields() -> None:
    for mid in (MessageId(5, 6), MessageId(5, 6, partition=3)):
        back = id_from_pb(id_to_pb(mid))
        assert back == mid and back.partition == mid.partition
    wire = pb.Message(id=pb.MessageId(ledger_id=1, entry_id=2), key=b"k", publish_time_ms=9)
    msg = message_from_pb(wire, "t")
    assert isinstance(msg, Message) and msg.message_id() == MessageId(1, 2)
    assert msg.value() is None and msg.value == None  # noqa: E711 - the field form
    assert msg.properties() == {} and msg.topic_name() == "t" and msg.partition_key() == "k"
    assert not msg.value and msg.is_tombstone
    with_value = Message((1, 3), None, b"v", {"a": "b"})
    assert with_value.value == b"v" and with_value.value() == b"v"
    assert with_value.properties == {"a": "b"} and with_value.properties() == {"a": "b"}
    assert pickle.loads(pickle.dumps(with_value)) == with_value


def test_the_older_reader_takes_the_pulsar_ends() -> None:
    assert read_request("t", MessageId.earliest).position == pb.EARLIEST
    assert read_request("t", MessageId.latest).position == pb.LATEST
    assert read_request("t", MessageId(2, 3)).message_id == pb.MessageId(ledger_id=2, entry_id=3)
