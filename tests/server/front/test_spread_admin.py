"""The front's fan-out of TopicAdmin calls on a spread partitioned topic
(``server/front/spread/admin.py``), against eight fake slots on loopback that answer, as
the real slots do, for their own partitions only and only with the front's mark. What
the real shards do is in ``tests/e2e/test_spread_admin.py``; this covers what they
cannot be made to do on cue (a slot refusing a create half-way)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import grpc
import pytest

from compactlog.errors import (
    CompactlogError,
    InvalidArgument,
    NotOwner,
    TopicExists,
    TopicNotFound,
)
from compactlog.partitioner import partition_name
from compactlog.rpc_errors import error_info
from compactlog.server.admin.partitioned_compaction import aggregate
from compactlog.server.front.partitions import PartitionedIndex
from compactlog.server.front.router import FrontHandler, Owners
from compactlog.server.front.secret import from_front
from compactlog.server.front.spread.merge import partitions_in_slot
from compactlog.server.rpc.errors import error_status
from compactlog.storage.slots import Placement, slots_of_partitions
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

SPREAD = Placement.PARTITION
SECRET = "front-secret"
Ctx = grpc.aio.ServicerContext[Any, Any]


class FakeSlot:
    """One slot: the records of the spread topics it holds a partition of, and the
    ordinary topics (``taken``) that stand in a create's way."""

    def __init__(self, slot: int) -> None:
        self.slot = slot
        self.records: dict[str, int] = {}
        self.taken: set[str] = set()
        self.marked: list[tuple[str, bool]] = []  # (method, came with the mark)
        self.compacted: set[str] = set()
        self.configs: dict[str, dict[str, str]] = {}  # name -> config set on it
        self.away = False  # every call UNAVAILABLE, as a shard down
        self.answers_reads = False  # away, but GetTopic and ListTopics answered (gone after
        # the checks)

    def local(self, name: str, partitions: int) -> list[int]:
        return partitions_in_slot(name, partitions, self.slot, 8, SPREAD)

    def info(self, name: str) -> pb.TopicInfo:
        partitions = self.records[name]
        out = pb.TopicInfo(name=name, kind=pb.LEDGER, partitions=partitions)
        out.config["slot"] = str(self.slot)
        out.config.update(self.configs.get(name, {}))
        out.stats.entries = len(self.local(name, partitions))
        return out

    def require(self, name: str) -> int:
        if name not in self.records:
            raise TopicNotFound(f"topic {name!r} does not exist", topic=name)
        return self.records[name]

    def create(self, request: pb.CreateTopicRequest) -> pb.TopicInfo:
        if request.name in self.records:
            raise TopicExists(f"topic {request.name!r} already exists", topic=request.name)
        for i in self.local(request.name, request.partitions):
            if partition_name(request.name, i) in self.taken:
                raise TopicExists("a partition exists", topic=partition_name(request.name, i))
        self.records[request.name] = request.partitions
        self.configs[request.name] = dict(request.config)
        return self.info(request.name)

    def configure(self, request: pb.UpdateTopicConfigRequest) -> pb.TopicInfo:
        config = self.configs.setdefault(request.name, {})
        config.update(request.set)
        for key in request.remove:
            config.pop(key, None)
        return self.info(request.name) if self.require(request.name) else pb.TopicInfo()

    def grow(self, request: pb.AddPartitionsRequest) -> pb.TopicInfo:
        if request.partitions < self.require(request.name):
            raise InvalidArgument("never shrink", topic=request.name)
        self.records[request.name] = request.partitions
        return self.info(request.name)

    def one_partition(self, request: Any) -> pb.CompactionRun:
        self.require(request.topic)
        raise InvalidArgument(f"topic {request.topic!r} is partitioned: applies to one partition")

    def delete(self, request: pb.DeleteTopicRequest) -> pb.DeleteTopicResponse:
        self.require(request.name)
        del self.records[request.name]
        return pb.DeleteTopicResponse()

    def list_topics(self, request: pb.ListTopicsRequest) -> pb.ListTopicsResponse:
        """The records and ordinary topics whose name starts with the prefix asked."""
        names = sorted({*self.records, *self.taken})
        shown = [n for n in names if n.startswith(request.prefix)]
        return pb.ListTopicsResponse(
            topics=[self.info(n) if n in self.records else pb.TopicInfo(name=n) for n in shown]
        )

    def status(self, topic: str) -> pb.CompactionStatus:
        names = [partition_name(topic, i) for i in self.local(topic, self.require(topic))]
        return aggregate(
            [
                pb.CompactionStatus(
                    state=pb.CompactionStatus.SUCCESS if n in self.compacted else 0,
                    last_run=pb.CompactionRun(read=1) if n in self.compacted else None,
                )
                for n in names
            ]
        )

    def compact(self, request: pb.CompactRequest) -> pb.CompactionStatus:
        partitions = self.require(request.topic)
        self.compacted.update(
            partition_name(request.topic, i) for i in self.local(request.topic, partitions)
        )
        return self.status(request.topic)

    def handler(self) -> grpc.GenericRpcHandler:
        answers: dict[str, Callable[[Any], Any]] = {
            "CreateTopic": self.create,
            "GetTopic": lambda r: self.info(r.name) if self.require(r.name) else None,
            "ListTopics": self.list_topics,
            "DeleteTopic": self.delete,
            "AddPartitions": self.grow,
            "UpdateTopicConfig": self.configure,
            "PreviewCompaction": self.one_partition,
            "VerifyCompaction": self.one_partition,
            "Compact": self.compact,
            "GetCompactionStatus": lambda r: self.status(r.topic),
        }
        methods = {}
        for short, answer in answers.items():
            method = pb.DESCRIPTOR.services_by_name["TopicAdmin"].methods_by_name[short]
            methods[short] = grpc.unary_unary_rpc_method_handler(
                self._guarded(short, answer),
                request_deserializer=getattr(pb, method.input_type.name).FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
        return grpc.method_handlers_generic_handler("compactlog.v1.TopicAdmin", methods)

    def _guarded(
        self, short: str, answer: Callable[[Any], Any]
    ) -> Callable[[Any, Ctx], Awaitable[Any]]:
        async def handle(request: Any, context: Ctx) -> Any:
            marked = from_front(context.invocation_metadata(), SECRET)
            self.marked.append((short, marked))
            if self.away and not (short in ("GetTopic", "ListTopics") and self.answers_reads):
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"slot {self.slot} is away")
            try:
                name = getattr(request, "name", "") or getattr(request, "topic", "")
                if not marked and name in self.records:
                    raise NotOwner("spread topics answer their front only")
                return answer(request)
            except CompactlogError as exc:
                status = error_status(exc, short)
                await context.abort(status.code, status.details, status.trailing_metadata)

        return handle


class Cluster:
    def __init__(self) -> None:
        self.slots = [FakeSlot(i) for i in range(8)]
        self.index = PartitionedIndex(8, SPREAD)
        self.servers: list[grpc.aio.Server] = []

    async def start(self) -> pb_grpc.TopicAdminStub:
        addresses = {}
        for slot in self.slots:
            server = grpc.aio.server()
            server.add_generic_rpc_handlers((slot.handler(),))
            addresses[slot.slot] = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
            await server.start()
            self.servers.append(server)
        self.owners = Owners(8, None, SPREAD, SECRET)
        self.owners.update(addresses)
        front = grpc.aio.server()
        handler = FrontHandler(self.owners, self.index)
        assert handler.spread is not None
        self.spread = handler.spread
        front.add_generic_rpc_handlers((handler,))
        port = front.add_insecure_port("127.0.0.1:0")
        await front.start()
        self.servers.append(front)
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        return pb_grpc.TopicAdminStub(self.channel)

    async def stop(self) -> None:
        await self.channel.close()
        await self.owners.close()
        await asyncio.gather(*(s.stop(None) for s in self.servers))


def run(test: Callable[[Cluster, pb_grpc.TopicAdminStub], Awaitable[None]]) -> None:
    async def main() -> None:
        cluster = Cluster()
        admin = await cluster.start()
        try:
            await test(cluster, admin)
        finally:
            await cluster.stop()

    asyncio.run(main())


def holders(cluster: Cluster, name: str, partitions: int) -> list[FakeSlot]:
    return [cluster.slots[s] for s in slots_of_partitions(name, partitions, 8, SPREAD)]


@pytest.fixture
def reason() -> Iterator[Callable[[grpc.aio.AioRpcError], str]]:
    def of(err: grpc.aio.AioRpcError) -> str:
        info = error_info(err)
        return info.reason if info else ""

    yield of


def test_create_describe_compact_delete_fan_out_with_the_mark() -> None:
    async def test(cluster: Cluster, admin: pb_grpc.TopicAdminStub) -> None:
        created = await admin.CreateTopic(pb.CreateTopicRequest(name="t", partitions=4))
        slots = holders(cluster, "t", 4)
        assert created.partitions == 4 and created.stats.entries == 4
        assert created.config["slot"] == str(slots[0].slot)  # NAME's own slot's config
        assert all(s.records == {"t": 4} and s.marked == [("CreateTopic", True)] for s in slots)
        assert cluster.index.get("t") is not None

        assert await admin.GetTopic(pb.GetTopicRequest(name="t")) == created
        before = await admin.GetCompactionStatus(pb.GetCompactionStatusRequest(topic="t"))
        assert before.state == pb.CompactionStatus.NOT_RUN and len(before.partitions) == 4
        done = await admin.Compact(pb.CompactRequest(topic="t", wait=True))
        assert done.state == pb.CompactionStatus.SUCCESS and done.last_run.read == 4
        assert all(all(marked for _, marked in s.marked) for s in slots)

        await admin.DeleteTopic(pb.DeleteTopicRequest(name="t"))
        assert all(not s.records for s in cluster.slots) and cluster.index.get("t") is None

    run(test)


def test_a_create_refused_half_way_is_undone_everywhere(
    reason: Callable[[grpc.aio.AioRpcError], str],
) -> None:
    async def test(cluster: Cluster, admin: pb_grpc.TopicAdminStub) -> None:
        slots = holders(cluster, "t", 4)
        slots[2].taken.add("t-partition-2")  # an ordinary topic in the way, not at home
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admin.CreateTopic(pb.CreateTopicRequest(name="t", partitions=4))
        assert refused.value.code() == grpc.StatusCode.ALREADY_EXISTS
        assert reason(refused.value) == "TOPIC_EXISTS"
        assert all(not s.records for s in cluster.slots) and cluster.index.get("t") is None

    run(test)


def test_other_topics_and_one_partition_calls_are_routed_as_before(
    reason: Callable[[grpc.aio.AioRpcError], str],
) -> None:
    async def test(cluster: Cluster, admin: pb_grpc.TopicAdminStub) -> None:
        await admin.CreateTopic(pb.CreateTopicRequest(name="t", partitions=2))
        with pytest.raises(grpc.aio.AioRpcError) as missing:  # one slot, unmarked
            await admin.GetTopic(pb.GetTopicRequest(name="other"))
        assert reason(missing.value) == "TOPIC_NOT_FOUND"
        assert sum(("GetTopic", False) in s.marked for s in cluster.slots) == 1
        for call, request in (
            (admin.PreviewCompaction, pb.PreviewCompactionRequest(topic="t")),
            (admin.VerifyCompaction, pb.VerifyCompactionRequest(topic="t")),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call(request)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "applies to one partition" in (refused.value.details() or "")
        home = holders(cluster, "t", 2)[0]  # NAME's own slot answered them, marked
        assert home.marked[-2:] == [("PreviewCompaction", True), ("VerifyCompaction", True)]
        watch = admin.WatchCompaction(pb.WatchCompactionRequest(topic="t"))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await watch.read()
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        mapped = await admin.GetPartitionMap(pb.GetPartitionMapRequest(topic="t"))
        assert [p.address for p in mapped.partitions] == [
            cluster.owners.addresses[s.slot] for s in holders(cluster, "t", 2)
        ]

    run(test)


def test_reads_skip_a_slot_without_the_record_but_not_every_slot(
    reason: Callable[[grpc.aio.AioRpcError], str],
) -> None:
    async def test(cluster: Cluster, admin: pb_grpc.TopicAdminStub) -> None:
        await admin.CreateTopic(pb.CreateTopicRequest(name="t", partitions=3))
        slots = holders(cluster, "t", 3)
        del slots[1].records["t"]  # as a crash in the middle of a delete leaves it
        described = await admin.GetTopic(pb.GetTopicRequest(name="t"))
        assert described.partitions == 3 and described.stats.entries == 2
        for slot in slots:
            slot.records.clear()
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await admin.GetTopic(pb.GetTopicRequest(name="t"))
        assert reason(missing.value) == "TOPIC_NOT_FOUND"

    run(test)


def test_add_partitions_creates_the_topic_in_slots_new_to_it() -> None:
    async def test(cluster: Cluster, admin: pb_grpc.TopicAdminStub) -> None:
        await admin.CreateTopic(pb.CreateTopicRequest(name="t", partitions=2))
        grown = await admin.AddPartitions(pb.AddPartitionsRequest(name="t", partitions=4))
        assert grown.partitions == 4 and grown.stats.entries == 4
        old, new = holders(cluster, "t", 4)[:2], holders(cluster, "t", 4)[2:]
        assert all(s.records == {"t": 4} for s in old + new)
        assert all(s.marked[-1] == ("AddPartitions", True) for s in old)
        for slot in new:  # its new partitions' names checked free (one ListTopics of the
            # names starting with t), then asked to grow: no record, so created with the count
            assert slot.marked == [
                ("ListTopics", True),
                ("AddPartitions", True),
                ("CreateTopic", True),
            ]
        assert (
            len((await admin.GetPartitionMap(pb.GetPartitionMapRequest(topic="t"))).partitions) == 4
        )
        with pytest.raises(grpc.aio.AioRpcError) as shrink:
            await admin.AddPartitions(pb.AddPartitionsRequest(name="t", partitions=3))
        assert shrink.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert all(s.records == {"t": 4} for s in old + new)

    run(test)


def test_a_slot_away_in_a_grows_name_check_answers_its_status() -> None:
    """A new partition's slot away while the names are checked: its UNAVAILABLE, nothing
    grown (never UNKNOWN)."""

    async def test(cluster: Cluster, admin: pb_grpc.TopicAdminStub) -> None:
        await admin.CreateTopic(pb.CreateTopicRequest(name="t", partitions=2))
        for slot in holders(cluster, "t", 4)[2:]:
            slot.away = True
        with pytest.raises(grpc.aio.AioRpcError) as away:
            await admin.AddPartitions(pb.AddPartitionsRequest(name="t", partitions=4))
        assert away.value.code() == grpc.StatusCode.UNAVAILABLE
        assert all(s.records == {"t": 2} for s in holders(cluster, "t", 2))

    run(test)
