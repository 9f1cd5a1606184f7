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
was read ahead. Where a start leaves each partition, and so what
``has_message_available`` answers, is ``reader_start``'s job.
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
from compactlog.client.reader_start import (
    AtTime,
    LastPosition,
    ReaderStart,
    id_start,
    mark_read,
    more_to_read,
    start_of,
    time_start,
)
from compactlog.errors import InvalidArgument

__all__ = ["TopicReader"]

_QUEUE_MESSAGES = 1000  # messages read ahead of read_next (pulsar-client's receiver queue)
_RESPONSE_MESSAGES = 1000  # about what one Read response holds, to size the queue in responses
_END = object()  # the stream ended (it only does when closed or failed)

# The topic's last ids now (``Client.last_position``).
LastPositionOf = Callable[[], LastPosition]
# The first message of a partition (None: a plain topic) published at or after a time in
# epoch ms, or None when there is none yet.
FirstAt = Callable[[int, int | None], MessageId | None]
# Opens the follow Read stream at a start.
OpenReader = Callable[[StartLike | AtTime], Reader]


class TopicReader(Closeable):
    """Reads a topic from a start id on, raw or compacted; keeps no server-side cursor."""

    def __init__(
        self,
        open_reader: OpenReader,
        start_message_id: MessageId | tuple[int, int],
        inclusive: bool,
        last_position: LastPositionOf,
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
        self._begin(self._id_start(start_of(start_message_id)))
        self._topic = self._reader.topic()

    def _id_start(self, start: StartLike) -> ReaderStart:
        position = self._last_position() if start == "latest" else None
        return id_start(start, self._inclusive, position)

    def _time_start(self, ms: int) -> ReaderStart:
        """A seek's start at publish time ``ms`` (the last ids first: what is published
        between is read)."""
        position = self._last_position()
        index: list[int | None] = [last.partition() for last in position.partitions] or [None]
        firsts = {i or 0: first for i in index if (first := self._first_at(ms, i)) is not None}
        return time_start(ms, firsts, position)

    def _begin(self, start: ReaderStart) -> None:
        """Open the stream at ``start`` and its pump thread."""
        self._skip = start.skip
        self._marks = start.marks
        self._reader = self._open(start.start)
        self._queue: queue.Queue[object] = queue.Queue(self._ahead)
        self._ready.clear()
        self._stop = threading.Event()
        self._failure: BaseException | None = None
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
            self._begin(self._time_start(message))
        else:
            self._begin(self._id_start(start_of(message)))

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
        return ready.popleft()

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
            mark_read(self._marks, item)
            self._ready.extend(item)
            return
        self._failure = item if isinstance(item, BaseException) else AlreadyClosed("the read ended")
        raise self._failure

    def has_message_available(self) -> bool:
        """True when ``read_next`` has a message now or one the server holds is still to
        come (the topic's last id lies after the last one read)."""
        if self._ready or not self._queue.empty():
            return True
        return more_to_read(self._last_position(), self._marks)

    def close(self) -> None:
        """Cancel the stream; a ``read_next`` after this raises ``AlreadyClosed``."""
        if not self._closed.is_set():
            self._closed.set()
            self._ready.clear()
            self._end()
