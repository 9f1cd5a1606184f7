"""``TopicReader``: what ``client.create_reader(topic, start_message_id, ...)`` returns,
pulsar-client's Reader: ``read_next(timeout_millis=None)``, ``has_message_available()``.

Under it is one ``follow`` Read stream (``reader.Reader``) drained by a thread of its own
into a bounded queue, so ``read_next`` can wait with a timeout, which a blocking gRPC
iterator cannot. The queue holds whole responses (``Reader.batches``): ``read_next`` takes
the next message from the response in hand and touches the queue, its lock and the pump
once per response, not once per message. The start follows pulsar-client: ``MessageId.earliest``,
``MessageId.latest``, or an id, after which reading begins (that id itself too with
``start_message_id_inclusive=True``). A start id that compaction removed reads from the
next surviving message, as the server does for every start. ``seek`` opens a new stream
at the new start (an id, read as the first start was, or a publish time) and drops what
was read ahead. A publish time is resolved at the seek to the first message published at
or after it (or, when there is none yet, to just after the topic's last message), so
``has_message_available`` answers for that start, not for the earliest.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable

from compactlog.client.closeable import Closeable
from compactlog.client.errors import AlreadyClosed, Timeout
from compactlog.client.message import Message
from compactlog.client.message_id import MessageId
from compactlog.client.reader import Reader, StartLike
from compactlog.errors import InvalidArgument

__all__ = [
    "TopicReader",
    "latest_start",
    "more_to_read",
    "skipped_start",
    "start_of",
    "time_start",
]

_QUEUE_MESSAGES = 1000  # messages read ahead of read_next (pulsar-client's receiver queue)
_RESPONSE_MESSAGES = 1000  # about what one Read response holds, to size the queue in responses
_END = object()  # the stream ended (it only does when closed or failed)

# The topic's last id (None: no message) and whether it is a partitioned topic's, only the
# greatest of its partitions' (``Client.last_position``).
LastPosition = Callable[[], tuple[MessageId | None, bool]]
# The first message published at or after a time in epoch ms, or None when there is none yet.
FirstAt = Callable[[int], MessageId | None]
# Opens the follow Read stream at a start.
OpenReader = Callable[[StartLike], Reader]


def start_of(start_message_id: MessageId | tuple[int, int]) -> StartLike:
    """The Read start for a pulsar-client start id."""
    mid = MessageId.of(start_message_id)
    if mid == MessageId.earliest:
        return "earliest"
    if mid == MessageId.latest:
        return "latest"
    return mid


def latest_start(last: MessageId | None, partitioned: bool) -> tuple[StartLike, bool]:
    """The start (and whether inclusive) a ``MessageId.latest`` reader opens its stream at:
    fixed as it opens, just after ``last``, the topic's last message then (the earliest of
    an empty topic), so the stream and ``has_message_available`` agree on where reading
    began and a message published while the stream opens is read, not skipped. A
    ``partitioned`` topic's last id is only the greatest of its partitions', and one id
    cannot start them all: its reader stays at ``"latest"``, which the server resolves
    partition by partition."""
    if partitioned:
        return "latest", False
    if last is None:
        return "earliest", True
    return last, False


def skipped_start(start: StartLike, inclusive: bool) -> MessageId | None:
    """The start id a reader drops when the server sends it (not ``inclusive``)."""
    return start if isinstance(start, MessageId) and not inclusive else None


def time_start(first: MessageId | None, last: MessageId | None) -> tuple[StartLike, bool]:
    """The start (and whether it is inclusive) that a seek to a publish time resolves to:
    the first message at or after that time; with none, just after ``last``, the topic's
    last message before the seek looked (so what is published later is read); the
    earliest of an empty topic."""
    if first is not None:
        return first, True
    if last is not None:
        return last, False
    return "earliest", True


def more_to_read(
    last: MessageId | None, read: MessageId | None, start: StartLike, skipping: bool
) -> bool:
    """``has_message_available`` from the topic's ``last`` id: after the last id ``read``,
    or, before any, at or after the start (after it while the start is still skipped)."""
    if last is None:
        return False
    if read is not None:
        return tuple(last) > tuple(read)
    if start == "earliest":
        return True
    if start == "latest":  # a partitioned topic's (``latest_start``)
        return False
    assert isinstance(start, MessageId)
    after = tuple(last) > tuple(start)
    return after or (not skipping and last == start)


class TopicReader(Closeable):
    """Reads a topic from a start id on, raw or compacted; keeps no server-side cursor."""

    def __init__(
        self,
        open_reader: OpenReader,
        start_message_id: MessageId | tuple[int, int],
        inclusive: bool,
        last_position: LastPosition,
        first_at: FirstAt,
        queue_size: int = _QUEUE_MESSAGES,
        name: str | None = None,
    ) -> None:
        if queue_size < 1:
            raise InvalidArgument("receiver_queue_size must be at least 1")
        self.name = name
        self._open = open_reader
        self._inclusive = inclusive
        # Responses read ahead: about receiver_queue_size messages, and at least one while
        # read_next works through the one in hand.
        self._ahead = max(1, queue_size // _RESPONSE_MESSAGES)
        self._last_position = last_position
        self._first_at = first_at
        self._closed = threading.Event()
        self._ready: deque[Message] = deque()  # the response in hand
        self._begin(start_of(start_message_id), inclusive)
        self._topic = self._reader.topic()

    def _begin(self, start: StartLike, inclusive: bool) -> None:
        """Open the stream at ``start`` and its pump thread."""
        if start == "latest":
            start, inclusive = latest_start(*self._last_position())
        self._start = start
        self._skip = skipped_start(start, inclusive)
        self._reader = self._open(start)
        self._queue: queue.Queue[object] = queue.Queue(self._ahead)
        self._ready.clear()
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._last: Message | None = None  # the last message handed out
        self._pump = threading.Thread(
            target=self._drain,
            args=(self._reader, self._queue, self._stop),
            name="compactlog-reader",
            daemon=True,
        )
        self._pump.start()

    def _end(self) -> None:
        """Stop the stream and its pump (close or seek)."""
        self._stop.set()
        self._reader.close()
        self._pump.join(timeout=5)

    def seek(self, message: MessageId | tuple[int, int] | int) -> None:
        """Read from elsewhere: an id (``MessageId.earliest`` / ``latest`` or a message,
        taken as the start id at creation is, inclusive or not), or an ``int``, the first
        message published at or after that time in epoch milliseconds. Messages read
        ahead are dropped."""
        if self._closed.is_set():
            raise AlreadyClosed("the reader is closed")
        self._end()
        if isinstance(message, int):
            last = self._last_position()[0]  # before the first: what is published between is read
            self._begin(*time_start(self._first_at(message), last))
        else:
            self._begin(start_of(message), self._inclusive)

    def topic(self) -> str:
        return self._topic

    def is_connected(self) -> bool:
        """True until closed or its stream failed (a reader keeps no server state)."""
        return not self._closed.is_set() and self._failure is None

    def _drain(self, reader: Reader, into: queue.Queue[object], stop: threading.Event) -> None:
        try:
            for batch in reader.batches():
                if self._skip is not None:
                    batch = self._skipping(batch)
                if batch and not self._put(into, stop, batch):
                    return
            self._put(into, stop, _END)
        except BaseException as exc:  # handed to the caller of read_next
            self._put(into, stop, exc)

    def _skipping(self, batch: list[Message]) -> list[Message]:
        """The start id itself is dropped when the read is not inclusive."""
        if batch[0].id == self._skip:
            batch = batch[1:]
        if batch:
            self._skip = None
        return batch

    @staticmethod
    def _put(into: queue.Queue[object], stop: threading.Event, item: object) -> bool:
        while not stop.is_set():
            try:
                into.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message; waits forever, or raises ``Timeout`` after ``timeout_millis``."""
        ready = self._ready
        if not ready:
            self._refill(timeout_millis)
        msg = self._last = ready.popleft()
        return msg

    def _refill(self, timeout_millis: int | None) -> None:
        """The next response into ``_ready``, or the reason there is none."""
        if self._closed.is_set():
            raise AlreadyClosed("the reader is closed")
        if self._failure is not None:
            raise self._failure
        try:
            item = self._queue.get(
                timeout=None if timeout_millis is None else timeout_millis / 1000
            )
        except queue.Empty:
            raise Timeout(f"no message on {self._topic} within {timeout_millis} ms") from None
        if isinstance(item, list):
            self._ready.extend(item)
            return
        self._failure = item if isinstance(item, BaseException) else AlreadyClosed("the read ended")
        raise self._failure

    def has_message_available(self) -> bool:
        """True when ``read_next`` has a message now or one the server holds is still to
        come (the topic's last id lies after the last one read)."""
        if self._ready or not self._queue.empty():
            return True
        read = None if self._last is None else self._last.id
        return more_to_read(self._last_position()[0], read, self._start, self._skip is not None)

    def close(self) -> None:
        """Cancel the stream; a ``read_next`` after this raises ``AlreadyClosed``."""
        if not self._closed.is_set():
            self._closed.set()
            self._ready.clear()
            self._end()
