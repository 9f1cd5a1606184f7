"""The ack timeout (``unacked_messages_timeout_ms``) counted from ``receive``, as
pulsar-client counts it, against a real server: a message left in the receiver queue
longer than the timeout is not sent back, a received one is sent back once the timeout
has passed since its receive (by the next tick: at most a tick later, pulsar-client's 1 s),
counting one redelivery, and an acknowledged, cumulatively acknowledged or negatively
acknowledged one is not. The same for the asyncio consumer, a partitioned topic and a
multi-topic consumer. The bounds below allow 1.5 s for a loaded machine on top of the
tick; the lower bound (never before the timeout) has no slack."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Protocol

import pytest

from compactlog.client import Client, ConsumerType, InitialPosition, Message, Timeout
from compactlog.client.aio import AsyncClient
from tests.conftest import ServerProcess

EARLIEST = InitialPosition.Earliest
TIMEOUT_MS = 1000
TICK_S = 1.0
SLACK_S = 1.5  # a loaded machine: the tick's thread, the request and the push


class Receives(Protocol):
    def receive(self, timeout_millis: int | None = None) -> Message: ...

    def acknowledge(self, message: Message) -> None: ...


@pytest.fixture
def client(shared_server: ServerProcess) -> Iterator[Client]:
    with Client(shared_server.address, timeout=30) as c:
        yield c


def publish(client: Client, topic: str, count: int) -> None:
    producer = client.create_producer(topic)
    for i in range(count):
        producer.send(b"v%d" % i, partition_key=f"k{i}")
    producer.close()


def drain(consumer: Receives, timeout_ms: int) -> list[Message]:
    got = []
    while True:
        try:
            got.append(consumer.receive(timeout_ms))
        except Timeout:
            return got


def timed_from_receive(consumer: Receives, count: int) -> None:
    """``count`` messages waited in the queue past the timeout and its tick: received
    now, first given out; none comes back before the timeout has passed since; all come
    back once (count 1) by the timeout plus a tick; acknowledged, never again."""
    time.sleep(TIMEOUT_MS / 1000 + TICK_S + 0.5)
    start = time.monotonic()
    first = [consumer.receive(10_000) for _ in range(count)]
    assert [m.redelivery_count() for m in first] == [0] * count
    with pytest.raises(Timeout):  # not before its timeout, counted from the receive
        consumer.receive(TIMEOUT_MS - 200)
    again = [consumer.receive(10_000) for _ in range(count)]
    took = time.monotonic() - start
    assert sorted(str(m.message_id()) for m in again) == sorted(str(m.message_id()) for m in first)
    assert [m.redelivery_count() for m in again] == [1] * count
    assert TIMEOUT_MS / 1000 <= took < TIMEOUT_MS / 1000 + TICK_S + SLACK_S
    for msg in again:
        consumer.acknowledge(msg)
    assert drain(consumer, int((TIMEOUT_MS / 1000 + TICK_S + 0.5) * 1000)) == []


@pytest.mark.parametrize("sub_type", [ConsumerType.Exclusive, ConsumerType.Shared])
def test_a_message_left_in_the_queue_is_timed_from_its_receive(
    client: Client, unique_topic: str, sub_type: ConsumerType
) -> None:
    """The server used to time it from its dispatch: it came back (count 1) while the
    first copy still waited unread in the receiver queue."""
    client.create_topic(unique_topic)
    consumer = client.subscribe(
        unique_topic,
        "s",
        consumer_type=sub_type,
        unacked_messages_timeout_ms=TIMEOUT_MS,
        initial_position=EARLIEST,
    )
    publish(client, unique_topic, 1)
    timed_from_receive(consumer, 1)
    consumer.close()


def test_partitioned_and_multi_topic_consumers_time_from_receive(
    client: Client, unique_topic: str
) -> None:
    parted, other = unique_topic + "-p", unique_topic + "-o"
    client.create_topic(parted, partitions=2)
    client.create_topic(other)
    kw = {"unacked_messages_timeout_ms": TIMEOUT_MS, "initial_position": EARLIEST}
    on_partitions = client.subscribe(parted, "s", **kw)  # type: ignore[arg-type]
    multi = client.subscribe([parted, other], "m", **kw)  # type: ignore[arg-type]
    publish(client, parted, 4)
    publish(client, other, 1)
    timed_from_receive(on_partitions, 4)
    on_partitions.close()
    timed_from_receive(multi, 5)
    multi.close()


@pytest.mark.parametrize("kind", ["single", "cumulative", "negative"])
def test_acknowledged_messages_are_not_sent_back(
    client: Client, unique_topic: str, kind: str
) -> None:
    """Three received; the first acknowledged (or the first two cumulatively, or the first
    negatively, with pulsar-client's 60 s delay): only the others come back."""
    client.create_topic(unique_topic)
    consumer = client.subscribe(
        unique_topic, "s", unacked_messages_timeout_ms=TIMEOUT_MS, initial_position=EARLIEST
    )
    publish(client, unique_topic, 3)
    msgs = [consumer.receive(10_000) for _ in range(3)]
    if kind == "single":
        consumer.acknowledge(msgs[0])
        left = msgs[1:]
    elif kind == "cumulative":
        consumer.acknowledge_cumulative(msgs[1])
        left = msgs[2:]
    else:
        consumer.negative_acknowledge(msgs[0])
        left = msgs[1:]
    window = int((TIMEOUT_MS / 1000 + TICK_S + SLACK_S) * 1000)
    again = [consumer.receive(window) for _ in left]
    for msg in again:
        consumer.acknowledge(msg)
    assert [(m.message_id(), m.redelivery_count()) for m in again] == [
        (m.message_id(), 1) for m in left
    ]
    assert drain(consumer, window) == []  # nothing else came back, nor comes
    consumer.close()


def test_the_asyncio_consumer_times_from_receive(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    async def scenario() -> None:
        async with AsyncClient(shared_server.address, timeout=30) as client:
            await client.create_topic(unique_topic)
            consumer = await client.subscribe(
                unique_topic,
                "s",
                consumer_type=ConsumerType.Shared,
                unacked_messages_timeout_ms=TIMEOUT_MS,
                initial_position=EARLIEST,
            )
            producer = await client.create_producer(unique_topic)
            sent = await producer.send(b"v", partition_key="k")
            await asyncio.sleep(TIMEOUT_MS / 1000 + TICK_S + 0.5)  # unread in the queue
            start = time.monotonic()
            first = await consumer.receive(10_000)
            assert (first.message_id(), first.redelivery_count()) == (sent, 0)
            with pytest.raises(Timeout):
                await consumer.receive(TIMEOUT_MS - 200)
            again = await consumer.receive(10_000)
            took = time.monotonic() - start
            assert (again.message_id(), again.redelivery_count()) == (sent, 1)
            assert TIMEOUT_MS / 1000 <= took < TIMEOUT_MS / 1000 + TICK_S + SLACK_S
            await consumer.acknowledge(again)
            with pytest.raises(Timeout):  # acknowledged: never again
                await consumer.receive(int((TIMEOUT_MS / 1000 + TICK_S + 0.5) * 1000))
            await consumer.close()
            await producer.close()

    asyncio.run(scenario())
