"""``AsyncReader``: the asyncio twin of ``TopicReader`` (``topic_reader.py``): one follow
Read stream drained by a task into a queue of whole responses, ``read_next`` taking the
next message from the response in hand, ``seek`` opening a new stream at a new start."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from compactlog.client.aio.link import Link
from compactlog.client.errors import AlreadyClosed, Timeout, from_rpc_error
from compactlog.client.message import Message, messages_of
from compactlog.client.message_id import MessageId
from compactlog.client.reader import StartLike, read_request
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
from compactlog.partitioner import partition_name

__all__ = ["AsyncReader"]

_QUEUE_MESSAGES = 1000  # messages an AsyncReader reads ahead of read_next
_RESPONSE_MESSAGES = 1000  # about what one Read response holds

LastPositionOf = Callable[[], Awaitable[LastPosition]]


class AsyncReader:
    """Reads a topic from a start id on (``TopicReader``'s rules), following new messages."""

    def __init__(
        self,
        link: Link,
        topic: str,
        start: ReaderStart,
        inclusive: bool,
        read_compacted: bool,
        last_position: LastPositionOf,
    ) -> None:
        self._topic = topic
        self._link = link
        self._inclusive = inclusive
        self._read_compacted = read_compacted
        self._last_position = last_position
        self._address = link.address
        self._closed = False
        self._ready: deque[Message] = deque()  # the response in hand
        self._begin(start)

    @staticmethod
    async def opening(
        link: Link,
        topic: str,
        start_message_id: MessageId | tuple[int, int],
        inclusive: bool,
        read_compacted: bool,
        last_position: LastPositionOf,
    ) -> AsyncReader:
        """A reader whose ``MessageId.latest`` start is fixed now (``id_start``)."""
        start = await AsyncReader._id_start(start_of(start_message_id), inclusive, last_position)
        return AsyncReader(link, topic, start, inclusive, read_compacted, last_position)

    @staticmethod
    async def _id_start(
        start: StartLike, inclusive: bool, last_position: LastPositionOf
    ) -> ReaderStart:
        position = await last_position() if start == "latest" else None
        return id_start(start, inclusive, position)

    async def _time_start(self, ms: int) -> ReaderStart:
        """As ``TopicReader._time_start``."""
        position = await self._last_position()
        index: list[int | None] = [last.partition() for last in position.partitions] or [None]
        firsts = {
            i or 0: first for i in index if (first := await self._first_at(ms, i)) is not None
        }
        return time_start(ms, firsts, position)

    def _begin(self, start: ReaderStart) -> None:
        """Open the follow Read at ``start`` and its pump task."""
        self._skip = start.skip
        self._marks = start.marks
        self._ready.clear()
        # Whole responses read ahead (about _QUEUE_MESSAGES messages), as TopicReader.
        self._queue: asyncio.Queue[list[Message] | BaseException] = asyncio.Queue(
            max(1, _QUEUE_MESSAGES // _RESPONSE_MESSAGES)
        )
        at = start.start
        req = read_request(
            self._topic,
            "earliest" if isinstance(at, AtTime) else at,
            at.ms if isinstance(at, AtTime) else None,
            read_compacted=self._read_compacted,
            follow=True,
        )
        self._call = self._link.stub.Read(req, metadata=self._link.metadata)
        self._pump = asyncio.get_running_loop().create_task(self._drain(self._call, self._queue))

    async def _end(self) -> None:
        self._call.cancel()
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._pump

    def topic(self) -> str:
        return self._topic

    async def seek(self, message: MessageId | tuple[int, int] | int) -> None:
        """As ``TopicReader.seek``: a new stream at an id, an end, or a publish time."""
        if self._closed:
            raise AlreadyClosed("the reader is closed")
        await self._end()
        if isinstance(message, int):
            self._begin(await self._time_start(message))
        else:
            self._begin(
                await self._id_start(start_of(message), self._inclusive, self._last_position)
            )

    async def _first_at(self, timestamp_ms: int, partition: int | None) -> MessageId | None:
        """The first message of ``partition`` (None: a plain topic) published at or after
        ``timestamp_ms``; None when none is."""
        req = read_request(
            self._topic if partition is None else partition_name(self._topic, partition),
            start_timestamp_ms=timestamp_ms,
            read_compacted=self._read_compacted,
            max_messages=1,
        )
        call = self._link.stub.Read(req, metadata=self._link.metadata)
        try:
            async for resp in call:
                found = messages_of(resp.messages, self._topic)
                if found:
                    return found[0].message_id()
            return None
        except grpc.RpcError as err:
            raise from_rpc_error(err, "Read", self._address) from None
        finally:
            call.cancel()

    async def _drain(self, call: Any, into: asyncio.Queue[list[Message] | BaseException]) -> None:
        try:
            async for resp in call:
                batch = messages_of(resp.messages, self._topic)
                if batch and self._skip is not None:
                    if batch[0].id == self._skip:
                        batch = batch[1:]
                    if batch:
                        self._skip = None
                if batch:
                    await into.put(batch)
            await into.put(AlreadyClosed("the read ended"))
        except grpc.RpcError as err:
            await into.put(from_rpc_error(err, "Read", self._address))

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        """The next message; ``Timeout`` after ``timeout_millis`` (None: wait forever)."""
        ready = self._ready
        if not ready:
            await self._refill(timeout_millis)
        return ready.popleft()

    async def _refill(self, timeout_millis: int | None) -> None:
        if self._closed:
            raise AlreadyClosed("the reader is closed")
        seconds = None if timeout_millis is None else timeout_millis / 1000
        try:
            item = await asyncio.wait_for(self._queue.get(), seconds)
        except TimeoutError:
            raise Timeout(f"no message on {self._topic} within {timeout_millis} ms") from None
        if isinstance(item, BaseException):
            self._queue.put_nowait(item)  # every later read_next fails the same way
            raise item
        mark_read(self._marks, item)
        self._ready.extend(item)

    async def has_message_available(self) -> bool:
        if self._ready or not self._queue.empty():
            return True
        return more_to_read(await self._last_position(), self._marks)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._ready.clear()
            await self._end()
