"""A consumer's life as pulsar-client users expect it (CONTRACT sections 6 and 13): a
consumer made without a name still is a consumer of its own (the client generates a
unique name), and ``close()`` lets the subscription go at once (``Log.CloseConsumer``),
not after the server's 30 s of silence. The shared server runs with that production
liveness, so every handover below is fast only because of the close."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from compactlog.client import (
    Client,
    ConsumerBusy,
    ConsumerType,
    InitialPosition,
    Message,
    MessageId,
    Timeout,
)
from compactlog.client.aio import AsyncClient
from compactlog.client.consumer import Consumer
from tests.conftest import ServerProcess

EARLIEST = InitialPosition.Earliest
AT_ONCE_S = 10.0  # far below the 30 s after which a silent consumer is let go


@pytest.fixture
def client(shared_server: ServerProcess) -> Iterator[Client]:
    with Client(shared_server.address) as c:
        yield c


@pytest.fixture
def topic(client: Client, unique_topic: str) -> str:
    client.create_topic(unique_topic)
    return unique_topic


def publish(client: Client, topic: str, count: int) -> list[MessageId]:
    producer = client.create_producer(topic)
    return [producer.send(b"v%d" % i, partition_key=f"k{i}") for i in range(count)]


def drain(consumer: Consumer, timeout_ms: int = 300) -> list[Message]:
    got: list[Message] = []
    while True:
        try:
            got.append(consumer.receive(timeout_ms))
        except Timeout:
            return got


def test_unnamed_consumers_get_names_of_their_own(client: Client, topic: str) -> None:
    one = client.subscribe(topic, "s", initial_position=EARLIEST)
    two = client.subscribe(topic, "t", initial_position=EARLIEST)
    assert one.consumer_name() and two.consumer_name()
    assert one.consumer_name() != two.consumer_name()
    named = client.subscribe(topic, "u", consumer_name="mine")
    assert named.consumer_name() == "mine"


def test_two_unnamed_shared_consumers_split_the_messages(client: Client, topic: str) -> None:
    ids = publish(client, topic, 10)
    kw = {"consumer_type": ConsumerType.Shared, "receiver_queue_size": 1}
    a = client.subscribe(topic, "sh", initial_position=EARLIEST, **kw)  # type: ignore[arg-type]
    b = client.subscribe(topic, "sh", initial_position=EARLIEST, **kw)  # type: ignore[arg-type]
    got: list[MessageId] = []
    for _ in range(20):  # each message once: 10 deliveries, not 10 to each
        for consumer in (a, b):
            try:
                msg = consumer.receive(200)
            except Timeout:
                continue
            got.append(msg.message_id())
            consumer.acknowledge(msg)
        if len(got) >= len(ids):
            break
    assert sorted(got) == ids
    assert drain(a, 200) == [] and drain(b, 200) == []


def test_a_second_unnamed_exclusive_consumer_is_busy(client: Client, topic: str) -> None:
    client.subscribe(topic, "ex", initial_position=EARLIEST)
    with pytest.raises(ConsumerBusy):
        client.subscribe(topic, "ex", initial_position=EARLIEST)


def test_two_unnamed_failover_consumers_one_active(client: Client, topic: str) -> None:
    ids = publish(client, topic, 6)
    kw = {"consumer_type": ConsumerType.Failover, "initial_position": EARLIEST}
    a = client.subscribe(topic, "fo", **kw)  # type: ignore[arg-type]
    b = client.subscribe(topic, "fo", **kw)  # type: ignore[arg-type]
    # a fetched the messages at its subscribe, alone; b takes over when its generated name
    # sorts first. Drop what each holds: from now on only the active one is given any.
    a.redeliver_unacknowledged_messages()
    b.redeliver_unacknowledged_messages()
    got: dict[str, list[Message]] = {"a": [], "b": []}
    for name, consumer in (("a", a), ("b", b)):  # both live from subscribe on
        for msg in drain(consumer):
            consumer.acknowledge(msg)
            got[name].append(msg)
    assert sorted(len(v) for v in got.values()) == [0, 6]  # one active, one standing by
    assert sorted(m.message_id() for m in got["a"] + got["b"]) == ids


def test_failover_takes_over_at_once_after_close(client: Client, topic: str) -> None:
    ids = publish(client, topic, 3)
    kw = {"consumer_type": ConsumerType.Failover, "initial_position": EARLIEST}
    a = client.subscribe(topic, "fo", consumer_name="a", receiver_queue_size=1, **kw)  # type: ignore[arg-type]
    b = client.subscribe(topic, "fo", consumer_name="b", **kw)  # type: ignore[arg-type]
    first = a.receive(5000)
    a.acknowledge(first)
    with pytest.raises(Timeout):
        b.receive(300)  # standing by while a is active
    closed = time.monotonic()
    a.close()
    taken = [b.receive(int(AT_ONCE_S * 1000)) for _ in ids[1:]]
    assert [m.message_id() for m in taken] == ids[1:]
    assert time.monotonic() - closed < AT_ONCE_S


def test_exclusive_is_free_at_once_after_close(client: Client, topic: str) -> None:
    ids = publish(client, topic, 2)
    a = client.subscribe(topic, "ex", initial_position=EARLIEST)
    assert a.receive(5000).message_id() == ids[0]
    a.close()
    b = client.subscribe(topic, "ex", initial_position=EARLIEST)  # no ConsumerBusy
    assert [m.message_id() for m in drain(b)] == ids  # a acknowledged nothing


def test_the_async_consumer_closes_the_same_way(
    shared_server: ServerProcess, client: Client, topic: str
) -> None:
    ids = publish(client, topic, 2)

    async def scenario() -> list[MessageId]:
        async with AsyncClient(shared_server.address) as aio:
            a = await aio.subscribe(topic, "ex", initial_position=EARLIEST)
            with pytest.raises(ConsumerBusy):
                await aio.subscribe(topic, "ex", initial_position=EARLIEST)
            await a.close()
            b = await aio.subscribe(topic, "ex", initial_position=EARLIEST)
            return [(await b.receive(5000)).message_id() for _ in ids]

    assert asyncio.run(scenario()) == ids
