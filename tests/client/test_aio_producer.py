"""The asyncio producer's sends gathered into PublishStream requests (issue 29), against
a real server, with either twin of the request writer: order across requests, the
batching settings, ``flush``, ``close`` with sends queued, and a refused request
failing each of its sends with the typed error while later sends go on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from compactlog.client import (
    AlreadyClosed,
    Client,
    MessageId,
    RecordTooLarge,
    Result,
    TopicNotFound,
    _publish_py,
    publish_wire,
)
from compactlog.client.aio import AsyncClient
from compactlog.client.aio.producer import AsyncProducer
from compactlog.client.send_replies import MAX_UNANSWERED
from tests.conftest import ServerProcess

Outcome = tuple[object, MessageId | None]


@pytest.fixture(params=["compiled", "pure"])
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test with the compiled writer, then with the pure one in its place."""
    if request.param == "pure":
        monkeypatch.setattr(publish_wire, "Pending", _publish_py.Pending)
        monkeypatch.setattr(publish_wire, "call_back", _publish_py.call_back)
    yield request.param


@pytest.fixture
def topic(shared_server: ServerProcess, unique_topic: str) -> str:
    with Client(shared_server.address, timeout=30) as client:
        client.create_topic(unique_topic, config={"max.message.bytes": 4096})
    return unique_topic


def values(server: ServerProcess, topic: str) -> list[bytes | None]:
    with Client(server.address, timeout=30) as client:
        return [m.data() for m in client.reader(topic)]


def test_sends_keep_their_order_across_requests_and_flush_waits(
    shared_server: ServerProcess, topic: str, twin: str
) -> None:
    """Coroutine sends and callback sends share one queue: each gets its own id, in the
    order given, across requests of at most ``batching_max_messages``."""
    got: list[Outcome] = []

    async def scenario() -> None:
        async with AsyncClient(shared_server.address) as client:
            producer = await client.create_producer(topic, batching_max_messages=70)
            sends = [asyncio.create_task(producer.send(b"s%d" % i)) for i in range(300)]
            await asyncio.sleep(0)  # the tasks queue their sends, in order
            for i in range(300):
                producer.send_async(b"a%d" % i, lambda r, m: got.append((r, m)), partition_key="k")
            await producer.flush()
            assert all(s.done() for s in sends) and len(got) == 300
            ids = [s.result() for s in sends] + [m for _, m in got]
            assert [r for r, _ in got] == [Result.Ok] * 300
            assert ids == sorted(ids) and len(set(ids)) == 600
            assert producer.last_sequence_id() == 599
            assert await producer.send(b"last", sequence_id=41) > ids[-1]
            assert producer.last_sequence_id() == 41
            await producer.close()

    asyncio.run(scenario())
    assert values(shared_server, topic) == (
        [b"s%d" % i for i in range(300)] + [b"a%d" % i for i in range(300)] + [b"last"]
    )


def test_the_delay_holds_a_request_and_close_flushes_what_waits(
    shared_server: ServerProcess, topic: str, twin: str
) -> None:
    async def scenario() -> None:
        async with AsyncClient(shared_server.address) as client:
            producer = await client.create_producer(
                topic,
                batching_enabled=True,
                batching_max_messages=3,
                batching_max_publish_delay_ms=60_000,
            )
            first = asyncio.create_task(producer.send(b"1"))
            done, _ = await asyncio.wait([first], timeout=0.3)
            assert not done  # waiting for more, up to a minute
            rest = [asyncio.create_task(producer.send(b"%d" % i)) for i in (2, 3)]
            await asyncio.wait_for(asyncio.gather(first, *rest), 10)  # full: it goes at once
            queued = [asyncio.create_task(producer.send(b"q%d" % i)) for i in range(5)]
            await asyncio.sleep(0)  # queued: two in a full request, three held
            await producer.close()  # sends what waits, whatever the delay
            assert [q.done() and q.exception() is None for q in queued] == [True] * 5
            with pytest.raises(AlreadyClosed):
                await producer.send(b"closed")

    asyncio.run(scenario())
    assert values(shared_server, topic) == [b"1", b"2", b"3"] + [b"q%d" % i for i in range(5)]


def test_a_refused_request_fails_each_of_its_sends_and_later_ones_go_on(
    shared_server: ServerProcess, topic: str, twin: str
) -> None:
    got: list[Outcome] = []

    async def scenario() -> None:
        async with AsyncClient(shared_server.address) as client:
            producer = await client.create_producer(
                topic, batching_enabled=True, batching_max_messages=3
            )
            refused = [
                asyncio.create_task(producer.send(v)) for v in (b"ok", b"x" * 10_000, b"ok2")
            ]
            await producer.flush()
            for send in refused:  # one request: all or nothing
                assert isinstance(send.exception(), RecordTooLarge)
            producer.send_async(b"after", lambda r, m: got.append((r, m)))
            await producer.flush()
            assert got and got[0][0] is Result.Ok
            assert await producer.send(b"later") > got[0][1]  # type: ignore[operator]
            await producer.close()

    asyncio.run(scenario())
    assert values(shared_server, topic) == [b"after", b"later"]


def test_sends_to_a_missing_topic_fail_each_with_its_class(
    shared_server: ServerProcess, unique_topic: str
) -> None:
    async def scenario() -> None:
        async with AsyncClient(shared_server.address) as client:
            producer: AsyncProducer = await client.create_producer(unique_topic)
            sends = [asyncio.create_task(producer.send(b"x")) for _ in range(3)]
            await producer.flush()
            assert all(isinstance(s.exception(), TopicNotFound) for s in sends)
            await producer.close()

    asyncio.run(scenario())


def test_more_sends_than_may_be_unanswered_wait_for_room_and_all_land(
    shared_server: ServerProcess, topic: str
) -> None:
    """Past ``MAX_UNANSWERED`` sends at once (a gather), each waits for room once: all
    are stored, in order (each waiter woken once, not at every reply)."""
    count = MAX_UNANSWERED + 2_000

    async def scenario() -> list[MessageId]:
        async with AsyncClient(shared_server.address) as client:
            producer = await client.create_producer(topic)
            ids = await asyncio.gather(*(producer.send(b"%d" % i) for i in range(count)))
            await producer.close()
            return ids

    ids = asyncio.run(scenario())
    assert ids == sorted(ids) and len(set(ids)) == count
    assert values(shared_server, topic) == [b"%d" % i for i in range(count)]
