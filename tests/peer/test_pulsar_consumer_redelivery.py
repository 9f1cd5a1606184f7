"""Port of Pulsar's ``ConsumerRedeliveryTest`` (pulsar-broker, org.apache.pulsar.client.api):
behaviour only, through compactlog's client against a real server. Messages given out
and not acknowledged come again in order, on request, to the next consumer after a
close, and after an ack timeout, each time counted in ``Message.redelivery_count``; an
unload (here: a restart) redelivers everything unacknowledged with counts back at 0, as
Pulsar's in-memory redelivery tracker does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compactlog.client import Client, ConsumerType, InitialPosition, Timeout
from tests.conftest import ServerProcess

from .pulsar_fixtures import drain, make_topic, publish, values

EARLIEST = InitialPosition.Earliest


@pytest.fixture
def client(shared_server: ServerProcess) -> Iterator[Client]:
    with Client(shared_server.address) as c:
        yield c


def test_ordered_redelivery(client: Client, unique_topic: str) -> None:
    """ConsumerRedeliveryTest.testOrderedRedelivery: 40 messages over 20 ledgers, every
    other one acknowledged; the rest come again in ledger order when asked for, and again
    to a new consumer once the first closes."""
    topic = make_topic(client, unique_topic, **{"ledger.max.entries": 2})
    producer = client.create_producer(topic)
    ids = [producer.send(f"my-message-{i}".encode()) for i in range(40)]
    assert len({i.ledger_id() for i in ids}) == 20
    first = client.subscribe(
        topic, "s1", consumer_type=ConsumerType.Shared, initial_position=EARLIEST
    )
    unacked = []
    for n in range(40):
        msg = first.receive(10_000)
        if n % 2 == 0:
            first.acknowledge(msg)
        else:
            unacked.append(msg.message_id())
    first.redeliver_unacknowledged_messages()
    again = [first.receive(10_000) for _ in range(20)]
    assert [m.message_id() for m in again] == unacked
    assert {m.redelivery_count() for m in again} == {1}
    first.close()
    second = client.subscribe(topic, "s1", consumer_type=ConsumerType.Shared)
    third = drain(second, 500)
    assert [m.message_id() for m in third] == unacked
    assert {m.redelivery_count() for m in third} == {2}
    second.close()


def test_unacked_message_redelivery_after_the_ack_timeout(
    client: Client, unique_topic: str
) -> None:
    """ConsumerRedeliveryTest.testUnAckMessageRedeliveryWithReceiveAsync: ten messages
    received and not acknowledged come again after the ack timeout."""
    topic = make_topic(client, unique_topic)
    consumer = client.subscribe(topic, "s1", unacked_messages_timeout_ms=1000)
    publish(client, topic, 10, "my-message-")
    once = [consumer.receive(10_000) for _ in range(10)]
    twice = [consumer.receive(10_000) for _ in range(10)]
    for msg in twice:
        consumer.acknowledge(msg)
    assert values(twice) == values(once) == [f"my-message-{i}" for i in range(10)]
    assert [m.redelivery_count() for m in once + twice] == [0] * 10 + [1] * 10
    with pytest.raises(Timeout):
        consumer.receive(1500)
    consumer.close()


def test_queued_messages_go_to_the_consumer_with_room(client: Client, unique_topic: str) -> None:
    """ConsumerRedeliveryTest.testConsumerWithPermitReceiveBatchMessages: on a Shared
    subscription a consumer with a full queue takes no more; a second consumer gets the
    rest, and nothing is given to both."""
    topic = make_topic(client, unique_topic)
    one = client.subscribe(
        topic,
        "s",
        consumer_type=ConsumerType.Shared,
        receiver_queue_size=10,
        initial_position=EARLIEST,
    )
    two = client.subscribe(topic, "s", consumer_type=ConsumerType.Shared, receiver_queue_size=10)
    publish(client, topic, 30)
    got_one = [one.receive(10_000)]  # its queue takes 10 of the 30
    got_two = drain(two, 500)
    got_one += drain(one, 500)
    for consumer, got in ((one, got_one), (two, got_two)):
        for msg in got:
            consumer.acknowledge(msg)
    assert (len(got_one), len(got_two)) == (10, 20)
    assert sorted(values(got_one) + values(got_two)) == sorted(f"test-{i}" for i in range(30))
    one.close()
    two.close()


def test_failover_takeover_counts_the_unacknowledged(client: Client, unique_topic: str) -> None:
    """ConsumerRedeliveryTest.testOrderedRedelivery's close and resubscribe, on a Failover
    subscription: the standby receives what the active consumer was given and left
    unacknowledged, in order and counted once, then what was published after at 0. (The
    active consumer takes every message there is, 4, so its read-ahead, as pulsar-client's
    flow permits, has nothing more to take.)"""
    topic = make_topic(client, unique_topic)
    active = client.subscribe(
        topic, "s", consumer_type=ConsumerType.Failover, consumer_name="a", receiver_queue_size=4
    )
    standby = client.subscribe(topic, "s", consumer_type=ConsumerType.Failover, consumer_name="b")
    ids = publish(client, topic, 4)
    received = [active.receive(10_000) for _ in range(4)]
    active.acknowledge(received[0])
    active.close()
    ids += publish(client, topic, 2)
    got = drain(standby, 500)
    assert [m.message_id() for m in got] == ids[1:]
    assert [m.redelivery_count() for m in got] == [1, 1, 1, 0, 0]
    standby.close()


def test_redelivery_after_a_restart_with_earliest_position(
    server: ServerProcess, unique_topic: str
) -> None:
    """ConsumerRedeliveryTest.testMessageRedeliveryAfterUnloadedWithEarliestPosition,
    with a restart for Pulsar's unload: a Shared consumer that acknowledged nothing gets
    all 100 messages again, counted from 0 (the counts live in memory, as Pulsar's)."""
    with Client(server.address) as client:
        topic = make_topic(client, unique_topic)
        publish(client, topic, 100, "Hello - ")
        consumer = client.subscribe(
            topic,
            "my-subscriber-name",
            consumer_type=ConsumerType.Shared,
            initial_position=EARLIEST,
        )
        first = [consumer.receive(10_000) for _ in range(100)]
        assert drain(consumer, 1000) == []
        server.extra_args += ["--listen", server.address]  # back on the same address
        server.restart()
        again = [consumer.receive(30_000) for _ in range(100)]
        assert values(again) == values(first) == [f"Hello - {i}" for i in range(100)]
        assert {m.redelivery_count() for m in again} == {0}
        assert drain(consumer, 1000) == []
        consumer.close()
