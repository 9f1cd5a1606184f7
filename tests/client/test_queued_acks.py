"""Acknowledgements are queued, as pulsar-client's are (CONTRACT section 6 still holds):
``acknowledge`` returns without waiting for the server's group commit, an id the consumer
was never given is refused at once, a failure the server answers later is raised by the
consumer's next call, and ``close`` returns only once every ack is stored, so nothing acked
before it comes again, also after the server is killed and restarted. Acks are sent grouped,
as pulsar-client's core sends them: 100 ms after the first of a group or 1,000 acks
queued, a group's individual acks as AcknowledgeList requests, counted here at a real
server (its metrics)."""

from __future__ import annotations

import asyncio
import re
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from compactlog.client import (
    AlreadyClosed,
    Client,
    InitialPosition,
    MessageId,
    NotDelivered,
    TopicNotFound,
)
from compactlog.client.ack_queue import GROUP_MAX, GROUP_S, AckQueue, list_requests
from compactlog.client.aio import AsyncClient
from compactlog.client.consumer import Consumer
from compactlog.client.message import _UNSET, messages_of
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess

EARLIEST = InitialPosition.Earliest


@pytest.fixture
def client(shared_server: ServerProcess) -> Iterator[Client]:
    with Client(shared_server.address, timeout=30) as c:
        yield c


def publish(client: Client, topic: str, count: int) -> list[MessageId]:
    client.create_topic(topic)
    return client.producer(topic).send_batch([(b"k%d" % i, b"v%d" % i) for i in range(count)])


def drain(consumer: Consumer) -> list[MessageId]:
    got: list[MessageId] = []
    while batch := consumer.batch_receive(timeout_ms=300):
        got += [m.message_id() for m in batch]
    return got


async def _async_acks(address: str, first: bool) -> list[MessageId]:
    """Topic "a": 20 messages; the first consumer acks up to the 10th and the 16th."""
    async with AsyncClient(address, timeout=30) as client:
        if first:
            await client.create_topic("a")
            producer = await client.create_producer("a")
            await producer.send_batch([(b"k", b"v%d" % i) for i in range(20)])
        consumer = await client.subscribe("a", "s", initial_position=EARLIEST)
        got = await consumer.batch_receive(timeout_ms=2000)
        if first:
            await consumer.acknowledge_cumulative(got[9])
            await consumer.acknowledge(got[15])
        await consumer.close()
        return [m.message_id() for m in got]


def test_acks_made_before_close_survive_a_kill(server: ServerProcess) -> None:
    """Individual and cumulative acks, queued (threads and asyncio); close; kill -9;
    restart: exactly what was not acknowledged comes again."""
    with Client(server.address, timeout=30) as client:
        ids = publish(client, "t", 3000)
        consumer = client.subscribe("t", "s", initial_position=EARLIEST)
        assert drain(consumer) == ids
        for mid in ids[:500] + ids[2001::2]:
            consumer.acknowledge(mid)
        consumer.acknowledge_cumulative(ids[1499])
        consumer.close()
    async_ids = asyncio.run(_async_acks(server.address, True))
    assert len(async_ids) == 20
    server.kill()
    server.start()
    with Client(server.address, timeout=30) as client:
        again = drain(client.subscribe("t", "s"))
    assert again == ids[1500:2001] + ids[2002::2]
    assert asyncio.run(_async_acks(server.address, False)) == async_ids[10:15] + async_ids[16:]


def test_an_id_never_given_is_refused_at_once(client: Client, unique_topic: str) -> None:
    ids = publish(client, unique_topic, 3)
    consumer = client.subscribe(unique_topic, "s", receiver_queue_size=1, initial_position=EARLIEST)
    assert consumer.receive(5000).message_id() == ids[0]
    for ack in (consumer.acknowledge, consumer.acknowledge_cumulative):
        with pytest.raises(NotDelivered):
            ack(ids[1])
    consumer.acknowledge(ids[0])
    consumer.close()  # nothing failed: the ack given was stored


def test_a_consumers_own_message_is_queued_unread_and_any_other_checked(
    client: Client, unique_topic: str
) -> None:
    ids = publish(client, unique_topic, 3)
    consumer = client.subscribe(unique_topic, "s", receiver_queue_size=1, initial_position=EARLIEST)
    first = consumer.receive(5000)
    reader = client.create_reader(unique_topic, MessageId.earliest)
    read = [reader.read_next(5000) for _ in range(3)]
    reader.close()
    consumer.acknowledge(first)
    assert first._wire is _UNSET  # queued as it is: its wire id read when sent
    with pytest.raises(NotDelivered):  # another response's message, never given here
        consumer.acknowledge(read[2])
    consumer.acknowledge(read[0])  # another response's, but given: checked and taken
    consumer.close()
    again = client.subscribe(unique_topic, "s", initial_position=EARLIEST)
    assert again.receive(5000).message_id() == ids[1]  # the ack of ``first`` was stored
    again.close()


def test_a_failure_answered_later_is_raised_by_the_next_call(
    client: Client, unique_topic: str
) -> None:
    publish(client, unique_topic, 2)
    consumer = client.subscribe(unique_topic, "s", initial_position=EARLIEST)
    first, second = consumer.receive(5000), consumer.receive(5000)
    client.delete_topic(unique_topic)
    consumer.acknowledge(first)  # queued: the server's answer comes later
    with pytest.raises(TopicNotFound):
        consumer.redeliver_unacknowledged_messages()  # after the queued acks: their failure
    consumer.acknowledge(second)
    with pytest.raises(TopicNotFound):
        consumer.close()
    with pytest.raises(AlreadyClosed):
        consumer.receive(10)


def test_the_async_consumer_raises_a_later_failure_from_close(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    async def scenario() -> None:
        async with AsyncClient(shared_server.address, timeout=30) as client:
            await client.create_topic(unique_topic)
            await (await client.create_producer(unique_topic)).send(b"v")
            consumer = await client.subscribe(unique_topic, "s", initial_position=EARLIEST)
            message = await consumer.receive(5000)
            with pytest.raises(NotDelivered):
                await consumer.acknowledge((message.message_id()[0], 1))
            with Client(shared_server.address) as admin:
                admin.delete_topic(unique_topic)
            await consumer.acknowledge(message)
            with pytest.raises(TopicNotFound):
                await consumer.close()

    asyncio.run(scenario())


def _id(entry: int, ledger: int = 1, partition: int = 0) -> pb.MessageId:
    return pb.MessageId(ledger_id=ledger, entry_id=entry, partition=partition)


def test_the_queue_sends_the_highest_cumulative_ack_and_what_it_does_not_cover() -> None:
    queue = AckQueue()
    for entry in (5, 9, 3):
        queue.put(_id(entry), cumulative=True)
    for entry in (2, 12, 12, 10):
        queue.put(_id(entry), cumulative=False)
    queue.put(_id(4, partition=1), cumulative=False)
    cumulative, single = queue.take()
    assert cumulative == [_id(9)]
    assert single == [_id(12), _id(10), _id(4, partition=1)]
    assert not queue and queue.take() == ([], [])


def test_the_queue_sends_a_queued_message_by_its_wire_id() -> None:
    resp = pb.ConsumeResponse(messages=[pb.Message(id=_id(e)) for e in range(4)])
    made = messages_of(resp.messages, "t")
    queue = AckQueue()
    queue.put(made[2], cumulative=False)
    queue.put(_id(7), cumulative=False)
    queue.put(made[3], cumulative=False)
    queue.put(made[2], cumulative=False)  # the same message twice: once
    queue.put(made[1], cumulative=True)  # a cumulative ack of a message: by its id
    assert queue.take() == ([_id(1)], [_id(2), _id(7), _id(3)])
    queue.put(made[0], cumulative=False)
    queue.put(made[3], cumulative=False)
    queue.put(_id(2), cumulative=True)  # covers the first
    assert queue.take() == ([_id(2)], [_id(3)])
    for at in (1, 2, 3, 0):
        queue.put(made[at], cumulative=False)
    cumulative, single = queue.take()  # no cumulative ack: the messages as they are
    assert cumulative == [] and single == [made[1], made[2], made[3], made[0]]
    (req,) = list_requests("t", "s", [*single, _id(9)])
    assert (req.topic, req.subscription) == ("t", "s")
    assert list(req.ids) == [_id(1), _id(2), _id(3), _id(0), _id(9)]
    assert [len(r.ids) for r in list_requests("t", "s", [_id(e) for e in range(2500)])] == [
        1000, 1000, 500
    ]  # fmt: skip


def test_the_queue_is_full_at_the_group_size() -> None:
    queue = AckQueue()
    for entry in range(GROUP_MAX - 2):
        queue.put(_id(entry), cumulative=False)
        queue.put(_id(entry), cumulative=True)  # collapses to one
    assert not queue.full()
    queue.put(_id(GROUP_MAX), cumulative=False)
    assert queue.full()


def _acks_counted(port: int) -> Callable[[], dict[str, float]]:
    """Requests the server has received so far: Acknowledge by ``cumulative`` ("true",
    "false"), AcknowledgeList ("list") and the ids those carried ("list ids")."""

    def counted() -> dict[str, float]:
        url = f"http://127.0.0.1:{port}/metrics"
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        found = re.findall(r'compactlog_acknowledge_requests_total{cumulative="(\w+)"} (\S+)', body)
        lists = re.search(r"^compactlog_acknowledge_list_requests_total (\S+)", body, re.M)
        ids = re.search(r"^compactlog_acknowledge_list_ids_total (\S+)", body, re.M)
        assert lists is not None and ids is not None
        return (
            {"true": 0.0, "false": 0.0}
            | {label: float(n) for label, n in found}
            | {
                "list": float(lists[1]),
                "list ids": float(ids[1]),
            }
        )

    return counted


async def _async_acks_each(
    address: str, topic: str, count: int, cumulative: bool
) -> tuple[float, list[MessageId]]:
    """``topic``: an ack of each of ``count`` messages (``cumulative`` or individual), then
    close; how long the acks took, and what a new consumer gets."""
    async with AsyncClient(address, timeout=30) as client:
        await client.create_topic(topic)
        producer = await client.create_producer(topic)
        await producer.send_batch([(b"k", b"v%d" % i) for i in range(count + 5)])
        consumer = await client.subscribe(topic, "s", initial_position=EARLIEST)
        got: list[object] = []
        while len(got) < count + 5:
            got += await consumer.batch_receive(timeout_ms=5000)
        ack = consumer.acknowledge_cumulative if cumulative else consumer.acknowledge
        started = time.monotonic()
        for message in got[:count]:
            await ack(message)  # type: ignore[arg-type]
        elapsed = time.monotonic() - started
        await consumer.close()
        again = await client.subscribe(topic, "s")
        left = [m.message_id() for m in await again.batch_receive(timeout_ms=300)]
        await again.close()
        return elapsed, left


def test_many_acks_make_few_requests_and_close_loses_none(server_factory) -> None:  # type: ignore[no-untyped-def]
    """2,000 cumulative acks in a burst are a request or two (one per 100 ms group, and
    the close's flush), and so are 2,000 individual ones (AcknowledgeList requests of up to
    1,000 ids, one per group); after close a new consumer gets exactly what was not
    acknowledged. The asyncio consumer alike."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = server_factory(extra_args=["--metrics-listen", f"127.0.0.1:{port}"])
    counted = _acks_counted(port)
    with Client(srv.address, timeout=30) as client:
        ids = publish(client, "t", 4600)
        consumer = client.subscribe("t", "s", initial_position=EARLIEST)
        got = [consumer.receive(5000) for _ in ids]
        started = time.monotonic()
        for message in got[:2000]:
            consumer.acknowledge_cumulative(message)
        for message in got[2500:4500]:
            consumer.acknowledge(message)
        elapsed = time.monotonic() - started
        consumer.close()
        sent = counted()
        groups = elapsed / GROUP_S + 2000 / GROUP_MAX + 1  # by time, by size, and the close
        assert sent["true"] <= elapsed / GROUP_S + 1, (sent, elapsed)
        assert sent["false"] == 0 and sent["list ids"] == 2000
        assert sent["list"] <= groups, (sent, elapsed)
        assert drain(client.subscribe("t", "s")) == ids[2000:2500] + ids[4500:]
    elapsed, left = asyncio.run(_async_acks_each(srv.address, "b", 1000, cumulative=True))
    assert counted()["true"] - sent["true"] <= elapsed / GROUP_S + 1
    assert len(left) == 5
    elapsed, left = asyncio.run(_async_acks_each(srv.address, "c", 2000, cumulative=False))
    now = counted()
    assert now["false"] == 0 and now["list ids"] - sent["list ids"] == 2000
    assert now["list"] - sent["list"] <= elapsed / GROUP_S + 2000 / GROUP_MAX + 1, (now, elapsed)
    assert len(left) == 5
