"""The front answers ``TopicAdmin`` calls on a spread partitioned topic (partition placement).

Under partition placement (``storage/slots.py``) the partitions of ``NAME`` live in
several slots, each answering a call on ``NAME`` for its own partitions only, and only
when the call carries the front's mark (``front_secret``). So the front answers such a
call whole: it sends the request bytes, unchanged, to every slot of
``PartitionedIndex.slots(NAME, N)`` with its mark and the caller's metadata and deadline,
and merges the answers (``front_spread_merge``). Calls on other topics pass through as
before (``FrontHandler``).

- Calls that change ``NAME`` (CreateTopic with ``partitions >= 2``, AddPartitions,
  UpdateTopicConfig, EnforceRetention) go to ``NAME``'s own slot first: it validates
  the request as a single store would (names, counts, config, kind) and a refusal there
  changes nothing anywhere. The other slots follow side by side. A CreateTopic another
  slot refuses is undone in the slots that made their part; an AddPartitions or config
  change cut half-way is finished by sending it again (slots already there do nothing
  new). Namespace changes of spread topics pass one at a time (``lock``), so two
  creates of one name cannot undo each other's parts.
- Calls that read (GetTopic, GetCompactionStatus) and DeleteTopic skip a slot that has
  no record of ``NAME`` (``TOPIC_NOT_FOUND``: a crash in the middle of a create or delete
  can leave it so) as long as some slot answers; any other error is relayed.
- ``Compact`` first checks that no partition is compacting (``ALREADY_EXISTS`` then, and
  nothing started), so a refusal cannot leave some partitions started.
- The subscription calls (ListSubscriptions, DeleteSubscription, ResetCursor) are
  ``front_spread_subs``'s, asked through the methods here.
- ``GetPartitionMap`` comes from the index alone. Any other TopicAdmin call on ``NAME``
  (Preview, Verify, DeleteRecords) goes to ``NAME``'s own slot with the mark, which
  answers as a single store does (``INVALID_ARGUMENT``: they act on one partition).
  ``WatchCompaction`` on ``NAME`` the front refuses itself, with the slot's words.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc

from compactlog.errors import CompactionRunning, CompactlogError, InvalidArgument
from compactlog.rpc_errors import error_info
from compactlog.server.convert import kind_from_pb
from compactlog.server.errors import error_status
from compactlog.server.front import Owners
from compactlog.server.front_partitions import PartitionedIndex
from compactlog.server.front_relay import Ctx
from compactlog.server.front_relay import forwarded as _forwarded
from compactlog.server.front_relay import relay as _relay
from compactlog.server.front_spread_merge import (
    merge_compaction,
    merge_topic_infos,
    partition_map,
)
from compactlog.server.front_spread_subs import SpreadSubscriptions
from compactlog.server.wire_peek import topic_of
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.v1 import compactlog_pb2 as pb

_ADMIN = "/compactlog.v1.TopicAdmin/"
_DELETE = _ADMIN + "DeleteTopic"
_STATUS = _ADMIN + "GetCompactionStatus"
Unary = Callable[[bytes, Any], Awaitable[bytes]]
UnaryStream = Callable[[bytes, Any], AsyncIterator[bytes]]
Result = bytes | grpc.aio.AioRpcError
Answer = Callable[[str, PartitionedTopic | None, bytes, Ctx], Awaitable[bytes]]


class SpreadAdmin:
    """The TopicAdmin calls the front answers for spread partitioned topics."""

    def __init__(self, owners: Owners, index: PartitionedIndex) -> None:
        self.owners = owners
        self.index = index
        self.lock = asyncio.Lock()  # namespace changes of spread topics, one at a time
        self._answers: dict[str, Answer] = {
            "CreateTopic": self._create,
            "GetTopic": self._describe,
            "UpdateTopicConfig": self._change(_ADMIN + "UpdateTopicConfig"),
            "EnforceRetention": self._change(_ADMIN + "EnforceRetention"),
            "DeleteTopic": self._delete,
            "AddPartitions": self._add_partitions,
            "GetPartitionMap": self._partition_map,
            "Compact": self._compact,
            "GetCompactionStatus": self._status,
            "CancelCompaction": self._cancel,
        }
        subscriptions = SpreadSubscriptions(self)
        self._answers.update(
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
        answer = self._answers.get(method.removeprefix(_ADMIN)) or self._home(method)

        async def routed(request: bytes, context: Ctx) -> bytes:
            name = topic_of(request)
            held = self.index.get(name) if name else None
            if name is None or not (held or _creates_partitioned(method, request)):
                return await handle(request, context)
            try:
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

    async def _ask(self, slot: int, method: str, request: bytes, context: Ctx) -> bytes:
        """One slot's answer, with the front's mark; a failure raised as it came."""
        stub: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]
        stub = self.owners.channels[slot].unary_unary(method)
        metadata = self.owners.front_mark() + _forwarded(context.invocation_metadata())
        response: bytes = await stub(request, timeout=context.time_remaining(), metadata=metadata)
        return response

    async def fan_out(
        self, slots: Sequence[int], method: str, request: bytes, context: Ctx
    ) -> list[Result]:
        """Every slot's answer or failure, asked side by side."""
        results = await asyncio.gather(
            *(self._ask(slot, method, request, context) for slot in slots),
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
        results = await self.fan_out(slots, method, request, context)
        for result in results:
            if isinstance(result, grpc.aio.AioRpcError):
                await _relay(context, result)
        return [r for r in results if isinstance(r, bytes)]

    async def _home_first(
        self, slots: Sequence[int], method: str, request: bytes, context: Ctx
    ) -> list[bytes]:
        """``NAME``'s own slot (it validates), then the others side by side."""
        home = await self.answers(slots[:1], method, request, context)
        return home + await self.answers(slots[1:], method, request, context)

    async def found(
        self, slots: Sequence[int], method: str, request: bytes, context: Ctx
    ) -> dict[int, bytes]:
        """The answers of the slots that hold ``NAME``'s record (module docstring)."""
        results = await self.fan_out(slots, method, request, context)
        failed = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        serious = [e for e in failed if e.code() != grpc.StatusCode.NOT_FOUND]
        if serious or len(failed) == len(results):
            await _relay(context, (serious or failed)[0])
        return {s: r for s, r in zip(slots, results, strict=True) if isinstance(r, bytes)}

    def slots(self, topic: PartitionedTopic) -> list[int]:
        return self.index.slots(topic.name, topic.partitions)

    def _home(self, method: str) -> Answer:
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

    async def _create(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        method = _ADMIN + "CreateTopic"
        async with self.lock:
            if held is not None:  # NAME's slot says it exists, as a single store does
                return await self._home(method)(name, held, request, context)
            partitions = pb.CreateTopicRequest.FromString(request).partitions
            slots = self.index.slots(name, partitions)
            home = await self.answers(slots[:1], method, request, context)
            results = await self.fan_out(slots[1:], method, request, context)
            failed = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
            if failed:  # undo the parts made, then say why
                made = [s for s, r in zip(slots[1:], results, strict=True) if isinstance(r, bytes)]
                undo = pb.DeleteTopicRequest(name=name).SerializeToString()
                await self.fan_out([slots[0], *made], _DELETE, undo, context)
                await _relay(context, failed[0])
            infos = [pb.TopicInfo.FromString(b) for b in (*home, *results) if isinstance(b, bytes)]
            self.index.put(PartitionedTopic(name, partitions, kind_from_pb(infos[0].kind)))
        return merge_topic_infos(infos, partitions).SerializeToString()

    async def _add_partitions(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        """``NAME``'s own slot grows first (it refuses a shrink or a bad count); then every
        other slot of the new total, a slot new to ``NAME`` (no record yet) by a
        CreateTopic of its partitions with partition 0's kind and config."""
        assert held is not None  # routed here only for a name in the index
        method = _ADMIN + "AddPartitions"
        async with self.lock:
            total = pb.AddPartitionsRequest.FromString(request).partitions
            grown = dataclasses.replace(held, partitions=max(total, held.partitions))
            slots = self.slots(grown)
            first = await self.answers(slots[:1], method, request, context)
            home = pb.TopicInfo.FromString(first[0])
            create = pb.CreateTopicRequest(
                name=name, kind=home.kind, config=home.config, partitions=grown.partitions
            ).SerializeToString()
            others = await asyncio.gather(
                *(self._grow(slot, request, create, context) for slot in slots[1:])
            )  # every part ends (its failure returned) before the first failure is relayed
            for other in others:
                if isinstance(other, grpc.aio.AioRpcError):
                    await _relay(context, other)
            self.index.put(grown)
        infos = [home, *(pb.TopicInfo.FromString(b) for b in others if isinstance(b, bytes))]
        return merge_topic_infos(infos, grown.partitions).SerializeToString()

    async def _grow(self, slot: int, request: bytes, create: bytes, context: Ctx) -> Result:
        """One slot's AddPartitions; a slot without ``NAME``'s record gets ``create``."""
        try:
            return await self._ask(slot, _ADMIN + "AddPartitions", request, context)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                return exc
        try:
            return await self._ask(slot, _ADMIN + "CreateTopic", create, context)
        except grpc.aio.AioRpcError as exc:
            return exc

    async def _describe(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        assert held is not None
        answers = await self.found(self.slots(held), _ADMIN + "GetTopic", request, context)
        infos = [pb.TopicInfo.FromString(b) for b in answers.values()]
        return merge_topic_infos(infos, held.partitions).SerializeToString()

    def _change(self, method: str) -> Answer:
        async def change(
            name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
        ) -> bytes:
            assert held is not None
            answers = await self._home_first(self.slots(held), method, request, context)
            infos = [pb.TopicInfo.FromString(b) for b in answers]
            return merge_topic_infos(infos, held.partitions).SerializeToString()

        return change

    async def _delete(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        assert held is not None
        async with self.lock:
            answers = await self.found(self.slots(held), _DELETE, request, context)
            self.index.remove(name)
        return next(iter(answers.values()))

    async def _partition_map(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        assert held is not None
        owners = self.owners
        answer = partition_map(name, held.partitions, lambda t: owners.addresses[owners.slot_of(t)])
        return answer.SerializeToString()

    def _merged_status(
        self, held: PartitionedTopic, answers: dict[int, bytes]
    ) -> pb.CompactionStatus:
        statuses = {s: pb.CompactionStatus.FromString(b) for s, b in answers.items()}
        return merge_compaction(
            statuses, held.name, held.partitions, self.index.slot_count, self.index.placement
        )

    async def _status(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        assert held is not None
        answers = await self.found(self.slots(held), _STATUS, request, context)
        return self._merged_status(held, answers).SerializeToString()

    async def _compact(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        """Nothing starts while a partition compacts (module docstring)."""
        assert held is not None
        slots = self.slots(held)
        ask = pb.GetCompactionStatusRequest(topic=name).SerializeToString()
        now = self._merged_status(held, await self.found(slots, _STATUS, ask, context))
        for i, partition in enumerate(now.partitions):
            if partition.state == pb.CompactionStatus.RUNNING:
                raise CompactionRunning(
                    f"a compaction of {name!r} is running (partition {i})", topic=name
                )
        answers = await self.answers(slots, _ADMIN + "Compact", request, context)
        return self._merged_status(held, dict(zip(slots, answers, strict=True))).SerializeToString()

    async def _cancel(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        """Every running partition cancelled; COMPACTION_NOT_RUNNING only when none ran."""
        assert held is not None
        slots = self.slots(held)
        results = await self.fan_out(slots, _ADMIN + "CancelCompaction", request, context)
        idle = [s for s, r in zip(slots, results, strict=True) if _not_running(r)]
        for result in results:
            if isinstance(result, grpc.aio.AioRpcError) and (
                len(idle) == len(slots) or not _not_running(result)
            ):
                await _relay(context, result)
        answers = {s: r for s, r in zip(slots, results, strict=True) if isinstance(r, bytes)}
        ask = pb.GetCompactionStatusRequest(topic=name).SerializeToString()
        answers.update(zip(idle, await self.answers(idle, _STATUS, ask, context), strict=True))
        return self._merged_status(held, answers).SerializeToString()


def _creates_partitioned(method: str, request: bytes) -> bool:
    """A CreateTopic of a partitioned topic (its partitions are spread at once)."""
    if not method.endswith("/CreateTopic"):
        return False
    try:
        return pb.CreateTopicRequest.FromString(request).partitions >= 2
    except Exception:  # malformed: the slot refuses it as usual
        return False


def _not_running(result: Result) -> bool:
    if not isinstance(result, grpc.aio.AioRpcError):
        return False
    info = error_info(result)
    return info is not None and info.reason == "COMPACTION_NOT_RUNNING"


def _one_partition_only(name: str, what: str) -> InvalidArgument:
    """As ``TopicAdminService`` refuses it: a streaming call the front does not relay."""
    return InvalidArgument(
        f"topic {name!r} is partitioned: {what} applies to one partition ({name}-partition-i)",
        topic=name,
    )


async def _abort(context: Ctx, exc: CompactlogError, method: str) -> None:
    """End the call with ``exc`` as its status and ErrorInfo (``server/errors.py``)."""
    status = error_status(exc, method)
    await context.abort(status.code, status.details, status.trailing_metadata)
