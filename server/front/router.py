"""The front of a sharded server: one address that routes every call to its owner.

The front is a raw-bytes proxy: the topic is read from field 1 of the request's bytes
(``rpc.wire_peek``), hashed to its store slot, and the bytes go unchanged to the owning
shard's slot; responses and error statuses come back as they are. What one owner cannot
answer (ListTopics, GetPartitionMap, PublishStream, calls on a spread partitioned topic,
ledger calls) the front answers itself, through ``front.spread``. The list, and how
tokens are checked twice, is in docs/architecture.md ("The front room, module by module").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from compactlog.server.front.consume_relay import consume_stream_relay
from compactlog.server.front.partitions import PartitionedIndex
from compactlog.server.front.relay import Ctx
from compactlog.server.front.relay import forwarded as _forwarded
from compactlog.server.front.relay import relay as _relay
from compactlog.server.front.secret import FRONT_KEY, from_front
from compactlog.server.front.spanning import Spanning
from compactlog.server.front.spread.merge import merge_topic_lists
from compactlog.server.front.spread.publish import SpreadPublish
from compactlog.server.front.streams import OrderedStreams
from compactlog.server.front.tasks import all_or_first_error
from compactlog.server.rpc.wire_peek import field_one
from compactlog.storage.slots import Placement, slot_of
from compactlog.v1 import compactlog_pb2 as pb

_SERVICES = ("Log", "TopicAdmin", "CompactionEngine")
_LEDGER_METHODS = frozenset(
    {"/compactlog.v1.CompactionEngine/AppendEntries", "/compactlog.v1.CompactionEngine/SealLedger"}
)
_CREATE_LEDGER = "/compactlog.v1.CompactionEngine/CreateCompactedLedger"


class Owners:
    """Slot -> the owning shard's address and a channel to it (replaced on a restart)."""

    def __init__(
        self,
        slot_count: int,
        tls_root: bytes | None,
        placement: Placement = Placement.TOPIC,
        secret: str | None = None,
    ) -> None:
        self.slot_count = slot_count
        self.tls_root = tls_root
        self.placement = placement
        self.secret = secret  # sent on calls the front fans out (front.secret)
        self.addresses: dict[int, str] = {}
        self.channels: dict[int, grpc.aio.Channel] = {}
        self.ledgers: dict[int, int] = {}  # compacted ledger id -> slot (outside runs)
        self._closing: set[asyncio.Future[None]] = set()

    def update(self, addresses: dict[int, str]) -> None:
        for slot, address in addresses.items():
            if self.addresses.get(slot) == address:
                continue
            old = self.channels.pop(slot, None)
            if old is not None:  # calls under way on it finish
                closing = asyncio.ensure_future(old.close(grace=5.0))
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
            self.addresses[slot] = address
            self.channels[slot] = loopback_channel(address, self.tls_root)

    def slot(self, method: str, request: bytes) -> int:
        value = field_one(request)
        if isinstance(value, bytes):
            return self.slot_of(value.decode("utf-8", "replace"))
        if isinstance(value, int) and method in _LEDGER_METHODS:
            return self.ledgers.get(value, 0)
        return 0  # names no topic: any slot answers it (a malformed request, say)

    def slot_of(self, topic: str) -> int:
        return slot_of(topic, self.slot_count, self.placement)

    def front_mark(self) -> tuple[tuple[str, str], ...]:
        """The metadata that tells a slot a call comes from this front (front.secret)."""
        return ((FRONT_KEY, self.secret),) if self.secret else ()

    def from_shard(self, context: Ctx) -> bool:
        """Whether a call comes from one of this server's shards (its Kafka broker making
        a topic change, ``shards.kafka_front``): the front passes it on as its own."""
        return from_front(context.invocation_metadata(), self.secret)

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.channels.values()))


def loopback_channel(address: str, tls_root: bytes | None) -> grpc.aio.Channel:
    """A channel to a process of this server (a shard's slot, the front): TLS trusting
    the server's own certificate when it has one."""
    options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    if tls_root is None:
        return grpc.aio.insecure_channel(address, options=options)
    creds = grpc.ssl_channel_credentials(root_certificates=tls_root)
    return grpc.aio.secure_channel(address, creds, options=options)


class FrontHandler(grpc.GenericRpcHandler):
    """Routes ``compactlog.v1`` calls (see the module docstring); other services (health,
    reflection) fall through to the front's own handlers."""

    def __init__(
        self,
        owners: Owners,
        index: PartitionedIndex | None = None,
        spanning: Spanning | None = None,
    ) -> None:
        from compactlog.server.front.spread.admin import SpreadAdmin  # it builds on this
        from compactlog.server.front.spread.log import SpreadLog  # so does this

        self.owners = owners
        self.index = index  # partition placement's partitioned topics; None: topic placement
        self.spread = SpreadAdmin(owners, index) if index is not None else None
        self.spread_log = SpreadLog(owners, index, self.spread) if index is not None else None
        self.spread_publish = SpreadPublish(owners, index, spanning) if index is not None else None
        self.shapes: dict[str, tuple[bool, bool]] = {}
        for name in _SERVICES:
            service = pb.DESCRIPTOR.services_by_name[name]
            for method in service.methods:
                path = f"/{service.full_name}/{method.name}"
                self.shapes[path] = (method.client_streaming, method.server_streaming)

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        method: str = details.method  # type: ignore[attr-defined]
        shape = self.shapes.get(method)
        if shape is None:
            return None
        if method.endswith("/ListTopics"):
            return grpc.unary_unary_rpc_method_handler(self._list_topics)
        if method.endswith("/ConsumeStream"):
            index = self.index
            relay = consume_stream_relay(
                self.owners, method, lambda name: index is not None and index.get(name) is not None
            )
            return grpc.stream_stream_rpc_method_handler(relay)
        if shape == (True, True):
            return grpc.stream_stream_rpc_method_handler(self._publish_stream(method))
        if shape == (True, False):
            return grpc.stream_unary_rpc_method_handler(self._stream_unary(method))
        if shape == (False, True):
            stream = self._unary_stream(method)
            if self.spread is not None:
                stream = self.spread.around_stream(method, stream)
            if self.spread_log is not None:
                stream = self.spread_log.around_stream(method, stream)
            return grpc.unary_stream_rpc_method_handler(stream)
        unary: Callable[[bytes, Any], Awaitable[bytes]] = self._unary(method)
        if method.endswith("/GetPartitionMap"):
            unary = self._partition_map
        if self.spread is not None:
            unary = self.spread.around(method, unary)
        if self.spread_log is not None:
            unary = self.spread_log.around(method, unary)
        if self.spread_publish is not None:
            unary = self.spread_publish.around(method, unary)
        return grpc.unary_unary_rpc_method_handler(unary)

    # ---- one owner -------------------------------------------------------------------

    def _unary(self, method: str) -> Callable[[bytes, Any], Awaitable[bytes]]:
        async def handle(request: bytes, context: Ctx) -> bytes:
            slot = self.owners.slot(method, request)
            response = await self._call(slot, method, request, context)
            if method == _CREATE_LEDGER:
                ledger = field_one(response)
                if isinstance(ledger, int):
                    self.owners.ledgers[ledger] = slot
            return response

        return handle

    async def _call(
        self, slot: int, method: str, request: bytes, context: Ctx, marked: bool = False
    ) -> bytes:
        """The slot's answer (``marked``: with the front's mark, ``front.secret``)."""
        stub: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]
        stub = self.owners.channels[slot].unary_unary(method)
        mark = self.owners.front_mark() if marked or self.owners.from_shard(context) else ()
        try:
            response: bytes = await stub(
                request,
                timeout=context.time_remaining(),
                metadata=mark + _forwarded(context.invocation_metadata()),
            )
        except grpc.aio.AioRpcError as exc:
            await _relay(context, exc)
            raise  # abort raised already
        return response

    def _unary_stream(self, method: str) -> Callable[[bytes, Any], AsyncIterator[bytes]]:
        async def handle(request: bytes, context: Ctx) -> AsyncIterator[bytes]:
            slot = self.owners.slot(method, request)
            callable_: grpc.aio.UnaryStreamMultiCallable[bytes, bytes]
            callable_ = self.owners.channels[slot].unary_stream(method)
            call = callable_(
                request,
                timeout=context.time_remaining(),
                metadata=_forwarded(context.invocation_metadata()),
            )
            try:
                async for response in call:
                    yield response
            except grpc.aio.AioRpcError as exc:
                await _relay(context, exc)
            finally:
                call.cancel()

        return handle

    def _stream_unary(self, method: str) -> Callable[[AsyncIterator[bytes], Any], Awaitable[bytes]]:
        async def handle(requests: AsyncIterator[bytes], context: Ctx) -> bytes:
            first = await anext(aiter(requests), None)
            slot = self.owners.slot(method, first) if first is not None else 0

            async def relay() -> AsyncIterator[bytes]:
                if first is not None:
                    yield first
                async for request in requests:
                    yield request

            stub: grpc.aio.StreamUnaryMultiCallable[bytes, bytes]
            stub = self.owners.channels[slot].stream_unary(method)
            try:
                response: bytes = await stub(
                    relay(),
                    timeout=context.time_remaining(),
                    metadata=_forwarded(context.invocation_metadata()),
                )
            except grpc.aio.AioRpcError as exc:
                await _relay(context, exc)
                raise
            return response

        return handle

    # ---- answered by the front ---------------------------------------------------------

    async def _list_topics(self, request: bytes, context: Ctx) -> bytes:
        """Every slot's list; a spread partitioned topic, listed by each slot holding a
        partition, is merged into one entry (``front.spread.merge``)."""
        method = "/compactlog.v1.TopicAdmin/ListTopics"
        slots = sorted(self.owners.channels)
        answers = await all_or_first_error(
            self._call(slot, method, request, context, marked=True) for slot in slots
        )
        lists = [pb.ListTopicsResponse.FromString(answer) for answer in answers]
        order = self.index.slots if self.index is not None else None
        return merge_topic_lists(lists, order, slots).SerializeToString()

    async def _partition_map(self, request: bytes, context: Ctx) -> bytes:
        """The owner's map (it holds the topic and its partitions), each entry given the
        address of its slot in place of the owner's "the address you asked"."""
        method = "/compactlog.v1.TopicAdmin/GetPartitionMap"
        slot = self.owners.slot(method, request)
        answer = pb.GetPartitionMapResponse.FromString(
            await self._call(slot, method, request, context)
        )
        for entry in answer.partitions:
            if not entry.address:
                entry.address = self.owners.addresses[self.owners.slot_of(entry.topic)]
        return answer.SerializeToString()

    def _publish_stream(
        self, method: str
    ) -> Callable[[AsyncIterator[bytes], Any], AsyncIterator[bytes]]:
        async def handle(requests: AsyncIterator[bytes], context: Ctx) -> AsyncIterator[bytes]:
            relay = OrderedStreams(self.owners, method, context, self.spread_publish)
            async for response in relay.run(requests):
                yield response

        return handle
