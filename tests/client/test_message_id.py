"""``MessageId`` (CONTRACT section 13): pulsar-client's constructor and accessor methods,
text and bytes round trips, and the plain pair it stays equal to."""

from __future__ import annotations

import pickle
import struct
from dataclasses import asdict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactlog import records
from compactlog.client import Message, MessageId
from compactlog.client._convert import id_from_pb, id_to_pb, message_from_pb
from compactlog.client.reader import read_request
from compactlog.client.types import TopicStats
from compactlog.errors import InvalidArgument
from compactlog.v1 import compactlog_pb2 as pb

i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
i32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
ids = st.builds(MessageId, i32, i64, i64)  # pulsar-client's order: partition first
batched = st.builds(MessageId, i32, i64, i64, i32)


@given(ids)
def test_str_parse_round_trip(mid: MessageId) -> None:
    text = str(mid)
    assert MessageId.parse(text) == mid
    assert text.count(":") == (2 if mid.partition() > 0 else 1)


@given(batched)
def test_serialize_deserialize_round_trip(mid: MessageId) -> None:
    data = mid.serialize()
    assert isinstance(data, bytes) and len(data) == 25
    back = MessageId.deserialize(data)
    assert back == mid and back.partition() == mid.partition()
    assert back.batch_index() == mid.batch_index()
    assert (back.ledger_id(), back.entry_id()) == (mid.ledger_id(), mid.entry_id())


def test_the_first_layout_still_deserializes() -> None:
    """Ids serialized before batch_index (version 1, 21 bytes) read back the same."""
    old = struct.pack(">BqqI", 1, 3, 17, 2)
    assert MessageId.deserialize(old) == MessageId(partition=2, ledger_id=3, entry_id=17)
    earliest = struct.pack(">BqqI", 1, -1, -1, 0)
    assert MessageId.deserialize(earliest) == MessageId.earliest


@given(batched)
def test_pickle_keeps_every_field(mid: MessageId) -> None:
    back = pickle.loads(pickle.dumps(mid))
    assert back == mid and back.partition() == mid.partition()
    assert back.batch_index() == mid.batch_index()


@given(st.binary(max_size=30))
def test_deserialize_refuses_other_bytes(data: bytes) -> None:
    try:
        MessageId.deserialize(data)
    except InvalidArgument:
        return
    assert (len(data), data[0]) in ((25, 2), (21, 1))


@pytest.mark.parametrize("text", ["", "1", "1:2:3:4", "a:b", "1:x"])
def test_parse_refuses_other_text(text: str) -> None:
    with pytest.raises(InvalidArgument):
        MessageId.parse(text)


def test_constructor_and_accessors_are_pulsar_clients() -> None:
    """``MessageId(partition=-1, ledger_id=-1, entry_id=-1, batch_index=-1)``, read back
    through methods, as pulsar-client's MessageId."""
    mid = MessageId(2, 7, 9, 4)
    assert (mid.partition(), mid.ledger_id(), mid.entry_id(), mid.batch_index()) == (2, 7, 9, 4)
    unset = MessageId()
    assert (unset.partition(), unset.ledger_id(), unset.entry_id(), unset.batch_index()) == (
        -1,
        -1,
        -1,
        -1,
    )
    named = MessageId(ledger_id=5, entry_id=6)
    assert (named.partition(), named.ledger_id(), named.entry_id()) == (-1, 5, 6)
    assert MessageId.earliest.ledger_id() == -1 and MessageId.earliest.entry_id() == -1
    assert MessageId.latest.entry_id() == 2**63 - 1
    assert repr(mid) == "MessageId(partition=2, ledger_id=7, entry_id=9, batch_index=4)"


def test_no_partition_index_is_the_plain_pair() -> None:
    """Pulsar's -1 ("not partitioned") and the wire's 0 are the same id, equal to the pair."""
    plain = MessageId(ledger_id=3, entry_id=4)
    wire = MessageId(0, 3, 4)
    assert plain == wire and hash(plain) == hash(wire)
    assert plain == (3, 4) and plain == records.MessageId(3, 4)
    assert hash(plain) == hash((3, 4)) and {(3, 4): 1}[plain] == 1
    ledger, entry = plain
    assert (ledger, entry, wire.partition(), str(plain)) == (3, 4, 0, "3:4")
    other = MessageId(partition=2, ledger_id=3, entry_id=4)
    assert other != plain and other != (3, 4) and str(other) == "3:4:2"
    assert MessageId(ledger_id=3, entry_id=4, batch_index=0) != plain
    assert MessageId(ledger_id=1, entry_id=9) < MessageId(ledger_id=2, entry_id=0)
    assert MessageId.earliest == (-1, -1) and MessageId.latest > (2**40, 0)
    assert MessageId.of(records.MessageId(3, 4)) == plain


def test_wire_conversion_keeps_ids_and_fields() -> None:
    for mid in (MessageId(ledger_id=5, entry_id=6), MessageId(3, 5, 6)):
        back = id_from_pb(id_to_pb(mid))
        assert back == mid and back.partition() == max(mid.partition(), 0)
    wire = pb.Message(id=pb.MessageId(ledger_id=1, entry_id=2), key=b"k", publish_time_ms=9)
    msg = message_from_pb(wire, "t")
    assert isinstance(msg, Message) and msg.message_id() == MessageId(ledger_id=1, entry_id=2)
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
    assert read_request("t", MessageId(ledger_id=2, entry_id=3)).message_id == pb.MessageId(
        ledger_id=2, entry_id=3
    )


def test_dataclass_copies_keep_the_ids() -> None:
    """``dataclasses.asdict`` rebuilds a tuple from its items: the client's dataclasses that
    hold ids (the CLI's JSON output starts from them) still convert."""
    stats = TopicStats(first_id=MessageId(ledger_id=1, entry_id=2), last_id=MessageId(0, 1, 5))
    data = asdict(stats)
    assert data["first_id"] == (1, 2) and isinstance(data["first_id"], MessageId)
    assert data["last_id"] == (1, 5)
