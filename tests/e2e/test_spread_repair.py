"""The front finishes an admin change of a spread partitioned topic that a crash cut
half-way (``server/front/spread/repair.py``), on a real ``serve --shards 2`` with partition
placement. Each half-way state is made for real: the front exits 137 right after
``NAME``'s own slot made its part (``COMPACTLOG_FRONT_CRASH_AT``), its shards follow it,
and the server starts again without the crash point. Then every partition exists in
every slot of the new count, a publish and a Read of ``NAME`` cover all partitions,
every partition has the config the call asked for, and what was published before is
still there."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest

from compactlog.partitioner import partition_for_key, partition_name
from compactlog.server.front.spanning import CRASH_ENV
from compactlog.storage.slots import SLOT_COUNT, Placement, slots_of_partitions
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.e2e.shards import Api, alive, shard_pids, wait_for
from tests.e2e.test_spread_admin import NAME, records_on_disk

pytestmark = pytest.mark.slow

PLACEMENT = '"shards.placement" = "partition"\n'
KEYS = [b"key-%d" % n for n in range(48)]


def spread_server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory(config=PLACEMENT, extra_args=["--shards", "2"], start=False)


def crash_during(srv: ServerProcess, point: str, call: Callable[[Api], object]) -> None:
    """Restart ``srv`` with the crash point set, make ``call``: the front exits 137 at
    ``point`` and its shards with it."""
    srv.restart({CRASH_ENV: point})
    api = Api(srv.address)
    pids = shard_pids(srv)
    with pytest.raises(grpc.RpcError) as cut:
        call(api)
    assert cut.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    api.close()
    assert srv.wait(30) == 137
    assert any(f"crash injected at {point}" in line for line in srv.stderr_lines)
    wait_for(lambda: not any(alive(p) for p in pids), timeout=15)


def restarted(srv: ServerProcess) -> Api:
    srv.start()
    return Api(srv.address)


def every_slot_holds(srv: ServerProcess, partitions: int) -> bool:
    """Every slot of ``partitions`` partitions keeps NAME's record with that count."""
    slots = slots_of_partitions(NAME, partitions, SLOT_COUNT, Placement.PARTITION)
    return records_on_disk(srv.data_dir) == dict.fromkeys(slots, partitions)


def publish(api: Api, tag: bytes) -> None:
    records = [pb.Record(key=key, value=tag + key) for key in KEYS]
    api.log.Publish(pb.PublishRequest(topic=NAME, records=records), timeout=30)


def read_back(api: Api) -> dict[int, list[bytes]]:
    """partition -> the values a Read of NAME gives, in order."""
    out: dict[int, list[bytes]] = {}
    for response in api.log.Read(pb.ReadRequest(topic=NAME), timeout=30):
        for message in response.messages:
            out.setdefault(message.id.partition, []).append(message.value)
    return out


def expected(*published: tuple[bytes, int]) -> dict[int, list[bytes]]:
    """What ``publish`` of each ``(tag, partition count then)`` in turn left."""
    out: dict[int, list[bytes]] = {}
    for tag, count in published:
        for key in KEYS:
            out.setdefault(partition_for_key(key, count), []).append(tag + key)
    return out


def info(api: Api, topic: str) -> pb.TopicInfo:
    answer: pb.TopicInfo = api.admin.GetTopic(pb.GetTopicRequest(name=topic), timeout=30)
    return answer


def configs(api: Api, partitions: int) -> list[dict[str, str]]:
    """Each partition's own config, asked of its slot."""
    return [dict(info(api, partition_name(NAME, i)).config) for i in range(partitions)]


def created_with_data(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    """A spread server holding NAME (4 partitions) with one publish "before" in it."""
    srv = spread_server(server_factory)
    srv.start()
    api = Api(srv.address)
    api.admin.CreateTopic(pb.CreateTopicRequest(name=NAME, partitions=4), timeout=30)
    publish(api, b"before")
    api.close()
    return srv


def test_add_partitions_cut_after_the_home_slot_is_finished_at_start(
    server_factory: Callable[..., ServerProcess],
) -> None:
    srv = created_with_data(server_factory)
    grow = pb.AddPartitionsRequest(name=NAME, partitions=6)
    crash_during(srv, "after_home_add_partitions", lambda a: a.admin.AddPartitions(grow))
    assert not every_slot_holds(srv, 6)  # half-way: only the home slot grew

    api = restarted(srv)
    wait_for(lambda: every_slot_holds(srv, 6), timeout=20)
    assert info(api, NAME).partitions == 6
    for i in range(6):  # every partition exists, in its own slot
        info(api, partition_name(NAME, i))
    publish(api, b"after")
    assert read_back(api) == expected((b"before", 4), (b"after", 6))
    assert len({c["retention.ms"] for c in configs(api, 6)}) == 1
    assert srv.logged("repaired spread topic")
    api.close()


def test_a_create_cut_after_the_home_slot_is_rolled_forward(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """The create was never answered; the home slot made its part, the others none.
    The name is taken (the home says so) so the restarted front finishes the create."""
    srv = spread_server(server_factory)
    create = pb.CreateTopicRequest(name=NAME, partitions=4, config={"retention.bytes": "777"})
    crash_during(srv, "after_home_create", lambda a: a.admin.CreateTopic(create))
    assert len(records_on_disk(srv.data_dir)) == 1

    api = restarted(srv)
    wait_for(lambda: every_slot_holds(srv, 4), timeout=20)
    publish(api, b"after")
    assert read_back(api) == expected((b"after", 4))
    assert [c["retention.bytes"] for c in configs(api, 4)] == ["777"] * 4
    again = pb.CreateTopicRequest(name=NAME, partitions=4)
    with pytest.raises(grpc.RpcError) as taken:
        api.admin.CreateTopic(again, timeout=30)
    assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS  # type: ignore[attr-defined]
    api.close()


def test_a_config_change_cut_after_the_home_slot_reaches_every_partition(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """The home's partitions took the change (a key set, a key removed); the restarted
    front gives every other partition the home's values of the keys that differ."""
    srv = spread_server(server_factory)
    srv.start()
    api = Api(srv.address)
    api.admin.CreateTopic(pb.CreateTopicRequest(name=NAME, partitions=4), timeout=30)
    first = pb.UpdateTopicConfigRequest(name=NAME, set={"retention.bytes": "5000"})
    api.admin.UpdateTopicConfig(first, timeout=30)
    default_ms = configs(api, 1)[0]["retention.ms"]
    publish(api, b"before")
    api.close()
    change = pb.UpdateTopicConfigRequest(
        name=NAME, set={"retention.ms": "123456"}, remove=["retention.bytes"]
    )
    crash_during(srv, "after_home_config", lambda a: a.admin.UpdateTopicConfig(change))

    api = restarted(srv)
    want = {"retention.ms": "123456", "retention.bytes": "-1"}

    def changed() -> bool:
        return all({k: c[k] for k in want} == want for c in configs(api, 4))

    wait_for(changed, timeout=20)
    assert default_ms != "123456"
    assert len({tuple(sorted(c.items())) for c in configs(api, 4)}) == 1  # all alike
    assert info(api, NAME).config["retention.ms"] == "123456"
    assert read_back(api) == expected((b"before", 4))
    api.close()


def test_a_delete_cut_after_the_home_slot_is_finished(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """DeleteTopic removes the home slot's part first: without it the name is gone as
    far as the front is concerned, so the restarted front deletes the others' parts."""
    srv = created_with_data(server_factory)
    delete = pb.DeleteTopicRequest(name=NAME)
    crash_during(srv, "after_home_delete", lambda a: a.admin.DeleteTopic(delete))
    assert len(records_on_disk(srv.data_dir)) == 3

    api = restarted(srv)
    wait_for(lambda: records_on_disk(srv.data_dir) == {}, timeout=20)
    with pytest.raises(grpc.RpcError) as gone:
        info(api, NAME)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND  # type: ignore[attr-defined]
    listed = api.admin.ListTopics(pb.ListTopicsRequest(), timeout=30).topics
    assert not [t.name for t in listed if t.name.startswith(NAME)]
    api.admin.CreateTopic(pb.CreateTopicRequest(name=NAME, partitions=2), timeout=30)
    assert read_back(api) == {}  # a new topic of that name, empty
    api.close()
