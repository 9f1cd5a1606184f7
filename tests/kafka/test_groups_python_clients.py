"""kafka-python and aiokafka consumer groups against a real server: produce, consume in
a group, commit, close; a new consumer of the group resumes after the commit, and the
commit is the group's subscription as gRPC lists it."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import Grpc, kafka_python_group_consumer

kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

SESSION_MS = 6000


def mark_of(grpc_side: Grpc, topic: str, group: str) -> int:
    listing = grpc_side.admin.ListSubscriptions(
        pb.ListSubscriptionsRequest(topic=topic), timeout=30
    )
    (info,) = [s for s in listing.subscriptions if s.name == group]
    return int(info.mark_delete.entry_id)


def kp_consume(address: str, topic: str, group: str, count: int, poll_ms: int = 200) -> list[Any]:
    c = kafka_python_group_consumer(
        topic,
        bootstrap_servers=address,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
    )
    got: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count:
            assert time.monotonic() < deadline, f"only {len(got)} of {count}"
            for records in c.poll(timeout_ms=poll_ms, max_records=count - len(got)).values():
                got.extend(records)
        c.commit()
    finally:
        c.close()
    return got


def test_kafka_python_group_commit_and_resume(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    address = kafka_server.kafka_address
    grpc_side.create(topic)
    producer = kafka.KafkaProducer(bootstrap_servers=address, enable_idempotence=False)
    for key, value in [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"3")]:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()
    first = kp_consume(address, topic, "kp", 2)
    assert [(r.key, r.value) for r in first] == [(b"a", b"1"), (b"b", b"2")]
    assert mark_of(grpc_side, topic, "kp") == 1
    rest = kp_consume(address, topic, "kp", 2)
    assert [(r.offset, r.key, r.value) for r in rest] == [(2, b"a", None), (3, b"c", b"3")]
    assert mark_of(grpc_side, topic, "kp") == 3


def test_kafka_python_short_polls_take_their_assignment(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    """Polls of 2 ms: the join outlasts every poll. kafka-python still takes its
    assignment when it knew the topic's partitions before joining (without that, 7 of
    8 such consumers here never fetched: see ``kafka_python_group_consumer``)."""
    address = kafka_server.kafka_address
    grpc_side.create(topic)
    producer = kafka.KafkaProducer(bootstrap_servers=address, enable_idempotence=False)
    for value in (b"1", b"2"):
        producer.send(topic, key=b"k", value=value)
    producer.flush()
    producer.close()
    got = kp_consume(address, topic, "kp-short", 2, poll_ms=2)
    assert [(r.offset, r.value) for r in got] == [(0, b"1"), (1, b"2")]
    assert mark_of(grpc_side, topic, "kp-short") == 1


def test_a_stalled_server_keeps_the_members_it_could_not_hear(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    """The server stopped (SIGSTOP) past a member's 2 s session: the heartbeats sent
    meanwhile wait in its socket, and the reaper tick that runs first on SIGCONT must not
    drop the member for the server's own silence; the commit then lands."""
    address = kafka_server.kafka_address
    grpc_side.create(topic)
    producer = kafka.KafkaProducer(bootstrap_servers=address, enable_idempotence=False)
    for value in (b"1", b"2"):
        producer.send(topic, key=b"k", value=value)
    producer.flush()
    producer.close()
    c = kafka_python_group_consumer(
        topic,
        bootstrap_servers=address,
        group_id="kp-stall",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=2000,
        heartbeat_interval_ms=200,
    )
    try:
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 2:
            assert time.monotonic() < deadline, f"only {len(got)} of 2"
            for records in c.poll(timeout_ms=200).values():
                got.extend(records)
        assert kafka_server.proc is not None
        os.kill(kafka_server.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(3.5)
        finally:
            os.kill(kafka_server.proc.pid, signal.SIGCONT)
        c.commit()
    finally:
        c.close()
    assert mark_of(grpc_side, topic, "kp-stall") == 1
    dropped = [
        line for line in kafka_server.stderr_lines if "'kp-stall'" in line and "timed out" in line
    ]
    assert dropped == []


async def aio_consume(address: str, topic: str, group: str, count: int) -> list[Any]:
    c = aiokafka.AIOKafkaConsumer(
        topic,
        bootstrap_servers=address,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
    )
    await c.start()
    got: list[Any] = []
    try:
        async with asyncio.timeout(30):
            while len(got) < count:
                got.append(await c.getone())
        await c.commit()
    finally:
        await c.stop()
    return got


async def aio_round_trip(address: str, topic: str) -> tuple[list[Any], list[Any]]:
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=address)
    await producer.start()
    try:
        for key, value in [(b"x", b"1"), (b"y", b"2"), (b"x", None)]:
            await producer.send_and_wait(topic, key=key, value=value)
    finally:
        await producer.stop()
    return await aio_consume(address, topic, "aio", 2), await aio_consume(address, topic, "aio", 1)


def test_aiokafka_group_commit_and_resume(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    grpc_side.create(topic)
    first, rest = asyncio.run(aio_round_trip(kafka_server.kafka_address, topic))
    assert [(r.offset, r.key, r.value) for r in first] == [(0, b"x", b"1"), (1, b"y", b"2")]
    assert [(r.offset, r.key, r.value) for r in rest] == [(2, b"x", None)]
    assert mark_of(grpc_side, topic, "aio") == 2
