"""Port of Pulsar's ``SubscriptionSeekTest`` (pulsar-broker, org.apache.pulsar.broker.service):
behaviour only, through compactlog's client against a real server. ``consumer.seek``
moves the subscription (to latest, earliest, a message id inclusive, a publish time) and
the backlog follows; the consumer receives from the new position, with redelivery
counts starting again at 0; a partitioned topic's name seeks every partition."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from compactlog.client import Client, ConsumerType, MessageId, Timeout
from tests.conftest import ServerProcess

from .pulsar_fixtures import drain, make_topic, publish, values


@pytest.fixture
def client(shared_server: ServerProcess) -> Iterator[Client]:
    with Client(shared_server.address) as c:
        yield c


def backlog(client: Client, topic: str, subscription: str) -> int:
    found = [s for s in client.list_subscriptions(topic) if s.name == subscription]
    return sum(s.backlog for s in found)


def test_seek(client: Client, unique_topic: str) -> None:
    """SubscriptionSeekTest.testSeek: latest leaves no backlog, earliest all ten, a
    message id the messages from it on; an id before the first ledger is the earliest,
    one after the last ledger the latest."""
    topic = make_topic(client, unique_topic)
    consumer = client.subscribe(topic, "my-subscription", receiver_queue_size=1)
    ids = publish(client, topic, 10, "my-message-")
    assert backlog(client, topic, "my-subscription") == 10
    consumer.seek(MessageId.latest)
    assert backlog(client, topic, "my-subscription") == 0
    consumer.seek(MessageId.earliest)
    assert backlog(client, topic, "my-subscription") == 10
    consumer.seek(ids[5])
    assert backlog(client, topic, "my-subscription") == 5
    mid = ids[5]
    consumer.seek(MessageId(ledger_id=mid.ledger_id() - 1, entry_id=mid.entry_id()))
    assert backlog(client, topic, "my-subscription") == 10
    consumer.seek(MessageId(ledger_id=mid.ledger_id() + 1, entry_id=mid.entry_id()))
    assert backlog(client, topic, "my-subscription") == 0
    consumer.close()


def test_seek_then_receive_each_id(client: Client, unique_topic: str) -> None:
    """SubscriptionSeekTest.testSeekForBatch: after a seek to each id the next message
    received is that id; earliest gives the first, latest nothing."""
    topic = make_topic(client, unique_topic)
    ids = publish(client, topic, 10, "my-message-")
    consumer = client.subscribe(topic, "my-subscription-batch")
    consumer.seek(MessageId.earliest)
    assert values([consumer.receive(10_000)]) == ["my-message-0"]
    consumer.seek(MessageId.latest)
    with pytest.raises(Timeout):
        consumer.receive(1000)
    for mid in ids:
        consumer.seek(mid)
        assert consumer.receive(10_000).message_id() == mid
    consumer.close()


def test_seek_time(client: Client, unique_topic: str) -> None:
    """SubscriptionSeekTest.testSeekTime: a seek to now leaves no backlog, to 100 s
    before every message."""
    topic = make_topic(client, unique_topic)
    consumer = client.subscribe(topic, "my-subscription", receiver_queue_size=1)
    publish(client, topic, 10, "my-message-")
    assert backlog(client, topic, "my-subscription") == 10
    now = int(time.time() * 1000) + 1
    consumer.seek(now)
    assert backlog(client, topic, "my-subscription") == 0
    consumer.seek(now - 100_000)
    assert backlog(client, topic, "my-subscription") == 10
    consumer.close()


def test_seek_on_partitioned_topic(client: Client, unique_topic: str) -> None:
    """SubscriptionSeekTest.testSeekOnPartitionedTopic, and the time seek across its
    partitions: latest leaves nothing on any partition, a time before every message
    gives all of them again."""
    topic = make_topic(client, unique_topic, 2)
    consumer = client.subscribe(topic, "my-subscription", consumer_type=ConsumerType.Shared)
    publish(client, topic, 10)
    consumer.seek(MessageId.latest)
    assert backlog(client, topic, "my-subscription") == 0
    assert drain(consumer, 300) == []
    consumer.seek(int(time.time() * 1000) - 100_000)
    again = drain(consumer, 500)
    assert sorted(values(again)) == sorted(f"test-{i}" for i in range(10))
    consumer.close()


def test_seek_starts_redelivery_counts_again(client: Client, unique_topic: str) -> None:
    """After a seek the messages come again as new: Pulsar clears a subscription's
    redelivery tracker when its cursor is reset."""
    topic = make_topic(client, unique_topic)
    consumer = client.subscribe(
        topic, "s", consumer_type=ConsumerType.Shared, negative_ack_redelivery_delay_ms=0
    )
    ids = publish(client, topic, 3)
    first = consumer.receive(10_000)
    consumer.negative_acknowledge(first)
    seen = drain(consumer, 500)
    assert (first.message_id(), 1) in [(m.message_id(), m.redelivery_count()) for m in seen]
    consumer.seek(ids[0])
    again = drain(consumer, 500)
    assert [m.message_id() for m in again] == ids
    assert [m.redelivery_count() for m in again] == [0, 0, 0]
    consumer.close()
