"""Log reads on a partitioned topic whose partitions spread over the shards
(``shards.placement = "partition"``): a real ``serve --shards 2``, the front asking
every slot holding a partition and merging (``server/front/spread/log.py``)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from compactlog.client import Client, InitialPosition
from compactlog.client.aio import AsyncClient
from compactlog.partitioner import partition_name
from compactlog.storage.slots import SLOT_COUNT, Placement, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.conftest import ServerProcess

NAME, PARTITIONS, EACH = "spread", 4, 5
PLACEMENT = '"shards.placement" = "partition"\n'


class Api:
    """The front's stubs, on the partitioned topic ``name`` of one test."""

    def __init__(self, address: str, name: str = "") -> None:
        self.address = address
        self.name = name
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def publish(self, partition: int, *records: pb.Record) -> None:
        request = pb.PublishRequest(topic=partition_name(self.name, partition), records=records)
        self.log.Publish(request, timeout=30)

    def read(self, **fields: object) -> list[pb.Message]:
        request = pb.ReadRequest(topic=self.name, **fields)  # type: ignore[arg-type]
        return [m for r in self.log.Read(request, timeout=30) for m in r.messages]


def values(i: int) -> list[bytes]:
    return [b"p%d-%d" % (i, k) for k in range(EACH)]


@pytest.fixture(scope="module")
def spread_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One 2-shard server with partition placement for the module (each test has a
    topic of its own)."""
    tmp = tmp_path_factory.mktemp("spread")
    config = tmp / "config.toml"
    config.write_text(PLACEMENT)
    srv = ServerProcess(tmp / "data", config, ["--shards", "2"]).start()
    yield srv
    srv.stop()


def spread_name(test: str) -> str:
    """A topic name for ``test`` whose PARTITIONS partitions lie in as many slots."""
    for n in itertools.count():
        name = f"{NAME}-{test}-{n}"
        parts = [partition_name(name, i) for i in range(PARTITIONS)]
        if len({slot_of(p, SLOT_COUNT, Placement.PARTITION) for p in parts}) == PARTITIONS:
            return name
    raise AssertionError("unreachable")


@pytest.fixture
def api(spread_server: ServerProcess, request: pytest.FixtureRequest) -> Iterator[Api]:
    """This test's topic on the module's server: 4 partitions in 4 slots, each holding
    EACH messages published through the front to its partition i."""
    client = Api(spread_server.address, spread_name(request.node.name))
    create = pb.CreateTopicRequest(name=client.name, partitions=PARTITIONS)
    client.admin.CreateTopic(create, timeout=30)
    for i in range(PARTITIONS):
        client.publish(i, *(pb.Record(key=b"k%d" % i, value=v) for v in values(i)))
    yield client
    client.channel.close()


def by_partition(messages: list[pb.Message]) -> dict[int, list[bytes]]:
    found: dict[int, list[bytes]] = {}
    for m in messages:
        found.setdefault(m.id.partition, []).append(m.value)
    return found


def test_read_covers_every_partition_in_order_and_shares_max_messages(api: Api) -> None:
    everything = api.read()
    assert by_partition(everything) == {i: values(i) for i in range(PARTITIONS)}
    limited = api.read(max_messages=7)
    assert len(limited) == 7
    for i, got in by_partition(limited).items():
        assert got == values(i)[: len(got)]
    # A message_id start names its partition: read from there, the others from the start.
    start = [m.id for m in everything if m.id.partition == 2][3]
    since = by_partition(api.read(message_id=start))
    assert since == {i: values(i)[3:] if i == 2 else values(i) for i in range(PARTITIONS)}
    # The partitions are in both shards, and a slot reached directly does not answer NAME.
    request = pb.GetPartitionMapRequest(topic=api.name)
    entries = api.admin.GetPartitionMap(request, timeout=30).partitions
    assert len({e.address for e in entries}) == PARTITIONS
    direct = Api(entries[0].address, api.name)
    with pytest.raises(grpc.RpcError) as refused:
        direct.read()
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    direct.channel.close()
    # A slot's refusal comes back through the front as the slot gave it.
    with pytest.raises(grpc.RpcError) as invalid:
        api.read(as_of=pb.MessageId(entry_id=1))
    assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    last = api.log.GetLastMessageId(pb.GetLastMessageIdRequest(topic=api.name), timeout=30)
    assert [p.partition for p in last.partitions] == list(range(PARTITIONS))
    assert all(p.entry_id == EACH - 1 for p in last.partitions)
    assert last.id in last.partitions


def test_follow_sees_new_publishes_on_every_shard(api: Api) -> None:
    got: list[pb.Message] = []
    request = pb.ReadRequest(topic=api.name, follow=True, max_messages=PARTITIONS * EACH + 2)

    def follow() -> None:
        for response in api.log.Read(request, timeout=30):
            got.extend(response.messages)

    reader = threading.Thread(target=follow)
    reader.start()
    api.publish(1, pb.Record(value=b"new-1"))
    api.publish(3, pb.Record(value=b"new-3"))
    reader.join(30)
    assert not reader.is_alive()
    merged = by_partition(got)
    assert merged[1] == [*values(1), b"new-1"] and merged[3] == [*values(3), b"new-3"]


def test_consume_and_acknowledge_deliver_every_message_once(api: Api) -> None:
    seen: list[tuple[int, bytes]] = []
    for _ in range(40):
        request = pb.ConsumeRequest(topic=api.name, subscription="s", max_messages=6, wait_ms=200)
        answer = api.log.Consume(request, timeout=30)
        if not answer.messages and len(seen) == PARTITIONS * EACH:
            break
        for m in answer.messages:
            seen.append((m.id.partition, m.value))
            ack = pb.AcknowledgeRequest(topic=api.name, subscription="s", id=m.id)
            api.log.Acknowledge(ack, timeout=30)
    assert sorted(seen) == sorted((i, v) for i in range(PARTITIONS) for v in values(i))


def test_an_acknowledge_list_goes_to_each_slot_its_ids_name(api: Api) -> None:
    """AcknowledgeList on a spread NAME: the ids split by the slot of their partition; a
    slot refusing an id it never gave stores none of its part."""

    def consume(count: int) -> list[pb.MessageId]:
        request = pb.ConsumeRequest(topic=api.name, subscription="s", max_messages=count)
        return [m.id for m in api.log.Consume(request, timeout=30).messages]

    def ack(ids: list[pb.MessageId]) -> None:
        request = pb.AcknowledgeListRequest(topic=api.name, subscription="s", ids=ids)
        api.log.AcknowledgeList(request, timeout=30)

    def backlog() -> int:
        listed = api.admin.ListSubscriptions(pb.ListSubscriptionsRequest(topic=api.name))
        return next(s.backlog for s in listed.subscriptions if s.name == "s")

    first = consume(2 * PARTITIONS)  # two of each partition
    assert sorted(i.partition for i in first) == sorted(list(range(PARTITIONS)) * 2)
    ack(first)
    assert backlog() == PARTITIONS * (EACH - 2)
    given = consume(PARTITIONS)  # entry 2 of each
    later = pb.MessageId(ledger_id=given[0].ledger_id, entry_id=3, partition=given[0].partition)
    with pytest.raises(grpc.RpcError) as refused:
        ack([given[0], later])
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert backlog() == PARTITIONS * (EACH - 2)
    ack(given)
    assert backlog() == PARTITIONS * (EACH - 3)


def every_message() -> list[tuple[int, bytes]]:
    return sorted((i, v) for i in range(PARTITIONS) for v in values(i))


def received(messages: list[Any]) -> list[tuple[int, bytes]]:
    return sorted((m.id.partition(), bytes(m.value)) for m in messages)


def mark_each_partition(api: Api, tag: bytes) -> list[tuple[int, bytes]]:
    """One more message on each partition: a consumer of a subscription whose messages
    were all acknowledged gets exactly these next, none again."""
    for i in range(PARTITIONS):
        api.publish(i, pb.Record(value=tag + b"%d" % i))
    return [(i, tag + b"%d" % i) for i in range(PARTITIONS)]


def sync_round(api: Api, count: int) -> tuple[list[Any], list[Any], bool]:
    """Subscription ``sync``: ``count`` messages (all there are) received and acknowledged;
    then, after a mark on each partition, what a new consumer of it receives first;
    whether it streamed."""
    earliest = InitialPosition.Earliest
    with Client(api.address) as client:
        consumer: Any = client.subscribe(api.name, "sync", initial_position=earliest)
        got = [consumer.receive(30_000) for _ in range(count)]
        for m in got:
            consumer.acknowledge(m)
        streamed = consumer._streaming
        consumer.close()
        marks = mark_each_partition(api, b"sync-after-")
        again: Any = client.subscribe(api.name, "sync", initial_position=earliest)
        after = [again.receive(30_000) for _ in marks]
        again.close()
    return got, after, streamed


async def aio_round(api: Api, count: int) -> tuple[list[Any], list[Any], bool]:
    """``sync_round`` with the asyncio consumer, on subscription ``aio``."""
    earliest = InitialPosition.Earliest
    async with AsyncClient(api.address) as client:
        consumer: Any = await client.subscribe(api.name, "aio", initial_position=earliest)
        got = [await consumer.receive(30_000) for _ in range(count)]
        for m in got:
            await consumer.acknowledge(m)
        streamed = consumer._streaming
        await consumer.close()
        marks = mark_each_partition(api, b"aio-after-")
        again: Any = await client.subscribe(api.name, "aio", initial_position=earliest)
        after = [await again.receive(30_000) for _ in marks]
        await again.close()
    return got, after, streamed


def test_consumers_of_a_spread_name_fall_back_to_consume(api: Api) -> None:
    """The front has no ConsumeStream for a NAME spread over shards (UNIMPLEMENTED), so
    the sync and the asyncio consumer ask by Consume: each gets every partition's
    messages once and acknowledges them, and a new consumer of its subscription gets
    only what was published since (nothing lost, nothing twice)."""
    published = every_message()
    for name in ("sync", "aio"):
        count = len(published)
        got, after, streamed = (
            sync_round(api, count) if name == "sync" else asyncio.run(aio_round(api, count))
        )
        assert not streamed, f"{name}: the front answered a stream on a spread NAME"
        assert received(got) == published, name
        marks = [(i, b"%s-after-%d" % (name.encode(), i)) for i in range(PARTITIONS)]
        assert received(after) == marks, name
        published = sorted(published + marks)


def test_key_history_merges_the_partitions_by_publish_time(api: Api) -> None:
    for i in (2, 0, 3):
        time.sleep(0.005)  # publish times (ms) apart: the merge's order is theirs
        api.publish(i, pb.Record(key=b"same", value=b"in-%d" % i))
    request = pb.GetKeyHistoryRequest(topic=api.name, key=b"same")
    history = api.log.GetKeyHistory(request, timeout=30)
    assert [m.value for m in history.messages] == [b"in-2", b"in-0", b"in-3"]
    assert [m.id.partition for m in history.messages] == [2, 0, 3]


def test_a_consume_failing_on_one_slot_gives_the_others_messages_back(api: Api) -> None:
    """Consumer ``a`` holds the EXCLUSIVE subscription on partition 2 alone, so ``b``'s
    Consume of NAME fails there (CONSUMER_BUSY) while the other slots deliver to ``b``:
    those messages are given back, and once ``a`` leaves, ``b`` receives every message
    (before, the ones of the failed Consume counted as delivered and never came)."""
    sub = {"subscription": "x", "subscription_type": pb.SubscriptionType.EXCLUSIVE}
    start = pb.StartPosition.EARLIEST
    held = pb.ConsumeRequest(
        topic=partition_name(api.name, 2),
        consumer_name="a",
        max_messages=1,
        initial_position=start,
        **sub,
    )
    assert len(api.log.Consume(held, timeout=30).messages) == 1
    mine = pb.ConsumeRequest(
        topic=api.name, consumer_name="b", max_messages=100, initial_position=start, **sub
    )
    with pytest.raises(grpc.RpcError) as busy:
        api.log.Consume(mine, timeout=30)
    assert busy.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    leave = pb.CloseConsumerRequest(
        topic=partition_name(api.name, 2), subscription="x", consumer_name="a"
    )
    api.log.CloseConsumer(leave, timeout=30)
    seen: list[tuple[int, bytes]] = []
    while answer := api.log.Consume(mine, timeout=30).messages:
        seen.extend((m.id.partition, m.value) for m in answer)
    assert sorted(seen) == sorted((i, v) for i in range(PARTITIONS) for v in values(i))
