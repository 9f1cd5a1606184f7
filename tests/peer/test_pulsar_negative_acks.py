"""Port of Pulsar's ``NegativeAcksTest`` (pulsar-broker, org.apache.pulsar.client.impl):
behaviour only, through compactlog's client against a real server. Every message
negatively acknowledged comes again, once, after the delay, on plain and partitioned
topics, Shared and Failover, with and without an ack timeout; each redelivery counts
(``Message.redelivery_count``, what Pulsar's dead-letter policy reads)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compactlog.client import Client, ConsumerType, InitialPosition, Timeout
from tests.conftest import ServerProcess

from .pulsar_fixtures import drain, make_topic, publish, values

N = 10
VARIATIONS = [
    # partitions, subscription type, negative ack delay ms, ack timeout ms
    (0, ConsumerType.Shared, 100, 0),
    (0, ConsumerType.Failover, 100, 0),
    (2, ConsumerType.Shared, 100, 0),
    (2, ConsumerType.Failover, 100, 0),
    (0, ConsumerType.Shared, 0, 1000),
    (0, ConsumerType.Failover, 0, 1000),
    (2, ConsumerType.Shared, 0, 1000),
    (2, ConsumerType.Failover, 0, 1000),
]


@pytest.fixture
def client(shared_server: ServerProcess) -> Iterator[Client]:
    with Client(shared_server.address) as c:
        yield c


@pytest.mark.parametrize(("partitions", "sub_type", "delay_ms", "ack_timeout_ms"), VARIATIONS)
def test_negative_acks(
    client: Client,
    unique_topic: str,
    partitions: int,
    sub_type: ConsumerType,
    delay_ms: int,
    ack_timeout_ms: int,
) -> None:
    """NegativeAcksTest.testNegativeAcks (its batching axis does not apply: a publish is
    one stored batch either way)."""
    topic = make_topic(client, unique_topic, partitions)
    consumer = client.subscribe(
        topic,
        "sub1",
        consumer_type=sub_type,
        negative_ack_redelivery_delay_ms=delay_ms,
        unacked_messages_timeout_ms=ack_timeout_ms or None,
    )
    sent = {f"test-{i}" for i in range(N)}
    publish(client, topic, N)
    for _ in range(N):
        consumer.negative_acknowledge(consumer.receive(10_000))
    again = [consumer.receive(10_000) for _ in range(N)]
    for msg in again:
        consumer.acknowledge(msg)
    assert set(values(again)) == sent
    assert [m.redelivery_count() for m in again] == [1] * N
    with pytest.raises(Timeout):
        consumer.receive(100)
    consumer.close()


def test_each_negative_ack_counts_one_redelivery(client: Client, unique_topic: str) -> None:
    """NegativeAcksTest's redelivery, repeated as DeadLetterTopicTest does: the count
    grows by one each time the same message is negatively acknowledged."""
    topic = make_topic(client, unique_topic)
    consumer = client.subscribe(
        topic, "sub1", consumer_type=ConsumerType.Shared, negative_ack_redelivery_delay_ms=0
    )
    publish(client, topic, 1)
    counts = []
    for _ in range(4):
        msg = consumer.receive(10_000)
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
    msg = consumer.receive(10_000)
    consumer.acknowledge(msg)
    assert [*counts, msg.redelivery_count()] == [0, 1, 2, 3, 4]
    assert drain(consumer, 200) == []
    consumer.close()


def test_negative_ack_of_a_message_acknowledged_since_sends_nothing(
    client: Client, unique_topic: str
) -> None:
    """NegativeAcksTest.testNegativeAcksDeleteFromUnackedTracker, as a user sees it: a
    message acknowledged after its negative acknowledgement does not come again."""
    topic = make_topic(client, unique_topic)
    consumer = client.subscribe(
        topic,
        "sub1",
        consumer_type=ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=300,
        initial_position=InitialPosition.Earliest,
    )
    publish(client, topic, 2)
    first, second = consumer.receive(10_000), consumer.receive(10_000)
    consumer.negative_acknowledge(first)
    consumer.negative_acknowledge(second)
    consumer.acknowledge(first)
    again = drain(consumer, 1000)
    assert [(m.message_id(), m.redelivery_count()) for m in again] == [(second.message_id(), 1)]
    consumer.close()
