"""``Consumer``: receive from a durable subscription, acknowledge, negatively acknowledge.

The state between calls (buffer, unacknowledged books, negative acks, the requests) is a
``ConsumerState``, shared in shape with the asyncio consumer; this class does the calls. An
acknowledgement returns once it is queued and checked (an id this consumer was never given
is ``NotDelivered`` at once); a thread of the consumer's sends the queue in order
(``ack_sender``), a failure the server answers is raised by the next acknowledge, receive or
close, and everything that must come after the acks (seek, redelivery, negative acks,
unsubscribe, close) waits for them first. ``close`` returns once every ack is stored, so an
acked message is never redelivered, also after a restart. Messages are pushed on a
``Log.ConsumeStream`` within ``receiver_queue_size`` permits (``consume_flow``); a seek or
redelivery ends it and drops what it pushed. A server without the stream is asked by
Consume, the next one on its way while the application works through a full response
(``prefetch``). The stream opens (or the first Consume goes out) when the consumer is
made (``Client.subscribe``), so the subscription exists from then on, at its initial
position, as in pulsar-client. A server restart is
waited out within the receive's timeout (``reconnect``). With
``unacked_messages_timeout_ms`` a message's ack timeout starts when ``receive`` or
``batch_receive`` hands it over (``unacked_tracker``, as pulsar-client), and the ack
sender's thread sends back what ran out: no thread more."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Literal, Protocol

from compactlog.client import _convert as cv
from compactlog.client.closeable import Closeable
from compactlog.client.consume_flow import FlowStream, low_water
from compactlog.client.consumer_acks import ConsumerAcks
from compactlog.client.consumer_state import ConsumerState
from compactlog.client.enums import ConsumerType
from compactlog.client.errors import AlreadyClosed, Timeout, call
from compactlog.client.message_id import MessageId
from compactlog.client.prefetch import Prefetch
from compactlog.client.reconnect import Reconnect
from compactlog.client.types import Message
from compactlog.errors import CompactlogError, InvalidArgument, NotOwner, Unimplemented
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

# A receive without timeout looks this often whether the consumer was closed meanwhile.
POLL_S = 1.0


class SubscriptionAdmin(Protocol):
    """The client's calls a consumer's ``seek``, ``unsubscribe`` and
    ``get_last_message_id`` go through (``Client``)."""

    def delete_subscription(self, topic: str, subscription: str) -> None: ...

    def reset_cursor(
        self,
        topic: str,
        subscription: str,
        position: Literal["earliest", "latest"] | None = None,
        message_id: cv.MessageIdLike | None = None,
        timestamp_ms: int | None = None,
    ) -> object: ...

    def get_last_message_id(self, topic: str, read_compacted: bool = False) -> MessageId | None: ...


class Consumer(Closeable):
    """One consumer of a subscription on a topic; a context manager."""

    def __init__(
        self,
        stub: pb_grpc.LogStub,
        state: ConsumerState,
        address: str,
        timeout: float | None,
        admin: SubscriptionAdmin | None = None,
    ) -> None:
        self._admin = admin
        self._stub = stub
        self._state = state
        self._address = address
        self._timeout = timeout
        self._prefetch: Prefetch[pb.ConsumeResponse] = Prefetch("compactlog-consume")
        self._low_water = low_water(state.queue_size)  # the stream's; Consume's: state's
        self._closed = False
        self._closing = threading.Event()  # cuts a reconnect's wait short
        self._reconnect = Reconnect(f"consumer {state.subscription!r} of {state.topic}")
        self._acking = ConsumerAcks(stub, state, address, timeout)
        self._acks = self._acking.sender
        self._ack_queue = self._acks.queue  # its ``failure``, read on every receive
        # Messages are pushed on a ConsumeStream (``consume_flow``); a server that does
        # not stream (UNIMPLEMENTED) is asked by Consume, one call a receiver queue.
        self._streaming = True
        self._flow: FlowStream | None = None
        self._unpaid = 0  # messages pushed into the buffer whose permits are not back yet
        self._unacked = state.unacked  # the ack timeout's tracker (None: no timeout)

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

    def _calls(self) -> SubscriptionAdmin:
        self._check_open()
        if self._admin is None:
            raise InvalidArgument("this consumer was made without its client's admin calls")
        return self._admin

    def is_connected(self) -> bool:
        """True until closed (each receive is a call of its own: nothing stays connected)."""
        return not self._closed

    def get_last_message_id(self) -> MessageId | None:
        """The id of the topic's last message (``None`` when it has none)."""
        state = self._state
        return self._calls().get_last_message_id(state.topic, state.read_compacted)

    def redeliver_unacknowledged_messages(self) -> None:
        """Every message given to this consumer and not acknowledged comes again: the
        buffer is dropped and the next Consume asks the server to redeliver."""
        self._check_open()
        self._acks.flush()
        self._prefetch.drop()
        self._end_flow(stay=True)
        self._state.start_over()

    def seek(self, message: MessageId | tuple[int, int] | int) -> None:
        """Move the subscription (``ResetCursor``): to a message id (inclusive), to
        ``MessageId.earliest`` / ``latest``, or to the first message published at or
        after a time in epoch milliseconds (an ``int``). Needs the ``admin`` role."""
        calls, state = self._calls(), self._state
        self._acks.flush()
        self._end_flow(stay=True)  # nothing pushed after the reset comes from this stream
        if isinstance(message, int):
            calls.reset_cursor(state.topic, state.subscription, timestamp_ms=message)
        elif MessageId.of(message) == MessageId.earliest:
            calls.reset_cursor(state.topic, state.subscription, position="earliest")
        elif MessageId.of(message) == MessageId.latest:
            calls.reset_cursor(state.topic, state.subscription, position="latest")
        else:
            calls.reset_cursor(state.topic, state.subscription, message_id=message)
        self._prefetch.drop()
        state.start_over()

    def unsubscribe(self) -> None:
        """Delete the subscription (its cursor and acknowledgements) and close this
        consumer. Needs the ``admin`` role (``DeleteSubscription``)."""
        calls, state = self._calls(), self._state
        self.close()
        calls.delete_subscription(state.topic, state.subscription)

    def subscribe_now(self) -> None:
        """Create the subscription (or join it) now; what comes back is kept for receive."""
        flow = self._open_flow() if self._streaming else None
        if flow is not None:
            try:
                flow.admitted(self._timeout)
            except (Unimplemented, NotOwner):  # no stream here: Consume
                self._to_consume()
        if not self._streaming:
            self._fetch(self._state.queue_size, 0)

    def _open_flow(self) -> FlowStream | None:
        """The ConsumeStream, opened now if none is (acks stored first when it asks for
        the unacknowledged messages again); None when the server does not stream."""
        if self._flow is not None:
            return self._flow
        if not hasattr(self._stub, "ConsumeStream"):  # a stub of Consume alone
            self._to_consume()
            return None
        state = self._state
        if state.redelivering:
            self._acks.flush()
        start = state.consume_request(state.queue_size, 0)  # a batch_receive's list, as Consume
        try:
            self._flow = FlowStream(self._stub, start, state.queue_size, self._address)
        except CompactlogError:
            state.fetch_failed()
            raise
        self._unpaid = 0
        return self._flow

    def _to_consume(self) -> None:
        """Consume from now on: the server has no stream for this topic."""
        self._end_flow()
        self._streaming = False
        self._low_water = self._state.low_water

    def _end_flow(self, stay: bool = False) -> None:
        """End the stream (the server releases this consumer there, unless it ``stay``s:
        a seek or redelivery); the next receive opens another, what it pushed is dropped."""
        flow, self._flow = self._flow, None
        if flow is not None:
            flow.end(self._timeout if self._timeout is not None else 5.0, stay)

    def _fill_streamed(self, limit: int | None) -> None:
        """``_fill`` over the stream: wait for the next pushed response, giving back the
        permits of the one handed out; ``Timeout`` after ``limit`` ms."""
        state = self._state
        end = state.end_of(limit)
        while not state.ready():
            self._check_open()
            try:
                flow = self._open_flow()
                if flow is None:
                    return self._fill(limit)
                flow.handed(self._unpaid)  # the buffer is empty: all were handed out
                self._unpaid = 0
                wait = state.wait_ms(end, limit, True) / 1000
                resp = flow.next(wait if end is not None else POLL_S)
            except (Unimplemented, NotOwner):  # no stream here: Consume from now on
                self._to_consume()
                return self._fill(limit)
            except CompactlogError as exc:
                if isinstance(exc, Timeout):
                    raise
                self._end_flow()
                state.fetch_failed()
                self._closing.wait(self._reconnect.pause(exc, end))
            else:
                self._reconnect.succeeded()
                if resp is not None:
                    state.fetched(resp)
                    state.more_waiting = True  # its permits go back at the low water
                    self._unpaid = len(resp.messages)
            if end is not None and time.monotonic() >= end and not state.ready():
                raise state.timeout_error(limit)
        return None

    def _consume(self, max_messages: int, wait_ms: int) -> Callable[[], pb.ConsumeResponse]:
        """The Consume call for the state as it is now, to run here or ahead."""
        req = self._state.consume_request(max_messages, wait_ms)
        deadline = self._state.deadline(wait_ms, self._timeout)
        return lambda: call(
            "Consume", self._address, lambda: self._stub.Consume(req, timeout=deadline)
        )

    def _fetch(self, max_messages: int, wait_ms: int) -> None:
        try:
            resp = self._consume(max_messages, wait_ms)()
        except CompactlogError:
            self._state.fetch_failed()
            raise
        self._state.fetched(resp)

    def _go_ahead(self) -> None:
        """The next full Consume on its way (no server-side wait: a backlog is there);
        on the stream, the permits of what was handed out so far go back."""
        state = self._state
        state.more_waiting = False
        if self._flow is not None:
            self._flow.handed(self._unpaid - len(state.buffer))
            self._unpaid = len(state.buffer)
        elif not self._streaming:
            self._prefetch.start(self._consume(state.queue_size, 0))

    def receive(
        self, timeout_millis: int | None = None, *, timeout_ms: int | None = None
    ) -> Message:
        """The next message; waits forever, or raises ``Timeout`` after ``timeout_millis``
        (``timeout_ms`` is the older spelling)."""
        buffer = self._state.buffer
        if self._ack_queue.failure is not None:
            self._ack_queue.raise_failure()
        if len(buffer) <= self._low_water:  # else the usual case: no call, no conversion
            if not buffer:
                self._fill(timeout_millis if timeout_millis is not None else timeout_ms)
            elif self._state.more_waiting:
                self._go_ahead()
        message = buffer.popleft()
        return message if self._unacked is None else self._handed(message)

    def _handed(self, message: Message) -> Message:
        """``message`` goes to the application: its ack timeout starts now."""
        if self._state.handed((message,)):
            self._acks.watch()
        return message

    def batch_receive(
        self, max_messages: int | None = None, timeout_ms: int | None = None
    ) -> list[Message]:
        """The messages ready now, in order: what is buffered, else the next Consume
        response whole, waiting for it as ``receive`` does (pulsar-client's call). The
        consumer's ``batch_receive_policy`` caps the batch and bounds the wait; so do
        ``max_messages`` and ``timeout_ms`` (this client's), and a wait that runs out
        returns an empty list."""
        self._check_open()
        self._ack_queue.raise_failure()
        state = self._state
        policy = state.batch_policy
        if max_messages is not None and max_messages < 1:
            raise InvalidArgument("max_messages must be at least 1")
        if timeout_ms is None and policy is not None:
            timeout_ms = policy.timeout_ms
        if not state.buffer:
            try:
                self._fill(timeout_ms)
            except Timeout:
                if timeout_ms is None:
                    raise
                return []
        cap = max_messages or (policy.max_num_message if policy else 0)
        batch = state.take_batch(cap, policy.max_num_bytes if policy else 0)
        if state.handed(batch):
            self._acks.watch()
        if state.more_waiting and len(state.buffer) <= state.low_water:
            self._go_ahead()
        return batch

    def _fill(self, limit: int | None) -> None:
        """Consume until a message is buffered (the Consume ahead first, when one is on
        its way); ``Timeout`` after ``limit`` ms. A server that went away is waited for
        within ``limit`` (``reconnect``)."""
        self._check_open()
        if self._streaming:
            return self._fill_streamed(limit)
        state = self._state
        end = state.end_of(limit)
        if self._prefetch.pending:
            try:
                resp = self._prefetch.take(None if limit is None else limit / 1000)
            except CompactlogError as exc:
                state.fetch_failed()
                self._closing.wait(self._reconnect.pause(exc, end))
            else:
                if resp is None:
                    raise state.timeout_error(limit)
                state.fetched(resp)
        first = True
        while not state.ready():
            try:
                if state.redelivering:  # acks stored first: what was acked is not asked for
                    self._acks.flush()
                self._fetch(state.queue_size, state.wait_ms(end, limit, first))
            except CompactlogError as exc:
                self._closing.wait(self._reconnect.pause(exc, end))
            else:
                self._reconnect.succeeded()
            first = False
            self._check_open()
            if end is not None and time.monotonic() >= end and not state.ready():
                raise state.timeout_error(limit)

    def acknowledge(self, message: cv.MessageIdLike) -> None:
        """Acknowledge one message (a ``Message``, ``MessageId`` or ``(ledger, entry)``)."""
        self._check_open()
        self._acking.acknowledge(message, cumulative=False)

    def acknowledge_cumulative(self, message: cv.MessageIdLike) -> None:
        """Acknowledge this message and every one before it on the subscription."""
        self._check_open()
        self._acking.acknowledge(message, cumulative=True)

    def negative_acknowledge(self, message: cv.MessageIdLike) -> None:
        """Not now: the server gives the message out again after
        ``negative_ack_redelivery_delay_ms`` (on a shared subscription, to any consumer)."""
        self._check_open()
        self._acking.negative_acknowledge(message)

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
        self._closing.set()
        try:
            self._acks.close()  # every ack stored first; a failure is raised below
        finally:
            self._prefetch.close()  # the server sees that Consume before CloseConsumer
            self._end_flow()
            self._state.clear()
            req = self._state.close_request()
            with contextlib.suppress(CompactlogError):
                call(
                    "CloseConsumer",
                    self._address,
                    lambda: self._stub.CloseConsumer(req, timeout=self._timeout),
                )
