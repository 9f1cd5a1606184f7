"""``Log.ConsumeStream`` over raw gRPC: Consume pushed within the consumer's flow permits.

The server never gives a stream more messages than the permits it was sent; the stream's
end, however it comes (half-close, cancel, the consumer process killed), releases the
consumer as CloseConsumer does; errors are Consume's; a partitioned ``NAME`` and a
sharded server's front serve it as they serve Consume.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess, Stubs

REPO = Path(__file__).resolve().parents[2]


class Stream:
    """One ConsumeStream: flows sent from a queue, responses read one at a time."""

    def __init__(self, stubs: Stubs, start: pb.ConsumeRequest, permits: int) -> None:
        self.flows: queue.Queue[pb.ConsumeFlow | None] = queue.Queue()
        self.flows.put(pb.ConsumeFlow(topic=start.topic, start=start, permits=permits))
        self.topic = start.topic
        self.call = stubs.log.ConsumeStream(self._flows(), timeout=60)

    def _flows(self) -> Iterator[pb.ConsumeFlow]:
        while (flow := self.flows.get()) is not None:
            yield flow

    def permit(self, permits: int) -> None:
        self.flows.put(pb.ConsumeFlow(topic=self.topic, permits=permits))

    def take(self, count: int) -> list[int]:
        """The entry ids of the next ``count`` messages (whole responses)."""
        got: list[int] = []
        while len(got) < count:
            got += [m.id.entry_id for m in next(self.call).messages]
        return got

    def half_close(self) -> None:
        self.flows.put(None)


def start_of(topic: str, name: str, sub_type: int, sub: str = "sub") -> pb.ConsumeRequest:
    return pb.ConsumeRequest(
        topic=topic,
        subscription=sub,
        consumer_name=name,
        subscription_type=sub_type,  # type: ignore[arg-type]
    )


def consume(stubs: Stubs, topic: str, name: str, sub_type: int, wait_ms: int = 0) -> list[int]:
    req = start_of(topic, name, sub_type)
    req.max_messages, req.wait_ms = 1000, wait_ms
    return [m.id.entry_id for m in stubs.log.Consume(req, timeout=30).messages]


def publish(stubs: Stubs, topic: str, count: int) -> None:
    records = [pb.Record(value=b"v%d" % i) for i in range(count)]
    stubs.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)


@pytest.fixture
def stubs(shared_server: ServerProcess, connect: Callable[[str], Stubs]) -> Stubs:
    return connect(shared_server.address)


@pytest.fixture
def topic(stubs: Stubs, unique_topic: str) -> str:
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic), timeout=30)
    publish(stubs, unique_topic, 30)
    return unique_topic


def test_a_stream_holds_no_more_than_its_permits(stubs: Stubs, topic: str) -> None:
    stream = Stream(stubs, start_of(topic, "a", pb.SHARED), permits=10)
    first = stream.take(10)
    assert len(first) == 10
    stream.permit(5)
    second = stream.take(5)
    assert len(second) == 5
    # Another consumer of the subscription gets exactly what the stream was not given.
    rest = consume(stubs, topic, "b", pb.SHARED)
    assert sorted(first + second + rest) == list(range(30))
    assert len(rest) == 15
    stream.half_close()


def test_a_response_carries_the_rest_of_its_stored_batch(stubs: Stubs, unique_topic: str) -> None:
    """Permits that run out inside a stored batch (one publish) get the rest of it in the
    same response, up to the start's ``max_messages``, as Pulsar's broker dispatches whole
    entries: the permits go below zero and the next flows pay that back first, so the
    stream holds at most its permits and one response more."""
    topic = unique_topic
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=topic), timeout=30)
    for _ in range(4):
        publish(stubs, topic, 10)  # stored batches 0-9, 10-19, 20-29, 30-39
    start = start_of(topic, "a", pb.SHARED)
    start.max_messages = 10
    stream = Stream(stubs, start, permits=10)
    assert stream.take(10) == list(range(10))
    stream.permit(4)
    assert stream.take(4) == list(range(10, 20))  # one response, the batch whole: -6
    stream.permit(4)  # -2: nothing goes out
    stream.permit(4)  # 2
    assert stream.take(1) == list(range(20, 30))  # -8
    # The last batch was not the stream's: another consumer gets it.
    assert consume(stubs, topic, "b", pb.SHARED) == list(range(30, 40))
    stream.half_close()


def test_a_waiting_stream_is_woken_by_a_publish(stubs: Stubs, topic: str) -> None:
    stream = Stream(stubs, start_of(topic, "a", pb.EXCLUSIVE), permits=100)
    assert stream.take(30) == list(range(30))
    publish(stubs, topic, 3)
    assert stream.take(3) == [30, 31, 32]
    stream.half_close()


def test_a_half_closed_stream_frees_the_subscription(stubs: Stubs, topic: str) -> None:
    stream = Stream(stubs, start_of(topic, "a", pb.EXCLUSIVE), permits=10)
    assert stream.take(10) == list(range(10))
    stream.half_close()
    assert list(stream.call) == []  # the server ends its side too
    # The next consumer takes over at once and gets the unacknowledged ones again.
    assert consume(stubs, topic, "b", pb.EXCLUSIVE, wait_ms=5000) == list(range(30))


def test_a_killed_consumers_shared_messages_go_to_another(
    stubs: Stubs, topic: str, shared_server: ServerProcess
) -> None:
    script = textwrap.dedent(f"""
        import grpc, sys
        from compactlog.v1 import compactlog_pb2 as pb, compactlog_pb2_grpc as pb_grpc
        start = pb.ConsumeRequest(topic={topic!r}, subscription="sub", consumer_name="a",
                                  subscription_type=pb.SHARED)
        flows = iter([pb.ConsumeFlow(topic={topic!r}, start=start, permits=10)])
        def forever():
            yield from flows
            import threading; threading.Event().wait()
        call = pb_grpc.LogStub(grpc.insecure_channel({shared_server.address!r})).ConsumeStream(
            forever())
        got = 0
        for resp in call:
            got += len(resp.messages)
            if got >= 10:
                print(got, flush=True)
                break
        import threading; threading.Event().wait()
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "10"
        assert consume(stubs, topic, "b", pb.SHARED) == list(range(10, 30))
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # The killed consumer's ten are due for the others at once, not after 30 s.
    assert consume(stubs, topic, "b", pb.SHARED, wait_ms=10_000) == list(range(10))


def test_errors_are_consumes(stubs: Stubs, topic: str) -> None:
    assert consume(stubs, topic, "holder", pb.EXCLUSIVE)
    busy = Stream(stubs, start_of(topic, "other", pb.EXCLUSIVE), permits=10)
    with pytest.raises(grpc.RpcError) as caught:
        busy.take(1)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "EXCLUSIVE" in (caught.value.details() or "")
    reserved = Stream(stubs, start_of(topic, "a", pb.SHARED, sub="__compaction"), permits=1)
    with pytest.raises(grpc.RpcError) as caught:
        reserved.take(1)
    assert "reserved" in (caught.value.details() or "")


def test_a_stream_without_start_is_malformed(stubs: Stubs, topic: str) -> None:
    call = stubs.log.ConsumeStream(iter([pb.ConsumeFlow(topic=topic, permits=5)]), timeout=30)
    with pytest.raises(grpc.RpcError) as caught:
        next(call)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_partitioned_name_streams_every_partition(stubs: Stubs, unique_topic: str) -> None:
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic, partitions=3), timeout=30)
    for i in range(12):
        record = pb.Record(key=b"k%d" % i, value=b"v%d" % i)
        stubs.log.Publish(pb.PublishRequest(topic=unique_topic, records=[record]), timeout=30)
    stream = Stream(stubs, start_of(unique_topic, "a", pb.SHARED), permits=100)
    got: list[pb.Message] = []
    while len(got) < 12:
        got += next(stream.call).messages
    assert sorted(m.value for m in got) == sorted(b"v%d" % i for i in range(12))
    assert len({m.id.partition for m in got}) > 1
    stream.half_close()


@pytest.fixture(scope="module")
def sharded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = ServerProcess(tmp_path_factory.mktemp("sharded") / "data", None, ["--shards", "2"])
    yield srv.start()
    srv.kill()


def test_the_front_relays_streams_to_each_owner(
    sharded_server: ServerProcess, connect: Callable[[str], Stubs]
) -> None:
    stubs = connect(sharded_server.address)
    topics = ["front-a", "front-b", "front-d", "front-e"]  # slots 0, 0, 1, 1
    for name in topics:
        stubs.admin.CreateTopic(pb.CreateTopicRequest(name=name), timeout=30)
        publish(stubs, name, 20)
    streams = [Stream(stubs, start_of(name, "a", pb.SHARED), permits=5) for name in topics]
    for stream in streams:
        assert stream.take(5) == list(range(5))
        stream.permit(15)
        assert stream.take(15) == list(range(5, 20))
        stream.half_close()
        assert list(stream.call) == []
    # Permits held through the front: a second consumer gets what no stream was given.
    held = Stream(stubs, start_of(topics[0], "a", pb.SHARED, sub="held"), permits=7)
    assert held.take(7) == list(range(7))
    req = start_of(topics[0], "b", pb.SHARED, sub="held")
    req.max_messages = 100
    assert [m.id.entry_id for m in stubs.log.Consume(req, timeout=30).messages] == list(
        range(7, 20)
    )
    held.half_close()
