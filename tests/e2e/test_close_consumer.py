"""``Log.CloseConsumer`` over raw gRPC (CONTRACT section 6): a consumer that says it is
leaving is gone at once, not after the 30 s of silence that release it otherwise.

The shared server runs with the production liveness (30 s), so every "at once" here is
measured against it: each test finishes its handover well inside a few seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc
import pytest

from compactlog.partitioner import partition_name
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess, Stubs

KINDS = ["ledger", "segmented"]
# Well under the 30 s a silent consumer is kept: a handover this fast was the close.
AT_ONCE_S = 10.0


@pytest.fixture
def stubs(shared_server: ServerProcess, connect: Callable[[str], Stubs]) -> Stubs:
    return connect(shared_server.address)


@pytest.fixture(params=KINDS)
def topic(request: pytest.FixtureRequest, stubs: Stubs, unique_topic: str) -> str:
    kind = pb.LEDGER if request.param == "ledger" else pb.SEGMENTED
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic, kind=kind), timeout=30)
    return unique_topic


def consume(
    stubs: Stubs,
    topic: str,
    name: str,
    sub_type: int,
    max_messages: int = 10,
    wait_ms: int = 0,
    subscription: str = "sub",
) -> list[tuple[int, int]]:
    req = pb.ConsumeRequest(
        topic=topic,
        subscription=subscription,
        consumer_name=name,
        subscription_type=sub_type,  # type: ignore[arg-type]
        max_messages=max_messages,
        wait_ms=wait_ms,
    )
    reply = stubs.log.Consume(req, timeout=30)
    return [(m.id.ledger_id, m.id.entry_id) for m in reply.messages]


def close(stubs: Stubs, topic: str, name: str, subscription: str = "sub") -> None:
    req = pb.CloseConsumerRequest(topic=topic, subscription=subscription, consumer_name=name)
    stubs.log.CloseConsumer(req, timeout=30)


def pairs(count: int) -> list[tuple[bytes | None, bytes | None]]:
    return [(b"k%d" % i, b"v%d" % i) for i in range(count)]


def test_exclusive_is_free_for_the_next_consumer_at_once(stubs: Stubs, topic: str) -> None:
    ids = stubs.publish(topic, *pairs(3))
    assert consume(stubs, topic, "a", pb.EXCLUSIVE, max_messages=1) == ids[:1]
    with pytest.raises(grpc.RpcError) as info:
        consume(stubs, topic, "b", pb.EXCLUSIVE)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    close(stubs, topic, "a")
    # b takes over from the mark-delete position: a's unacknowledged message comes again
    assert consume(stubs, topic, "b", pb.EXCLUSIVE) == ids


def test_failover_passes_to_the_standby_at_once(stubs: Stubs, topic: str) -> None:
    ids = stubs.publish(topic, *pairs(4))
    assert consume(stubs, topic, "a", pb.FAILOVER, max_messages=2) == ids[:2]
    assert consume(stubs, topic, "b", pb.FAILOVER) == []  # standing by: a sorts first
    close(stubs, topic, "a")
    started = time.monotonic()
    taken = consume(stubs, topic, "b", pb.FAILOVER, wait_ms=int(AT_ONCE_S * 1000))
    assert taken == ids  # from the mark-delete position
    assert time.monotonic() - started < AT_ONCE_S


def test_a_waiting_standby_wakes_when_the_active_one_closes(stubs: Stubs, topic: str) -> None:
    ids = stubs.publish(topic, *pairs(2))
    assert consume(stubs, topic, "a", pb.FAILOVER) == ids
    waiting = stubs.log.Consume.future(
        pb.ConsumeRequest(
            topic=topic,
            subscription="sub",
            consumer_name="b",
            subscription_type=pb.FAILOVER,
            wait_ms=int(AT_ONCE_S * 1000) * 2,
        ),
        timeout=60,
    )
    started = time.monotonic()
    close(stubs, topic, "a")
    reply = waiting.result()
    assert [(m.id.ledger_id, m.id.entry_id) for m in reply.messages] == ids
    assert time.monotonic() - started < AT_ONCE_S


def test_shared_unacked_messages_go_to_the_others_at_once(stubs: Stubs, topic: str) -> None:
    ids = stubs.publish(topic, *pairs(4))
    given = consume(stubs, topic, "a", pb.SHARED, max_messages=3)  # no ack timeout
    assert given == ids[:3]
    assert consume(stubs, topic, "b", pb.SHARED) == ids[3:]  # nothing of a's twice
    close(stubs, topic, "a")
    assert consume(stubs, topic, "b", pb.SHARED) == given


def test_a_consume_under_way_when_its_consumer_closes_gets_nothing(
    stubs: Stubs, topic: str
) -> None:
    waiting = stubs.log.Consume.future(
        pb.ConsumeRequest(
            topic=topic,
            subscription="sub",
            consumer_name="a",
            subscription_type=pb.SHARED,
            wait_ms=int(AT_ONCE_S * 1000),
        ),
        timeout=60,
    )
    deadline = time.monotonic() + AT_ONCE_S  # the subscription exists once a's call is in
    while not any(s.name == "sub" for s in _subscriptions(stubs, topic)):
        assert time.monotonic() < deadline
    close(stubs, topic, "a")
    ids = stubs.publish(topic, *pairs(2))
    assert list(waiting.result().messages) == []  # a closed: the new messages are not a's
    assert consume(stubs, topic, "b", pb.SHARED) == ids


def _subscriptions(stubs: Stubs, topic: str) -> list[pb.SubscriptionInfo]:
    req = pb.ListSubscriptionsRequest(topic=topic)
    return list(stubs.admin.ListSubscriptions(req, timeout=30).subscriptions)


def test_closing_twice_or_a_stranger_is_fine_and_names_are_checked(
    stubs: Stubs, topic: str
) -> None:
    close(stubs, topic, "nobody", subscription="never-made")
    consume(stubs, topic, "a", pb.EXCLUSIVE)
    close(stubs, topic, "a")
    close(stubs, topic, "a")
    with pytest.raises(grpc.RpcError) as info:
        close(stubs, topic, "a", subscription="__compaction")
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as info:
        close(stubs, "no-such-topic-" + topic, "a")
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_closing_on_a_partitioned_name_releases_every_partition(
    stubs: Stubs, unique_topic: str
) -> None:
    req = pb.CreateTopicRequest(name=unique_topic, partitions=2)
    stubs.admin.CreateTopic(req, timeout=30)
    parts = [partition_name(unique_topic, i) for i in range(2)]
    for part in parts:
        stubs.publish(part, *pairs(1))
        assert len(consume(stubs, part, "a", pb.EXCLUSIVE)) == 1
    close(stubs, unique_topic, "a")
    for part in parts:
        assert len(consume(stubs, part, "b", pb.EXCLUSIVE)) == 1
