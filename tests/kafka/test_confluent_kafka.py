"""confluent-kafka (librdkafka) against a real server: produce (idempotent too), read
back with ``assign()``, and the same records, offsets, keys, values, headers gRPC
serves; AdminClient delete_topics."""

from __future__ import annotations

import grpc
import pytest

from compactlog.partitioner import partition_for_key
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import Grpc

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402


def produce(
    address: str, topic: str, records: list[tuple[bytes, bytes | None]], **extra: object
) -> list:  # type: ignore[type-arg]
    # murmur2_random: Java's (and compactlog's) default partitioner; librdkafka's own
    # default is a CRC32 one.
    config = {"bootstrap.servers": address, "acks": "all", "partitioner": "murmur2_random"}
    config.update(extra)  # type: ignore[arg-type]
    producer = ck.Producer(config)
    delivered: list = []  # type: ignore[type-arg]
    for i, (key, value) in enumerate(records):
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=[("n", str(i).encode())],
            on_delivery=lambda err, msg: delivered.append((err, msg)),
        )
    assert producer.flush(30) == 0
    return delivered


def consume(address: str, topic: str, partition: int, count: int) -> list:  # type: ignore[type-arg]
    consumer = ck.Consumer(
        {"bootstrap.servers": address, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([ck.TopicPartition(topic, partition, ck.OFFSET_BEGINNING)])
    got = []
    try:
        while len(got) < count:
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(got)} of {count} records came"
            assert msg.error() is None, msg.error()
            got.append(msg)
    finally:
        consumer.close()
    return got


def test_produce_then_assign_reads_what_grpc_reads(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic)
    records = [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"")]
    delivered = produce(kafka_server.kafka_address, topic, records)
    assert [err for err, _ in delivered] == [None] * 4
    assert [msg.offset() for _, msg in delivered] == [0, 1, 2, 3]

    fetched = consume(kafka_server.kafka_address, topic, 0, 4)
    served = grpc_side.read(topic)
    assert [m.offset() for m in fetched] == [m.id.entry_id for m in served] == [0, 1, 2, 3]
    assert [m.key() for m in fetched] == [m.key for m in served] == [b"a", b"b", b"a", b"c"]
    assert [m.value() for m in fetched] == [b"1", b"2", None, b""]
    assert [m.HasField("value") for m in served] == [True, True, False, True]  # a tombstone
    assert [m.value for m in served] == [b"1", b"2", b"", b""]
    assert [dict(m.properties) for m in served] == [{"n": str(i)} for i in range(4)]
    assert [m.headers() for m in fetched] == [[("n", str(i).encode())] for i in range(4)]
    stamps = [m.timestamp()[1] for m in fetched]
    assert stamps == [m.event_time_ms or m.publish_time_ms for m in served]


def test_partitioned_topic_keys_route_like_ours(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic, partitions=3)
    keys = [f"key-{i}".encode() for i in range(12)]
    delivered = produce(kafka_server.kafka_address, topic, [(k, b"v") for k in keys])
    assert sorted(msg.key() for _e, msg in delivered) == sorted(keys)
    for _err, msg in delivered:  # in delivery order, which is per partition
        assert msg.partition() == partition_for_key(msg.key(), 3)
    served = grpc_side.read(topic)
    assert sorted((m.id.partition, m.id.entry_id, m.key) for m in served) == sorted(
        (msg.partition(), msg.offset(), msg.key()) for _e, msg in delivered
    )


def test_ledger_topic_is_unknown_to_kafka(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic, kind=pb.LEDGER)
    admin = AdminClient({"bootstrap.servers": kafka_server.kafka_address})
    meta = admin.list_topics(topic=topic, timeout=10)
    assert meta.topics[topic].error.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
    assert topic not in admin.list_topics(timeout=10).topics
    assert kafka_server.logged(topic, "LEDGER")


def test_idempotent_producer_reads_back_what_grpc_reads(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic)
    records = [(b"k%d" % (i % 2), b"v%d" % i) for i in range(5)]
    extra = {"enable.idempotence": True}
    delivered = produce(kafka_server.kafka_address, topic, records, **extra)
    assert [err for err, _ in delivered] == [None] * 5
    assert [msg.offset() for _, msg in delivered] == list(range(5))
    fetched = consume(kafka_server.kafka_address, topic, 0, 5)
    served = grpc_side.read(topic)
    assert [(m.offset(), m.key(), m.value()) for m in fetched] == [
        (m.id.entry_id, m.key, m.value) for m in served
    ]


def test_admin_delete_topics(kafka_server: ServerProcess, grpc_side: Grpc, topic: str) -> None:
    grpc_side.create(topic, partitions=3)
    grpc_side.create(topic + "-ledger", kind=pb.LEDGER)
    admin = AdminClient({"bootstrap.servers": kafka_server.kafka_address})
    names = [topic, topic + "-unknown", topic + "-ledger"]
    futures = admin.delete_topics(names, operation_timeout=10)
    assert futures[topic].result(30) is None
    for name in names[1:]:
        with pytest.raises(ck.KafkaException) as raised:
            futures[name].result(30)
        assert raised.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
    with pytest.raises(grpc.RpcError) as gone:
        grpc_side.admin.GetTopic(pb.GetTopicRequest(name=topic), timeout=10)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    for part in range(3):  # every partition went with the name
        with pytest.raises(grpc.RpcError) as part_gone:
            grpc_side.admin.GetTopic(pb.GetTopicRequest(name=f"{topic}-partition-{part}"))
        assert part_gone.value.code() == grpc.StatusCode.NOT_FOUND
    info = grpc_side.admin.GetTopic(pb.GetTopicRequest(name=topic + "-ledger"), timeout=10)
    assert info.name == topic + "-ledger"  # the LEDGER topic is untouched
