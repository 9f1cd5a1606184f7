"""Log.ConsumeStream: Consume pushed within flow permits, as Pulsar's broker delivers.

The consumer's first ``ConsumeFlow`` names the subscription (its ``start``, a
``ConsumeRequest``) and gives permits; each later one gives more. The stream steps
``Consuming.consume`` (the one delivery path: types, redelivery, errors) for up to the
permits it holds, and, as Pulsar's broker dispatches whole entries, a response that
reaches them inside a stored batch (one publish request) carries the rest of that batch,
up to the start's ``max_messages``: the permits go below zero and the consumer's next
flows pay it back, so it holds at most its permits and one response more (a consumer
that gives permits back at half its queue gets one response a stored batch, not two).
With nothing to give, that step waits on the topic's wake-up as Consume's long poll
does (and keeps the consumer live, as a waiting Consume does), and with no permits the
stream waits for the consumer's next flow: a consumer that asks for nothing is live
for 30 s after it last asked, as a consumer that stops calling Consume. A task of the
loop reads the flows (no thread per stream, CONTRACT section 12). However the stream
ends (half-close, cancel, a disconnect, an error) the consumer leaves as
``Log.CloseConsumer`` makes it leave, unless its last flow says it ``stay``s (it replaces
the stream at once: a seek, a redelivery).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable

from compactlog.errors import MalformedRequest
from compactlog.v1 import compactlog_pb2 as pb

# A stream waits this long at most in one step before it looks again (and stays live).
STEP_WAIT_MS = 10_000

Consume = Callable[[pb.ConsumeRequest, "asyncio.Future[None]", int], Awaitable[tuple[bytes, int]]]
Leave = Callable[[bool], Awaitable[None]]


class Flow:
    """The permits a stream holds, fed by the consumer's flows (``read``)."""

    def __init__(self) -> None:
        self.permits = 0
        self.stay = False  # the consumer ends this stream to open another at once
        # Resolved when the consumer's side ends (half-close, or its stream failed).
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # The stream's wait for permits: one future, resolved by the flow that brings them
        # (a consumer that takes each response whole waits once a response).
        self._waiter: asyncio.Future[None] | None = None

    def add(self, permits: int) -> None:
        self.permits += permits
        if self.permits > 0:
            self._wake()

    def take(self, count: int) -> None:
        """``count`` messages went out: past the permits held when a whole batch did."""
        self.permits -= count

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def read(self, flows: AsyncIterator[pb.ConsumeFlow]) -> None:
        try:
            async for flow in flows:
                self.add(flow.permits)
                if flow.stay:
                    self.stay = True
                    break
        finally:
            if not self.ended.done():
                self.ended.set_result(None)
            self._wake()

    async def wait(self) -> None:
        """Until permits come or the consumer's side ends."""
        if self.permits > 0 or self.ended.done():
            return
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._waiter = None


async def first_flow(flows: AsyncIterator[pb.ConsumeFlow]) -> pb.ConsumeFlow:
    """The flow that opens the stream; MALFORMED_REQUEST when it names no subscription."""
    first = await anext(aiter(flows), None)
    if first is None or not first.HasField("start"):
        raise MalformedRequest(
            "a ConsumeStream opens with a ConsumeFlow carrying `start`", request="ConsumeFlow"
        )
    if not first.start.topic:
        first.start.topic = first.topic
    return first


async def consume_stream(
    first: pb.ConsumeFlow,
    flows: AsyncIterator[pb.ConsumeFlow],
    consume: Consume,
    leave: Leave,
    liveness_s: float,
) -> AsyncGenerator[bytes, None]:
    """The responses of the stream ``first`` opened, each within the permits held; at
    its end, ``leave(stay)``."""
    flow = Flow()
    flow.add(first.permits)
    reader = asyncio.ensure_future(flow.read(flows))
    start = first.start
    cap = start.max_messages
    wait_ms = min(STEP_WAIT_MS, int(liveness_s * 500))
    step = pb.ConsumeRequest()
    try:
        while not flow.ended.done():
            if flow.permits <= 0:  # it asks for nothing: live only as long as it asked last
                await flow.wait()
                continue
            step.CopyFrom(start)
            step.max_messages = min(flow.permits, cap) if cap else flow.permits
            step.wait_ms = wait_ms
            data, count = await consume(step, flow.ended, cap)
            start.redeliver_unacknowledged = False  # asked once, at the start
            if count:
                flow.take(count)
                yield data
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
        await leave(flow.stay)
