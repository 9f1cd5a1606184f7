"""The client's errors: the shared status → exception mapping plus the client's own classes.

The mapping itself (``from_rpc_error``, ``translate_errors``, ``ServerUnreachable`` ...)
lives in ``compactlog.rpc_errors``, which the compactor's gRPC adapter uses too; it is
re-exported here, with one client rule on top: a call past its deadline raises
``Timeout`` (pulsar-client's name), so callers catch one class for every deadline the
client applies (``Client(timeout=...)``, ``receive(timeout_ms=...)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import grpc

from compactlog import rpc_errors
from compactlog.errors import CompactlogError, DeadlineExceeded
from compactlog.rpc_errors import ERROR_CLASS_METADATA_KEY, ServerUnreachable, cancel

__all__ = [
    "ERROR_CLASS_METADATA_KEY",
    "AlreadyClosed",
    "ServerUnreachable",
    "Timeout",
    "call",
    "cancel",
    "from_rpc_error",
    "translate_errors",
]

T = TypeVar("T")


class Timeout(DeadlineExceeded):
    """A call ran past its deadline, or nothing arrived within the time a ``receive``
    allowed (pulsar-client's ``Timeout``)."""


class AlreadyClosed(CompactlogError):
    """The client, producer, reader or consumer was closed before this call."""

    code = "FAILED_PRECONDITION"


# What grpc-core itself says when a call's deadline passes (no server text to keep).
_GRPC_DEADLINE_TEXT = "deadline exceeded"


def from_rpc_error(err: grpc.RpcError, method: str, address: str = "") -> CompactlogError:
    """``rpc_errors.from_rpc_error``, with DEADLINE_EXCEEDED as ``Timeout``."""
    exc = rpc_errors.from_rpc_error(err, method, address)
    if not isinstance(exc, DeadlineExceeded) or isinstance(exc, Timeout):
        return exc
    message = str(exc)
    if message.strip().lower() == _GRPC_DEADLINE_TEXT:
        where = f" from {address}" if address else ""
        message = f"{method}: no answer{where} within the deadline"
    timeout = Timeout(message)
    timeout.code = exc.code
    return timeout


@contextmanager
def translate_errors(method: str, address: str = "") -> Iterator[None]:
    """Run a block that talks gRPC; any ``RpcError`` leaves it as a compactlog error."""
    try:
        yield
    except grpc.RpcError as err:
        raise from_rpc_error(err, method, address) from None


def call(method: str, address: str, fn: Callable[[], T]) -> T:
    """``fn()`` with its ``RpcError`` translated: the one path every unary RPC takes."""
    with translate_errors(method, address):
        return fn()
