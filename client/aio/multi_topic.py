"""``AsyncMultiTopicConsumer``: what ``AsyncClient.subscribe([topic, ...], name)`` returns,
the asyncio twin of ``MultiTopicConsumer``: one ``AsyncConsumer`` a topic, received from
in turn (a short wait on each, so a quiet topic does not hold up a busy one), and each
acknowledgement sent to the consumer of the message's topic."""

from __future__ import annotations

import time

from compactlog.client import _convert as cv
from compactlog.client.aio.consumer import AsyncConsumer
from compactlog.client.errors import AlreadyClosed, Timeout
from compactlog.client.message import Message
from compactlog.client.multi_topic import MultiTopic
from compactlog.errors import InvalidArgument

__all__ = ["AsyncMultiTopicConsumer"]

_TURN_MS = 50  # how long receive waits on one topic before asking the next


class AsyncMultiTopicConsumer(MultiTopic[AsyncConsumer]):
    """One consumer on each of several topics, received from in turn."""

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message of any of the topics; ``Timeout`` after ``timeout_millis``."""
        end = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            if self._closed:
                raise AlreadyClosed("the consumer is closed")
            consumer = self._consumers[self._turn % len(self._consumers)]
            self._turn += 1
            left = _TURN_MS if end is None else int((end - time.monotonic()) * 1000)
            try:
                return await consumer.receive(max(0, min(_TURN_MS, left)))
            except Timeout:
                if end is not None and time.monotonic() >= end:
                    msg = f"no message on {self.topic()} within {timeout_millis} ms"
                    raise Timeout(msg) from None

    async def batch_receive(self) -> list[Message]:
        """As ``MultiTopicConsumer.batch_receive``."""
        while True:
            if self._closed:
                raise AlreadyClosed("the consumer is closed")
            consumer = self._consumers[self._turn % len(self._consumers)]
            self._turn += 1
            batch = await consumer.batch_receive(timeout_ms=_TURN_MS)
            if batch:
                return batch

    def _owner(self, message: cv.MessageIdLike) -> AsyncConsumer:
        if isinstance(message, Message) and message.topic in self._by_topic:
            return self._by_topic[message.topic]
        if len(self._consumers) == 1:
            return self._consumers[0]
        raise InvalidArgument("a multi-topic consumer acknowledges messages, not bare ids")

    async def acknowledge(self, message: cv.MessageIdLike) -> None:
        await self._owner(message).acknowledge(message)

    async def acknowledge_cumulative(self, message: cv.MessageIdLike) -> None:
        await self._owner(message).acknowledge_cumulative(message)

    async def negative_acknowledge(self, message: cv.MessageIdLike) -> None:
        await self._owner(message).negative_acknowledge(message)

    def redeliver_unacknowledged_messages(self) -> None:
        for consumer in self._consumers:
            consumer.redeliver_unacknowledged_messages()

    async def unsubscribe(self) -> None:
        for consumer in self._consumers:
            await consumer.unsubscribe()
        self._closed = True

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            for consumer in self._consumers:
                await consumer.close()
