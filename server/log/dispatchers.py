"""The consumers of each subscription, in memory: Pulsar's dispatchers.

A subscription's durable state is its cursor (``storage/cursor.py``); who is consuming it
(type, liveness, EXCLUSIVE holder, FAILOVER's active consumer, SHARED's pending messages)
and which delivered messages are due to go out again lives here and only here, as in
Pulsar: after a restart every unacknowledged message is delivered again anyway.
``server.log.consuming`` admits and steps each Consume through these dispatchers. The
rules, type by type, are in docs/subscriptions.md ("How the server hands out messages").
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

from compactlog.errors import ConsumerBusy, SubscriptionNotFound
from compactlog.server.log.read_ahead import ReadAhead
from compactlog.server.log.redelivery_counts import RedeliveryCounts
from compactlog.storage.cursor import SUBSCRIPTION_TYPE_PROPERTY, Cursor
from compactlog.storage.topic_log import TopicLog
from compactlog.storage.types import MessageId
from compactlog.v1 import compactlog_pb2 as pb

LIVENESS_ENV = "COMPACTLOG_CONSUMER_LIVENESS_MS"
DEFAULT_LIVENESS_S = 30.0

NEVER = math.inf


def liveness_from_env() -> float:
    """Seconds a consumer stays live after its last Consume (30, as Pulsar's default
    keep-alive makes it; the environment may shorten it for tests)."""
    raw = os.environ.get(LIVENESS_ENV, "")
    return int(raw) / 1000.0 if raw.isdigit() else DEFAULT_LIVENESS_S


SubscriptionType: TypeAlias = pb.SubscriptionType.ValueType
_TYPES: dict[str, SubscriptionType] = {
    "EXCLUSIVE": pb.EXCLUSIVE,
    "SHARED": pb.SHARED,
    "FAILOVER": pb.FAILOVER,
}
_NAMES: dict[int, str] = {int(value): name for name, value in _TYPES.items()}


def type_name(sub_type: int) -> str:
    return _NAMES.get(sub_type, str(sub_type))


def type_of(cursor: Cursor) -> SubscriptionType:
    """The type a subscription was created with (EXCLUSIVE when it predates types)."""
    return _TYPES.get(cursor.properties.get(SUBSCRIPTION_TYPE_PROPERTY, ""), pb.EXCLUSIVE)


def subscription_cursor(log: TopicLog, subscription: str) -> Cursor:
    """The cursor of an existing subscription (SUBSCRIPTION_NOT_FOUND otherwise)."""
    for cursor in log.subscriptions():
        if cursor.name == subscription:
            return cursor
    raise SubscriptionNotFound(
        f"subscription {subscription!r} does not exist on {log.name!r}",
        topic=log.name,
        subscription=subscription,
    )


class Admission:
    """What a Consume may do now: receive, and whether delivery rewinds first."""

    __slots__ = ("receive", "rewind")

    def __init__(self, receive: bool, rewind: bool) -> None:
        self.receive = receive
        self.rewind = rewind


class Dispatcher:
    """One subscription's consumers, pending and due messages."""

    def __init__(
        self,
        topic: str,
        subscription: str,
        sub_type: int,
        liveness_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topic = topic
        self.subscription = subscription
        self.type = sub_type
        self.liveness_s = liveness_s
        self.clock = clock
        self.lock = asyncio.Lock()  # one delivery step of this subscription at a time
        self.seen: dict[str, float] = {}  # consumer name -> when it last consumed
        self.active: str | None = None  # EXCLUSIVE holder, FAILOVER active consumer
        # delivered, not acknowledged: id -> (consumer, when it is due again)
        self.pending: dict[MessageId, tuple[str, float]] = {}
        self.due: dict[MessageId, float] = {}  # id -> not before
        # No pending message falls due before this (a lower bound: acks leave it early),
        # so a step scans the pending ones only when an ack timeout may have run out.
        self._timed_until = NEVER
        # Set from an admin thread by a cursor reset; the next step drops pending and due
        # messages (a plain assignment: the event loop reads it, nothing else is shared).
        self.reset_requested = False
        self._closed: dict[str, float] = {}  # consumer name -> when it closed
        self.redeliveries = RedeliveryCounts()
        # Responses read past the last one handed out (``server.log.read_ahead``).
        self.ahead: ReadAhead | None = None

    # ---- consumers --------------------------------------------------------------------

    def check_type(self, requested: int) -> None:
        if requested != self.type:
            raise ConsumerBusy(
                f"subscription {self.subscription!r} of {self.topic!r} is "
                f"{type_name(self.type)}, not {type_name(requested)}",
                topic=self.topic,
                subscription=self.subscription,
                type=type_name(self.type),
            )

    def _live(self, now: float) -> list[str]:
        """The live names, in order; what a SHARED consumer that is gone held unacked
        goes to the others."""
        for name in [n for n, t in self.seen.items() if now - t >= self.liveness_s]:
            del self.seen[name]
            if self.type == pb.SHARED:
                self.release(name)
        if not self.seen:  # nobody left to take them: their memory goes
            self.ahead = None
        return sorted(self.seen)

    def check_holder(self, consumer: str) -> None:
        """CONSUMER_BUSY when EXCLUSIVE is held by another live name; changes nothing,
        so a partitioned topic checks every partition before admitting on any."""
        holder = self.active
        if self.type != pb.EXCLUSIVE or holder is None or holder == consumer:
            return
        if holder in self._live(self.clock()):
            raise ConsumerBusy(
                f"subscription {self.subscription!r} of {self.topic!r} is held by "
                f"consumer {holder!r} (EXCLUSIVE)",
                topic=self.topic,
                subscription=self.subscription,
                consumer=holder,
            )

    def admit(self, consumer: str, partition: int = 0) -> Admission:
        """Register a Consume of ``consumer`` now; CONSUMER_BUSY when EXCLUSIVE is held
        by another live name. FAILOVER's active consumer is the live name at
        ``partition`` modulo their number in name order, as Pulsar spreads a partitioned
        topic's partitions over its failover consumers (the first name when unpartitioned)."""
        self.check_holder(consumer)
        now = self.clock()
        live = self._live(now)
        if self.type == pb.EXCLUSIVE:
            holder = self.active
            self.seen[consumer] = now
            self.active = consumer
            return Admission(True, holder is not None and holder != consumer)
        self.seen[consumer] = now
        if self.type == pb.FAILOVER:
            names = sorted({*live, consumer})
            chosen = names[partition % len(names)]
            previous, self.active = self.active, chosen
            return Admission(consumer == chosen, previous is not None and previous != chosen)
        return Admission(True, False)

    def seen_now(self, consumer: str) -> None:
        """A live consumer is still there (it asks for nothing now): it stays live."""
        if consumer in self.seen:
            self.seen[consumer] = self.clock()

    def close(self, consumer: str) -> None:
        """``consumer`` leaves now (``Log.CloseConsumer``): no longer live, so EXCLUSIVE
        and FAILOVER pass to the next name at its next Consume (which rewinds to the
        mark-delete position, as a takeover does), and what it held unacknowledged on a
        SHARED subscription is due now for the others."""
        now = self.clock()
        self.seen.pop(consumer, None)
        self.release(consumer)
        # Remember the close while a Consume begun before it may still be running; older
        # entries go, so unique generated names do not pile up.
        for name in [n for n, t in self._closed.items() if now - t >= self.liveness_s]:
            del self._closed[name]
        self._closed[consumer] = now

    def closed_since(self, consumer: str, started: float) -> bool:
        """Whether ``consumer`` closed after a Consume of it began at ``started``."""
        return self._closed.get(consumer, -NEVER) >= started

    # ---- pending and due messages -----------------------------------------------------

    @property
    def tracks(self) -> bool:
        """Whether deliveries are recorded per consumer (SHARED always)."""
        return self.type == pb.SHARED

    def delivered(self, consumer: str, ids: Iterable[MessageId], ack_timeout_ms: int) -> None:
        due = self.clock() + ack_timeout_ms / 1000.0 if ack_timeout_ms else NEVER
        self._timed_until = min(self._timed_until, due)
        for msg_id in ids:
            self.due.pop(msg_id, None)
            self.pending[msg_id] = (consumer, due)

    def acknowledged(self, msg_id: MessageId, cumulative: bool) -> None:
        self.redeliveries.acknowledged(msg_id, cumulative)
        if self.ahead is not None and self.ahead.covers(msg_id):
            self.ahead = None  # an id delivered before a rewind: read again without it
        if not cumulative:
            self.pending.pop(msg_id, None)
            self.due.pop(msg_id, None)
            return
        for table in (self.pending, self.due):
            for done in [i for i in table if i <= msg_id]:
                del table[done]

    def acknowledged_list(self, ids: Sequence[MessageId]) -> None:
        """``acknowledged`` of many individual acks (an AcknowledgeList's): the tables
        looked up only when they hold anything, the read-ahead by the highest id."""
        if not ids:
            return
        if self.redeliveries.counts:
            self.redeliveries.forget(ids)
        if self.ahead is not None and self.ahead.covers(max(ids)):
            self.ahead = None  # an id delivered before a rewind: read again without it
        for table in (self.pending, self.due):
            if table:
                for msg_id in ids:
                    table.pop(msg_id, None)

    def negative(self, ids: Iterable[MessageId], delay_ms: int) -> None:
        at = self.clock() + delay_ms / 1000.0
        for msg_id in ids:
            self.pending.pop(msg_id, None)
            self.due[msg_id] = at

    def release(self, consumer: str) -> None:
        """Everything pending for ``consumer`` is due now (it asked for redelivery)."""
        now = self.clock()
        for msg_id in [i for i, (c, _at) in self.pending.items() if c == consumer]:
            del self.pending[msg_id]
            self.due[msg_id] = now

    def rewound(self, reached: MessageId | None = None, reset: bool = False) -> None:
        """Delivery starts again at the mark-delete position: every unacknowledged
        message comes again in order, so nothing is pending or due on its own. Those up to
        ``reached`` (where delivery had got to) count one redelivery more; after a cursor
        ``reset`` every count starts again at 0."""
        if reset:
            self.redeliveries.clear()
        else:
            self.redeliveries.rewind(reached)
        self.pending.clear()
        self.due.clear()
        self._timed_until = NEVER
        self.ahead = None

    def ready(self, limit: int) -> list[MessageId]:
        """Ids due now (ack timeouts that ran out included), oldest first."""
        now = self.clock()
        if now >= self._timed_until:
            for msg_id in [i for i, (_c, at) in self.pending.items() if at <= now]:
                del self.pending[msg_id]
                self.due[msg_id] = now
            self._timed_until = min((at for _c, at in self.pending.values()), default=NEVER)
        if not self.due:
            return []
        return sorted(i for i, at in self.due.items() if at <= now)[:limit]

    def drop(self, ids: Iterable[MessageId]) -> None:
        """Due ids sent again on an untracked subscription: no longer due."""
        for msg_id in ids:
            self.due.pop(msg_id, None)

    def vanished(self, ids: Iterable[MessageId]) -> None:
        """Due ids that no longer exist (compaction or retention removed them)."""
        ids = list(ids)
        self.drop(ids)
        self.redeliveries.forget(ids)

    def next_due(self) -> float:
        """Seconds until the next message falls due (inf: none will)."""
        first = min(self.due.values(), default=self._timed_until)
        first = min(first, self._timed_until)
        return NEVER if first == NEVER else max(0.0, first - self.clock())


class Dispatchers:
    """The dispatchers of every subscription in use, by (topic, subscription)."""

    def __init__(self, liveness_s: float | None = None) -> None:
        self.liveness_s = liveness_from_env() if liveness_s is None else liveness_s
        self._lock = threading.Lock()
        self._by_key: dict[tuple[str, str], Dispatcher] = {}

    def get(self, topic: str, subscription: str) -> Dispatcher | None:
        with self._lock:
            return self._by_key.get((topic, subscription))

    def of(self, topic: str, cursor: Cursor) -> Dispatcher:
        with self._lock:
            key = (topic, cursor.name)
            found = self._by_key.get(key)
            if found is None:
                found = Dispatcher(topic, cursor.name, type_of(cursor), self.liveness_s)
                self._by_key[key] = found
            return found

    def reset(self, topic: str, subscription: str) -> None:
        """The subscription's cursor was reset: what was pending or due goes (delivery
        starts again from the new position); its consumers stay."""
        found = self.get(topic, subscription)
        if found is not None:
            found.reset_requested = True

    def forget(self, topic: str, subscription: str | None = None) -> None:
        """Drop the state of a subscription (reset, deleted) or of every subscription
        of a topic (deleted)."""
        with self._lock:
            for key in [k for k in self._by_key if k[0] == topic]:
                if subscription is None or key[1] == subscription:
                    del self._by_key[key]
