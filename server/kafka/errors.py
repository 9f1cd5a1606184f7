"""Kafka error codes: ``kio``'s ``ErrorCode`` and the one mapping from our errors.

A handler answers a partition's failure with the code ``code_of`` gives for the
``compactlog.errors`` class raised (CONTRACT section 5's reasons, in Kafka's words); a
failure of the listener's own making is a ``KafkaError`` that carries its code.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from compactlog import errors
from compactlog.rpc_errors import ServerUnreachable

log = logging.getLogger("compactlog.kafka")


class KafkaError(Exception):
    """A request (or one partition of it) answered with ``code``."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


# Most specific first: the first class an error is an instance of decides.
_CODES: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (errors.TopicNotFound, ErrorCode.unknown_topic_or_partition),
    (errors.WrongTopicKind, ErrorCode.unknown_topic_or_partition),
    (errors.TopicExists, ErrorCode.topic_already_exists),
    (errors.InvalidTopicName, ErrorCode.invalid_topic_exception),
    (errors.InvalidConfig, ErrorCode.invalid_config),
    (errors.RecordTooLarge, ErrorCode.message_too_large),
    (errors.OffsetOutOfRange, ErrorCode.offset_out_of_range),
    (errors.MalformedRequest, ErrorCode.invalid_record),
    (errors.InvalidArgument, ErrorCode.invalid_request),
    (errors.CorruptData, ErrorCode.kafka_storage_error),
    (errors.DataLoss, ErrorCode.kafka_storage_error),
    # A store another process serves did not answer (a slot whose shard is down, behind
    # the front): REQUEST_TIMED_OUT, as a down broker's share of a request (``spread``).
    (ServerUnreachable, ErrorCode.request_timed_out),
    (errors.ShuttingDown, ErrorCode.not_leader_or_follower),
    (errors.NotOwner, ErrorCode.not_leader_or_follower),
    (errors.Unavailable, ErrorCode.kafka_storage_error),
    (errors.ResourceExhausted, ErrorCode.kafka_storage_error),
    (errors.PermissionDenied, ErrorCode.topic_authorization_failed),
)


def code_of(exc: BaseException) -> ErrorCode:
    """The Kafka error code of an exception; an unexpected one is logged with its
    traceback (a defect) and answered UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, KafkaError):
        return exc.code
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    log.error("kafka: unexpected error", exc_info=exc)
    return ErrorCode.unknown_server_error


__all__ = ["ErrorCode", "KafkaError", "code_of"]
