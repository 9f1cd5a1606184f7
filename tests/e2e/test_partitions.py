"""Partitioned topics end to end (CONTRACT section 9), both kinds, on a real server:
routing by Kafka's murmur2, merged reads, all-or-nothing publishes across partitions,
per-partition and aggregate compaction status, AddPartitions."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest

from compactlog.partitioner import partition_for_key
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

KINDS = [pb.LEDGER, pb.SEGMENTED]
SEGMENTED_CONFIG = {"min.cleanable.dirty.ratio": "1"}  # only explicit Compact cleans


class Api:
    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def create(self, name: str, kind: int, partitions: int, **config: str) -> pb.TopicInfo:
        cfg = dict(SEGMENTED_CONFIG) if kind == pb.SEGMENTED else {}
        cfg.update(config)
        req = pb.CreateTopicRequest(name=name, kind=kind, partitions=partitions, config=cfg)
        return self.admin.CreateTopic(req, timeout=30)

    def publish(self, topic: str, *pairs: tuple[bytes | None, bytes | None]) -> list[pb.MessageId]:
        records = []
        for key, value in pairs:
            record = pb.Record()
            if key is not None:
                record.key = key
            if value is not None:
                record.value = value
            records.append(record)
        return list(self.log.Publish(pb.PublishRequest(topic=topic, records=records)).ids)

    def read(self, topic: str, **kw: object) -> list[pb.Message]:
        req = pb.ReadRequest(topic=topic, **kw)  # type: ignore[arg-type]
        return [m for resp in self.log.Read(req, timeout=30) for m in resp.messages]


@pytest.fixture(scope="module")
def api(module_server) -> Iterator[Api]:  # type: ignore[no-untyped-def]
    made = Api(module_server.address)
    yield made
    made.channel.close()


def values(messages: list[pb.Message]) -> list[bytes]:
    return [m.value for m in messages]


@pytest.mark.parametrize("kind", KINDS)
def test_keyed_records_go_where_kafka_would_put_them(
    api: Api, unique_topic: str, kind: int
) -> None:
    info = api.create(unique_topic, kind, 4)
    assert info.partitions == 4
    keys = [f"key-{i}".encode() for i in range(40)]
    ids = api.publish(unique_topic, *[(k, b"v" + k) for k in keys])
    assert [i.partition for i in ids] == [partition_for_key(k, 4) for k in keys]
    for p in range(4):
        own = api.read(f"{unique_topic}-partition-{p}")
        assert [m.key for m in own] == [k for k in keys if partition_for_key(k, 4) == p]
        assert {m.id.partition for m in own} <= {p}
    # A publish straight to a partition carries its index too.
    direct = api.publish(f"{unique_topic}-partition-3", (b"x", b"y"))
    assert direct[0].partition == 3


@pytest.mark.parametrize("kind", KINDS)
def test_keyless_records_round_robin(api: Api, unique_topic: str, kind: int) -> None:
    api.create(unique_topic, kind, 3)
    ids = api.publish(unique_topic, *[(None, b"%d" % i) for i in range(9)])
    parts = [i.partition for i in ids]
    assert sorted(parts.count(p) for p in range(3)) == [3, 3, 3]
    assert parts[:3] == [parts[0], (parts[0] + 1) % 3, (parts[0] + 2) % 3]


@pytest.mark.parametrize("kind", KINDS)
def test_read_on_name_merges_every_partition_in_order(
    api: Api, unique_topic: str, kind: int
) -> None:
    api.create(unique_topic, kind, 3)
    sent = [(b"k%d" % (i % 7), b"%d" % i) for i in range(60)]
    ids = api.publish(unique_topic, *sent)
    merged = api.read(unique_topic)
    assert sorted(values(merged)) == sorted(v for _k, v in sent)
    for p in range(3):  # each partition's messages in its own order
        mine = [m.value for m in merged if m.id.partition == p]
        expected = [v for (_k, v), i in zip(sent, ids, strict=True) if i.partition == p]
        assert mine == expected
    assert len(api.read(unique_topic, max_messages=7)) == 7
    # A message_id start names its partition: that one from the id, the others whole.
    start = next(i for i in ids if i.partition == 1)
    later = api.read(unique_topic, message_id=start)
    assert len(later) == len(merged)
    with pytest.raises(grpc.RpcError) as err:
        api.read(unique_topic, message_id=pb.MessageId(partition=9))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    last = api.log.GetLastMessageId(pb.GetLastMessageIdRequest(topic=unique_topic))
    assert len(last.partitions) == 3
    assert {(i.partition, i.ledger_id, i.entry_id) for i in last.partitions} == {
        max((i.partition, i.ledger_id, i.entry_id) for i in ids if i.partition == p)
        for p in range(3)
    }


@pytest.mark.parametrize("kind", KINDS)
def test_consume_on_name_covers_every_partition_and_acks_by_partition(
    api: Api, unique_topic: str, kind: int
) -> None:
    api.create(unique_topic, kind, 2)
    api.publish(unique_topic, *[(b"k%d" % i, b"%d" % i) for i in range(10)])
    req = pb.ConsumeRequest(topic=unique_topic, subscription="s", max_messages=100)
    got = list(api.log.Consume(req).messages)
    assert sorted(m.value for m in got) == sorted(b"%d" % i for i in range(10))
    for m in got:
        api.log.Acknowledge(pb.AcknowledgeRequest(topic=unique_topic, subscription="s", id=m.id))
    assert not api.log.Consume(req).messages
    again = pb.ConsumeRequest(
        topic=unique_topic, subscription="s", max_messages=100, redeliver_unacknowledged=True
    )
    assert not api.log.Consume(again).messages  # all acked, on every partition


@pytest.mark.parametrize("kind", KINDS)
def test_batch_with_one_bad_record_stores_nothing_in_any_partition(
    api: Api, unique_topic: str, kind: int
) -> None:
    api.create(unique_topic, kind, 4, **{"max.message.bytes": "1000"})
    good = [(b"k%d" % i, b"small") for i in range(12)]
    bad = [*good, (b"big", b"x" * 5000)]
    with pytest.raises(grpc.RpcError) as err:
        api.publish(unique_topic, *bad)
    assert err.value.code() in (
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    )
    assert api.read(unique_topic) == []
    for p in range(4):
        assert api.read(f"{unique_topic}-partition-{p}") == []
    ids = api.publish(unique_topic, *good)  # the ids start where they would have
    assert len(ids) == 12
    info = api.admin.GetTopic(pb.GetTopicRequest(name=unique_topic))
    assert info.stats.entries == 12


def wait_state(api: Api, topic: str, timeout: float = 60.0) -> pb.CompactionStatus:
    deadline = time.monotonic() + timeout
    while True:
        status = api.admin.GetCompactionStatus(pb.GetCompactionStatusRequest(topic=topic))
        if status.state != pb.CompactionStatus.RUNNING or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


@pytest.mark.parametrize("kind", KINDS)
def test_compact_name_compacts_every_partition(api: Api, unique_topic: str, kind: int) -> None:
    extra = {"cleanup.policy": "compact", "segment.bytes": "1024"} if kind == pb.SEGMENTED else {}
    api.create(unique_topic, kind, 3, **extra)
    for round_ in range(4):
        api.publish(unique_topic, *[(b"k%d" % i, b"r%d-%d" % (round_, i)) for i in range(20)])
    status = api.admin.GetCompactionStatus(pb.GetCompactionStatusRequest(topic=unique_topic))
    assert status.state == pb.CompactionStatus.NOT_RUN
    assert len(status.partitions) == 3
    status = api.admin.Compact(pb.CompactRequest(topic=unique_topic, wait=True), timeout=120)
    assert status.state == pb.CompactionStatus.SUCCESS, status.last_error
    assert [s.state for s in status.partitions] == [pb.CompactionStatus.SUCCESS] * 3
    assert status.last_run.read == sum(s.last_run.read for s in status.partitions)
    if kind == pb.LEDGER:
        assert status.last_run.kept == 20
        latest = api.read(unique_topic, read_compacted=True)
        assert sorted(m.value for m in latest) == sorted(b"r3-%d" % i for i in range(20))
    # One partition alone compacts and reports alone, the aggregate follows it.
    one = api.admin.Compact(pb.CompactRequest(topic=f"{unique_topic}-partition-1", wait=True))
    assert one.state == pb.CompactionStatus.SUCCESS
    assert not one.partitions
    assert wait_state(api, unique_topic).state == pb.CompactionStatus.SUCCESS


def test_aggregate_status_is_error_when_a_partition_failed(server_factory) -> None:  # type: ignore[no-untyped-def]
    """Workers killed at phase one fail the partitions that had work; the partition with
    nothing to do succeeds; the aggregate is ERROR naming the failed partitions."""
    srv = server_factory(start=False).start(extra_env={"COMPACTLOG_CRASH_AT": "after_phase_one"})
    api = Api(srv.address)
    try:
        api.create("quotes", pb.LEDGER, 3)
        for p in (0, 1):
            api.publish(f"quotes-partition-{p}", (b"a", b"1"), (b"a", b"2"))
        status = api.admin.Compact(pb.CompactRequest(topic="quotes", wait=True), timeout=120)
        states = [s.state for s in status.partitions]
        assert states == [pb.CompactionStatus.ERROR] * 2 + [pb.CompactionStatus.SUCCESS]
        assert status.state == pb.CompactionStatus.ERROR
        assert "partition 0: " in status.last_error and "partition 1: " in status.last_error
        assert "partition 2" not in status.last_error
    finally:
        api.channel.close()


def test_aggregate_is_running_while_any_partition_runs(server_factory) -> None:  # type: ignore[no-untyped-def]
    """A run paused in one partition: NAME is RUNNING (the idle partition SUCCESS), a
    second Compact is ALREADY_EXISTS, CancelCompaction on NAME cancels it."""
    env = {"COMPACTLOG_PAUSE_AT": "after_phase_one:20000"}
    srv = server_factory(start=False).start(extra_env=env)
    api = Api(srv.address)
    try:
        api.create("bids", pb.LEDGER, 2)
        api.publish("bids-partition-0", (b"a", b"1"), (b"a", b"2"))
        api.admin.Compact(pb.CompactRequest(topic="bids", wait=False))
        status = api.admin.GetCompactionStatus(pb.GetCompactionStatusRequest(topic="bids"))
        assert status.state == pb.CompactionStatus.RUNNING
        assert [s.state for s in status.partitions] == [
            pb.CompactionStatus.RUNNING,
            pb.CompactionStatus.SUCCESS,
        ]
        with pytest.raises(grpc.RpcError) as err:
            api.admin.Compact(pb.CompactRequest(topic="bids", wait=False))
        assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
        api.admin.CancelCompaction(pb.CancelCompactionRequest(topic="bids"), timeout=30)
        status = wait_state(api, "bids")
        assert status.state == pb.CompactionStatus.CANCELLED
        with pytest.raises(grpc.RpcError) as err:
            api.admin.CancelCompaction(pb.CancelCompactionRequest(topic="bids"))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        api.channel.close()


def test_aggregate_state_folds_the_partitions() -> None:
    from compactlog.server.admin.partitioned_compaction import aggregate

    ok = pb.CompactionStatus(state=pb.CompactionStatus.SUCCESS)
    bad = pb.CompactionStatus(state=pb.CompactionStatus.ERROR, last_error="boom")
    running = pb.CompactionStatus(state=pb.CompactionStatus.RUNNING)
    assert aggregate([ok, bad]).state == pb.CompactionStatus.ERROR
    assert aggregate([running, bad]).state == pb.CompactionStatus.RUNNING
    assert aggregate([pb.CompactionStatus(), ok]).state == pb.CompactionStatus.SUCCESS
    assert aggregate([pb.CompactionStatus()] * 2).state == pb.CompactionStatus.NOT_RUN


@pytest.mark.parametrize("kind", KINDS)
def test_add_partitions_keeps_data_and_never_shrinks(
    api: Api, unique_topic: str, kind: int
) -> None:
    api.create(unique_topic, kind, 2)
    api.publish(unique_topic, *[(b"k%d" % i, b"%d" % i) for i in range(10)])
    info = api.admin.AddPartitions(pb.AddPartitionsRequest(name=unique_topic, partitions=5))
    assert info.partitions == 5
    assert info.stats.entries == 10
    assert sorted(values(api.read(unique_topic))) == sorted(b"%d" % i for i in range(10))
    ids = api.publish(unique_topic, *[(b"k%d" % i, b"n") for i in range(30)])
    assert {i.partition for i in ids} <= set(range(5))
    assert max(i.partition for i in ids) >= 2  # the new partitions take keys
    with pytest.raises(grpc.RpcError) as err:
        api.admin.AddPartitions(pb.AddPartitionsRequest(name=unique_topic, partitions=3))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert api.admin.GetTopic(pb.GetTopicRequest(name=unique_topic)).partitions == 5
    plain = f"{unique_topic}-plain"
    api.create(plain, kind, 0)
    for name, code in ((plain, "INVALID_ARGUMENT"), (f"{unique_topic}-none", "NOT_FOUND")):
        with pytest.raises(grpc.RpcError) as err:
            api.admin.AddPartitions(pb.AddPartitionsRequest(name=name, partitions=3))
        assert err.value.code().name == code


@pytest.mark.parametrize("kind", KINDS)
def test_config_and_delete_on_name_apply_to_every_partition(
    api: Api, unique_topic: str, kind: int
) -> None:
    api.create(unique_topic, kind, 2)
    key = "retention.ms"
    api.admin.UpdateTopicConfig(pb.UpdateTopicConfigRequest(name=unique_topic, set={key: "1234"}))
    for p in range(2):
        info = api.admin.GetTopic(pb.GetTopicRequest(name=f"{unique_topic}-partition-{p}"))
        assert info.config[key] == "1234"
        assert info.partitions == 0
    listed = {t.name: t.partitions for t in api.admin.ListTopics(pb.ListTopicsRequest()).topics}
    assert listed[unique_topic] == 2 and f"{unique_topic}-partition-0" in listed
    with pytest.raises(grpc.RpcError) as err:  # a partition goes with its topic only
        api.admin.DeleteTopic(pb.DeleteTopicRequest(name=f"{unique_topic}-partition-0"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as err:
        api.create(unique_topic, kind, 0)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    api.admin.DeleteTopic(pb.DeleteTopicRequest(name=unique_topic))
    for name in (unique_topic, f"{unique_topic}-partition-1"):
        with pytest.raises(grpc.RpcError) as err:
            api.admin.GetTopic(pb.GetTopicRequest(name=name))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_partitions_survive_a_restart(server, connect) -> None:  # type: ignore[no-untyped-def]
    api = Api(server.address)
    api.create("prices", pb.LEDGER, 3)
    api.publish("prices", *[(b"k%d" % i, b"%d" % i) for i in range(9)])
    api.channel.close()
    server.restart()
    api = Api(server.address)
    try:
        assert api.admin.GetTopic(pb.GetTopicRequest(name="prices")).partitions == 3
        assert len(api.read("prices")) == 9
        ids = api.publish("prices", (b"k1", b"again"))
        assert ids[0].partition == partition_for_key(b"k1", 3)
    finally:
        api.channel.close()


def test_ledger_publish_across_partitions_is_atomic_across_a_crash(server) -> None:  # type: ignore[no-untyped-def]
    """LEDGER partitions share one RocksDB WriteBatch a publish: killed mid-stream, the
    server comes back with every batch whole or absent (and every acked one whole)."""
    import threading

    api = Api(server.address)
    api.create("orders", pb.LEDGER, 4)
    acked: list[int] = []
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            pairs = [(b"k%d-%d" % (n, i), b"batch-%d" % n) for i in range(16)]
            try:
                api.publish("orders", *pairs)
            except grpc.RpcError:
                return
            acked.append(n)
            n += 1

    thread = threading.Thread(target=produce)
    thread.start()
    time.sleep(1.0)
    server.kill()
    stop.set()
    thread.join()
    api.channel.close()
    server.start()
    api = Api(server.address)
    try:
        counts: dict[bytes, int] = {}
        for m in api.read("orders"):
            counts[m.value] = counts.get(m.value, 0) + 1
        assert set(counts.values()) <= {16}, counts  # no batch stored in part
        assert {b"batch-%d" % n for n in acked} <= set(counts)
        assert len({m.id.partition for m in api.read("orders")}) == 4
    finally:
        api.channel.close()


def test_a_damaged_partition_count_file_stops_the_start_naming_it(server) -> None:  # type: ignore[no-untyped-def]
    """The count file is never guessed at: one flipped byte and the start fails with one
    line naming the file; the data dir stays as it was (CONTRACT section 11)."""
    import subprocess

    api = Api(server.address)
    api.create("ticks", pb.SEGMENTED, 2)
    api.channel.close()
    server.stop()
    path = server.data_dir / "partitioned-topics.json"
    data = bytearray(path.read_bytes())
    data[data.index(b'"partitions": 2')] ^= 0x01
    path.write_bytes(bytes(data))
    done = subprocess.run(server.command(), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "partitioned-topics.json" in lines[0], done.stderr
    assert path.read_bytes() == bytes(data)
    check = [*server.command()[:3], "check", str(server.data_dir)]
    checked = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert checked.returncode != 0 and "partitioned-topics.json" in checked.stdout + checked.stderr
