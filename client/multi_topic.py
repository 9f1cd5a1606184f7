"""``MultiTopicConsumer``: what ``client.subscribe([topic, ...], name)`` returns, one
subscription of that name on each topic, as pulsar-client's multi-topic consumer.

Under it is one ``Consumer`` a topic. ``receive`` asks them in turn (a short wait on
each, so a quiet topic does not hold up a busy one); an acknowledgement goes to the
consumer of the message's topic (``msg.topic_name()``), so acknowledge messages, not bare
ids, when ids of two topics may be equal.
"""

from __future__ import annotations

import time
from typing import Generic, Protocol, TypeVar

from compactlog.client import _convert as cv
from compactlog.client.closeable import Closeable, close_all
from compactlog.client.consumer import Consumer
from compactlog.client.errors import AlreadyClosed, Timeout
from compactlog.client.message import Message
from compactlog.errors import InvalidArgument

__all__ = ["MultiTopicConsumer"]

_TURN_MS = 50  # how long receive waits on one topic before asking the next


class _Named(Protocol):
    def topic(self) -> str: ...

    def subscription_name(self) -> str: ...


C = TypeVar("C", bound=_Named)


class MultiTopic(Generic[C]):
    """What the sync and the asyncio multi-topic consumers share: their consumers, one a
    topic, whose turn it is, and the names."""

    def __init__(self, consumers: list[C]) -> None:
        if not consumers:
            raise InvalidArgument("subscribe needs at least one topic")
        self._consumers = consumers
        self._by_topic = {c.topic(): c for c in consumers}
        self._turn = 0
        self._closed = False

    def topic(self) -> str:
        return ",".join(self._by_topic)

    def subscription_name(self) -> str:
        return self._consumers[0].subscription_name()

    def is_connected(self) -> bool:
        return not self._closed


class MultiTopicConsumer(MultiTopic[Consumer], Closeable):
    """One consumer on each of several topics, received from in turn."""

    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message of any of the topics; ``Timeout`` after ``timeout_millis``."""
        end = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            if self._closed:
                raise AlreadyClosed("the consumer is closed")
            consumer = self._consumers[self._turn % len(self._consumers)]
            self._turn += 1
            left = _TURN_MS if end is None else int((end - time.monotonic()) * 1000)
            try:
                return consumer.receive(max(0, min(_TURN_MS, left)))
            except Timeout:
                if end is not None and time.monotonic() >= end:
                    msg = f"no message on {self.topic()} within {timeout_millis} ms"
                    raise Timeout(msg) from None

    def batch_receive(self) -> list[Message]:
        """The messages ready now on one of the topics, asked in turn (at least one;
        waits as ``receive`` does)."""
        while True:
            if self._closed:
                raise AlreadyClosed("the consumer is closed")
            consumer = self._consumers[self._turn % len(self._consumers)]
            self._turn += 1
            batch = consumer.batch_receive(timeout_ms=_TURN_MS)
            if batch:
                return batch

    def _owner(self, message: cv.MessageIdLike) -> Consumer:
        if isinstance(message, Message) and message.topic in self._by_topic:
            return self._by_topic[message.topic]
        if len(self._consumers) == 1:
            return self._consumers[0]
        raise InvalidArgument("a multi-topic consumer acknowledges messages, not bare ids")

    def acknowledge(self, message: cv.MessageIdLike) -> None:
        self._owner(message).acknowledge(message)

    def acknowledge_cumulative(self, message: cv.MessageIdLike) -> None:
        self._owner(message).acknowledge_cumulative(message)

    def negative_acknowledge(self, message: cv.MessageIdLike) -> None:
        self._owner(message).negative_acknowledge(message)

    def redeliver_unacknowledged_messages(self) -> None:
        for consumer in self._consumers:
            consumer.redeliver_unacknowledged_messages()

    def unsubscribe(self) -> None:
        for consumer in self._consumers:
            consumer.unsubscribe()
        self._closed = True

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            close_all(self._consumers)
