"""``AsyncFlowStream``: an ``AsyncConsumer``'s ConsumeStream, the twin of ``FlowStream``.

The same flow as the threaded consumer's (``client.consume_flow``: the queue's size in
permits at the start, responses of up to the queue's size, the permits of what was handed
out given back at half the queue); here a task of the running loop reads the responses
into a queue, so a receive waits for one with its own timeout, and gRPC sends the flows
from a queue.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from compactlog.client.aio.call_status import SentStatus
from compactlog.client.consume_flow import low_water
from compactlog.client.errors import Timeout, from_rpc_error
from compactlog.rpc_errors import ServerUnreachable
from compactlog.v1 import compactlog_pb2 as pb

__all__ = ["AsyncFlowStream"]

_END = object()  # the stream ended without an error


class AsyncFlowStream:
    """One open ConsumeStream of an asyncio consumer."""

    def __init__(
        self, stub: Any, start: pb.ConsumeRequest, queue_size: int, address: str, metadata: Any
    ) -> None:
        self._address = address
        self._topic = start.topic
        self._threshold = max(1, low_water(queue_size))
        self._handed = 0
        self._responses: asyncio.Queue[Any] = asyncio.Queue()
        self._admitted = asyncio.Event()
        self._failure: grpc.RpcError | None = None
        self._flows: asyncio.Queue[pb.ConsumeFlow | None] = asyncio.Queue()
        self._flows.put_nowait(pb.ConsumeFlow(topic=start.topic, start=start, permits=queue_size))
        self._call: Any = stub.ConsumeStream(self._requests(), metadata=metadata)
        self._sent = SentStatus(self._call)
        self._reader = asyncio.ensure_future(self._read())

    async def _requests(self) -> AsyncIterator[pb.ConsumeFlow]:
        while (flow := await self._flows.get()) is not None:
            yield flow

    async def _read(self) -> None:
        call = self._call
        try:
            await call.initial_metadata()
            self._admitted.set()
            while (response := await call.read()) is not grpc.aio.EOF:
                self._responses.put_nowait(response)
        except grpc.RpcError as exc:
            self._failure = failure = await self._sent.error(exc)
            self._responses.put_nowait(failure)
        finally:
            self._admitted.set()
            self._responses.put_nowait(_END)

    def _raise(self, item: object) -> None:
        if isinstance(item, grpc.RpcError):
            raise from_rpc_error(item, "ConsumeStream", self._address) from None
        raise ServerUnreachable(f"the consume stream at {self._address} ended")

    async def admitted(self, timeout_s: float | None) -> None:
        """As ``FlowStream.admitted``: the subscription exists and this consumer is in."""
        try:
            await asyncio.wait_for(self._admitted.wait(), timeout_s)
        except TimeoutError:
            raise Timeout(
                f"ConsumeStream at {self._address} not answered in {timeout_s} s"
            ) from None
        if self._call.done():  # refused: the reader has its error, or ends at once
            await asyncio.shield(self._reader)
            if self._failure is not None:
                self._raise(self._failure)

    async def next(self, timeout_s: float | None) -> pb.ConsumeResponse | None:
        """The next response, or None when none came within ``timeout_s``."""
        try:
            item = await asyncio.wait_for(self._responses.get(), timeout_s)
        except TimeoutError:
            return None
        if isinstance(item, pb.ConsumeResponse):
            return item
        self._responses.put_nowait(item)  # every later call sees the end too
        self._raise(item)
        return None  # not reached

    def handed(self, count: int) -> None:
        """As ``FlowStream.handed``."""
        self._handed += count
        if self._handed >= self._threshold:
            self._flows.put_nowait(pb.ConsumeFlow(topic=self._topic, permits=self._handed))
            self._handed = 0

    async def end(self, timeout_s: float, stay: bool = False) -> None:
        """As ``FlowStream.end``."""
        if stay:
            self._flows.put_nowait(pb.ConsumeFlow(topic=self._topic, stay=True))
        self._flows.put_nowait(None)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._reader), timeout_s)
        self._call.cancel()
        self._reader.cancel()
