"""``AsyncSendBatches``: the asyncio producer's sends gathered into PublishStream requests.

The asyncio twin of ``send_batches``, on the same queue and reply side
(``send_replies``): each send's key and value are written straight into the pending
request's bytes with its callback (``AsyncProducer.send``'s is the future it awaits,
``send_async``'s the caller's), and a task of the producer's sends the requests on one
PublishStream of the client's channel, up to ``MAX_IN_FLIGHT`` unanswered, with the
sync producer's batching settings: without ``batching_enabled`` a request takes what
waits, with it a request waits up to ``batching_max_publish_delay_ms`` until
``batching_max_messages`` or ``batching_max_allowed_size_in_bytes`` is reached. Replies
are called back in order; a failed request fails every message of it and of the
requests sent after it with the typed error, and later sends go on a new stream. A
stream idle for ``IDLE_S`` ends, and so does the task; the next send starts another.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, cast

import grpc

from compactlog.client import publish_wire as wire
from compactlog.client.aio.call_status import SentStatus
from compactlog.client.errors import AlreadyClosed, Timeout, from_rpc_error
from compactlog.client.message_id import MessageId
from compactlog.client.send_batches import IDLE_S, MAX_IN_FLIGHT, BatchingSettings
from compactlog.client.send_replies import (
    MAX_UNANSWERED,
    SendCallback,
    answer,
    fail,
    pending_for,
)
from compactlog.errors import CompactlogError
from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["AsyncSendBatches", "PublishEncoded", "Sent"]

PublishEncoded = Callable[..., Any]  # the channel's raw-bytes PublishStream
Partitions = Callable[[], Awaitable[int]]  # the topic's partitions (GetTopic)


class Sent(asyncio.Future[MessageId]):
    """One ``send``'s future, and its callback: the message's id, or its request's error."""

    __slots__ = ()

    def __call__(self, result: object, msg_id: MessageId | None) -> None:
        if self.done():  # the sender was cancelled
            return
        if msg_id is None:
            self.set_exception(result if isinstance(result, BaseException) else Exception(result))
        else:
            self.set_result(msg_id)


class AsyncSendBatches:
    """The sends of one asyncio producer, in order."""

    def __init__(
        self,
        publish: PublishEncoded,
        partitions: Partitions,
        metadata: Any,
        address: str,
        timeout: float | None,
        topic: str,
        settings: BatchingSettings,
        sequence: int = -1,
    ) -> None:
        self._publish, self._metadata, self._address = publish, metadata, address
        self._partitions = partitions
        self._one_log: bool | None = None  # learned before the first stream opens
        self._timeout, self._topic = timeout, topic
        self._delay_s = settings.max_delay_ms / 1000 if settings.enabled else 0.0
        self._pending = pending_for(topic, settings.max_messages, settings.max_bytes)
        self._sequence_base = sequence  # the last sequence id is this + the sends added
        self._in_flight: deque[list[SendCallback]] = deque()  # requests taken, in order
        self._flushing = 0
        self._closed = False
        self._stream = 0  # which stream may take requests (a failed one's may not)
        self._changed: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._due = 0.0  # when the oldest unanswered request is late
        self._room_waiters: list[asyncio.Future[None]] = []  # sends waiting for ``room``

    @property
    def sequence(self) -> int:
        """The last sequence id sent (pulsar-client's count)."""
        return int(self._sequence_base + self._pending.added)

    @property
    def queue_add(self) -> Callable[[bytes | None, bytes | None, SendCallback], int]:
        """The queue's own ``add(key, value, callback) -> flags``, for a caller that counts
        every call (``AsyncProducer.send_async``): what it returns goes to ``added`` when
        it is not 0 (or a sequence id was given)."""
        return cast(Callable[[bytes | None, bytes | None, SendCallback], int], self._pending.add)

    def add_record(
        self, record: pb.Record, size: int, callback: SendCallback, sequence_id: int | None
    ) -> None:
        """Queue a send of ``record`` (serialized by protobuf: it has properties or an
        event time), of ``size`` key and value bytes, as ``added`` says."""
        flags = self._pending.add_encoded(record.SerializeToString(), size, callback)
        self.added(flags, sequence_id)

    def added(self, flags: int, sequence_id: int | None) -> None:
        """After a message went into the queue (or, ``CLOSED``, did not): refuse a send
        after ``close``, take the sequence id given, and start the sending task."""
        if flags & wire.CLOSED:
            raise AlreadyClosed("the producer is closed")
        if sequence_id is not None:
            self._sequence_base = sequence_id - self._pending.added
        if flags:
            self._wake()
            if self._task is None or self._task.done():
                self._task = asyncio.get_running_loop().create_task(self._run())

    async def room(self) -> None:
        """Wait while ``MAX_UNANSWERED`` sends are not called back. Each waiter has a
        future of its own, resolved once when there is room: many senders waiting (a
        gather of sends) are woken once each, not at every reply."""
        if self._pending.unanswered < MAX_UNANSWERED or self._closed:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._room_waiters.append(waiter)
        await waiter

    def _release_room(self) -> None:
        waiters, self._room_waiters = self._room_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def flush(self) -> None:
        """Send what waits now; return when every send so far has been called back."""
        self._flushing += 1
        self._wake()
        try:
            await self._until(lambda: self._pending.unanswered == 0)
        finally:
            self._flushing -= 1

    async def close(self) -> None:
        """Flush, then refuse later sends and let the stream end."""
        await self.flush()
        self._closed = True
        self._pending.close()
        self._wake()
        self._release_room()
        if self._task is not None:
            await self._task

    # -- the producer's task: one stream at a time, replies called back in order ------------

    def _wake(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        self._changed.set()

    async def _until(self, ready: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until ``ready()`` (True) or ``timeout`` seconds pass (``ready()``)."""
        if ready():
            return True
        if self._changed is None:
            self._changed = asyncio.Event()
        changed, loop = self._changed, asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        while not ready():
            changed.clear()
            if end is None:
                await changed.wait()
                continue
            left = end - loop.time()
            if left <= 0:
                return ready()
            try:
                await asyncio.wait_for(changed.wait(), left)
            except TimeoutError:
                return ready()
        return True

    async def _run(self) -> None:
        while self._pending.waiting:
            try:
                if self._one_log is None:
                    self._one_log = await self._partitions() <= 1
            except CompactlogError as exc:  # the topic's sends go nowhere: each fails
                while (taken := self._pending.take()) is not None:
                    self._in_flight.append(taken[1])
                self._fail_in_flight(exc)
                continue
            try:
                await self._one_stream(self._stream)
            except CompactlogError as exc:
                self._fail_in_flight(exc)
            except grpc.RpcError as exc:
                self._fail_in_flight(from_rpc_error(exc, "PublishStream", self._address))
            except grpc.aio.UsageError as exc:  # the client's channel was closed
                self._fail_in_flight(AlreadyClosed(f"the client is closed ({exc})"))

    async def _one_stream(self, stream: int) -> None:
        call = self._publish(self._requests(stream), metadata=self._metadata)
        sent = SentStatus(call)
        one_log = bool(self._one_log)
        try:
            while (resp := await self._reply(call)) is not grpc.aio.EOF:
                callbacks = self._in_flight.popleft()
                self._due = asyncio.get_running_loop().time() + (self._timeout or 0)
                answer(callbacks, resp, one_log)
                self._answered(len(callbacks))
        except grpc.RpcError as exc:
            raise await sent.error(exc) from None
        finally:
            call.cancel()  # a no-op once the call has finished

    async def _reply(self, call: Any) -> Any:
        """The next reply, due within the timeout while a request is unanswered."""
        read = asyncio.ensure_future(call.read())
        loop = asyncio.get_running_loop()
        while self._timeout is not None:
            wait = self._due - loop.time() if self._in_flight else IDLE_S
            done, _ = await asyncio.wait((read,), timeout=max(wait, 0.0))
            if done:
                break
            if self._in_flight and loop.time() >= self._due:
                read.cancel()
                raise Timeout(
                    f"PublishStream {self._topic}: no answer from the server within "
                    f"{self._timeout:g} s"
                )
        return await read

    async def _requests(self, stream: int) -> Any:
        """The stream's requests as gRPC can send them; ends when idle for ``IDLE_S``,
        closed, or the stream failed."""
        while (request := await self._take(stream)) is not None:
            yield request

    async def _take(self, stream: int) -> bytes | None:
        """The next request, once there is one and fewer than ``MAX_IN_FLIGHT`` are
        unanswered (after the delay when batching and not full)."""
        pending = self._pending
        ready = lambda: pending.waiting or self._closed or stream != self._stream  # noqa: E731
        if not await self._until(ready, IDLE_S):
            return None
        if not pending.waiting or stream != self._stream:
            return None
        # While MAX_IN_FLIGHT requests are out, sends gather for the next one.
        await self._until(lambda: len(self._in_flight) < MAX_IN_FLIGHT or stream != self._stream)
        if self._delay_s:
            await self._until(
                lambda: pending.full or self._flushing > 0 or self._closed, self._delay_s
            )
        taken = pending.take() if stream == self._stream else None
        if taken is None:
            return None
        if not self._in_flight:
            self._due = asyncio.get_running_loop().time() + (self._timeout or 0)
        self._in_flight.append(taken[1])
        return bytes(taken[0])

    def _fail_in_flight(self, error: CompactlogError) -> None:
        """Every request taken for the failed stream gets its error; its requests'
        feed takes no more."""
        self._stream += 1
        while self._in_flight:
            callbacks = self._in_flight.popleft()
            fail(callbacks, error)
            self._answered(len(callbacks))
        self._wake()

    def _answered(self, count: int) -> None:
        self._pending.answered(count)
        self._wake()
        if self._room_waiters and self._pending.unanswered < MAX_UNANSWERED:
            self._release_room()
