"""The Fetch read-ahead never serves what the log no longer holds: librdkafka reads a
topic one stored batch a Fetch, so after its second Fetch the listener has the third
read ahead; the cleaner (or DeleteRecords) then removes records of that range before the
third Fetch goes out, and every record the consumer gets afterwards is one gRPC still
serves, at the same offset, with the same value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import Grpc

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

BATCH = 100  # records a stored batch: one gRPC Publish
BATCHES = 10
KEYS = 20
CONFIG = {"cleanup.policy": "compact", "segment.bytes": "4096", "retention.ms": "-1"}
# One stored batch a Fetch (the first batch of an answer always comes whole), and no
# next Fetch until the consumer's queue is empty: the test decides what happens between.
CONSUMER = {
    "group.id": "read-ahead",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "max.partition.fetch.bytes": 1024,
    "queued.min.messages": 1,
    "fetch.queue.backoff.ms": 1,
    "check.crcs": True,
}


def publish(grpc_side: Grpc, topic: str) -> None:
    for b in range(BATCHES):
        offsets = range(b * BATCH, (b + 1) * BATCH)
        records = [pb.Record(key=b"k%02d" % (i % KEYS), value=b"v%05d" % i) for i in offsets]
        grpc_side.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)


def read_around(address: str, topic: str, change: Callable[[], None]) -> list[Any]:
    """Poll 150 records (two Fetches, the third read ahead by then), ``change`` the log,
    poll the rest of the second Fetch's batch, then read to the end: the (offset, value)
    of each record the Fetches after the change gave."""
    consumer = ck.Consumer({"bootstrap.servers": address, **CONSUMER})
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    after: list[tuple[int, bytes]] = []
    try:
        for i in range(2 * BATCH):
            if i == BATCH + BATCH // 2:
                change()
            msg = consumer.poll(30)
            assert msg is not None and msg.error() is None, msg and msg.error()
            assert (msg.offset(), msg.value()) == (i, b"v%05d" % i)
        while not after or after[-1][0] < BATCH * BATCHES - 1:
            msg = consumer.poll(30)
            assert msg is not None and msg.error() is None, msg and msg.error()
            after.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return after


def served(grpc_side: Grpc, topic: str, start: int) -> list[tuple[int, bytes]]:
    return [(m.id.entry_id, m.value) for m in grpc_side.read(topic) if m.id.entry_id >= start]


@pytest.fixture
def compact_topic(kafka_server: ServerProcess, grpc_side: Grpc, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": kafka_server.kafka_address})
    admin.create_topics([NewTopic(topic, 1, 1, config=CONFIG)])[topic].result(30)
    publish(grpc_side, topic)
    return topic


def test_a_cleaner_pass_between_fetches_is_read_fresh(
    kafka_server: ServerProcess, grpc_side: Grpc, compact_topic: str
) -> None:
    def clean() -> None:
        status = grpc_side.admin.Compact(pb.CompactRequest(topic=compact_topic, wait=True))
        assert status.state == pb.CompactionStatus.SUCCESS, status
        assert status.last_run.removed > 0

    after = read_around(kafka_server.kafka_address, compact_topic, clean)
    expected = served(grpc_side, compact_topic, after[0][0])
    assert after == expected
    assert after[0][0] > 2 * BATCH  # offsets 200.. of the read-ahead were cleaned away
    assert len(after) < BATCH * BATCHES - 2 * BATCH


def test_delete_records_between_fetches_is_read_fresh(
    kafka_server: ServerProcess, grpc_side: Grpc, compact_topic: str
) -> None:
    start = 2 * BATCH + BATCH // 2

    def delete() -> None:
        request = pb.DeleteRecordsRequest(topic=compact_topic, before_offset=start)
        grpc_side.admin.DeleteRecords(request, timeout=30)

    after = read_around(kafka_server.kafka_address, compact_topic, delete)
    assert after == served(grpc_side, compact_topic, 0)
    assert after[0][0] == start  # OFFSET_OUT_OF_RANGE at 200, then the new log start
