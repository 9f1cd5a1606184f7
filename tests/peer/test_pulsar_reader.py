"""Port of Pulsar's ``ReaderTest`` (pulsar-broker, org.apache.pulsar.client.impl): behaviour
only, through compactlog's client against a real server. A reader reads from earliest,
latest or after an id (that id too when inclusive), says whether messages are left,
seeks to an id or a time, and reads one partition by its name."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from compactlog.client import Client, MessageId, Timeout
from compactlog.client.topic_reader import TopicReader
from tests.conftest import ServerProcess

from .pulsar_fixtures import make_topic, publish, values


@pytest.fixture
def client(shared_server: ServerProcess) -> Iterator[Client]:
    with Client(shared_server.address) as c:
        yield c


def read_all(reader: TopicReader) -> list[str]:
    got = []
    while reader.has_message_available():
        got.append(reader.read_next(10_000))
    return values(got)


def test_read_message_from_earliest(client: Client, unique_topic: str) -> None:
    """ReaderTest.testReadMessageWithoutBatching: every key read once, in order."""
    topic = make_topic(client, unique_topic)
    publish(client, topic, 10)
    reader = client.create_reader(topic, MessageId.earliest)
    assert read_all(reader) == [f"test-{i}" for i in range(10)]
    with pytest.raises(Timeout):
        reader.read_next(200)
    reader.close()


def test_read_after_an_id_inclusive_or_not(client: Client, unique_topic: str) -> None:
    """ReaderTest.testReadMessageWithBatchingWithMessageInclusive and its exclusive twin."""
    topic = make_topic(client, unique_topic)
    ids = publish(client, topic, 10)
    after = client.create_reader(topic, ids[4])
    inclusive = client.create_reader(topic, ids[4], start_message_id_inclusive=True)
    assert read_all(after) == [f"test-{i}" for i in range(5, 10)]
    assert read_all(inclusive) == [f"test-{i}" for i in range(4, 10)]
    after.close()
    inclusive.close()


def test_has_message_available(client: Client, unique_topic: str) -> None:
    """ReaderTest.testReaderHasMessageAvailable / testHasMessageAvailableOnEmptyTopic:
    false on an empty topic and from latest, true while messages are left, false once
    all are read, true again after a new one."""
    topic = make_topic(client, unique_topic)
    empty = client.create_reader(topic, MessageId.earliest)
    assert not empty.has_message_available()
    publish(client, topic, 3)
    latest = client.create_reader(topic, MessageId.latest)
    assert not latest.has_message_available()
    assert empty.has_message_available()
    assert read_all(empty) == ["test-0", "test-1", "test-2"]
    assert not empty.has_message_available()
    publish(client, topic, 1, "more-")
    assert empty.has_message_available()
    assert latest.has_message_available()
    assert values([latest.read_next(10_000)]) == ["more-0"]
    empty.close()
    latest.close()


def test_reader_seek_to_an_id_and_a_time(client: Client, unique_topic: str) -> None:
    """ReaderTest.testReaderSeek... / testReaderWithTimeLong: after a seek the reader
    reads from the id (inclusive as it was made), from earliest again, or from the
    first message published at or after a time."""
    topic = make_topic(client, unique_topic)
    ids = publish(client, topic, 5)
    cut = int(time.time() * 1000) + 1
    time.sleep(0.01)
    publish(client, topic, 5, "late-")
    reader = client.create_reader(topic, MessageId.earliest, start_message_id_inclusive=True)
    assert values([reader.read_next(10_000) for _ in range(7)])[-1] == "late-1"
    reader.seek(ids[2])
    assert values([reader.read_next(10_000)]) == ["test-2"]
    reader.seek(MessageId.earliest)
    assert values([reader.read_next(10_000)]) == ["test-0"]
    reader.seek(cut)
    assert values([reader.read_next(10_000) for _ in range(5)]) == [f"late-{i}" for i in range(5)]
    with pytest.raises(Timeout):
        reader.read_next(200)
    reader.close()


def test_has_message_available_after_a_seek_to_a_time(client: Client, unique_topic: str) -> None:
    """After ``seek(time)`` the reader answers for that start, not for the earliest: a
    time past the last message has nothing available until something is published."""
    topic = make_topic(client, unique_topic)
    publish(client, topic, 3)
    cut = int(time.time() * 1000) + 1
    time.sleep(0.01)
    reader = client.create_reader(topic, MessageId.earliest)
    assert reader.has_message_available()
    reader.seek(cut)
    assert not reader.has_message_available()
    publish(client, topic, 1, "late-")
    assert reader.has_message_available()
    assert values([reader.read_next(10_000)]) == ["late-0"]
    assert not reader.has_message_available()
    reader.seek(0)  # every message is at or after the epoch
    assert reader.has_message_available()
    assert values([reader.read_next(10_000)]) == ["test-0"]
    reader.close()


def test_read_from_one_partition(client: Client, unique_topic: str) -> None:
    """ReaderTest.testReadFromPartition: a reader of NAME-partition-i reads only that
    partition, its ids naming it."""
    topic = make_topic(client, unique_topic, 3)
    ids = publish(client, topic, 30)
    mine = [i for i in ids if i.partition() == 1]
    reader = client.create_reader(f"{topic}-partition-1", MessageId.earliest)
    got = [reader.read_next(10_000) for _ in mine]
    assert [m.message_id() for m in got] == mine
    assert not reader.has_message_available()
    reader.close()
