"""A reader started at ``MessageId.latest`` starts just after the topic's last message as it
opens, so ``has_message_available`` sees a message published after it at once, before the
reader's stream has brought it (CI once caught the stream and the answer disagreeing)."""

from __future__ import annotations

import asyncio

from compactlog.client import Client, MessageId
from compactlog.client.aio import AsyncClient
from compactlog.client.topic_reader import latest_start, more_to_read
from tests.conftest import ServerProcess

ROUNDS = 10


def test_latest_is_fixed_as_just_after_the_last_message() -> None:
    last = MessageId(3, 7)
    assert latest_start(last, partitioned=False) == (last, False)
    assert latest_start(None, partitioned=False) == ("earliest", True)
    assert latest_start(last, partitioned=True) == ("latest", False)
    start, inclusive = latest_start(last, partitioned=False)
    assert not more_to_read(last, None, start, skipping=not inclusive)
    assert more_to_read(MessageId(3, 8), None, start, skipping=not inclusive)


def test_a_latest_reader_sees_what_is_published_after_it(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic)
        producer = client.create_producer(unique_topic)
        producer.send(b"before", partition_key="k")
        for i in range(ROUNDS):
            reader = client.create_reader(unique_topic, MessageId.latest)
            assert not reader.has_message_available()
            sent = producer.send(f"after-{i}".encode(), partition_key="k")
            assert reader.has_message_available(), f"round {i}"
            got = reader.read_next(10_000)
            assert (got.message_id(), got.data()) == (sent, f"after-{i}".encode())
            assert not reader.has_message_available()
            reader.close()


def test_a_latest_reader_of_an_empty_topic_reads_the_first_message(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic)
        reader = client.create_reader(unique_topic, MessageId.latest)
        assert not reader.has_message_available()
        sent = client.create_producer(unique_topic).send(b"first", partition_key="k")
        assert reader.has_message_available()
        assert reader.read_next(10_000).message_id() == sent
        reader.close()


def test_an_async_latest_reader_sees_what_is_published_after_it(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    async def scenario() -> None:
        async with AsyncClient(shared_server.address, timeout=30) as client:
            await client.create_topic(unique_topic)
            producer = await client.create_producer(unique_topic)
            await producer.send(b"before", partition_key="k")
            for i in range(ROUNDS):
                reader = await client.create_reader(unique_topic, MessageId.latest)
                assert not await reader.has_message_available()
                sent = await producer.send(f"after-{i}".encode(), partition_key="k")
                assert await reader.has_message_available(), f"round {i}"
                got = await reader.read_next(10_000)
                assert got.message_id() == sent
                await reader.seek(MessageId.latest)
                assert not await reader.has_message_available()
                await reader.close()

    asyncio.run(scenario())


def test_a_latest_reader_of_a_partitioned_topic_reads_only_what_comes_after(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    """One id cannot start every partition: the reader stays at the server's per-partition
    latest (the first fix of this race read the other partitions' old messages)."""
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic, partitions=3)
        producer = client.create_producer(unique_topic)
        for i in range(30):
            producer.send(b"old-%d" % i, partition_key=f"k{i}")
        reader = client.create_reader(unique_topic, MessageId.latest)
        assert not reader.has_message_available()
        for i in range(6):
            producer.send(b"new-%d" % i, partition_key=f"k{i}")
        got = sorted(reader.read_next(10_000).data() or b"" for _ in range(6))
        assert got == [b"new-%d" % i for i in range(6)]
        reader.close()
