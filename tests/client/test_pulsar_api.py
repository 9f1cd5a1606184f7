"""CONTRACT section 13: pulsar-client's names on the client, against a real server process.

Each test is one corner of the surface a pulsar-client user writes without a manual:
producer, consumer (types, acks, negative acks, timeouts), reader (start ids), message
accessors and ids. The TableView has its own file (test_table_view.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest

from compactlog import client as client_module
from compactlog.client import (
    Client,
    CompactlogError,
    ConsumerType,
    InitialPosition,
    MessageId,
    Timeout,
    TopicNotFound,
)


@pytest.fixture
def client(shared_server) -> Iterator[Client]:  # type: ignore[no-untyped-def]
    with Client(shared_server.address, token=None, tls_ca=None, timeout=30) as c:
        yield c


@pytest.fixture
def topic(client: Client, unique_topic: str) -> str:
    client.create_topic(unique_topic)
    return unique_topic


def test_send_returns_ids_and_messages_read_back_through_every_accessor(
    client: Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    first = producer.send(
        b"189.5", partition_key="AAPL", properties={"src": "x"}, event_timestamp=1234
    )
    keyless = producer.send("plain")
    tomb = producer.send(None, partition_key="AAPL")
    assert isinstance(first, MessageId) and first < keyless < tomb
    producer.close()

    reader = client.create_reader(topic, MessageId.earliest)
    got = [reader.read_next(timeout_millis=5000) for _ in range(3)]
    reader.close()
    msg = got[0]
    assert msg.message_id() == first and msg.data() == b"189.5" and msg.value() == b"189.5"
    assert msg.partition_key() == "AAPL" and msg.properties() == {"src": "x"}
    assert msg.event_timestamp() == 1234 and msg.publish_timestamp() > 0
    assert msg.topic_name() == topic
    assert got[1].partition_key() is None and got[1].value() == b"plain"
    assert got[1].event_timestamp() == got[1].publish_timestamp()  # none given: publish time
    assert got[2].message_id() == tomb and got[2].value() is None and got[2].data() is None
    # the older field spelling reads the same message
    assert (msg.id, msg.key, msg.value, msg.properties) == (first, b"AAPL", b"189.5", {"src": "x"})
    assert got[2].value == None and got[2].is_tombstone  # noqa: E711 - the field form


def test_subscribe_creates_the_subscription_at_once(client: Client, topic: str) -> None:
    producer = client.create_producer(topic)
    producer.send(b"before")
    consumer = client.subscribe(topic, "late", initial_position=InitialPosition.Latest)
    after = producer.send(b"after")  # published after subscribe, before the first receive
    msg = consumer.receive(timeout_millis=5000)
    assert msg.message_id() == after and msg.value() == b"after"
    consumer.close()


def test_receive_timeout_raises_timeout(client: Client, topic: str) -> None:
    consumer = client.subscribe(
        topic,
        "idle",
        consumer_type=ConsumerType.Exclusive,
        initial_position=InitialPosition.Earliest,
    )
    started = time.monotonic()
    with pytest.raises(Timeout):
        consumer.receive(timeout_millis=300)
    assert 0.25 <= time.monotonic() - started < 5
    assert issubclass(Timeout, CompactlogError)
    consumer.close()


def test_acknowledge_cumulative_and_redelivery_to_a_new_consumer(
    client: Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    ids = [producer.send(f"v{i}".encode(), partition_key=f"k{i}") for i in range(5)]
    consumer = client.subscribe(
        topic,
        "acks",
        ConsumerType.Exclusive,
        is_read_compacted=False,
        consumer_name="c1",
        initial_position=InitialPosition.Earliest,
    )
    got = [consumer.receive(timeout_millis=5000) for _ in range(5)]
    assert [m.message_id() for m in got] == ids
    consumer.acknowledge_cumulative(got[2])  # ids 0..2
    consumer.acknowledge(got[4].message_id())  # id 4 alone
    consumer.close()
    again = client.subscribe(
        topic, "acks", consumer_name="c1", initial_position=InitialPosition.Earliest
    )
    assert again.receive(timeout_millis=5000).message_id() == ids[3]
    with pytest.raises(Timeout):
        again.receive(timeout_millis=300)
    again.close()


def test_negative_acknowledge_redelivers_after_the_delay(client: Client, topic: str) -> None:
    producer = client.create_producer(topic)
    first = producer.send(b"1", partition_key="a")
    second = producer.send(b"2", partition_key="b")
    consumer = client.subscribe(
        topic,
        "nacks",
        negative_ack_redelivery_delay_ms=500,
        initial_position=InitialPosition.Earliest,
    )
    msg = consumer.receive(timeout_millis=5000)
    nacked_at = time.monotonic()
    consumer.negative_acknowledge(msg)
    assert consumer.receive(timeout_millis=5000).message_id() == second
    again = consumer.receive(timeout_millis=5000)
    assert again.message_id() == first and again.value() == b"1"
    assert time.monotonic() - nacked_at >= 0.45
    consumer.acknowledge(again)
    consumer.negative_acknowledge(second)  # by id, then acked before it is due
    consumer.acknowledge(second)
    with pytest.raises(Timeout):
        consumer.receive(timeout_millis=800)
    consumer.close()


def test_consumer_types_are_accepted(client: Client, topic: str) -> None:
    client.create_producer(topic).send(b"x", partition_key="k")
    for kind in ConsumerType:
        with client.subscribe(
            topic, f"sub-{kind.name}", consumer_type=kind, initial_position=InitialPosition.Earliest
        ) as consumer:
            assert consumer.consumer_type() is kind
            assert consumer.receive(timeout_millis=5000).value() == b"x"
    assert [k.name for k in ConsumerType] == ["Exclusive", "Shared", "Failover"]
    assert [p.name for p in InitialPosition] == ["Earliest", "Latest"]


def test_reader_start_ids_inclusive_exclusive_latest(client: Client, topic: str) -> None:
    producer = client.create_producer(topic)
    ids = [producer.send(str(i).encode(), partition_key=f"k{i}") for i in range(5)]

    def first_value(start: MessageId, inclusive: bool = False) -> bytes | None:
        with client.create_reader(topic, start, start_message_id_inclusive=inclusive) as r:
            return r.read_next(timeout_millis=5000).value()

    assert first_value(MessageId.earliest) == b"0"
    assert first_value(ids[2]) == b"3"  # after the id, as pulsar-client
    assert first_value(ids[2], inclusive=True) == b"2"
    assert first_value(MessageId.parse(str(ids[1]))) == b"2"
    latest = client.create_reader(topic, MessageId.latest)
    assert not latest.has_message_available()
    with pytest.raises(Timeout):
        latest.read_next(timeout_millis=300)
    new = producer.send(b"new", partition_key="k")
    assert latest.read_next(timeout_millis=5000).message_id() == new
    latest.close()


def test_has_message_available_follows_what_was_read(client: Client, topic: str) -> None:
    empty = client.create_reader(topic, MessageId.earliest)
    assert not empty.has_message_available()
    empty.close()
    producer = client.create_producer(topic)
    ids = [producer.send(b"v", partition_key=f"k{i}") for i in range(3)]
    reader = client.create_reader(topic, MessageId.earliest, is_read_compacted=True)
    seen = []
    while reader.has_message_available():
        seen.append(reader.read_next(timeout_millis=5000).message_id())
    assert seen == ids
    reader.close()
    at_last = client.create_reader(topic, ids[-1])
    assert not at_last.has_message_available()
    at_last.close()
    at_last_inclusive = client.create_reader(topic, ids[-1], start_message_id_inclusive=True)
    assert at_last_inclusive.has_message_available()
    at_last_inclusive.close()


def test_read_compacted_through_the_new_names(client: Client, topic: str) -> None:
    producer = client.create_producer(topic)
    for value in (b"1", b"2", b"3"):
        producer.send(value, partition_key="k")
    producer.send(b"gone", partition_key="dead")
    producer.send(None, partition_key="dead")
    client.compact(topic, wait=True)
    reader = client.create_reader(topic, MessageId.earliest, is_read_compacted=True)
    msg = reader.read_next(timeout_millis=5000)
    assert (msg.partition_key(), msg.value()) == ("k", b"3")
    assert not reader.has_message_available()
    reader.close()
    consumer = client.subscribe(
        topic, "compacted", is_read_compacted=True, initial_position=InitialPosition.Earliest
    )
    assert consumer.receive(timeout_millis=5000).value() == b"3"
    consumer.close()


def test_errors_are_classes_never_rpc_errors(client: Client) -> None:
    with pytest.raises(TopicNotFound) as info:
        client.create_producer("no-such-topic").send(b"x")
    assert not isinstance(info.value, grpc.RpcError)
    with pytest.raises(TopicNotFound):
        client.subscribe("no-such-topic", "s", initial_position=InitialPosition.Earliest)
    with pytest.raises(TopicNotFound):
        client.create_table_view("no-such-topic")
    reader = client.create_reader("no-such-topic", MessageId.earliest)
    with pytest.raises(TopicNotFound):
        reader.read_next(timeout_millis=5000)
    reader.close()
    for name in ("TopicNotFound", "RecordTooLarge", "ConsumerBusy", "NotDelivered", "Timeout"):
        assert issubclass(getattr(client_module, name), CompactlogError)


def test_close_everywhere(client: Client, topic: str) -> None:
    producer = client.create_producer(topic)
    producer.send(b"x", partition_key="k")
    consumer = client.subscribe(topic, "s", initial_position=InitialPosition.Earliest)
    reader = client.create_reader(topic, MessageId.earliest)
    table = client.create_table_view(topic)
    for thing in (producer, consumer, reader, table, client):
        thing.close()
        thing.close()  # twice is fine
    with pytest.raises(client_module.AlreadyClosed):
        producer.send(b"y")
    with pytest.raises(client_module.AlreadyClosed):
        reader.read_next(timeout_millis=10)
    with pytest.raises(client_module.AlreadyClosed):
        consumer.receive(timeout_millis=10)
    with pytest.raises(client_module.AlreadyClosed):
        client.create_producer(topic)


def test_closing_the_client_closes_what_it_made(shared_server, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    client = Client(shared_server.address)
    client.create_topic(unique_topic)
    producer = client.create_producer(unique_topic)
    producer.send(b"x", partition_key="k")
    consumer = client.subscribe(unique_topic, "s", initial_position=InitialPosition.Earliest)
    reader = client.create_reader(unique_topic, MessageId.earliest)
    table = client.create_table_view(unique_topic)
    client.close()
    with pytest.raises(client_module.AlreadyClosed):
        producer.send(b"y")
    with pytest.raises(client_module.AlreadyClosed):
        consumer.receive(timeout_millis=10)
    with pytest.raises(client_module.AlreadyClosed):
        reader.read_next(timeout_millis=10)
    assert table.get("k") == b"x" and table.failure is None  # stopped, not failed


def test_partitioned_topic_ids_carry_their_partition(client: Client, unique_topic: str) -> None:
    client.create_topic(unique_topic, partitions=3)
    producer = client.create_producer(unique_topic)
    sent = {producer.send(b"v", partition_key=f"k{i}") for i in range(12)}
    assert {mid.partition() for mid in sent} == {0, 1, 2}
    reader = client.create_reader(unique_topic, MessageId.earliest)
    got = {reader.read_next(timeout_millis=5000).message_id() for _ in range(12)}
    reader.close()
    assert got == sent
    for mid in got:
        assert MessageId.parse(str(mid)) == mid and MessageId.deserialize(mid.serialize()) == mid
        assert str(mid).count(":") == (2 if mid.partition() else 1)
