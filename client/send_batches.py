"""``SendBatches``: what ``send_async`` hands over, gathered into PublishStream requests.

pulsar-client's producer batches asynchronous sends (``batching_max_messages``,
``batching_max_allowed_size_in_bytes``, ``batching_max_publish_delay_ms``) and calls each
message's callback when the broker has it. Here the messages waiting when a request is
built go out together, in order, on one PublishStream (``Producer.send_stream``) that
pipelines requests while earlier ones are being stored:

- without ``batching_enabled`` a request takes whatever is waiting as soon as fewer than
  ``MAX_IN_FLIGHT`` requests are unanswered (a fast caller fills requests by itself
  while earlier ones are stored, a slow one sends one at a time);
- with it, a request also waits up to ``batching_max_publish_delay_ms`` for more, until
  ``batching_max_messages`` or ``batching_max_allowed_size_in_bytes`` is reached.

Each message keeps its own id (compactlog stores no batches under one id). A thread of
the producer's reads the replies in order and calls back ``callback(Result.Ok,
msg_id)``; when a request fails, every message of it and of the requests sent after it
gets the error (``callback(error, None)``), and later sends go out on a new stream.
``flush`` sends what waits at once and returns when every callback has been called. A
stream left idle for ``IDLE_S`` ends; the next send opens another.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from compactlog.client import _convert as cv
from compactlog.client.enums import Result
from compactlog.client.errors import AlreadyClosed
from compactlog.client.message_id import MessageId
from compactlog.client.producer import Producer
from compactlog.errors import CompactlogError, InvalidArgument

__all__ = ["BatchingSettings", "SendBatches", "SendCallback"]

SendCallback = Callable[[Result | CompactlogError, MessageId | None], None]
IDLE_S = 1.0  # an idle stream ends after this long
MAX_IN_FLIGHT = 4  # requests sent and not answered: while they are, the next one fills
MAX_UNANSWERED = 10_000  # sends not yet called back before send_async waits for room
_log = logging.getLogger(__name__)
_Entries = deque[tuple[cv.RecordLike, int, SendCallback]]  # a send: record, size, callback


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
        self.sequence = sequence  # the last sequence id sent (pulsar-client's count)
        self._settings = settings
        self._delay_s = settings.max_delay_ms / 1000 if settings.enabled else 0.0
        self._lock = threading.Lock()  # taken bare where speed counts; the same as _cond's
        self._cond = threading.Condition(self._lock)
        self._waiting: _Entries = deque()
        self._waiting_bytes = 0
        self._in_flight: deque[_Entries] = deque()  # requests taken, in order
        self._unanswered = 0  # handed over, not yet called back
        self._flushing = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._stream = 0  # which stream's feed may take batches (a failed one's may not)

    def sequenced(self, sequence_id: int | None) -> None:
        """Count one message sent (``send``): the next sequence id, or the one given."""
        with self._cond:
            self.sequence = self.sequence + 1 if sequence_id is None else sequence_id

    def add(
        self, record: cv.RecordLike, size: int, callback: SendCallback, sequence_id: int | None
    ) -> None:
        """Queue one send and count it (``sequenced``); waits while ``MAX_UNANSWERED``
        sends are not called back. Runs once per message: no call it can do without."""
        with self._lock:
            self.sequence = self.sequence + 1 if sequence_id is None else sequence_id
            if self._closed:
                raise AlreadyClosed("the producer is closed")
            while (
                self._unanswered >= MAX_UNANSWERED
                and threading.current_thread() is not self._thread  # not from a callback
            ):
                self._cond.wait()
            waiting = self._waiting
            waiting.append((record, size, callback))
            self._waiting_bytes += size
            self._unanswered += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="compactlog-send", daemon=True
                )
                self._thread.start()
            count = len(waiting)
            if count == 1 or count == self._settings.max_messages:
                self._cond.notify_all()  # a first message, or a full request

    @property
    def unanswered(self) -> int:
        return self._unanswered

    def flush(self) -> None:
        """Send what waits now; return when every send so far has been called back."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                self._cond.wait_for(lambda: self._unanswered == 0)
            finally:
                self._flushing -= 1

    def close(self) -> None:
        """Flush, then end the stream and the thread; later sends are refused."""
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    # -- the producer's thread: one stream at a time, replies called back in order ----------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting or self._closed)
                if not self._waiting:
                    return  # closed, nothing left
                stream = self._stream
            try:
                for ids in self._producer.send_stream(self._requests(stream)):
                    self._answer(self._in_flight.popleft(), ids)
            except CompactlogError as exc:
                self._fail_in_flight(exc)
            except ValueError as exc:  # grpc: the client's channel was closed
                self._fail_in_flight(AlreadyClosed(f"the client is closed ({exc})"))

    def _requests(self, stream: int) -> Iterator[list[cv.RecordLike]]:
        """The stream's requests, built on the stream's feeding thread as it can take
        them; ends when idle for ``IDLE_S``, closed, or the stream failed."""
        while True:
            batch = self._next_batch(stream)
            if batch is None:
                return
            yield batch

    def _next_batch(self, stream: int) -> list[cv.RecordLike] | None:
        """The next request's records, once there are some and fewer than
        ``MAX_IN_FLIGHT`` requests are unanswered (after the delay when batching)."""
        with self._cond:
            taken = self._take(stream)
        if taken is None:
            return None
        return [entry[0] for entry in taken]  # outside the lock: send_async goes on

    def _take(self, stream: int) -> _Entries | None:
        cond = self._cond
        if not cond.wait_for(lambda: self._waiting or self._closed, IDLE_S):
            return None
        if not self._waiting or stream != self._stream:
            return None
        # While MAX_IN_FLIGHT requests are out, sends gather for the next one.
        cond.wait_for(lambda: len(self._in_flight) < MAX_IN_FLIGHT or stream != self._stream)
        end = time.monotonic() + self._delay_s
        while not self._full() and not self._flushing and not self._closed:
            left = end - time.monotonic()
            if left <= 0:
                break
            cond.wait(left)
        if stream != self._stream:
            return None
        settings, waiting = self._settings, self._waiting
        if len(waiting) <= settings.max_messages and self._waiting_bytes <= settings.max_bytes:
            taken, self._waiting, self._waiting_bytes = waiting, deque(), 0  # all: no loop
        else:
            taken, size = deque(), 0
            while waiting and len(taken) < settings.max_messages:
                if taken and size + waiting[0][1] > settings.max_bytes:
                    break
                size += waiting[0][1]
                taken.append(waiting.popleft())
            self._waiting_bytes -= size
        self._in_flight.append(taken)  # under the lock: a failing stream fails it too
        return taken

    def _full(self) -> bool:
        s = self._settings
        return len(self._waiting) >= s.max_messages or self._waiting_bytes >= s.max_bytes

    def _answer(self, taken: _Entries, ids: list[MessageId]) -> None:
        ok = Result.Ok
        for entry, msg_id in zip(taken, ids, strict=True):
            try:
                entry[2](ok, msg_id)
            except Exception:  # the application's: logged, the other sends go on
                _log.exception("a send_async callback raised")
        self._answered(len(taken))

    def _fail_in_flight(self, error: CompactlogError) -> None:
        """Every request taken for the failed stream gets its error; its feed takes
        no more (a request it took but could not send is among them)."""
        with self._cond:
            self._stream += 1
        while self._in_flight:
            taken = self._in_flight.popleft()
            for entry in taken:
                self._call(entry[2], error, None)
            self._answered(len(taken))

    def _answered(self, count: int) -> None:
        with self._cond:
            self._unanswered -= count
            self._cond.notify_all()

    @staticmethod
    def _call(
        callback: SendCallback, result: Result | CompactlogError, msg_id: MessageId | None
    ) -> None:
        try:
            callback(result, msg_id)
        except Exception:  # the application's: logged, the other sends go on
            _log.exception("a send_async callback raised")
