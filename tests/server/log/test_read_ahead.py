"""A subscription's read-ahead never hands out what changed since it was read.

A delivery step reads responses past the one it hands out (``server.log.read_ahead``);
the next step takes them without a storage step. An id among them can be acknowledged
only when it went out before a rewind (a consumer asking for its unacknowledged messages
again): that acknowledgement must drop them, or the acknowledged message would go out
again. A consumer that has everything makes no storage step when it polls, and still
gets what is published next. In-process over a real store, both topic kinds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from compactlog.server.broker import Broker
from compactlog.server.log import read_ahead
from compactlog.server.log.service import LogService
from compactlog.server.log.waiting import TopicSignals
from compactlog.server.metrics import Metrics
from compactlog.storage.config import ServerSettings
from compactlog.storage.types import MessageId, TopicKind
from compactlog.v1 import compactlog_pb2 as pb
from tests.server.log.test_consume_cursor import Context, CountingExecutor

RECORDS = [pb.Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(10)]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path, ServerSettings(topic_defaults={}))
    yield b
    b.close()


async def _consumed(broker: Broker, topic: str) -> list[list[int]]:
    """Entry ids of: two Consumes, one asking for its unacknowledged messages again,
    then, after an individual ack of an id delivered before that rewind, one more."""
    with ThreadPoolExecutor(2) as executor:
        service = LogService(
            broker, Metrics(), executor, TopicSignals(asyncio.get_running_loop()), 100
        )
        publish = pb.PublishRequest(topic=topic, records=RECORDS).SerializeToString()
        await service.Publish(publish, Context())
        got: list[list[pb.Message]] = []

        async def consume(again: bool = False) -> None:
            req = pb.ConsumeRequest(
                topic=topic, subscription="s", max_messages=2, redeliver_unacknowledged=again
            )
            reply = await service.Consume(req, Context())
            got.append(list(pb.ConsumeResponse.FromString(reply).messages))

        await consume()
        await consume()  # read ahead by the first
        await consume(again=True)  # from the start again: 0, 1 (2.. read ahead once more)
        ack = pb.AcknowledgeRequest(topic=topic, subscription="s", id=got[1][1].id)
        await service.Acknowledge(ack, Context())  # entry 3, out before the rewind
        await consume()
    return [[m.id.entry_id for m in msgs] for msgs in got]


@pytest.mark.parametrize(
    "kind", [TopicKind.LEDGER, TopicKind.SEGMENTED], ids=["ledger", "segmented"]
)
def test_an_acknowledged_id_read_ahead_does_not_go_out_again(
    broker: Broker, kind: TopicKind
) -> None:
    broker.create_topic("t", kind, {})
    assert asyncio.run(_consumed(broker, "t")) == [[0, 1], [2, 3], [0, 1], [2, 4]]


async def _polls(broker: Broker, topic: str) -> list[tuple[int, list[int]]]:
    """Executor steps and entry ids of: a Consume of everything, a poll with nothing
    new, and one after a publish."""
    with CountingExecutor(2) as executor:
        loop = asyncio.get_running_loop()
        service = LogService(broker, Metrics(), executor, TopicSignals(loop), 100)
        publish = pb.PublishRequest(topic=topic, records=RECORDS[:3]).SerializeToString()
        await service.Publish(publish, Context())
        out = []
        for more in (False, False, True):
            if more:
                again = pb.PublishRequest(topic=topic, records=RECORDS[3:4])
                await service.Publish(again.SerializeToString(), Context())
            before = executor.steps
            req = pb.ConsumeRequest(topic=topic, subscription="s", max_messages=10)
            reply = await service.Consume(req, Context())
            ids = [m.id.entry_id for m in pb.ConsumeResponse.FromString(reply).messages]
            out.append((executor.steps - before, ids))
    return out


@pytest.mark.parametrize(
    "kind", [TopicKind.LEDGER, TopicKind.SEGMENTED], ids=["ledger", "segmented"]
)
def test_a_poll_with_nothing_new_makes_no_storage_step(broker: Broker, kind: TopicKind) -> None:
    broker.create_topic("t", kind, {})
    polls = asyncio.run(_polls(broker, "t"))
    assert [ids for _steps, ids in polls] == [[0, 1, 2], [], [3]]
    assert [steps for steps, _ids in polls][1:] == [0, 1]


async def _ahead(broker: Broker, topic: str) -> list[tuple[int, list[int], int]]:
    """Per Consume of 2 messages: executor steps, entry ids, bytes kept ahead after it."""
    with CountingExecutor(2) as executor:
        loop = asyncio.get_running_loop()
        service = LogService(broker, Metrics(), executor, TopicSignals(loop), 100)
        publish = pb.PublishRequest(topic=topic, records=RECORDS).SerializeToString()
        await service.Publish(publish, Context())
        out = []
        for _ in range(3):
            before = executor.steps
            req = pb.ConsumeRequest(topic=topic, subscription="s", max_messages=2)
            reply = await service.Consume(req, Context())
            ids = [m.id.entry_id for m in pb.ConsumeResponse.FromString(reply).messages]
            out.append((executor.steps - before, ids, read_ahead.KEPT.bytes))
    return out


def test_the_bytes_kept_ahead_are_bounded_for_the_whole_server(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room, one storage step reads ahead and the next Consumes take what it kept;
    with no room left in the server's bound, each Consume reads its own response and
    keeps nothing."""
    broker.create_topic("t", TopicKind.LEDGER, {})
    broker.create_topic("u", TopicKind.LEDGER, {})
    with_room = asyncio.run(_ahead(broker, "t"))
    assert [ids for _steps, ids, _kept in with_room] == [[0, 1], [2, 3], [4, 5]]
    assert [steps for steps, _ids, _kept in with_room][1:] == [0, 0]
    assert with_room[0][2] > with_room[1][2] > with_room[2][2] > 0
    monkeypatch.setattr(read_ahead.KEPT, "limit", read_ahead.KEPT.bytes)
    without = asyncio.run(_ahead(broker, "u"))
    assert [ids for _steps, ids, _kept in without] == [[0, 1], [2, 3], [4, 5]]
    assert [steps for steps, _ids, _kept in without][1:] == [1, 1]
    assert without[0][0] == with_room[0][0]  # the first: the same steps, nothing kept
    assert len({kept for _steps, _ids, kept in without}) == 1  # nothing more kept


async def _published(
    broker: Broker, executor: CountingExecutor, topic: str, records: list[pb.Record]
) -> LogService:
    """A Log service over ``executor`` once ``records`` are published to ``topic``."""
    loop = asyncio.get_running_loop()
    service = LogService(broker, Metrics(), executor, TopicSignals(loop), 100)
    publish = pb.PublishRequest(topic=topic, records=records).SerializeToString()
    await service.Publish(publish, Context())
    return service


async def _consume_two(service: LogService, topic: str) -> list[int]:
    """The entry ids of one Consume of 2 messages on subscription ``s``."""
    req = pb.ConsumeRequest(topic=topic, subscription="s", max_messages=2)
    reply = await service.Consume(req, Context())
    return [m.id.entry_id for m in pb.ConsumeResponse.FromString(reply).messages]


async def _steps_for(broker: Broker, topic: str, records: list[pb.Record], calls: int) -> int:
    """Executor steps of ``calls`` Consumes of 2 messages each, after one publish."""
    with CountingExecutor(2) as executor:
        service = await _published(broker, executor, topic, records)
        before = executor.steps
        got = []
        for _ in range(calls):
            got += await _consume_two(service, topic)
        assert got == list(range(2 * calls))
        return executor.steps - before


def test_a_step_reads_ahead_as_much_as_a_read_step(broker: Broker) -> None:
    """A consumer taking 1 MiB in eight responses pays one executor hop for all of them
    (and one to open its subscription), as a Read of 1 MiB does (``STEP_BYTES``): the
    hop, not the scan, was a response's cost."""
    broker.create_topic("t", TopicKind.LEDGER, {})
    big = [pb.Record(key=b"k%d" % i, value=bytes(64 * 1024)) for i in range(16)]
    assert asyncio.run(_steps_for(broker, "t", big, 8)) == 2


async def _refills(broker: Broker, topic: str) -> tuple[list[int], list[int], int]:
    """Consumes of 2 messages through 80 published: the entry ids handed out, the
    executor steps made by the time each Consume returned, and ``KEPT`` at the end less
    at the start (the subscription's kept responses dropped)."""
    records = [pb.Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(80)]
    kept = read_ahead.KEPT.bytes
    with CountingExecutor(2) as executor:
        service = await _published(broker, executor, topic, records)
        before = executor.steps
        ids: list[int] = []
        steps = []
        for _ in range(40):
            ids += await _consume_two(service, topic)
            steps.append(executor.steps - before)
        dispatcher = service.dispatchers.get(topic, "s")
        assert dispatcher is not None
        dispatcher.ahead = None
        return ids, steps, read_ahead.KEPT.bytes - kept


@pytest.mark.parametrize(
    "kind", [TopicKind.LEDGER, TopicKind.SEGMENTED], ids=["ledger", "segmented"]
)
def test_the_next_read_starts_before_the_kept_responses_run_out(
    broker: Broker, kind: TopicKind
) -> None:
    """The first step reads its response and 16 more (34 messages); the step that leaves
    4 of them kept starts the read of the next ones, so no step after waits for storage
    on its turn; every message goes out once, in order, and what was kept or reserved
    goes back with the subscription's read-ahead."""
    broker.create_topic("t", kind, {})
    ids, steps, kept = asyncio.run(_refills(broker, "t"))
    assert ids == list(range(80))
    first = steps[0]  # opening the subscription and the first read
    assert steps[11] == first  # 5 responses still kept: nothing read yet
    assert steps[12] == first + 1  # 4 kept: the next read is under way
    assert steps[-1] == first + 2  # 80 messages: two reads after the first
    assert kept == 0


def test_a_read_under_way_counts_as_kept() -> None:
    """With every kept response taken and the next read still under way, an id past
    them may be in what it reads (``covers``: an ack of it after a rewind drops them);
    what it found is taken in order once done, and its reservation goes back."""

    async def run() -> tuple[bool, bool, list[MessageId | None], int]:
        kept = read_ahead.KEPT.bytes
        first, second = MessageId(0, 1), MessageId(0, 3)
        ahead = read_ahead.ReadAhead(None, (2, 0), 1 << 20, False, [((b"ab", 2), first)])
        read: asyncio.Future[read_ahead.Found] = asyncio.get_running_loop().create_future()
        ahead.refilling(read)
        reserved = read_ahead.KEPT.bytes - kept == 2 + read_ahead.READ_AHEAD_BYTES
        taken = [ahead.take(None, (2, 0), 1 << 20, False)]
        covered = ahead.covers(MessageId(0, 2))
        read.set_result(([((b"cd", 2), second)], second))
        await ahead.refilled()
        taken.append(ahead.take(first, (2, 0), 1 << 20, False))
        del ahead
        return reserved, covered, [t[1] if t else None for t in taken], read_ahead.KEPT.bytes - kept

    reserved, covered, reached, left = asyncio.run(run())
    assert reserved and covered
    assert reached == [MessageId(0, 1), MessageId(0, 3)]
    assert left == 0
