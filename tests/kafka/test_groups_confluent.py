"""confluent-kafka (librdkafka) consumer groups against a real server: subscribe() with
a group, commits that are the group's subscription (ListSubscriptions shows it), resume
after close, two members splitting a topic, a leave and a kill handing partitions over."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.kafka.conftest import Grpc

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

SESSION_MS = 6000


def create(address: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": address})
    new = NewTopic(topic, partitions, 1, config={"cleanup.policy": "compact"})
    for future in admin.create_topics([new]).values():
        future.result(30)


def produce(address: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    producer = ck.Producer({"bootstrap.servers": address, "partitioner": "murmur2_random"})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def consumer(address: str, group: str, **extra: Any) -> Any:
    config = {
        "bootstrap.servers": address,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": 500,
        **extra,
    }
    return ck.Consumer(config)


def poll_until(c: Any, done: Callable[[], bool], seen: list[Any], limit_s: float = 30) -> None:
    deadline = time.monotonic() + limit_s
    while not done():
        assert time.monotonic() < deadline, f"timed out; seen {len(seen)}"
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.append(msg)


def subscription(grpc_side: Grpc, topic: str, group: str) -> Any:
    listing = grpc_side.admin.ListSubscriptions(
        pb.ListSubscriptionsRequest(topic=topic), timeout=30
    )
    found = [s for s in listing.subscriptions if s.name == group]
    assert found, [s.name for s in listing.subscriptions]
    return found[0]


def test_group_commits_resume_and_show_as_a_subscription(
    kafka_server: ServerProcess, grpc_side: Grpc, topic: str
) -> None:
    address = kafka_server.kafka_address
    create(address, topic, 1)
    produce(address, topic, [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"3")])
    first = consumer(address, "g1")
    first.subscribe([topic])
    seen: list[Any] = []
    try:
        poll_until(first, lambda: len(seen) == 3, seen)
        assert [(m.key(), m.value()) for m in seen] == [(b"a", b"1"), (b"b", b"2"), (b"a", None)]
        first.commit(message=seen[-1], asynchronous=False)  # commits offset 3
        committed = first.committed([ck.TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == 3
    finally:
        first.close()
    info = subscription(grpc_side, topic, "g1")
    assert info.mark_delete.entry_id == 2  # the last consumed; Kafka's offset 3 is next
    assert info.backlog == 1

    second = consumer(address, "g1")
    second.subscribe([topic])
    resumed: list[Any] = []
    try:
        poll_until(second, lambda: len(resumed) == 1, resumed)
        assert (resumed[0].offset(), resumed[0].key(), resumed[0].value()) == (3, b"c", b"3")
        second.commit(asynchronous=False)
    finally:
        second.close()
    assert subscription(grpc_side, topic, "g1").backlog == 0


def assigned(c: Any) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_two_members_split_partitions_and_a_leave_hands_over(
    kafka_server: ServerProcess, topic: str
) -> None:
    address = kafka_server.kafka_address
    create(address, topic, 2)
    one, two = consumer(address, "g2"), consumer(address, "g2")
    one.subscribe([topic])
    two.subscribe([topic])
    seen: list[Any] = []
    try:
        both = lambda: len(assigned(one)) == 1 and len(assigned(two)) == 1  # noqa: E731
        deadline = time.monotonic() + 40
        while not both():
            assert time.monotonic() < deadline, (assigned(one), assigned(two))
            one.poll(0.1)
            two.poll(0.1)
        assert assigned(one) | assigned(two) == {0, 1}
        two.close()  # a LeaveGroup: its partition goes to the other at once
        poll_until(one, lambda: assigned(one) == {0, 1}, seen, limit_s=20)
    finally:
        one.close()


GHOST = """
import sys, confluent_kafka as ck
c = ck.Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                 "session.timeout.ms": int(sys.argv[4]), "heartbeat.interval.ms": 500})
c.subscribe([sys.argv[3]])
while not c.assignment():
    c.poll(0.1)
print("assigned", flush=True)
while True:
    c.poll(0.1)
"""


@pytest.mark.slow
def test_a_killed_member_is_removed_after_its_session_timeout(
    kafka_server: ServerProcess, topic: str
) -> None:
    """A member whose process is killed (no LeaveGroup) is removed once its session
    times out, and the other member gets its partition."""
    address = kafka_server.kafka_address
    create(address, topic, 2)
    one = consumer(address, "g3")
    one.subscribe([topic])
    ghost = subprocess.Popen(
        [sys.executable, "-c", GHOST, address, "g3", topic, str(SESSION_MS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    seen: list[Any] = []
    try:
        assert ghost.stdout is not None
        waiter = threading.Thread(target=ghost.stdout.readline, daemon=True)
        waiter.start()
        deadline = time.monotonic() + 40
        while waiter.is_alive() or len(assigned(one)) != 1:
            assert time.monotonic() < deadline, assigned(one)
            one.poll(0.1)
        ghost.kill()  # SIGKILL: no LeaveGroup, its heartbeats just stop
        killed = time.monotonic()
        poll_until(one, lambda: assigned(one) == {0, 1}, seen, limit_s=30)
        assert time.monotonic() - killed > SESSION_MS / 1000 / 2
    finally:
        ghost.kill()
        ghost.wait(10)
        one.close()
