"""The client's errors: the shared status → exception mapping plus the client's own classes.

The mapping itself (``from_rpc_error``, ``translate_errors``, ``ServerUnreachable`` ...)
lives in ``compactlog.rpc_errors``, which the compactor's gRPC adapter uses too; its names
are re-exported here, so ``compactlog.client.errors`` stays the place callers import from.
"""

from __future__ import annotations

from compactlog.errors import CompactlogError, DeadlineExceeded
from compactlog.rpc_errors import (
    ERROR_CLASS_METADATA_KEY,
    ServerUnreachable,
    call,
    cancel,
    from_rpc_error,
    translate_errors,
)

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


class Timeout(DeadlineExceeded):
    """Nothing arrived within the time a ``receive`` allowed (pulsar-client's ``Timeout``)."""


class AlreadyClosed(CompactlogError):
    """The client, producer, reader or consumer was closed before this call."""

    code = "FAILED_PRECONDITION"
