"""CreateTopic and AddPartitions on a spread partitioned ``NAME`` (partition placement).

Both make partitions slot by slot: ``NAME``'s home slot first (it refuses what a single
store refuses), then every other slot of the new count side by side; a create that another
slot refuses undoes the parts made, and a grow reaches a slot new to ``NAME`` as a create of
its partitions (``grow``, which the repair reuses). ``SpreadAdmin`` routes the calls here
and holds the lock and the slot calls; docs/architecture.md says how a half-made change
converges.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import grpc

from compactlog.server.admin.validation import validate_only
from compactlog.server.front.relay import Ctx, SlotCall
from compactlog.server.front.relay import relay as _relay
from compactlog.server.front.spread.merge import merge_topic_infos
from compactlog.server.front.spread.names import learn, refuse_taken_partitions
from compactlog.server.rpc.convert import kind_from_pb
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.v1 import compactlog_pb2 as pb

if TYPE_CHECKING:
    from compactlog.server.front.spread.admin import Result, SpreadAdmin

_ADMIN = "/compactlog.v1.TopicAdmin/"
_CREATE = _ADMIN + "CreateTopic"
_DELETE = _ADMIN + "DeleteTopic"


class SpreadGrowth:
    """The answers ``SpreadAdmin`` gives for CreateTopic and AddPartitions on ``NAME``."""

    def __init__(self, admin: SpreadAdmin) -> None:
        self.admin = admin

    async def create(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        """A home refusing ``ALREADY_EXISTS`` for a ``NAME`` the index lacks has it learnt
        (``names.learn``: a create the home shard died under and finished at its restart)
        and its slots made to agree before the refusal is answered, as the outcome says."""
        async with self.admin.lock:
            if held is not None:  # NAME's slot says it exists, as a single store does
                return await self.admin.home(_CREATE)(name, held, request, context)
            made = await self._make(name, request, context)
            learnt = isinstance(made, grpc.aio.AioRpcError) and _exists(made)
            learnt = learnt and await learn(self.admin, name, self.admin.call_of(context))
        if isinstance(made, bytes):
            return made
        if learnt and self.admin.mend is not None:
            await self.admin.mend([name])
        await _relay(context, made)
        raise made  # abort raised already

    async def _make(self, name: str, request: bytes, context: Ctx) -> Result:
        """The create made on every slot (the merged answer), or the home's refusal; a
        failure of another slot undoes the parts made and is relayed. Marked
        validate-only (``admin.validation``), each slot checks and makes nothing."""
        partitions = pb.CreateTopicRequest.FromString(request).partitions
        slots = self.admin.index.slots(name, partitions)
        home = await self.admin.fan_out(slots[:1], _CREATE, request, self.admin.call_of(context))
        if isinstance(home[0], grpc.aio.AioRpcError):
            return home[0]
        self.admin.crash("after_home_create")
        results = await self.admin.fan_out(slots[1:], _CREATE, request, self.admin.call_of(context))
        failed = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        checked = validate_only(context.invocation_metadata())  # nothing was made
        if failed and checked:
            await _relay(context, failed[0])
        if failed:  # undo the parts made (NAME's own slot first), then say why
            made = [s for s, r in zip(slots[1:], results, strict=True) if isinstance(r, bytes)]
            undo = pb.DeleteTopicRequest(name=name).SerializeToString()
            for undone in (slots[:1], made):
                await self.admin.fan_out(undone, _DELETE, undo, self.admin.call_of(context))
            await _relay(context, failed[0])
        infos = [pb.TopicInfo.FromString(b) for b in (*home, *results) if isinstance(b, bytes)]
        if not checked:
            self.admin.index.put(PartitionedTopic(name, partitions, kind_from_pb(infos[0].kind)))
        return merge_topic_infos(infos, partitions).SerializeToString()

    async def add_partitions(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        """``NAME``'s own slot grows first (it refuses a shrink or a bad count); then every
        other slot of the new total (``grow``)."""
        assert held is not None  # routed here only for a name in the index
        method = _ADMIN + "AddPartitions"
        async with self.admin.lock, self.admin.watched(name):
            total = pb.AddPartitionsRequest.FromString(request).partitions
            grown = dataclasses.replace(held, partitions=max(total, held.partitions))
            slots = self.admin.slots(grown)
            call = self.admin.call_of(context)
            try:
                await refuse_taken_partitions(self.admin, name, held.partitions, total, call)
            except grpc.aio.AioRpcError as exc:  # a slot away: its status, nothing grown
                await _relay(context, exc)
            first = await self.admin.answers(slots[:1], method, request, context)
            home = pb.TopicInfo.FromString(first[0])
            self.admin.crash("after_home_add_partitions")
            others = await self.grow(name, slots[1:], home, self.admin.call_of(context))
            for other in others:  # every part ended before the first failure is relayed
                if isinstance(other, grpc.aio.AioRpcError):
                    await _relay(context, other)
            if not validate_only(context.invocation_metadata()):
                self.admin.index.put(grown)
        infos = [home, *(pb.TopicInfo.FromString(b) for b in others if isinstance(b, bytes))]
        return merge_topic_infos(infos, grown.partitions).SerializeToString()

    async def grow(
        self, name: str, slots: Sequence[int], home: pb.TopicInfo, call: SlotCall
    ) -> list[Result]:
        """Each of ``slots`` grown to ``home``'s count side by side, every part's answer or
        failure: an AddPartitions, or for a slot new to ``NAME`` (no record yet) a
        CreateTopic of its partitions with partition 0's kind and config (``home``'s)."""
        add = pb.AddPartitionsRequest(name=name, partitions=home.partitions).SerializeToString()
        create = pb.CreateTopicRequest(
            name=name, kind=home.kind, config=home.config, partitions=home.partitions
        ).SerializeToString()
        return list(await asyncio.gather(*(self._grow(s, add, create, call) for s in slots)))

    async def _grow(self, slot: int, add: bytes, create: bytes, call: SlotCall) -> Result:
        """One slot's AddPartitions; a slot without ``NAME``'s record gets ``create``."""
        try:
            return await self.admin.ask(slot, _ADMIN + "AddPartitions", add, call)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                return exc
        try:
            return await self.admin.ask(slot, _ADMIN + "CreateTopic", create, call)
        except grpc.aio.AioRpcError as exc:
            return exc


def _exists(error: grpc.aio.AioRpcError) -> bool:
    return error.code() == grpc.StatusCode.ALREADY_EXISTS
