"""Log.Consume: one consumer's call on a subscription, by its type (CONTRACT section 6).

A call is admitted by the subscription's dispatcher (``server.log.dispatchers``), then
steps until it has messages or its ``wait_ms`` runs out: first the messages due again,
then reading on from the subscription's read position, which moves only once a step's
response is in hand. A partitioned topic's ``NAME`` is its partitions' subscriptions,
each with its own dispatcher, stepped in turn: the types hold there as on each partition.
Locking, failures and redelivery are explained in docs/subscriptions.md ("How the server
hands out messages").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from compactlog.errors import MessageTooLargeForReader
from compactlog.server.log.dispatchers import Admission, Dispatcher, Dispatchers, type_name
from compactlog.server.log.read_ahead import KEPT, READ_AHEAD, READ_AHEAD_BYTES, ReadAhead
from compactlog.server.log.reading import (
    Response,
    consume_step,
    message_ids,
    redelivery_step,
    response_cap,
)
from compactlog.server.log.waiting import TopicSignals
from compactlog.server.metrics import Metrics
from compactlog.server.rpc.convert import start_position
from compactlog.storage.cursor import SUBSCRIPTION_TYPE_PROPERTY, Cursor
from compactlog.storage.topic_log import TopicLog
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

T = TypeVar("T")
Run = Callable[..., Awaitable[Any]]

# A FAILOVER consumer on standby looks again this often whether it has become active.
STANDBY_POLL_S = 0.25


class Member:
    """One partition's (or the topic's own) log, cursor and dispatcher in a Consume."""

    __slots__ = ("cursor", "dispatcher", "log")

    def __init__(self, log: TopicLog, cursor: Cursor, dispatcher: Dispatcher) -> None:
        self.log = log
        self.cursor = cursor
        self.dispatcher = dispatcher


class Consuming:
    def __init__(
        self,
        run: Run,
        signals: TopicSignals,
        metrics: Metrics,
        batch_size: int,
        dispatchers: Dispatchers,
    ) -> None:
        self.run = run
        self.signals = signals
        self.metrics = metrics
        self.batch_size = batch_size
        self.dispatchers = dispatchers
        self._turns: dict[tuple[str, str], int] = {}

    async def consume(
        self, name: str, logs: Sequence[TopicLog], request: pb.ConsumeRequest
    ) -> bytes:
        """Up to ``max_messages`` messages for this consumer, waiting up to ``wait_ms``:
        from the topic ``name`` (``logs``: its own log, or a partitioned topic's held
        partitions, the next call starting with the partition after this one's first)."""
        return (await self.consume_counted(name, logs, request))[0]

    async def consume_counted(
        self,
        name: str,
        logs: Sequence[TopicLog],
        request: pb.ConsumeRequest,
        stop: asyncio.Future[None] | None = None,
        whole_to: int = 0,
    ) -> tuple[bytes, int]:
        """``consume``'s response and how many messages it carries; the wait also ends
        when ``stop`` is done (a ConsumeStream's consumer went away). ``whole_to``: a
        response cut at ``max_messages`` inside a stored batch carries the rest of it,
        ``whole_to`` messages at most (a ConsumeStream's whole entries past its permits)."""
        members = await self._members(logs, request)
        if not members:  # no partition of it in this store (a slot's record alone)
            return b"", 0
        if len(members) > 1:
            key = (name, request.subscription)
            first = self._turns.get(key, 0) % len(members)
            self._turns[key] = first + 1
            members = members[first:] + members[:first]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.wait_ms / 1000.0
        asked = request.redeliver_unacknowledged
        started = min(m.dispatcher.clock() for m in members)
        consumer = request.consumer_name
        while True:
            change = self.signals.next_change(name)
            if any(m.dispatcher.closed_since(consumer, started) for m in members):
                return b"", 0  # CloseConsumer came while this call waited: it gets nothing
            for m in members:  # EXCLUSIVE: refused on one partition, admitted on none
                m.dispatcher.check_holder(consumer)
            admissions = [m.dispatcher.admit(consumer, m.log.partition) for m in members]
            response = await self._round(members, admissions, request, asked, started, whole_to)
            asked = False
            if response is not None:
                return response
            remaining = deadline - loop.time()
            gone = any(m.log.gone() for m in members)
            ended = stop is not None and stop.done()
            if remaining <= 0 or gone or ended or self.signals.stopping.is_set():
                return b"", 0
            # Look again before the liveness runs out, so a waiting consumer stays live.
            timeout = min(remaining, *(m.dispatcher.next_due() for m in members))
            timeout = min(timeout, members[0].dispatcher.liveness_s / 2)
            if not any(a.receive for a in admissions):
                timeout = min(timeout, STANDBY_POLL_S)
            await self.signals.wait(change, timeout, stop)

    async def _members(self, logs: Sequence[TopicLog], request: pb.ConsumeRequest) -> list[Member]:
        """Each log's subscription (created on first use with the request's type) and its
        dispatcher; CONSUMER_BUSY when the subscription has another type."""
        latest = start_position(request.initial_position) == pb.LATEST
        created = {SUBSCRIPTION_TYPE_PROPERTY: type_name(request.subscription_type)}
        members = []
        for log in logs:
            # An open subscription is found in memory: no executor hop for it.
            found = log.cursor_in_memory(request.subscription, request.read_compacted)
            cursor: Cursor = found or await self.run(
                log.open_cursor, request.subscription, latest, request.read_compacted, created
            )
            dispatcher = self.dispatchers.of(log.name, cursor)
            dispatcher.check_type(request.subscription_type)
            members.append(Member(log, cursor, dispatcher))
        return members

    async def _round(
        self,
        members: list[Member],
        admissions: list[Admission],
        request: pb.ConsumeRequest,
        asked: bool,
        started: float,
        whole_to: int = 0,
    ) -> tuple[bytes, int] | None:
        """One step on each member this consumer receives from, until the response is
        full; None when none has anything for it now. A step that fails after others
        gave messages ends the round (it fails the next call, not these messages)."""
        limit = request.max_messages or self.batch_size
        max_bytes = response_cap(request.max_bytes)
        parts: list[bytes] = []
        count = size = 0
        for m, admission in zip(members, admissions, strict=True):
            if count >= limit or size >= max_bytes:
                break
            if not admission.receive:
                continue
            dispatcher = m.dispatcher
            async with dispatcher.lock:
                if dispatcher.closed_since(request.consumer_name, started):
                    return None
                try:
                    step = await self._step(
                        m, request, admission.rewind, asked, limit - count, max_bytes - size,
                        max(0, whole_to - count),
                    )  # fmt: skip
                except MessageTooLargeForReader:
                    if not count:
                        raise
                    break  # a message over what is left of the cap: its turn next time
            if step is not None:
                parts.append(step[0])
                count += step[1]
                size += len(step[0])
        if not count:
            return None
        self.metrics.consume_messages.inc(count)
        return b"".join(parts), count

    async def admit(self, logs: Sequence[TopicLog], request: pb.ConsumeRequest) -> None:
        """Open (or create) the subscription and check this consumer may have it: the
        type it asks, no other live EXCLUSIVE holder (a ConsumeStream's opening)."""
        for m in await self._members(logs, request):
            m.dispatcher.check_holder(request.consumer_name)

    async def keep_alive(self, logs: Sequence[TopicLog], request: pb.ConsumeRequest) -> None:
        """The consumer is still there though it asks for nothing now (a ConsumeStream
        without permits): it stays live, as a Consume would keep it."""
        for m in await self._members(logs, request):
            m.dispatcher.seen_now(request.consumer_name)

    async def close(self, log: TopicLog, request: pb.CloseConsumerRequest) -> None:
        """``Log.CloseConsumer`` on one topic: the consumer leaves its subscription's
        dispatcher now (after any delivery step under way, so what that step hands it is
        released too), and the consumers waiting on the topic look again at once. A
        subscription with no consumers in memory has nothing to release."""
        dispatcher = self.dispatchers.get(log.name, request.subscription)
        if dispatcher is None:
            return
        async with dispatcher.lock:
            dispatcher.close(request.consumer_name)
        self.signals.notify(log.name)

    async def _read_on(
        self,
        member: Member,
        after: MessageId | None,
        limit: int,
        max_bytes: int,
        request: pb.ConsumeRequest,
        whole_to: int,
    ) -> tuple[Response | None, MessageId | None]:
        """The next response after ``after`` and the position delivery reaches with it:
        the next one read ahead when it is that, nothing when nothing was published past
        ``after`` (an idle consumer's poll costs no storage step), else read (with the
        ones after it) in the executor. Taking one read ahead may start the read of the
        ones after them (``ReadAhead.refilling``)."""
        compacted, dispatcher = request.read_compacted, member.dispatcher
        end = member.log.visible_end()
        if end is None or (after is not None and after >= end):
            dispatcher.ahead = None
            return None, after
        ahead = dispatcher.ahead
        if ahead is not None:
            if ahead.refill is not None:
                await ahead.refilled()
            # An ack while it waited may have dropped it (``Dispatcher.acknowledged``).
            taken = ahead.take(after, (limit, whole_to), max_bytes, compacted)
            if taken is not None and dispatcher.ahead is ahead:
                if ahead.wants_refill(end):
                    ahead.refilling(
                        self.run(
                            consume_step, member.log, member.cursor, ahead.end(), limit,
                            compacted, max_bytes, READ_AHEAD, READ_AHEAD_BYTES, whole_to,
                        )
                    )  # fmt: skip
                return taken
            dispatcher.ahead = None
        ahead_n, ahead_bytes = (READ_AHEAD, READ_AHEAD_BYTES) if KEPT.room() else (0, 0)
        found, position = await self.run(
            consume_step, member.log, member.cursor, after, limit, compacted, max_bytes,
            ahead_n, ahead_bytes, whole_to,
        )  # fmt: skip
        if not found:
            return None, position
        (response, reached), rest = found[0], found[1:]
        if rest:
            dispatcher.ahead = ReadAhead(reached, (limit, whole_to), max_bytes, compacted, rest)
        return response, reached

    async def _step(
        self,
        member: Member,
        request: pb.ConsumeRequest,
        takeover: bool,
        asked: bool,
        limit: int,
        max_bytes: int,
        whole_to: int,
    ) -> Response | None:
        """One response for this consumer from one log, or None when there is nothing
        for it now; each message carries how many times it went out before."""
        log, cursor, dispatcher = member.log, member.cursor, member.dispatcher
        label = f"topic {log.name!r}"
        if dispatcher.reset_requested:  # an admin moved the cursor
            dispatcher.reset_requested = False
            dispatcher.rewound(reset=True)
        rewound = takeover or (asked and not dispatcher.tracks)
        if rewound:
            dispatcher.rewound(cursor.read_position)
        elif asked:
            dispatcher.release(request.consumer_name)
        track = dispatcher.tracks or request.ack_timeout_ms > 0
        ready = dispatcher.ready(limit)
        if ready:
            again, sent, scanned = await self.run(
                redelivery_step, log, cursor, ready, limit, request.read_compacted, max_bytes
            )
            dispatcher.vanished(i for i in ready if i <= scanned and i not in sent)
            if again is not None:
                dispatcher.redeliveries.again(sent)
                if track:
                    dispatcher.delivered(request.consumer_name, sent, request.ack_timeout_ms)
                else:
                    dispatcher.drop(sent)
                return dispatcher.redeliveries.stamp(again[0], label), again[1]
        position = cursor.mark_delete if rewound else cursor.read_position
        step, position = await self._read_on(member, position, limit, max_bytes, request, whole_to)
        log.delivered(cursor, position, rewound)
        replay = dispatcher.redeliveries.replay_upto is not None
        if step is None:
            dispatcher.redeliveries.replayed((), position)
            return None
        if track or replay:
            ids = message_ids(step[0], label)
            dispatcher.redeliveries.replayed(ids, position)
            if track:
                dispatcher.delivered(request.consumer_name, ids, request.ack_timeout_ms)
        data: bytes = step[0]
        if replay:
            data = dispatcher.redeliveries.stamp(data, label)
        return data, step[1]
