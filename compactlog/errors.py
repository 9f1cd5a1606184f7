"""The one error hierarchy of compactlog.

Every error knows the gRPC status code it travels as (by name, so this module needs
no grpc import and the storage engine stays transport-free). The server maps these to
statuses in one place; the client maps statuses back to the same classes, so a caller
catches ``TopicNotFound`` whether it runs in-process or over the wire.
"""

from __future__ import annotations


class CompactlogError(Exception):
    """Base class. ``code`` is the gRPC status code name; ``retriable`` says if a retry may help."""

    code: str = "INTERNAL"
    retriable: bool = False


class InvalidArgument(CompactlogError):
    code = "INVALID_ARGUMENT"


class InvalidTopicName(InvalidArgument):
    pass


class InvalidConfig(InvalidArgument):
    pass


class RecordTooLarge(InvalidArgument):
    pass


class TopicNotFound(CompactlogError):
    code = "NOT_FOUND"


class SubscriptionNotFound(CompactlogError):
    code = "NOT_FOUND"


class TopicAlreadyExists(CompactlogError):
    code = "ALREADY_EXISTS"


class CompactionInProgress(CompactlogError):
    """A compaction (or cleaner pass) of this topic is already running."""

    code = "ALREADY_EXISTS"


class CompactionNotRunning(CompactlogError):
    """CancelCompaction of a topic with no active run (reason COMPACTION_NOT_RUNNING)."""

    code = "FAILED_PRECONDITION"


class WrongTopicKind(CompactlogError):
    """The operation does not apply to this kind of topic (DeleteRecords on a LEDGER topic)."""

    code = "FAILED_PRECONDITION"


class CommitConflict(CompactlogError):
    """A compaction commit whose base or horizon no longer matches (another run won)."""

    code = "FAILED_PRECONDITION"


class OffsetOutOfRange(CompactlogError):
    code = "OUT_OF_RANGE"


class DataLoss(CompactlogError):
    """Data the metadata points at is gone (a missing compacted ledger)."""

    code = "DATA_LOSS"


class CorruptData(DataLoss):
    """Stored bytes that fail their CRC or framing: never served (CONTRACT section 11)."""


class StoreLocked(CompactlogError):
    """Another process holds the data directory."""

    code = "UNAVAILABLE"


class StoreClosed(CompactlogError):
    code = "UNAVAILABLE"
    retriable = True


class StorageError(CompactlogError):
    """An I/O or corruption error from the storage engine."""

    code = "INTERNAL"


class Unavailable(CompactlogError):
    code = "UNAVAILABLE"
    retriable = True


class DeadlineExceeded(CompactlogError):
    code = "DEADLINE_EXCEEDED"
    retriable = True


class Cancelled(CompactlogError):
    code = "CANCELLED"


class Unimplemented(CompactlogError):
    code = "UNIMPLEMENTED"


class ResourceExhausted(CompactlogError):
    code = "RESOURCE_EXHAUSTED"


class Unauthenticated(CompactlogError):
    """No token, or one no principal holds (CONTRACT section 10)."""

    code = "UNAUTHENTICATED"


class PermissionDenied(CompactlogError):
    """A known principal whose role does not reach this call."""

    code = "PERMISSION_DENIED"


# For the client: the class a status code comes back as when no finer class is known.
BY_CODE: dict[str, type[CompactlogError]] = {
    "INVALID_ARGUMENT": InvalidArgument,
    "NOT_FOUND": TopicNotFound,
    "ALREADY_EXISTS": TopicAlreadyExists,
    "FAILED_PRECONDITION": WrongTopicKind,
    "OUT_OF_RANGE": OffsetOutOfRange,
    "DATA_LOSS": DataLoss,
    "UNAVAILABLE": Unavailable,
    "DEADLINE_EXCEEDED": DeadlineExceeded,
    "CANCELLED": Cancelled,
    "UNIMPLEMENTED": Unimplemented,
    "RESOURCE_EXHAUSTED": ResourceExhausted,
    "UNAUTHENTICATED": Unauthenticated,
    "PERMISSION_DENIED": PermissionDenied,
    "INTERNAL": CompactlogError,
}
