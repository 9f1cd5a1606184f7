"""Server reflection under both names that tools ask for: ``grpc.reflection.v1`` (grpcurl,
grpcui, Postman and ``buf curl`` try it first) and ``grpc.reflection.v1alpha`` (older tools).

grpcio-reflection (1.85, the newest release) ships only v1alpha. The v1 protocol is the
same messages under another package: ``grpc/reflection/v1/reflection.proto`` is v1alpha's
file with the package renamed, every field number and type equal. So one servicer answers
both: the v1 method is registered with v1alpha's (de)serializers, which read and write
exactly the bytes a v1 client sends and expects. The v1 file descriptor is derived from
v1alpha's and added to the descriptor pool, so reflection can describe the v1 service too
(grpcurl's ``describe grpc.reflection.v1.ServerReflection``).
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2

V1ALPHA_SERVICE_NAME: str = reflection.SERVICE_NAME
V1_PACKAGE = "grpc.reflection.v1"
V1_SERVICE_NAME = f"{V1_PACKAGE}.ServerReflection"
V1_FILE = "grpc/reflection/v1/reflection.proto"
METHOD = "ServerReflectionInfo"


def v1_file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """v1alpha's reflection.proto renamed to v1, with upstream v1's file options."""
    old = f".{reflection_pb2.DESCRIPTOR.package}."
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name = V1_FILE
    proto.package = V1_PACKAGE
    for message in proto.message_type:
        for field in message.field:
            if field.HasField("type_name"):
                field.type_name = field.type_name.replace(old, f".{V1_PACKAGE}.", 1)
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(old, f".{V1_PACKAGE}.", 1)
            method.output_type = method.output_type.replace(old, f".{V1_PACKAGE}.", 1)
    proto.options.Clear()
    proto.options.go_package = "google.golang.org/grpc/reflection/grpc_reflection_v1"
    proto.options.java_package = "io.grpc.reflection.v1"
    proto.options.java_outer_classname = "ServerReflectionProto"
    proto.options.java_multiple_files = True
    return proto


def add_v1_descriptor(pool: descriptor_pool.DescriptorPool) -> None:
    """Make ``grpc.reflection.v1`` describable from ``pool`` (once per process)."""
    try:
        pool.FindFileByName(V1_FILE)
    except KeyError:
        pool.AddSerializedFile(v1_file_descriptor().SerializeToString())


def enable_server_reflection(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    """Serve reflection v1 and v1alpha, listing ``service_names`` and both reflection
    services, from one servicer over the default descriptor pool."""
    pool = descriptor_pool.Default()
    add_v1_descriptor(pool)
    names = [*service_names, V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME]
    servicer = reflection.aio.ReflectionServicer(names, pool=pool)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(name, {METHOD: handler})
            for name in (V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME)
        ]
    )
