"""A reader started at ``MessageId.latest`` starts just after the topic's last message as it
opens, so ``has_message_available`` sees a message published after it at once, before the
reader's stream has brought it (CI once caught the stream and the answer disagreeing)."""

from __future__ import annotations

import asyncio
import time

from compactlog.client import Client, MessageId
from compactlog.client.aio import AsyncClient
from compactlog.client.reader_start import LastPosition, id_start, more_to_read
from tests.conftest import ServerProcess

ROUNDS = 10


def test_latest_is_fixed_as_just_after_the_last_message() -> None:
    last = MessageId(3, 7)
    start = id_start("latest", False, LastPosition(last))
    assert (start.start, start.skip) == (last, last)
    assert id_start("latest", False, LastPosition(None)).start == "earliest"
    assert not more_to_read(LastPosition(last), start.marks)
    assert more_to_read(LastPosition(MessageId(3, 8)), start.marks)


def test_a_partitioned_latest_start_marks_each_partition() -> None:
    """Ids of different partitions have no order: each partition is judged alone."""
    p0, p1 = MessageId(0, 5, 9), MessageId(1, 2, 4)
    start = id_start("latest", False, LastPosition(p0, (p0, p1)))
    assert start.start == "latest"
    assert not more_to_read(LastPosition(p0, (p0, p1)), start.marks)
    assert more_to_read(LastPosition(p0, (p0, MessageId(1, 2, 5))), start.marks)
    assert more_to_read(LastPosition(p0, (p0, p1, MessageId(2, 0, 0))), start.marks)


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


def test_a_partitioned_reader_knows_when_every_partition_is_read(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    """``has_message_available`` compares each partition's last id with the last one read
    there: the greatest id of all partitions says nothing about a partition read to its end."""
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic, partitions=3)
        producer = client.create_producer(unique_topic)
        for i in range(30):
            producer.send(b"m-%d" % i, partition_key=f"k{i}")
        reader = client.create_reader(unique_topic, MessageId.earliest)
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(10_000).data())
        assert sorted(got) == sorted(b"m-%d" % i for i in range(30))
        assert not reader.has_message_available()
        reader.close()
        latest = client.create_reader(unique_topic, MessageId.latest)
        assert not latest.has_message_available()
        producer.send(b"new", partition_key="k1")
        assert latest.has_message_available()
        assert latest.read_next(10_000).data() == b"new"
        assert not latest.has_message_available()
        latest.close()


def test_a_partitioned_reader_seeks_every_partition_to_a_time(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    """A seek to a publish time reads each partition from that time, as pulsar-client's
    multi-topic reader seeks each partition (one id would start the others at the earliest)."""
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic, partitions=3)
        producer = client.create_producer(unique_topic)
        for i in range(12):
            producer.send(b"old-%d" % i, partition_key=f"k{i}", event_timestamp=1000)
        old = client.reader(unique_topic)
        cut = max(msg.publish_timestamp() for msg in old) + 1
        old.close()
        while int(time.time() * 1000) <= cut:
            time.sleep(0.002)
        for i in range(12):
            producer.send(b"new-%d" % i, partition_key=f"k{i}")
        reader = client.create_reader(unique_topic, MessageId.earliest)
        reader.seek(cut)
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(10_000).data())
        assert sorted(got) == sorted(b"new-%d" % i for i in range(12))
        reader.close()


def test_an_async_partitioned_reader_reads_to_the_end_and_seeks_to_a_time(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    async def scenario() -> None:
        async with AsyncClient(shared_server.address, timeout=30) as client:
            await client.create_topic(unique_topic, partitions=3)
            producer = await client.create_producer(unique_topic)
            for i in range(12):
                await producer.send(b"old-%d" % i, partition_key=f"k{i}")
            reader = await client.create_reader(unique_topic, MessageId.earliest)
            old = []
            while await reader.has_message_available():
                old.append(await reader.read_next(10_000))
            assert sorted(m.data() for m in old) == sorted(b"old-%d" % i for i in range(12))
            cut = max(m.publish_timestamp() for m in old) + 1
            while int(time.time() * 1000) <= cut:
                await asyncio.sleep(0.002)
            for i in range(6):
                await producer.send(b"new-%d" % i, partition_key=f"k{i}")
            await reader.seek(cut)
            new = []
            while await reader.has_message_available():
                new.append((await reader.read_next(10_000)).data())
            assert sorted(new) == sorted(b"new-%d" % i for i in range(6))
            await reader.close()

    asyncio.run(scenario())
