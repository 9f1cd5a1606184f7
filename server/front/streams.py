"""One PublishStream through the front: fanned out to a stream per slot, answered in order.

Every request's writes go down one ordered writer, so each slot stream receives them in
request order whatever they are: a plain topic's request, the parts of a request to a
spread partitioned ``NAME``, or the marked parts of a LEDGER request spanning slots,
which may be written only once its intent is durable (``front.spanning``). The pump
records each request's intent at once and queues its parts behind that intent's sync,
so the intents of many requests share one fsync and the pump never waits for one; the
writer waits, in order. Replies are read back in request order (``run``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any

import grpc

from compactlog.errors import CompactlogError
from compactlog.server.front.relay import Ctx, forwarded, relay
from compactlog.server.front.spread.publish import SpreadPending, SpreadPublish, fail

if TYPE_CHECKING:
    from compactlog.server.front.router import Owners

WRITE_AHEAD = 64  # requests read ahead of the writer (then the caller's stream waits)
Writes = tuple[Awaitable[None] | None, list[tuple[int, bytes]]]


class OrderedStreams:
    """One PublishStream fanned out to one stream per owner, answered in request order.

    A request the front refuses itself (a record too large) ends the stream there, after
    the replies of the requests before it."""

    def __init__(
        self, owners: Owners, method: str, context: Ctx, spread: SpreadPublish | None = None
    ) -> None:
        self.owners = owners
        self.method = method
        self.context = context
        self.spread = spread
        self.streams: dict[int, Any] = {}
        self.order: asyncio.Queue[int | SpreadPending | BaseException | None] = asyncio.Queue()
        self.writes: asyncio.Queue[Writes | None] = asyncio.Queue(maxsize=WRITE_AHEAD)
        self.failure: BaseException | None = None  # the writer's, when it could not go on
        # Spread requests not answered yet (by id), released if the stream ends first.
        self.spread_pending: dict[int, SpreadPending] = {}

    def _stream(self, slot: int) -> Any:
        call = self.streams.get(slot)
        if call is None:
            call = self.owners.channels[slot].stream_stream(self.method)(
                metadata=forwarded(self.context.invocation_metadata()) + self.owners.front_mark(),
                timeout=self.context.time_remaining(),
            )
            self.streams[slot] = call
        return call

    async def _send(self, request: bytes) -> int | SpreadPending:
        """Queue ``request``'s writes; what its reply is to be read from."""
        spread = self.spread
        topic = spread.topic(request) if spread is not None else None
        if spread is None or topic is None:
            slot = self.owners.slot(self.method, request)
            self._stream(slot)
            await self.writes.put((None, [(slot, request)]))
            return slot
        pending, durable, parts = await spread.stream_parts(topic, request, self.context)
        self.spread_pending[id(pending)] = pending
        for slot, _data in parts:
            self._stream(slot)
        await self.writes.put((durable, parts))
        return pending

    async def _writer(self) -> None:
        """Write the queued parts in order, each request's after its intent's sync."""
        try:
            while (item := await self.writes.get()) is not None:
                durable, parts = item
                if durable is not None:
                    await durable
                for slot, data in parts:
                    await self.streams[slot].write(data)
            for call in self.streams.values():
                await call.done_writing()
        except (CompactlogError, OSError) as exc:  # an intent that could not be synced
            self.failure = exc
            for call in self.streams.values():
                call.cancel()  # the replying side stops waiting

    async def _pump(self, requests: AsyncIterator[bytes]) -> None:
        writer = asyncio.ensure_future(self._writer())
        try:
            async for request in requests:
                try:
                    self.order.put_nowait(await self._send(request))
                except (CompactlogError, grpc.aio.AioRpcError) as exc:
                    self.order.put_nowait(exc)  # answered in its place; nothing after it
                    break
            await self.writes.put(None)
            await writer
        finally:
            writer.cancel()
            self.order.put_nowait(None)

    async def _next(self, slot: int) -> bytes | None:
        """The next reply of ``slot``'s stream; None when it ended (its error raised)."""
        response = await self.streams[slot].read()
        if response is grpc.aio.EOF:
            await self.streams[slot].wait_for_connection()
            return None
        reply: bytes = response
        return reply

    async def run(self, requests: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        pump = asyncio.ensure_future(self._pump(requests))
        try:
            while (item := await self.order.get()) is not None:
                if isinstance(item, BaseException):
                    await fail(self.context, item, "PublishStream")
                if isinstance(item, int):
                    response = await self._next(item)
                else:
                    response = await item.reply(self._next)
                    if response is not None:  # answered: whole, released
                        self.spread_pending.pop(id(item), None)
                if response is None:
                    break
                yield response
            await pump
        except (grpc.aio.AioRpcError, asyncio.CancelledError) as exc:
            if self.failure is not None:
                await fail(self.context, self.failure, "PublishStream")
            if isinstance(exc, asyncio.CancelledError):
                raise
            await relay(self.context, exc)
        finally:
            pump.cancel()
            for call in self.streams.values():
                call.cancel()
            for pending in self.spread_pending.values():  # left open: the redriver's
                pending.release()
