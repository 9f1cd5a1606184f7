"""Server reflection answers both protocols tools speak: ``grpc.reflection.v1`` (grpcurl,
``buf curl``) and ``grpc.reflection.v1alpha``, against the real server process.

The v1 calls are made with hand-encoded request bytes on the v1 method path, so they do not
lean on the server's own (shared) message classes."""

from __future__ import annotations

import json
import subprocess

import grpc
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2

V1_METHOD = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
V1ALPHA_METHOD = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
COMPACTLOG_SERVICES = {
    "compactlog.v1.Log",
    "compactlog.v1.TopicAdmin",
    "compactlog.v1.CompactionEngine",
    "grpc.health.v1.Health",
}


def string_field(number: int, text: str) -> bytes:
    """One length-delimited protobuf field (wire type 2), encoded by hand."""
    data = text.encode()
    assert number < 16 and len(data) < 128
    return bytes([number << 3 | 2, len(data)]) + data


def ask(
    channel: grpc.Channel, method: str, request: bytes
) -> reflection_pb2.ServerReflectionResponse:
    call = channel.stream_stream(method, request_serializer=None, response_deserializer=None)
    answer: bytes = next(iter(call(iter([request]), timeout=30)))
    # v1's response has v1alpha's field numbers and types: one parser reads both.
    return reflection_pb2.ServerReflectionResponse.FromString(answer)


def file_of(
    response: reflection_pb2.ServerReflectionResponse,
) -> descriptor_pb2.FileDescriptorProto:
    assert response.WhichOneof("message_response") == "file_descriptor_response", response
    first = response.file_descriptor_response.file_descriptor_proto[0]
    return descriptor_pb2.FileDescriptorProto.FromString(first)


def test_v1_lists_services(shared_server, connect) -> None:  # type: ignore[no-untyped-def]
    channel = connect(shared_server.address).channel
    listed = ask(channel, V1_METHOD, string_field(7, ""))  # list_services = 7
    names = {s.name for s in listed.list_services_response.service}
    reflection = {"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}
    assert names >= COMPACTLOG_SERVICES | reflection


def test_v1_and_v1alpha_give_the_same_descriptor(shared_server, connect) -> None:  # type: ignore[no-untyped-def]
    channel = connect(shared_server.address).channel
    request = string_field(4, "compactlog.v1.TopicAdmin")  # file_containing_symbol = 4
    v1 = file_of(ask(channel, V1_METHOD, request))
    v1alpha = file_of(ask(channel, V1ALPHA_METHOD, request))
    assert v1 == v1alpha
    assert v1.name == "compactlog/v1/compactlog.proto" and v1.package == "compactlog.v1"
    assert {"Log", "TopicAdmin", "CompactionEngine"} <= {s.name for s in v1.service}


def test_v1_describes_itself(shared_server, connect) -> None:  # type: ignore[no-untyped-def]
    channel = connect(shared_server.address).channel
    request = string_field(4, "grpc.reflection.v1.ServerReflection")
    proto = file_of(ask(channel, V1_METHOD, request))
    assert proto.name == "grpc/reflection/v1/reflection.proto"
    assert proto.package == "grpc.reflection.v1"
    (method,) = proto.service[0].method
    assert method.input_type == ".grpc.reflection.v1.ServerReflectionRequest"
    assert method.output_type == ".grpc.reflection.v1.ServerReflectionResponse"
    fields = [f.type_name for m in proto.message_type for f in m.field if f.type_name]
    assert fields and all(t.startswith(".grpc.reflection.v1.") for t in fields)


def test_v1_unknown_symbol_is_not_found(shared_server, connect) -> None:  # type: ignore[no-untyped-def]
    channel = connect(shared_server.address).channel
    answer = ask(channel, V1_METHOD, string_field(4, "no.such.Service"))
    assert answer.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


def test_buf_curl_over_reflection_v1(shared_server, buf) -> None:  # type: ignore[no-untyped-def]
    """An outside client (buf curl, Go) that speaks only v1 lists and calls the API."""
    base = [buf, "curl", "--protocol", "grpc", "--http2-prior-knowledge"]
    base += ["--reflect-protocol", "grpc-v1"]
    url = f"http://{shared_server.address}"
    listed = subprocess.run(
        [*base, "--list-services", url], capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    assert set(listed.stdout.split()) >= COMPACTLOG_SERVICES
    called = subprocess.run(
        [*base, "-d", "{}", f"{url}/compactlog.v1.TopicAdmin/ListTopics"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert called.returncode == 0, called.stderr
    assert isinstance(json.loads(called.stdout), dict)
