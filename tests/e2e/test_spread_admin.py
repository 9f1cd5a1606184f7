"""TopicAdmin on a partitioned topic spread over the shards (partition placement), end to
end: a real ``serve --shards 2`` whose data dir places partition ``i`` of ``NAME`` in slot
``(crc32(NAME) + i) % 8``; the front asks every slot holding a partition and merges
(``server/front/spread/admin.py``). Test data goes to ``NAME-partition-i`` directly (each
routed to its own slot by the front)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from compactlog.storage.slots import SLOT_COUNT, slot_dir
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc
from tests.conftest import ServerProcess

SPREAD_CONFIG = '"shards.placement" = "partition"\n'
NAME = "prices"


class Api:
    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def publish(self, topic: str, *keys: str) -> None:
        records = [pb.Record(key=k.encode(), value=f"{k}@{i}".encode()) for i, k in enumerate(keys)]
        self.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)

    def topic(self, name: str) -> pb.TopicInfo:
        info: pb.TopicInfo = self.admin.GetTopic(pb.GetTopicRequest(name=name), timeout=30)
        return info

    def names(self) -> list[str]:
        listed = self.admin.ListTopics(pb.ListTopicsRequest(), timeout=30)
        return [t.name for t in listed.topics]

    def partition_map(self, name: str) -> list[tuple[int, str, str]]:
        answer = self.admin.GetPartitionMap(pb.GetPartitionMapRequest(topic=name), timeout=30)
        return [(p.partition, p.topic, p.address) for p in answer.partitions]


@pytest.fixture
def spread(server_factory: Callable[..., ServerProcess]) -> Iterator[tuple[ServerProcess, Api]]:
    srv = server_factory(config=SPREAD_CONFIG, extra_args=["--shards", "2"])
    api = Api(srv.address)
    yield srv, api
    api.channel.close()


def failure(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def records_on_disk(data_dir: Path) -> dict[int, int]:
    """slot -> NAME's partition count in that slot's partitioned-topics.json."""
    found = {}
    for slot in range(SLOT_COUNT):
        path = slot_dir(data_dir, slot) / "partitioned-topics.json"
        if path.exists():
            body = path.read_text().rsplit("#crc32c:", 1)[0]
            topic = json.loads(body)["topics"].get(NAME)
            if topic is not None:
                found[slot] = topic["partitions"]
    return found


def test_admin_on_a_spread_topic_sums_maps_configures_grows_and_deletes(
    spread: tuple[ServerProcess, Api],
) -> None:
    srv, api = spread
    created = api.admin.CreateTopic(pb.CreateTopicRequest(name=NAME, partitions=4), timeout=30)
    assert created.partitions == 4
    assert records_on_disk(srv.data_dir) == dict.fromkeys(records_on_disk(srv.data_dir), 4)
    assert len(records_on_disk(srv.data_dir)) == 4  # one record per slot holding a partition
    for i in range(4):
        api.publish(f"{NAME}-partition-{i}", *["k"] * (i + 1))

    info = api.topic(NAME)
    assert info.partitions == 4 and info.stats.entries == 1 + 2 + 3 + 4
    parts = [api.topic(f"{NAME}-partition-{i}") for i in range(4)]
    assert info.stats.bytes == sum(p.stats.bytes for p in parts)
    listed = api.admin.ListTopics(pb.ListTopicsRequest(), timeout=30)
    assert [t for t in listed.topics if t.name == NAME] == [info]  # one entry, the same merge

    mapped = api.partition_map(NAME)
    assert [(i, t) for i, t, _ in mapped] == [(i, f"{NAME}-partition-{i}") for i in range(4)]
    assert len({address for _, _, address in mapped}) >= 2  # spread over both shards
    direct = Api(mapped[3][2])  # the owner answers for its partition, as the map says
    try:
        assert direct.topic(f"{NAME}-partition-3").stats.entries == 4
    finally:
        direct.channel.close()

    request = pb.UpdateTopicConfigRequest(name=NAME, set={"retention.bytes": "123456789"})
    updated = api.admin.UpdateTopicConfig(request, timeout=30)
    assert updated.config["retention.bytes"] == "123456789" and updated.partitions == 4
    for i in range(4):
        assert api.topic(f"{NAME}-partition-{i}").config["retention.bytes"] == "123456789"

    grown = api.admin.AddPartitions(pb.AddPartitionsRequest(name=NAME, partitions=6), timeout=30)
    assert grown.partitions == 6 and grown.stats.entries == 10
    assert api.topic(f"{NAME}-partition-5").config["retention.bytes"] == "123456789"
    assert len(api.partition_map(NAME)) == 6
    shrink = failure(
        lambda: api.admin.AddPartitions(pb.AddPartitionsRequest(name=NAME, partitions=3))
    )
    assert shrink.code() == grpc.StatusCode.INVALID_ARGUMENT
    again = failure(lambda: api.admin.CreateTopic(pb.CreateTopicRequest(name=NAME, partitions=2)))
    assert again.code() == grpc.StatusCode.ALREADY_EXISTS

    api.admin.DeleteTopic(pb.DeleteTopicRequest(name=NAME), timeout=30)
    assert failure(lambda: api.topic(NAME)).code() == grpc.StatusCode.NOT_FOUND
    assert not [n for n in api.names() if n.startswith(NAME)]
    assert records_on_disk(srv.data_dir) == {}


def test_compaction_of_a_spread_topic_aggregates_every_partition(
    spread: tuple[ServerProcess, Api],
) -> None:
    _, api = spread
    api.admin.CreateTopic(pb.CreateTopicRequest(name=NAME, partitions=4), timeout=30)
    for i in range(4):
        api.publish(f"{NAME}-partition-{i}", "a", "b", "a", "b", "a")

    status = pb.GetCompactionStatusRequest(topic=NAME)
    before = api.admin.GetCompactionStatus(status, timeout=30)
    assert before.state == pb.CompactionStatus.NOT_RUN and len(before.partitions) == 4

    done = api.admin.Compact(pb.CompactRequest(topic=NAME, wait=True), timeout=60)
    assert done.state == pb.CompactionStatus.SUCCESS
    assert len(done.partitions) == 4
    assert done.last_run.read == 4 * 5 and done.last_run.kept == 4 * 2
    after = api.admin.GetCompactionStatus(status, timeout=30)
    assert after.state == pb.CompactionStatus.SUCCESS
    assert [p.last_run.read for p in after.partitions] == [5] * 4
    for i in range(4):  # the same as each partition's own status, in partition order
        one = pb.GetCompactionStatusRequest(topic=f"{NAME}-partition-{i}")
        assert api.admin.GetCompactionStatus(one, timeout=30).state == after.partitions[i].state

    for call, request in (  # NAME's own slot answers, as a single store does
        (api.admin.PreviewCompaction, pb.PreviewCompactionRequest(topic=NAME)),
        (api.admin.DeleteRecords, pb.DeleteRecordsRequest(topic=NAME)),
    ):
        refused = failure(lambda: call(request, timeout=30))  # noqa: B023
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    listing = pb.ListSubscriptionsRequest(topic=NAME)  # every slot's, merged
    listed = api.admin.ListSubscriptions(listing, timeout=30).subscriptions
    assert [(s.name, s.backlog) for s in listed] == [("__compaction", 0)]  # the compactor's
    watch = api.admin.WatchCompaction(pb.WatchCompactionRequest(topic=NAME), timeout=30)
    assert failure(lambda: list(watch)).code() == grpc.StatusCode.INVALID_ARGUMENT
    cancel = failure(
        lambda: api.admin.CancelCompaction(pb.CancelCompactionRequest(topic=NAME), timeout=30)
    )
    assert cancel.code() == grpc.StatusCode.FAILED_PRECONDITION  # none running anywhere


def test_a_create_one_shard_refuses_is_undone_and_the_index_survives_a_restart(
    spread: tuple[ServerProcess, Api],
) -> None:
    srv, api = spread
    blocker = f"{NAME}-partition-2"  # an ordinary topic, in the slot of partition 2
    api.admin.CreateTopic(pb.CreateTopicRequest(name=blocker), timeout=30)
    refused = failure(
        lambda: api.admin.CreateTopic(pb.CreateTopicRequest(name=NAME, partitions=4), timeout=30)
    )
    assert refused.code() == grpc.StatusCode.ALREADY_EXISTS and blocker in (refused.details() or "")
    assert records_on_disk(srv.data_dir) == {}
    assert [n for n in api.names() if n.startswith(NAME)] == [blocker]
    assert failure(lambda: api.topic(NAME)).code() == grpc.StatusCode.NOT_FOUND

    api.admin.DeleteTopic(pb.DeleteTopicRequest(name=blocker), timeout=30)
    api.admin.CreateTopic(pb.CreateTopicRequest(name=NAME, partitions=3), timeout=30)
    for i in range(3):
        api.publish(f"{NAME}-partition-{i}", "k", "l")
    api.channel.close()
    srv.restart()  # the front reads its index back from the slots' records
    again = Api(srv.address)
    try:
        info = again.topic(NAME)
        assert (info.partitions, info.stats.entries) == (3, 6)
        assert len({a for _, _, a in again.partition_map(NAME)}) >= 2
    finally:
        again.channel.close()
