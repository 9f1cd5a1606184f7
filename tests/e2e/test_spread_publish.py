"""A publish to a partitioned topic whose partitions span several slots, through the front.

Under partition placement the front splits a publish to ``NAME`` and sends each part to
``NAME-partition-i`` at its slot (``server/front/spread/publish.py``). The checks run
twice: against a front in this process whose eight slots all point at one real
single-store server (so what the front does is seen without the shards' admission: a
part sent to the wrong place, or a part stored before a bad record was found, shows in
that store), and against a real ``serve --shards 2`` with ``shards.placement =
"partition"``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from compactlog.partitioner import partition_for_key
from compactlog.server.front.partitions import PartitionedIndex
from compactlog.server.front.router import FrontHandler, Owners
from compactlog.storage.partitioned_topics import PartitionedTopic
from compactlog.storage.slots import SLOT_COUNT, Placement, shard_of, slot_of
from compactlog.storage.types import TopicKind
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess, Stubs

PARTITIONS = 4


class InProcessFront:
    """A front (``FrontHandler`` with a partition-placement index) served from a thread
    of this process, every slot of it at ``slot_address``."""

    def __init__(self, slot_address: str, index: PartitionedIndex) -> None:
        self.index = index
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: grpc.aio.Server | None = None
        port = asyncio.run_coroutine_threadsafe(self._start(slot_address), self.loop).result(30)
        self.address = f"127.0.0.1:{port}"

    async def _start(self, slot_address: str) -> int:
        self.owners = Owners(SLOT_COUNT, None, Placement.PARTITION, secret="test-secret")
        self.owners.update(dict.fromkeys(range(SLOT_COUNT), slot_address))
        self.server = grpc.aio.server()
        self.server.add_generic_rpc_handlers((FrontHandler(self.owners, self.index),))
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return port

    async def _stop(self) -> None:
        assert self.server is not None
        await self.server.stop(None)
        await self.owners.close()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def in_process(server: ServerProcess) -> Iterator[tuple[Stubs, Callable[..., None]]]:
    """Stubs on an in-process front over ``server``, and create(name, kind) making a
    partitioned topic there (in the one store, and in the front's index)."""
    index = PartitionedIndex(SLOT_COUNT, Placement.PARTITION)
    front = InProcessFront(server.address, index)
    store = Stubs(server.address)
    api = Stubs(front.address)

    def create(name: str, kind: Any = pb.LEDGER) -> None:
        request = pb.CreateTopicRequest(name=name, kind=kind, partitions=PARTITIONS)
        store.admin.CreateTopic(request, timeout=30)
        index.put(PartitionedTopic(name, PARTITIONS, TopicKind(int(kind))))

    yield api, create
    api.close()
    store.close()
    front.stop()


def reason_of(call: Callable[[], object]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    status = rpc_status.from_call(info.value)  # type: ignore[arg-type]
    assert status is not None
    detail = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(detail)
    return info.value.code(), detail.reason  # type: ignore[attr-defined]


def keyed(keys: range, value: bytes = b"v") -> list[pb.Record]:
    return [pb.Record(key=b"k-%d" % k, value=value) for k in keys]


def partition_contents(api: Stubs, name: str) -> dict[int, list[tuple[bytes, int]]]:
    """Every partition's messages (key, id's partition), each read as a topic alone."""
    out = {}
    for p in range(PARTITIONS):
        request = pb.ReadRequest(topic=f"{name}-partition-{p}", position=pb.EARLIEST)
        out[p] = [
            (m.key, m.id.partition)
            for response in api.log.Read(request, timeout=30)
            for m in response.messages
        ]
    return out


def check_keyed_publish_lands_by_murmur2(api: Stubs, name: str) -> None:
    records = keyed(range(40))
    reply = api.log.Publish(pb.PublishRequest(topic=name, records=records), timeout=30)
    routed = [partition_for_key(r.key, PARTITIONS) for r in records]
    assert len(set(routed)) == PARTITIONS  # the batch spans every partition
    assert [i.partition for i in reply.ids] == routed
    contents = partition_contents(api, name)
    for p, messages in contents.items():
        assert messages == [(r.key, p) for r, q in zip(records, routed, strict=True) if q == p]
    # The reply's ids are those the partitions hold, in request order.
    again = api.log.Publish(pb.PublishRequest(topic=name, records=records[:1]), timeout=30)
    first = [i for i in reply.ids if i.partition == routed[0]]
    assert (again.ids[0].ledger_id, again.ids[0].entry_id) == (
        first[-1].ledger_id,
        first[-1].entry_id + 1,
    )


def check_too_large_stores_nothing(api: Stubs, name: str) -> None:
    api.log.Publish(pb.PublishRequest(topic=name, records=keyed(range(8))), timeout=30)
    before = partition_contents(api, name)  # the front has cached the limits now
    for p in range(PARTITIONS):  # one partition at a time: the front forgets its cache
        update = pb.UpdateTopicConfigRequest(
            name=f"{name}-partition-{p}", set={"max.message.bytes": "1000"}
        )
        api.admin.UpdateTopicConfig(update, timeout=30)
    records = keyed(range(20), b"x" * 100)
    records[13] = pb.Record(key=records[13].key, value=b"x" * 2000)
    code, reason = reason_of(
        lambda: api.log.Publish(pb.PublishRequest(topic=name, records=records), timeout=30)
    )
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "RECORD_TOO_LARGE")
    assert partition_contents(api, name) == before  # nothing, in any partition
    records[13] = pb.Record(key=records[13].key, value=b"x" * 900)
    api.log.Publish(pb.PublishRequest(topic=name, records=records), timeout=30)
    assert sum(map(len, partition_contents(api, name).values())) == 8 + 20


def check_stream_mixes_spread_and_plain(api: Stubs, name: str, plain: str) -> None:
    api.admin.CreateTopic(pb.CreateTopicRequest(name=plain), timeout=30)
    requests = []
    for i in range(6):
        topic = name if i % 2 == 0 else plain
        requests.append(pb.PublishRequest(topic=topic, records=keyed(range(i * 10, i * 10 + 5))))
    answers = list(api.log.PublishStream(iter(requests), timeout=30))
    assert len(answers) == len(requests)
    for request, answer in zip(requests, answers, strict=True):
        if request.topic == plain:
            assert [i.partition for i in answer.ids] == [0] * 5
        else:
            routed = [partition_for_key(r.key, PARTITIONS) for r in request.records]
            assert [i.partition for i in answer.ids] == routed
    plain_entries = [i.entry_id for a in answers[1::2] for i in a.ids]
    assert plain_entries == list(range(15))
    # A request the front refuses ends the stream after the replies before it.
    big = pb.PublishRequest(topic=name, records=[pb.Record(key=b"b", value=b"x" * 2_000_000)])
    tail = pb.PublishRequest(topic=plain, records=keyed(range(1)))
    got: list[pb.PublishResponse] = []
    code, reason = reason_of(lambda: got.extend(api.log.PublishStream(iter([tail, big, tail]))))
    assert (code, reason) == (grpc.StatusCode.INVALID_ARGUMENT, "RECORD_TOO_LARGE")
    assert [a.ids[0].entry_id for a in got] == [15]


def test_in_process_keyed_publish_lands_by_murmur2(
    in_process: tuple[Stubs, Callable[..., None]],
) -> None:
    api, create = in_process
    create("prices")
    create("segs", pb.SEGMENTED)
    check_keyed_publish_lands_by_murmur2(api, "prices")
    check_keyed_publish_lands_by_murmur2(api, "segs")


def test_in_process_keyless_records_take_turns(
    in_process: tuple[Stubs, Callable[..., None]],
) -> None:
    api, create = in_process
    create("rr")
    for _ in range(3):
        records = [pb.Record(value=b"x")] * 3
        api.log.Publish(pb.PublishRequest(topic="rr", records=records), timeout=30)
    assert [len(m) for m in partition_contents(api, "rr").values()] == [3, 2, 2, 2]


def test_in_process_a_record_too_large_stores_nothing(
    in_process: tuple[Stubs, Callable[..., None]],
) -> None:
    api, create = in_process
    create("big")
    check_too_large_stores_nothing(api, "big")


def test_in_process_stream_mixes_spread_and_plain(
    in_process: tuple[Stubs, Callable[..., None]],
) -> None:
    api, create = in_process
    create("mixed")
    check_stream_mixes_spread_and_plain(api, "mixed", "plain")


# ---- a real sharded server with partition placement -------------------------------------

SPREAD_CONFIG = '"shards.placement" = "partition"\n'


@pytest.fixture
def spread(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    """``serve --shards 2`` with partition placement."""
    srv: ServerProcess = server_factory(config=SPREAD_CONFIG, extra_args=["--shards", "2"])
    return srv


def create_spread(srv: ServerProcess, names: dict[str, Any]) -> Stubs:
    """Partitioned topics (name -> kind) of PARTITIONS partitions, created through the
    front; stubs on it. Each topic's partitions are owned by both shards."""
    api = Stubs(srv.address)
    for name, kind in names.items():
        request = pb.CreateTopicRequest(name=name, kind=kind, partitions=PARTITIONS)
        api.admin.CreateTopic(request, timeout=30)
        entries = api.admin.GetPartitionMap(
            pb.GetPartitionMapRequest(topic=name), timeout=30
        ).partitions
        assert [e.partition for e in entries] == list(range(PARTITIONS))
        slots = {slot_of(e.topic, SLOT_COUNT, Placement.PARTITION) for e in entries}
        assert {shard_of(slot, 2) for slot in slots} == {0, 1}  # spread over both shards
    return api


def test_sharded_keyed_publish_lands_by_murmur2(spread: ServerProcess) -> None:
    api = create_spread(spread, {"prices": pb.LEDGER, "segs": pb.SEGMENTED})
    check_keyed_publish_lands_by_murmur2(api, "prices")
    check_keyed_publish_lands_by_murmur2(api, "segs")
    # Read of NAME through the front (its fan-out) sees every record published, once.
    read = api.log.Read(pb.ReadRequest(topic="prices", position=pb.EARLIEST), timeout=30)
    keys = sorted(m.key for response in read for m in response.messages)
    assert keys == sorted([r.key for r in keyed(range(40))] + [b"k-0"])
    api.close()


def test_sharded_a_record_too_large_stores_nothing(spread: ServerProcess) -> None:
    api = create_spread(spread, {"big": pb.LEDGER})
    check_too_large_stores_nothing(api, "big")
    api.close()


def test_sharded_stream_mixes_spread_and_plain(spread: ServerProcess) -> None:
    api = create_spread(spread, {"mixed": pb.LEDGER})
    check_stream_mixes_spread_and_plain(api, "mixed", "plain")
    api.close()


def test_sharded_publish_follows_added_partitions(spread: ServerProcess) -> None:
    api = create_spread(spread, {"grow": pb.LEDGER})
    grown = pb.AddPartitionsRequest(name="grow", partitions=6)
    api.admin.AddPartitions(grown, timeout=30)
    records = keyed(range(60))
    reply = api.log.Publish(pb.PublishRequest(topic="grow", records=records), timeout=30)
    assert [i.partition for i in reply.ids] == [partition_for_key(r.key, 6) for r in records]
    assert {i.partition for i in reply.ids} == set(range(6))
    api.close()
