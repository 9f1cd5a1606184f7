"""``compactlog.client.aio``: the same calls as coroutines, against a real server process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

import grpc
import pytest

from compactlog.client import (
    Client,
    ConsumerType,
    InitialPosition,
    MessageId,
    Timeout,
    TopicNotFound,
)
from compactlog.client.aio import AsyncClient


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
            inclusive = await client.create_reader(unique_topic, ids[0], True, True)
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
