"""No call waits forever (CONTRACT section 12): the client's deadlines.

A server that is stopped (SIGSTOP: the kernel still completes TCP handshakes, nothing
answers) is the stuck server: every kind of call must end in ``Timeout`` within about
the client's ``timeout``. A follow read, once started, may wait for new messages for as
long as its caller wants.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from compactlog.client import Client, InitialPosition, Message, Timeout
from compactlog.client.aio import AsyncClient
from compactlog.client.consumer import Consumer
from compactlog.client.consumer_state import ConsumerState
from compactlog.client.deadlines import Watchdog
from compactlog.errors import ResourceExhausted
from compactlog.v1 import compactlog_pb2 as pb

TIMEOUT_S = 0.5
SLACK_S = 3.0  # a loaded 2-core machine: the call ends well before this


@pytest.fixture
def stopped(server: Any) -> Iterator[str]:
    """The address of a server process frozen with SIGSTOP (thawed at teardown)."""
    with Client(server.address) as c:
        c.create_topic("t")
        c.producer("t").send("k", "v")
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield server.address
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


CALLS: list[tuple[str, Callable[[Client], object]]] = [
    ("unary admin", lambda c: c.list_topics()),
    ("publish", lambda c: c.producer("t").send("k", "v")),
    ("publish stream", lambda c: list(c.producer("t").send_stream([[("k", "v")]]))),
    ("read", lambda c: list(c.reader("t"))),
    ("follow read", lambda c: next(iter(c.reader("t", follow=True)))),
    (
        "consume",
        lambda c: c.subscribe("t", "s", initial_position=InitialPosition.Earliest).receive(
            timeout_ms=100
        ),
    ),
]


@pytest.mark.parametrize("call", [c for _n, c in CALLS], ids=[n for n, _c in CALLS])
def test_every_call_to_a_stuck_server_times_out(
    stopped: str, call: Callable[[Client], object]
) -> None:
    with Client(stopped, timeout=TIMEOUT_S) as client:
        started = time.monotonic()
        with pytest.raises(Timeout):
            call(client)
        assert time.monotonic() - started < TIMEOUT_S + SLACK_S


def test_a_follow_read_outlives_the_timeout(shared_server: Any, unique_topic: str) -> None:
    """The deadline bounds the stream's start, not the wait for the next message."""
    with Client(shared_server.address, timeout=TIMEOUT_S) as client:
        client.create_topic(unique_topic)
        got: list[Message | BaseException] = []
        reader = client.reader(unique_topic, follow=True)

        def follow() -> None:
            try:
                got.append(next(iter(reader)))
            except BaseException as exc:
                got.append(exc)

        thread = threading.Thread(target=follow)
        thread.start()
        time.sleep(4 * TIMEOUT_S)
        client.producer(unique_topic).send("late", "1")
        thread.join(10)
        reader.close()
        assert len(got) == 1 and isinstance(got[0], Message) and got[0].key == b"late"


def test_client_default_timeout_is_30_s() -> None:
    with Client("127.0.0.1:1") as client:
        assert client.timeout == 30


def test_watchdog_fires_only_when_not_disarmed_in_time() -> None:
    dog = Watchdog()
    fired: list[str] = []
    try:
        dog.arm(1, 0.05, lambda: fired.append("late"))
        dog.arm(2, 0.05, lambda: fired.append("disarmed"))
        dog.arm(3, 0.05, lambda: fired.append("re-armed"))
        dog.disarm(2)
        time.sleep(0.02)
        dog.arm(3, 0.3, lambda: fired.append("re-armed"))
        time.sleep(0.15)
        assert fired == ["late"]
        time.sleep(0.3)
        assert fired == ["late", "re-armed"]
    finally:
        dog.close()


class FailingOnceStub:
    """A Log stub whose first Consume fails as a refused response would."""

    def __init__(self) -> None:
        self.requests: list[pb.ConsumeRequest] = []

    def Consume(self, req: pb.ConsumeRequest, timeout: float) -> pb.ConsumeResponse:
        self.requests.append(req)
        if len(self.requests) == 2:
            raise ResourceExhausted("response larger than the client takes")
        return pb.ConsumeResponse()


def test_after_a_failed_consume_the_consumer_asks_for_redelivery() -> None:
    """The server moves no cursor for a failed call, but a response lost or refused after
    it was sent counts as delivered there: the next Consume rewinds to mark-delete."""
    stub = FailingOnceStub()
    consumer = Consumer(stub, ConsumerState("t", "s"), "h:1", timeout=1)  # type: ignore[arg-type]
    assert consumer.batch_receive(timeout_ms=0) == []
    with pytest.raises(ResourceExhausted):
        consumer.batch_receive(timeout_ms=0)
    consumer.batch_receive(timeout_ms=0)
    flags = [r.redeliver_unacknowledged for r in stub.requests]
    assert flags == [True, False, True]


def test_a_compaction_longer_than_the_timeout_is_waited_for(server_factory: Any) -> None:
    """``compact(wait=True)`` follows the run (an update at least once a second) instead of
    holding one call open: a 3 s run completes under a 1.5 s timeout."""
    srv = server_factory(start=False)
    srv.start(extra_env={"COMPACTLOG_PAUSE_AT": "after_phase_one:3000"})
    with Client(srv.address, timeout=1.5) as client:
        client.create_topic("t")
        client.producer("t").send_batch([("a", "1"), ("b", "1"), ("a", "2")])
        started = time.monotonic()
        status = client.compact("t", wait=True)
        assert time.monotonic() - started > 3.0
        assert status.state == "SUCCESS" and status.last_run is not None
        assert status.last_run.kept == 2


def test_an_asyncio_send_to_a_stuck_server_times_out(server: Any) -> None:
    """The asyncio producer's PublishStream: a request unanswered past the timeout fails
    its send with ``Timeout``; the next send goes on a new stream once the server thaws."""

    async def scenario() -> None:
        async with AsyncClient(server.address, timeout=TIMEOUT_S) as client:
            await client.create_topic("t")
            producer = await client.create_producer("t")
            first = await producer.send(b"before")  # the stream is open, partitions known
            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                with pytest.raises(Timeout):
                    await producer.send(b"stuck")
                assert time.monotonic() - started < TIMEOUT_S + SLACK_S
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            assert await producer.send(b"after") > first
            await producer.close()

    asyncio.run(scenario())
