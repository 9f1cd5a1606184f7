"""The client library against the real server process (``shared_server`` unless it restarts)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from compactlog import errors
from compactlog.client import (
    Client,
    InitialPosition,
    Message,
    MessageId,
    Record,
    ServerUnreachable,
    Timeout,
    TopicInfo,
)


@pytest.fixture
def client(shared_server) -> Iterator[Client]:  # type: ignore[no-untyped-def]
    with Client(shared_server.address, timeout=30) as c:
        yield c


@pytest.fixture
def topic(client: Client, unique_topic: str) -> str:
    client.create_topic(unique_topic)
    return unique_topic


def kv(messages: list[Message]) -> list[tuple[bytes | None, bytes | None]]:
    return [(m.key, m.value) for m in messages]


def test_round_trip_keeps_every_field(client: Client, topic: str) -> None:
    producer = client.producer(topic)
    first = producer.send("k1", "v1", properties={"a": "b"}, event_time_ms=1234)
    tomb = producer.send(b"k2", None)
    keyless = producer.send(None, b"\x00\xff")
    empty = producer.send("k3", b"")
    assert first < tomb < keyless < empty
    assert (
        first.entry_id() == 0 and first.ledger_id() >= 1
    )  # LEDGER ids: ledger from 1, entry from 0

    got = list(client.reader(topic))
    assert [m.id for m in got] == [first, tomb, keyless, empty]
    assert kv(got) == [(b"k1", b"v1"), (b"k2", None), (None, b"\x00\xff"), (b"k3", b"")]
    assert got[0].properties == {"a": "b"} and got[0].event_time_ms == 1234
    assert got[0].publish_time_ms > 0
    assert got[1].is_tombstone and not got[2].is_tombstone
    assert client.get_last_message_id(topic) == empty


def test_send_batch_and_stream(client: Client, topic: str) -> None:
    producer = client.producer(topic)
    ids = producer.send_batch([Record(b"a", b"1"), ("b", "2"), ("c", "3", {"x": "y"}, 5)])
    assert ids == sorted(ids) and len(set(ids)) == 3
    batches = ([(f"k{i}-{j}", f"v{j}") for j in range(100)] for i in range(5))
    streamed = list(producer.send_stream(batches))
    assert [len(b) for b in streamed] == [100] * 5
    all_ids = ids + [i for b in streamed for i in b]
    assert all_ids == sorted(all_ids)
    assert [m.id for m in client.reader(topic)] == all_ids


def test_send_stream_bad_batch_keeps_earlier_ones(client: Client, topic: str) -> None:
    producer = client.producer(topic)
    seen: list[list[MessageId]] = []
    with pytest.raises(errors.InvalidArgument):
        for ids in producer.send_stream([[("a", "1")], [("b", 2)]]):  # type: ignore[list-item]
            seen.append(ids)
    assert len(seen) == 1
    assert kv(list(client.reader(topic))) == [(b"a", b"1")]


def test_reader_positions(client: Client, topic: str) -> None:
    ids = client.producer(topic).send_batch([(f"k{i}", str(i)) for i in range(10)])
    assert [m.id for m in client.reader(topic, start=ids[4])] == ids[4:]
    assert [m.id for m in client.reader(topic, start=tuple(ids[7]))] == ids[7:]  # type: ignore[arg-type]
    assert list(client.reader(topic, start="latest")) == []
    assert [m.id for m in client.reader(topic, max_messages=3)] == ids[:3]
    assert [m.id for m in client.reader(topic, start=ids[2], max_messages=2)] == ids[2:4]
    assert [m.id for m in client.reader(topic, start_timestamp_ms=0)] == ids
    future = int(time.time() * 1000) + 3_600_000
    assert list(client.reader(topic, start_timestamp_ms=future)) == []
    # Before any compaction a compacted read is the raw log.
    assert [m.id for m in client.reader(topic, read_compacted=True)] == ids
    assert client.get_last_message_id(topic, read_compacted=True) == ids[-1]


def test_follow_sees_new_messages_and_close_ends_it(client: Client, topic: str) -> None:
    producer = client.producer(topic)
    producer.send("a", "1")
    received: list[Message] = []
    with client.reader(topic, follow=True) as reader:

        def publish_later() -> None:
            time.sleep(0.3)
            producer.send("b", "2")

        threading.Thread(target=publish_later, daemon=True).start()
        for msg in reader:
            received.append(msg)
            if len(received) == 2:
                break
    assert kv(received) == [(b"a", b"1"), (b"b", b"2")]
    assert reader.last_id == received[-1].id

    idle = client.reader(topic, start="latest", follow=True)
    threading.Timer(0.3, idle.close).start()
    started = time.monotonic()
    assert list(idle) == []
    assert time.monotonic() - started < 10


def test_subscribe_receive_acknowledge(client: Client, topic: str) -> None:
    ids = client.producer(topic).send_batch([(f"k{i}", str(i)) for i in range(5)])
    with client.subscribe(
        topic, "sub-a", receiver_queue_size=2, initial_position=InitialPosition.Earliest
    ) as consumer:
        got = [consumer.receive(timeout_ms=5000) for _ in range(3)]
        assert [m.id for m in got] == ids[:3]
        consumer.acknowledge_cumulative(got[2])
        rest = consumer.batch_receive(max_messages=10, timeout_ms=1000)
        rest += consumer.batch_receive(max_messages=10, timeout_ms=1000)
        assert [m.id for m in rest] == ids[3:]
        for msg in rest:
            consumer.acknowledge(msg)
        with pytest.raises(Timeout):
            consumer.receive(timeout_ms=200)
    with pytest.raises(errors.CompactlogError):
        consumer.receive(timeout_ms=10)  # closed
    # Everything acked: a new consumer on the same subscription has nothing to get.
    with client.subscribe(topic, "sub-a", initial_position=InitialPosition.Earliest) as again:
        assert again.batch_receive(timeout_ms=200) == []
    # A new subscription starts at the earliest message by default, or at the end.
    with client.subscribe(topic, "sub-b", initial_position=InitialPosition.Earliest) as other:
        assert other.receive(timeout_ms=5000).id == ids[0]
    late = client.subscribe(topic, "sub-c", initial_position="latest")
    assert late.batch_receive(timeout_ms=200) == []
    new_id = client.producer(topic).send("k9", "9")
    assert late.receive(timeout_ms=5000).id == new_id


def test_receive_waits_for_a_message(client: Client, topic: str) -> None:
    consumer = client.subscribe(topic, "waiter", initial_position=InitialPosition.Earliest)
    later = threading.Timer(0.3, lambda: client.producer(topic).send("k", "v"))
    later.start()
    assert consumer.receive().value == b"v"
    later.join()  # its reply may come after the message: don't close the client under it


def test_admin_calls(client: Client, unique_topic: str) -> None:
    info = client.create_topic(unique_topic, config={"ledger.max.entries": 2})
    assert isinstance(info, TopicInfo)
    assert info.name == unique_topic and info.kind == "ledger"
    assert info.config["ledger.max.entries"] == "2"
    assert "retention.ms" in info.config  # defaults included
    assert unique_topic in {t.name for t in client.list_topics()}

    client.producer(unique_topic).send_batch([("a", "1")] * 5)
    stats = client.get_topic(unique_topic).stats
    assert stats.entries == 5 and stats.ledgers >= 2
    assert stats.first_id is not None and stats.last_id is not None

    updated = client.update_topic_config(unique_topic, set={"retention.ms": 60000})
    assert updated.config["retention.ms"] == "60000"
    reverted = client.update_topic_config(unique_topic, remove=["retention.ms"])
    assert reverted.config["retention.ms"] == "-1"
    assert client.enforce_retention(unique_topic).name == unique_topic

    client.delete_topic(unique_topic)
    with pytest.raises(errors.TopicNotFound):
        client.get_topic(unique_topic)


def test_segmented_topic_kind(client: Client, unique_topic: str) -> None:
    info = client.create_topic(unique_topic, kind="segmented")
    assert info.kind == "segmented"
    first = client.producer(unique_topic).send("k", "v")
    assert first == MessageId(ledger_id=0, entry_id=0)


def test_empty_topic(client: Client, topic: str) -> None:
    assert client.get_last_message_id(topic) is None
    assert list(client.reader(topic)) == []


@pytest.mark.parametrize(
    "call",
    [
        lambda c, t: c.get_topic(t),
        lambda c, t: c.delete_topic(t),
        lambda c, t: c.update_topic_config(t, set={"retention.ms": 1}),
        lambda c, t: c.get_last_message_id(t),
        lambda c, t: c.producer(t).send("k", "v"),
        lambda c, t: list(c.reader(t)),
        lambda c, t: c.subscribe(t, "s", initial_position=InitialPosition.Earliest).receive(
            timeout_ms=100
        ),
        lambda c, t: c.enforce_retention(t),
    ],
)
def test_unknown_topic(client: Client, unique_topic: str, call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(errors.TopicNotFound, match=unique_topic):
        call(client, unique_topic)


def test_duplicate_create(client: Client, topic: str) -> None:
    with pytest.raises(errors.TopicExists, match=topic):
        client.create_topic(topic)


@pytest.mark.parametrize("name", ["../x", "a/b", "", "x" * 250, "a\x00b", ".", "..", "a b"])
def test_bad_names(client: Client, name: str) -> None:
    with pytest.raises(errors.InvalidArgument):
        client.create_topic(name)
    assert name not in {t.name for t in client.list_topics()}


def test_bad_config(client: Client, unique_topic: str) -> None:
    with pytest.raises(errors.InvalidConfig):
        client.create_topic(unique_topic, config={"no.such.key": "1"})
    with pytest.raises(errors.InvalidConfig):
        client.create_topic(unique_topic, config={"ledger.max.entries": "many"})
    with pytest.raises(errors.InvalidArgument):
        client.create_topic(unique_topic, kind="queue")
    with pytest.raises(errors.TopicNotFound):
        client.get_topic(unique_topic)


def test_record_too_large_stores_nothing(client: Client, unique_topic: str) -> None:
    client.create_topic(unique_topic, config={"max.message.bytes": 1024})
    with pytest.raises((errors.RecordTooLarge, errors.ResourceExhausted), match="1024"):
        client.producer(unique_topic).send_batch([("a", "small"), ("b", b"x" * 4096)])
    assert list(client.reader(unique_topic)) == []


def test_server_not_reachable() -> None:
    with Client("127.0.0.1:1") as c, pytest.raises(ServerUnreachable, match=r"127\.0\.0\.1:1"):
        c.list_topics()
    with Client("127.0.0.1:1") as c, pytest.raises(ServerUnreachable):
        list(c.reader("t"))


def test_closed_client_refuses_calls(shared_server) -> None:  # type: ignore[no-untyped-def]
    c = Client(shared_server.address)
    c.close()
    c.close()
    with pytest.raises(errors.CompactlogError, match="closed"):
        c.list_topics()


def test_compact_and_read_compacted(client: Client, topic: str) -> None:
    ids = client.producer(topic).send_batch([("c", "1"), ("a", "2"), ("b", "3"), ("a", "4")])
    status = client.compact(topic, wait=True)
    assert status.state == "SUCCESS"
    assert status.last_run is not None and status.last_run.kept == 3
    assert client.compaction_status(topic).state == "SUCCESS"
    view = list(client.reader(topic, read_compacted=True))
    assert [(m.id, m.key) for m in view] == [(ids[0], b"c"), (ids[2], b"b"), (ids[3], b"a")]
    assert len(list(client.reader(topic))) == 4  # raw history kept


@pytest.mark.slow
def test_acks_and_ids_survive_restart(server) -> None:  # type: ignore[no-untyped-def]
    with Client(server.address, timeout=30) as c:
        c.create_topic("durable")
        ids = c.producer("durable").send_batch([(f"k{i}", str(i)) for i in range(4)])
        consumer = c.subscribe("durable", "s", initial_position=InitialPosition.Earliest)
        assert consumer.receive(timeout_ms=5000).id == ids[0]
        consumer.acknowledge(ids[0])
        consumer.acknowledge(ids[2])
    server.restart()
    with Client(server.address, timeout=30) as c:
        assert [m.id for m in c.reader("durable")] == ids
        consumer = c.subscribe("durable", "s", initial_position=InitialPosition.Earliest)
        got = [m.id for m in consumer.batch_receive(max_messages=10, timeout_ms=2000)]
        assert got == [ids[1], ids[3]]


def test_a_new_consumer_gets_unacknowledged_messages_again(
    client: Client, unique_topic: str
) -> None:
    client.create_topic(unique_topic)
    client.producer(unique_topic).send_batch([(b"k", b"%d" % i) for i in range(4)])
    first = client.subscribe(unique_topic, "sub", initial_position=InitialPosition.Earliest)
    got = [first.receive(timeout_ms=2000) for _ in range(3)]
    first.acknowledge(got[0])
    first.close()  # 1 and 2 were delivered but never acknowledged
    second = client.subscribe(unique_topic, "sub", initial_position=InitialPosition.Earliest)
    again = [second.receive(timeout_ms=2000).value for _ in range(3)]
    assert again == [b"1", b"2", b"3"]
