"""``serve --kafka-listen --shards 2`` on a data dir of partition placement
(``shards.placement = "partition"``): one topic's partitions live on both shards, each
shard the Kafka broker leading the partitions it stores, and topic changes go through
the front as gRPC's do (docs/kafka.md, "With --shards N"). Real clients: confluent-kafka
Producer, group Consumer and AdminClient, kcat; one server for the module."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from compactlog.partitioner import partition_for_key, partition_name
from compactlog.storage.slots import SLOT_COUNT, Placement, shard_of, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import KAFKA_ARGS, Grpc
from tests.kafka.test_groups_confluent import create, subscription
from tests.kafka.test_security import consume_group
from tests.kafka.test_wire import connect, decode, frame, receive

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic  # noqa: E402
from kio.schema.metadata.v12.response import MetadataResponse  # noqa: E402
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest  # noqa: E402
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse  # noqa: E402

SHARDS = 2
KCAT = shutil.which("kcat")


def owner(topic: str, partition: int) -> int:
    """The broker that must lead partition ``partition`` of ``topic``: its slot's shard."""
    slot = slot_of(partition_name(topic, partition), SLOT_COUNT, Placement.PARTITION)
    return shard_of(slot, SHARDS)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base: Path = tmp_path_factory.mktemp("kafka-spread")
    config = base / "config.toml"
    config.write_text('"shards.placement" = "partition"\n')
    srv = ServerProcess(base / "data", config, ("--shards", str(SHARDS), *KAFKA_ARGS)).start()
    yield srv
    assert srv.stop() == 0


def metadata(address: str, topics: list[str] | None = None) -> Any:
    wanted = None
    if topics is not None:
        wanted = tuple(MetadataRequestTopic(topic_id=None, name=name) for name in topics)
    request = MetadataRequest(
        topics=wanted,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    with connect(address) as sock:
        sock.sendall(frame(request, 3))
        return decode(MetadataResponse, receive(sock), 3)


def brokers(srv: ServerProcess) -> dict[int, str]:
    return {b.node_id: f"{b.host}:{b.port}" for b in metadata(srv.kafka_address).brokers}


def leaders(address: str, name: str) -> list[int]:
    (topic,) = [t for t in metadata(address).topics if t.name == name]
    return [p.leader_id for p in topic.partitions]


def info(side: Grpc, name: str) -> pb.TopicInfo:
    return side.admin.GetTopic(pb.GetTopicRequest(name=name), timeout=30)


def test_every_broker_and_kcat_name_each_partition_s_own_broker(spread: ServerProcess) -> None:
    name = fresh("map")
    create(spread.kafka_address, name, 4)
    expected = [owner(name, i) for i in range(4)]
    assert set(expected) == {0, 1}  # four consecutive slots: both shards
    for address in brokers(spread).values():
        topics = [t.name for t in metadata(address).topics]
        assert topics.count(name) == 1  # listed once, though two brokers keep its record
        assert leaders(address, name) == expected
    if KCAT is not None:
        done = subprocess.run(
            [KCAT, "-b", spread.kafka_address, "-L"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.count(f'topic "{name}" with 4 partitions') == 1
        for i, node in enumerate(expected):
            assert f"partition {i}, leader {node}," in done.stdout
    side = Grpc(spread.address)
    try:
        assert info(side, name).partitions == 4
        request = pb.GetPartitionMapRequest(topic=name)
        entries = side.admin.GetPartitionMap(request, timeout=30).partitions
        assert len({e.address for e in entries}) == 4  # four slots
    finally:
        side.channel.close()


def test_admin_changes_go_through_the_front_as_grpc_s(spread: ServerProcess) -> None:
    """CreatePartitions places the new partitions as AddPartitions does, a config change
    reaches every partition, a topic named like one of its partitions is refused as over
    gRPC, and DeleteTopics deletes the partitions of both shards."""
    address, name = spread.kafka_address, fresh("adm")
    admin = AdminClient({"bootstrap.servers": address})
    create(address, name, 4)
    admin.create_partitions([NewPartitions(name, 6)])[name].result(30)
    side = Grpc(spread.address)
    try:
        assert info(side, name).partitions == 6
        assert leaders(address, name) == [owner(name, i) for i in range(6)]
        producer = ck.Producer({"bootstrap.servers": address, "acks": -1})
        producer.produce(name, key=b"k", value=b"five", partition=5)
        assert producer.flush(30) == 0
        read = side.read(partition_name(name, 5))
        assert [(m.id.partition, m.value) for m in read] == [(5, b"five")]

        change = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[change])
        admin.incremental_alter_configs([resource])[resource].result(30)
        for i in range(6):
            assert info(side, partition_name(name, i)).config["retention.ms"] == "3600000"
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)])
        assert next(iter(described.values())).result(30)["retention.ms"].value == "3600000"

        # name-partition-7's slot holds none of the six: only the front knows to refuse it
        taken = f"{name}-partition-7"
        with pytest.raises(ck.KafkaException) as raised:
            admin.create_topics([NewTopic(taken, 1)])[taken].result(30)
        assert raised.value.args[0].code() == ck.KafkaError.TOPIC_EXCEPTION

        admin.delete_topics([name])[name].result(30)
        with pytest.raises(grpc.RpcError) as gone:
            info(side, name)
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        listing = side.admin.ListTopics(pb.ListTopicsRequest(prefix=name), timeout=30)
        assert not listing.topics
    finally:
        side.channel.close()
    (topic,) = [t for t in metadata(address, [name]).topics if t.name == name]
    assert topic.error_code == ErrorCode.unknown_topic_or_partition


def produce_keyed(address: str, name: str, values: range) -> list[tuple[int, int, bytes, bytes]]:
    """``(partition, offset, key, value)`` of each record acknowledged (acks=-1)."""
    acked: list[tuple[int, int, bytes, bytes]] = []

    def delivered(err: Any, m: Any) -> None:
        assert err is None, err
        acked.append((m.partition(), m.offset(), m.key(), m.value()))

    producer = ck.Producer(
        {"bootstrap.servers": address, "acks": -1, "partitioner": "murmur2_random"}
    )
    for i in values:
        producer.produce(name, key=b"k%d" % (i % 50), value=b"v%d" % i, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert len(acked) == len(values)
    return acked


def committed_everywhere(address: str, group: str) -> dict[tuple[str, int], int]:
    """OffsetFetch of every partition (a null list) at the group's coordinator."""
    coordinator = shard_of(slot_of(group, SLOT_COUNT, Placement.PARTITION), SHARDS)
    request = OffsetFetchRequest(group_id=group, topics=None, require_stable=False)
    with connect(address_of(address, coordinator)) as sock:
        sock.sendall(frame(request, 7))
        answer = decode(OffsetFetchResponse, receive(sock), 7)
    assert answer.error_code == ErrorCode.none
    return {
        (t.name, p.partition_index): p.committed_offset
        for t in answer.topics
        for p in t.partitions
        if p.error_code == ErrorCode.none
    }


def address_of(bootstrap: str, node: int) -> str:
    found = {b.node_id: f"{b.host}:{b.port}" for b in metadata(bootstrap).brokers}
    return found[node]


def test_keyed_records_land_on_their_owners_and_a_group_resumes(spread: ServerProcess) -> None:
    """Each partition's records are in its owning shard's store, at the offsets the
    producer was given; a group consumes all with commits (each the subscription of its
    partition, on its shard), and a consumer of the group started again resumes from them."""
    name, group = fresh("keyed"), fresh("g")
    create(spread.kafka_address, name, 4)
    acked = produce_keyed(spread.kafka_address, name, range(200))
    assert all(p == partition_for_key(key, 4) for p, _o, key, _v in acked)
    by_kafka = {(p, o): (k, v) for p, o, k, v in acked}
    assert {p for p, _o in by_kafka} == {0, 1, 2, 3}
    side = Grpc(spread.address)
    try:
        request = pb.GetPartitionMapRequest(topic=name)
        owners = side.admin.GetPartitionMap(request, timeout=30).partitions
        stored = {}
        for entry in owners:  # read straight from the slot that holds the partition
            direct = Grpc(entry.address)
            for m in direct.read(entry.topic):
                stored[(m.id.partition, m.id.entry_id)] = (m.key, m.value)
            direct.channel.close()
        assert stored == by_kafka

        seen = consume_group({"bootstrap.servers": spread.kafka_address}, name, group, 200)
        got = {(m.partition(), m.offset()): (m.key(), m.value()) for m in seen}
        assert got == by_kafka
        for i in range(4):
            assert subscription(side, partition_name(name, i), group).backlog == 0
    finally:
        side.channel.close()
    counts = {i: sum(1 for p, _o in by_kafka if p == i) for i in range(4)}
    commits = committed_everywhere(spread.kafka_address, group)
    assert {i: commits[(name, i)] for i in range(4)} == counts

    more = produce_keyed(spread.kafka_address, name, range(200, 240))
    resumed = consume_group({"bootstrap.servers": spread.kafka_address}, name, group, 40)
    assert sorted((m.partition(), m.offset()) for m in resumed) == sorted(
        (p, o) for p, o, _k, _v in more
    )
