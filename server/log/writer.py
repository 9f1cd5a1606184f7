"""One writer per log: a topic's publishes written as groups, answered a group at a time.

The Log service hands each publish to the writer of the topic it names, on the event loop
and without a thread hop of its own (``LogWriters.submit``). A writer drains on the
appends executor: it takes every request waiting, writes them through the topic's log as
one group (``TopicLog.append_requests``: on LEDGER topics one group-commit ticket, so one
fsync covers them), and once the whole group is durable wakes the event loop ONCE with
each request's reply bytes or its own error. Kafka's log append and RocksDB's write group
have this shape. While requests keep coming it does not wait for a group's fsync before
writing the next (the syncer overlaps them), which is how one pipelined PublishStream
keeps several requests in one group; a writer left with nothing to write runs the fsync
itself (``WriterSync.sync_here``, when no sync is running), so a lone request makes no hop
to the syncer thread; its write's ticket is ``held`` so that it does not wake the syncer
for nothing (with more to write, the writer hands the group over: ``kick``). A topic's
requests are written in the order they were handed over; a request that fails is never
acknowledged, and the others of its group get their own outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

from compactlog.errors import ShuttingDown
from compactlog.storage.topic_log import Pending

Outcome = bytes | BaseException


@dataclass(slots=True)
class Accepted:
    """A request written (not yet known durable): how to learn of its durability, how to
    build its reply, and what the metrics count of it."""

    pending: Pending
    reply: Callable[[], bytes]
    kind: str
    records: int


Written = Accepted | Exception
# What a writer calls with a topic's group of requests and their chains (``Chain.key``, -1
# for none): one result per request, in order; after a request fails, the later ones of
# its chain are not written (they get its error).
WriteGroup = Callable[[str, list[bytes], list[int]], Sequence[Written]]
# Told of every request answered: its kind, records, bytes and seconds since it came in.
Answered = Callable[[Accepted, int, float], None]


class WriterSync(Protocol):
    """How a writer's groups become durable (a ledger store's ``GroupCommit``): tickets
    its write takes are ``held`` (wake nobody); then the writer syncs them itself
    (``sync_here``) or, with more to write, hands them to the syncer (``kick``)."""

    def held(self) -> AbstractContextManager[None]: ...

    def sync_here(self) -> None: ...

    def kick(self) -> None: ...


class _NoSync:
    """A writer whose logs sync nothing of their own (tests, SEGMENTED-only servers)."""

    def held(self) -> AbstractContextManager[None]:
        return nullcontext()

    def sync_here(self) -> None:
        pass

    def kick(self) -> None:
        pass


class Chain:
    """The requests of one PublishStream: once one fails, none after it is written (the
    stream ends with that failure), in this group or a later one."""

    __slots__ = ("failed", "key")

    def __init__(self) -> None:
        self.key = id(self)
        self.failed: BaseException | None = None


@dataclass(slots=True)
class _Request:
    raw: bytes
    future: asyncio.Future[bytes]
    loop: asyncio.AbstractEventLoop
    started: float
    chain: Chain | None


class _Writer:
    """The requests waiting for one topic, and whether a drain of them is running."""

    __slots__ = ("queue", "running", "topic")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.queue: list[_Request] = []
        self.running = False


class LogWriters:
    """The writers of every topic being published to (one dropped when it runs dry)."""

    def __init__(
        self,
        write: WriteGroup,
        executor: Executor,
        answered: Answered,
        sync: WriterSync | None = None,
    ) -> None:
        self._write = write
        self._sync: WriterSync = sync or _NoSync()
        self._executor = executor
        self._answered = answered
        self._lock = threading.Lock()
        self._writers: dict[str, _Writer] = {}

    def submit(self, topic: str, raw: bytes, chain: Chain | None = None) -> asyncio.Future[bytes]:
        """Queue ``raw`` for ``topic``'s writer (on the event loop); the future gives the
        reply bytes once the request is durable, or its error."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        request = _Request(raw, future, loop, time.perf_counter(), chain)
        with self._lock:
            writer = self._writers.get(topic)
            if writer is None:
                writer = self._writers[topic] = _Writer(topic)
            writer.queue.append(request)
            if writer.running:
                return future  # the running drain takes it with the next group
            writer.running = True
        try:
            self._executor.submit(self._drain, writer)
        except RuntimeError:  # the executor has shut down: the server is stopping
            self._fail_all(writer, ShuttingDown("the server is shutting down"))
        return future

    def _fail_all(self, writer: _Writer, error: BaseException) -> None:
        with self._lock:
            taken, writer.queue, writer.running = writer.queue, [], False
            self._writers.pop(writer.topic, None)
        _wake(taken, [error] * len(taken))

    def _drain(self, writer: _Writer) -> None:
        """Write group after group until the queue is empty (on the appends executor)."""
        while True:
            with self._lock:
                group, writer.queue = writer.queue, []
                if not group:
                    writer.running = False
                    if self._writers.get(writer.topic) is writer:
                        del self._writers[writer.topic]
                    return
            try:
                with self._sync.held():  # its tickets wake nobody: this thread decides
                    self._write_group(writer.topic, group)
            finally:  # even after a failure: a ticket taken is never left unsynced
                if writer.queue:  # more to write: the syncer fsyncs this group meanwhile
                    self._sync.kick()
                else:  # nothing more to write: sync now, on this thread
                    self._sync.sync_here()

    def _write_group(self, topic: str, group: list[_Request]) -> None:
        abandoned = [r for r in group if r.chain is not None and r.chain.failed is not None]
        if abandoned:  # a request before them in their stream failed: not written
            _wake(abandoned, [r.chain.failed for r in abandoned if r.chain and r.chain.failed])
            group = [r for r in group if r.chain is None or r.chain.failed is None]
        keys = [-1 if r.chain is None else r.chain.key for r in group]
        try:
            written: Sequence[Written] = self._write(topic, [r.raw for r in group], keys)
        except Exception as exc:  # the whole group's (the topic does not exist...)
            written = [exc] * len(group)
        for request, one in zip(group, written, strict=True):
            if isinstance(one, Exception) and request.chain is not None:
                request.chain.failed = request.chain.failed or one
        accepted = [w for w in written if isinstance(w, Accepted)]
        errors: dict[int, BaseException] = {}
        left = [len(accepted)]
        lock = threading.Lock()

        def durable(index: int, error: BaseException | None) -> None:
            with lock:
                if error is not None:
                    errors[index] = error
                    chain = group[index].chain
                    if chain is not None and chain.failed is None:
                        chain.failed = error
                left[0] -= 1
                finished = left[0] == 0
            if finished:
                self._answer(group, written, errors)

        if not accepted:
            self._answer(group, written, errors)
        for index, one in enumerate(written):
            if isinstance(one, Accepted):
                one.pending.on_durable(functools.partial(durable, index))

    def _answer(
        self, group: list[_Request], written: Sequence[Written], errors: dict[int, BaseException]
    ) -> None:
        """Every request of the group durable (or failed): replies built here, off the
        event loop, then one wake-up of it."""
        now = time.perf_counter()
        outcomes: list[Outcome] = []
        for index, (request, one) in enumerate(zip(group, written, strict=True)):
            if isinstance(one, Exception):
                outcomes.append(one)
            elif index in errors:
                outcomes.append(errors[index])
            else:
                outcomes.append(self._reply(one, request, now))
        _wake(group, outcomes)

    def _reply(self, accepted: Accepted, request: _Request, now: float) -> Outcome:
        """The reply of a durable request, counted. This runs on the syncer's thread (for
        LEDGER topics), which must never die of it: an error is the request's."""
        try:
            reply = accepted.reply()
            self._answered(accepted, len(request.raw), now - request.started)
        except Exception as exc:
            return exc
        return reply


def _wake(group: list[_Request], outcomes: list[Outcome]) -> None:
    """Settle the group's futures on their event loop: one call a loop (one, as a rule)."""
    if not group:
        return
    loop = group[0].loop
    if all(r.loop is loop for r in group):
        _call(loop, group, outcomes)
        return
    by_loop: dict[asyncio.AbstractEventLoop, tuple[list[_Request], list[Outcome]]] = {}
    for request, outcome in zip(group, outcomes, strict=True):
        mine = by_loop.setdefault(request.loop, ([], []))
        mine[0].append(request)
        mine[1].append(outcome)
    for each, (requests, results) in by_loop.items():
        _call(each, requests, results)


def _call(loop: asyncio.AbstractEventLoop, group: list[_Request], outcomes: list[Outcome]) -> None:
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
        loop.call_soon_threadsafe(_settle, group, outcomes)


def _settle(group: list[_Request], outcomes: list[Outcome]) -> None:
    for request, outcome in zip(group, outcomes, strict=True):
        future = request.future
        if future.done():  # cancelled meanwhile (the client went away)
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
