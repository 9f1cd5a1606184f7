"""``send_async``'s request writer, ``client/_publish.c`` beside its pure twin
``_publish_py.py``: the same messages give the same PublishStream requests (protobuf reads
them back as the records given, split where ``batching_max_messages`` and
``batching_max_allowed_size_in_bytes`` say), the same wake-up flags, the same callbacks
with the same ids, and the same refusals."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.client import _publish_py, publish_wire
from compactlog.client.message_id import MessageId
from compactlog.v1 import compactlog_pb2 as pb

compiled = pytest.importorskip("compactlog.client._publish")
TWINS = [compiled, _publish_py]
HEAD = publish_wire.request_head("tópic")
FIELD = st.none() | st.binary(max_size=300)


def drain(pending: Any) -> list[tuple[bytes, list[Any]]]:
    out = []
    while (taken := pending.take()) is not None:
        out.append(taken)
    return out


def requests_of(twin: ModuleType, records: list[tuple[bytes | None, bytes | None]],
                max_messages: int, max_bytes: int) -> tuple[list[int], list[Any]]:  # fmt: skip
    pending = twin.Pending(HEAD, max_messages, max_bytes, 1 << 40)
    flags = [pending.add(key, value, i) for i, (key, value) in enumerate(records)]
    return flags, drain(pending)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.tuples(FIELD, FIELD), max_size=40),
    max_messages=st.integers(1, 12),
    max_bytes=st.integers(1, 1500),
)
def test_both_twins_write_the_same_requests_protobuf_reads_back(
    records: list[tuple[bytes | None, bytes | None]], max_messages: int, max_bytes: int
) -> None:
    flags, requests = requests_of(compiled, records, max_messages, max_bytes)
    assert (flags, requests) == requests_of(_publish_py, records, max_messages, max_bytes)
    got = []
    for data, callbacks in requests:
        req = pb.PublishRequest.FromString(data)
        assert req.topic == "tópic" and len(req.records) == len(callbacks)
        sizes = [len(r.key) + len(r.value) for r in req.records]
        assert len(callbacks) <= max_messages
        assert len(callbacks) == 1 or sum(sizes) - sizes[-1] < max_bytes
        assert len(callbacks) == 1 or sum(sizes) <= max_bytes
        for rec, callback in zip(req.records, callbacks, strict=True):
            key = rec.key if rec.HasField("key") else None
            value = rec.value if rec.HasField("value") else None
            got.append((callback, key, value))
    assert got == [(i, key, value) for i, (key, value) in enumerate(records)]


@pytest.mark.parametrize("twin", TWINS, ids=["compiled", "pure"])
def test_flags_wake_the_sender_count_what_is_unanswered_and_say_closed(twin: ModuleType) -> None:
    pending = twin.Pending(HEAD, 3, 1000, 4)
    assert not pending.waiting and pending.take() is None
    assert pending.add(b"k", b"v", 0) == twin.WAKE  # a first message
    assert pending.add(None, b"v", 1) == 0 and pending.waiting and not pending.full
    assert pending.add(b"k", None, 2) == twin.WAKE and pending.full  # sealed at three
    assert pending.add(b"k", b"", 3) == twin.WAKE | twin.CROWDED  # four not answered
    assert (pending.added, pending.unanswered) == (4, 4)
    first, second = drain(pending)
    assert first[1] == [0, 1, 2] and second[1] == [3]
    pending.answered(3)
    assert pending.unanswered == 1 and not pending.waiting
    pending.close()
    assert pending.add(b"k", b"v", 4) == twin.CLOSED and pending.added == 4
    assert pending.take() is None


@pytest.mark.parametrize("twin", TWINS, ids=["compiled", "pure"])
def test_an_encoded_record_keeps_its_properties_and_time(twin: ModuleType) -> None:
    pending = twin.Pending(HEAD, 10, 1000, 100)
    record = (b"k", b"v", {"a": "b"}, 7)
    pending.add_encoded(publish_wire.encoded(record), 2, "cb")
    pending.add(b"k2", b"v2", "cb2")
    ((data, callbacks),) = drain(pending)
    want = pb.PublishRequest(topic="tópic")
    want.records.add(key=b"k", value=b"v", properties={"a": "b"}, event_time_ms=7)
    want.records.add(key=b"k2", value=b"v2")
    assert data == want.SerializeToString() and callbacks == ["cb", "cb2"]


@pytest.mark.parametrize("twin", TWINS, ids=["compiled", "pure"])
def test_keys_and_values_other_than_bytes_are_refused(twin: ModuleType) -> None:
    pending = twin.Pending(HEAD, 10, 1000, 100)
    for key, value in ((bytearray(b"k"), b"v"), (b"k", "v"), (1, None)):
        with pytest.raises(TypeError, match="must be bytes or None"):
            pending.add(key, value, None)
    assert pending.added == 0 and not pending.waiting


@pytest.mark.parametrize("twin", TWINS, ids=["compiled", "pure"])
def test_call_back_gives_each_its_id_and_stops_after_a_raise(twin: ModuleType) -> None:
    calls: list[tuple[object, MessageId]] = []

    def ok(result: object, msg_id: MessageId) -> None:
        calls.append((result, msg_id))

    def boom(result: object, msg_id: MessageId) -> None:
        raise ValueError(f"boom {msg_id}")

    callbacks = [ok, boom, ok]
    done, error = twin.call_back(callbacks, 0, "Ok", 5, 10, MessageId)
    assert done == 2 and isinstance(error, ValueError) and str(error) == "boom 5:11"
    assert error.__traceback__ is not None
    assert twin.call_back(callbacks, done, "Ok", 5, 10, MessageId) == (3, None)
    assert calls == [("Ok", MessageId(-1, 5, 10)), ("Ok", MessageId(-1, 5, 12))]
    assert all(type(m) is MessageId and m.partition() == 0 for _, m in calls)


@pytest.mark.parametrize("twin", TWINS, ids=["compiled", "pure"])
def test_call_back_ids_reads_each_wire_id_and_stops_after_a_raise(twin: ModuleType) -> None:
    calls: list[tuple[object, MessageId]] = []

    def ok(result: object, msg_id: MessageId) -> None:
        calls.append((result, msg_id))

    def boom(result: object, msg_id: MessageId) -> None:
        raise ValueError(f"boom {msg_id}")

    reply = pb.PublishResponse(
        ids=[pb.MessageId(ledger_id=3, entry_id=7, partition=p) for p in (2, 0, 1)]
        + [pb.MessageId(ledger_id=4, entry_id=1, partition=0)]
    )
    callbacks = [ok, boom, ok, ok]
    done, error = twin.call_back_ids(callbacks, 0, "Ok", reply.ids, MessageId)
    assert done == 2 and isinstance(error, ValueError) and str(error) == "boom 3:7"
    assert twin.call_back_ids(callbacks, done, "Ok", reply.ids, MessageId) == (4, None)
    assert calls == [("Ok", MessageId(2, 3, 7)), ("Ok", MessageId(1, 3, 7)), ("Ok", (4, 1))]
    assert [m.partition() for _, m in calls] == [2, 1, 0]
    assert all(type(m) is MessageId for _, m in calls)
    with pytest.raises(ValueError, match="one id a callback"):
        twin.call_back_ids([ok], 0, "Ok", reply.ids, MessageId)
