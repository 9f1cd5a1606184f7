"""``TopicLog``: what the one read path and the publish path need of a topic, either kind.

LEDGER topics (``storage.ledger_log``) and SEGMENTED topics
(``storage.segmented.topic_log``) both implement it, so the server has one reader for
Read, Consume and follow and one publish path. Positions are ``MessageId``s on both
kinds (SEGMENTED: ``(0, offset)``). Everything here is synchronous and may block on
disk; the server calls it from its executor.

Appends report durability through a callback rather than a blocking wait, so that an
asyncio server holds no thread per publish waiting for a group commit; and every store
announces changes (new data, a deleted or closed topic) to ``ChangeListeners``, which is
how waiting readers are woken without polling.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from compactlog.storage.cursor import Cursor
from compactlog.storage.read_range import ViewBatch
from compactlog.storage.spanning import SpanningPart
from compactlog.storage.types import MessageId, TopicKind

IdRun = tuple[int, int, int]  # ledger id, first entry id, count
Durable = Callable[[BaseException | None], None]


class Pending(Protocol):
    """A write done (not necessarily synced) and how to learn of its durability."""

    def on_durable(self, done: Durable) -> None:
        """Call ``done(None)`` once the write is durable (and, for an append, visible to
        readers), or ``done(error)``; at once if it already is. May run on any thread."""
        ...


class Appended(Pending, Protocol):
    """An append written (not necessarily synced): its ids and how to learn of durability."""

    runs: list[IdRun]
    synced: bool  # True when the reply may say the records are on disk


class AlreadyDurable:
    """A ``Pending`` for a write that was synced before it returned."""

    def on_durable(self, done: Durable) -> None:
        done(None)


class ReadableLog(Protocol):
    """What a Read walks: a topic's views, or a view of its past (``as_of``)."""

    name: str
    kind: TopicKind
    partition: int  # i on partition NAME-partition-i of a partitioned topic, else 0

    def gone(self) -> bool:
        """The topic was deleted or its store closed: readers stop."""
        ...

    def visible_end(self) -> MessageId | None:
        """An id at or after the last message a reader may see now (None: nothing yet)."""
        ...

    def earliest(self) -> MessageId: ...

    def latest(self) -> MessageId:
        """The position after the last message (where a LATEST reader starts)."""
        ...

    def at_time(self, timestamp_ms: int) -> MessageId:
        """The first id published at or after ``timestamp_ms``, else ``latest()``."""
        ...

    def check_start(self, msg_id: MessageId) -> MessageId:
        """A start a client asked for, checked (wrong kind of id, below the log start)."""
        ...

    def batches(self, start: MessageId, stop: MessageId, compacted: bool) -> Iterator[ViewBatch]:
        """Checked batches holding the view's messages ``start <= id <= stop``."""
        ...


class TopicLog(ReadableLog, Protocol):
    def last_id(self, compacted: bool) -> MessageId | None:
        """GetLastMessageId: the last message of the raw or the compacted view."""
        ...

    def open_cursor(
        self,
        subscription: str,
        latest: bool,
        read_compacted: bool = False,
        properties: dict[str, str] | None = None,
    ) -> Cursor:
        """The subscription's cursor, created on first use (at the end when ``latest``,
        with ``properties``); ``read_compacted``: how this Consume reads, recorded with a
        LEDGER cursor."""
        ...

    def cursor_in_memory(self, subscription: str, read_compacted: bool) -> Cursor | None:
        """The subscription's cursor when it is open and ``open_cursor`` would write
        nothing for this Consume: a dictionary lookup, no lock, no I/O, so the event loop
        may call it; None sends the caller to ``open_cursor`` in the executor."""
        ...

    def subscriptions(self) -> list[Cursor]:
        """Every subscription of the topic, by name (the server's own included)."""
        ...

    def delete_subscription(self, subscription: str) -> None:
        """Drop a subscription and its acknowledgements (SubscriptionNotFound if none)."""
        ...

    def reset_subscription(self, subscription: str, start: MessageId) -> Cursor:
        """Forget the subscription's acknowledgements; delivery starts again at ``start``."""
        ...

    def backlog(self, cursor: Cursor) -> int:
        """Messages after the cursor's mark-delete position not acknowledged yet."""
        ...

    def delivered(self, cursor: Cursor, last: MessageId | None, rewound: bool = False) -> None:
        """Record that delivery reached ``last`` (``rewound``: a delivery that began again
        at the mark-delete position, as for a consumer that reconnects). Called only once
        a response is ready, never blocks on I/O: the asyncio server calls it on its loop."""
        ...

    def acknowledge(self, subscription: str, msg_id: MessageId, cumulative: bool) -> Pending:
        """Apply the ack now; the result tells when it is on disk (acks of many consumers
        share a group commit, as appends do)."""
        ...

    def acknowledge_list(self, subscription: str, ids: Sequence[MessageId]) -> Pending:
        """Individual acks of ``ids``, all or none: each checked first (one never
        delivered: NOT_DELIVERED, nothing stored), then stored in one cursor write."""
        ...

    def append_request(self, request: bytes, part: SpanningPart | None = None) -> Appended:
        """Append the records of raw ``PublishRequest`` bytes, all or none; ``part``: a
        marked part of a spanning publish, stored at most once (LEDGER only:
        ``storage/spanning.py``)."""
        ...

    def append_requests(
        self,
        requests: Sequence[tuple[bytes, SpanningPart | None]],
        chains: Sequence[int] | None = None,
    ) -> Sequence[Appended | Exception]:
        """``append_request`` of several requests in order, each all or none on its own
        (a failed one has its error in its place), durable together: what a log's writer
        hands over (``server/log/writer.py``); on LEDGER topics one group-commit ticket
        covers them all. ``chains[i]`` (-1: none) names the producer stream of request
        ``i``: after one of a chain fails, its later requests are not written (they get
        that error), as a stream stops at its first failed request."""
        ...


class ChangeListeners:
    """Callbacks told the name of a topic whose readers may have something new to see
    (an append became visible, the topic was deleted, the store closed). A callback must
    be quick and must not raise: it runs on the writer's thread."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[str], None]] = []
        self._lock = threading.Lock()

    def add(self, callback: Callable[[str], None]) -> None:
        with self._lock:
            self._callbacks = [*self._callbacks, callback]

    def remove(self, callback: Callable[[str], None]) -> None:
        with self._lock:
            self._callbacks = [c for c in self._callbacks if c is not callback]

    def notify(self, name: str) -> None:
        for callback in self._callbacks:
            callback(name)
