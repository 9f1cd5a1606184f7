"""The front's compaction calls on a spread partitioned ``NAME`` (partition placement).

Each slot holding partitions of ``NAME`` answers GetCompactionStatus, Compact and
CancelCompaction for its own partitions; the front asks them through ``SpreadAdmin`` and
merges the statuses (``merge_compaction``). The rules that keep a refusal from leaving some
partitions started are in docs/architecture.md ("The front room, module by module").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from compactlog.errors import CompactionRunning
from compactlog.rpc_errors import error_info
from compactlog.server.front.relay import Ctx
from compactlog.server.front.relay import relay as _relay
from compactlog.server.front.spread.merge import merge_compaction
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.v1 import compactlog_pb2 as pb

if TYPE_CHECKING:
    from compactlog.server.front.spread.admin import Result, SpreadAdmin

_ADMIN = "/compactlog.v1.TopicAdmin/"
_STATUS = _ADMIN + "GetCompactionStatus"


class SpreadCompaction:
    """The answers ``SpreadAdmin`` gives for the compaction calls on a spread ``NAME``."""

    def __init__(self, admin: SpreadAdmin) -> None:
        self.admin = admin

    def merged(self, held: PartitionedTopic, answers: dict[int, bytes]) -> pb.CompactionStatus:
        statuses = {s: pb.CompactionStatus.FromString(b) for s, b in answers.items()}
        return merge_compaction(
            statuses,
            held.name,
            held.partitions,
            self.admin.index.slot_count,
            self.admin.index.placement,
        )

    async def status(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        assert held is not None
        answers = await self.admin.found(self.admin.slots(held), _STATUS, request, context)
        return self.merged(held, answers).SerializeToString()

    async def compact(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        """Nothing starts while a partition compacts (module docstring)."""
        assert held is not None
        slots = self.admin.slots(held)
        ask = pb.GetCompactionStatusRequest(topic=name).SerializeToString()
        now = self.merged(held, await self.admin.found(slots, _STATUS, ask, context))
        for i, partition in enumerate(now.partitions):
            if partition.state == pb.CompactionStatus.RUNNING:
                raise CompactionRunning(
                    f"a compaction of {name!r} is running (partition {i})", topic=name
                )
        answers = await self.admin.answers(slots, _ADMIN + "Compact", request, context)
        return self.merged(held, dict(zip(slots, answers, strict=True))).SerializeToString()

    async def cancel(
        self, name: str, held: PartitionedTopic | None, request: bytes, context: Ctx
    ) -> bytes:
        """Every running partition cancelled; COMPACTION_NOT_RUNNING only when none ran."""
        assert held is not None
        slots = self.admin.slots(held)
        call = self.admin.call_of(context)
        results = await self.admin.fan_out(slots, _ADMIN + "CancelCompaction", request, call)
        idle = [s for s, r in zip(slots, results, strict=True) if _not_running(r)]
        for result in results:
            if isinstance(result, grpc.aio.AioRpcError) and (
                len(idle) == len(slots) or not _not_running(result)
            ):
                await _relay(context, result)
        answers = {s: r for s, r in zip(slots, results, strict=True) if isinstance(r, bytes)}
        ask = pb.GetCompactionStatusRequest(topic=name).SerializeToString()
        answers.update(
            zip(idle, await self.admin.answers(idle, _STATUS, ask, context), strict=True)
        )
        return self.merged(held, answers).SerializeToString()


def _not_running(result: Result) -> bool:
    if not isinstance(result, grpc.aio.AioRpcError):
        return False
    info = error_info(result)
    return info is not None and info.reason == "COMPACTION_NOT_RUNNING"
