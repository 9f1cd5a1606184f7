"""``AsyncSendBatches``: the asyncio producer's sends gathered into Publish requests.

The twin of ``send_batches`` for ``AsyncProducer``: every ``await producer.send(...)``
begun while a request is out (``asyncio.create_task(producer.send(...))``, or many
coroutines sending at once) joins the next request, so a busy producer sends requests of
up to ``batching_max_messages`` messages or ``batching_max_allowed_size_in_bytes`` of
values; with ``batching_enabled`` a request also waits up to
``batching_max_publish_delay_ms`` for more. One request is out at a time, so messages
are stored in the order they were sent, and each ``send`` returns its own message's id
or raises the error its request met (a request is all or nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from compactlog.client import _convert as cv
from compactlog.client.message_id import MessageId
from compactlog.client.send_batches import BatchingSettings

__all__ = ["AsyncSendBatches"]

Publish = Callable[[list[cv.RecordLike]], Awaitable[list[MessageId]]]
_Entry = tuple[cv.RecordLike, int, "asyncio.Future[MessageId]"]


class AsyncSendBatches:
    """The sends of one asyncio producer, in order, one request out at a time."""

    def __init__(self, publish: Publish, settings: BatchingSettings) -> None:
        self._publish = publish
        self._settings = settings
        self._delay_s = settings.max_delay_ms / 1000 if settings.enabled else 0.0
        self._waiting: list[_Entry] = []
        self._unanswered: set[asyncio.Future[MessageId]] = set()  # queued or in a request
        self._waiting_bytes = 0
        self._flushing = 0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def send(self, record: cv.RecordLike, size: int) -> asyncio.Future[MessageId]:
        """Queue one message; the future is its id once its request is stored."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[MessageId] = loop.create_future()
        self._unanswered.add(future)
        future.add_done_callback(self._unanswered.discard)
        self._waiting.append((record, size, future))
        self._waiting_bytes += size
        if self._wake is None:
            self._wake = asyncio.Event()
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        self._wake.set()
        return future

    async def flush(self) -> None:
        """Send what waits now and wait until every message queued so far is answered."""
        futures = list(self._unanswered)
        if not futures:
            return
        self._flushing += 1
        if self._wake is not None:
            self._wake.set()
        try:
            await asyncio.wait(futures)
        finally:
            self._flushing -= 1

    async def _run(self) -> None:
        assert self._wake is not None
        while self._waiting:
            if self._delay_s and not self._full() and not self._flushing:
                self._wake.clear()
                # Wait for more, up to the delay; a flush or a full request ends it.
                loop = asyncio.get_running_loop()
                end = loop.time() + self._delay_s
                while not self._full() and not self._flushing and loop.time() < end:
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), end - loop.time())
                    except TimeoutError:
                        break
            await self._send(self._take())

    def _full(self) -> bool:
        s = self._settings
        return len(self._waiting) >= s.max_messages or self._waiting_bytes >= s.max_bytes

    def _take(self) -> list[_Entry]:
        settings, waiting = self._settings, self._waiting
        count, size = 0, 0
        while count < len(waiting) and count < settings.max_messages:
            if count and size + waiting[count][1] > settings.max_bytes:
                break
            size += waiting[count][1]
            count += 1
        taken, self._waiting = waiting[:count], waiting[count:]
        self._waiting_bytes -= size
        return taken

    async def _send(self, taken: list[_Entry]) -> None:
        try:
            ids = await self._publish([entry[0] for entry in taken])
        except Exception as exc:  # the request's error is each of its sends'
            for entry in taken:
                if not entry[2].done():
                    entry[2].set_exception(exc)
            return
        for entry, msg_id in zip(taken, ids, strict=True):
            if not entry[2].done():
                entry[2].set_result(msg_id)
