"""End to end through gRPC against the real ``compactlog serve`` process: LEDGER topics."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from compactlog.rpc_errors import error_info
from compactlog.v1 import compactlog_pb2 as pb


def publish(stubs, topic: str, *pairs: tuple[bytes | None, bytes | None]) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    return stubs.publish(topic, *pairs)  # type: ignore[no-any-return]


def read_all(stubs, **kw: object) -> list[pb.Message]:  # type: ignore[no-untyped-def]
    return [m for resp in stubs.log.Read(pb.ReadRequest(**kw)) for m in resp.messages]


def code_of(call) -> grpc.StatusCode:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code()


def failed_serve(data_dir: Path, listen: str = "127.0.0.1:0", *extra: str) -> list[str]:
    """Run ``compactlog serve`` expecting it to refuse; return its non-empty stderr lines."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "compactlog",
            "serve",
            "--data-dir",
            str(data_dir),
            "--listen",
            listen,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr
    return [ln for ln in proc.stderr.splitlines() if ln.strip()]


def test_health_and_reflection(shared_server, connect) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    health = health_pb2_grpc.HealthStub(stubs.channel)
    assert (
        health.Check(health_pb2.HealthCheckRequest()).status
        == health_pb2.HealthCheckResponse.SERVING
    )
    refl = reflection_pb2_grpc.ServerReflectionStub(stubs.channel)
    answer = next(
        refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    )
    names = {s.name for s in answer.list_services_response.service}
    assert {"compactlog.v1.Log", "compactlog.v1.TopicAdmin", "grpc.health.v1.Health"} <= names


def test_publish_read_round_trip_keeps_everything(shared_server, connect, unique_topic) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    info = stubs.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic))
    assert info.kind == pb.LEDGER and info.config["ledger.max.entries"] == "50000"
    rec = pb.Record(key=b"k", value=b"", properties={"a": "b"}, event_time_ms=5)
    ids = stubs.log.Publish(
        pb.PublishRequest(
            topic=unique_topic, records=[rec, pb.Record(value=b"x"), pb.Record(key=b"n")]
        )
    ).ids
    assert [(i.ledger_id, i.entry_id) for i in ids] == [
        (ids[0].ledger_id, 0),
        (ids[0].ledger_id, 1),
        (ids[0].ledger_id, 2),
    ]
    msgs = read_all(stubs, topic=unique_topic)
    assert [m.HasField("key") for m in msgs] == [True, False, True]
    assert [m.HasField("value") for m in msgs] == [True, True, False]
    assert (
        msgs[0].value == b""
        and dict(msgs[0].properties) == {"a": "b"}
        and msgs[0].event_time_ms == 5
    )
    assert msgs[1].event_time_ms == msgs[1].publish_time_ms > 0


def test_read_starts_limits_and_follow(shared_server, connect, unique_topic) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    stubs.admin.CreateTopic(
        pb.CreateTopicRequest(name=unique_topic, config={"ledger.max.entries": "3"})
    )
    ids = publish(stubs, unique_topic, *[(b"k", b"%d" % i) for i in range(7)])
    assert [m.value for m in read_all(stubs, topic=unique_topic, max_messages=2)] == [b"0", b"1"]
    start = pb.MessageId(ledger_id=ids[4][0], entry_id=ids[4][1])
    assert [m.value for m in read_all(stubs, topic=unique_topic, message_id=start)] == [
        b"4",
        b"5",
        b"6",
    ]
    assert read_all(stubs, topic=unique_topic, position=pb.LATEST) == []
    assert len(read_all(stubs, topic=unique_topic, timestamp_ms=0)) == 7
    assert read_all(stubs, topic=unique_topic, timestamp_ms=int(time.time() * 1000) + 60_000) == []
    stream = stubs.log.Read(pb.ReadRequest(topic=unique_topic, position=pb.LATEST, follow=True))
    time.sleep(0.2)
    publish(stubs, unique_topic, (b"k", b"new"))
    assert [m.value for m in next(stream).messages] == [b"new"]
    stream.cancel()


def test_publish_stream_answers_in_order(shared_server, connect, unique_topic) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic))
    reqs = [
        pb.PublishRequest(
            topic=unique_topic,
            records=[pb.Record(key=b"k", value=b"%d" % (i * 10 + j)) for j in range(10)],
        )
        for i in range(20)
    ]
    replies = list(stubs.log.PublishStream(iter(reqs)))
    flat = [(i.ledger_id, i.entry_id) for r in replies for i in r.ids]
    assert len(replies) == 20 and flat == sorted(flat) and len(flat) == 200
    assert all(r.synced for r in replies)


def test_bad_input_errors_and_nothing_on_disk(server, connect) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(server.address)
    before = sorted(p.name for p in server.data_dir.rglob("*") if "ledgers" not in p.parts)
    for bad in ["../x", "a/b", "", "x" * 250, "a\x00b", ".", ".."]:
        assert (
            code_of(lambda bad=bad: stubs.admin.CreateTopic(pb.CreateTopicRequest(name=bad)))
            == grpc.StatusCode.INVALID_ARGUMENT
        )
    assert (
        code_of(
            lambda: stubs.admin.CreateTopic(
                pb.CreateTopicRequest(name="y" * 250, kind=pb.SEGMENTED)
            )
        )
        == grpc.StatusCode.INVALID_ARGUMENT
    )
    after = sorted(p.name for p in server.data_dir.rglob("*") if "ledgers" not in p.parts)
    assert before == after
    assert not (server.data_dir.parent / "x").exists()
    assert stubs.admin.ListTopics(pb.ListTopicsRequest()).topics == []
    bad_cfg = [
        {"no.such.key": "1"},
        {"ledger.max.entries": "zero"},
        {"ledger.max.entries": "0"},
        {"retention.ms": "-2"},
        {"compaction.retain.null.key": "maybe"},
    ]
    for cfg in bad_cfg:
        assert (
            code_of(
                lambda cfg=cfg: stubs.admin.CreateTopic(pb.CreateTopicRequest(name="t", config=cfg))
            )
            == grpc.StatusCode.INVALID_ARGUMENT
        )
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name="t", config={"max.message.bytes": "100"}))
    assert (
        code_of(lambda: stubs.admin.CreateTopic(pb.CreateTopicRequest(name="t")))
        == grpc.StatusCode.ALREADY_EXISTS
    )
    assert (
        code_of(
            lambda: stubs.admin.UpdateTopicConfig(
                pb.UpdateTopicConfigRequest(name="t", set={"bad": "1"})
            )
        )
        == grpc.StatusCode.INVALID_ARGUMENT
    )
    assert (
        code_of(lambda: stubs.admin.GetTopic(pb.GetTopicRequest(name="nope")))
        == grpc.StatusCode.NOT_FOUND
    )
    assert code_of(lambda: read_all(stubs, topic="nope")) == grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: publish(stubs, "nope", (b"k", b"v"))) == grpc.StatusCode.NOT_FOUND
    publish(stubs, "t", (b"k", b"small"))
    with pytest.raises(grpc.RpcError) as info:
        publish(stubs, "t", (b"k", b"fine"), (b"k", b"x" * 500))
    assert (
        info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        and "max.message.bytes=100" in info.value.details()
    )
    assert [m.value for m in read_all(stubs, topic="t")] == [b"small"]
    assert stubs.admin.GetTopic(pb.GetTopicRequest(name="t")).stats.entries == 1
    assert (
        code_of(
            lambda: stubs.admin.DeleteRecords(pb.DeleteRecordsRequest(topic="t", before_offset=1))
        )
        == grpc.StatusCode.FAILED_PRECONDITION
    )


def test_update_config_and_delete(shared_server, connect, unique_topic) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic, config={"retention.ms": "5"}))
    info = stubs.admin.UpdateTopicConfig(
        pb.UpdateTopicConfigRequest(
            name=unique_topic, set={"ledger.max.entries": "10"}, remove=["retention.ms"]
        )
    )
    assert info.config["ledger.max.entries"] == "10" and info.config["retention.ms"] == "-1"
    stubs.admin.DeleteTopic(pb.DeleteTopicRequest(name=unique_topic))
    assert (
        code_of(lambda: stubs.admin.GetTopic(pb.GetTopicRequest(name=unique_topic)))
        == grpc.StatusCode.NOT_FOUND
    )
    assert (
        code_of(lambda: stubs.admin.DeleteTopic(pb.DeleteTopicRequest(name=unique_topic)))
        == grpc.StatusCode.NOT_FOUND
    )


def test_consume_acknowledge_and_redelivery(shared_server, connect, unique_topic) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic))
    publish(stubs, unique_topic, *[(b"k", b"%d" % i) for i in range(4)])
    got = stubs.log.Consume(
        pb.ConsumeRequest(topic=unique_topic, subscription="s", max_messages=3)
    ).messages
    assert [m.value for m in got] == [b"0", b"1", b"2"]
    stubs.log.Acknowledge(
        pb.AcknowledgeRequest(topic=unique_topic, subscription="s", id=got[1].id, cumulative=True)
    )
    rest = stubs.log.Consume(pb.ConsumeRequest(topic=unique_topic, subscription="s")).messages
    assert [m.value for m in rest] == [b"3"]
    started = time.monotonic()
    empty = stubs.log.Consume(
        pb.ConsumeRequest(topic=unique_topic, subscription="s", wait_ms=300)
    ).messages
    assert list(empty) == [] and time.monotonic() - started >= 0.25
    latest = stubs.log.Consume(
        pb.ConsumeRequest(topic=unique_topic, subscription="late", initial_position=pb.LATEST)
    ).messages
    assert list(latest) == []


def test_get_last_message_id(shared_server, connect, unique_topic) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic))
    assert not stubs.log.GetLastMessageId(pb.GetLastMessageIdRequest(topic=unique_topic)).HasField(
        "id"
    )
    ids = publish(stubs, unique_topic, (b"a", b"1"), (b"b", b"2"))
    last = stubs.log.GetLastMessageId(pb.GetLastMessageIdRequest(topic=unique_topic)).id
    assert (last.ledger_id, last.entry_id) == ids[-1]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_restart_keeps_acknowledged_messages_ids_and_cursors(server, connect, how: str) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(server.address)
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name="t", config={"ledger.max.entries": "3"}))
    ids = publish(stubs, "t", *[(b"k%d" % i, b"%d" % i) for i in range(8)])
    got = stubs.log.Consume(pb.ConsumeRequest(topic="t", subscription="s", max_messages=5)).messages
    stubs.log.Acknowledge(
        pb.AcknowledgeRequest(topic="t", subscription="s", id=got[2].id, cumulative=True)
    )
    stubs.log.Acknowledge(pb.AcknowledgeRequest(topic="t", subscription="s", id=got[4].id))
    if how == "sigterm":
        assert server.stop() == 0
    else:
        server.kill()
    server.start()
    stubs = connect(server.address)
    msgs = read_all(stubs, topic="t")
    assert [(m.id.ledger_id, m.id.entry_id) for m in msgs] == ids
    assert [m.value for m in msgs] == [b"%d" % i for i in range(8)]
    again = stubs.log.Consume(pb.ConsumeRequest(topic="t", subscription="s")).messages
    assert [m.value for m in again] == [
        b"3",
        b"5",
        b"6",
        b"7",
    ]  # 0-2 cumulative, 4 individually acked
    new = publish(stubs, "t", (b"k", b"after"))
    assert new[0][0] > ids[-1][0]  # the reopened topic rolled over to a new ledger


@pytest.mark.slow
def test_client_disconnecting_mid_stream_leaves_server_healthy(server, connect) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(server.address)
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name="t"))
    for _ in range(20):
        publish(stubs, "t", *[(b"k", b"x" * 1000) for _ in range(100)])
    # a reader process killed mid-stream
    code = (
        "import sys, grpc\n"
        "from compactlog.v1 import compactlog_pb2 as pb, compactlog_pb2_grpc as g\n"
        "ch = grpc.insecure_channel(sys.argv[1])\n"
        "stream = g.LogStub(ch).Read(pb.ReadRequest(topic='t', follow=True))\n"
        "next(stream); print('reading', flush=True)\n"
        "import time; time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, server.address], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "reading"
    proc.kill()
    proc.wait()
    stream = stubs.log.Read(pb.ReadRequest(topic="t", follow=True))
    next(stream)
    stream.cancel()
    publish(stubs, "t", (b"k", b"still"))
    assert read_all(stubs, topic="t", position=pb.EARLIEST, max_messages=1)
    health = health_pb2_grpc.HealthStub(stubs.channel)
    assert (
        health.Check(health_pb2.HealthCheckRequest()).status
        == health_pb2.HealthCheckResponse.SERVING
    )
    assert server.proc.poll() is None


def test_second_server_on_same_data_dir_fails_fast(server) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    lines = failed_serve(server.data_dir)
    assert time.monotonic() - started < 30
    assert len(lines) == 1 and "in use by another compactlog server" in lines[0], lines


def test_bad_config_file_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('"log.cleaner.threads" = "many"\n')
    lines = failed_serve(tmp_path / "d", "127.0.0.1:0", "--config", str(cfg))
    assert len(lines) == 1 and "log.cleaner.threads" in lines[0], lines


def test_metrics_endpoint_counts_publishes_and_reads(server_factory, connect) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = server_factory(extra_args=["--metrics-listen", f"127.0.0.1:{port}"])
    stubs = connect(srv.address)
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name="m"))
    publish(stubs, "m", (b"k", b"v"), (b"k", b"w"))
    read_all(stubs, topic="m")
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'compactlog_publish_records_total{kind="LEDGER"} 2.0' in body
    assert 'compactlog_read_messages_total{compacted="false",kind="LEDGER"} 2.0' in body
    assert "compactlog_publish_latency_seconds_bucket" in body
    assert 'compactlog_publish_bytes_total{kind="LEDGER"}' in body
    assert 'compactlog_read_batch_latency_seconds_count{kind="LEDGER"} 1.0' in body
    with pytest.raises(grpc.RpcError):
        stubs.admin.GetTopic(pb.GetTopicRequest(name="missing"))
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'compactlog_rpc_errors_total{code="NOT_FOUND",method="GetTopic"} 1.0' in body


def test_sigterm_exits_zero(server) -> None:  # type: ignore[no-untyped-def]
    assert server.stop() == 0
    assert os.path.exists(server.data_dir / "ledgers")


def test_sigterm_ends_follow_streams_and_exits_promptly(server, connect) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(server.address)
    stubs.admin.CreateTopic(pb.CreateTopicRequest(name="t"))
    stream = stubs.log.Read(pb.ReadRequest(topic="t", follow=True))
    waiting = stubs.log.Consume.future(
        pb.ConsumeRequest(topic="t", subscription="s", wait_ms=60_000)
    )
    time.sleep(0.3)
    started = time.monotonic()
    assert server.stop() == 0
    assert time.monotonic() - started < 5  # well under the 10 s grace
    with pytest.raises(grpc.RpcError) as ended:  # a follower learns to reconnect
        list(stream)
    assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
    assert error_info(ended.value).reason == "SHUTTING_DOWN"
    assert list(waiting.result(timeout=5).messages) == []


def test_listen_address_in_use_or_malformed_is_one_line(shared_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for listen, says in [(shared_server.address, "cannot listen on"), ("nonsense", "HOST:PORT")]:
        lines = failed_serve(tmp_path / "d", listen)
        assert len(lines) == 1 and says in lines[0], lines
