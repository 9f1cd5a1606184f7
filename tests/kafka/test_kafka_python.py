"""kafka-python against a real server: CreateTopics, gzip produce with the default
(idempotent) producer, assign() reads, ListOffsets (earliest, latest, by time), all
matching what gRPC serves."""

from __future__ import annotations

import grpc
import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import Grpc

kafka = pytest.importorskip("kafka")
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402
from kafka.errors import InvalidTopicError, TopicAlreadyExistsError  # noqa: E402


def producer(address: str) -> object:
    # kafka-python 3's default producer: idempotent (InitProducerId, then sequenced batches)
    prod = kafka.KafkaProducer(bootstrap_servers=address, acks="all", compression_type="gzip")
    assert prod.config["enable_idempotence"] is True
    return prod


def test_gzip_produce_and_assign_read_match_grpc(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka_server.kafka_address)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    prod = producer(kafka_server.kafka_address)
    futures = [
        prod.send(topic, key=b"k%d" % (i % 3), value=b"v%d" % i, headers=[("h", b"%d" % i)])  # type: ignore[attr-defined]
        for i in range(6)
    ]
    futures.append(prod.send(topic, key=b"k0", value=None))  # type: ignore[attr-defined]
    prod.flush()  # type: ignore[attr-defined]
    assert [f.get(10).offset for f in futures] == list(range(7))
    prod.close()  # type: ignore[attr-defined]

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_server.kafka_address,
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    part = kafka.TopicPartition(topic, 0)
    consumer.assign([part])
    consumer.seek_to_beginning()
    got = [next(consumer) for _ in range(7)]
    served = grpc_side.read(topic)
    assert [(m.offset, m.key, m.value) for m in got] == [
        (m.id.entry_id, m.key, m.value if m.HasField("value") else None) for m in served
    ]
    assert [m.headers for m in got[:6]] == [[("h", b"%d" % i)] for i in range(6)]
    assert consumer.beginning_offsets([part]) == {part: 0}
    assert consumer.end_offsets([part]) == {part: 7}
    third = served[3].event_time_ms or served[3].publish_time_ms
    found = consumer.offsets_for_times({part: third})[part]
    assert found is not None and found.offset <= 3
    assert consumer.offsets_for_times({part: third + 10**9})[part] is None
    consumer.close()


def test_create_topics_partitions_make_a_partitioned_topic(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka_server.kafka_address)
    try:
        admin.create_topics([NewTopic(topic, 4, 1)])
    finally:
        admin.close()
    info = grpc_side.admin.GetTopic(pb.GetTopicRequest(name=topic), timeout=10)
    assert info.partitions == 4
    prod = producer(kafka_server.kafka_address)
    sent = prod.send(topic, key=b"x", value=b"y", partition=2).get(10)  # type: ignore[attr-defined]
    prod.close()  # type: ignore[attr-defined]
    assert (sent.partition, sent.offset) == (2, 0)
    [message] = grpc_side.read(topic)
    assert (message.id.partition, message.id.entry_id, message.value) == (2, 0, b"y")


def test_a_partitions_name_is_refused_as_a_topic_of_its_own(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    """``T-partition-i`` while ``T`` is partitioned, and a partitioned topic named like a
    partition at all: INVALID_TOPIC_EXCEPTION over Kafka's CreateTopics (validate-only
    too) and INVALID_ARGUMENT over gRPC, whatever ``i``; and a grow over a topic of its own
    under a new partition's name is refused, not taken in."""
    grpc_side.create(topic, partitions=2)
    admin = KafkaAdminClient(bootstrap_servers=kafka_server.kafka_address)
    try:
        for i, validate_only in ((5, False), (1, False), (7, True)):
            with pytest.raises(InvalidTopicError):
                admin.create_topics(
                    [NewTopic(f"{topic}-partition-{i}", 1, 1)], validate_only=validate_only
                )
        for validate_only in (False, True):  # a partitioned topic named like a partition
            with pytest.raises(InvalidTopicError):
                admin.create_topics(
                    [NewTopic(f"{topic}-x-partition-3", 2, 1)], validate_only=validate_only
                )
    finally:
        admin.close()
    with pytest.raises(grpc.RpcError) as named:
        grpc_side.create(f"{topic}-x-partition-3", partitions=2)
    assert named.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert "is a partition's name" in str(named.value.details())  # type: ignore[attr-defined]
    with pytest.raises(grpc.RpcError) as refused:
        grpc_side.create(f"{topic}-partition-2")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert "partition's name of the partitioned topic" in str(refused.value.details())  # type: ignore[attr-defined]

    other = topic + "-r"
    grpc_side.create(f"{other}-partition-3")  # no partitioned topic of that name yet
    grpc_side.create(other, partitions=2)
    grow = pb.AddPartitionsRequest(name=other, partitions=5)
    with pytest.raises(grpc.RpcError) as taken:
        grpc_side.admin.AddPartitions(grow, timeout=30)
    assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS  # type: ignore[attr-defined]
    info = grpc_side.admin.GetTopic(pb.GetTopicRequest(name=other), timeout=30)
    assert info.partitions == 2
    names = {t.name for t in grpc_side.admin.ListTopics(pb.ListTopicsRequest(), timeout=30).topics}
    assert {n for n in names if n.startswith(other)} == {
        other,
        f"{other}-partition-0",
        f"{other}-partition-1",
        f"{other}-partition-3",
    }


def test_default_idempotent_producer_keeps_offsets_across_batches(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic)
    prod = producer(kafka_server.kafka_address)
    offsets = []
    for round_ in range(3):  # three batches: base sequences 0, 2, 4 of one producer id
        sent = [prod.send(topic, key=b"k", value=b"%d-%d" % (round_, i)) for i in range(2)]  # type: ignore[attr-defined]
        prod.flush()  # type: ignore[attr-defined]
        offsets += [f.get(10).offset for f in sent]
    prod.close()  # type: ignore[attr-defined]
    served = grpc_side.read(topic)
    assert offsets == [m.id.entry_id for m in served] == list(range(6))
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_server.kafka_address, enable_auto_commit=False
    )
    consumer.assign([kafka.TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [next(consumer) for _ in range(6)]
    consumer.close()
    assert [(m.offset, m.value) for m in got] == [(m.id.entry_id, m.value) for m in served]
