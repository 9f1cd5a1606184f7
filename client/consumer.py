"""``Consumer``: receive from a durable subscription, acknowledge, negatively acknowledge.

The state between calls (buffer, unacknowledged books, negative acks, the requests) is a
``ConsumerState``, shared in shape with the asyncio consumer; this class does the calls.
Acknowledgements go to the server at once: an acked message is never redelivered, also
after a restart. The first Consume goes out when the consumer is made
(``Client.subscribe``), so the subscription exists from then on, at its initial
position, as in pulsar-client.
"""

from __future__ import annotations

import contextlib
import time

from compactlog.client import _convert as cv
from compactlog.client.closeable import Closeable
from compactlog.client.consumer_state import ConsumerState
from compactlog.client.enums import ConsumerType
from compactlog.client.errors import AlreadyClosed, call
from compactlog.client.types import Message
from compactlog.errors import CompactlogError, InvalidArgument
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc


class Consumer(Closeable):
    """One consumer of a subscription on a topic; a context manager."""

    def __init__(
        self, stub: pb_grpc.LogStub, state: ConsumerState, address: str, timeout: float | None
    ) -> None:
        self._stub = stub
        self._state = state
        self._address = address
        self._timeout = timeout
        self._closed = False

    def topic(self) -> str:
        return self._state.topic

    def subscription_name(self) -> str:
        return self._state.subscription

    def consumer_name(self) -> str:
        return self._state.consumer_name

    def consumer_type(self) -> ConsumerType:
        return self._state.consumer_type

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("the consumer is closed")

    def subscribe_now(self) -> None:
        """Create the subscription (or join it) now; what comes back is kept for receive."""
        self._fetch(self._state.queue_size, 0)

    def _fetch(self, max_messages: int, wait_ms: int) -> None:
        req = self._state.consume_request(max_messages, wait_ms)
        deadline = self._state.deadline(wait_ms, self._timeout)
        try:
            resp = call("Consume", self._address, lambda: self._stub.Consume(req, timeout=deadline))
        except CompactlogError:
            self._state.fetch_failed()
            raise
        self._state.fetched(resp)

    def receive(
        self, timeout_millis: int | None = None, *, timeout_ms: int | None = None
    ) -> Message:
        """The next message; waits forever, or raises ``Timeout`` after ``timeout_millis``
        (``timeout_ms`` is the older spelling)."""
        self._check_open()
        limit = timeout_millis if timeout_millis is not None else timeout_ms
        state = self._state
        end = state.end_of(limit)
        while not state.ready():
            self._fetch(state.queue_size, state.wait_ms(end, limit))
            self._check_open()
            if end is not None and time.monotonic() >= end and not state.ready():
                raise state.timeout_error(limit)
        return state.take()

    def batch_receive(self, max_messages: int = 100, timeout_ms: int = 100) -> list[Message]:
        """Up to ``max_messages`` at once; an empty list if none arrived within ``timeout_ms``."""
        self._check_open()
        if max_messages < 1:
            raise InvalidArgument("max_messages must be at least 1")
        state = self._state
        if not state.ready():
            self._fetch(max(max_messages, state.queue_size), timeout_ms)
            state.ready()
        count = min(max_messages, len(state.buffer))
        return [state.take() for _ in range(count)]

    def acknowledge(self, message: cv.MessageIdLike) -> None:
        """Acknowledge one message (a ``Message``, ``MessageId`` or ``(ledger, entry)``)."""
        self._ack(message, cumulative=False)

    def acknowledge_cumulative(self, message: cv.MessageIdLike) -> None:
        """Acknowledge this message and every one before it on the subscription."""
        self._ack(message, cumulative=True)

    def negative_acknowledge(self, message: cv.MessageIdLike) -> None:
        """Not now: the server gives the message out again after
        ``negative_ack_redelivery_delay_ms`` (on a shared subscription, to any consumer)."""
        self._check_open()
        self._negative([message])

    def _negative(self, messages: list[cv.MessageIdLike], delay_ms: int | None = None) -> None:
        req = self._state.nack_request(messages, delay_ms)
        call(
            "NegativeAcknowledge",
            self._address,
            lambda: self._stub.NegativeAcknowledge(req, timeout=self._timeout),
        )

    def _ack(self, message: cv.MessageIdLike, cumulative: bool) -> None:
        self._check_open()
        req = self._state.ack_request(message, cumulative)
        call(
            "Acknowledge",
            self._address,
            lambda: self._stub.Acknowledge(req, timeout=self._timeout),
        )
        self._state.acked(message, cumulative)

    def close(self) -> None:
        """Stop receiving and leave the subscription at once (``Log.CloseConsumer``):
        what this consumer holds unacknowledged, buffered here included, goes to the
        other consumers now, and an EXCLUSIVE or FAILOVER subscription is free for the
        next one. The subscription itself stays (it is durable), so a new consumer
        resumes from its cursor. Should the server not hear it, it lets the consumer go
        after 30 s of silence, as before."""
        if self._closed:
            return
        self._closed = True
        self._state.clear()
        req = self._state.close_request()
        with contextlib.suppress(CompactlogError):
            call(
                "CloseConsumer",
                self._address,
                lambda: self._stub.CloseConsumer(req, timeout=self._timeout),
            )
