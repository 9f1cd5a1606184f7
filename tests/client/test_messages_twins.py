"""The read side's per-message loop, ``client/_messages.c`` beside its pure twin
``_messages_py.py``: both make, over a real response, messages that read back every field
as the wire has it and as an eagerly built ``Message`` does, convert nothing until asked,
keep their response alive, and refuse a class without the slots they fill (the fixed ones
and those told to hold the marker of a field not converted yet)."""

from __future__ import annotations

import gc
import os
from types import ModuleType

import pytest

from compactlog.client import _messages_py, message
from compactlog.client.message import NULL_VALUE, Message
from compactlog.client.message_id import MessageId
from compactlog.v1 import compactlog_pb2 as pb

compiled = pytest.importorskip("compactlog.client._messages")
TWINS = [compiled, _messages_py]


@pytest.fixture(params=TWINS, ids=["compiled", "pure"])
def twin(request: pytest.FixtureRequest) -> ModuleType:
    module: ModuleType = request.param
    module.bind(Message, message._UNSET, message._LAZY)
    return module


def response(count: int) -> bytes:
    resp = pb.ConsumeResponse()
    for i in range(count):
        wire = resp.messages.add(publish_time_ms=i, redelivery_count=i % 3)
        wire.id.ledger_id, wire.id.entry_id, wire.id.partition = 2, i, i % 2
        if i % 4:
            wire.key = b"k%d" % i
        if i % 5:
            wire.value = b"v" * i
        if i % 7 == 0:
            wire.properties["p"] = str(i)
    return resp.SerializeToString()


def test_each_message_reads_back_the_wire_and_converts_nothing_first(twin: ModuleType) -> None:
    resp = pb.ConsumeResponse.FromString(response(600))  # indexes past the small ints
    made = twin.messages_of(resp.messages, "tópic")
    assert type(made) is list and len(made) == 600
    assert all(type(m) is Message for m in made)
    unset = message._UNSET  # every lazy slot holds the marker: nothing converted
    assert all(getattr(m, name) is unset for m in made for name in message._LAZY)
    for i, msg in enumerate(made):
        key = b"k%d" % i if i % 4 else None
        value = b"v" * i if i % 5 else None
        props = {"p": str(i)} if i % 7 == 0 else {}
        assert (msg.message_id().entry_id(), msg.message_id().partition()) == (i, i % 2)
        assert (msg.key, msg.data(), msg.properties(), msg.topic_name()) == (
            key, value, props, "tópic"
        )  # fmt: skip
        assert msg.redelivery_count() == i % 3 and msg.publish_timestamp() == i
        mid = MessageId(partition=i % 2, ledger_id=2, entry_id=i)
        assert msg == Message(mid, key, value, props, i, 0, "tópic")
    assert made[0].value is NULL_VALUE and made[0].is_tombstone is False
    assert made[1].id is made[1].id and made[1].properties is made[1].properties  # kept


def test_messages_keep_their_response_alive(twin: ModuleType) -> None:
    made = twin.messages_of(pb.ConsumeResponse.FromString(response(3)).messages, "t")
    # The compiled twin's are not the collector's to walk (they hold no cycle).
    assert [gc.is_tracked(m) for m in made] == [twin is _messages_py] * 3
    gc.collect()
    assert [m.data() for m in made] == [None, b"v", b"vv"]
    assert twin.messages_of(pb.ConsumeResponse().messages, "t") == []


def test_wire_ids_read_each_messages_id_and_keep_the_rest(twin: ModuleType) -> None:
    resp = pb.ConsumeResponse.FromString(response(5))
    made = twin.messages_of(resp.messages, "t")
    made[1].data()  # its wire message read and kept: the id comes from it
    own = pb.MessageId(ledger_id=9, entry_id=1)
    ids = twin.wire_ids([made[3], own, made[1], made[0]])
    assert ids == [resp.messages[3].id, own, resp.messages[1].id, resp.messages[0].id]
    assert ids[1] is own and twin.wire_ids(iter([])) == []
    with pytest.raises(ValueError):  # built from its fields: no wire id
        twin.wire_ids([Message((1, 2), None, b"v")])


def test_id_lists_write_each_id_as_the_request_does(twin: ModuleType) -> None:
    resp = pb.ConsumeResponse()
    for ledger, entry in [(3, 5), (3, 6), (3, 7), (3, 9), (4, 0)]:
        resp.messages.add().id.CopyFrom(pb.MessageId(ledger_id=ledger, entry_id=entry))
    for entry in (0, 1, 2, 300):  # another partition; a span that is not the count
        resp.messages.add().id.CopyFrom(pb.MessageId(ledger_id=3, entry_id=entry, partition=1))
    made = twin.messages_of(resp.messages, "t")
    own = pb.MessageId(ledger_id=7, entry_id=0)
    # runs of consecutive indexes: one ledger's entries in a row, ones with a gap, across a
    # ledger, across a partition; then out of order and a wire id of its own
    items = [*made[0:3], own, *made[2:5], *made[5:9], made[1], made[0], *made[4:6]]
    wanted = [resp.messages[i].id for i in (0, 1, 2)] + [own]
    wanted += [m.id for m in resp.messages[2:9]] + [resp.messages[i].id for i in (1, 0, 4, 5)]
    for limit in (1, 4, 1000):
        chunks = twin.id_lists(items, limit)
        assert [pb.AcknowledgeListRequest.FromString(c).ids for c in chunks] == [
            wanted[at : at + limit] for at in range(0, len(wanted), limit)
        ]
        assert chunks == _messages_py.id_lists(items, limit)  # the same bytes, both twins
    assert twin.id_lists([], 10) == []
    with pytest.raises(ValueError):
        twin.id_lists(items, 0)


def test_a_class_without_the_slots_is_refused(twin: ModuleType) -> None:
    class Plain:
        pass

    class Slotted:
        __slots__ = ("_at", "_batch")

    class NoLazy:  # the fixed slots, not a lazy one it is told of
        __slots__ = ("_at", "_batch", "_topic")

    for cls in (Plain, Slotted):
        with pytest.raises(TypeError, match="has no slot"):
            twin.bind(cls, message._UNSET, ())
    with pytest.raises(TypeError, match="has no slot _wire"):
        twin.bind(NoLazy, message._UNSET, ("_wire",))
    twin.bind(Message, message._UNSET, message._LAZY)
    assert type(twin.messages_of(pb.ConsumeResponse.FromString(response(1)).messages, "")[0]) is (
        Message
    )


def test_the_client_uses_the_compiled_twin_where_built() -> None:
    assert message.COMPILED is (os.environ.get("COMPACTLOG_NO_EXT") != "1")
    assert message.messages_of(pb.ConsumeResponse.FromString(response(2)).messages)[1].data() == (
        b"v"
    )
