"""``SendBatches``: what ``send_async`` hands over, gathered into PublishStream requests.

pulsar-client's producer batches asynchronous sends (``batching_max_messages``,
``batching_max_allowed_size_in_bytes``, ``batching_max_publish_delay_ms``) and calls each
message's callback when the broker has it. Here the messages waiting when a request is
taken go out together, in order, on one PublishStream (``Producer.send_encoded``) that
pipelines requests while earlier ones are being stored:

- without ``batching_enabled`` a request takes whatever is waiting as soon as fewer than
  ``MAX_IN_FLIGHT`` requests are unanswered (a fast caller fills requests by itself
  while earlier ones are stored, a slow one sends one at a time);
- with it, a request also waits up to ``batching_max_publish_delay_ms`` for more, until
  ``batching_max_messages`` or ``batching_max_allowed_size_in_bytes`` is reached.

A message costs little on its way (issue 29: the client at the server's speed): its key
and value are written straight into the pending request's bytes (``publish_wire``), its
callback onto the request's one list, and a full request is sealed as it fills, so gRPC
gets each request as bytes, taken on its own sending thread. Each message keeps its own
id (compactlog stores no batches under one id), made only when the reply comes, from the
reply's first id and the message's place. A thread of the producer's reads the replies
in order and calls back ``callback(Result.Ok, msg_id)``; when a request fails, every
message of it and of the requests sent after it gets the error (``callback(error,
None)``), and later sends go out on a new stream. ``flush`` sends what waits at once and
returns when every callback has been called. A stream left idle for ``IDLE_S`` ends;
the next send opens another. So does the thread, ``IDLE_S`` after its stream, so that a
producer dropped without ``close`` keeps no thread (and no producer) alive for good.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

from compactlog.client import _convert as cv
from compactlog.client import publish_wire as wire
from compactlog.client.errors import AlreadyClosed
from compactlog.client.producer import Producer
from compactlog.client.send_replies import MAX_UNANSWERED, SendCallback, answer, fail, pending_for
from compactlog.errors import CompactlogError, InvalidArgument

__all__ = ["MAX_UNANSWERED", "BatchingSettings", "SendBatches", "SendCallback"]

IDLE_S = 1.0  # an idle stream ends after this long
MAX_IN_FLIGHT = 4  # requests sent and not answered: while they are, the next one fills
_Callbacks = list[SendCallback]  # one request's, in its records' order


@dataclass(frozen=True, slots=True)
class BatchingSettings:
    """pulsar-client's batching parameters of ``create_producer``."""

    enabled: bool = False
    max_messages: int = 1000
    max_bytes: int = 128 * 1024
    max_delay_ms: int = 10

    def __post_init__(self) -> None:
        if self.max_messages < 1 or self.max_bytes < 1 or self.max_delay_ms < 0:
            raise InvalidArgument(
                "batching_max_messages and batching_max_allowed_size_in_bytes must be "
                "at least 1, batching_max_publish_delay_ms at least 0"
            )


class SendBatches:
    """The asynchronous sends of one producer, in order."""

    def __init__(self, producer: Producer, settings: BatchingSettings, sequence: int = -1) -> None:
        self._producer = producer
        self._settings = settings
        self._delay_s = settings.max_delay_ms / 1000 if settings.enabled else 0.0
        self._cond = threading.Condition(threading.Lock())
        self._pending = pending_for(
            producer.topic(), settings.max_messages, settings.max_bytes
        )  # the queue itself: each of its calls is atomic, so it needs no lock here
        self._sequence_base = sequence  # the last sequence id is this + the sends added
        self._in_flight: deque[_Callbacks] = deque()  # requests taken, in order
        self._flushing = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._stream = 0  # which stream's feed may take requests (a failed one's may not)

    @property
    def sequence(self) -> int:
        """The last sequence id sent (pulsar-client's count)."""
        return int(self._sequence_base + self._pending.added)

    def sequenced(self, sequence_id: int | None) -> None:
        """Count one message sent (``send``): the next sequence id, or the one given."""
        with self._cond:
            self._sequence_base += 1 if sequence_id is None else sequence_id - self.sequence

    @property
    def queue_add(self) -> Callable[[bytes | None, bytes | None, SendCallback], int]:
        """The queue's own ``add(key, value, callback) -> flags``, for a caller that counts
        every call (``TopicProducer.send_async``): what it returns goes to ``added`` when
        it is not 0 (or a sequence id was given). ``add`` is the same in one call."""
        return cast(Callable[[bytes | None, bytes | None, SendCallback], int], self._pending.add)

    def add(
        self,
        key: bytes | None,
        value: bytes | None,
        callback: SendCallback,
        sequence_id: int | None = None,
        record: cv.RecordLike | None = None,
    ) -> None:
        """Queue one send of ``key`` and ``value`` (or of ``record``, whose properties or
        event time protobuf serializes) and count it (``sequenced``); waits while
        ``MAX_UNANSWERED`` sends are not called back."""
        if record is None:
            flags = self._pending.add(key, value, callback)
        else:
            size = len(key or b"") + len(value or b"")
            flags = self._pending.add_encoded(wire.encoded(record), size, callback)
        if flags or sequence_id is not None:
            self.added(flags, sequence_id)

    def added(self, flags: int, sequence_id: int | None) -> None:
        """After a message went into the queue (or, ``CLOSED``, did not): refuse a send
        after ``close``, take the sequence id given, and wake the sending side."""
        if flags & wire.CLOSED:
            raise AlreadyClosed("the producer is closed")
        if sequence_id is not None:
            with self._cond:
                self._sequence_base = sequence_id - self._pending.added
        if flags:
            self._woken(flags)

    def _woken(self, flags: int) -> None:
        """Wake the sending side for a request begun or sealed (starting the producer's
        thread at the first); with ``MAX_UNANSWERED`` sends not called back, wait for
        room (not from a callback: the thread that calls back would wait for itself)."""
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="compactlog-send", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
            if flags & wire.CROWDED and threading.current_thread() is not self._thread:
                self._cond.wait_for(
                    lambda: self._pending.unanswered < MAX_UNANSWERED or self._closed
                )

    @property
    def unanswered(self) -> int:
        return int(self._pending.unanswered)

    def flush(self) -> None:
        """Send what waits now; return when every send so far has been called back."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                self._cond.wait_for(lambda: self._pending.unanswered == 0)
            finally:
                self._flushing -= 1

    def close(self) -> None:
        """Flush, then end the stream and the thread; later sends are refused."""
        self.flush()
        with self._cond:
            self._closed = True
            self._pending.close()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    # -- the producer's thread: one stream at a time, replies called back in order ----------

    def _run(self) -> None:
        one_log = self._producer.one_log
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: self._pending.waiting or self._closed, IDLE_S):
                    self._thread = None  # idle: the next send starts another (_woken)
                    return
                if not self._pending.waiting:
                    return  # closed, nothing left
                stream = self._stream
            try:
                for resp in self._producer.send_encoded(self._requests(stream)):
                    callbacks = self._in_flight.popleft()
                    answer(callbacks, resp, one_log)
                    self._answered(len(callbacks))
            except CompactlogError as exc:
                self._fail_in_flight(exc)
            except ValueError as exc:  # grpc: the client's channel was closed
                self._fail_in_flight(AlreadyClosed(f"the client is closed ({exc})"))

    def _requests(self, stream: int) -> Iterator[bytes]:
        """The stream's requests, taken on gRPC's sending thread as it can send them;
        ends when idle for ``IDLE_S``, closed, or the stream failed."""
        while True:
            with self._cond:
                request = self._take(stream)
            if request is None:
                return
            yield request

    def _take(self, stream: int) -> bytes | None:
        """The next request, once there is one and fewer than ``MAX_IN_FLIGHT``
        requests are unanswered (after the delay when batching and not full)."""
        cond, pending = self._cond, self._pending
        if not cond.wait_for(lambda: pending.waiting or self._closed, IDLE_S):
            return None
        if not pending.waiting or stream != self._stream:
            return None
        # While MAX_IN_FLIGHT requests are out, sends gather for the next one.
        cond.wait_for(lambda: len(self._in_flight) < MAX_IN_FLIGHT or stream != self._stream)
        end = time.monotonic() + self._delay_s
        while not pending.full and not self._flushing and not self._closed:
            left = end - time.monotonic()
            if left <= 0:
                break
            cond.wait(left)
        taken = pending.take() if stream == self._stream else None
        if taken is None:
            return None
        self._in_flight.append(taken[1])  # under the lock: a failing stream fails it too
        return bytes(taken[0])

    def _fail_in_flight(self, error: CompactlogError) -> None:
        """Every request taken for the failed stream gets its error; its feed takes
        no more (a request it took but could not send is among them)."""
        with self._cond:
            self._stream += 1
            self._cond.notify_all()
        while self._in_flight:
            callbacks = self._in_flight.popleft()
            fail(callbacks, error)
            self._answered(len(callbacks))

    def _answered(self, count: int) -> None:
        self._pending.answered(count)
        with self._cond:
            self._cond.notify_all()
