"""``compactlog.client.aio``: the same calls as coroutines, against a real server process."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Coroutine
from typing import Any

import grpc
import pytest

from compactlog.client import (
    AlreadyClosed,
    Client,
    ConsumerType,
    InitialPosition,
    MessageId,
    Result,
    Timeout,
    TopicNotFound,
)
from compactlog.client.aio import AsyncClient
from compactlog.errors import InvalidArgument


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)


def test_produce_subscribe_receive_acknowledge(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        async with AsyncClient(shared_server.address, timeout=30) as client:
            await client.create_topic(unique_topic)
            consumer = await client.subscribe(
                unique_topic,
                "aio",
                consumer_type=ConsumerType.Shared,
                initial_position=InitialPosition.Latest,
                consumer_name="me",
                negative_ack_redelivery_delay_ms=200,
            )
            producer = await client.create_producer(unique_topic)
            ids = [
                await producer.send(f"v{i}".encode(), partition_key=f"k{i}", properties={"i": "x"})
                for i in range(3)
            ]
            got = [await consumer.receive(timeout_millis=5000) for _ in range(3)]
            assert [m.message_id() for m in got] == ids
            assert got[0].value() == b"v0" and got[0].properties() == {"i": "x"}
            await consumer.negative_acknowledge(got[1])
            again = await consumer.receive(timeout_millis=5000)
            assert again.message_id() == ids[1]
            await consumer.acknowledge(got[0])
            await consumer.acknowledge_cumulative(got[2])
            started = time.monotonic()
            with pytest.raises(Timeout):
                await consumer.receive(timeout_millis=300)
            assert time.monotonic() - started >= 0.25
            await consumer.close()
            await producer.close()

    run(scenario())


def test_unacked_messages_go_out_again_after_the_ack_timeout(
    shared_server, unique_topic: str
) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        async with AsyncClient(shared_server.address, timeout=30) as client:
            await client.create_topic(unique_topic)
            consumer = await client.subscribe(
                unique_topic,
                "aio-timeout",
                consumer_type="shared",  # a name, as Client.subscribe takes it
                consumer_name="me",
                unacked_messages_timeout_ms=300,
                initial_position=InitialPosition.Earliest,
            )
            producer = await client.create_producer(unique_topic)
            sent = await producer.send(b"v", partition_key="k")
            first = await consumer.receive(timeout_millis=5000)
            assert first.message_id() == sent  # not acknowledged ...
            again = await consumer.receive(timeout_millis=5000)
            assert again.message_id() == sent  # ... so it comes again after 300 ms
            await consumer.acknowledge(again)
            await consumer.close()
            await producer.close()

    run(scenario())
    with Client(shared_server.address) as admin:
        [sub] = admin.list_subscriptions(unique_topic)
    assert sub.type == "SHARED"


def test_reader_and_last_ids(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        async with AsyncClient(shared_server.address) as client:
            await client.create_topic(unique_topic)
            producer = await client.create_producer(unique_topic)
            ids = [await producer.send(b"x", partition_key=f"k{i}") for i in range(3)]
            assert await client.get_last_message_id(unique_topic) == ids[-1]
            reader = await client.create_reader(unique_topic, ids[0])
            assert (await reader.read_next(timeout_millis=5000)).message_id() == ids[1]
            assert await reader.has_message_available()
            assert (await reader.read_next(timeout_millis=5000)).message_id() == ids[2]
            assert not await reader.has_message_available()
            with pytest.raises(Timeout):
                await reader.read_next(timeout_millis=200)
            new = await producer.send(None, partition_key="k0")
            msg = await reader.read_next(timeout_millis=5000)
            assert msg.message_id() == new and msg.value() is None
            await reader.close()
            inclusive = await client.create_reader(
                unique_topic, ids[0], is_read_compacted=True, start_message_id_inclusive=True
            )
            assert (await inclusive.read_next(timeout_millis=5000)).message_id() == ids[0]
            await inclusive.close()  # no compaction yet: the compacted view is the raw log
            earliest = await client.create_reader(unique_topic, MessageId.earliest)
            assert (await earliest.read_next(timeout_millis=5000)).message_id() == ids[0]
            await earliest.close()
            status = await client.compact(unique_topic, wait=True)
            assert status.state == "SUCCESS"

    run(scenario())


def test_errors_are_classes(shared_server) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        async with AsyncClient(shared_server.address) as client:
            producer = await client.create_producer("no-such-topic")
            with pytest.raises(TopicNotFound) as info:
                await producer.send(b"x")
            assert not isinstance(info.value, grpc.RpcError)
            with pytest.raises(TopicNotFound):
                await client.subscribe(
                    "no-such-topic", "s", initial_position=InitialPosition.Earliest
                )
            reader = await client.create_reader("no-such-topic", MessageId.earliest)
            with pytest.raises(TopicNotFound):
                await reader.read_next(timeout_millis=5000)
            await reader.close()

    run(scenario())


def test_async_delete_topic_as_the_sync_one(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    """``delete_topic(name)``: the sync client's signature; the topic is gone for both
    clients, and a name that does not exist (any more) is ``TopicNotFound`` naming it."""
    sync = inspect.signature(Client.delete_topic)
    assert inspect.signature(AsyncClient.delete_topic).parameters == sync.parameters

    async def scenario() -> None:
        async with AsyncClient(shared_server.address) as client:
            await client.create_topic(unique_topic, kind="segmented", partitions=2)
            assert await client.delete_topic(unique_topic) is None
            with Client(shared_server.address) as other:
                assert unique_topic not in {t.name for t in other.list_topics()}
            with pytest.raises(TopicNotFound, match=unique_topic):
                await client.get_topic(unique_topic)
            with pytest.raises(TopicNotFound, match=unique_topic) as info:
                await client.delete_topic(unique_topic)
            assert not isinstance(info.value, grpc.RpcError)
        with pytest.raises(AlreadyClosed):
            await client.delete_topic(unique_topic)

    run(scenario())


@pytest.mark.parametrize("name", ["subscribe", "create_producer", "create_reader"])
def test_async_calls_take_the_sync_parameters_and_defaults(name: str) -> None:
    """pulsar-client's parameters, in its order, with its defaults (InitialPosition.Latest,
    negative_ack_redelivery_delay_ms=60000), as the synchronous client has them."""
    sync = inspect.signature(getattr(Client, name)).parameters
    aio = inspect.signature(getattr(AsyncClient, name)).parameters
    pulsar = [(p.name, p.default) for p in sync.values() if p.kind != p.KEYWORD_ONLY]
    assert [(p.name, p.default) for p in aio.values()] == pulsar
    if name == "subscribe":
        assert aio["initial_position"].default is InitialPosition.Latest
        assert aio["negative_ack_redelivery_delay_ms"].default == 60000


def test_async_subscribe_starts_at_latest_and_takes_a_list(
    shared_server, unique_topic: str
) -> None:  # type: ignore[no-untyped-def]
    other = unique_topic + "-b"

    async def scenario() -> None:
        async with AsyncClient(shared_server.address, timeout=30) as client:
            for name in (unique_topic, other):
                await client.create_topic(name)
            first = await client.create_producer(unique_topic)
            await first.send(b"before", partition_key="k")
            consumer = await client.subscribe(unique_topic, "latest")
            with pytest.raises(Timeout):
                await consumer.receive(timeout_millis=300)  # "before" is not for it
            after = await first.send(b"after", partition_key="k")
            assert (await consumer.receive(timeout_millis=5000)).message_id() == after
            both = await client.subscribe([unique_topic, other], "both")
            second = await client.create_producer(other)
            await first.send(b"one", partition_key="k")
            await second.send(b"two", partition_key="k")
            got = {(await both.receive(timeout_millis=5000)).value() for _ in range(2)}
            assert got == {b"one", b"two"}
            await both.close()
            await consumer.close()

    run(scenario())


def test_async_flush_waits_for_every_send_begun(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        async with AsyncClient(shared_server.address) as client:
            await client.create_topic(unique_topic)
            producer = await client.create_producer(unique_topic, "named", None, 9)
            assert (producer.producer_name(), producer.last_sequence_id()) == ("named", 9)
            sends = [
                asyncio.create_task(producer.send(b"v%d" % i, partition_key=f"k{i}"))
                for i in range(20)
            ]
            await producer.flush()
            assert all(task.done() for task in sends)
            ids = [task.result() for task in sends]
            assert len(set(ids)) == 20 and producer.last_sequence_id() == 29
            assert await client.get_last_message_id(unique_topic) == max(ids)
            await producer.close()

    run(scenario())


def test_async_consumer_seek_redeliver_last_id_and_unsubscribe(
    shared_server, unique_topic: str
) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        async with AsyncClient(shared_server.address) as client:
            await client.create_topic(unique_topic)
            producer = await client.create_producer(unique_topic)
            ids = [await producer.send(b"x", partition_key=f"k{i}") for i in range(3)]
            consumer = await client.subscribe(
                unique_topic, "s", initial_position=InitialPosition.Earliest
            )
            assert consumer.is_connected() and consumer.consumer_name()
            assert await consumer.get_last_message_id() == ids[-1]
            assert (await consumer.receive(timeout_millis=5000)).message_id() == ids[0]
            consumer.redeliver_unacknowledged_messages()  # ids[0] was never acknowledged
            assert (await consumer.receive(timeout_millis=5000)).message_id() == ids[0]
            await consumer.acknowledge_cumulative(ids[2])
            await consumer.seek(ids[1])  # inclusive, as ResetCursor by id
            assert (await consumer.receive(timeout_millis=5000)).message_id() == ids[1]
            await consumer.seek(MessageId.earliest)
            assert (await consumer.receive(timeout_millis=5000)).message_id() == ids[0]
            await consumer.unsubscribe()
            assert not consumer.is_connected()

    run(scenario())
    with Client(shared_server.address) as sync:
        assert "s" not in [s.name for s in sync.list_subscriptions(unique_topic)]


def test_async_client_takes_pulsar_clients_client_parameters(shared_server) -> None:  # type: ignore[no-untyped-def]
    """pulsar-client's asyncio Client takes the sync Client's parameters: so does
    AsyncClient, in the same order with the same defaults, read the same way."""
    sync = inspect.signature(Client.__init__).parameters
    aio = inspect.signature(AsyncClient.__init__).parameters
    assert [(p.name, p.default) for p in aio.values()] == [
        (p.name, p.default) for p in sync.values()
    ]

    async def scenario() -> None:
        url = f"compactlog://{shared_server.address}"
        async with AsyncClient(service_url=url, operation_timeout_seconds=5) as client:
            assert (client.address, client.timeout) == (shared_server.address, 5)
            with pytest.raises(TopicNotFound):
                await client.get_topic("no-such-topic-here")
        with pytest.raises(InvalidArgument, match="io_threads"):
            AsyncClient(shared_server.address, io_threads=4)
        with pytest.raises(InvalidArgument, match="timeout"):
            AsyncClient(shared_server.address, operation_timeout_seconds=0)

    run(scenario())


def test_async_reader_seeks_to_an_id_an_end_and_a_time(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    """As the sync reader's ``seek`` (ReaderTest's seeks): an id read inclusive as the
    reader was made, earliest again, or the first message at or after a time."""

    async def scenario() -> None:
        async with AsyncClient(shared_server.address) as client:
            await client.create_topic(unique_topic)
            producer = await client.create_producer(unique_topic)
            ids = [await producer.send(b"a%d" % i) for i in range(3)]
            cut = int(time.time() * 1000) + 1
            await asyncio.sleep(0.01)
            await producer.send(b"late")
            reader = await client.create_reader(unique_topic, MessageId.earliest)
            assert (await reader.read_next(10_000)).data() == b"a0"
            await reader.seek(ids[1])
            assert (await reader.read_next(10_000)).data() == b"a2"  # not inclusive
            await reader.seek(MessageId.earliest)
            assert (await reader.read_next(10_000)).data() == b"a0"
            await reader.seek(cut)
            assert await reader.has_message_available()
            assert (await reader.read_next(10_000)).data() == b"late"
            with pytest.raises(Timeout):
                await reader.read_next(200)
            await reader.seek(int(time.time() * 1000) + 1)  # past the last message
            assert not await reader.has_message_available()
            await producer.send(b"later")
            assert await reader.has_message_available()
            assert (await reader.read_next(10_000)).data() == b"later"
            await reader.close()

    run(scenario())


def test_closing_the_async_client_closes_what_it_made(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    """As pulsar-client's close: a producer's pending sends are stored first."""
    results: list[Any] = []

    async def scenario() -> None:
        client = AsyncClient(shared_server.address)
        await client.create_topic(unique_topic)
        producer = await client.create_producer(
            unique_topic, batching_enabled=True, batching_max_publish_delay_ms=60_000
        )
        for i in range(500):  # held by the minute's delay: only a flush sends them
            producer.send_async(b"v%d" % i, lambda res, mid: results.append(res))
        consumer = await client.subscribe(
            unique_topic, "s", initial_position=InitialPosition.Earliest
        )
        reader = await client.create_reader(unique_topic, MessageId.earliest)
        await client.close()
        assert len(results) == 500 and all(r == Result.Ok for r in results)
        with pytest.raises(AlreadyClosed):
            await producer.send(b"late")
        with pytest.raises(AlreadyClosed):
            await consumer.receive(timeout_millis=10)
        with pytest.raises(AlreadyClosed):
            await reader.read_next(timeout_millis=10)

    run(scenario())
    with Client(shared_server.address) as sync:
        reader = sync.create_reader(unique_topic, MessageId.earliest)
        got = [reader.read_next(timeout_millis=5000).data() for _ in range(500)]
        assert got == [b"v%d" % i for i in range(500)]
        assert not reader.has_message_available()
