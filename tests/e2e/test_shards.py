"""``serve --shards N`` end to end: real front and shard processes on loopback.

Routing through the front, the partition map, a client that goes straight to the owner
and follows a move, restarts with another shard count (every message kept, both topic
kinds), and process deaths (a shard killed: reported and restarted; the server killed:
its shards exit).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from grpc_status import rpc_status

from compactlog.client import Client
from compactlog.storage.slots import SLOT_COUNT, slot_dir, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess
from tests.e2e.shards import (
    LEDGER,
    SEGMENTED,
    Api,
    alive,
    free_port,
    produce,
    shard_pids,
    sharded,
    wait_for,
)

TOPICS = [(f"led-{i}", LEDGER) for i in range(4)] + [(f"seg-{i}", SEGMENTED) for i in range(4)]


def test_calls_route_through_the_front_to_the_owner(
    server_factory: Callable[..., ServerProcess],
) -> None:
    srv = sharded(server_factory, 2)
    api = Api(srv.address)
    for name, kind in TOPICS:
        api.create(name, kind)
        api.publish(name, b"a1", b"b1", name.encode())
    # Each topic's data is in its own slot's store, nowhere else.
    for name, kind in TOPICS:
        if kind == SEGMENTED:
            homes = [
                s
                for s in range(SLOT_COUNT)
                if (slot_dir(srv.data_dir, s) / "segments" / name).exists()
            ]
            assert homes == [slot_of(name, SLOT_COUNT)]
    listed = api.admin.ListTopics(pb.ListTopicsRequest(), timeout=30).topics
    assert [t.name for t in listed] == sorted(name for name, _kind in TOPICS)
    assert all(t.stats.entries == 3 for t in listed)
    for name, _kind in TOPICS:
        assert api.values(name) == [b"a1", b"b1", name.encode()]
    status = api.admin.Compact(pb.CompactRequest(topic="led-0", wait=True), timeout=60)
    assert status.state == pb.CompactionStatus.SUCCESS
    # One PublishStream over topics of several owners: one answer per request, in order.
    requests = [
        pb.PublishRequest(topic=name, records=[pb.Record(key=b"s", value=b"%d" % i)])
        for i, (name, _kind) in enumerate(TOPICS * 3)
    ]
    answers = list(api.log.PublishStream(iter(requests), timeout=30))
    expected = [3 + i // len(TOPICS) for i in range(len(requests))]
    assert [a.ids[0].entry_id for a in answers] == expected
    # Errors come back with their ErrorInfo, from the owner, through the front.
    with pytest.raises(grpc.RpcError) as missing:
        api.log.Publish(pb.PublishRequest(topic="nope", records=[pb.Record()]), timeout=30)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    detail = rpc_status.from_call(missing.value)
    assert detail is not None and detail.details
    with pytest.raises(grpc.RpcError) as exists:
        api.create("led-1")
    assert exists.value.code() == grpc.StatusCode.ALREADY_EXISTS
    api.close()


def test_partition_map_names_the_owner_and_the_owner_guards_its_slots(
    server_factory: Callable[..., ServerProcess],
) -> None:
    srv = sharded(server_factory, 2)
    api = Api(srv.address)
    api.create("a")
    api.publish("a", b"x")
    (entry,) = api.admin.GetPartitionMap(
        pb.GetPartitionMapRequest(topic="a"), timeout=30
    ).partitions
    assert (entry.partition, entry.topic) == (-1, "a")
    assert entry.address.startswith("127.0.0.1:") and entry.address != srv.address
    direct = Api(entry.address)
    assert direct.values("a") == [b"x"]
    assert direct.publish("a", b"y") == [1]
    # The owner of "a" refuses a topic of another slot: the caller's map is stale.
    other = next(
        f"o{i}" for i in range(100) if slot_of(f"o{i}", SLOT_COUNT) != slot_of("a", SLOT_COUNT)
    )
    with pytest.raises(grpc.RpcError) as refused:
        direct.create(other)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    status = rpc_status.from_call(refused.value)
    assert status is not None and b"NOT_OWNER" in status.details[0].value
    with pytest.raises(grpc.RpcError) as missing:
        api.admin.GetPartitionMap(pb.GetPartitionMapRequest(topic="nope"), timeout=30)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    direct.close()
    api.close()


def test_partition_map_without_shards_is_the_address_asked(server: ServerProcess) -> None:
    api = Api(server.address)
    api.create("solo")
    (entry,) = api.admin.GetPartitionMap(
        pb.GetPartitionMapRequest(topic="solo"), timeout=30
    ).partitions
    assert (entry.partition, entry.topic, entry.address) == (-1, "solo", "")
    with Client(server.address) as client:
        produce(client, "solo", b"v")
        assert client._routes.addresses() == []  # everything on the one channel
    api.close()


def test_the_client_goes_direct_and_follows_a_moved_topic(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    port = free_port()
    listen = ["--listen", f"127.0.0.1:{port}"]
    data_dir = tmp_path / "moving"
    srv = server_factory(extra_args=["--shards", "2", *listen], data_dir=data_dir)
    with Client(srv.address) as client:
        client.create_topic("mover")
        produce(client, "mover", b"1")
        owner = client._routes.addresses()
        assert len(owner) == 1 and owner[0] != srv.address  # straight to the shard
        srv.stop()
        srv2 = server_factory(extra_args=["--shards", "1", *listen], data_dir=data_dir)
        assert srv2.address == srv.address
        produce(client, "mover", b"2")  # old owner gone: map asked again, retried once
        assert client._routes.addresses() != owner
        # A shard killed and restarted on a new port: followed the same way.
        (pid,) = shard_pids(srv2)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: any("restarted as pid" in line for line in srv2.stderr_lines))
        produce(client, "mover", b"3")
    api = Api(srv2.address)
    assert api.values("mover") == [b"1", b"2", b"3"]
    api.close()


def _fill(api: Api, round_: int) -> None:
    for name, _kind in TOPICS:
        api.publish(name, *(b"%s-r%d-%d" % (name.encode(), round_, i) for i in range(20)))


def _expected(rounds: int) -> dict[str, list[bytes]]:
    return {
        name: [b"%s-r%d-%d" % (name.encode(), r, i) for r in range(rounds) for i in range(20)]
        for name, _kind in TOPICS
    }


@pytest.mark.slow
def test_restarts_with_another_shard_count_keep_every_message(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "reshard"
    srv = server_factory(extra_args=["--shards", "2"], data_dir=data_dir)
    api = Api(srv.address)
    for name, kind in TOPICS:
        api.create(name, kind)
    _fill(api, 0)
    api.admin.Compact(pb.CompactRequest(topic="led-0", wait=True), timeout=60)
    api.close()
    for round_, shards in enumerate((1, 2, 4), start=1):
        pids = shard_pids(srv)
        assert srv.stop() == 0  # SIGTERM: front and shards stop cleanly
        assert not any(alive(p) for p in pids)
        srv = server_factory(extra_args=["--shards", str(shards)], data_dir=data_dir)
        assert len(shard_pids(srv)) == shards
        api = Api(srv.address)
        for name, values in _expected(round_).items():
            assert api.values(name) == values, (shards, name)
        _fill(api, round_)
        api.close()
    api = Api(srv.address)
    for name, values in _expected(4).items():
        assert api.values(name) == values
    compacted = api.values("led-0", compacted=True)
    assert sorted(compacted) == sorted(set(compacted))  # latest per key, no duplicates
    api.close()


def test_a_single_store_data_dir_is_refused_with_shards_naming_migrate(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "single"
    srv = server_factory(data_dir=data_dir)
    Api(srv.address).create("kept")
    srv.stop()
    refused = server_factory(extra_args=["--shards", "2"], data_dir=data_dir, start=False)
    with pytest.raises(RuntimeError):
        refused.start()
    lines = [line for line in refused.stderr_lines if "error" in line]
    assert len(lines) == 1 and "compactlog migrate --slots" in lines[0]
    assert refused.proc is not None and refused.proc.returncode != 0


def test_a_killed_shard_is_reported_and_restarted(
    server_factory: Callable[..., ServerProcess],
) -> None:
    srv = sharded(server_factory, 2)
    api = Api(srv.address)
    for name, kind in TOPICS:
        api.create(name, kind)
        api.publish(name, b"before")
    victim = shard_pids(srv)[0]
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: any("restarted as pid" in line for line in srv.stderr_lines))
    assert srv.logged(f"(pid {victim}) died, killed by SIGKILL")
    assert victim not in shard_pids(srv) and len(shard_pids(srv)) == 2
    for name, _kind in TOPICS:
        api.publish(name, b"after")
        assert api.values(name) == [b"before", b"after"]
    api.close()


def test_a_killed_server_takes_its_shards_along(
    server_factory: Callable[..., ServerProcess],
) -> None:
    srv = sharded(server_factory, 2)
    Api(srv.address).create("survivor")
    pids = shard_pids(srv)
    assert len(pids) == 2
    srv.kill()
    wait_for(lambda: not any(alive(p) for p in pids), timeout=10)
    again = server_factory(extra_args=["--shards", "2"], data_dir=srv.data_dir)  # locks free
    assert [t.name for t in Api(again.address).admin.ListTopics(pb.ListTopicsRequest()).topics] == [
        "survivor"
    ]


def _migrate(data_dir: Path) -> str:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "compactlog", "migrate", "--slots", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_migrate_slots_spreads_a_single_store_data_dir(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "grown"
    srv = server_factory(data_dir=data_dir)
    api = Api(srv.address)
    for name, kind in TOPICS:
        api.create(name, kind)
    _fill(api, 0)
    api.admin.CreateTopic(pb.CreateTopicRequest(name="parted", partitions=3), timeout=30)
    api.publish("parted", *(b"%c" % k for k in b"abcdefg"))
    api.admin.Compact(pb.CompactRequest(topic="led-1", wait=True), timeout=60)
    compacted = api.values("led-1", compacted=True)
    consume = pb.ConsumeRequest(topic="led-2", subscription="s", max_messages=5)
    first = api.log.Consume(consume, timeout=30).messages
    api.log.Acknowledge(
        pb.AcknowledgeRequest(topic="led-2", subscription="s", id=first[-1].id, cumulative=True),
        timeout=30,
    )
    api.close()
    srv.stop()
    said = _migrate(data_dir)
    assert "7 LEDGER topics" in said and "4 SEGMENTED topics" in said  # 3 partitions
    assert "already" in _migrate(data_dir)
    assert not (data_dir / "ledgers").exists() and (data_dir / "SLOTS").exists()
    srv = server_factory(extra_args=["--shards", "2"], data_dir=data_dir)
    api = Api(srv.address)
    for name, values in _expected(1).items():
        assert api.values(name) == values
    assert api.values("led-1", compacted=True) == compacted
    after = api.log.Consume(consume, timeout=30).messages
    assert after[0].value == _expected(1)["led-2"][5]  # the cursor moved with its topic
    assert sorted(api.values("parted")) == [b"%c" % k for k in b"abcdefg"]
    info = api.admin.GetTopic(pb.GetTopicRequest(name="parted"), timeout=30)
    assert info.partitions == 3
    _fill(api, 1)
    for name, values in _expected(2).items():
        assert api.values(name) == values
    api.close()


def test_a_partitioned_topic_lives_in_one_slot_and_keeps_its_messages(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "parted"
    srv = server_factory(extra_args=["--shards", "2"], data_dir=data_dir)
    api = Api(srv.address)
    api.admin.CreateTopic(pb.CreateTopicRequest(name="orders", partitions=4), timeout=30)
    entries = api.admin.GetPartitionMap(
        pb.GetPartitionMapRequest(topic="orders"), timeout=30
    ).partitions
    assert [(e.partition, e.topic) for e in entries] == [
        (i, f"orders-partition-{i}") for i in range(4)
    ]
    assert len({e.address for e in entries}) == 1 and entries[0].address != srv.address
    values = [b"%c%d" % (k, i) for i in range(10) for k in b"abcdefgh"]
    api.publish("orders", *values)  # spans partitions: all or nothing, in one store
    with Client(srv.address) as client:
        produce(client, "orders", b"z1")
        assert client._routes.addresses() == [entries[0].address]
    api.close()
    srv.stop()
    srv = server_factory(extra_args=["--shards", "1"], data_dir=data_dir)
    api = Api(srv.address)
    assert sorted(api.values("orders")) == sorted([*values, b"z1"])
    assert sum(len(api.values(f"orders-partition-{i}")) for i in range(4)) == len(values) + 1
    api.close()
