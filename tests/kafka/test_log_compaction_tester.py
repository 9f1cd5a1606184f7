"""Kafka's LogCompactionTester workload through librdkafka: random keys, a share of them
deleted (null values: tombstones), produced with acks=-1 to a compacted topic, then a
cleaner pass. What a Kafka consumer reads back is exactly the latest record of every key
not deleted, each at the offset its produce was acknowledged at, and gRPC reads the same.

The topic rolls a segment every few kilobytes and keeps tombstones for no time
(``delete.retention.ms=0``). As Kafka's cleaner, a pass keeps the latest tombstones and the
next one drops them; the active segment is never cleaned, so before each pass a record of
its own key is produced to be that segment.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import Grpc

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

MESSAGES = 4000
KEYS = 400
PERCENT_DELETES = 10  # LogCompactionTester's --percent-deletes
CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "delete.retention.ms": "0",
    "min.cleanable.dirty.ratio": "0.01",
}


def workload(seed: int) -> list[tuple[bytes, bytes | None]]:
    """LogCompactionTester's: keys drawn at random, a share of the writes deletes."""
    rng = random.Random(seed)
    records: list[tuple[bytes, bytes | None]] = []
    for i in range(MESSAGES):
        key = b"key-%d" % rng.randrange(KEYS)
        deleted = rng.randrange(100) < PERCENT_DELETES
        records.append((key, None if deleted else b"value-%d-%d" % (i, rng.randrange(1 << 30))))
    return records


def produce_all(address: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> list[Any]:
    """Produce in order with acks=-1; the acknowledged messages, in produce order."""
    config = {"bootstrap.servers": address, "acks": -1, "linger.ms": 5}
    config |= {"enable.idempotence": True, "batch.num.messages": 200}  # several batches
    producer = ck.Producer(config)
    acked: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append(msg)

    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def consume_all(address: str, topic: str) -> list[Any]:
    """Every record from the start to the high watermark, with assign()."""
    consumer = ck.Consumer(
        {"bootstrap.servers": address, "group.id": "lct", "enable.auto.commit": False}
    )
    _low, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=30)
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got: list[Any] = []
    deadline = time.monotonic() + 60
    try:
        while not got or got[-1].offset() < high - 1:
            assert time.monotonic() < deadline, f"read up to {got[-1].offset() if got else -1}"
            message = consumer.poll(1)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message)
    finally:
        consumer.close()
    return got


@pytest.mark.slow
def test_log_compaction_tester_workload(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    address = kafka_server.kafka_address
    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic(topic, 1, 1, config=CONFIG)])[topic].result(30)

    acked = produce_all(address, topic, workload(seed=30))
    assert len(acked) == MESSAGES
    latest: dict[bytes, Any] = {}
    for message in acked:  # acknowledged in produce order: the last one of a key wins
        latest[message.key()] = message
    expected = sorted(
        (m.offset(), m.key(), m.value()) for m in latest.values() if m.value() is not None
    )
    deleted = sum(1 for m in latest.values() if m.value() is None)
    assert deleted > 0 and len(expected) > 0
    ends = []
    removed = 0
    for run in range(2):  # the first pass keeps the latest tombstones, the next drops them
        [end] = produce_all(address, topic, [(b"end-%d" % run, b"the active segment")])
        ends.append((end.offset(), end.key(), end.value()))
        status = grpc_side.admin.Compact(pb.CompactRequest(topic=topic, wait=True), timeout=120)
        assert status.state == pb.CompactionStatus.SUCCESS, status
        removed += status.last_run.removed
    assert removed == MESSAGES - len(expected)

    got = [(m.offset(), m.key(), m.value()) for m in consume_all(address, topic)]
    assert got == [*expected, *ends]
    served = [(m.id.entry_id, m.key, m.value) for m in grpc_side.read(topic)]
    assert served == got
