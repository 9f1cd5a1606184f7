"""No request, however malformed, gets INTERNAL or UNKNOWN (CONTRACT section 5).

For every method of every compactlog service, random bytes go to a real server through
a generic channel call (no stub, no serializer): pure noise, and noise appended to a
valid request naming an existing topic of either kind (appended fields override the
valid ones, so this reaches the handlers with odd but parseable requests too).
Client-streaming methods get a short stream of such messages. Every answer must be OK,
a client-side deadline, or a status carrying a compactlog ErrorInfo whose reason is one
of the contract's; and the server must still serve afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog import errors
from compactlog.rpc_errors import error_info
from compactlog.v1 import compactlog_pb2 as pb

SERVICES = ("Log", "TopicAdmin", "CompactionEngine")
METHODS: list[MethodDescriptor] = [
    method for name in SERVICES for method in pb.DESCRIPTOR.services_by_name[name].methods
]
TOPICS = {"fuzz-ledger": pb.LEDGER, "fuzz-segmented": pb.SEGMENTED}
CALL_TIMEOUT_S = 1.0
EXAMPLES = int(os.environ.get("COMPACTLOG_FUZZ_EXAMPLES", "25"))  # per method


_INTS = {
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
}
_BY_NAME = {  # fields whose values reach the handlers' deeper paths when they are sensible
    "topic": st.sampled_from([*TOPICS, *TOPICS, "no-such-topic", "", "a/b"]),
    "name": st.sampled_from([*TOPICS, *TOPICS, "fuzz-new", "", "a/b", "."]),
    "subscription": st.sampled_from(["sub", "sub", "__compaction", "", "a/b"]),
    "wait_ms": st.integers(0, 300),
}


def _value(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    """Any value of one field: names the server knows among them, numbers at their
    bounds, enum numbers the enum lacks."""
    if field.name in _BY_NAME:
        return _BY_NAME[field.name]
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return messages(field.message_type, depth + 1)
    if field.type == FieldDescriptor.TYPE_STRING:
        return st.text(max_size=12)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=16)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type == FieldDescriptor.TYPE_ENUM:
        return st.integers(-1, 8)
    lo, hi = _INTS.get(field.type, (0, 10))
    return st.one_of(st.integers(0, 16), st.integers(lo, hi))


@st.composite
def messages(draw: st.DrawFn, descriptor: Descriptor, depth: int = 0) -> Message:
    """A message of any shape ``descriptor`` allows (maps and lists short)."""
    cls = GetMessageClass(descriptor)
    msg = cls()
    for field in descriptor.fields:
        if depth > 2 or (field.name not in _BY_NAME and not draw(st.booleans())):
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_f, value_f = (
                field.message_type.fields_by_name["key"],
                field.message_type.fields_by_name["value"],
            )
            for k, v in draw(
                st.dictionaries(_value(key_f, depth), _value(value_f, depth), max_size=2)
            ).items():
                getattr(msg, field.name)[k] = v
        elif field.is_repeated:
            items = draw(st.lists(_value(field, depth), max_size=3))
            target = getattr(msg, field.name)
            for item in items:
                target.add().CopyFrom(item) if field.message_type is not None else target.append(
                    item
                )
        elif field.message_type is not None:
            getattr(msg, field.name).CopyFrom(draw(_value(field, depth)))
        else:
            setattr(msg, field.name, draw(_value(field, depth)))
    return msg


def requests(method: MethodDescriptor) -> st.SearchStrategy[bytes]:
    """Noise, or a well-formed request of any shape with noise (maybe none) after it."""
    shaped = st.builds(
        lambda msg, tail: msg.SerializeToString() + tail,
        messages(method.input_type),
        st.one_of(st.just(b""), st.binary(max_size=16)),
    )
    return st.one_of(st.binary(max_size=48), shaped)


def call(channel: grpc.Channel, method: MethodDescriptor, messages: list[bytes]) -> None:
    """One call of ``method`` with raw request bytes; responses are read to the end."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    if method.client_streaming:
        stream: Any = iter(messages)
        if method.server_streaming:
            list(channel.stream_stream(path)(stream, timeout=CALL_TIMEOUT_S))
        else:
            channel.stream_unary(path)(stream, timeout=CALL_TIMEOUT_S)
    elif method.server_streaming:
        list(channel.unary_stream(path)(messages[0], timeout=CALL_TIMEOUT_S))
    else:
        channel.unary_unary(path)(messages[0], timeout=CALL_TIMEOUT_S)


def check_answer(channel: grpc.Channel, method: MethodDescriptor, messages: list[bytes]) -> None:
    try:
        call(channel, method, messages)
    except grpc.RpcError as err:
        code = err.code()
        assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), (
            f"{method.name}({messages!r}) -> {code.name}: {err.details()}"
        )
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return  # our own deadline: a follow read or a long consume wait
        info = error_info(err)
        assert info is not None, f"{method.name} -> {code.name} without ErrorInfo"
        assert info.reason in errors.BY_REASON, info


@pytest.fixture(scope="module")
def channel(module_server: Any) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(module_server.address) as chan:
        yield chan


@pytest.fixture(autouse=True)
def topics(channel: grpc.Channel) -> None:
    """The fuzzed topics exist before every method's examples (a DeleteTopic may have
    removed one)."""
    create = channel.unary_unary(
        "/compactlog.v1.TopicAdmin/CreateTopic",
        request_serializer=pb.CreateTopicRequest.SerializeToString,
        response_deserializer=pb.TopicInfo.FromString,
    )
    for name, kind in TOPICS.items():
        try:
            create(pb.CreateTopicRequest(name=name, kind=kind), timeout=10)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.ALREADY_EXISTS


@pytest.mark.parametrize("method", METHODS, ids=lambda m: f"{m.containing_service.name}.{m.name}")
def test_random_request_bytes_never_internal_or_unknown(
    channel: grpc.Channel, method: MethodDescriptor
) -> None:
    count = st.integers(1, 3) if method.client_streaming else st.just(1)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        messages = [data.draw(requests(method)) for _ in range(data.draw(count))]
        check_answer(channel, method, messages)

    fuzz()


def test_the_server_serves_on_after_the_noise(channel: grpc.Channel) -> None:
    publish = channel.unary_unary(
        "/compactlog.v1.Log/Publish",
        request_serializer=pb.PublishRequest.SerializeToString,
        response_deserializer=pb.PublishResponse.FromString,
    )
    for name in TOPICS:
        reply = publish(pb.PublishRequest(topic=name, records=[pb.Record(key=b"k")]), timeout=10)
        assert len(reply.ids) == 1
