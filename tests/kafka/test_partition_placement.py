"""``serve --kafka-listen --shards 2`` on a data dir of partition placement
(``shards.placement = "partition"``): one topic's partitions live on both shards, each
shard the Kafka broker leading the partitions it stores, and topic changes go through
the front as gRPC's do (docs/kafka.md, "With --shards N"). Real clients: confluent-kafka
Producer, group Consumer and AdminClient, kcat. One server for the module, over SASL_SSL
with tokens: a broker's call to the front carries no token, so the roles are checked by
the broker a client reached."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from compactlog.channels import ChannelSecurity, open_channel
from compactlog.partitioner import partition_for_key, partition_name
from compactlog.storage.slots import SLOT_COUNT, Placement, shard_of, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess, TlsFiles, write_tokens_file
from tests.kafka.conftest import KAFKA_ARGS, Grpc
from tests.kafka.test_groups_confluent import subscription
from tests.kafka.test_security import consume_group

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import ConsumerGroupTopicPartitions  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

SHARDS = 2
KCAT = shutil.which("kcat")
PRINCIPALS = {"ops": ("spread-admin-51c2", "admin"), "viewer": ("spread-reader-0be7", "reader")}
Config = Callable[..., dict[str, Any]]
Side = Callable[[str], Grpc]


def owner(topic: str, partition: int) -> int:
    """The broker that must lead partition ``partition`` of ``topic``: its slot's shard."""
    slot = slot_of(partition_name(topic, partition), SLOT_COUNT, Placement.PARTITION)
    return shard_of(slot, SHARDS)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def spread(
    tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles
) -> Iterator[ServerProcess]:
    base: Path = tmp_path_factory.mktemp("kafka-spread")
    config = base / "config.toml"
    config.write_text('"shards.placement" = "partition"\n')
    tokens = write_tokens_file(base / "tokens.toml", PRINCIPALS)
    args = ["--shards", str(SHARDS), *KAFKA_ARGS, "--auth-tokens", str(tokens)]
    args += ["--tls-cert", str(tls_files.cert), "--tls-key", str(tls_files.key)]
    srv = ServerProcess(base / "data", config, args).start()
    yield srv
    assert srv.stop() == 0


@pytest.fixture(scope="module")
def kafka(spread: ServerProcess, tls_files: TlsFiles) -> Config:
    """librdkafka's SASL_SSL settings for a principal (the admin unless named)."""

    def config(who: str = "ops", bootstrap: str | None = None) -> dict[str, Any]:
        return {
            "bootstrap.servers": bootstrap or spread.kafka_address,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(tls_files.ca),
            "sasl.mechanism": "PLAIN",
            "sasl.username": who,
            "sasl.password": PRINCIPALS[who][0],
        }

    return config


@pytest.fixture(scope="module")
def side(spread: ServerProcess, tls_files: TlsFiles) -> Iterator[Side]:
    """gRPC at an address of the server (the front's, a slot's) with the admin's token."""
    opened: list[Grpc] = []

    def at(address: str) -> Grpc:
        security = ChannelSecurity.of(PRINCIPALS["ops"][0], tls_files.ca)
        opened.append(Grpc(address, open_channel(address, security)))
        return opened[-1]

    yield at
    for made in opened:
        made.channel.close()


def create(config: dict[str, Any], name: str, partitions: int) -> None:
    new = NewTopic(name, partitions, 1, config={"cleanup.policy": "compact"})
    admin = AdminClient(config)  # kept: its futures need the handle alive
    admin.create_topics([new])[name].result(30)


def leaders(config: dict[str, Any], name: str) -> list[int]:
    admin = AdminClient(config)
    topic = admin.list_topics(name, timeout=30).topics[name]
    assert topic.error is None, topic.error
    return [topic.partitions[i].leader for i in sorted(topic.partitions)]


def info(front: Grpc, name: str) -> pb.TopicInfo:
    return front.admin.GetTopic(pb.GetTopicRequest(name=name), timeout=30)


def kcat_list(kafka: Config) -> str:
    """``kcat -L`` of every topic, logged in as the admin."""
    assert KCAT is not None
    config = kafka()
    args = [KCAT, "-b", config["bootstrap.servers"], "-L"]
    for key in ("security.protocol", "ssl.ca.location", "sasl.username", "sasl.password"):
        args += ["-X", f"{key}={config[key]}"]
    args += ["-X", "sasl.mechanisms=PLAIN"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_broker_and_kcat_name_each_partition_s_own_broker(
    spread: ServerProcess, kafka: Config, side: Side
) -> None:
    name = fresh("map")
    create(kafka(), name, 4)
    expected = [owner(name, i) for i in range(4)]
    assert set(expected) == {0, 1}  # four consecutive slots: both shards
    brokers = AdminClient(kafka()).list_topics(timeout=30).brokers
    assert sorted(brokers) == [0, 1]
    for broker in brokers.values():  # the bootstrap and the other broker alike
        assert leaders(kafka(bootstrap=f"{broker.host}:{broker.port}"), name) == expected
    if KCAT is not None:  # listed once, though both brokers keep its record
        listing = kcat_list(kafka)
        assert listing.count(f'topic "{name}" with 4 partitions') == 1
        for i, node in enumerate(expected):
            assert f"partition {i}, leader {node}," in listing
    front = side(spread.address)
    assert info(front, name).partitions == 4
    request = pb.GetPartitionMapRequest(topic=name)
    entries = front.admin.GetPartitionMap(request, timeout=30).partitions
    assert len({e.address for e in entries}) == 4  # four slots


def test_admin_changes_go_through_the_front_as_grpc_s(
    spread: ServerProcess, kafka: Config, side: Side
) -> None:
    """CreatePartitions places the new partitions as AddPartitions does, a config change
    reaches every partition, a topic named like one of its partitions is refused as over
    gRPC, and DeleteTopics deletes the partitions of both shards; a reader may do none."""
    name, front = fresh("adm"), side(spread.address)
    admin = AdminClient(kafka())
    create(kafka(), name, 4)
    reader = AdminClient(kafka("viewer"))
    for refused in (
        reader.create_partitions([NewPartitions(name, 6)])[name],
        reader.delete_topics([name])[name],
    ):
        with pytest.raises(ck.KafkaException) as raised:
            refused.result(30)
        assert raised.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin.create_partitions([NewPartitions(name, 6)])[name].result(30)
    assert info(front, name).partitions == 6
    assert leaders(kafka(), name) == [owner(name, i) for i in range(6)]
    producer = ck.Producer({**kafka(), "acks": -1})
    producer.produce(name, key=b"k", value=b"five", partition=5)
    assert producer.flush(30) == 0
    read = front.read(partition_name(name, 5))
    assert [(m.id.partition, m.value) for m in read] == [(5, b"five")]

    change = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[change])
    admin.incremental_alter_configs([resource])[resource].result(30)
    for i in range(6):
        assert info(front, partition_name(name, i)).config["retention.ms"] == "3600000"
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)])
    assert next(iter(described.values())).result(30)["retention.ms"].value == "3600000"

    # name-partition-7's slot holds none of the six: only the front knows to refuse it
    taken = f"{name}-partition-7"
    with pytest.raises(ck.KafkaException) as raised:
        admin.create_topics([NewTopic(taken, 1)])[taken].result(30)
    assert raised.value.args[0].code() == ck.KafkaError.TOPIC_EXCEPTION

    admin.delete_topics([name])[name].result(30)
    with pytest.raises(grpc.RpcError) as gone:
        info(front, name)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    listing = front.admin.ListTopics(pb.ListTopicsRequest(prefix=name), timeout=30)
    assert not listing.topics
    topic = admin.list_topics(name, timeout=30).topics[name]
    assert topic.error is not None and topic.error.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART


def produce_keyed(
    config: dict[str, Any], name: str, values: range
) -> list[tuple[int, int, bytes, bytes]]:
    """``(partition, offset, key, value)`` of each record acknowledged (acks=-1)."""
    acked: list[tuple[int, int, bytes, bytes]] = []

    def delivered(err: Any, m: Any) -> None:
        assert err is None, err
        acked.append((m.partition(), m.offset(), m.key(), m.value()))

    producer = ck.Producer({**config, "acks": -1, "partitioner": "murmur2_random"})
    for i in values:
        producer.produce(name, key=b"k%d" % (i % 50), value=b"v%d" % i, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert len(acked) == len(values)
    return acked


def committed(config: dict[str, Any], group: str) -> dict[tuple[str, int], int]:
    """The group's offsets of every partition: an OffsetFetch naming none (a null list)."""
    admin = AdminClient(config)
    (future,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {(tp.topic, tp.partition): tp.offset for tp in future.result(30).topic_partitions}


def test_keyed_records_land_on_their_owners_and_a_group_resumes(
    spread: ServerProcess, kafka: Config, side: Side
) -> None:
    """Each partition's records are in its owning shard's store, at the offsets the
    producer was given; a group consumes all with commits (each the subscription of its
    partition, on its shard), and a consumer of the group started again resumes there."""
    name, group, front = fresh("keyed"), fresh("g"), side(spread.address)
    create(kafka(), name, 4)
    acked = produce_keyed(kafka(), name, range(200))
    assert all(p == partition_for_key(key, 4) for p, _o, key, _v in acked)
    by_kafka = {(p, o): (k, v) for p, o, k, v in acked}
    assert {p for p, _o in by_kafka} == {0, 1, 2, 3}
    request = pb.GetPartitionMapRequest(topic=name)
    stored = {}
    for entry in front.admin.GetPartitionMap(request, timeout=30).partitions:
        for m in side(entry.address).read(entry.topic):  # the slot holding the partition
            stored[(m.id.partition, m.id.entry_id)] = (m.key, m.value)
    assert stored == by_kafka

    seen = consume_group(kafka(), name, group, 200)
    assert {(m.partition(), m.offset()): (m.key(), m.value()) for m in seen} == by_kafka
    for i in range(4):
        assert subscription(front, partition_name(name, i), group).backlog == 0
    counts = {(name, i): sum(1 for p, _o in by_kafka if p == i) for i in range(4)}
    assert committed(kafka(), group) == counts

    more = produce_keyed(kafka(), name, range(200, 240))
    resumed = consume_group(kafka(), name, group, 40)
    assert sorted((m.partition(), m.offset()) for m in resumed) == sorted(
        (p, o) for p, o, _k, _v in more
    )
