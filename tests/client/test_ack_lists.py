"""A consumer's individual acks go as ``Log.AcknowledgeList`` requests (Pulsar's CommandAck
with a list of ids), each stored in one cursor write, with Acknowledge's meaning: a list
holding an id the subscription was never given is refused whole (nothing stored) and the
client then acks that list's ids one by one, so the others are stored and the one refused
fails on its own; a server without the method (UNIMPLEMENTED) gets one Acknowledge an id.
Real servers throughout: ``compactlog serve`` for the refusals, SHARED and partitioned
subscriptions, and an in-process grpc server that has only Acknowledge for the fallback."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from compactlog.client import Client, ConsumerType, InitialPosition, NotDelivered
from compactlog.client.ack_sender import AckSender
from compactlog.client.aio.ack_task import AckTask
from compactlog.client.aio.link import Link
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.conftest import ServerProcess

EARLIEST = InitialPosition.Earliest


@pytest.fixture
def log(shared_server: ServerProcess) -> Iterator[pb_grpc.LogStub]:
    with grpc.insecure_channel(shared_server.address) as channel:
        yield pb_grpc.LogStub(channel)


def sender(stub: Any, address: str, topic: str) -> AckSender:
    return AckSender(
        lambda method, req: getattr(stub, method).future(req, timeout=30),
        lambda method, req: getattr(stub, method)(req, timeout=30),
        address,
        topic,
        "s",
    )


def stored_ids(log: pb_grpc.LogStub, topic: str) -> list[pb.MessageId]:
    read = log.Read(pb.ReadRequest(topic=topic), timeout=30)
    return [m.id for response in read for m in response.messages]


def backlog(client: Client, topic: str) -> int:
    return next(s.backlog for s in client.list_subscriptions(topic) if s.name == "s")


def test_a_list_with_an_id_never_given_is_refused_whole_and_the_others_acked(
    shared_server: ServerProcess, log: pb_grpc.LogStub, unique_topic: str
) -> None:
    with Client(shared_server.address, timeout=30) as client:
        client.create_topic(unique_topic)
        client.producer(unique_topic).send_batch([(b"k", b"v%d" % i) for i in range(10)])
        ids = stored_ids(log, unique_topic)
        consume = pb.ConsumeRequest(topic=unique_topic, subscription="s", max_messages=3)
        assert len(log.Consume(consume, timeout=30).messages) == 3  # ids 0-2 given
        request = pb.AcknowledgeListRequest(
            topic=unique_topic, subscription="s", ids=[ids[0], ids[1], ids[5]]
        )
        with pytest.raises(grpc.RpcError) as refused:
            log.AcknowledgeList(request, timeout=30)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        status = rpc_status.from_call(refused.value)  # type: ignore[arg-type]
        assert status is not None
        info = error_details_pb2.ErrorInfo()
        status.details[0].Unpack(info)
        assert info.reason == "NOT_DELIVERED"
        assert info.metadata["message_id"] == f"{ids[5].ledger_id}:{ids[5].entry_id}"
        assert backlog(client, unique_topic) == 10  # nothing stored
        acks = sender(log, shared_server.address, unique_topic)
        for mid in (ids[0], ids[2], ids[5]):
            acks.put(mid, cumulative=False)
        with pytest.raises(NotDelivered) as failed:
            acks.flush()  # the list refused, then each id on its own: one failed
        assert failed.value.metadata["message_id"] == info.metadata["message_id"]
        acks.close()
        assert acks.lists and backlog(client, unique_topic) == 8


class OldLog:
    """A Log service older than AcknowledgeList: it answers Acknowledge only."""

    def __init__(self) -> None:
        self.acked: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        handler = grpc.unary_unary_rpc_method_handler(
            self._acknowledge,
            request_deserializer=pb.AcknowledgeRequest.FromString,
            response_serializer=pb.AcknowledgeResponse.SerializeToString,
        )
        self.server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("compactlog.v1.Log", {"Acknowledge": handler})]
        )
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def _acknowledge(self, req: pb.AcknowledgeRequest, context: object) -> pb.AcknowledgeResponse:
        assert not req.cumulative
        with self._lock:
            self.acked.append((req.id.ledger_id, req.id.entry_id))
        return pb.AcknowledgeResponse()


def _ids(entries: range) -> list[pb.MessageId]:
    return [pb.MessageId(ledger_id=1, entry_id=e) for e in entries]


async def _async_acks(address: str) -> bool:
    async with grpc.aio.insecure_channel(address) as channel:
        stub: Any = pb_grpc.LogStub(channel)
        link = Link(stub, None, address, 30, ())  # type: ignore[arg-type]
        task = AckTask(link, "t", "s")
        for mid in _ids(range(100, 103)):
            task.put(mid, cumulative=False)
        await task.flush()
        for mid in _ids(range(103, 105)):
            task.put(mid, cumulative=False)
        await task.flush()
        return task.lists


def test_a_server_without_the_method_gets_one_acknowledge_an_id() -> None:
    old = OldLog()
    try:
        with grpc.insecure_channel(old.address) as channel:
            acks = sender(pb_grpc.LogStub(channel), old.address, "t")
            for mid in _ids(range(3)):
                acks.put(mid, cumulative=False)
            acks.flush()
            assert not acks.lists  # told once: lists are not tried again
            for mid in _ids(range(3, 5)):
                acks.put(mid, cumulative=False)
            acks.close()
        assert sorted(old.acked) == [(1, e) for e in range(5)]
        assert not asyncio.run(_async_acks(old.address))
        assert sorted(old.acked)[5:] == [(1, e) for e in range(100, 105)]
    finally:
        old.server.stop(None)


def test_two_shared_consumers_acking_each_message_lose_and_repeat_none(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    with Client(shared_server.address, timeout=30) as client:
        client.create_topic(unique_topic)
        sent = client.producer(unique_topic).send_batch([(b"k", b"%d" % i) for i in range(600)])
        kw: dict[str, Any] = {"consumer_type": ConsumerType.Shared, "initial_position": EARLIEST}
        consumers = [client.subscribe(unique_topic, "s", receiver_queue_size=50, **kw)]
        consumers.append(client.subscribe(unique_topic, "s", receiver_queue_size=50, **kw))
        got: list[list[object]] = [[], []]
        while sum(map(len, got)) < len(sent):
            for i, consumer in enumerate(consumers):
                for message in consumer.batch_receive(timeout_ms=50):
                    got[i].append(message.message_id())
                    consumer.acknowledge(message)
        for consumer in consumers:
            consumer.close()
        assert all(got) and sorted(got[0] + got[1]) == sorted(sent)  # type: ignore[type-var]
        assert backlog(client, unique_topic) == 0


def test_a_partitioned_topic_acks_each_partition_in_its_list(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    with Client(shared_server.address, timeout=30) as client:
        client.create_topic(unique_topic, partitions=3)
        producer = client.create_producer(unique_topic)
        for i in range(300):
            producer.send_async(b"v", None, None, f"key-{i}")
        producer.flush()
        consumer = client.subscribe(unique_topic, "s", initial_position=EARLIEST)
        got = []
        while batch := consumer.batch_receive(timeout_ms=300):
            got += batch
        assert len(got) == 300 and len({m.message_id().partition() for m in got}) == 3
        kept = got[::7]
        for message in got:
            if message not in kept:
                consumer.acknowledge(message)
        consumer.close()
        again = client.subscribe(unique_topic, "s")
        left = []
        while batch := again.batch_receive(timeout_ms=300):
            left += [m.message_id() for m in batch]
        assert sorted(left) == sorted(m.message_id() for m in kept)
        again.close()


def test_listed_acks_answered_survive_a_kill_on_both_kinds(server: ServerProcess) -> None:
    """AcknowledgeList answered, kill -9, restart: exactly the unacked come again."""
    with grpc.insecure_channel(server.address) as channel:
        log, admin = pb_grpc.LogStub(channel), pb_grpc.TopicAdminStub(channel)
        for kind in (pb.LEDGER, pb.SEGMENTED):
            topic = pb.TopicKind.Name(kind).lower()
            admin.CreateTopic(pb.CreateTopicRequest(name=topic, kind=kind), timeout=30)
            records = [pb.Record(value=b"%d" % i) for i in range(10)]
            log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)
            consume = pb.ConsumeRequest(topic=topic, subscription="s", max_messages=10)
            ids = [m.id for m in log.Consume(consume, timeout=30).messages]
            for listed in (ids[4:8], [ids[0], ids[2], ids[1], ids[9], ids[0]]):
                request = pb.AcknowledgeListRequest(topic=topic, subscription="s", ids=listed)
                log.AcknowledgeList(request, timeout=30)
    server.kill()
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        log = pb_grpc.LogStub(channel)
        for topic in ("ledger", "segmented"):
            consume = pb.ConsumeRequest(topic=topic, subscription="s", max_messages=10)
            again = [m.value for m in log.Consume(consume, timeout=30).messages]
            assert again == [b"3", b"8"], topic
