"""Tokens and roles on a real server with TLS: every role against a call of each kind (async
Log service, synchronous TopicAdmin and CompactionEngine servicers, unary and streaming
either way), missing and unknown tokens, the open health check, reflection, and the
client library's exception classes."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from compactlog.client import Client
from compactlog.client.aio import AsyncClient
from compactlog.client.errors import ServerUnreachable
from compactlog.client.message_id import MessageId
from compactlog.errors import PermissionDenied, TopicNotFound, Unauthenticated
from compactlog.v1 import compactlog_pb2 as pb

from ..conftest import ServerProcess, TlsFiles
from .conftest import ADMIN, CLIENT, READER, Stubs, StubsFactory, status_of

S = grpc.StatusCode
TOPIC = "guarded"
RANK = {READER: 1, CLIENT: 2, ADMIN: 3}
Call = Callable[[Stubs], object]


def _one_record() -> pb.PublishRequest:
    return pb.PublishRequest(topic=TOPIC, records=[pb.Record(key=b"k", value=b"v")])


# (name, least role, the call); every kind of handler appears at least once
CALLS: list[tuple[str, int, Call]] = [
    ("Log.Read", 1, lambda s: s.log.Read(pb.ReadRequest(topic=TOPIC), timeout=10)),
    (
        "Log.Consume",
        1,
        lambda s: s.log.Consume(
            pb.ConsumeRequest(topic=TOPIC, subscription="dash", max_messages=1), timeout=10
        ),
    ),
    (
        "Log.GetLastMessageId",
        1,
        lambda s: s.log.GetLastMessageId(pb.GetLastMessageIdRequest(topic=TOPIC), timeout=10),
    ),
    (
        "Log.GetKeyHistory",
        1,
        lambda s: s.log.GetKeyHistory(pb.GetKeyHistoryRequest(topic=TOPIC, key=b"k"), timeout=10),
    ),
    ("TopicAdmin.GetTopic", 1, lambda s: s.admin.GetTopic(pb.GetTopicRequest(name=TOPIC))),
    ("TopicAdmin.ListTopics", 1, lambda s: s.admin.ListTopics(pb.ListTopicsRequest())),
    (
        "TopicAdmin.GetCompactionStatus",
        1,
        lambda s: s.admin.GetCompactionStatus(pb.GetCompactionStatusRequest(topic=TOPIC)),
    ),
    (
        "ServerReflection",
        1,
        lambda s: s.reflection.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
        ),
    ),
    (
        "Log.NegativeAcknowledge",
        1,
        lambda s: s.log.NegativeAcknowledge(
            pb.NegativeAcknowledgeRequest(topic=TOPIC, subscription="dash"), timeout=10
        ),
    ),
    (
        "Log.AcknowledgeList",
        1,
        lambda s: s.log.AcknowledgeList(
            pb.AcknowledgeListRequest(topic=TOPIC, subscription="dash"), timeout=10
        ),
    ),
    (
        "Log.CloseConsumer",
        1,
        lambda s: s.log.CloseConsumer(
            pb.CloseConsumerRequest(topic=TOPIC, subscription="dash", consumer_name="gone"),
            timeout=10,
        ),
    ),
    ("Log.Publish", 2, lambda s: s.log.Publish(_one_record(), timeout=10)),
    ("Log.PublishStream", 2, lambda s: s.log.PublishStream(iter([_one_record()]), timeout=10)),
    (
        "TopicAdmin.CreateTopic",
        3,
        lambda s: s.admin.CreateTopic(pb.CreateTopicRequest(name="made-by-admin"), timeout=10),
    ),
    (
        "TopicAdmin.DeleteTopic",
        3,
        lambda s: s.admin.DeleteTopic(pb.DeleteTopicRequest(name="no-such-topic"), timeout=10),
    ),
    (
        "TopicAdmin.Compact",
        3,
        lambda s: s.admin.Compact(pb.CompactRequest(topic=TOPIC, wait=True), timeout=30),
    ),
    (
        "TopicAdmin.ListSubscriptions",
        3,
        lambda s: s.admin.ListSubscriptions(pb.ListSubscriptionsRequest(topic=TOPIC), timeout=10),
    ),
    (
        "TopicAdmin.ResetCursor",
        3,
        lambda s: s.admin.ResetCursor(
            pb.ResetCursorRequest(topic=TOPIC, subscription="nobody", position=pb.LATEST),
            timeout=10,
        ),
    ),
    (
        "CompactionEngine.GetTopicLayout",
        3,
        lambda s: s.engine.GetTopicLayout(pb.GetTopicLayoutRequest(topic=TOPIC), timeout=10),
    ),
    (
        "CompactionEngine.ReadEntries",
        3,
        lambda s: s.engine.ReadEntries(
            pb.ReadEntriesRequest(topic=TOPIC, range=pb.LedgerRange(ledger_id=1)), timeout=10
        ),
    ),
    (
        "CompactionEngine.AppendEntries",
        3,
        lambda s: s.engine.AppendEntries(
            iter([pb.AppendEntriesRequest(ledger_id=987654, entries=[b"x"])]), timeout=10
        ),
    ),
]
AUTH_CODES = (S.UNAUTHENTICATED, S.PERMISSION_DENIED)


@pytest.fixture(scope="module")
def guarded(secure_server: ServerProcess, tls_files: TlsFiles) -> Iterator[ServerProcess]:
    """The secure server with the topic the calls use, one message in it."""
    with Client(secure_server.address, token=ADMIN, tls_ca=tls_files.ca) as admin:
        admin.create_topic(TOPIC)
        admin.producer(TOPIC).send(b"k", b"v0")
    yield secure_server


@pytest.mark.parametrize("token", [ADMIN, CLIENT, READER], ids=["admin", "client", "reader"])
def test_each_role_reaches_exactly_its_calls(
    guarded: ServerProcess, stubs: StubsFactory, token: str
) -> None:
    s = stubs(guarded.address, token)
    outcome = {name: status_of(lambda call=call: call(s)) for name, _, call in CALLS}
    allowed = {name for name, least, _ in CALLS if RANK[token] >= least}
    denied = {name: code for name, code in outcome.items() if code in AUTH_CODES}
    assert set(denied) == {name for name, _, _ in CALLS} - allowed
    assert set(denied.values()) <= {S.PERMISSION_DENIED}
    # what was let through ran (domain errors such as NOT_FOUND are the handler's answer)
    for name in allowed:
        assert outcome[name] not in (*AUTH_CODES, S.INTERNAL, S.UNKNOWN), (name, outcome[name])


@pytest.mark.parametrize("token", [None, "not-a-token", ADMIN + "x"], ids=["none", "wrong", "near"])
def test_no_or_unknown_token_is_unauthenticated_everywhere(
    guarded: ServerProcess, stubs: StubsFactory, token: str | None
) -> None:
    s = stubs(guarded.address, token)
    outcome = {name: status_of(lambda call=call: call(s)) for name, _, call in CALLS}
    assert set(outcome.values()) == {S.UNAUTHENTICATED}, outcome


def test_denials_say_who_and_what(guarded: ServerProcess, stubs: StubsFactory) -> None:
    with pytest.raises(grpc.RpcError) as info:
        stubs(guarded.address, READER).log.Publish(_one_record(), timeout=10)
    assert info.value.code() == S.PERMISSION_DENIED
    assert "'dashboards'" in info.value.details() and "Log.Publish" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        stubs(guarded.address, None).admin.ListTopics(pb.ListTopicsRequest())
    assert "authorization: Bearer" in info.value.details()
    assert ADMIN not in info.value.details()


def test_health_is_open_without_a_token(guarded: ServerProcess, stubs: StubsFactory) -> None:
    health = stubs(guarded.address).health
    assert health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == 1  # SERVING
    reply = health.Check(health_pb2.HealthCheckRequest(service="compactlog.v1.Log"), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_needs_a_token_and_lists_the_services(
    guarded: ServerProcess, stubs: StubsFactory
) -> None:
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    replies = list(stubs(guarded.address, READER).reflection.ServerReflectionInfo(iter([request])))
    names = {svc.name for svc in replies[0].list_services_response.service}
    assert {"compactlog.v1.Log", "compactlog.v1.TopicAdmin", "grpc.health.v1.Health"} <= names


def test_an_unknown_method_needs_admin(guarded: ServerProcess, stubs: StubsFactory) -> None:
    def call(token: str | None) -> grpc.StatusCode:
        method = stubs(guarded.address, token).channel.unary_unary("/compactlog.v1.Log/Nope")
        return status_of(lambda: method(b"", timeout=10))

    assert call(None) == S.UNAUTHENTICATED
    assert call(CLIENT) == S.PERMISSION_DENIED
    assert call(ADMIN) == S.UNIMPLEMENTED


def test_client_library_raises_one_class_per_case(
    guarded: ServerProcess, tls_files: TlsFiles
) -> None:
    address, ca = guarded.address, tls_files.ca
    with Client(address, tls_ca=ca) as anonymous, pytest.raises(Unauthenticated):
        anonymous.list_topics()
    with Client(address, token="forged", tls_ca=ca) as forged, pytest.raises(Unauthenticated):
        list(forged.reader(TOPIC))
    with Client(address, token=READER, tls_ca=ca) as reader:
        assert [m.value for m in reader.reader(TOPIC)][:1] == [b"v0"]
        with pytest.raises(PermissionDenied, match="needs role client"):
            reader.producer(TOPIC).send(b"k", b"v")
        with pytest.raises(TopicNotFound):  # allowed through, answered by the servicer
            reader.get_topic("no-such-topic")
    with Client(address, token=CLIENT, tls_ca=ca) as client:
        assert client.producer(TOPIC).send(b"k", b"v1") is not None
        with pytest.raises(PermissionDenied):
            client.delete_topic(TOPIC)


def test_tls_needs_the_ca_that_signed_the_server(
    guarded: ServerProcess, stubs: StubsFactory, tls_files: TlsFiles
) -> None:
    list_topics = pb.ListTopicsRequest()
    plaintext = stubs(guarded.address, ADMIN, plaintext=True)
    assert status_of(lambda: plaintext.admin.ListTopics(list_topics, timeout=10)) == S.UNAVAILABLE
    stranger = stubs(guarded.address, ADMIN, ca=tls_files.other_ca)
    assert status_of(lambda: stranger.admin.ListTopics(list_topics, timeout=10)) == S.UNAVAILABLE
    with Client(guarded.address, token=ADMIN) as no_ca, pytest.raises(ServerUnreachable):
        no_ca.list_topics()
    # the certificate names both 127.0.0.1 and localhost
    port = guarded.address.rpartition(":")[2]
    by_name = stubs(f"localhost:{port}", ADMIN)
    assert TOPIC in [t.name for t in by_name.admin.ListTopics(list_topics, timeout=10).topics]


def test_async_client_sends_the_token_over_tls(guarded: ServerProcess, tls_files: TlsFiles) -> None:
    async def scenario() -> None:
        address, ca = guarded.address, tls_files.ca
        async with AsyncClient(address, tls_ca=ca) as anonymous:
            with pytest.raises(Unauthenticated):
                await anonymous.get_topic(TOPIC)
        async with AsyncClient(address, token=READER, tls_ca=ca) as reader:
            assert (await reader.get_topic(TOPIC)).name == TOPIC
            producer = await reader.create_producer(TOPIC)
            with pytest.raises(PermissionDenied):
                await producer.send(b"v", partition_key="k")
        async with AsyncClient(address, token=CLIENT, tls_ca=ca) as client:
            producer = await client.create_producer(TOPIC)
            assert await producer.send(b"v", partition_key="k") is not None

    asyncio.run(scenario())


def test_async_refusal_with_requests_in_flight(guarded: ServerProcess, tls_files: TlsFiles) -> None:
    """The server refuses a stream while requests are still being written to it: each
    send is told PermissionDenied, not a broken connection (grpc aio's write failure
    would stand in for the server's status, grpc/grpc#36066)."""

    async def scenario() -> list[BaseException | MessageId]:
        outcomes: list[BaseException | MessageId] = []
        for _ in range(10):  # a fresh connection each: the refusal comes at once
            async with AsyncClient(guarded.address, token=READER, tls_ca=tls_files.ca) as c:
                producer = await c.create_producer(TOPIC)
                sends = [producer.send(b"v" * 100_000, partition_key="k") for _ in range(8)]
                outcomes += await asyncio.gather(*sends, return_exceptions=True)
        return outcomes

    outcomes = asyncio.run(scenario())
    assert len(outcomes) == 80
    assert {type(o) for o in outcomes} == {PermissionDenied}, Counter(type(o) for o in outcomes)
