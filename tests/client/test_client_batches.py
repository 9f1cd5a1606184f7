"""Whole responses and batched sends (issue 29): ``Message`` over the wire message,
``batch_receive`` a response at a time, readers and consumers across many responses,
and ``send_async`` gathered into PublishStream requests, against a real server."""

from __future__ import annotations

import asyncio
import gc
import pickle
import threading
import time
import weakref
from collections.abc import Iterator

import pytest

from compactlog.client import (
    Client,
    ConsumerBatchReceivePolicy,
    InitialPosition,
    Message,
    MessageId,
    RecordTooLarge,
    Result,
    _publish_py,
    publish_wire,
    send_batches,
)
from compactlog.client.aio import AsyncClient
from compactlog.client.message import _UNSET, messages_of
from compactlog.client.topic_producer import TopicProducer
from compactlog.errors import CompactlogError
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess

Outcome = tuple[object, MessageId | None]


@pytest.fixture
def client(shared_server: ServerProcess) -> Iterator[Client]:
    with Client(shared_server.address, timeout=30) as c:
        yield c


@pytest.fixture
def topic(client: Client, unique_topic: str) -> str:
    client.create_topic(unique_topic, config={"max.message.bytes": 4096})
    return unique_topic


class Outcomes:
    """``send_async`` callbacks, in the order they were called."""

    def __init__(self) -> None:
        self.got: list[Outcome] = []
        self.lock = threading.Lock()

    def __call__(self, result: object, msg_id: MessageId | None) -> None:
        with self.lock:
            self.got.append((result, msg_id))


def test_a_message_over_the_wire_converts_each_field_once() -> None:
    resp = pb.ReadResponse()
    wire = resp.messages.add(key=b"k", value=b"v", publish_time_ms=5, event_time_ms=6)
    wire.id.ledger_id, wire.id.entry_id = 3, 4
    wire.properties["a"] = "b"
    (msg,) = messages_of(resp.messages, "t")
    assert msg.data() == b"v" and msg._value is _UNSET and msg._id is _UNSET
    assert msg.message_id() is msg.message_id() == MessageId(ledger_id=3, entry_id=4)
    assert msg.properties() == {"a": "b"} and msg.partition_key() == "k"
    assert (msg.publish_timestamp(), msg.event_timestamp(), msg.topic_name()) == (5, 6, "t")
    assert msg.redelivery_count() == 0
    eager = Message((3, 4), b"k", b"v", {"a": "b"}, 5, 6, "t")
    assert msg == eager and pickle.loads(pickle.dumps(msg)) == eager
    assert "ledger_id=3" in repr(msg)


def test_empty_and_absent_keys_and_values_stay_apart_over_the_wire() -> None:
    # An empty key or value is present (b"", ""); an absent one is None: the accessors
    # ask the wire for presence only when the bytes are empty
    resp = pb.ReadResponse()
    resp.messages.add(key=b"", value=b"")
    resp.messages.add()
    resp.messages.add(key=b"k\xff", value=b"v")
    for accessors in ("pulsar", "fields"):
        empty, absent, full = messages_of(resp.messages, "t")
        if accessors == "pulsar":
            assert (empty.partition_key(), empty.data()) == ("", b"")
            assert (absent.partition_key(), absent.data()) == (None, None)
            assert (full.partition_key(), full.data()) == ("k\udcff", b"v")
        else:
            assert (empty.key, empty.value()) == (b"", b"")
            assert (absent.key, absent.value()) == (None, None)
            assert absent.is_tombstone is False and empty.is_tombstone is False
            assert (full.key, full.value()) == (b"k\xff", b"v")


def test_batch_receive_returns_a_response_at_a_time(client: Client, topic: str) -> None:
    ids = client.producer(topic).send_batch([(f"k{i}", b"v") for i in range(250)])
    consumer = client.subscribe(
        topic, "s", initial_position=InitialPosition.Earliest, receiver_queue_size=100
    )
    batches = [consumer.batch_receive() for _ in range(3)]
    assert [len(b) for b in batches] == [100, 100, 50]
    assert [m.message_id() for b in batches for m in b] == ids
    consumer.acknowledge_cumulative(batches[-1][-1])
    assert consumer.batch_receive(timeout_ms=100) == []
    consumer.close()


def test_batch_receive_policy_caps_a_batch(client: Client, topic: str) -> None:
    client.producer(topic).send_batch([(f"k{i}", b"x" * 100) for i in range(20)])
    policy = ConsumerBatchReceivePolicy(5, -1, 100)
    consumer = client.subscribe(
        topic, "s", initial_position=InitialPosition.Earliest, batch_receive_policy=policy
    )
    assert len(consumer.batch_receive()) == 5
    consumer.close()
    by_bytes = ConsumerBatchReceivePolicy(-1, 250, 100)
    consumer = client.subscribe(
        topic, "s2", initial_position=InitialPosition.Earliest, batch_receive_policy=by_bytes
    )
    assert len(consumer.batch_receive()) == 2  # a third 100 B value would pass 250 B
    empty = client.subscribe(
        topic, "s3", initial_position=InitialPosition.Latest, batch_receive_policy=policy
    )
    started = time.monotonic()
    assert empty.batch_receive() == []  # the policy's 100 ms ran out
    assert time.monotonic() - started < 5


def test_receive_across_prefetched_responses_then_redeliver(client: Client, topic: str) -> None:
    """The Consume that goes ahead while the application works is dropped, not lost,
    when the application asks for redelivery: everything unacknowledged comes again."""
    ids = client.producer(topic).send_batch([(f"k{i}", b"v") for i in range(700)])
    consumer = client.subscribe(
        topic, "s", initial_position=InitialPosition.Earliest, receiver_queue_size=200
    )
    got = [consumer.receive(5000) for _ in range(350)]  # past the low water mark twice
    assert [m.message_id() for m in got] == ids[:350]
    consumer.acknowledge_cumulative(got[149])
    consumer.redeliver_unacknowledged_messages()
    again = [consumer.receive(5000).message_id() for _ in range(550)]
    assert again == ids[150:]


def test_async_receive_across_prefetched_responses_then_redeliver_seek_and_close(
    client: Client, topic: str, shared_server: ServerProcess
) -> None:
    """The asyncio consumer's Consume ahead is dropped, not lost, on a redelivery, a seek
    and a close: everything unacknowledged comes again, to it or to the next consumer."""
    ids = client.producer(topic).send_batch([(f"k{i}", b"v") for i in range(700)])

    async def scenario() -> tuple[list[MessageId], ...]:
        async with AsyncClient(shared_server.address, timeout=30) as aio:
            consumer = await aio.subscribe(
                topic, "s", initial_position=InitialPosition.Earliest, receiver_queue_size=200
            )
            got = [await consumer.receive(5000) for _ in range(350)]
            await consumer.acknowledge_cumulative(got[149])
            consumer.redeliver_unacknowledged_messages()  # a Consume is ahead now
            again = [(await consumer.receive(5000)).message_id() for _ in range(550)]
            await consumer.seek(ids[200])
            batch = await consumer.batch_receive()  # full: the next Consume goes ahead
            await consumer.close()
            nxt = await aio.subscribe(topic, "s", receiver_queue_size=1000)
            rest = await nxt.batch_receive()
            await nxt.close()
            return (
                [m.message_id() for m in got],
                again,
                [m.message_id() for m in batch],
                [m.message_id() for m in rest],
            )

    got, again, batch, rest = asyncio.run(scenario())
    assert got == ids[:350] and again == ids[150:]
    assert batch == ids[200:400] and rest == ids[200:]  # nothing acknowledged since the seek


def test_reader_reads_across_responses_and_skips_its_start(client: Client, topic: str) -> None:
    big = b"b" * 3000  # about 1,400 messages a 4 MiB response: several responses
    ids = client.producer(topic).send_batch([(f"k{i}", big) for i in range(3000)])
    reader = client.create_reader(topic, ids[10])
    got = [reader.read_next(5000).message_id() for _ in range(len(ids) - 11)]
    assert got == ids[11:] and not reader.has_message_available()
    reader.close()


def test_send_async_batches_in_order_and_calls_each_back(client: Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=300)
    outcomes = Outcomes()
    for i in range(1000):
        producer.send_async(b"v%d" % i, outcomes, partition_key=f"k{i}")
    producer.flush()
    assert [r for r, _ in outcomes.got] == [Result.Ok] * 1000
    ids = [m for _, m in outcomes.got]
    assert ids == sorted(ids) and len(set(ids)) == 1000  # each its own id, in order
    after = producer.send(b"last")  # a send waits for the sends queued before it
    assert after > ids[-1] and producer.last_sequence_id() == 1000
    read = [m.data() for m in client.reader(topic)]
    assert read == [b"v%d" % i for i in range(1000)] + [b"last"]


def test_an_idle_producer_keeps_no_thread(
    client: Client, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sending thread ends ``IDLE_S`` after its stream, and the next send starts
    another: a producer dropped without ``close`` kept its thread, and so itself, for as
    long as the process lived."""
    monkeypatch.setattr(send_batches, "IDLE_S", 0.05)
    producer = client.create_producer(topic)

    def send_one(producer: TopicProducer, value: bytes) -> threading.Thread:
        before = set(threading.enumerate())
        outcomes = Outcomes()
        producer.send_async(value, outcomes)
        producer.flush()
        assert [r for r, _ in outcomes.got] == [Result.Ok]
        (thread,) = [t for t in set(threading.enumerate()) - before if t.name == "compactlog-send"]
        return thread

    first = send_one(producer, b"a")
    first.join(timeout=10)
    assert not first.is_alive()
    second = send_one(producer, b"b")  # a new thread for the next send
    assert [m.data() for m in client.reader(topic)] == [b"a", b"b"]
    dropped = weakref.ref(producer)
    del producer  # never closed
    second.join(timeout=10)
    assert not second.is_alive()
    gc.collect()
    assert dropped() is None


@pytest.mark.parametrize("twin", ["compiled", "pure"])
def test_send_async_from_many_threads_keeps_each_threads_order(
    client: Client, topic: str, twin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each thread's sends go out in its order, every one is called back once, the
    sequence counts them all, and a callback may send without waiting for itself; with
    either twin of the request writer (the pure one locks where the compiled one has the
    GIL)."""
    if twin == "pure":
        monkeypatch.setattr(publish_wire, "Pending", _publish_py.Pending)
        monkeypatch.setattr(publish_wire, "call_back", _publish_py.call_back)
    producer = client.create_producer(topic)
    outcomes = Outcomes()
    from_callback = Outcomes()

    def send_more(result: object, msg_id: MessageId | None) -> None:
        outcomes(result, msg_id)
        producer.send_async(b"from-callback", from_callback)

    def sender(t: int) -> None:
        for i in range(2000):
            producer.send_async(b"%d-%d" % (t, i), outcomes, partition_key=f"k{i}")

    threads = [threading.Thread(target=sender, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    producer.send_async(b"calls-back", send_more)
    for thread in threads:
        thread.join()
    producer.flush()
    assert len(outcomes.got) == 8001 and {r for r, _ in outcomes.got} == {Result.Ok}
    assert len({m for _, m in outcomes.got}) == 8001
    producer.flush()  # the callback's send, begun before this flush
    assert [r for r, _ in from_callback.got] == [Result.Ok]
    assert producer.last_sequence_id() == 8001
    values = [m.data() for m in client.reader(topic)]
    for t in range(4):
        mine = [v for v in values if v is not None and v.startswith(b"%d-" % t)]
        assert mine == [b"%d-%d" % (t, i) for i in range(2000)]


def test_the_publish_delay_holds_a_request_until_full_or_flushed(
    client: Client, topic: str
) -> None:
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=3, batching_max_publish_delay_ms=60_000
    )
    outcomes = Outcomes()
    producer.send_async(b"1", outcomes)
    time.sleep(0.3)
    assert outcomes.got == []  # waiting for more, up to a minute
    producer.send_async(b"2", outcomes)
    producer.send_async(b"3", outcomes)  # a full request goes at once
    deadline = time.monotonic() + 10
    while len(outcomes.got) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [r for r, _ in outcomes.got] == [Result.Ok] * 3
    producer.send_async(b"4", outcomes)
    producer.flush()  # sends what waits
    assert len(outcomes.got) == 4


def test_a_failed_request_fails_each_of_its_sends_and_later_ones_go_on(
    client: Client, topic: str
) -> None:
    producer = client.create_producer(topic)
    outcomes = Outcomes()
    producer.send_async(b"ok", outcomes)
    producer.flush()
    producer.send_async(b"x" * 10_000, outcomes)  # over max.message.bytes
    producer.flush()
    producer.send_async(b"after", outcomes)
    producer.close()  # flushes
    results = [r for r, _ in outcomes.got]
    assert results[0] is Result.Ok and isinstance(results[1], RecordTooLarge)
    assert outcomes.got[1][1] is None and results[2] is Result.Ok
    assert [m.data() for m in client.reader(topic)] == [b"ok", b"after"]
    with pytest.raises(CompactlogError):
        producer.send_async(b"closed", outcomes)


def test_send_async_keeps_properties_times_tombstones_and_a_raising_callbacks_turn(
    client: Client, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Messages with properties or an event time (serialized by protobuf) keep their
    place among the plain ones; a callback that raises is logged and the next is called."""
    producer = client.create_producer(topic, batching_max_allowed_size_in_bytes=250)
    outcomes = Outcomes()

    def raising(result: object, msg_id: MessageId | None) -> None:
        outcomes(result, msg_id)
        raise RuntimeError("the application's bug")

    producer.send_async(b"x" * 100, outcomes, partition_key="a")
    producer.send_async("ü" * 50, raising, {"p": "1"}, partition_key=b"b", event_timestamp=7)
    producer.send_async(None, outcomes, partition_key="a")  # a tombstone
    producer.send_async(bytearray(b"last"), outcomes, sequence_id=41)
    producer.flush()
    assert [r for r, _ in outcomes.got] == [Result.Ok] * 4
    assert "a send_async callback raised" in caplog.text
    assert producer.last_sequence_id() == 41
    ids = [m for _, m in outcomes.got]
    read = list(client.reader(topic))
    assert [m.message_id() for m in read] == ids and ids == sorted(ids)
    assert [(m.partition_key(), m.data()) for m in read] == [
        ("a", b"x" * 100), ("b", "ü".encode() * 50), ("a", None), (None, b"last")
    ]  # fmt: skip
    assert read[1].properties() == {"p": "1"} and read[1].event_timestamp() == 7


def test_async_sends_begun_together_go_together(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    async def scenario() -> None:
        async with AsyncClient(shared_server.address) as client:
            await client.create_topic(unique_topic)
            producer = await client.create_producer(unique_topic)
            sends = [asyncio.create_task(producer.send(b"v%d" % i)) for i in range(500)]
            ids = await asyncio.gather(*sends)
            assert ids == sorted(ids) and len(set(ids)) == 500
            consumer = await client.subscribe(
                unique_topic, "s", initial_position=InitialPosition.Earliest
            )
            late = [asyncio.create_task(producer.send(b"late%d" % i)) for i in range(3)]
            await asyncio.sleep(0)  # the request is out before the flush
            await producer.flush()  # waits for the request already out, too
            last = await client.get_last_message_id(unique_topic)
            ids += await asyncio.gather(*late)
            assert last == ids[-1]
            batch = await consumer.batch_receive()
            assert [m.message_id() for m in batch] == ids[:500]  # the buffer, fetched before
            reader = await client.create_reader(unique_topic, MessageId.earliest)
            first = [(await reader.read_next(5000)).data() for _ in range(3)]
            assert first == [b"v0", b"v1", b"v2"]
            await reader.close()
            await consumer.close()
            await producer.close()

    asyncio.run(scenario())
