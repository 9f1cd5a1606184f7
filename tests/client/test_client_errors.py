"""Status → exception mapping of the client, without a server: fake RpcErrors in, classes out."""

from __future__ import annotations

import grpc
import pytest

from compactlog import errors
from compactlog.client.errors import (
    ServerUnreachable,
    Timeout,
    from_rpc_error,
    translate_errors,
)


class FakeRpcError(grpc.RpcError):
    """What grpc raises, reduced to the three methods the mapping reads."""

    def __init__(
        self, code: grpc.StatusCode, details: str = "", metadata: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(details)
        self._code = code
        self._details = details
        self._metadata = metadata

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:  # type: ignore[override]
        return self._metadata


S = grpc.StatusCode


@pytest.mark.parametrize(
    ("method", "code", "details", "expected"),
    [
        ("GetTopic", S.NOT_FOUND, "topic 'x' does not exist", errors.TopicNotFound),
        ("Acknowledge", S.NOT_FOUND, "subscription 's' not found", errors.SubscriptionNotFound),
        ("CreateTopic", S.ALREADY_EXISTS, "topic 'x' already exists", errors.TopicAlreadyExists),
        ("Compact", S.ALREADY_EXISTS, "a compaction of x is running", errors.CompactionInProgress),
        ("CreateTopic", S.INVALID_ARGUMENT, "invalid topic name 'a/b'", errors.InvalidTopicName),
        ("CreateTopic", S.INVALID_ARGUMENT, "unknown config key 'x'", errors.InvalidConfig),
        ("UpdateTopicConfig", S.INVALID_ARGUMENT, "bad value 'x'", errors.InvalidConfig),
        ("Publish", S.INVALID_ARGUMENT, "over max.message.bytes=10", errors.RecordTooLarge),
        ("Read", S.INVALID_ARGUMENT, "bad start", errors.InvalidArgument),
        ("DeleteRecords", S.FAILED_PRECONDITION, "LEDGER topic", errors.WrongTopicKind),
        ("Read", S.OUT_OF_RANGE, "below log start offset", errors.OffsetOutOfRange),
        ("Read", S.DATA_LOSS, "compacted ledger 7 is missing", errors.DataLoss),
        ("Compact", S.UNIMPLEMENTED, "not yet", errors.Unimplemented),
        ("Publish", S.RESOURCE_EXHAUSTED, "too many", errors.ResourceExhausted),
        ("Consume", S.DEADLINE_EXCEEDED, "", Timeout),  # the client's one deadline class
        ("Read", S.CANCELLED, "cancelled", errors.Cancelled),
        ("GetTopic", S.UNAVAILABLE, "store is closed", errors.Unavailable),
        ("GetTopic", S.INTERNAL, "boom", errors.CompactlogError),
    ],
)
def test_status_maps_to_class(
    method: str, code: grpc.StatusCode, details: str, expected: type[errors.CompactlogError]
) -> None:
    exc = from_rpc_error(FakeRpcError(code, details), method, "h:1")
    assert type(exc) is expected
    assert exc.code == code.name
    if details:
        assert str(exc) == details  # the server's text is kept as is


def test_unknown_code_keeps_its_name() -> None:
    exc = from_rpc_error(FakeRpcError(S.ABORTED, "no"), "GetTopic")
    assert type(exc) is errors.CompactlogError
    assert exc.code == "ABORTED"


@pytest.mark.parametrize(
    "details",
    [
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
        "Failed to connect to remote host: connect: Connection refused (111)",
        "DNS resolution failed for nohost:1",
        "errors resolving nohost.invalid:1: [Domain name not found]",
        "Socket closed",
    ],
)
def test_transport_failure_names_the_server(details: str) -> None:
    exc = from_rpc_error(FakeRpcError(S.UNAVAILABLE, details), "ListTopics", "10.0.0.1:7650")
    assert isinstance(exc, ServerUnreachable)
    assert isinstance(exc, errors.Unavailable)
    assert str(exc).startswith("server 10.0.0.1:7650 is not reachable (")
    assert "\n" not in str(exc)


def test_class_named_by_server_wins() -> None:
    err = FakeRpcError(S.NOT_FOUND, "gone", (("compactlog-error", "SubscriptionNotFound"),))
    assert type(from_rpc_error(err, "GetTopic")) is errors.SubscriptionNotFound


def test_class_named_by_server_must_match_the_code() -> None:
    err = FakeRpcError(S.NOT_FOUND, "gone", (("compactlog-error", "TopicAlreadyExists"),))
    assert type(from_rpc_error(err, "GetTopic")) is errors.TopicNotFound


def test_translate_errors_leaves_no_rpc_error() -> None:
    with pytest.raises(errors.TopicNotFound) as info, translate_errors("GetTopic", "h:1"):
        raise FakeRpcError(S.NOT_FOUND, "topic 'x' does not exist")
    assert not isinstance(info.value, grpc.RpcError)
    assert info.value.__cause__ is None
