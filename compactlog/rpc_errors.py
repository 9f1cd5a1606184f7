"""gRPC status → compactlog error class, for every caller of the API over the wire.

The client library and the compactor's gRPC adapter (the Spark engine's driver) both
talk to the server and both want ``TopicNotFound``, never ``grpc.RpcError``; this module
is the one mapping they share. It lives in the core package, below every layer, so the
compactor needs no import of the client (``compactlog.client.errors`` re-exports it).

A status code alone is ambiguous (NOT_FOUND may be a topic or a subscription,
ALREADY_EXISTS a topic or a running compaction), so the mapping looks at which RPC
failed, then at the server's message. When the server names the class in the trailing
metadata key ``compactlog-error`` (its error class name), that wins. The server's message
text is kept as the exception message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import grpc

from compactlog import errors
from compactlog.errors import (
    BY_CODE,
    CompactionInProgress,
    CompactionNotRunning,
    CompactlogError,
    InvalidConfig,
    InvalidTopicName,
    RecordTooLarge,
    SubscriptionNotFound,
    Unavailable,
)

__all__ = [
    "ERROR_CLASS_METADATA_KEY",
    "ServerUnreachable",
    "call",
    "cancel",
    "from_rpc_error",
    "translate_errors",
]

ERROR_CLASS_METADATA_KEY = "compactlog-error"

T = TypeVar("T")


class ServerUnreachable(Unavailable):
    """No connection to the server at all (refused, unresolvable, dropped)."""


# Text grpc-core itself puts in UNAVAILABLE when no server answered (versus a server
# that answered UNAVAILABLE, e.g. while shutting down).
_TRANSPORT_HINTS = (
    "failed to connect",
    "connection refused",
    "connect failed",
    "dns resolution failed",
    "errors resolving",
    "name resolution",
    "socket closed",
    "connection reset",
    "no route to host",
    "network is unreachable",
    "unavailable: ipv",
)


def _named_class(name: str, code: str) -> type[CompactlogError] | None:
    """The class the server named, if it exists here and travels with this code."""
    cls = getattr(errors, name, None) or globals().get(name)
    if isinstance(cls, type) and issubclass(cls, CompactlogError) and cls.code == code:
        return cls
    return None


def _refine(method: str, code: str, details: str) -> type[CompactlogError] | None:
    """Finer classes where the code alone is ambiguous: by RPC, then by message text."""
    text = details.lower()
    if code == "ALREADY_EXISTS" and method == "Compact":
        return CompactionInProgress
    if code == "FAILED_PRECONDITION" and method == "CancelCompaction":
        return CompactionNotRunning
    if code == "NOT_FOUND" and "subscription" in text and "topic" not in text:
        return SubscriptionNotFound
    if code == "INVALID_ARGUMENT":
        if method in ("Publish", "PublishStream") and (
            "max.message.bytes" in text or "too large" in text
        ):
            return RecordTooLarge
        if method == "CreateTopic" and "name" in text:
            return InvalidTopicName
        if method in ("CreateTopic", "UpdateTopicConfig"):
            return InvalidConfig
    return None


def from_rpc_error(err: grpc.RpcError, method: str, address: str = "") -> CompactlogError:
    """The compactlog exception for a failed call to ``method`` (the RPC name) at ``address``."""
    try:
        status = err.code()
        details = err.details() or ""
    except Exception:  # an RpcError that is not a Call: nothing to read from it
        status, details = grpc.StatusCode.UNKNOWN, str(err)
    code = status.name if status is not None else "UNKNOWN"
    named: type[CompactlogError] | None = None
    try:
        for item in err.trailing_metadata() or ():
            key, value = cast(tuple[str, str | bytes], item)
            if key == ERROR_CLASS_METADATA_KEY and isinstance(value, str):
                named = _named_class(value, code)
    except Exception:
        named = None
    cls = named or _refine(method, code, details) or BY_CODE.get(code, CompactlogError)
    message = details or f"{method} failed with {code}"
    transport = any(hint in details.lower() for hint in _TRANSPORT_HINTS)
    if code == "UNAVAILABLE" and named is None and transport:
        cls = ServerUnreachable
        where = f"server {address}" if address else "the server"
        message = f"{where} is not reachable ({_short_reason(details)})"
    elif code == "DEADLINE_EXCEEDED" and not details:
        message = f"{method} did not finish within the deadline"
    exc = cls(message)
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
