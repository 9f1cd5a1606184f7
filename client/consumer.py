"""``Consumer``: receive from a durable subscription and acknowledge.

Each Consume call asks for up to ``receiver_queue_size`` messages (pulsar-client's name for
the prefetch) and the consumer hands them out one by one from a local buffer, so a
``receive`` loop costs one RPC per batch, not per message. Acknowledgements go to the server
at once: an acked message is never redelivered, also after a restart.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from typing import Literal

from compactlog.client import _convert as cv
from compactlog.client.closeable import Closeable
from compactlog.client.errors import AlreadyClosed, Timeout, call
from compactlog.client.types import Message
from compactlog.errors import CompactlogError, InvalidArgument
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

# A receive without timeout polls with this server-side wait, so the call stays short
# enough to notice a closed consumer or Ctrl-C, and long enough to cost nothing when idle.
_POLL_WAIT_MS = 1000
# Slack on top of the server-side wait before the client gives up on a Consume call.
_DEADLINE_SLACK_S = 10.0


class Consumer(Closeable):
    """One consumer of ``subscription`` on ``topic``; a context manager."""

    def __init__(
        self,
        stub: pb_grpc.LogStub,
        topic: str,
        subscription: str,
        address: str,
        timeout: float | None = None,
        read_compacted: bool = False,
        initial_position: Literal["earliest", "latest"] = "earliest",
        receiver_queue_size: int = 1000,
        subscription_type: pb.SubscriptionType.ValueType = pb.EXCLUSIVE,
        consumer_name: str = "",
        ack_timeout_ms: int = 0,
        nack_delay_ms: int = 1000,
    ) -> None:
        if initial_position not in ("earliest", "latest"):
            raise InvalidArgument(
                f"initial_position must be 'earliest' or 'latest', not {initial_position!r}"
            )
        if not subscription:
            raise InvalidArgument("a subscription needs a name")
        if receiver_queue_size < 1:
            raise InvalidArgument("receiver_queue_size must be at least 1")
        if ack_timeout_ms < 0 or nack_delay_ms < 0:
            raise InvalidArgument("ack timeout and redelivery delay are milliseconds >= 0")
        self._stub = stub
        self._topic = topic
        self._subscription = subscription
        self._address = address
        self._timeout = timeout
        self._read_compacted = read_compacted
        self._initial = pb.EARLIEST if initial_position == "earliest" else pb.LATEST
        self._queue_size = receiver_queue_size
        self._type = subscription_type
        self._name = consumer_name
        self._ack_timeout_ms = ack_timeout_ms
        self._nack_delay_ms = nack_delay_ms
        self._buffer: deque[Message] = deque()
        self._closed = False
        # A new consumer gets every unacknowledged message again, as in Pulsar.
        self._redeliver = True

    def topic(self) -> str:
        return self._topic

    def subscription_name(self) -> str:
        return self._subscription

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("the consumer is closed")

    def _fetch(self, max_messages: int, wait_ms: int) -> list[Message]:
        req = pb.ConsumeRequest(
            topic=self._topic,
            subscription=self._subscription,
            read_compacted=self._read_compacted,
            initial_position=self._initial,
            max_messages=max_messages,
            wait_ms=max(0, wait_ms),
            redeliver_unacknowledged=self._redeliver,
            consumer_name=self._name,
            subscription_type=self._type,
            ack_timeout_ms=self._ack_timeout_ms,
        )
        slack = self._timeout if self._timeout is not None else _DEADLINE_SLACK_S
        deadline = wait_ms / 1000 + slack
        try:
            resp = call("Consume", self._address, lambda: self._stub.Consume(req, timeout=deadline))
        except CompactlogError:
            # The server moves no cursor for a call that failed there, but a response lost
            # on the way (or refused here) counts as delivered: start again at the
            # mark-delete position, as pulsar-client does on reconnect. The buffer is empty
            # here, so nothing is held twice; acknowledged messages never come again.
            self._redeliver = True
            raise
        self._redeliver = False
        return [cv.message_from_pb(m) for m in resp.messages]

    def receive(self, timeout_ms: int | None = None) -> Message:
        """The next message; waits forever, or raises ``Timeout`` after ``timeout_ms``."""
        self._check_open()
        end = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        while not self._buffer:
            if end is None:
                wait_ms = _POLL_WAIT_MS
            else:
                wait_ms = int((end - time.monotonic()) * 1000)
                if wait_ms < 0:
                    raise Timeout(
                        f"no message on {self._topic}/{self._subscription} within {timeout_ms} ms"
                    )
            self._buffer.extend(self._fetch(self._queue_size, wait_ms))
            self._check_open()
            if not self._buffer and end is not None and time.monotonic() >= end:
                raise Timeout(
                    f"no message on {self._topic}/{self._subscription} within {timeout_ms} ms"
                )
        return self._buffer.popleft()

    def batch_receive(self, max_messages: int = 100, timeout_ms: int = 100) -> list[Message]:
        """Up to ``max_messages`` at once; an empty list if none arrived within ``timeout_ms``."""
        self._check_open()
        if max_messages < 1:
            raise InvalidArgument("max_messages must be at least 1")
        if not self._buffer:
            self._buffer.extend(self._fetch(max(max_messages, self._queue_size), timeout_ms))
        count = min(max_messages, len(self._buffer))
        return [self._buffer.popleft() for _ in range(count)]

    def acknowledge(self, message: cv.MessageIdLike) -> None:
        """Acknowledge one message (a ``Message``, ``MessageId`` or ``(ledger, entry)``)."""
        self._ack(message, cumulative=False)

    def acknowledge_cumulative(self, message: cv.MessageIdLike) -> None:
        """Acknowledge this message and every one before it on the subscription."""
        self._ack(message, cumulative=True)

    def _ack(self, message: cv.MessageIdLike, cumulative: bool) -> None:
        self._check_open()
        req = pb.AcknowledgeRequest(
            topic=self._topic,
            subscription=self._subscription,
            id=cv.id_to_pb(message),
            cumulative=cumulative,
        )
        call(
            "Acknowledge",
            self._address,
            lambda: self._stub.Acknowledge(req, timeout=self._timeout),
        )

    def negative_acknowledge(self, message: cv.MessageIdLike) -> None:
        """This message failed here: the server delivers it again (to any consumer of a
        shared subscription) after ``negative_ack_redelivery_delay_ms``."""
        self._check_open()
        self._negative([cv.id_to_pb(message)], self._nack_delay_ms)

    def _negative(self, ids: list[pb.MessageId], delay_ms: int) -> None:
        req = pb.NegativeAcknowledgeRequest(
            topic=self._topic,
            subscription=self._subscription,
            ids=ids,
            redelivery_delay_ms=delay_ms,
            consumer_name=self._name,
        )
        call(
            "NegativeAcknowledge",
            self._address,
            lambda: self._stub.NegativeAcknowledge(req, timeout=self._timeout),
        )

    def close(self) -> None:
        """Stop receiving. The subscription itself stays (it is durable), so a new
        consumer resumes from its cursor; on a shared subscription the messages buffered
        here go back to the other consumers at once (otherwise after the server's
        liveness period), elsewhere they are dropped unacknowledged."""
        if not self._closed and self._buffer and self._type == pb.SHARED:
            # Failing that, the server gives them out again once this consumer is gone.
            with contextlib.suppress(CompactlogError):
                self._negative([cv.id_to_pb(m) for m in self._buffer], 0)
        self._closed = True
        self._buffer.clear()
