"""The front's Publish to a partitioned topic whose partitions span several slots.

A publish to a spread ``NAME`` is split here by partition, the way a slot splits one
(``log.partitioned_publish``), checked against every partition's ``max.message.bytes``
before any part is sent, and each part published to ``NAME-partition-i`` at its slot; a
LEDGER publish spanning slots goes through the intent log (``front.spanning``). The
all-or-nothing rules and the limits' cache (``LIMIT_TTL_S``) are in docs/architecture.md
("The front room, module by module").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import grpc

from compactlog.errors import CompactlogError
from compactlog.partitioner import partition_name
from compactlog.server.front.partitions import PartitionedIndex
from compactlog.server.front.relay import Ctx, forwarded, relay
from compactlog.server.log.partitioned_publish import RoundRobin, ordered_reply
from compactlog.server.rpc.errors import abort_async
from compactlog.server.rpc.wire_peek import topic_of
from compactlog.storage import batch as codec
from compactlog.storage.ledger_append import too_large
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.storage.protowire import put_varint, read_varint, skip_field
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb

if TYPE_CHECKING:
    from compactlog.server.front.router import Owners
    from compactlog.server.front.spanning import Spanning

PUBLISH = "/compactlog.v1.Log/Publish"
_GET_TOPIC = "/compactlog.v1.TopicAdmin/GetTopic"
# Admin calls after which a cached limit may be stale.
CONFIG_CHANGES = frozenset(
    f"/compactlog.v1.TopicAdmin/{name}"
    for name in ("UpdateTopicConfig", "CreateTopic", "DeleteTopic", "AddPartitions")
)
LIMIT_TTL_S = 2.0
# The most a stored message's bytes (without its id) exceed its record's: the publish
# time and the event time, each a tag and a varint of at most ten bytes.
_MESSAGE_OVERHEAD = 22
_NO_LIMIT = 2**63
_NEXT_SLOT = Callable[[int], Awaitable[bytes | None]]


@dataclass(frozen=True)
class Part:
    """The records of one partition, as a ``PublishRequest`` for ``NAME-partition-i``."""

    partition: int
    slot: int
    request: bytes


@dataclass(frozen=True)
class Split:
    """A publish to ``NAME`` cut by partition; ``order``: (partition, index in its part)
    of every record in request order, as ``route_records`` gives it."""

    topic: str
    parts: list[Part]
    order: memoryview

    def named_parts(self) -> list[tuple[str, bytes]]:
        """``(partition topic, request)`` of every part, as the intent log keeps them."""
        return [(partition_name(self.topic, p.partition), p.request) for p in self.parts]

    def position(self, partition: int, index: int) -> int:
        """The record's position in the request (for an error naming it)."""
        order = self.order
        for k in range(0, len(order), 2):
            if order[k] == partition and order[k + 1] == index:
                return k // 2
        return index


def topic_field(name: str) -> bytes:
    """``PublishRequest.topic`` (field 1) on the wire."""
    data = name.encode("utf-8")
    out = bytearray(b"\x0a")
    put_varint(out, len(data))
    return bytes(out) + data


def split(
    topic: PartitionedTopic, raw: bytes, robin: RoundRobin, slot_of: Callable[[str], int]
) -> Split:
    """The records of the PublishRequest ``raw`` by partition; a partition with none gets
    no part. PublishRequest has no field but ``topic`` and ``records``: a part is the
    partition's topic field and its records."""
    parts, order = robin.route(topic.name, raw, topic.partitions)
    out = []
    for p, records in enumerate(parts):
        if records:
            name = partition_name(topic.name, p)
            out.append(Part(p, slot_of(name), topic_field(name) + records))
    return Split(topic.name, out, order)


def reply_fields(reply: bytes) -> tuple[list[bytes], bool]:
    """A ``PublishResponse``'s ids as their wire fields (tag included, in its order) and
    its ``synced`` flag, without a parse: the front passes the ids on as the slot wrote
    them."""
    ids: list[bytes] = []
    synced = False
    p, end = 0, len(reply)
    while p < end:
        tag, q = read_varint(reply, p, end)
        nxt = skip_field(reply, q, end, tag & 7)
        if tag == 0x0A:
            ids.append(reply[p:nxt])
        elif tag == 0x10:
            synced = read_varint(reply, q, end)[0] != 0
        p = nxt
    return ids, synced


def assemble(parts: list[Part], order: memoryview, replies: list[bytes]) -> bytes:
    """The caller's ``PublishResponse`` from each part's reply (same order as ``parts``)."""
    fields: dict[int, list[bytes]] = {}
    synced = True
    for part, reply in zip(parts, replies, strict=True):
        fields[part.partition], part_synced = reply_fields(reply)
        synced = synced and part_synced
    return ordered_reply(order, lambda p, k: fields[p][k], synced)


def check_sizes(cut: Split, limits: dict[int, int], now_ms: int) -> None:
    """Raise ``RecordTooLarge`` for the first part holding a record over its partition's
    ``max.message.bytes``, measured as the slot will measure it (``encode_request``)."""
    for part in cut.parts:
        limit = limits[part.partition]
        if len(part.request) + _MESSAGE_OVERHEAD <= limit:
            continue  # no record in it can be over the limit
        run = codec.encode_request(part.request, 0, 0, 0, now_ms, partition=part.partition)
        if run.max_size > limit:
            record = cut.position(part.partition, run.max_size_index)
            raise too_large(partition_name(cut.topic, part.partition), record, run.max_size, limit)


@dataclass
class Limits:
    """``max.message.bytes`` by partition topic, asked of its slot and kept briefly."""

    ttl_s: float = LIMIT_TTL_S
    known: dict[str, tuple[float, int]] = field(default_factory=dict)

    def get(self, name: str) -> int | None:
        held = self.known.get(name)
        if held is None or time.monotonic() - held[0] > self.ttl_s:
            return None
        return held[1]

    def put(self, name: str, limit: int) -> None:
        self.known[name] = (time.monotonic(), limit)

    def forget(self) -> None:
        self.known.clear()


class SpreadPublish:
    """Publish and PublishStream requests to a spread ``NAME``, split and sent on."""

    def __init__(
        self, owners: Owners, index: PartitionedIndex, spanning: Spanning | None = None
    ) -> None:
        self.owners = owners
        self.index = index
        self.spanning = spanning  # LEDGER publishes over several slots: whole across crashes
        self.robin = RoundRobin()
        self.limits = Limits()

    def topic(self, request: bytes) -> PartitionedTopic | None:
        """The spread partitioned topic ``request`` publishes to, or None (a plain topic
        or a partition: routed to its one owner as ever)."""
        name = topic_of(request)
        return self.index.get(name) if name is not None else None

    def metadata(self, context: Ctx) -> tuple[tuple[str, Any], ...]:
        return forwarded(context.invocation_metadata()) + self.owners.front_mark()

    async def prepare(self, topic: PartitionedTopic, raw: bytes, context: Ctx) -> Split:
        """The publish split and checked: raises before anything is sent when a record is
        too large (``RecordTooLarge``) or the request is malformed."""
        cut = split(topic, raw, self.robin, self.owners.slot_of)
        limits = await asyncio.gather(*(self._limit(cut.topic, p, context) for p in cut.parts))
        by_partition = {p.partition: limit for p, limit in zip(cut.parts, limits, strict=True)}
        check_sizes(cut, by_partition, time.time_ns() // 1_000_000)
        return cut

    async def _limit(self, name: str, part: Part, context: Ctx) -> int:
        topic = partition_name(name, part.partition)
        limit = self.limits.get(topic)
        if limit is None:
            stub: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]
            stub = self.owners.channels[part.slot].unary_unary(_GET_TOPIC)
            request = pb.GetTopicRequest(name=topic).SerializeToString()
            info = pb.TopicInfo.FromString(
                await stub(
                    request, timeout=context.time_remaining(), metadata=self.metadata(context)
                )
            )
            # An offline partition has no config: its slot refuses the part itself.
            limit = int(info.config.get("max.message.bytes", _NO_LIMIT))
            self.limits.put(topic, limit)
        return limit

    def spans(self, topic: PartitionedTopic, cut: Split) -> Spanning | None:
        """The intent log's sender when ``cut`` must be made whole across slots: a LEDGER
        publish with parts in several slots (SEGMENTED stays best-effort)."""
        if self.spanning is None or topic.kind is not TopicKind.LEDGER:
            return None
        return self.spanning if len({part.slot for part in cut.parts}) > 1 else None

    async def publish(self, topic: PartitionedTopic, raw: bytes, context: Ctx) -> bytes:
        """One Publish: checked, then every part sent at once; the first error fails it.
        A LEDGER publish over several slots is recorded first (``front.spanning``)."""
        cut = await self.prepare(topic, raw, context)
        spanning = self.spans(topic, cut)
        if spanning is not None:
            intent = await spanning.begin(cut.named_parts())
            metadata = self.metadata(context)
            replies = await spanning.publish(intent, metadata, context.time_remaining())
        else:  # every part ends before the caller hears of the first failure
            ended = await asyncio.gather(
                *(self._send(part, context) for part in cut.parts), return_exceptions=True
            )
            for result in ended:
                if isinstance(result, BaseException):
                    raise result
            replies = [r for r in ended if isinstance(r, bytes)]
        return assemble(cut.parts, cut.order, replies)

    async def _send(self, part: Part, context: Ctx) -> bytes:
        stub: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]
        stub = self.owners.channels[part.slot].unary_unary(PUBLISH)
        reply: bytes = await stub(
            part.request, timeout=context.time_remaining(), metadata=self.metadata(context)
        )
        return reply

    def around(
        self, method: str, unary: Callable[[bytes, Ctx], Awaitable[bytes]]
    ) -> Callable[[bytes, Ctx], Awaitable[bytes]]:
        """The front's handler of unary ``method``: Publish split here when it names a
        spread topic; a config-changing admin call drops the cached limits once done
        (a publish meanwhile may have cached the old ones)."""
        if method in CONFIG_CHANGES:
            return self.forgetting(unary)
        return self.unary(unary) if method == PUBLISH else unary

    def forgetting(
        self, change: Callable[[bytes, Ctx], Awaitable[bytes]]
    ) -> Callable[[bytes, Ctx], Awaitable[bytes]]:
        """``change`` (a config-changing call), then the cached limits forgotten, whether
        it succeeded or not (a refused change may have reached some slots)."""

        async def handle(request: bytes, context: Ctx) -> bytes:
            try:
                return await change(request, context)
            finally:
                self.limits.forget()

        return handle

    def unary(
        self, plain: Callable[[bytes, Ctx], Awaitable[bytes]]
    ) -> Callable[[bytes, Ctx], Awaitable[bytes]]:
        """The front's Publish handler: spread topics here, any other to ``plain``."""

        async def handle(request: bytes, context: Ctx) -> bytes:
            topic = self.topic(request)
            if topic is None:
                return await plain(request, context)
            try:
                return await self.publish(topic, request, context)
            except (grpc.aio.AioRpcError, CompactlogError) as exc:
                await fail(context, exc, "Publish")

        return handle

    async def stream_parts(
        self, topic: PartitionedTopic, raw: bytes, context: Ctx
    ) -> tuple[SpreadPending, Awaitable[None] | None, list[tuple[int, bytes]]]:
        """One request of a PublishStream, checked and split: what its reply is read
        from, what its parts must wait for (a spanning LEDGER request's intent, recorded
        now and synced with others'), and ``(slot, part)`` to write to the slots' streams
        in request order (``front.streams``), so each partition keeps the order of the
        caller's requests."""
        cut = await self.prepare(topic, raw, context)
        spanning = self.spans(topic, cut)
        if spanning is None:
            return SpreadPending(cut), None, [(p.slot, p.request) for p in cut.parts]
        intent, durable = spanning.record(cut.named_parts())
        marker = spanning.marker(intent)
        parts = [(p.slot, marker + p.request) for p in cut.parts]
        pending = SpreadPending(
            cut, lambda: spanning.intents.done(intent.txid), lambda: spanning.release(intent.txid)
        )
        return pending, durable, parts


@dataclass(frozen=True)
class SpreadPending:
    """A spread request written to the slots' streams, waiting for its parts' replies."""

    cut: Split
    whole: Callable[[], None] = lambda: None  # every part stored: forget the intent
    release: Callable[[], None] = lambda: None  # the stream ended: the redriver's if open

    async def reply(self, next_of: _NEXT_SLOT) -> bytes | None:
        """The caller's reply from the next reply of each part's slot stream; None when a
        stream ended without one (the caller's stream ends there too; an intent stays
        open for the redriver)."""
        replies = []
        for part in self.cut.parts:
            reply = await next_of(part.slot)
            if reply is None:
                return None
            replies.append(reply)
        self.whole()
        self.release()
        return assemble(self.cut.parts, self.cut.order, replies)


async def fail(context: Ctx, exc: BaseException, method: str) -> NoReturn:
    """End the caller's call with ``exc``: a slot's error relayed as it came, the front's
    own (``CompactlogError``) as a server answers it."""
    if isinstance(exc, grpc.aio.AioRpcError):
        await relay(context, exc)
    await abort_async(context, exc, method)
    raise AssertionError("abort returned")  # pragma: no cover
