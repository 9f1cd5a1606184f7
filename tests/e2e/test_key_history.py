"""Log.GetKeyHistory end to end through a real server process: both kinds, max_messages,
unknown topics and keys, compaction, retention and DeleteRecords in between, a kill -9
while publishing, and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactlog.rpc_errors import error_info
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

Row = tuple[tuple[int, int], bytes | None, bytes | None]


class Api:
    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.admin = pb_grpc.TopicAdminStub(self.channel)
        self.log = pb_grpc.LogStub(self.channel)

    def create(self, topic: str, kind: int = pb.LEDGER, **config: str) -> None:
        cfg = {k.replace("_", "."): v for k, v in config.items()}
        self.admin.CreateTopic(pb.CreateTopicRequest(name=topic, kind=kind, config=cfg))

    def publish(self, topic: str, pairs: list[tuple[bytes | None, bytes | None]]) -> None:
        records = [pb.Record(key=k, value=v) for k, v in pairs]  # None leaves a field absent
        self.log.Publish(pb.PublishRequest(topic=topic, records=records), timeout=30)

    def history(self, topic: str, key: bytes, limit: int = 0) -> pb.GetKeyHistoryResponse:
        req = pb.GetKeyHistoryRequest(topic=topic, key=key, max_messages=limit)
        return self.log.GetKeyHistory(req, timeout=30)

    def rows(self, topic: str, key: bytes, limit: int = 0) -> list[Row]:
        return [_row(m) for m in self.history(topic, key, limit).messages]

    def raw(self, topic: str) -> list[Row]:
        req = pb.ReadRequest(topic=topic)
        return [_row(m) for resp in self.log.Read(req, timeout=30) for m in resp.messages]

    def close(self) -> None:
        self.channel.close()


def _row(m: pb.Message) -> Row:
    return (
        (m.id.ledger_id, m.id.entry_id),
        m.key if m.HasField("key") else None,
        m.value if m.HasField("value") else None,
    )


@pytest.fixture(scope="module")
def api(module_server) -> Api:  # type: ignore[no-untyped-def]
    made = Api(module_server.address)
    yield made  # type: ignore[misc]
    made.close()


def test_ledger_history_oldest_first_with_tombstones_and_limit(api: Api, unique_topic: str) -> None:
    api.create(unique_topic)
    api.publish(unique_topic, [(b"a", b"1"), (b"b", b"x"), (None, b"n"), (b"a", None)])
    api.publish(unique_topic, [(b"a", b""), (b"a", b"2")])
    rows = api.rows(unique_topic, b"a")
    assert [(i[1], v) for i, _k, v in rows] == [(0, b"1"), (3, None), (4, b""), (5, b"2")]
    assert api.history(unique_topic, b"a").truncated is False
    limited = api.history(unique_topic, b"a", 2)
    assert [_row(m) for m in limited.messages] == rows[:2] and limited.truncated
    assert api.rows(unique_topic, b"nobody") == []
    assert api.rows(unique_topic, b"") == []
    api.admin.Compact(pb.CompactRequest(topic=unique_topic, wait=True), timeout=60)
    assert api.rows(unique_topic, b"a") == rows  # compaction keeps the raw history


def test_unknown_topic_is_not_found(api: Api) -> None:
    with pytest.raises(grpc.RpcError) as info:
        api.history("no-such-topic", b"a")
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_info(info.value).reason == "TOPIC_NOT_FOUND"  # type: ignore[union-attr]


def test_segmented_history_is_what_the_log_still_holds(api: Api, unique_topic: str) -> None:
    api.create(unique_topic, pb.SEGMENTED, cleanup_policy="compact", segment_bytes="300")
    for n in range(6):
        api.publish(unique_topic, [(b"a", b"%d" % n), (b"b", b"%d" % n)])
    api.publish(unique_topic, [(b"a", None)])
    assert [v for _i, _k, v in api.rows(unique_topic, b"a")] == [
        b"0",
        b"1",
        b"2",
        b"3",
        b"4",
        b"5",
        None,
    ]
    api.admin.DeleteRecords(pb.DeleteRecordsRequest(topic=unique_topic, before_offset=4))
    api.admin.Compact(pb.CompactRequest(topic=unique_topic, wait=True), timeout=60)
    held = [r for r in api.raw(unique_topic) if r[1] == b"a"]
    assert api.rows(unique_topic, b"a") == held
    assert all(i[1] >= 4 for i, _k, _v in held)


KEYS = st.sampled_from([b"a", b"b", b"c"]) | st.none()
VALUES = st.sampled_from([b"v", b""]) | st.none()
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=5)),
        st.tuples(st.sampled_from(["compact", "retention", "delete-records"]), st.none()),
    ),
    min_size=1,
    max_size=8,
)


@pytest.mark.parametrize("kind", [pb.LEDGER, pb.SEGMENTED])
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=OPS)
def test_history_of_every_key_equals_the_model(
    api: Api, kind: int, ops: list[tuple[str, object]]
) -> None:
    topic = "kh-" + os.urandom(6).hex()
    if kind == pb.LEDGER:
        api.create(topic, kind, ledger_max_entries="3", retention_bytes="1")
    else:
        api.create(topic, kind, cleanup_policy="compact,delete", segment_bytes="200")
    model: list[Row] = []
    for op, arg in ops:
        if op == "publish":
            pairs = arg  # type: ignore[assignment]
            req = pb.PublishRequest(
                topic=topic, records=[pb.Record(key=k, value=v) for k, v in pairs]
            )  # type: ignore[attr-defined]
            ids = api.log.Publish(req, timeout=30).ids
            model += [
                ((i.ledger_id, i.entry_id), k, v) for i, (k, v) in zip(ids, pairs, strict=True)
            ]  # type: ignore[call-overload]
        elif op == "compact":
            api.admin.Compact(pb.CompactRequest(topic=topic, wait=True), timeout=60)
        elif op == "retention":
            api.admin.EnforceRetention(pb.EnforceRetentionRequest(topic=topic))
        elif kind == pb.SEGMENTED and model:
            end = api.admin.GetTopic(pb.GetTopicRequest(name=topic)).stats.last_id.entry_id
            api.admin.DeleteRecords(pb.DeleteRecordsRequest(topic=topic, before_offset=end))
    held = {i for i, _k, _v in api.raw(topic)}  # what retention, DeleteRecords and the cleaner left
    if kind == pb.LEDGER and held:  # retention removes whole ledgers, oldest first
        first_ledger = min(held)[0]
        assert {i for i, _k, _v in model if i[0] >= first_ledger} == held
    for key in [b"a", b"b", b"c"]:
        assert api.rows(topic, key) == [r for r in model if r[1] == key and r[0] in held]
    api.admin.DeleteTopic(pb.DeleteTopicRequest(name=topic))


def test_kill_9_while_publishing_keeps_every_acknowledged_message(
    server_factory, unique_topic: str
) -> None:  # type: ignore[no-untyped-def]
    server = server_factory()
    api = Api(server.address)
    api.create(unique_topic, ledger_max_entries="700")
    acked: list[Row] = []
    stop = threading.Event()

    def publish() -> None:
        n = 0
        while not stop.is_set():
            pairs = [(b"k%d" % (i % 13), b"%d" % (n + i)) for i in range(50)]
            try:
                ids = api.log.Publish(
                    pb.PublishRequest(
                        topic=unique_topic, records=[pb.Record(key=k, value=v) for k, v in pairs]
                    ),
                    timeout=5,
                ).ids
            except grpc.RpcError:
                return
            acked.extend(
                ((i.ledger_id, i.entry_id), k, v) for i, (k, v) in zip(ids, pairs, strict=True)
            )
            n += 50

    worker = threading.Thread(target=publish)
    worker.start()
    while len(acked) < 3000:
        threading.Event().wait(0.05)
    server.kill()
    stop.set()
    worker.join()
    api.close()
    server.restart()
    api = Api(server.address)
    try:
        raw = api.raw(unique_topic)
        assert {r[0] for r in acked} <= {r[0] for r in raw}
        for k in range(13):
            key = b"k%d" % k
            assert api.rows(unique_topic, key) == [r for r in raw if r[1] == key]
    finally:
        api.close()
        server.stop()


def test_cli_history(module_server, unique_topic: str, api: Api) -> None:  # type: ignore[no-untyped-def]
    api.create(unique_topic)
    api.publish(unique_topic, [(b"user-1", b"alice"), (b"user-2", b"bob"), (b"user-1", None)])
    cli = [sys.executable, "-m", "compactlog", "--server", module_server.address, "history"]
    out = subprocess.run([*cli, unique_topic, "user-1"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [line.split(" ", 1) for line in out.stdout.splitlines()]
    assert [rest for _id, rest in lines] == ["key=user-1 value=alice", "key=user-1 tombstone"]
    assert [i.split(":")[1] for i, _rest in lines] == ["0", "2"]
    out = subprocess.run(
        [*cli, unique_topic, "user-1", "--limit", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.count("\n") == 1 and '"value": "alice"' in out.stdout
    out = subprocess.run([*cli, "missing-topic", "k"], capture_output=True, text=True, timeout=60)
    assert (
        out.returncode == 1
        and out.stderr.startswith("compactlog: error:")
        and "Traceback" not in out.stderr
    )


def test_client_library_get_key_history(module_server, unique_topic: str, api: Api) -> None:  # type: ignore[no-untyped-def]
    from compactlog.client import Client, TopicNotFound

    api.create(unique_topic)
    api.publish(unique_topic, [(b"k", b"1"), (b"j", b"x"), (b"k", None)])
    with Client(module_server.address) as client:
        got = client.get_key_history(unique_topic, b"k")
        assert [(m.key, m.value) for m in got] == [(b"k", b"1"), (b"k", None)]
        assert len(client.get_key_history(unique_topic, b"k", max_messages=1)) == 1
        with pytest.raises(TopicNotFound):
            client.get_key_history("no-such-topic", b"k")


@pytest.mark.parametrize("kind", [pb.LEDGER, pb.SEGMENTED])
def test_partitioned_topic_history_covers_its_partitions(
    api: Api, unique_topic: str, kind: int
) -> None:
    req = pb.CreateTopicRequest(name=unique_topic, kind=kind, partitions=3)
    api.admin.CreateTopic(req)
    sent: dict[bytes, list[bytes]] = {}
    for n in range(4):
        pairs = [(b"key-%d" % k, b"%d-%d" % (k, n)) for k in range(6)]
        api.publish(unique_topic, pairs)
        for k, v in pairs:
            sent.setdefault(k, []).append(v)
    for key, values in sent.items():
        got = api.history(unique_topic, key).messages
        assert [m.value for m in got] == values
        assert len({m.id.partition for m in got}) == 1  # one key, one partition
        part = f"{unique_topic}-partition-{got[0].id.partition}"
        assert [m.value for m in api.history(part, key).messages] == values
    assert len(api.history(unique_topic, b"key-1", 2).messages) == 2
    assert api.history(unique_topic, b"key-1", 2).truncated


@pytest.mark.slow
def test_history_through_the_front_of_a_sharded_server(server_factory) -> None:  # type: ignore[no-untyped-def]
    srv = server_factory(extra_args=["--shards", "2"])
    api = Api(srv.address)
    try:
        for i, kind in enumerate([pb.LEDGER, pb.SEGMENTED, pb.LEDGER, pb.SEGMENTED]):
            name = f"kh-{i}"
            api.create(name, kind)
            api.publish(name, [(b"k", b"1"), (b"j", b"2"), (b"k", b"3")])
            assert [m.value for m in api.history(name, b"k").messages] == [b"1", b"3"]
    finally:
        api.close()
