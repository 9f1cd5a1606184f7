"""pulsar-client's signatures and defaults (CONTRACT section 13), against a real server:
code written for pulsar-client (positional ``properties``, ``send_async`` callbacks,
``Latest`` as the initial position, a list of topics) runs unchanged, and a setting that
means nothing here fails at once instead of being silently dropped."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from compactlog.client import (
    Client,
    InitialPosition,
    MessageId,
    MultiTopicConsumer,
    Result,
    Timeout,
)
from compactlog.errors import InvalidArgument
from tests.conftest import ServerProcess


@pytest.fixture
def client(shared_server: ServerProcess) -> Iterator[Client]:
    with Client("compactlog://" + shared_server.address, operation_timeout_seconds=20) as c:
        yield c


@pytest.fixture
def topic(client: Client, unique_topic: str) -> str:
    client.create_topic(unique_topic)
    return unique_topic


def test_send_takes_properties_second(client: Client, topic: str) -> None:
    producer = client.create_producer(topic)
    msg_id = producer.send(b"v", {"a": "b"})
    reader = client.create_reader(topic, MessageId.earliest)
    msg = reader.read_next(5000)
    assert msg.message_id() == msg_id and msg.properties() == {"a": "b"}
    assert msg.partition_key() is None and msg.redelivery_count() == 0
    assert msg.ordering_key() is None


def test_send_async_calls_back_in_order_and_flush_waits(client: Client, topic: str) -> None:
    producer = client.create_producer(topic, producer_name="p1", initial_sequence_id=9)
    assert producer.producer_name() == "p1" and producer.last_sequence_id() == 9
    results: list[tuple[object, MessageId | None]] = []
    lock = threading.Lock()

    def callback(res: object, msg_id: MessageId | None) -> None:
        with lock:
            results.append((res, msg_id))

    for i in range(5):
        producer.send_async(b"v%d" % i, callback, partition_key=f"k{i}")
    producer.flush()
    assert [r for r, _ in results] == [Result.Ok] * 5
    ids = [m for _, m in results]
    assert ids == sorted(ids) and len(set(ids)) == 5  # in order, one id each
    assert producer.last_sequence_id() == 14
    assert (
        client.create_producer(topic).producer_name()
        != client.create_producer(topic).producer_name()
    )


def test_parameters_without_meaning_take_only_pulsars_default(client: Client, topic: str) -> None:
    client.create_producer(topic, chunking_enabled=False, compression_type=None).close()
    with pytest.raises(InvalidArgument) as info:
        client.create_producer(topic, chunking_enabled=True)
    assert "chunking_enabled" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(InvalidArgument):
        client.subscribe(topic, "s", message_listener=print)
    with pytest.raises(InvalidArgument):
        client.create_producer(topic).send(b"v", ordering_key="o")
    with pytest.raises(InvalidArgument):
        Client("127.0.0.1:1", io_threads=4)


def test_a_new_subscription_starts_at_the_latest_by_default(client: Client, topic: str) -> None:
    producer = client.create_producer(topic)
    producer.send(b"before")
    consumer = client.subscribe(topic, "latest")
    with pytest.raises(Timeout):
        consumer.receive(300)
    after = producer.send(b"after")
    assert consumer.receive(5000).message_id() == after


def test_subscribe_to_a_list_of_topics(client: Client, unique_topic: str) -> None:
    names = [unique_topic + "-a", unique_topic + "-b"]
    for name in names:
        client.create_topic(name)
        client.create_producer(name).send(name.encode())
    consumer = client.subscribe(names, "many", initial_position=InitialPosition.Earliest)
    assert isinstance(consumer, MultiTopicConsumer)
    got = [consumer.receive(5000) for _ in names]
    assert sorted(m.value() for m in got) == sorted(n.encode() for n in names)
    for msg in got:
        consumer.acknowledge(msg)
    with pytest.raises(Timeout):
        consumer.receive(300)
    consumer.close()  # its acks are stored, and its threads end now, not at some gc


def test_consumer_seek_redeliver_last_id_and_unsubscribe(client: Client, topic: str) -> None:
    producer = client.create_producer(topic)
    ids = [producer.send(b"v%d" % i) for i in range(3)]
    consumer = client.subscribe(topic, "moving", initial_position=InitialPosition.Earliest)
    assert consumer.is_connected() and consumer.get_last_message_id() == ids[-1]
    assert [consumer.receive(5000).message_id() for _ in ids] == ids
    consumer.redeliver_unacknowledged_messages()
    assert consumer.receive(5000).message_id() == ids[0]  # nothing was acknowledged
    consumer.seek(ids[2])
    assert consumer.receive(5000).message_id() == ids[2]
    consumer.seek(MessageId.earliest)
    assert consumer.receive(5000).message_id() == ids[0]
    consumer.unsubscribe()
    assert not consumer.is_connected()
    assert "moving" not in [s.name for s in client.list_subscriptions(topic)]
