"""The client's producer on a partitioned topic routes as Kafka's default partitioner."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from compactlog.client import Client, MessageId, Result, _publish_py, publish_wire
from compactlog.client.aio import AsyncClient
from compactlog.partitioner import partition_for_key
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.conftest import ServerProcess


def test_producer_routes_by_murmur2(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    with Client(shared_server.address) as client:
        info = client.create_topic(unique_topic, partitions=4)
        assert info.partitions == 4
        producer = client.producer(unique_topic)
        keys = [b"user-%d" % i for i in range(20)]
        for key in keys:
            producer.send(key, b"x")
        producer.send_batch([(k, b"y") for k in keys])  # spans partitions: the server splits
        producer.send(None, b"keyless")
        for p in range(4):
            read = list(client.reader(f"{unique_topic}-partition-{p}"))
            got = [m.key for m in read if m.value != b"keyless"]
            want = [k for k in keys if partition_for_key(k, 4) == p]
            assert got == want + want
        assert client.add_partitions(unique_topic, 6).partitions == 6
    # The ids of messages read through a partition name carry its index (raw wire).
    with grpc.insecure_channel(shared_server.address) as channel:
        req = pb.ReadRequest(topic=f"{unique_topic}-partition-2")
        read = pb_grpc.LogStub(channel).Read(req)
        assert {m.id.partition for r in read for m in r.messages} == {2}


@pytest.mark.parametrize("twin", ["compiled", "pure"])
def test_batched_sends_to_a_partitioned_topic_get_each_partitions_id(
    shared_server: ServerProcess, unique_topic: str, twin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reply whose ids do not run (keys spread over partitions) gives each send the id
    its record was stored at, partition included, from the sync and asyncio producers."""
    if twin == "pure":
        monkeypatch.setattr(publish_wire, "Pending", _publish_py.Pending)
        monkeypatch.setattr(publish_wire, "call_back_ids", _publish_py.call_back_ids)
    keys = [f"user-{i}" for i in range(40)]
    got: list[tuple[object, MessageId | None]] = []
    with Client(shared_server.address) as client:
        client.create_topic(unique_topic, partitions=3)
        producer = client.create_producer(unique_topic)
        for key in keys:
            producer.send_async(b"s-" + key.encode(), lambda r, m: got.append((r, m)), None, key)
        producer.flush()

        async def aio_sends() -> list[MessageId]:
            async with AsyncClient(shared_server.address) as aio:
                aio_producer = await aio.create_producer(unique_topic)
                sends = [aio_producer.send(b"a-" + k.encode(), partition_key=k) for k in keys]
                ids = await asyncio.gather(*sends)
                await aio_producer.close()
                return ids

        ids = [m for _, m in got] + asyncio.run(aio_sends())
        assert [r for r, _ in got] == [Result.Ok] * len(keys)
        stored = {}
        for p in range(3):
            for m in client.reader(f"{unique_topic}-partition-{p}"):
                stored[m.data()] = m.message_id()
        values = [b"%s-%s" % (side, k.encode()) for side in (b"s", b"a") for k in keys]
        assert ids == [stored[v] for v in values]
        assert [m.partition() for m in ids] == [partition_for_key(k.encode(), 3) for k in keys] * 2
        assert len({m.partition() for m in ids}) == 3
