"""The front finishes a change of a spread partitioned topic that a crash left half-way.

Every change of a spread ``NAME`` (``front.spread.admin``) is made by its home slot
(partition 0's) first, then by the others; the home's part is the change decided, so the
repair finishes it from there: a pass over every ``NAME`` once the shards are ready, then
every ``REPAIR_EVERY_S`` over ``PartitionedIndex.suspects``, under ``SpreadAdmin.lock``. What
a pass mends, and how, is in docs/architecture.md ("The front room, module by module").
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence

import grpc

from compactlog.server.front.relay import SlotCall
from compactlog.server.front.spread.admin import Result, SpreadAdmin
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.v1 import compactlog_pb2 as pb

log = logging.getLogger("compactlog.front")

REPAIR_EVERY_S = 30.0
CALL_TIMEOUT_S = 10.0  # one slot's part of a repair
_ADMIN = "/compactlog.v1.TopicAdmin/"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What makes ``NAME``'s slots agree: nothing when ``agreed``."""

    home: pb.TopicInfo | None  # the home's answer, with the greatest count any slot holds
    grow: tuple[int, ...] = ()  # slots without the record or with a lower count
    configure: Mapping[int, pb.UpdateTopicConfigRequest] = dataclasses.field(default_factory=dict)
    remove: tuple[int, ...] = ()  # the home has no record: the slots still holding it

    @property
    def agreed(self) -> bool:
        return not (self.grow or self.configure or self.remove)

    @property
    def total(self) -> int:
        return self.home.partitions if self.home is not None else 0


def plan(name: str, home: int, infos: Mapping[int, pb.TopicInfo | None]) -> Plan:
    """The disagreement of ``NAME``'s slots, from their GetTopic answers (slot -> its
    ``TopicInfo``; None: no record of ``NAME``)."""
    holding = {slot: info for slot, info in infos.items() if info is not None}
    if not holding:
        return Plan(None)
    source = infos.get(home)
    if source is None:
        return Plan(None, remove=tuple(sorted(holding)))
    total = max(info.partitions for info in holding.values())
    grown = pb.TopicInfo()
    grown.CopyFrom(source)
    grown.partitions = total
    lagging = [s for s, info in infos.items() if info is None or info.partitions < total]
    configure = {}
    for slot, info in holding.items():
        change = config_change(name, source.config, info.config)
        if slot != home and change is not None:
            configure[slot] = change
    return Plan(grown, tuple(sorted(lagging)), configure)


def config_change(
    name: str, wanted: Mapping[str, str], held: Mapping[str, str]
) -> pb.UpdateTopicConfigRequest | None:
    """The UpdateTopicConfig turning ``held`` into ``wanted`` (the keys that differ);
    None when they agree."""
    set_ = {key: value for key, value in wanted.items() if held.get(key) != value}
    remove = sorted(key for key in held if key not in wanted)
    if not (set_ or remove):
        return None
    return pb.UpdateTopicConfigRequest(name=name, set=set_, remove=remove)


class SpreadRepair:
    """The repair passes over the spread partitioned topics (module docstring)."""

    def __init__(self, admin: SpreadAdmin, every_s: float = REPAIR_EVERY_S) -> None:
        self.admin = admin
        self.index = admin.index
        self.every_s = every_s
        self._task: asyncio.Task[None] | None = None
        admin.mend = self.run_pass  # a NAME the admin learnt is repaired at once

    def _call(self) -> SlotCall:
        return SlotCall(self.admin.owners.front_mark(), CALL_TIMEOUT_S)

    async def survey(self, held: PartitionedTopic) -> dict[int, pb.TopicInfo | None]:
        """Every slot of ``NAME``'s greatest count, asked GetTopic (as often as a slot
        names a count greater than the index's); a failure but ``NOT_FOUND`` raised."""
        request = pb.GetTopicRequest(name=held.name).SerializeToString()
        total, infos = held.partitions, dict[int, pb.TopicInfo | None]()
        while True:
            slots = [s for s in self.index.slots(held.name, total) if s not in infos]
            results = await self.admin.fan_out(slots, _ADMIN + "GetTopic", request, self._call())
            for slot, result in zip(slots, results, strict=True):
                if isinstance(result, grpc.aio.AioRpcError):
                    if result.code() != grpc.StatusCode.NOT_FOUND:
                        raise result
                    infos[slot] = None
                else:
                    infos[slot] = pb.TopicInfo.FromString(result)
            greatest = max((i.partitions for i in infos.values() if i is not None), default=0)
            if greatest <= total:
                return infos
            total = greatest

    async def repair(self, name: str) -> bool:
        """Make ``NAME``'s slots agree; whether they do now."""
        async with self.admin.lock:
            held = self.index.get(name)
            if held is None:
                return True  # deleted meanwhile
            infos = await self.survey(held)
            home = self.index.slots(name, held.partitions)[0]
            mend = plan(name, home, infos)
            if mend.agreed:  # nothing held anywhere: deleted behind the index
                (self.index.cleared if mend.home is not None else self.index.remove)(name)
                return True
            failures = [f for f in await self._apply(name, mend) if isinstance(f, grpc.RpcError)]
            if failures:
                log.warning("spread topic %r is not repaired yet: %s", name, _words(failures[0]))
                return False
            if mend.home is None:
                self.index.remove(name)
            else:
                self.index.put(dataclasses.replace(held, partitions=mend.total))
                self.index.cleared(name)
        log.info("repaired spread topic %r: %s", name, _said(mend))
        return True

    async def _apply(self, name: str, mend: Plan) -> list[Result]:
        call = self._call()
        if mend.home is None:
            delete = pb.DeleteTopicRequest(name=name).SerializeToString()
            return await self.admin.fan_out(mend.remove, _ADMIN + "DeleteTopic", delete, call)
        results = await self.admin.growth.grow(name, mend.grow, mend.home, call)
        changes: dict[bytes, list[int]] = {}  # the same change asked of its slots at once
        for slot, change in mend.configure.items():
            changes.setdefault(change.SerializeToString(), []).append(slot)
        for change_bytes, slots in changes.items():
            method = _ADMIN + "UpdateTopicConfig"
            results += await self.admin.fan_out(slots, method, change_bytes, call)
        return results

    async def run_pass(self, names: Iterable[str]) -> list[str]:
        """Each of ``names`` repaired; those still disagreeing (marked for the next pass)."""
        left = []
        for name in names:
            try:
                repaired = await self.repair(name)
            except grpc.RpcError as exc:  # a slot away while asked
                log.warning("spread topic %r is not repaired yet: %s", name, _words(exc))
                repaired = False
            if not repaired:
                self.index.suspect(name)
                left.append(name)
        return left

    def start(self) -> None:
        """A pass over every name now, then over the marked ones every ``every_s``."""

        async def loop() -> None:
            names: Sequence[str] = self.index.names()
            while True:
                try:
                    await self.run_pass(names)
                except Exception:  # never let the loop die with the front still up
                    log.exception("spread topics' repair pass failed")
                await asyncio.sleep(self.every_s)
                names = self.index.suspects()

        self._task = asyncio.ensure_future(loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def _words(error: grpc.RpcError) -> str:
    if isinstance(error, grpc.aio.AioRpcError):
        return f"{error.code().name}: {error.details()}"
    return str(error)


def _said(mend: Plan) -> str:
    if mend.home is None:
        return f"its home slot has no record (a delete cut half-way): deleted in {mend.remove}"
    parts = []
    if mend.grow:
        parts.append(f"slots {list(mend.grow)} grown to {mend.total} partitions")
    if mend.configure:
        parts.append(f"slots {sorted(mend.configure)} given partition 0's config")
    return "; ".join(parts)
