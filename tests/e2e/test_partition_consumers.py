"""A Consume on a partitioned topic's own name holds the subscription types as each of
its partitions does (CONTRACT sections 6 and 9): the name's subscription is its
partitions' subscriptions, each with its own dispatcher. EXCLUSIVE refuses a second
consumer, SHARED splits the messages with none given twice, FAILOVER spreads the
partitions over its consumers in name order (Pulsar's rule) and hands them over at a
close, and a subscription keeps its type."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compactlog.client import Client, ConsumerBusy, ConsumerType, MessageId
from tests.conftest import ServerProcess
from tests.peer.pulsar_fixtures import drain, make_topic, publish

PARTITIONS = 4


@pytest.fixture
def client(shared_server: ServerProcess) -> Iterator[Client]:
    with Client(shared_server.address) as c:
        yield c


@pytest.fixture
def topic(client: Client, unique_topic: str) -> str:
    return make_topic(client, unique_topic, PARTITIONS)


def test_exclusive_refuses_a_second_consumer(client: Client, topic: str) -> None:
    first = client.subscribe(topic, "s", consumer_type=ConsumerType.Exclusive)
    with pytest.raises(ConsumerBusy):
        client.subscribe(topic, "s", consumer_type=ConsumerType.Exclusive)
    first.close()
    second = client.subscribe(topic, "s", consumer_type=ConsumerType.Exclusive)
    second.close()


def test_exclusive_on_one_partition_refuses_the_name(client: Client, topic: str) -> None:
    holder = client.subscribe(f"{topic}-partition-2", "s", consumer_type=ConsumerType.Exclusive)
    with pytest.raises(ConsumerBusy):
        client.subscribe(topic, "s", consumer_type=ConsumerType.Exclusive)
    holder.close()


def test_shared_consumers_split_the_messages(client: Client, topic: str) -> None:
    one = client.subscribe(topic, "s", consumer_type=ConsumerType.Shared, receiver_queue_size=5)
    two = client.subscribe(topic, "s", consumer_type=ConsumerType.Shared, receiver_queue_size=5)
    ids = publish(client, topic, 40)
    got_one, got_two = [one.receive(10_000)], drain(two, 500)
    got_one += drain(one, 500)
    assert got_one and got_two
    seen = [m.message_id() for m in got_one + got_two]
    assert sorted(seen) == sorted(ids)  # every message once, none twice
    one.close()
    two.close()


def test_a_subscription_keeps_its_type(client: Client, topic: str) -> None:
    shared = client.subscribe(topic, "s", consumer_type=ConsumerType.Shared)
    with pytest.raises(ConsumerBusy):
        client.subscribe(topic, "s", consumer_type=ConsumerType.Failover)
    shared.close()


def test_failover_spreads_partitions_and_hands_them_over(client: Client, topic: str) -> None:
    a = client.subscribe(topic, "s", consumer_type=ConsumerType.Failover, consumer_name="a")
    b = client.subscribe(topic, "s", consumer_type=ConsumerType.Failover, consumer_name="b")
    ids = publish(client, topic, 40)
    got_a, got_b = drain(a, 1000), drain(b, 1000)

    def partitions(ids: list[MessageId]) -> set[int]:
        return {i.partition() for i in ids}

    # names in order a, b: partitions 0 and 2 to a, 1 and 3 to b
    assert partitions([m.message_id() for m in got_a]) == {0, 2}
    assert partitions([m.message_id() for m in got_b]) == {1, 3}
    assert sorted(m.message_id() for m in got_a + got_b) == sorted(ids)
    for msg in got_b[:2]:
        b.acknowledge(msg)
    b.close()
    taken = drain(a, 1000)
    assert partitions([m.message_id() for m in taken]) == {1, 3}
    assert sorted(m.message_id() for m in taken) == sorted(m.message_id() for m in got_b[2:])
    assert {m.redelivery_count() for m in taken} == {1}
    a.close()
