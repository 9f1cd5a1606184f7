"""Status → exception mapping of the client, without a server: fake failed calls in
(with the rich-error trailer the server sends, or without one), classes out."""

from __future__ import annotations

import grpc
import pytest

import compactlog.client as client_api
from compactlog import errors
from compactlog.client.errors import ServerUnreachable, from_rpc_error, translate_errors
from compactlog.server.rpc.errors import error_status

REASONS = [  # CONTRACT section 5
    "TOPIC_NOT_FOUND",
    "TOPIC_EXISTS",
    "INVALID_TOPIC_NAME",
    "INVALID_CONFIG",
    "WRONG_TOPIC_KIND",
    "RECORD_TOO_LARGE",
    "MALFORMED_REQUEST",
    "OFFSET_OUT_OF_RANGE",
    "SUBSCRIPTION_NOT_FOUND",
    "RESERVED_SUBSCRIPTION",
    "NOT_DELIVERED",
    "CONSUMER_BUSY",
    "COMPACTION_RUNNING",
    "COMPACTION_NOT_RUNNING",
    "CORRUPT_DATA",
    "UNAUTHENTICATED",
    "PERMISSION_DENIED",
    "SHUTTING_DOWN",
    "DISK_FULL",
    "STORAGE_UNAVAILABLE",
    "FILE_LIMIT",
    "NOT_COMPACTED",
]


class FakeRpcError(grpc.RpcError):
    """What grpc raises, reduced to the three methods the mapping reads."""

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str = "",
        metadata: tuple[tuple[str, str | bytes], ...] = (),
    ) -> None:
        super().__init__(details)
        self._code = code
        self._details = details
        self._metadata = metadata

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:  # type: ignore[override]
        return self._metadata


def answered(exc: errors.CompactlogError, method: str = "Any") -> FakeRpcError:
    """The failed call a client sees when the server answers ``exc``."""
    status = error_status(exc, method)
    return FakeRpcError(status.code, status.details, tuple(status.trailing_metadata))


S = grpc.StatusCode


def camel(reason: str) -> str:
    return "".join(word.capitalize() for word in reason.split("_"))


def test_the_reasons_are_the_contracts() -> None:
    assert sorted(errors.BY_REASON) == sorted(REASONS)


@pytest.mark.parametrize("reason", REASONS)
def test_one_class_per_reason_named_after_it_and_importable(reason: str) -> None:
    cls = errors.BY_REASON[reason]
    assert cls.__name__ == camel(reason) and cls.reason == reason
    assert issubclass(cls, errors.CompactlogError)
    assert getattr(client_api, cls.__name__) is cls
    assert cls.__name__ in client_api.__all__


def test_timeout_and_the_base_are_importable_from_the_client() -> None:
    assert client_api.Timeout is errors.Timeout
    assert issubclass(client_api.Timeout, errors.CompactlogError)
    assert client_api.CompactlogError is errors.CompactlogError


@pytest.mark.parametrize("reason", REASONS)
def test_the_reason_in_the_trailer_chooses_the_class(reason: str) -> None:
    cls = errors.BY_REASON[reason]
    sent = cls("whatever the server says", topic="t", limit=10)
    got = from_rpc_error(answered(sent), "Any", "h:1")
    assert type(got) is cls
    assert got.code == cls.code and got.reason == reason
    assert got.metadata == {"topic": "t", "limit": "10"}
    assert str(got) == "whatever the server says"


@pytest.mark.parametrize(
    ("text", "reason", "expected"),
    [  # the message text never matters
        ("topic 'x' does not exist", "SUBSCRIPTION_NOT_FOUND", errors.SubscriptionNotFound),
        ("subscription 's' not found", "TOPIC_NOT_FOUND", errors.TopicNotFound),
        ("over max.message.bytes=10", "INVALID_CONFIG", errors.InvalidConfig),
        ("invalid topic name", "MALFORMED_REQUEST", errors.MalformedRequest),
        ("failed to connect to all addresses", "SHUTTING_DOWN", errors.ShuttingDown),
    ],
)
def test_text_is_never_read(text: str, reason: str, expected: type[errors.CompactlogError]) -> None:
    got = from_rpc_error(answered(errors.BY_REASON[reason](text)), "GetTopic")
    assert type(got) is expected


def test_plain_base_classes_travel_with_their_reason() -> None:
    cases = [
        (errors.InvalidArgument("x"), errors.MalformedRequest),
        (errors.DataLoss("x"), errors.CorruptData),
        (errors.Unavailable("x"), errors.ShuttingDown),
        (errors.StoreClosed("x"), errors.ShuttingDown),
        (errors.CommitConflict("x"), errors.CompactionNotRunning),
    ]
    for sent, expected in cases:
        assert type(from_rpc_error(answered(sent), "M")) is expected


def test_a_defect_is_internal_with_its_own_reason() -> None:
    status = error_status(ValueError("boom"), "GetTopic")
    got = from_rpc_error(FakeRpcError(status.code, status.details, status.trailing_metadata), "M")
    assert got.code == "INTERNAL" and got.reason == errors.INTERNAL_REASON
    assert type(got) is errors.CompactlogError


def test_a_reason_newer_than_the_client_falls_back_to_the_code() -> None:
    sent = errors.TopicNotFound("gone")
    sent.reason = "TOPIC_ON_THE_MOON"
    got = from_rpc_error(answered(sent), "GetTopic")
    assert type(got) is errors.TopicNotFound and got.reason == "TOPIC_ON_THE_MOON"


@pytest.mark.parametrize(
    ("code", "expected"),
    [  # an older server, or a status gRPC made itself: the code is all there is
        (S.NOT_FOUND, errors.TopicNotFound),
        (S.ALREADY_EXISTS, errors.TopicExists),
        (S.INVALID_ARGUMENT, errors.InvalidArgument),
        (S.FAILED_PRECONDITION, errors.WrongTopicKind),
        (S.OUT_OF_RANGE, errors.OffsetOutOfRange),
        (S.DATA_LOSS, errors.DataLoss),
        (S.UNAUTHENTICATED, errors.Unauthenticated),
        (S.PERMISSION_DENIED, errors.PermissionDenied),
        (S.UNIMPLEMENTED, errors.Unimplemented),
        (S.RESOURCE_EXHAUSTED, errors.ResourceExhausted),
        (S.DEADLINE_EXCEEDED, errors.Timeout),
        (S.CANCELLED, errors.Cancelled),
        (S.INTERNAL, errors.CompactlogError),
        (S.UNKNOWN, errors.CompactlogError),
    ],
)
def test_without_error_info_the_code_decides(
    code: grpc.StatusCode, expected: type[errors.CompactlogError]
) -> None:
    exc = from_rpc_error(FakeRpcError(code, "text"), "GetTopic", "h:1")
    assert type(exc) is expected
    assert exc.code == code.name
    assert str(exc) == "text"  # the server's text is kept as is


def test_a_call_the_local_core_failed_is_an_unreachable_server() -> None:
    """grpc's own INTERNAL for a call whose connection broke (no server answered)."""
    exc = from_rpc_error(FakeRpcError(S.INTERNAL, "Internal error from Core"), "Consume", "h:1")
    assert type(exc) is ServerUnreachable and exc.code == "INTERNAL"
    assert "h:1" in str(exc)


def test_a_deadline_without_text_says_which_call() -> None:
    exc = from_rpc_error(FakeRpcError(S.DEADLINE_EXCEEDED, ""), "Consume")
    assert isinstance(exc, errors.Timeout) and "Consume" in str(exc)


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
        "Socket closed",
        "",
    ],
)
def test_unavailable_without_error_info_is_no_server(details: str) -> None:
    exc = from_rpc_error(FakeRpcError(S.UNAVAILABLE, details), "ListTopics", "10.0.0.1:7650")
    assert isinstance(exc, ServerUnreachable)
    assert isinstance(exc, errors.Unavailable)
    assert str(exc).startswith("server 10.0.0.1:7650 is not reachable (")
    assert "\n" not in str(exc)


def test_a_server_shutting_down_is_not_an_unreachable_one() -> None:
    exc = from_rpc_error(answered(errors.ShuttingDown("stopping")), "Read", "h:1")
    assert type(exc) is errors.ShuttingDown and exc.retriable


def test_a_trailer_that_does_not_parse_falls_back_to_the_code() -> None:
    err = FakeRpcError(S.NOT_FOUND, "gone", (("grpc-status-details-bin", b"\xff\xff"),))
    assert type(from_rpc_error(err, "GetTopic")) is errors.TopicNotFound


def test_translate_errors_leaves_no_rpc_error() -> None:
    with pytest.raises(errors.TopicNotFound) as info, translate_errors("GetTopic", "h:1"):
        raise answered(errors.TopicNotFound("topic 'x' does not exist", topic="x"))
    assert not isinstance(info.value, grpc.RpcError)
    assert info.value.__cause__ is None
    assert info.value.metadata == {"topic": "x"}
