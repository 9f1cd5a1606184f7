"""A connection's Fetch read-ahead keeps a chain of answers ahead (``fetch_ahead.DEPTH``, 2):
once a sequential Fetch is answered, the next answer is read and, as it ends, the one
after it, on a real log through the real fetch worker (``KafkaContext.run``). The chain
goes on only while the log shows nothing but appends, its bytes count in the process's
one read-ahead bound (``KEPT``) until taken or dropped, and with no room there nothing is
read ahead."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from compactlog.server.kafka.fetch_ahead import ReadAhead, prepared_reads, shape_of
from compactlog.server.kafka.fetch_read import Read, Wanted, read_all
from compactlog.server.kafka.topics import Cluster, KafkaContext
from compactlog.server.log.read_ahead import KEPT
from compactlog.storage.config import ServerSettings
from compactlog.storage.segmented import SegmentedLogManager
from compactlog.storage.segmented.topic_log import SegmentedTopicLog
from compactlog.storage.types import Record

BATCHES, BATCH = 8, 40
LIMIT = 6000  # one stored batch of 40 x ~100 B records a Fetch
MAX_BYTES = 1 << 20


@pytest.fixture
def log(tmp_path: Path) -> Iterator[SegmentedTopicLog]:
    m = SegmentedLogManager(tmp_path, ServerSettings(topic_defaults={}), start_threads=False)
    m.create_topic("t", {"retention.ms": "-1"})
    for b in range(BATCHES):  # an append a stored batch
        offsets = range(b * BATCH, (b + 1) * BATCH)
        m.append("t", [Record(b"k%03d" % i, b"v%05d" % i + b"x" * 90) for i in offsets])
    yield SegmentedTopicLog(m, "t")
    m.close()


@pytest.fixture
def ctx() -> Iterator[KafkaContext]:
    with ThreadPoolExecutor(1) as storage:
        yield KafkaContext({}, storage, storage, Cluster.alone("127.0.0.1", 9092))


def wanted(log: SegmentedTopicLog, offset: int) -> list[Wanted]:
    return [Wanted("t", 0, offset, LIMIT, log)]


def answered(ahead: ReadAhead, ctx: KafkaContext, log: SegmentedTopicLog, offset: int) -> Read:
    """A Fetch at ``offset`` answered fresh, as ``fetch.handle`` does, its answer sent."""
    want = wanted(log, offset)
    sequential, _prepared = ahead.take(shape_of(want, MAX_BYTES))
    reads = read_all(want, MAX_BYTES)
    ahead.follow(ctx, want, reads, MAX_BYTES, sequential)
    ahead.sent()
    return reads[0]


async def chained(ahead: ReadAhead, ctx: KafkaContext, log: SegmentedTopicLog) -> None:
    """Two sequential Fetches answered (the second continues the first: the chain
    starts) and the reads ahead let run: the answers at 2 and 3 batches."""
    answered(ahead, ctx, log, 0)
    answered(ahead, ctx, log, BATCH)
    await settled()


async def settled() -> None:
    """Let the fetch worker's reads and their callbacks on the loop run."""
    for _ in range(50):
        await asyncio.sleep(0.01)


def take_ready(ahead: ReadAhead, log: SegmentedTopicLog, offset: int) -> Read | None:
    """The answer read ahead for a Fetch at ``offset`` when it was read already."""
    _sequential, prepared = ahead.take(shape_of(wanted(log, offset), MAX_BYTES))
    if prepared is None or not prepared.done():
        return None
    return prepared.result().reads[0]


def test_the_chain_reads_depth_answers_ahead_each_as_a_fresh_read(
    ctx: KafkaContext, log: SegmentedTopicLog
) -> None:
    async def go() -> None:
        ahead = ReadAhead()
        before = KEPT.bytes
        await chained(ahead, ctx, log)
        assert KEPT.bytes - before >= 2 * BATCH * 100  # both answers held, counted
        offset = 2 * BATCH
        for _ in range(2):  # each already read when its Fetch comes
            got = take_ready(ahead, log, offset)
            assert got is not None
            fresh = read_all(wanted(log, offset), MAX_BYTES)[0]
            assert (bytes(got.records), got.next_offset) == (
                bytes(fresh.records),
                fresh.next_offset,
            )
            ahead.follow(ctx, wanted(log, offset), [got], MAX_BYTES, True)
            offset = got.next_offset
        assert offset == 4 * BATCH
        ahead.close()
        assert KEPT.bytes == before  # taken or dropped: none left counted

    asyncio.run(go())


def test_after_a_change_the_chain_is_refused_and_reads_on_no_further(
    ctx: KafkaContext, log: SegmentedTopicLog
) -> None:
    async def go() -> None:
        ahead = ReadAhead()
        before = KEPT.bytes
        await chained(ahead, ctx, log)
        log.manager.delete_records("t", 10)  # a new generation
        for offset in (2 * BATCH, 3 * BATCH):
            want = wanted(log, offset)
            _sequential, prepared = ahead.take(shape_of(want, MAX_BYTES))
            assert prepared is not None and prepared.done()
            assert await prepared_reads(prepared, want, 1) is None  # read afresh instead
            reads = read_all(want, MAX_BYTES)
            ahead.follow(ctx, want, reads, MAX_BYTES, True)
            ahead.sent()
            await settled()
            if offset == 2 * BATCH:  # nothing read on from the answer read before the change
                assert KEPT.bytes - before == len(
                    read_all(wanted(log, 3 * BATCH), 1 << 20)[0].records
                )
        # past the stale chain, a new one starts from the fresh read and serves
        want = wanted(log, 4 * BATCH)
        _sequential, prepared = ahead.take(shape_of(want, MAX_BYTES))
        assert prepared is not None
        fresh = await prepared_reads(prepared, want, 1)
        assert fresh is not None and fresh[0].log_start == 10
        assert bytes(fresh[0].records) == bytes(read_all(want, MAX_BYTES)[0].records)
        ahead.close()
        assert KEPT.bytes == before

    asyncio.run(go())


def test_a_fetch_elsewhere_drops_the_chain_and_its_bytes(
    ctx: KafkaContext, log: SegmentedTopicLog
) -> None:
    async def go() -> None:
        ahead = ReadAhead()
        before = KEPT.bytes
        await chained(ahead, ctx, log)
        assert KEPT.bytes > before
        answered(ahead, ctx, log, 0)  # back to the start: not the chain's Fetch
        await settled()
        assert KEPT.bytes == before
        assert take_ready(ahead, log, 2 * BATCH) is None
        ahead.close()

    asyncio.run(go())


def test_nothing_is_read_ahead_without_room_in_the_bound(
    ctx: KafkaContext, log: SegmentedTopicLog
) -> None:
    async def go() -> None:
        ahead = ReadAhead()
        limit, KEPT.limit = KEPT.limit, KEPT.bytes + LIMIT // 2
        try:
            await chained(ahead, ctx, log)
            assert take_ready(ahead, log, 2 * BATCH) is None
        finally:
            KEPT.limit = limit
            ahead.close()

    asyncio.run(go())
