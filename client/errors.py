"""The client's errors: one class per reason of CONTRACT section 5, ``Timeout``, and the
client's own ``AlreadyClosed``.

The classes are those of ``compactlog.errors`` (the one hierarchy, shared with the
server), re-exported here and from ``compactlog.client``; the mapping from a failed call
to its class (``from_rpc_error``: the ErrorInfo reason of the status, never the message
text) lives in ``compactlog.rpc_errors``, which the compactor's gRPC adapter uses too.
A call past its deadline raises ``Timeout`` (pulsar-client's name), so callers catch one
class for every deadline the client applies (``Client(timeout=...)``,
``receive(timeout_ms=...)``).
"""

from __future__ import annotations

from compactlog.errors import (
    BY_REASON,
    CompactionNotRunning,
    CompactionRunning,
    CompactlogError,
    ConsumerBusy,
    CorruptData,
    DiskFull,
    FileLimit,
    InvalidConfig,
    InvalidTopicName,
    MalformedRequest,
    NotCompacted,
    NotDelivered,
    OffsetOutOfRange,
    PermissionDenied,
    RecordTooLarge,
    ReservedSubscription,
    ShuttingDown,
    StorageUnavailable,
    SubscriptionNotFound,
    Timeout,
    TopicExists,
    TopicNotFound,
    Unauthenticated,
    WrongTopicKind,
)
from compactlog.rpc_errors import (
    ServerUnreachable,
    call,
    cancel,
    error_info,
    from_rpc_error,
    translate_errors,
)

__all__ = [
    "BY_REASON",
    "AlreadyClosed",
    "CompactionNotRunning",
    "CompactionRunning",
    "CompactlogError",
    "ConsumerBusy",
    "CorruptData",
    "DiskFull",
    "FileLimit",
    "InvalidConfig",
    "InvalidTopicName",
    "MalformedRequest",
    "NotCompacted",
    "NotDelivered",
    "OffsetOutOfRange",
    "PermissionDenied",
    "RecordTooLarge",
    "ReservedSubscription",
    "ServerUnreachable",
    "ShuttingDown",
    "StorageUnavailable",
    "SubscriptionNotFound",
    "Timeout",
    "TopicExists",
    "TopicNotFound",
    "Unauthenticated",
    "WrongTopicKind",
    "call",
    "cancel",
    "error_info",
    "from_rpc_error",
    "translate_errors",
]


class AlreadyClosed(CompactlogError):
    """The client, producer, reader or consumer was closed before this call."""

    code = "FAILED_PRECONDITION"
