"""The front answers ``TopicAdmin`` calls on a spread partitioned topic (partition placement).

Under partition placement the partitions of ``NAME`` live in several slots, each answering
for its own partitions only, and only when the call carries the front's mark
(``front.secret``). ``SpreadAdmin`` answers such a call whole: it sends the request bytes to
every slot of ``PartitionedIndex.slots(NAME, N)`` and merges the answers
(``front.spread.merge``); a change goes to ``NAME``'s home slot first (CreateTopic and
AddPartitions: ``front.spread.growth``), and ``lock`` passes changes and the repair one at
a time. Which call goes where, and how a half-made change
converges, is in docs/architecture.md ("The front room, module by module").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc

from compactlog.crash_points import crash
from compactlog.errors import CompactlogError, InvalidArgument
from compactlog.server.front.partitions import PartitionedIndex
from compactlog.server.front.relay import Ctx, SlotCall
from compactlog.server.front.relay import relay as _relay
from compactlog.server.front.router import Owners
from compactlog.server.front.spanning import CRASH_ENV
from compactlog.server.front.spread.compaction import SpreadCompaction
from compactlog.server.front.spread.growth import SpreadGrowth
from compactlog.server.front.spread.merge import merge_topic_infos, partition_map
from compactlog.server.front.spread.names import create_plain, home_decided
from compactlog.server.front.spread.subscriptions import SpreadSubscriptions
from compactlog.server.rpc.errors import error_status
from compactlog.server.rpc.wire_peek import topic_of
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.v1 import compactlog_pb2 as pb

_ADMIN = "/compactlog.v1.TopicAdmin/"
_DELETE = _ADMIN + "DeleteTopic"
_CREATE = _ADMIN + "CreateTopic"
Unary = Callable[[bytes, Any], Awaitable[bytes]]
UnaryStream = Callable[[bytes, Any], AsyncIterator[bytes]]
Result = bytes | grpc.aio.AioRpcError
Answer = Callable[[str, PartitionedTopic | None, bytes, Ctx], Awaitable[bytes]]
Mend = Callable[[Sequence[str]], Awaitable[object]]
_UNLOCKED = contextlib.nullcontext()


class SpreadAdmin:
    """The TopicAdmin calls the front answers for spread partitioned topics."""

    def __init__(self, owners: Owners, index: PartitionedIndex) -> None:
        self.owners = owners
        self.index = index
        self.lock = asyncio.Lock()  # namespace and config changes of spread topics
        self.crash_at = os.environ.get(CRASH_ENV, "")  # tests only (front.spanning)
        self.mend: Mend | None = None  # the repair of named topics (front.spread.repair)
        self.growth = SpreadGrowth(self)  # CreateTopic, AddPartitions
        self._answers: dict[str, Answer] = {
            "CreateTopic": self.growth.create,
            "GetTopic": self._describe,
            "UpdateTopicConfig": self._change(_ADMIN + "UpdateTopicConfig", config=True),
            "EnforceRetention": self._change(_ADMIN + "EnforceRetention", config=False),
            "DeleteTopic": self._delete,
            "AddPartitions": self.growth.add_partitions,
            "GetPartitionMap": self._partition_map,
        }
        subscriptions = SpreadSubscriptions(self)
        compaction = SpreadCompaction(self)
        self._answers.update(
            Compact=compaction.compact,
            GetCompactionStatus=compaction.status,
            CancelCompaction=compaction.cancel,
            ListSubscriptions=subscriptions.list_subscriptions,
            DeleteSubscription=subscriptions.delete_subscription,
            ResetCursor=subscriptions.reset_cursor,
        )

    # ---- the hook in FrontHandler -----------------------------------------------------

    def around(self, method: str, handle: Unary) -> Unary:
        """``handle`` (the front's usual routing) for calls on other topics; this
        front's own answer for a TopicAdmin call on a spread ``NAME``."""
        if not method.startswith(_ADMIN):
            return handle
        answer = self._answers.get(method.removeprefix(_ADMIN)) or self.home(method)

        async def routed(request: bytes, context: Ctx) -> bytes:
            name = topic_of(request)
            held = self.index.get(name) if name else None
            try:
                partitioned = held or _creates_partitioned(method, request)
                if name is not None and method == _CREATE and not partitioned:
                    return await create_plain(self, name, request, context, handle)
                if name is None or not partitioned:
                    return await handle(request, context)
                return await answer(name, held, request, context)
            except CompactlogError as exc:
                await _abort(context, exc, method)
                raise  # abort raised already

        return routed

    def around_stream(self, method: str, handle: UnaryStream) -> UnaryStream:
        """``WatchCompaction`` on ``NAME`` is refused as a single store refuses it."""
        short = method.removeprefix(_ADMIN)
        if short != "WatchCompaction":
            return handle

        async def routed(request: bytes, context: Ctx) -> AsyncIterator[bytes]:
            name = topic_of(request)
            if name is not None and self.index.get(name) is not None:
                await _abort(context, _one_partition_only(name, short), method)
            async for response in handle(request, context):
                yield response

        return routed

    # ---- calls to the slots -----------------------------------------------------------

    def call_of(self, context: Ctx) -> SlotCall:
        """A slot's part of the caller's call: the front's mark, the caller's metadata
        and deadline."""
        return SlotCall.of(context, self.owners.front_mark())

    async def ask(self, slot: int, method: str, request: bytes, call: SlotCall) -> bytes:
        """One slot's answer; a failure raised as it came."""
        stub: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]
        stub = self.owners.channels[slot].unary_unary(method)
        response: bytes = await stub(request, timeout=call.timeout, metadata=call.metadata)
        return response

    async def fan_out(
        self, slots: Sequence[int], method: str, request: bytes, call: SlotCall
    ) -> list[Result]:
        """Every slot's answer or failure, asked side by side."""
        results = await asyncio.gather(
            *(self.ask(slot, method, request, call) for slot in slots),
            return_exceptions=True,
        )
        for result in results:
            if not isinstance(result, bytes | grpc.aio.AioRpcError):
                raise result  # not a status: a bug or a cancelled call
        return [r for r in results if isinstance(r, bytes | grpc.aio.AioRpcError)]

    async def answers(
        self, slots: Sequence[int], method: str, request: bytes, context: Ctx
    ) -> list[bytes]:
        """Every slot's answer; the first failure is relayed."""
        results = await self.fan_out(slots, method, request, self.call_of(context))
        for result in results:
            if isinstance(result, grpc.aio.AioRpcError):
                await _relay(context, result)
        return [r for r in results if isinstance(r, bytes)]

    async def found(
        self, slots: Sequence[int], method: str, request: bytes, context: Ctx
    ) -> dict[int, bytes]:
        """The answers of the slots that hold ``NAME``'s record (module docstring)."""
        results = await self.fan_out(slots, method, request, self.call_of(context))
        return await _found(slots, results, context)

    def slots(self, topic: PartitionedTopic) -> list[int]:
        return self.index.slots(topic.name, topic.partitions)

    def home(self, method: str) -> Answer:
        """Any other call on ``NAME``: its own slot answers, given the mark, as a single
        store does (``INVALID_ARGUMENT`` for Preview, Verify and DeleteRecords, which act
        on one partition)."""

        async def home(
            name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
        ) -> bytes:
            assert held is not None
            return (await self.answers(self.slots(held)[:1], method, request, context))[0]

        return home

    # ---- the answers --------------------------------------------------------------------

    async def _describe(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        assert held is not None
        answers = await self.found(self.slots(held), _ADMIN + "GetTopic", request, context)
        infos = [pb.TopicInfo.FromString(b) for b in answers.values()]
        return merge_topic_infos(infos, held.partitions).SerializeToString()

    def _change(self, method: str, config: bool) -> Answer:
        """A config change holds ``lock``, so that the repair (``front.spread.repair``)
        never spreads a config this call is replacing."""

        async def change(
            name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
        ) -> bytes:
            assert held is not None
            slots = self.slots(held)
            async with self.lock if config else _UNLOCKED, self.watched(name):
                home = await self.answers(slots[:1], method, request, context)
                self.crash("after_home_config" if config else "")
                answers = home + await self.answers(slots[1:], method, request, context)
            infos = [pb.TopicInfo.FromString(b) for b in answers]
            return merge_topic_infos(infos, held.partitions).SerializeToString()

        return change

    async def _delete(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        """``NAME``'s own slot first (its record gone, the delete is decided: the repair
        finishes it), then the others side by side."""
        assert held is not None
        slots = self.slots(held)
        async with self.lock, self.watched(name):
            results = await self.fan_out(slots[:1], _DELETE, request, self.call_of(context))
            home = results[0]
            # Refused half-way, the home has decided (its record gone): the others are
            # deleted as well, then the refusal answered; else nothing else is asked.
            if (
                isinstance(home, grpc.aio.AioRpcError)
                and not _not_found(home)
                and not await home_decided(self, name, self.call_of(context))
            ):
                await _relay(context, home)
            self.crash("after_home_delete")
            results += await self.fan_out(slots[1:], _DELETE, request, self.call_of(context))
            answers = await _found(slots, results, context)
            self.index.remove(name)
        return next(iter(answers.values()))

    # ---- what a crash half-way may leave (``front.spread.repair``) ------------------------

    @contextlib.asynccontextmanager
    async def watched(self, name: str) -> AsyncIterator[None]:
        """A change of ``NAME`` that fails (a slot away, say) marks ``NAME`` for the
        repair's next pass: its slots may be left half-way."""
        try:
            yield
        except BaseException:
            self.index.suspect(name)
            raise

    def crash(self, point: str) -> None:
        """Tests only: exit at ``point`` (``COMPACTLOG_FRONT_CRASH_AT``, front.spanning)."""
        if point and self.crash_at == point:
            crash(point)

    async def _partition_map(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        assert held is not None
        owners = self.owners
        answer = partition_map(name, held.partitions, lambda t: owners.addresses[owners.slot_of(t)])
        return answer.SerializeToString()


def _creates_partitioned(method: str, request: bytes) -> bool:
    """A CreateTopic of a partitioned topic (its partitions are spread at once)."""
    if not method.endswith("/CreateTopic"):
        return False
    try:
        return pb.CreateTopicRequest.FromString(request).partitions >= 2
    except Exception:  # malformed: the slot refuses it as usual
        return False


async def _found(slots: Sequence[int], results: list[Result], context: Ctx) -> dict[int, bytes]:
    """The slots that answered; a failure but ``TOPIC_NOT_FOUND`` relayed, and that one
    too when no slot answered."""
    failed = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    serious = [e for e in failed if not _not_found(e)]
    if serious or len(failed) == len(results):
        await _relay(context, (serious or failed)[0])
    return {s: r for s, r in zip(slots, results, strict=True) if isinstance(r, bytes)}


def _not_found(error: grpc.aio.AioRpcError) -> bool:
    return error.code() == grpc.StatusCode.NOT_FOUND


def _one_partition_only(name: str, what: str) -> InvalidArgument:
    """As ``TopicAdminService`` refuses it: a streaming call the front does not relay."""
    return InvalidArgument(
        f"topic {name!r} is partitioned: {what} applies to one partition ({name}-partition-i)",
        topic=name,
    )


async def _abort(context: Ctx, exc: CompactlogError, method: str) -> None:
    """End the call with ``exc`` as its status and ErrorInfo (``server/rpc/errors.py``)."""
    status = error_status(exc, method)
    await context.abort(status.code, status.details, status.trailing_metadata)
