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
the next send opens another.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from compactlog.client import _convert as cv
from compactlog.client import publish_wire as wire
from compactlog.client.enums import Result
from compactlog.client.errors import AlreadyClosed
from compactlog.client.message_id import MessageId
from compactlog.client.producer import Producer
from compactlog.errors import CompactlogError, InvalidArgument
from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["BatchingSettings", "SendBatches", "SendCallback"]

SendCallback = Callable[[Result | CompactlogError, MessageId | None], None]
IDLE_S = 1.0  # an idle stream ends after this long
MAX_IN_FLIGHT = 4  # requests sent and not answered: while they are, the next one fills
MAX_UNANSWERED = 10_000  # sends not yet called back before send_async waits for room
_log = logging.getLogger(__name__)
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
        self.sequence = sequence  # the last sequence id sent (pulsar-client's count)
        self._settings = settings
        self._max_messages = settings.max_messages
        self._max_bytes = settings.max_bytes
        self._delay_s = settings.max_delay_ms / 1000 if settings.enabled else 0.0
        self._lock = threading.Lock()  # taken bare where speed counts; the same as _cond's
        self._cond = threading.Condition(self._lock)
        self._head = wire.request_head(producer.topic())
        self._buf = bytearray(self._head)  # the pending request's bytes
        self._callbacks: _Callbacks = []  # and its messages' callbacks
        self._waiting_bytes = 0  # its keys' and values' bytes
        self._sealed: deque[tuple[bytearray, _Callbacks]] = deque()  # full, not yet taken
        self._in_flight: deque[_Callbacks] = deque()  # requests taken, in order
        self._unanswered = 0  # handed over, not yet called back
        self._flushing = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._stream = 0  # which stream's feed may take requests (a failed one's may not)

    def sequenced(self, sequence_id: int | None) -> None:
        """Count one message sent (``send``): the next sequence id, or the one given."""
        with self._cond:
            self.sequence = self.sequence + 1 if sequence_id is None else sequence_id

    def add(
        self,
        key: bytes | None,
        value: bytes | None,
        callback: SendCallback,
        sequence_id: int | None,
        record: cv.RecordLike | None = None,
    ) -> None:
        """Queue one send of ``key`` and ``value`` (or of ``record``, whose properties or
        event time protobuf encodes) and count it (``sequenced``); waits while
        ``MAX_UNANSWERED`` sends are not called back. Runs once per message: no call it
        can do without."""
        with self._lock:
            self.sequence = self.sequence + 1 if sequence_id is None else sequence_id
            if self._closed:
                raise AlreadyClosed("the producer is closed")
            while (
                self._unanswered >= MAX_UNANSWERED
                and threading.current_thread() is not self._thread  # not from a callback
            ):
                self._cond.wait()
            buf = self._buf
            mark = len(buf)
            if record is None:
                size = wire.append(buf, key, value)
            else:
                wire.append_record(buf, record)
                size = len(key or b"") + len(value or b"")
            callbacks = self._callbacks
            callbacks.append(callback)
            self._waiting_bytes += size
            self._unanswered += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="compactlog-send", daemon=True
                )
                self._thread.start()
            if len(callbacks) >= self._max_messages or self._waiting_bytes >= self._max_bytes:
                self._seal(mark, size)
            elif len(callbacks) == 1:
                self._cond.notify_all()  # a first message

    def _seal(self, mark: int, size: int) -> None:
        """The pending request is full: it waits to be taken as it is, or, where its last
        message (written from ``mark``, ``size`` bytes) took it past the size limit, the
        request before that message does and the message starts the next one."""
        buf, callbacks = self._buf, self._callbacks
        if self._waiting_bytes > self._max_bytes and len(callbacks) > 1:
            tail = buf[mark:]
            del buf[mark:]
            self._buf, self._callbacks = bytearray(self._head) + tail, [callbacks.pop()]
            self._waiting_bytes = size
            self._sealed.append((buf, callbacks))
            if self._max_messages == 1 or size >= self._max_bytes:
                self._seal(len(self._head), size)  # the message fills one by itself
        else:
            self._buf, self._callbacks, self._waiting_bytes = bytearray(self._head), [], 0
            self._sealed.append((buf, callbacks))
        self._cond.notify_all()

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
        one_log = self._producer.one_log
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting() or self._closed)
                if not self._waiting():
                    return  # closed, nothing left
                stream = self._stream
            try:
                for resp in self._producer.send_encoded(self._requests(stream)):
                    self._answer(self._in_flight.popleft(), resp, one_log)
            except CompactlogError as exc:
                self._fail_in_flight(exc)
            except ValueError as exc:  # grpc: the client's channel was closed
                self._fail_in_flight(AlreadyClosed(f"the client is closed ({exc})"))

    def _waiting(self) -> bool:
        return bool(self._sealed or self._callbacks)

    def _requests(self, stream: int) -> Iterator[bytes]:
        """The stream's requests, taken on gRPC's sending thread as it can send them;
        ends when idle for ``IDLE_S``, closed, or the stream failed."""
        while True:
            with self._cond:
                request = self._take(stream)
            if request is None:
                return
            yield bytes(request)  # outside the lock: send_async goes on

    def _take(self, stream: int) -> bytearray | None:
        """The next request, once there is one and fewer than ``MAX_IN_FLIGHT``
        requests are unanswered (after the delay when batching and not full)."""
        cond = self._cond
        if not cond.wait_for(lambda: self._waiting() or self._closed, IDLE_S):
            return None
        if not self._waiting() or stream != self._stream:
            return None
        # While MAX_IN_FLIGHT requests are out, sends gather for the next one.
        cond.wait_for(lambda: len(self._in_flight) < MAX_IN_FLIGHT or stream != self._stream)
        end = time.monotonic() + self._delay_s
        while not self._sealed and not self._flushing and not self._closed:
            left = end - time.monotonic()
            if left <= 0:
                break
            cond.wait(left)
        if stream != self._stream or not self._waiting():
            return None
        if self._sealed:
            buf, callbacks = self._sealed.popleft()
        else:
            buf, callbacks = self._buf, self._callbacks
            self._buf, self._callbacks, self._waiting_bytes = bytearray(self._head), [], 0
        self._in_flight.append(callbacks)  # under the lock: a failing stream fails it too
        return buf

    def _answer(self, callbacks: _Callbacks, resp: pb.PublishResponse, one_log: bool) -> None:
        """Each message's callback with its id, in order; ids made from the reply's first
        where they run (``cv.id_run``), a callback's exception logged."""
        ok, count = Result.Ok, len(callbacks)
        run = cv.id_run(resp.ids, one_log) if len(resp.ids) == count else None
        if run is not None:
            done = 0
            while done < count:
                done, error = wire.call_back(callbacks, done, ok, run[0], run[1], MessageId)
                if error is not None:
                    _log.error("a send_async callback raised", exc_info=error)
        else:
            for callback, msg_id in zip(callbacks, cv.ids_from_pb(resp.ids, one_log), strict=True):
                self._call(callback, ok, msg_id)
        self._answered(count)

    def _fail_in_flight(self, error: CompactlogError) -> None:
        """Every request taken for the failed stream gets its error; its feed takes
        no more (a request it took but could not send is among them)."""
        with self._cond:
            self._stream += 1
            self._cond.notify_all()
        while self._in_flight:
            callbacks = self._in_flight.popleft()
            for callback in callbacks:
                self._call(callback, error, None)
            self._answered(len(callbacks))

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
