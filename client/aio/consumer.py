"""``AsyncConsumer``: the asyncio twin of ``Consumer``, doing the same requests with
``await`` (its ack timeout ticked by a task of the loop: ``unacked_task``); what every
asyncio stream object shares is ``link.py``, ``AsyncProducer`` ``producer.py`` and
``AsyncReader`` ``reader.py``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from typing import Any, Literal, Protocol

from compactlog.client import _convert as cv
from compactlog.client.aio.ack_task import AckTask
from compactlog.client.aio.consume_flow import AsyncFlowStream
from compactlog.client.aio.link import Link, acall
from compactlog.client.aio.prefetch import AsyncPrefetch
from compactlog.client.aio.unacked_task import UnackedTask
from compactlog.client.consume_flow import low_water
from compactlog.client.consumer_state import ConsumerState
from compactlog.client.errors import AlreadyClosed, Timeout
from compactlog.client.message import Message
from compactlog.client.message_id import MessageId
from compactlog.client.reconnect import Reconnect
from compactlog.errors import CompactlogError, InvalidArgument, NotOwner, Unimplemented
from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["AsyncConsumer", "AsyncSubscriptionAdmin"]


class AsyncSubscriptionAdmin(Protocol):
    """The client's calls a consumer's ``seek``, ``unsubscribe`` and
    ``get_last_message_id`` go through (``AsyncClient``)."""

    async def delete_subscription(self, topic: str, subscription: str) -> None: ...

    async def reset_cursor(
        self,
        topic: str,
        subscription: str,
        position: Literal["earliest", "latest"] | None = None,
        message_id: cv.MessageIdLike | None = None,
        timestamp_ms: int | None = None,
    ) -> None: ...

    async def get_last_message_id(
        self, topic: str, read_compacted: bool = False
    ) -> MessageId | None: ...


class AsyncConsumer:
    """One consumer of a subscription; the books are a ``ConsumerState``. While a full
    response is worked through, the next Consume is on its way (``AsyncPrefetch``)."""

    def __init__(self, link: Link, state: ConsumerState, admin: AsyncSubscriptionAdmin) -> None:
        self._link = link
        self._state = state
        self._admin = admin
        self._closed = False
        self._prefetch: AsyncPrefetch[pb.ConsumeResponse] = AsyncPrefetch()
        self._reconnect = Reconnect(f"consumer {state.subscription!r} of {state.topic}")
        self._acks = AckTask(link, state.topic, state.subscription)
        # The ack timeout from the hand-over (``unacked_tracker``), ticked by a task.
        unacked = state.unacked
        self._unacked = None if unacked is None else UnackedTask(unacked, self._send_back)
        self._ack_queue = self._acks.queue  # its ``failure``, read on every receive
        # Pushed on a ConsumeStream, as ``Consumer`` (Consume where the server has none).
        self._streaming = True
        self._flow: AsyncFlowStream | None = None
        self._stale = False  # the stream's pushes are dropped: ended at the next fill
        self._unpaid = 0  # messages pushed into the buffer whose permits are not back yet
        self._low_water = low_water(state.queue_size)  # the stream's; Consume's: state's

    def topic(self) -> str:
        return self._state.topic

    def subscription_name(self) -> str:
        return self._state.subscription

    def consumer_name(self) -> str:
        return self._state.consumer_name

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("the consumer is closed")

    def is_connected(self) -> bool:
        """True until closed (each receive is a call of its own: nothing stays connected)."""
        return not self._closed

    async def get_last_message_id(self) -> MessageId | None:
        """The id of the topic's last message (``None`` when it has none)."""
        self._check_open()
        return await self._admin.get_last_message_id(self._state.topic, self._state.read_compacted)

    def redeliver_unacknowledged_messages(self) -> None:
        """As ``Consumer.redeliver_unacknowledged_messages`` (no call: the next receive
        asks, once the acks queued before are stored)."""
        self._check_open()
        self._prefetch.stale = self._prefetch.pending  # its response goes unread
        self._stale = self._flow is not None  # so do the stream's
        self._state.start_over()

    async def seek(self, message: MessageId | tuple[int, int] | int) -> None:
        """As ``Consumer.seek``: an id (inclusive), ``MessageId.earliest`` / ``latest``, or
        epoch milliseconds. Needs the ``admin`` role (ResetCursor)."""
        self._check_open()
        await self._acks.flush()
        await self._prefetch.drop()  # the server sees that Consume before the reset
        await self._end_flow(stay=True)  # nothing pushed after the reset comes from it
        admin, topic, sub = self._admin, self._state.topic, self._state.subscription
        if isinstance(message, int):
            await admin.reset_cursor(topic, sub, timestamp_ms=message)
        elif MessageId.of(message) == MessageId.earliest:
            await admin.reset_cursor(topic, sub, position="earliest")
        elif MessageId.of(message) == MessageId.latest:
            await admin.reset_cursor(topic, sub, position="latest")
        else:
            await admin.reset_cursor(topic, sub, message_id=message)
        self._state.start_over()

    async def unsubscribe(self) -> None:
        """Close this consumer and delete the subscription (``admin`` role)."""
        self._check_open()
        await self.close()
        await self._admin.delete_subscription(self._state.topic, self._state.subscription)

    async def subscribe_now(self) -> None:
        flow = await self._open_flow() if self._streaming else None
        if flow is not None:
            try:
                await flow.admitted(self._link.timeout)
            except (Unimplemented, NotOwner):  # no stream here: Consume
                await self._to_consume()
        if not self._streaming:
            await self._fetch(0)

    async def _open_flow(self) -> AsyncFlowStream | None:
        """As ``Consumer._open_flow``."""
        if self._stale:
            await self._end_flow(stay=True)
        if self._flow is not None:
            return self._flow
        link, state = self._link, self._state
        if not hasattr(link.stub, "ConsumeStream"):
            await self._to_consume()
            return None
        if state.redelivering:
            await self._acks.flush()
        start = state.consume_request(state.queue_size, 0)  # a batch_receive's list, as Consume
        self._flow = AsyncFlowStream(
            link.stub, start, state.queue_size, link.address, link.metadata
        )
        self._unpaid = 0
        return self._flow

    async def _to_consume(self) -> None:
        """Consume from now on: the server has no stream for this topic."""
        await self._end_flow()
        self._streaming = False
        self._low_water = self._state.low_water

    async def _end_flow(self, stay: bool = False) -> None:
        flow, self._flow, self._stale = self._flow, None, False
        if flow is not None:
            await flow.end(self._link.timeout if self._link.timeout is not None else 5.0, stay)

    async def _fill_streamed(self, limit: int | None) -> None:
        """As ``Consumer._fill_streamed``."""
        state = self._state
        end = state.end_of(limit)
        while not state.ready():
            self._check_open()
            try:
                flow = await self._open_flow()
                if flow is None:
                    return await self._fill(limit)
                flow.handed(self._unpaid)  # the buffer is empty: all were handed out
                self._unpaid = 0
                wait = state.wait_ms(end, limit, True) / 1000
                resp = await flow.next(wait if end is not None else None)
            except (Unimplemented, NotOwner):  # no stream here: Consume from now on
                await self._to_consume()
                return await self._fill(limit)
            except CompactlogError as exc:
                if isinstance(exc, Timeout):
                    raise
                await self._end_flow()
                state.fetch_failed()
                await asyncio.sleep(self._reconnect.pause(exc, end))
            else:
                self._reconnect.succeeded()
                if resp is not None:
                    state.fetched(resp)
                    state.more_waiting = True  # its permits go back at the low water
                    self._unpaid = len(resp.messages)
            if end is not None and time.monotonic() >= end and not state.ready():
                raise state.timeout_error(limit)
        return None

    def _consume(self, wait_ms: int) -> Coroutine[Any, Any, pb.ConsumeResponse]:
        """The Consume call for the state as it is now (sent at once), to await here or
        ahead."""
        link, state = self._link, self._state
        req = state.consume_request(state.queue_size, wait_ms)
        deadline = state.deadline(wait_ms, link.timeout)
        call = link.stub.Consume(req, timeout=deadline, metadata=link.metadata)
        return acall("Consume", link.address, call)

    async def _fetch(self, wait_ms: int) -> None:
        state = self._state
        try:
            resp = await self._consume(wait_ms)
        except BaseException:
            state.fetch_failed()
            raise
        state.fetched(resp)

    def _go_ahead(self) -> None:
        """The next full Consume on its way (no server-side wait: a backlog is there);
        on the stream, the permits of what was handed out so far go back."""
        state = self._state
        state.more_waiting = False
        if self._flow is not None:
            self._flow.handed(self._unpaid - len(state.buffer))
            self._unpaid = len(state.buffer)
        elif not self._streaming and not self._prefetch.pending:
            self._prefetch.start(self._consume(0))

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; ``Timeout`` after ``timeout_millis`` (None: wait forever)."""
        state = self._state
        buffer = state.buffer
        if self._ack_queue.failure is not None:
            self._ack_queue.raise_failure()
        if len(buffer) <= self._low_water:  # else the usual case: no call
            if not buffer:
                await self._fill(timeout_millis)
            elif state.more_waiting:
                self._go_ahead()
        message = buffer.popleft()
        return message if self._unacked is None else self._handed(message)

    def _handed(self, message: Message) -> Message:
        """As ``Consumer._handed``: the ack timeout starts now."""
        if self._unacked is not None and self._state.handed((message,)):
            self._unacked.watch()
        return message

    async def batch_receive(
        self, max_messages: int | None = None, timeout_ms: int | None = None
    ) -> list[Message]:
        """As ``Consumer.batch_receive``: what is buffered, else the next response whole."""
        self._check_open()
        self._ack_queue.raise_failure()
        policy = self._state.batch_policy
        if max_messages is not None and max_messages < 1:
            raise InvalidArgument("max_messages must be at least 1")
        if timeout_ms is None and policy is not None:
            timeout_ms = policy.timeout_ms
        if not self._state.buffer:
            try:
                await self._fill(timeout_ms)
            except Timeout:
                if timeout_ms is None:
                    raise
                return []
        cap = max_messages or (policy.max_num_message if policy else 0)
        state = self._state
        batch = state.take_batch(cap, policy.max_num_bytes if policy else 0)
        if self._unacked is not None and state.handed(batch):
            self._unacked.watch()
        if state.more_waiting and len(state.buffer) <= state.low_water:
            self._go_ahead()
        return batch

    async def _fill(self, limit: int | None) -> None:
        """Consume until a message is buffered; ``Timeout`` after ``limit`` ms. A server
        that went away is waited for within ``limit`` (``reconnect``)."""
        self._check_open()
        if self._streaming:
            return await self._fill_streamed(limit)
        state = self._state
        end = state.end_of(limit)
        if self._prefetch.stale:
            await self._prefetch.drop()
        elif self._prefetch.pending:
            try:
                resp = await self._prefetch.take(None if limit is None else limit / 1000)
            except CompactlogError as exc:
                state.fetch_failed()
                await asyncio.sleep(self._reconnect.pause(exc, end))
            else:
                if resp is None:
                    raise state.timeout_error(limit)
                state.fetched(resp)
        first = True
        while not state.ready():
            try:
                if state.redelivering:  # acks stored first: what was acked is not asked for
                    await self._acks.flush()
                await self._fetch(state.wait_ms(end, limit, first))
            except CompactlogError as exc:
                await asyncio.sleep(self._reconnect.pause(exc, end))
            else:
                self._reconnect.succeeded()
            first = False
            self._check_open()
            if end is not None and time.monotonic() >= end and not state.ready():
                raise state.timeout_error(limit)

    async def acknowledge(self, message: cv.MessageIdLike) -> None:
        await self._ack(message, cumulative=False)

    async def acknowledge_cumulative(self, message: cv.MessageIdLike) -> None:
        await self._ack(message, cumulative=True)

    async def negative_acknowledge(self, message: cv.MessageIdLike) -> None:
        """As ``Consumer.negative_acknowledge``: the server gives it out again after the
        delay."""
        self._check_open()
        await self._acks.flush()
        req = self._state.nack_request([message])
        self._state.done_with(req.ids[0])  # not timed from now on, as in pulsar-client
        await self._negative(req)

    async def _negative(self, req: pb.NegativeAcknowledgeRequest) -> None:
        link = self._link
        call = link.stub.NegativeAcknowledge(req, timeout=link.timeout, metadata=link.metadata)
        await acall("NegativeAcknowledge", link.address, call)

    async def _send_back(self, ids: list[pb.MessageId]) -> None:
        """As ``Consumer._send_back``: what ran out goes out again (a failure is let go:
        the messages come again when this consumer reconnects)."""
        with contextlib.suppress(CompactlogError):
            await self._negative(self._state.timed_out_request(ids))

    async def _ack(self, message: cv.MessageIdLike, cumulative: bool) -> None:
        """Queued (``AckTask``), as ``Consumer`` does: returns without waiting for the
        server."""
        self._check_open()
        self._ack_queue.raise_failure()
        state = self._state
        mid = state.given_id(message)
        if state.unacked is not None:
            state.done_with(mid, cumulative)
        self._acks.put(mid, cumulative)

    async def close(self) -> None:
        """As ``Consumer.close``: leave the subscription at once (``Log.CloseConsumer``)."""
        if self._closed:
            return
        self._closed = True
        if self._unacked is not None:
            await self._unacked.close()
        try:
            await self._acks.flush()  # every ack stored first; a failure is raised below
        finally:
            await self._prefetch.drop()  # the server sees that Consume before CloseConsumer
            await self._end_flow()
            self._state.clear()
            link = self._link
            req = self._state.close_request()
            with contextlib.suppress(CompactlogError):
                call = link.stub.CloseConsumer(req, timeout=link.timeout, metadata=link.metadata)
                await acall("CloseConsumer", link.address, call)
