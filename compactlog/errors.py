"""The one error hierarchy of compactlog.

Every error knows the gRPC status code it travels as (``code``, by name, so this module
needs no grpc import and the storage engine stays transport-free) and its ``reason``: the
machine-readable name of CONTRACT section 5 that the server puts in the
``google.rpc.ErrorInfo`` of the status (domain ``compactlog``). An error also carries
``metadata``, what it is about (``topic``, ``subscription``, ``limit``, ``file`` ...),
given as keyword arguments where it is raised::

    raise TopicNotFound(f"topic {name!r} does not exist", topic=name)

The server maps these to statuses in one place (``server/rpc/errors.py``); the client maps
the reason back to the same classes (``rpc_errors.py``), so a caller catches
``TopicNotFound`` whether it runs in-process or over the wire.

There is one class per reason, named after it in CamelCase (``TOPIC_NOT_FOUND`` ->
``TopicNotFound``), listed in ``BY_REASON``. The few classes above them (``InvalidArgument``,
``DataLoss``, ``Unavailable`` ...) group reasons by status code; a plain instance of one
travels with the reason its docstring names.
"""

from __future__ import annotations

import errno as _errno
import re

DOMAIN = "compactlog"

# The reason of a status that is a defect (an unexpected exception): not one of the
# contract's reasons, because no program should handle it; it is reported as a bug.
INTERNAL_REASON = "INTERNAL"


class CompactlogError(Exception):
    """Base class. ``code`` is the gRPC status code name, ``reason`` the ErrorInfo reason,
    ``retriable`` says if a retry may help, ``metadata`` what the error is about."""

    code: str = "INTERNAL"
    reason: str = INTERNAL_REASON
    retriable: bool = False

    def __init__(self, message: str = "", /, **metadata: object) -> None:
        super().__init__(message)
        self.metadata: dict[str, str] = {
            key: str(value) for key, value in metadata.items() if value is not None
        }


# ---- INVALID_ARGUMENT ----------------------------------------------------------------


class InvalidArgument(CompactlogError):
    """A request the server cannot act on as sent; plain instances are MALFORMED_REQUEST."""

    code = "INVALID_ARGUMENT"
    reason = "MALFORMED_REQUEST"


class MalformedRequest(InvalidArgument):
    """Request bytes that do not parse, an unknown enum value, a field out of its range."""

    reason = "MALFORMED_REQUEST"


class InvalidTopicName(InvalidArgument):
    reason = "INVALID_TOPIC_NAME"


class InvalidConfig(InvalidArgument):
    """An unknown config key or a value out of its range (metadata ``key``, ``value``)."""

    reason = "INVALID_CONFIG"


class RecordTooLarge(InvalidArgument):
    """A record over ``max.message.bytes`` (metadata ``limit``)."""

    reason = "RECORD_TOO_LARGE"


class MessageTooLargeForReader(RecordTooLarge):
    """A stored message larger than the ``max_bytes`` its reader takes (metadata
    ``limit``): it cannot be delivered to that reader, and nothing moves."""

    code = "RESOURCE_EXHAUSTED"


# ---- NOT_FOUND -----------------------------------------------------------------------


class TopicNotFound(CompactlogError):
    code = "NOT_FOUND"
    reason = "TOPIC_NOT_FOUND"


class SubscriptionNotFound(CompactlogError):
    code = "NOT_FOUND"
    reason = "SUBSCRIPTION_NOT_FOUND"


# ---- ALREADY_EXISTS ------------------------------------------------------------------


class TopicExists(CompactlogError):
    code = "ALREADY_EXISTS"
    reason = "TOPIC_EXISTS"


class CompactionRunning(CompactlogError):
    """A compaction (or cleaner pass) of this topic is already running."""

    code = "ALREADY_EXISTS"
    reason = "COMPACTION_RUNNING"


# ---- FAILED_PRECONDITION -------------------------------------------------------------


class WrongTopicKind(CompactlogError):
    """The operation does not apply to this kind of topic (DeleteRecords on a LEDGER topic)."""

    code = "FAILED_PRECONDITION"
    reason = "WRONG_TOPIC_KIND"


class NotCompacted(WrongTopicKind):
    """A compaction call on a SEGMENTED topic whose ``cleanup.policy`` leaves out
    ``compact``: a delete-only topic, which no cleaner pass touches (metadata ``topic``,
    ``cleanup_policy``). A ``WrongTopicKind`` too, so older callers still catch it."""

    reason = "NOT_COMPACTED"


class NotDelivered(CompactlogError):
    """An Acknowledge of an id this subscription was never given; the cursor stays."""

    code = "FAILED_PRECONDITION"
    reason = "NOT_DELIVERED"


class ConsumerBusy(CompactlogError):
    """An EXCLUSIVE subscription held by another consumer, or a subscription of another type."""

    code = "FAILED_PRECONDITION"
    reason = "CONSUMER_BUSY"


class CompactionNotRunning(CompactlogError):
    """The topic has no active compaction run: CancelCompaction of a topic with none, the
    commit of an outside run that is no longer the topic's (``CommitConflict``)."""

    code = "FAILED_PRECONDITION"
    reason = "COMPACTION_NOT_RUNNING"


class CommitConflict(CompactionNotRunning):
    """A compaction commit whose base or horizon no longer matches (another run won)."""


# ---- OUT_OF_RANGE --------------------------------------------------------------------


class OffsetOutOfRange(CompactlogError):
    """An offset below the log start or beyond the log end (metadata ``offset`` and the
    bound crossed: ``log_start_offset`` or ``log_end_offset``)."""

    code = "OUT_OF_RANGE"
    reason = "OFFSET_OUT_OF_RANGE"


# ---- DATA_LOSS -----------------------------------------------------------------------


class DataLoss(CompactlogError):
    """Data the metadata points at is gone (a missing compacted ledger): CORRUPT_DATA."""

    code = "DATA_LOSS"
    reason = "CORRUPT_DATA"


class CorruptData(DataLoss):
    """Stored bytes that fail their CRC or framing: never served (CONTRACT section 11).
    Metadata ``position`` (topic, ledger or segment file, byte) and ``topic``: when only
    the position is given, the topic is read from it (every reader writes it first:
    ``topic 'name' ledger L entry E``, ``topic name, segment F, byte N``)."""

    reason = "CORRUPT_DATA"

    def __init__(self, message: str = "", /, **metadata: object) -> None:
        position = metadata.get("position")
        if "topic" not in metadata and isinstance(position, str):
            found = _TOPIC_IN_POSITION.match(position)
            if found is not None:
                metadata["topic"] = found.group(1) or found.group(2)
        super().__init__(message, **metadata)


_TOPIC_IN_POSITION = re.compile(r"topic (?:'([A-Za-z0-9._-]+)'|([A-Za-z0-9._-]+)\b)")


# ---- UNAUTHENTICATED, PERMISSION_DENIED ----------------------------------------------


class Unauthenticated(CompactlogError):
    """No token, or one no principal holds (CONTRACT section 10)."""

    code = "UNAUTHENTICATED"
    reason = "UNAUTHENTICATED"


class PermissionDenied(CompactlogError):
    """A known principal whose role does not reach this call."""

    code = "PERMISSION_DENIED"
    reason = "PERMISSION_DENIED"


class ReservedSubscription(PermissionDenied):
    """A client's Consume or Acknowledge on a server's own subscription (``__`` prefix)."""

    reason = "RESERVED_SUBSCRIPTION"


# ---- UNAVAILABLE ---------------------------------------------------------------------


class Unavailable(CompactlogError):
    """The server cannot serve now; plain instances are SHUTTING_DOWN."""

    code = "UNAVAILABLE"
    reason = "SHUTTING_DOWN"
    retriable = True


class ShuttingDown(Unavailable):
    """The server is stopping (or its store closed under the call): retry elsewhere or later."""

    reason = "SHUTTING_DOWN"


class StoreClosed(ShuttingDown):
    """The storage engine was closed (the server is shutting down)."""


class NotOwner(Unavailable):
    """The topic lives in a store slot another process owns (``serve --shards``; Kafka's
    NOT_LEADER_OR_FOLLOWER): ask ``GetPartitionMap`` again and go there. Not one of the
    contract's reasons: a client that does not know it sees ``Unavailable``."""

    reason = "NOT_OWNER"


class StoreLocked(Unavailable):
    """Another process holds the data directory (start-up only, never sent)."""

    retriable = False


class StorageUnavailable(Unavailable):
    """The disk refused a read or write for a reason other than space or handles (EIO,
    EACCES, EROFS ...): metadata ``path`` and ``errno``. Nothing of the call was kept; the
    server serves again once the cause is gone (Kafka takes the log dir offline)."""

    reason = "STORAGE_UNAVAILABLE"


# ---- RESOURCE_EXHAUSTED --------------------------------------------------------------


class ResourceExhausted(CompactlogError):
    """gRPC's own limits (message size, concurrent calls), answered before any handler."""

    code = "RESOURCE_EXHAUSTED"


class DiskFull(ResourceExhausted):
    """No space left for a write (ENOSPC, EDQUOT): metadata ``path``. Nothing of the call
    was kept; writes succeed again once space is freed, without a restart."""

    reason = "DISK_FULL"
    retriable = True


class FileLimit(ResourceExhausted):
    """No file handle to be had (EMFILE, ENFILE: the process's or the system's limit):
    metadata ``path`` when a file was being opened, ``limit`` when known."""

    reason = "FILE_LIMIT"
    retriable = True


_DISK_FULL = {_errno.ENOSPC, _errno.EDQUOT}
_FILE_LIMIT = {_errno.EMFILE, _errno.ENFILE}


def from_os_error(exc: OSError, doing: str, path: object = None) -> CompactlogError:
    """An ``OSError`` met while ``doing`` something (a phrase: "appending to segment X") as
    the error the contract names for it (CONTRACT section 11): DISK_FULL, FILE_LIMIT or
    STORAGE_UNAVAILABLE, with ``path`` and ``errno`` in the metadata."""
    where = path if path is not None else exc.filename
    name = _errno.errorcode.get(exc.errno or 0, str(exc.errno))
    text = exc.strerror or str(exc)
    message = f"{doing} failed: {text} ({name})" + (f" at {where}" if where else "")
    metadata: dict[str, object] = {"path": where, "errno": name}
    if exc.errno in _DISK_FULL:
        return DiskFull(f"{message}; nothing of this call was kept", **metadata)
    if exc.errno in _FILE_LIMIT:
        return FileLimit(f"{message}; nothing of this call was kept", **metadata)
    return StorageUnavailable(message, **metadata)


# ---- codes the server never sends itself (the transport and the client raise them) ----


class StorageError(CompactlogError):
    """An I/O or corruption error from the storage engine: a defect when a request sees it."""

    code = "INTERNAL"


class DeadlineExceeded(CompactlogError):
    code = "DEADLINE_EXCEEDED"
    retriable = True


class Timeout(DeadlineExceeded):
    """Nothing arrived, or the call did not finish, within the time allowed (pulsar-client's
    ``Timeout``: a ``receive`` that ran out, a call past its deadline)."""


class Cancelled(CompactlogError):
    code = "CANCELLED"


class Unimplemented(CompactlogError):
    code = "UNIMPLEMENTED"


# Names before the v1 additions, kept so that older callers still import them.
TopicAlreadyExists = TopicExists
CompactionInProgress = CompactionRunning


BY_REASON: dict[str, type[CompactlogError]] = {
    cls.reason: cls
    for cls in (
        TopicNotFound,
        TopicExists,
        InvalidTopicName,
        InvalidConfig,
        WrongTopicKind,
        RecordTooLarge,
        MalformedRequest,
        OffsetOutOfRange,
        SubscriptionNotFound,
        ReservedSubscription,
        NotDelivered,
        ConsumerBusy,
        CompactionRunning,
        CompactionNotRunning,
        CorruptData,
        Unauthenticated,
        PermissionDenied,
        ShuttingDown,
        DiskFull,
        StorageUnavailable,
        FileLimit,
        NotCompacted,
    )
}
"""Reason (CONTRACT section 5) -> its class: what the client raises for a status."""

BY_CODE: dict[str, type[CompactlogError]] = {
    "INVALID_ARGUMENT": InvalidArgument,
    "NOT_FOUND": TopicNotFound,
    "ALREADY_EXISTS": TopicExists,
    "FAILED_PRECONDITION": WrongTopicKind,
    "OUT_OF_RANGE": OffsetOutOfRange,
    "DATA_LOSS": DataLoss,
    "UNAUTHENTICATED": Unauthenticated,
    "PERMISSION_DENIED": PermissionDenied,
    "UNAVAILABLE": Unavailable,
    "DEADLINE_EXCEEDED": Timeout,
    "CANCELLED": Cancelled,
    "UNIMPLEMENTED": Unimplemented,
    "RESOURCE_EXHAUSTED": ResourceExhausted,
    "INTERNAL": CompactlogError,
}
"""Status code -> class, for a status without ErrorInfo (an older server, or one that
gRPC itself produced: a deadline, a cancel, a message over the size limit)."""
