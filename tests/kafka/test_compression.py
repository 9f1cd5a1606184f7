"""Compressed produce batches (gzip, snappy, lz4, zstd) from librdkafka and kafka-python
against a real server: the records stored are those sent, as gRPC reads them and as a
Kafka consumer fetches them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ServerProcess
from tests.kafka.conftest import Grpc

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

CODECS = ("gzip", "snappy", "lz4", "zstd")


def records(codec: str) -> list[tuple[bytes, bytes | None]]:
    """Keyed records that compress (repeated text), and a tombstone."""
    sent: list[tuple[bytes, bytes | None]] = [
        (b"key-%d" % (i % 7), (f"{codec} value {i} " * 20).encode()) for i in range(30)
    ]
    sent.append((b"key-3", None))
    return sent


def stored(grpc_side: Grpc, topic: str) -> list[tuple[int, bytes, bytes | None, dict[str, str]]]:
    return [
        (m.id.entry_id, m.key, m.value if m.HasField("value") else None, dict(m.properties))
        for m in grpc_side.read(topic)
    ]


def fetched(address: str, topic: str, count: int) -> list[tuple[int, bytes, bytes | None]]:
    consumer = ck.Consumer(
        {"bootstrap.servers": address, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got: list[Any] = []
    try:
        while len(got) < count:
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(got)} of {count} records came"
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_compressed_batches(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str, codec: str
) -> None:
    grpc_side.create(topic)
    producer = ck.Producer(
        {
            "bootstrap.servers": kafka_server.kafka_address,
            "acks": "all",
            "compression.type": codec,
            "linger.ms": 50,  # one batch of many records, so it is compressed as one
        }
    )
    sent = records(codec)
    for i, (key, value) in enumerate(sent):
        producer.produce(topic, key=key, value=value, headers=[("n", str(i).encode())])
    assert producer.flush(30) == 0
    expected = [(i, k, v, {"n": str(i)}) for i, (k, v) in enumerate(sent)]
    assert stored(grpc_side, topic) == expected
    got = fetched(kafka_server.kafka_address, topic, len(sent))
    assert got == [(i, k, v) for i, (k, v) in enumerate(sent)]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_compressed_batches(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str, codec: str
) -> None:
    grpc_side.create(topic)
    producer = kafka.KafkaProducer(
        bootstrap_servers=kafka_server.kafka_address,
        acks="all",
        compression_type=codec,
        linger_ms=50,
    )
    sent = records(codec)
    futures = [
        producer.send(topic, key=k, value=v, headers=[("n", str(i).encode())])
        for i, (k, v) in enumerate(sent)
    ]
    producer.flush()
    assert [f.get(10).offset for f in futures] == list(range(len(sent)))
    producer.close()
    expected = [(i, k, v, {"n": str(i)}) for i, (k, v) in enumerate(sent)]
    assert stored(grpc_side, topic) == expected
