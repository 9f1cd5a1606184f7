"""CreatePartitions and DeleteRecords through Kafka's admin clients against a real server
(confluent-kafka's AdminClient, kafka-python's KafkaAdminClient, aiokafka's
AIOKafkaAdminClient), each read back through gRPC: the same partition count, the same log
start offset, the same records."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import Grpc

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")
from confluent_kafka.admin import AdminClient, NewPartitions  # noqa: E402


def info(grpc_side: Grpc, name: str) -> pb.TopicInfo:
    return grpc_side.admin.GetTopic(pb.GetTopicRequest(name=name), timeout=30)


def publish(grpc_side: Grpc, topic: str, count: int) -> None:
    records = [pb.Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(count)]
    grpc_side.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)


def grow(admin: AdminClient, topic: str, count: int, **kw: Any) -> None:
    (future,) = admin.create_partitions([NewPartitions(topic, count)], **kw).values()
    future.result(30)


def kafka_code(raised: pytest.ExceptionInfo[Any]) -> int:
    code: int = raised.value.args[0].code()
    return code


@pytest.fixture
def admin(kafka_server: ServerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_server.kafka_address})


def test_create_partitions_is_add_partitions(
    admin: AdminClient, kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.admin.CreateTopic(
        pb.CreateTopicRequest(
            name=topic, kind=pb.SEGMENTED, partitions=2, config={"cleanup.policy": "compact"}
        ),
        timeout=30,
    )
    grow(admin, topic, 5, validate_only=True)
    assert info(grpc_side, topic).partitions == 2  # checked, nothing made
    with pytest.raises(grpc.RpcError):
        info(grpc_side, f"{topic}-partition-2")
    grow(admin, topic, 5)
    assert info(grpc_side, topic).partitions == 5
    for part in range(2, 5):  # new partitions take partition 0's config
        assert info(grpc_side, f"{topic}-partition-{part}").config["cleanup.policy"] == "compact"
    assert sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions) == [0, 1, 2, 3, 4]

    producer = ck.Producer({"bootstrap.servers": kafka_server.kafka_address, "acks": "all"})
    producer.produce(topic, key=b"x", value=b"to four", partition=4)
    assert producer.flush(30) == 0
    served = grpc_side.read(f"{topic}-partition-4")
    assert [(m.key, m.value) for m in served] == [(b"x", b"to four")]

    for count in (5, 3):  # the same count, or fewer: Kafka's INVALID_PARTITIONS
        with pytest.raises(ck.KafkaException) as raised:
            grow(admin, topic, count)
        assert kafka_code(raised) == ck.KafkaError.INVALID_PARTITIONS
    assert info(grpc_side, topic).partitions == 5


def test_create_partitions_refusals(admin: AdminClient, grpc_side: Grpc, topic: str) -> None:
    grpc_side.create(topic)  # not partitioned: its one partition is the topic itself
    with pytest.raises(ck.KafkaException) as raised:
        grow(admin, topic, 3)
    assert kafka_code(raised) == ck.KafkaError.INVALID_PARTITIONS
    assert "not partitioned" in raised.value.args[0].str()
    grpc_side.create(topic + "-ledger", kind=pb.LEDGER, partitions=2)
    for name in (topic + "-ledger", topic + "-nowhere"):
        with pytest.raises(ck.KafkaException) as raised:
            grow(admin, name, 3)
        assert kafka_code(raised) == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
    assert info(grpc_side, topic + "-ledger").partitions == 2
    # the name of a partition to come is taken by a topic of its own, made before the
    # partitioned topic (of the same kind: never taken in as a partition): nothing is
    # made, validate_only says so too
    grpc_side.create(f"{topic}-p-partition-3")
    grpc_side.create(topic + "-p", partitions=2)
    for validate_only in (True, False):
        with pytest.raises(ck.KafkaException) as raised:
            grow(admin, topic + "-p", 4, validate_only=validate_only)
        assert kafka_code(raised) == ck.KafkaError.TOPIC_ALREADY_EXISTS
    assert info(grpc_side, topic + "-p").partitions == 2
    with pytest.raises(grpc.RpcError):
        info(grpc_side, f"{topic}-p-partition-2")


def test_delete_records_moves_the_log_start_offset(
    admin: AdminClient, kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic, partitions=2)
    publish(grpc_side, f"{topic}-partition-1", 10)
    (future,) = admin.delete_records([ck.TopicPartition(topic, 1, 4)]).values()
    assert future.result(30).low_watermark == 4
    assert info(grpc_side, f"{topic}-partition-1").stats.log_start_offset == 4
    assert [m.id.entry_id for m in grpc_side.read(f"{topic}-partition-1")] == list(range(4, 10))

    consumer = ck.Consumer(
        {
            "bootstrap.servers": kafka_server.kafka_address,
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([ck.TopicPartition(topic, 1, ck.OFFSET_BEGINNING)])
        first = consumer.poll(10)
        assert first is not None and first.error() is None
        assert (first.offset(), first.key()) == (4, b"k4")
        low, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 1), timeout=10)
        assert (low, high) == (4, 10)
    finally:
        consumer.close()

    # below the log start: nothing changes; OFFSET_END (-1): up to the high watermark
    (future,) = admin.delete_records([ck.TopicPartition(topic, 1, 2)]).values()
    assert future.result(30).low_watermark == 4
    (future,) = admin.delete_records([ck.TopicPartition(topic, 1, ck.OFFSET_END)]).values()
    assert future.result(30).low_watermark == 10
    assert info(grpc_side, f"{topic}-partition-1").stats.log_start_offset == 10
    (future,) = admin.delete_records([ck.TopicPartition(topic, 0, 1)]).values()
    with pytest.raises(ck.KafkaException) as raised:  # past the end of partition 0
        future.result(30)
    assert kafka_code(raised) == ck.KafkaError.OFFSET_OUT_OF_RANGE
    assert info(grpc_side, f"{topic}-partition-0").stats.log_start_offset == 0


def test_kafka_python_create_partitions_and_delete_records(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    from kafka.admin import NewPartitions as KpNewPartitions

    grpc_side.create(topic, partitions=2)
    publish(grpc_side, f"{topic}-partition-0", 6)
    admin = kafka.KafkaAdminClient(bootstrap_servers=kafka_server.kafka_address)
    try:
        admin.create_partitions({topic: KpNewPartitions(3)})
        part = kafka.TopicPartition(topic, 0)
        deleted = admin.delete_records({part: 5})
    finally:
        admin.close()
    assert info(grpc_side, topic).partitions == 3
    assert deleted[part]["low_watermark"] == 5
    assert info(grpc_side, f"{topic}-partition-0").stats.log_start_offset == 5
    assert [m.value for m in grpc_side.read(f"{topic}-partition-0")] == [b"v5"]


def test_aiokafka_create_partitions_and_delete_records(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.admin import NewPartitions as AioNewPartitions
    from aiokafka.structs import TopicPartition

    grpc_side.create(topic, partitions=2)
    publish(grpc_side, f"{topic}-partition-1", 3)

    async def run() -> dict[Any, int]:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_server.kafka_address)
        await admin.start()
        try:
            await admin.create_partitions({topic: AioNewPartitions(4)})
            part = TopicPartition(topic, 1)
            deleted: dict[Any, int] = await admin.delete_records(
                {part: RecordsToDelete(before_offset=2)}
            )
            return deleted
        finally:
            await admin.close()

    deleted = asyncio.run(run())
    assert deleted == {TopicPartition(topic, 1): 2}
    assert info(grpc_side, topic).partitions == 4
    assert info(grpc_side, f"{topic}-partition-1").stats.log_start_offset == 2
