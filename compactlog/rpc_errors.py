"""gRPC status → compactlog error class, for every caller of the API over the wire.

The client library and the compactor's gRPC adapter (the Spark engine's driver) both
talk to the server and both want ``TopicNotFound``, never ``grpc.RpcError``; this module
is the one mapping they share. It lives in the core package, below every layer, so the
compactor needs no import of the client (``compactlog.client.errors`` re-exports it).

The class comes from the ``reason`` of the ``google.rpc.ErrorInfo`` in the status's
``grpc-status-details-bin`` trailer (CONTRACT section 5, read with
``rpc_status.from_call``), never from the message text; the ErrorInfo's metadata becomes
the exception's ``metadata``. Only a status without ErrorInfo (an older server, or one
gRPC produced itself: a deadline, a cancel, no connection, a message over the size
limit) falls back to the status code: UNAVAILABLE without ErrorInfo means no server
answered, ``ServerUnreachable``, and so does grpc's own INTERNAL for a call its core
failed (``CORE_FAILURE``). The server's message is kept as the exception message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from compactlog.errors import BY_CODE, BY_REASON, DOMAIN, CompactlogError, Unavailable

__all__ = [
    "ServerUnreachable",
    "call",
    "cancel",
    "error_info",
    "from_rpc_error",
    "translate_errors",
]

T = TypeVar("T")


class ServerUnreachable(Unavailable):
    """No connection to the server at all (refused, unresolvable, dropped)."""


def error_info(err: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The compactlog ErrorInfo of a failed call, or None when the status has none."""
    try:
        status = rpc_status.from_call(cast(grpc.Call, err))
    except Exception:  # not a Call, or a trailer that does not match the status
        return None
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            if info.domain == DOMAIN:
                return info
    return None


# grpc's own text when this side's core fails a call whose connection broke (a stream's
# write to a restarting server): no server answered, as with UNAVAILABLE.
CORE_FAILURE = "Internal error from Core"


def from_rpc_error(err: grpc.RpcError, method: str, address: str = "") -> CompactlogError:
    """The compactlog exception for a failed call to ``method`` (the RPC name) at ``address``."""
    try:
        status = err.code()
        details = err.details() or ""
    except Exception:  # an RpcError that is not a Call: nothing to read from it
        status, details = grpc.StatusCode.UNKNOWN, str(err)
    code = status.name if status is not None else "UNKNOWN"
    message = details or f"{method} failed with {code}"
    info = error_info(err)
    if info is not None:
        cls = BY_REASON.get(info.reason) or BY_CODE.get(code, CompactlogError)
        exc = cls(message, **dict(info.metadata))
        exc.reason = info.reason  # a reason newer than this client stays readable
    else:
        cls = BY_CODE.get(code, CompactlogError)
        if code == "UNAVAILABLE" or (code == "INTERNAL" and details == CORE_FAILURE):
            cls = ServerUnreachable
            where = f"server {address}" if address else "the server"
            message = f"{where} is not reachable ({_short_reason(details)})"
        elif code == "DEADLINE_EXCEEDED" and details.strip().lower() in ("", "deadline exceeded"):
            where = f" from {address}" if address else ""
            message = f"{method}: no answer{where} within the deadline"
        exc = cls(message, method=method)
    exc.code = code  # the code the call really ended with (UNKNOWN etc. fall back to the base)
    return exc


def _short_reason(details: str) -> str:
    """grpc-core's text is long and nested; its last clause is the part a person needs."""
    reason = details.strip().splitlines()[-1] if details.strip() else "no connection"
    for marker in ("connect: ", "Failed to connect to remote host: "):
        if marker in reason:
            reason = reason.rsplit(marker, 1)[1]
    return reason.strip().rstrip(".") or "no connection"


@contextmanager
def translate_errors(method: str, address: str = "") -> Iterator[None]:
    """Run a block that talks gRPC; any ``RpcError`` leaves it as a compactlog error."""
    try:
        yield
    except grpc.RpcError as err:
        raise from_rpc_error(err, method, address) from None


def cancel(rpc: Any) -> None:
    """Cancel a streaming call (typed loosely: grpc's stubs leave ``cancel`` unannotated)."""
    rpc.cancel()


def call(method: str, address: str, fn: Callable[[], T]) -> T:
    """``fn()`` with its ``RpcError`` translated: the one path every unary RPC takes."""
    with translate_errors(method, address):
        return fn()
