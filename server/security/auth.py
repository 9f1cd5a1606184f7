"""Who may call what: bearer tokens and roles at the door (CONTRACT section 10).

``AuthInterceptor``, one ``grpc.aio`` server interceptor, checks every call's bearer token
(``server.security.principals``) and the role its method needs before any servicer, async
or synchronous, is chosen, so no servicer carries a check of its own. ``GRANTS`` names the
methods below ``admin``; ``deny`` is the one place a refusal becomes a status. The roles
table and the reasoning are in docs/security.md ("Roles", "How the server enforces it").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeAlias

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from compactlog.errors import CompactlogError, PermissionDenied, Unauthenticated
from compactlog.server.rpc.errors import abort_async
from compactlog.server.security.principals import Principal, Principals, Role
from compactlog.v1 import compactlog_pb2 as pb

log = logging.getLogger("compactlog.auth")

METADATA_KEY = "authorization"
SCHEME = "bearer"

# service.method -> the least role that may call it; anything not named needs ADMIN.
GRANTS: Mapping[str, Role] = {
    "Log.Read": Role.READER,
    "Log.Consume": Role.READER,
    "Log.ConsumeStream": Role.READER,
    "Log.Acknowledge": Role.READER,
    "Log.AcknowledgeList": Role.READER,
    "Log.NegativeAcknowledge": Role.READER,
    "Log.CloseConsumer": Role.READER,
    "Log.GetLastMessageId": Role.READER,
    "Log.GetKeyHistory": Role.READER,
    "TopicAdmin.GetTopic": Role.READER,
    "TopicAdmin.ListTopics": Role.READER,
    "TopicAdmin.GetPartitionMap": Role.READER,
    "TopicAdmin.GetCompactionStatus": Role.READER,
    "TopicAdmin.WatchCompaction": Role.READER,
    "ServerReflection.ServerReflectionInfo": Role.READER,
    "Log.Publish": Role.CLIENT,
    "Log.PublishStream": Role.CLIENT,
}
OPEN_SERVICES = frozenset({health_pb2.DESCRIPTOR.services_by_name["Health"].full_name})


def _services() -> Iterable[ServiceDescriptor]:
    yield from pb.DESCRIPTOR.services_by_name.values()
    yield from health_pb2.DESCRIPTOR.services_by_name.values()
    yield from reflection_pb2.DESCRIPTOR.services_by_name.values()


def method_roles() -> dict[str, Role | None]:
    """``/package.Service/Method`` -> the role it needs (None: open to anyone)."""
    roles: dict[str, Role | None] = {}
    for service in _services():
        for method in service.methods:
            path = f"/{service.full_name}/{method.name}"
            if service.full_name in OPEN_SERVICES:
                roles[path] = None
            else:
                roles[path] = GRANTS.get(f"{service.name}.{method.name}", Role.ADMIN)
    return roles


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of the first ``authorization: Bearer <token>`` entry, if any."""
    for key, value in metadata or ():
        if key != METADATA_KEY or not isinstance(value, str):
            continue
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == SCHEME and token.strip():
            return token.strip()
        return None
    return None


Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
Continuation: TypeAlias = "Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]"


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Checks every call's token and role; ``principals`` is swapped whole on reload."""

    def __init__(self, principals: Principals) -> None:
        self.principals = principals
        self.roles = method_roles()
        # A shard's slot: a call with no token but the front's own mark is the front's
        # own work (completing a spanning publish it accepted: front.spanning; finishing
        # an admin change of a spread topic a crash cut: front.spread.repair), which
        # the front let in at its door or decided itself. A caller's call relayed by the
        # front carries the caller's token and is checked here again.
        self.trusted: Callable[[Any], bool] | None = None

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        method: str = handler_call_details.method
        needed = self.roles.get(method, Role.ADMIN)
        if needed is None:
            return await continuation(handler_call_details)
        metadata: Any = handler_call_details.invocation_metadata
        token = bearer_token(metadata)
        if token is None and self.trusted is not None and self.trusted(metadata):
            return await continuation(handler_call_details)
        error = self.check(method, needed, token)
        handler = await continuation(handler_call_details)
        if error is None:
            return handler
        return denial(handler, error, _short(method))

    def principal_name(self, token: str) -> str | None:
        """The name of the principal holding ``token`` (another door's login: Kafka SASL)."""
        principal = self.principals.find(token)
        return None if principal is None else principal.name

    def check_call(self, call: str, token: str | None) -> CompactlogError | None:
        """``check`` for another door that maps its requests to gRPC calls: ``call`` is
        ``Service.Method`` (``Log.Publish``), needing the role ``GRANTS`` gives it."""
        service, _, method = call.partition(".")
        path = f"/{pb.DESCRIPTOR.package}.{service}/{method}"
        return self.check(path, GRANTS.get(call, Role.ADMIN), token)

    def check(self, method: str, needed: Role, token: str | None) -> CompactlogError | None:
        """None when the call may go on, else the error it ends with."""
        if token is None:
            return Unauthenticated(
                f"{_short(method)} needs a token: send 'authorization: Bearer <token>' metadata",
                method=_short(method),
            )
        principal = self.principals.find(token)
        if principal is None:
            log.debug("unknown token on %s", method)
            return Unauthenticated(
                f"{_short(method)}: the token is not valid on this server", method=_short(method)
            )
        if principal.role < needed:
            log.info("denied %s to %r", method, principal)
            return _denied(principal, method, needed)
        return None


def _denied(principal: Principal, method: str, needed: Role) -> PermissionDenied:
    return PermissionDenied(
        f"principal {principal.name!r} (role {principal.role.label}) may not call "
        f"{_short(method)}: it needs role {needed.label}",
        method=_short(method),
        principal=principal.name,
        role=principal.role.label,
        needed=needed.label,
    )


def _short(method: str) -> str:
    """``/compactlog.v1.TopicAdmin/CreateTopic`` -> ``TopicAdmin.CreateTopic``."""
    service, _, name = method.strip("/").rpartition("/")
    return f"{service.rpartition('.')[2]}.{name}" if name else method


async def deny(
    context: grpc.aio.ServicerContext[Any, Any], error: CompactlogError, method: str
) -> None:
    """The one way a refused call ends: the error's status, through ``server.rpc.errors``."""
    await abort_async(context, error, method)


def denial(handler: Handler | None, error: CompactlogError, method: str) -> Handler:
    """A handler of the same shape as ``handler`` that only ends the call with ``error``.

    The shape matters: gRPC reads one request before a unary handler runs and none
    before a streaming one. An unknown method (no handler) is refused as unary.
    """

    async def refuse(_request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await deny(context, error, method)

    streaming_in = handler is not None and handler.request_streaming
    streaming_out = handler is not None and handler.response_streaming
    if streaming_in and streaming_out:
        return grpc.stream_stream_rpc_method_handler(refuse)
    if streaming_in:
        return grpc.stream_unary_rpc_method_handler(refuse)
    if streaming_out:
        return grpc.unary_stream_rpc_method_handler(refuse)
    return grpc.unary_unary_rpc_method_handler(refuse)
