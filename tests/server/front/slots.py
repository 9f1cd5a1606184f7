"""Stand-in slots for the front's calls on a spread partitioned topic: real gRPC servers
on loopback that answer as a slot does (its partitions only) and record what they were
asked, a real ``FrontHandler`` before them (test_spread_calls.py,
test_tasks.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from compactlog.partitioner import partition_name
from compactlog.server.front.partitions import PartitionedIndex
from compactlog.server.front.router import FrontHandler, Owners
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.storage.slots import Placement, slot_of
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb

NAME, PARTITIONS, SECRET = "orders", 4, "s3cret"
LOG = "/compactlog.v1.Log/"


def msg(partition: int, entry: int) -> pb.Message:
    return pb.Message(id=pb.MessageId(ledger_id=1, entry_id=entry, partition=partition))


@dataclass
class Slot:
    """A stand-in slot holding ``partition``: three Read responses of two messages."""

    partition: int
    asked: list[tuple[str, bytes, dict[str, Any]]] = field(default_factory=list)
    consume: bytes = b""  # the answer of a Consume that waits, after consume_delay
    at_once: bytes = b""  # the answer of a Consume that does not wait
    consume_delay: float = 0.0
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    fails: grpc.StatusCode | None = None  # unary calls fail at once, a Read after one response
    hang: float = 0.0  # how long other unary calls take to answer
    responses: int = 3  # Read responses
    read_delay: float = 0.01  # between two Read responses

    def handler(self) -> grpc.GenericRpcHandler:
        slot = self

        class Handler(grpc.GenericRpcHandler):
            def service(self, details: Any) -> Any:
                method = details.method
                if method == LOG + "Read":
                    return grpc.unary_stream_rpc_method_handler(slot.read(method))
                return grpc.unary_unary_rpc_method_handler(slot.unary(method))

        return Handler()

    def _record(self, method: str, request: bytes, context: Any) -> None:
        self.asked.append((method, request, dict(context.invocation_metadata())))

    def read(self, method: str) -> Callable[[bytes, Any], AsyncIterator[bytes]]:
        async def handle(request: bytes, context: Any) -> AsyncIterator[bytes]:
            self._record(method, request, context)
            for k in range(self.responses):
                if k == 1 and self.fails is not None:
                    await context.abort(self.fails, f"slot of partition {self.partition} failed")
                messages = [msg(self.partition, 2 * k), msg(self.partition, 2 * k + 1)]
                yield pb.ReadResponse(messages=messages).SerializeToString()
                await self._wait(self.read_delay)

        return handle

    def unary(self, method: str) -> Callable[[bytes, Any], Awaitable[bytes]]:
        async def handle(request: bytes, context: Any) -> bytes:
            self._record(method, request, context)
            if method.endswith("/Consume"):
                if not pb.ConsumeRequest.FromString(request).wait_ms:
                    return self.at_once
                await self._wait(self.consume_delay)
                return self.consume
            if self.fails is not None:
                await context.abort(self.fails, f"slot of partition {self.partition} failed")
            await self._wait(self.hang)
            return b""

        return handle

    async def _wait(self, seconds: float) -> None:
        """Sleep; a cancellation (the caller went away) is noted in ``cancelled``."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def start(*handlers: grpc.GenericRpcHandler) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


Scenario = Callable[[grpc.aio.Channel, dict[int, Slot]], Awaitable[None]]


async def with_front(scenario: Scenario) -> None:
    """Stand-in slots for NAME's partitions, a front before them, ``scenario`` run."""
    owners = Owners(8, None, Placement.PARTITION, SECRET)
    index = PartitionedIndex(8, Placement.PARTITION)
    index.put(PartitionedTopic(NAME, PARTITIONS, TopicKind.LEDGER))
    slots = {
        slot_of(partition_name(NAME, i), 8, Placement.PARTITION): Slot(i) for i in range(PARTITIONS)
    }
    servers = []
    addresses = {}
    for number, slot in slots.items():
        server, addresses[number] = await start(slot.handler())
        servers.append(server)
    owners.update(addresses)
    front, address = await start(FrontHandler(owners, index))
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            await scenario(channel, slots)
    finally:
        await front.stop(None)
        for server in servers:
            await server.stop(None)
        await owners.close()


def read(channel: grpc.aio.Channel, **fields: Any) -> AsyncIterator[pb.ReadResponse]:
    stub = channel.unary_stream(
        LOG + "Read",
        request_serializer=pb.ReadRequest.SerializeToString,
        response_deserializer=pb.ReadResponse.FromString,
    )
    call: AsyncIterator[pb.ReadResponse] = stub(
        pb.ReadRequest(topic=NAME, **fields), metadata=(("x-custom", "1"),)
    )
    return call
