"""``TableView`` (CONTRACT section 13, issue 16 item 3) against a real server process:
bootstrap from the compacted view, the raw tail after it without a gap or a duplicate,
tombstones, listeners, and a compaction that commits while the view bootstraps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from compactlog.client import Client, Message, MessageId, TableView
from compactlog.client.reader import Reader, StartLike
from compactlog.client.table_view import Source
from compactlog.partitioner import partition_for_key


@pytest.fixture
def client(shared_server) -> Iterator[Client]:  # type: ignore[no-untyped-def]
    with Client(shared_server.address, timeout=30) as c:
        yield c


@pytest.fixture
def topic(client: Client, unique_topic: str) -> str:
    client.create_topic(unique_topic)
    return unique_topic


def wait_for(check: Callable[[], bool], seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.02)


def test_bootstrap_then_tail_with_tombstones(client: Client, topic: str) -> None:
    producer = client.create_producer(topic)
    for i in range(20):
        producer.send(f"old{i}".encode(), partition_key=f"k{i}")
    producer.send(None, partition_key="k0")
    client.compact(topic, wait=True)
    producer.send(b"new1", partition_key="k1")  # raw tail after the horizon
    producer.send(b"", partition_key="k2")  # an empty value deletes on LEDGER topics
    producer.send(b"keyless")

    with client.create_table_view(topic) as table:
        assert len(table) == 18 and "k0" not in table and "k2" not in table
        assert table.get("k1") == b"new1" and table.get(b"k3") == b"old3" and "k3" in table
        assert table.get("nope") is None
        seen: dict[str, bytes | None] = {}
        table.for_each(lambda k, v: seen.__setitem__(k, v))
        assert seen == {f"k{i}": f"old{i}".encode() for i in range(3, 20)} | {"k1": b"new1"}

        producer.send(b"again", partition_key="k0")
        producer.send(None, partition_key="k5")
        wait_for(lambda: "k0" in table and "k5" not in table)
        assert table.get("k0") == b"again" and len(table) == 18
    assert table.failure is None


def test_for_each_and_listen_sees_every_change_once_in_order(client: Client, topic: str) -> None:
    producer = client.create_producer(topic)
    producer.send(b"1", partition_key="a")
    table = client.create_table_view(topic)
    events: list[tuple[str, bytes | None]] = []
    lock = threading.Lock()

    def record(key: str, value: bytes | None) -> None:
        with lock:
            events.append((key, value))

    table.for_each_and_listen(record)
    expected = [("a", b"1")]
    for i in range(50):
        producer.send(str(i).encode(), partition_key="b" if i % 2 else "a")
        expected.append(("b" if i % 2 else "a", str(i).encode()))
    producer.send(None, partition_key="a")
    producer.send(None, partition_key="never-there")  # no change, no event
    expected.append(("a", None))
    wait_for(lambda: len(events) >= len(expected))
    time.sleep(0.2)
    assert events == expected  # no gap, no duplicate, log order
    table.close()


def test_segmented_empty_value_is_a_value(client: Client, unique_topic: str) -> None:
    client.create_topic(unique_topic, kind="segmented")
    producer = client.create_producer(unique_topic)
    producer.send(b"", partition_key="empty")
    producer.send(b"x", partition_key="gone")
    producer.send(None, partition_key="gone")
    with client.create_table_view(unique_topic) as table:
        assert table.get("empty") == b"" and "gone" not in table and len(table) == 1


def test_compaction_committing_during_bootstrap_leaves_no_gap(client: Client, topic: str) -> None:
    """A compaction commits after the bootstrap read has handed out its first response: the
    view is read again, and deletions the new compacted ledger dropped are not missed."""
    producer = client.create_producer(topic)
    big = b"v" * 2048  # enough that the compacted view spans many responses
    producer.send_batch([(f"k{i}", big) for i in range(2000)])
    client.compact(topic, wait=True)
    producer.send_batch([(f"k{i}", None) for i in range(1000, 2000)])  # tombstones
    producer.send_batch([(f"k{i}", b"new") for i in range(10)])
    reads: list[tuple[StartLike, bool, bool]] = []

    def open_read(start: StartLike, compacted: bool, follow: bool) -> Reader:
        reader = client.reader(topic, start, read_compacted=compacted, follow=follow)
        reads.append((start, compacted, follow))
        if len(reads) == 1:
            reader._batches = compacting_after_first(reader._batches)  # type: ignore[method-assign]
        return reader

    def compacting_after_first(batches: Iterator[list[Message]]) -> Iterator[list[Message]]:
        for i, batch in enumerate(batches):
            yield batch
            if i == 0:
                assert client.compact(topic, wait=True).state == "SUCCESS"

    source = Source(open_read, lambda: client.compaction_status(topic))
    with TableView(topic, [source], empty_is_tombstone=True) as table:
        assert [r[1:] for r in reads] == [(True, False), (True, False), (False, True)]
        horizon = client.compaction_status(topic).horizon
        assert horizon is not None and reads[-1][0] == MessageId.of(horizon).next()
        assert len(table) == 1000
        assert all(f"k{i}" not in table for i in range(1000, 2000))
        assert [table.get(f"k{i}") for i in (0, 9, 10, 999)] == [b"new", b"new", big, big]
        after = producer.send(b"tail", partition_key="k1500")
        wait_for(lambda: "k1500" in table)
        assert table.get("k1500") == b"tail" and len(table) == 1001 and after > horizon


def test_partitioned_topic_is_one_table(client: Client, unique_topic: str) -> None:
    client.create_topic(unique_topic, partitions=3)
    producer = client.create_producer(unique_topic)
    ids = [producer.send(f"v{i}".encode(), partition_key=f"k{i}") for i in range(30)]
    assert len({i.partition() for i in ids}) == 3  # the keys spread over the partitions
    producer.send(None, partition_key="k0")
    client.compact(unique_topic, wait=True)
    with client.create_table_view(unique_topic) as table:
        assert len(table) == 29 and "k0" not in table and table.get("k7") == b"v7"
        producer.send(b"new", partition_key="k0")
        producer.send(None, partition_key="k1")
        wait_for(lambda: "k0" in table and "k1" not in table)
        assert len(table) == 29


def test_a_partitioned_view_follows_partitions_added_later(
    client: Client, unique_topic: str
) -> None:
    """As Pulsar's TableView: partitions added after the view was made are noticed and read
    from their earliest message; listeners hear of their keys; their tails are followed."""
    client.create_topic(unique_topic, partitions=2)
    client.create_producer(unique_topic).send(b"old", partition_key="k-old")
    heard: dict[str, bytes | None] = {}
    with client.create_table_view(unique_topic, partitions_update_interval_seconds=0.2) as table:
        table.for_each_and_listen(lambda k, v: heard.__setitem__(k, v))
        assert table.keys() == ["k-old"]
        assert client.add_partitions(unique_topic, 4).partitions == 4
        keys = {p: next(f"k{i}" for i in range(1000) if routes(f"k{i}", 4) == p) for p in (2, 3)}
        producer = client.create_producer(unique_topic)  # routes over the 4 partitions
        for p, key in keys.items():
            assert producer.send(f"v{p}".encode(), partition_key=key).partition() == p
        wait_for(lambda: all(key in table for key in keys.values()))
        assert {k: table.get(k) for k in keys.values()} == {keys[2]: b"v2", keys[3]: b"v3"}
        wait_for(lambda: keys[3] in heard)
        assert heard == {"k-old": b"old", keys[2]: b"v2", keys[3]: b"v3"}
        producer.send(None, partition_key=keys[3])  # the new partition's tail is followed
        wait_for(lambda: keys[3] not in table)
        assert heard[keys[3]] is None and len(table) == 2


def routes(key: str, partitions: int) -> int:
    return partition_for_key(key.encode(), partitions)
