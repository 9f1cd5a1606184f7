"""The front's Log calls on a spread partitioned ``NAME`` (partition placement).

Each slot holding partitions of ``NAME`` answers for its own only, and only with the
front's mark (``front.secret``); so the front sends Read, Consume, Acknowledge(List),
GetLastMessageId, GetKeyHistory and CloseConsumer on ``NAME`` to the slots of
``PartitionedIndex.slots`` and merges the answers (``front.spread.merge``). A slot that
answers NOT_FOUND lacks its record of ``NAME`` (a slot makes its partitions before its
record, in a create, a grow or the repair): the call waits for the repair of ``NAME``
(``SpreadAdmin.mend``, which holds the admin lock, so a change under way ends first) and
is asked once more, so that it never answers NOT_FOUND while ListTopics lists the
partitions. Publish is not here (``front.spread.publish``). How each call is spread and merged is in
docs/architecture.md ("The front room, module by module").
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc

from compactlog.partitioner import partition_name
from compactlog.rpc_errors import error_info
from compactlog.server.front.partitions import PartitionedIndex
from compactlog.server.front.relay import Ctx
from compactlog.server.front.relay import forwarded as _forwarded
from compactlog.server.front.relay import relay as _relay
from compactlog.server.front.router import Owners
from compactlog.server.front.spread import log_merge as merge
from compactlog.server.front.spread.admin import SpreadAdmin, Unary, UnaryStream
from compactlog.server.front.tasks import all_or_first_error, settle, start
from compactlog.server.rpc.wire_peek import topic_of
from compactlog.v1 import compactlog_pb2 as pb

_LOG = "/compactlog.v1.Log/"
READ = _LOG + "Read"
NACK = _LOG + "NegativeAcknowledge"

log = logging.getLogger(__name__)
Spread = tuple[str, int]  # NAME and its partition count
_WithIds = TypeVar("_WithIds", pb.AcknowledgeListRequest, pb.NegativeAcknowledgeRequest)


class SpreadLog:
    """The Log calls the front answers for a spread ``NAME``."""

    def __init__(
        self, owners: Owners, index: PartitionedIndex, admin: SpreadAdmin | None = None
    ) -> None:
        self.owners = owners
        self.index = index
        self.admin = admin  # its ``mend`` (the repair) for a slot lacking NAME's record
        self._turns: dict[str, int] = {}
        self.unary: dict[str, _Unary] = {
            _LOG + "GetLastMessageId": self._merged(merge.last_ids),
            _LOG + "GetKeyHistory": self._key_history,
            _LOG + "Consume": self._consume,
            _LOG + "Acknowledge": self._acknowledge,
            _LOG + "AcknowledgeList": self._acknowledge_list,
            _LOG + "NegativeAcknowledge": self._negative_acknowledge,
            _LOG + "CloseConsumer": self._merged(lambda answers: answers[0]),
        }

    # ---- the hooks in FrontHandler -------------------------------------------------------

    def around(self, method: str, handle: Unary) -> Unary:
        """``handle`` (the front's usual routing) for calls on other topics; this
        front's own answer for a Log call of this module on a spread ``NAME``."""
        answer = self.unary.get(method)
        if answer is None:
            return handle

        async def routed(request: bytes, context: Ctx) -> bytes:
            spread = self.spread(method, request)
            if answer is None or spread is None:
                return await handle(request, context)
            try:
                return await answer(method, spread, request, context)
            except grpc.aio.AioRpcError as exc:
                mended = await self.mended(spread, exc)
                if mended is None:
                    await _relay(context, exc)
                    raise
            try:
                return await answer(method, mended, request, context)
            except grpc.aio.AioRpcError as exc:
                await _relay(context, exc)
                raise

        return routed

    def around_stream(self, method: str, handle: UnaryStream) -> UnaryStream:
        """The same for ``Read``, a server stream."""
        if method != READ:
            return handle

        async def routed(request: bytes, context: Ctx) -> AsyncIterator[bytes]:
            spread = self.spread(method, request)
            responses = (
                handle(request, context) if spread is None else self.read(spread, request, context)
            )
            async for response in responses:
                yield response

        return routed

    async def mended(self, spread: Spread, error: grpc.aio.AioRpcError) -> Spread | None:
        """After a slot's TOPIC_NOT_FOUND: ``NAME`` and its count once the repair has made its
        slots agree (module docstring), to be asked again; None when the error stands (not
        NOT_FOUND, no repair here, or ``NAME`` gone meanwhile)."""
        mend = self.admin.mend if self.admin is not None else None
        info = error_info(error)
        if info is None or info.reason != "TOPIC_NOT_FOUND" or mend is None:
            return None  # a subscription not found, say: the slot's answer stands
        await mend([spread[0]])
        topic = self.index.get(spread[0])
        return (topic.name, topic.partitions) if topic is not None else None

    def spread(self, method: str, request: bytes) -> Spread | None:
        """``NAME`` and its partition count when ``method`` on ``request`` is answered
        here: a call of this module on a partitioned topic of the index."""
        if method != READ and method not in self.unary:
            return None
        name = topic_of(request)
        topic = self.index.get(name) if name is not None else None
        if topic is None or not self.index.spread:
            return None
        return topic.name, topic.partitions

    # ---- calls to the slots ------------------------------------------------------------

    def _metadata(self, context: Ctx) -> tuple[tuple[str, Any], ...]:
        return self.owners.front_mark() + _forwarded(context.invocation_metadata())

    def _ask(self, slot: int, method: str, request: bytes, context: Ctx) -> Awaitable[bytes]:
        stub: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]
        stub = self.owners.channels[slot].unary_unary(method)
        return stub(request, timeout=context.time_remaining(), metadata=self._metadata(context))

    async def _all(
        self, context: Ctx, method: str, requests: Sequence[tuple[int, bytes]]
    ) -> list[bytes]:
        """Each (slot, request) asked at once; the answers in order. The first error is
        raised as the slot gave it (``around`` relays it) and the calls still under way
        are cancelled."""
        return await all_or_first_error(self._ask(s, method, r, context) for s, r in requests)

    def _merged(self, combine: Callable[[list[bytes]], bytes]) -> _Unary:
        async def handle(method: str, spread: Spread, request: bytes, context: Ctx) -> bytes:
            slots = self.index.slots(*spread)
            return combine(await self._all(context, method, [(s, request) for s in slots]))

        return handle

    def slot_of_partition(self, spread: Spread, partition: int) -> int:
        """The slot of partition ``partition``; ``NAME``'s own slot for an index out of
        range (it holds the record, so it refuses the index as a single server would)."""
        name, partitions = spread
        if not 0 <= partition < partitions:
            return self.index.slots(name, partitions)[0]
        return self.owners.slot_of(partition_name(name, partition))

    # ---- the calls -----------------------------------------------------------------------

    async def _key_history(self, method: str, spread: Spread, request: bytes, ctx: Ctx) -> bytes:
        limit = pb.GetKeyHistoryRequest.FromString(request).max_messages
        answers = await self._all(ctx, method, [(s, request) for s in self.index.slots(*spread)])
        return merge.key_history(answers, limit)

    async def _acknowledge(self, method: str, spread: Spread, request: bytes, ctx: Ctx) -> bytes:
        partition = pb.AcknowledgeRequest.FromString(request).id.partition
        return (
            await self._all(ctx, method, [(self.slot_of_partition(spread, partition), request)])
        )[0]

    async def _acknowledge_list(
        self, method: str, spread: Spread, request: bytes, ctx: Ctx
    ) -> bytes:
        """As a negative ack's: one request a slot, each all or none on its own (a slot
        that refuses an id stores none of its part; another slot's part may be stored, and
        the client then acks that group one id at a time, which changes nothing there)."""
        return await self._by_slot(method, spread, pb.AcknowledgeListRequest, request, ctx)

    async def _negative_acknowledge(
        self, method: str, spread: Spread, request: bytes, ctx: Ctx
    ) -> bytes:
        return await self._by_slot(method, spread, pb.NegativeAcknowledgeRequest, request, ctx)

    async def _by_slot(
        self, method: str, spread: Spread, kind: type[_WithIds], request: bytes, ctx: Ctx
    ) -> bytes:
        """The request's ids split by the slot of their partition: one request a slot."""
        parsed = kind.FromString(request)
        by_slot: dict[int, list[pb.MessageId]] = {}
        for msg_id in parsed.ids:
            by_slot.setdefault(self.slot_of_partition(spread, msg_id.partition), []).append(msg_id)
        rest = kind()  # every field but the ids, made once for every slot's part
        rest.CopyFrom(parsed)
        del rest.ids[:]
        requests = []
        for slot, ids in by_slot.items():
            part = kind()
            part.CopyFrom(rest)
            part.ids.extend(ids)
            requests.append((slot, part.SerializeToString()))
        if not requests:  # no ids: NAME's own slot answers (and checks the names)
            requests.append((self.index.slots(*spread)[0], request))
        answers = await self._all(ctx, method, requests)
        return answers[0]

    async def _consume(self, method: str, spread: Spread, request: bytes, ctx: Ctx) -> bytes:
        """Two rounds, concatenated from this call's first slot on (the next call starts
        one later). First every slot without waiting, every answer kept: no answer is
        cancelled while a slot may be sending messages it counted as delivered, and when
        one fails the others' messages are given back (``_first_round``). Then,
        when all were empty, every slot waiting ``wait_ms``: the first answers with
        messages are taken and the slots still waiting cancelled."""
        slots = self.index.slots(*spread)
        turn = self._turns.get(spread[0], 0) % len(slots)
        self._turns[spread[0]] = turn + 1
        slots = slots[turn:] + slots[:turn]
        parsed = pb.ConsumeRequest.FromString(request)
        parsed.max_messages = math.ceil(parsed.max_messages / len(slots))
        wait_ms, parsed.wait_ms = parsed.wait_ms, 0
        at_once = parsed.SerializeToString()
        answers = await self._first_round(method, parsed, slots, at_once, ctx)
        if any(answers) or not wait_ms:
            return b"".join(answers)
        parsed.wait_ms = wait_ms
        waiting = parsed.SerializeToString()
        tasks = start(self._ask(s, method, waiting, ctx) for s in slots)
        try:
            return await _first_answers(tasks)
        finally:
            await settle(tasks)

    async def _first_round(
        self, method: str, parsed: pb.ConsumeRequest, slots: list[int], at_once: bytes, ctx: Ctx
    ) -> list[bytes]:
        """Every slot's answer to ``at_once``. When one slot fails, the messages the others
        counted as delivered are given back (a negative ack, redelivered at once) before
        its error is raised: a Consume that fails moves no cursor, spread or not."""
        results = await asyncio.gather(
            *(self._ask(s, method, at_once, ctx) for s in slots), return_exceptions=True
        )
        failed = next((r for r in results if isinstance(r, BaseException)), None)
        if failed is None:
            return [r for r in results if isinstance(r, bytes)]
        given = [(s, r) for s, r in zip(slots, results, strict=True) if isinstance(r, bytes) and r]
        await self._give_back(parsed, given, ctx)
        raise failed

    async def _give_back(
        self, parsed: pb.ConsumeRequest, given: list[tuple[int, bytes]], ctx: Ctx
    ) -> None:
        """Each slot's delivered messages negatively acknowledged there, at once."""
        requests = []
        for slot, answer in given:
            ids = [m.id for m in pb.ConsumeResponse.FromString(answer).messages]
            nack = pb.NegativeAcknowledgeRequest(
                topic=parsed.topic,
                subscription=parsed.subscription,
                ids=ids,
                redelivery_delay_ms=0,
                consumer_name=parsed.consumer_name,
            )
            requests.append(self._ask(slot, NACK, nack.SerializeToString(), ctx))
        for outcome in await asyncio.gather(*requests, return_exceptions=True):
            if isinstance(outcome, BaseException):  # they come back at the ack timeout
                log.warning(
                    "spread Consume on %s: giving messages back failed: %s", parsed.topic, outcome
                )

    async def read(self, spread: Spread, request: bytes, context: Ctx) -> AsyncIterator[bytes]:
        """Read on ``NAME``: every slot's stream, forwarded as responses come; asked once
        more after a NOT_FOUND that came before any response went (``mended``)."""
        limit = pb.ReadRequest.FromString(request).max_messages
        for again in (False, True):
            reads = SpreadRead(self, self.index.slots(*spread), request, context)
            try:
                async for response in reads.run(limit):
                    yield response
                return
            except grpc.aio.AioRpcError as exc:
                mended = None if again or reads.sent else await self.mended(spread, exc)
                if mended is None:
                    await _relay(context, exc)
                    raise
                spread = mended


_Unary = Callable[[str, Spread, bytes, Ctx], Awaitable[bytes]]


async def _first_answers(tasks: Sequence[asyncio.Future[bytes]]) -> bytes:
    """The non-empty answers done once one is (in task order); empty when all are. An
    error is raised when no answer with messages came before it."""
    pending = set(tasks)
    while pending:
        _done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        answers = [t.result() for t in tasks if t.done() and t.exception() is None]
        if any(answers):
            return b"".join(answers)
        for task in _done:
            task.result()  # raises a slot's error
    return b""


class SpreadRead:
    """One Read on ``NAME``: a stream a slot, pumped into one queue."""

    def __init__(self, log: SpreadLog, slots: list[int], request: bytes, context: Ctx) -> None:
        self.context = context
        metadata = log._metadata(context)
        self.calls: list[grpc.aio.UnaryStreamCall[bytes, bytes]] = []
        for slot in slots:
            stub: grpc.aio.UnaryStreamMultiCallable[bytes, bytes]
            stub = log.owners.channels[slot].unary_stream(READ)
            self.calls.append(stub(request, timeout=context.time_remaining(), metadata=metadata))
        self.sent = False  # a response went to the caller
        # Bounded: a slow reader holds the slots' streams back (gRPC flow control).
        self.queue: asyncio.Queue[bytes | grpc.aio.AioRpcError | None] = asyncio.Queue(len(slots))

    async def _pump(self, call: grpc.aio.UnaryStreamCall[bytes, bytes]) -> None:
        """The stream's responses, then its error if any, then ``None``. Cancelled (``run``
        has stopped reading), it puts nothing more: a put on the full queue would wait
        for ever."""
        try:
            async for response in call:
                await self.queue.put(response)
        except grpc.aio.AioRpcError as exc:
            await self.queue.put(exc)
        await self.queue.put(None)

    async def run(self, limit: int) -> AsyncIterator[bytes]:
        """The responses until every stream ended or ``limit`` messages (0: none) went."""
        pumps = start(self._pump(call) for call in self.calls)
        running = len(pumps)
        remaining = limit
        try:
            while running:
                item = await self.queue.get()
                if item is None:
                    running -= 1
                elif isinstance(item, grpc.aio.AioRpcError):
                    raise item  # relayed by SpreadLog.read
                elif not limit:
                    self.sent = True
                    yield item
                else:
                    response, count = merge.cut(item, remaining)
                    remaining -= count
                    self.sent = True
                    yield response
                    if not remaining:
                        return
        finally:
            for call in self.calls:
                call.cancel()
            await settle(pumps)
