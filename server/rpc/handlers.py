"""Method handlers of the compactlog services, built from the proto's service descriptors.

Every request deserializer is checked, so a request that does not parse, or any request
once the server is shutting down, reaches the servicer as a ``Refused``
(``server/rpc/errors.py``) instead of grpc's UNKNOWN; ``raw_requests`` and
``raw_responses`` name the methods that take or return bytes. Why, in
docs/architecture.md ("The rpc room").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import Any, NamedTuple, TypeAlias

import grpc

from compactlog.errors import CompactlogError, MalformedRequest, ShuttingDown
from compactlog.server.rpc.errors import Refused
from compactlog.v1 import compactlog_pb2 as pb

_MAKE = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
}


def _same(data: bytes) -> bytes:
    return data


Metadata: TypeAlias = Sequence[tuple[str, Any]]
"""A call's invocation metadata (``(key, str | bytes)`` pairs)."""

Admit = Callable[[bytes, str, Metadata], CompactlogError | None]
"""A check of a request before it is parsed, given its bytes, its message's name (e.g.
``CreateTopicRequest``) and the call's metadata: the error that refuses it, or None (a
shard's slot server refuses topics of other slots with it: ``storage/slots.py``, and,
under partition placement, calls on a spread topic that lack the front's mark:
``server/front/secret.py``)."""


class CheckedDeserializer:
    """``parse``, with a failure (or a call while shutting down, or one ``admit``
    refuses) as a ``Refused``. gRPC calls it with the bytes alone; ``AdmitInterceptor``
    binds each call's metadata to it when ``admit`` needs them."""

    def __init__(
        self,
        message: str,
        parse: Callable[[bytes], Any],
        stopping: Callable[[], bool],
        admit: Admit | None = None,
    ) -> None:
        self.message = message
        self.parse = parse
        self.stopping = stopping
        self.admit = admit

    def __call__(self, data: bytes, metadata: Metadata = ()) -> Any:
        message = self.message
        if self.stopping():
            return Refused(ShuttingDown("the server is shutting down"))
        if self.admit is not None:
            refusal = self.admit(data, message, metadata)
            if refusal is not None:
                return Refused(refusal)
        try:
            return self.parse(data)
        except Exception as exc:  # DecodeError, or upb's errors on invalid UTF-8 and nesting
            return Refused(
                MalformedRequest(f"malformed {message} ({len(data)} bytes): {exc}", request=message)
            )


def checked_deserializer(
    message: str,
    parse: Callable[[bytes], Any],
    stopping: Callable[[], bool],
    admit: Admit | None = None,
) -> CheckedDeserializer:
    return CheckedDeserializer(message, parse, stopping, admit)


Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


class AdmitInterceptor(grpc.aio.ServerInterceptor):
    """Hands each call's metadata to its ``CheckedDeserializer`` (a deserializer sees
    only bytes, and admission asks whether the call carries the front's mark). Goes
    after the auth interceptor, so an unauthenticated call is refused as such first."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        deserialize = getattr(handler, "request_deserializer", None)
        if not isinstance(deserialize, CheckedDeserializer) or deserialize.admit is None:
            return handler
        metadata = tuple(handler_call_details.invocation_metadata or ())

        def with_metadata(data: bytes) -> Any:
            return deserialize(data, metadata)

        bound: Handler = handler._replace(request_deserializer=with_metadata)  # type: ignore[union-attr]
        return bound


def service_handler(
    service: str,
    servicer: object,
    stopping: Callable[[], bool] = lambda: False,
    raw_requests: Collection[str] = (),
    raw_responses: Collection[str] = (),
    admit: Admit | None = None,
) -> grpc.GenericRpcHandler:
    """The handlers of ``compactlog.v1.<service>`` over ``servicer``'s methods."""
    descriptor = pb.DESCRIPTOR.services_by_name[service]
    handlers = {}
    for method in descriptor.methods:
        name = method.name
        request_cls = getattr(pb, method.input_type.name)
        response_cls = getattr(pb, method.output_type.name)
        parse = _same if name in raw_requests else request_cls.FromString
        make = _MAKE[(method.client_streaming, method.server_streaming)]
        handlers[name] = make(
            getattr(servicer, name),
            request_deserializer=checked_deserializer(
                method.input_type.name, parse, stopping, admit
            ),
            response_serializer=_same if name in raw_responses else response_cls.SerializeToString,
        )
    return grpc.method_handlers_generic_handler(descriptor.full_name, handlers)


class _Details(NamedTuple):
    """What a generic handler is asked with: a method's path, and no metadata."""

    method: str
    invocation_metadata: tuple[tuple[str, Any], ...] = ()


def add_services(
    server: grpc.aio.Server, handler: grpc.GenericRpcHandler, services: Iterable[str]
) -> None:
    """Serve ``handler``'s methods of the ``compactlog.v1`` ``services`` (short names) as
    registered methods, and ``handler`` as a generic one for any other path.

    gRPC matches calls of unregistered methods to the application one at a time, in the
    order they came: a thousand long-poll Consume calls made a GetTopic or a Publish
    wait seconds behind them. A registered method has a queue of its own.
    """
    server.add_generic_rpc_handlers((handler,))
    for name in services:
        service = pb.DESCRIPTOR.services_by_name[name]
        methods: dict[str, Handler] = {}
        for method in service.methods:
            found = handler.service(_Details(f"/{service.full_name}/{method.name}"))  # type: ignore[arg-type]
            if found is not None:
                methods[method.name] = found
        server.add_registered_method_handlers(service.full_name, methods)
