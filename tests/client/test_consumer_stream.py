"""The Python consumers (threaded and asyncio) over ``Log.ConsumeStream``: what the stream
adds to the consumer's contract. The server never pushes a consumer more than its
``receiver_queue_size``; a seek or a redelivery drops what was pushed ahead, as
pulsar-client clears its receiver queue; ``batch_receive`` hands out one pushed response
at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from compactlog.client import Client, ConsumerType, InitialPosition, MessageId
from compactlog.client.aio import AsyncClient
from tests.conftest import ServerProcess

EARLIEST = InitialPosition.Earliest


@pytest.fixture
def client(shared_server: ServerProcess) -> Iterator[Client]:
    with Client(shared_server.address, timeout=30) as made:
        yield made


@pytest.fixture
def topic(client: Client, unique_topic: str) -> str:
    client.create_topic(unique_topic)
    client.producer(unique_topic).send_batch([(b"k%d" % i, b"v%d" % i) for i in range(30)])
    return unique_topic


def entries(messages: list[object]) -> list[int]:
    return [m.message_id().entry_id() for m in messages]  # type: ignore[attr-defined]


def test_a_consumer_is_pushed_no_more_than_its_queue(client: Client, topic: str) -> None:
    kw = {"consumer_type": ConsumerType.Shared, "initial_position": EARLIEST}
    small = client.subscribe(topic, "s", receiver_queue_size=10, **kw)  # type: ignore[arg-type]
    first = small.receive(10_000)
    # Another consumer gets exactly the 20 the small one was not pushed (were it pushed
    # more, these receives would run out of messages and time out).
    other = client.subscribe(topic, "s", **kw)  # type: ignore[arg-type]
    taken: list[object] = []
    while len(taken) < 20:
        taken += other.batch_receive(timeout_ms=10_000)
    rest = [small.receive(10_000) for _ in range(9)]
    assert sorted(entries([first, *rest]) + entries(taken)) == list(range(30))
    assert len(taken) == 20
    other.close()
    small.close()


def test_batch_receive_hands_out_one_response_at_a_time(client: Client, topic: str) -> None:
    consumer = client.subscribe(topic, "b", receiver_queue_size=10, initial_position=EARLIEST)
    batches = [consumer.batch_receive(timeout_ms=10_000) for _ in range(3)]
    assert [entries(b) for b in batches] == [list(range(i, i + 10)) for i in (0, 10, 20)]
    consumer.close()


@pytest.mark.parametrize("how", ["seek", "redeliver"])
def test_seek_and_redelivery_drop_what_was_pushed(client: Client, topic: str, how: str) -> None:
    consumer = client.subscribe(topic, "x", receiver_queue_size=10, initial_position=EARLIEST)
    got = [consumer.receive(10_000) for _ in range(3)]
    assert entries(got) == [0, 1, 2]
    consumer.acknowledge(got[0])
    if how == "seek":
        consumer.seek(MessageId.earliest)
        expected = list(range(30))
    else:
        consumer.redeliver_unacknowledged_messages()
        expected = list(range(1, 30))  # what was acknowledged does not come again
    again = [consumer.receive(10_000) for _ in range(len(expected))]
    assert entries(again) == expected
    consumer.close()


def test_the_asyncio_consumer_streams_alike(shared_server: ServerProcess, topic: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(shared_server.address, timeout=30) as client:
            consumer = await client.subscribe(
                topic, "aio", receiver_queue_size=10, initial_position=EARLIEST
            )
            batches = [await consumer.batch_receive(timeout_ms=10_000) for _ in range(2)]
            assert [entries(b) for b in batches] == [list(range(10)), list(range(10, 20))]
            await consumer.seek(MessageId.earliest)  # what was pushed ahead is dropped
            assert entries([await consumer.receive(10_000)]) == [0]
            consumer.redeliver_unacknowledged_messages()
            again = [await consumer.receive(10_000) for _ in range(30)]
            assert entries(again) == list(range(30))
            await consumer.close()

    asyncio.run(scenario())
