"""The Fetch read-ahead's chain never answers what a fresh Fetch would not: on one
connection a consumer's Fetches go one stored batch at a time, so after its second the
listener has the next two answers read ahead; the log then changes (DeleteRecords, a
cleaner swap, retention cutting the head, the topic deleted and created again, new
records past the end) or the consumer fetches elsewhere, and every answer it gets after
that is the one a Fetch on a fresh connection gets at the same offset: the same error,
high watermark, log start and records. Raw frames on a real server."""

from __future__ import annotations

import datetime
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import Grpc
from tests.kafka.test_wire import connect, decode, frame, receive

kio_serial = pytest.importorskip("kio.serial")
from aiokafka.record.memory_records import MemoryRecords  # noqa: E402
from kio.schema.fetch.v12 import request as fetch_req  # noqa: E402
from kio.schema.fetch.v12.response import FetchResponse  # noqa: E402
from kio.static.primitive import i32Timedelta  # noqa: E402

BATCH, BATCHES, KEYS = 100, 8, 20
LIMIT = 1024  # one stored batch a Fetch: the first batch of an answer comes whole
CONFIG = {"cleanup.policy": "compact", "segment.bytes": "4096", "retention.ms": "-1"}
Answer = tuple[int, int, int, list[tuple[int, bytes | None]]]  # error, hw, start, records


def publish(grpc_side: Grpc, topic: str, batches: range, tag: bytes = b"v") -> None:
    for b in batches:
        offsets = range(b * BATCH, (b + 1) * BATCH)
        records = [pb.Record(key=b"k%02d" % (i % KEYS), value=tag + b"%05d" % i) for i in offsets]
        grpc_side.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)


def fetch(sock: socket.socket, topic: str, offset: int, cid: int) -> Answer:
    part = fetch_req.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=LIMIT)
    request = fetch_req.FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=10)),
        min_bytes=1,
        topics=(fetch_req.FetchTopic(topic=topic, partitions=(part,)),),
        forgotten_topics_data=(),
    )
    sock.sendall(frame(request, cid))
    got = decode(FetchResponse, receive(sock), cid).responses[0].partitions[0]
    records: list[tuple[int, bytes | None]] = []
    batches = MemoryRecords(bytes(got.records or b""))
    while (batch := batches.next_batch()) is not None:
        records += [(r.offset, r.value) for r in batch]
    return got.error_code.value, got.high_watermark, got.log_start_offset, records


def fresh(address: str, topic: str, offset: int) -> Answer:
    """The answer at ``offset`` on a connection of its own: nothing read ahead."""
    with connect(address) as sock:
        return fetch(sock, topic, offset, 1)


def read_around(address: str, topic: str, change: Callable[[], Any], start: int = 0) -> int:
    """Two Fetches (the chain then reads the next two answers ahead), ``change``, then
    Fetches on to the end, each answer checked against a fresh connection's; the number
    of Fetches after the change."""
    with connect(address) as sock:
        first = fetch(sock, topic, start, 1)
        second = fetch(sock, topic, first[3][-1][0] + 1, 2)
        time.sleep(0.3)  # the two answers after it are read meanwhile
        offset = change() or second[3][-1][0] + 1
        fetches = 0
        while fetches < 4 * BATCHES:
            got = fetch(sock, topic, offset, 3 + fetches)
            fetches += 1
            assert got == fresh(address, topic, offset), offset
            error, high_watermark, log_start, records = got
            if error:
                offset = log_start  # OFFSET_OUT_OF_RANGE: on from the log start, as clients
            elif records:
                offset = records[-1][0] + 1
            if offset >= high_watermark and not error:
                return fetches
    raise AssertionError("the read did not reach the high watermark")


@pytest.fixture
def compact_topic(grpc_side: Grpc, topic: str) -> str:
    request = pb.CreateTopicRequest(name=topic, kind=pb.SEGMENTED, config=CONFIG)
    grpc_side.admin.CreateTopic(request, timeout=30)
    publish(grpc_side, topic, range(BATCHES))
    return topic


def test_delete_records_in_the_chain_is_read_fresh(
    kafka_server: ServerProcess, grpc_side: Grpc, compact_topic: str
) -> None:
    def delete() -> None:
        request = pb.DeleteRecordsRequest(topic=compact_topic, before_offset=3 * BATCH + 50)
        grpc_side.admin.DeleteRecords(request, timeout=30)

    read_around(kafka_server.kafka_address, compact_topic, delete)


def test_a_cleaner_swap_under_the_chain_is_read_fresh(
    kafka_server: ServerProcess, grpc_side: Grpc, compact_topic: str
) -> None:
    def clean() -> None:
        status = grpc_side.admin.Compact(pb.CompactRequest(topic=compact_topic, wait=True))
        assert status.state == pb.CompactionStatus.SUCCESS, status
        assert status.last_run.removed > 0

    read_around(kafka_server.kafka_address, compact_topic, clean)


def test_retention_cutting_the_head_under_the_chain_is_read_fresh(
    kafka_server: ServerProcess, grpc_side: Grpc, compact_topic: str
) -> None:
    def cut() -> None:
        size = {"cleanup.policy": "compact,delete", "retention.bytes": "8192"}
        request = pb.UpdateTopicConfigRequest(name=compact_topic, set=size)
        grpc_side.admin.UpdateTopicConfig(request, timeout=30)
        grpc_side.admin.EnforceRetention(pb.EnforceRetentionRequest(topic=compact_topic))

    read_around(kafka_server.kafka_address, compact_topic, cut)
    assert fresh(kafka_server.kafka_address, compact_topic, 0)[0] != 0  # the head was cut


def test_a_topic_created_again_under_the_chain_is_read_fresh(
    kafka_server: ServerProcess, grpc_side: Grpc, compact_topic: str
) -> None:
    def again() -> None:
        grpc_side.admin.DeleteTopic(pb.DeleteTopicRequest(name=compact_topic), timeout=30)
        request = pb.CreateTopicRequest(name=compact_topic, kind=pb.SEGMENTED, config=CONFIG)
        grpc_side.admin.CreateTopic(request, timeout=30)
        publish(grpc_side, compact_topic, range(BATCHES), b"w")  # the same offsets, new values

    read_around(kafka_server.kafka_address, compact_topic, again)
    assert fresh(kafka_server.kafka_address, compact_topic, 2 * BATCH)[3][0][1] == b"w00200"


def test_records_past_the_end_show_in_the_high_watermark_and_are_read(
    kafka_server: ServerProcess, grpc_side: Grpc, compact_topic: str
) -> None:
    def more() -> None:
        publish(grpc_side, compact_topic, range(BATCHES, BATCHES + 2))

    fetches = read_around(kafka_server.kafka_address, compact_topic, more)
    assert fetches == BATCHES  # from the third batch to the new end, one batch a Fetch


def test_a_fetch_elsewhere_is_answered_from_there(
    kafka_server: ServerProcess, grpc_side: Grpc, compact_topic: str
) -> None:
    read_around(kafka_server.kafka_address, compact_topic, lambda: BATCH // 2)
    read_around(kafka_server.kafka_address, compact_topic, lambda: 5 * BATCH)
