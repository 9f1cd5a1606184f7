"""A log's writer (``server.log.writer``) over a real LedgerStore: every request waiting
goes in one group (one fsync), answers keep the order, a failed request fails alone, and
the event loop is woken once a group."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from compactlog.errors import RecordTooLarge, TopicNotFound
from compactlog.server.log.writer import Accepted, Chain, LogWriters, WriteGroup, Written
from compactlog.server.rpc.convert import publish_reply
from compactlog.storage import batch as codec
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_log import LedgerTopicLog
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record
from compactlog.storage.views import view_messages
from compactlog.v1 import compactlog_pb2 as pb


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LedgerStore]:
    opened = LedgerStore(tmp_path / "db", ServerSettings(topic_defaults={}))
    opened.create_topic("t", {"max.message.bytes": "100"})
    yield opened
    opened.close()


def write_group(store: LedgerStore, groups: list[int]) -> WriteGroup:
    def write(topic: str, raws: list[bytes], chains: list[int]) -> Sequence[Written]:
        groups.append(len(raws))
        log = LedgerTopicLog(store, topic)
        out: list[Written] = []
        for appended in log.append_requests([(raw, None) for raw in raws], chains):
            if isinstance(appended, Exception):
                out.append(appended)
            else:
                reply = functools.partial(publish_reply, appended.runs, True)
                out.append(Accepted(appended, reply, "LEDGER", 1))
        return out

    return write


def request(value: bytes) -> bytes:
    return codec.records_to_request([Record(b"k", value)])


def test_requests_waiting_go_as_one_group_with_one_fsync(store: LedgerStore) -> None:
    groups: list[int] = []
    answered: list[int] = []
    executor = ThreadPoolExecutor(1)
    writers = LogWriters(write_group(store, groups), executor, lambda _a, n, _s: answered.append(n))
    held = threading.Event()
    executor.submit(held.wait)  # the writer's drain queues behind this
    raws = [request(b"v%d" % i) for i in range(3)] + [request(b"x" * 200)]
    raws += [request(b"w%d" % i) for i in range(3)]
    wakes: list[object] = []

    async def publish() -> list[bytes | BaseException]:
        loop = asyncio.get_running_loop()
        real = loop.call_soon_threadsafe

        def counted(callback: Callable[..., object], *args: object) -> asyncio.Handle:
            wakes.append(callback)
            return real(callback, *args)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign, assignment]
        futures = [writers.submit("t", raw) for raw in raws]
        held.set()
        return await asyncio.gather(*futures, return_exceptions=True)

    before = store.group_commit.syncs
    try:
        results = asyncio.run(publish())
    finally:
        executor.shutdown()
    assert groups == [7]
    assert store.group_commit.syncs - before == 1
    assert len(wakes) == 1
    assert isinstance(results[3], RecordTooLarge)
    replies = [pb.PublishResponse.FromString(r) for r in results if isinstance(r, bytes)]
    entries = [reply.ids[0].entry_id for reply in replies]
    assert entries == [0, 1, 2, 3, 4, 5]  # in order; the failed request took no id
    assert len(answered) == 6


def test_a_group_that_cannot_be_written_fails_every_request(store: LedgerStore) -> None:
    executor = ThreadPoolExecutor(1)
    writers = LogWriters(write_group(store, []), executor, lambda _a, _n, _s: None)

    async def publish() -> list[bytes | BaseException]:
        futures = [writers.submit("nope", request(b"v")) for _ in range(2)]
        return await asyncio.gather(*futures, return_exceptions=True)

    try:
        results = asyncio.run(publish())
    finally:
        executor.shutdown()
    assert all(isinstance(r, TopicNotFound) for r in results)


def test_a_stream_stops_writing_at_its_first_failed_request(store: LedgerStore) -> None:
    """The requests after a failed one of the same stream (chain) are not written, in
    its group or a later one; another stream's requests in the same group are."""
    executor = ThreadPoolExecutor(1)
    writers = LogWriters(write_group(store, []), executor, lambda _a, _n, _s: None)
    held = threading.Event()
    executor.submit(held.wait)
    stream, other = Chain(), Chain()

    async def publish() -> list[bytes | BaseException]:
        futures = [
            writers.submit("t", request(b"a0"), stream),
            writers.submit("t", request(b"x" * 200), stream),
            writers.submit("t", request(b"b0"), other),
            writers.submit("t", request(b"a1"), stream),
        ]
        held.set()
        first = await asyncio.gather(*futures, return_exceptions=True)
        later = writers.submit("t", request(b"a2"), stream)  # a later group
        return [*first, *(await asyncio.gather(later, return_exceptions=True))]

    try:
        results = asyncio.run(publish())
    finally:
        executor.shutdown()
    assert isinstance(results[0], bytes) and isinstance(results[2], bytes)
    assert all(isinstance(r, RecordTooLarge) for r in (results[1], results[3], results[4]))
    stored = [
        m.value for m in view_messages(store, "t", MessageId(0, 0), MessageId(2**63, 0), False)
    ]
    assert stored == [b"a0", b"b0"]


def test_a_lone_request_is_synced_on_its_writers_thread(store: LedgerStore) -> None:
    """With nothing more to write, the writer runs the fsync itself (``sync_here``): the
    reply is built on the append thread, no hop to the syncer thread, which its ticket
    (``held``) did not even wake; still one fsync."""
    executor = ThreadPoolExecutor(1, thread_name_prefix="append")
    threads: list[str] = []
    writers = LogWriters(
        write_group(store, []),
        executor,
        lambda _a, _n, _s: threads.append(threading.current_thread().name),
        store.group_commit,
    )
    before, woken = store.group_commit.syncs, store.group_commit.wakeups
    try:

        async def publish() -> bytes:
            return await writers.submit("t", request(b"v"))

        replies = [asyncio.run(publish()) for _ in range(20)]
    finally:
        executor.shutdown()
    assert [pb.PublishResponse.FromString(r).ids[0].entry_id for r in replies] == list(range(20))
    assert threads == ["append_0"] * 20
    assert store.group_commit.syncs - before == 20
    assert store.group_commit.wakeups == woken  # no ticket woke the syncer thread
