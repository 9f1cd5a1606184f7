"""SEGMENTED topics end to end: the real server process, its segment files, restarts."""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from compactlog.v1 import compactlog_pb2 as pb


def publish(stubs, topic: str, *pairs: tuple[bytes | None, bytes | None]) -> list[int]:  # type: ignore[no-untyped-def]
    return [offset for _zero, offset in stubs.publish(topic, *pairs)]


def read(
    stubs, topic: str, offset: int | None = None, **kw: object
) -> list[tuple[int, bytes | None, bytes | None]]:  # type: ignore[no-untyped-def]
    req = pb.ReadRequest(topic=topic, **kw)
    if offset is not None:
        req.message_id.ledger_id, req.message_id.entry_id = 0, offset
    return [
        (
            m.id.entry_id,
            m.key if m.HasField("key") else None,
            m.value if m.HasField("value") else None,
        )
        for resp in stubs.log.Read(req, timeout=30)
        for m in resp.messages
    ]


def create(stubs, name: str, **config: str) -> pb.TopicInfo:  # type: ignore[no-untyped-def]
    # A ratio of 1 keeps the background cleaner off these topics (it needs a dirty ratio
    # above it): only the tests' explicit Compact cleans, so nothing races their reads.
    config.setdefault("min_cleanable_dirty_ratio", "1")
    cfg = {k.replace("_", "."): v for k, v in config.items()}
    return stubs.admin.CreateTopic(pb.CreateTopicRequest(name=name, kind=pb.SEGMENTED, config=cfg))


def seed(stubs, topic: str) -> None:  # type: ignore[no-untyped-def]
    """Kafka's seed example: K1 at 0, 2, 3 and K2 at 1, 5, 9, one batch (segment) each."""
    layout = {
        0: b"K1",
        1: b"K2",
        2: b"K1",
        3: b"K1",
        4: b"K3",
        5: b"K2",
        6: b"K4",
        7: b"K5",
        8: b"K6",
        9: b"K2",
    }
    for offset in range(10):
        assert publish(stubs, topic, (layout[offset], b"v%d" % offset)) == [offset]
    publish(stubs, topic, (b"tail", b"active"))  # the active segment is never cleaned


def test_compact_keeps_latest_offsets_and_reads_skip_removed_ones(
    shared_server, connect, unique_topic
) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    info = create(stubs, unique_topic, cleanup_policy="compact", segment_bytes="14")
    assert info.kind == pb.SEGMENTED and info.config["cleanup.policy"] == "compact"
    seed(stubs, unique_topic)
    status = stubs.admin.Compact(pb.CompactRequest(topic=unique_topic, wait=True))
    assert status.state == pb.CompactionStatus.SUCCESS
    assert (status.last_run.read, status.last_run.kept, status.last_run.removed) == (10, 6, 4)
    got = read(stubs, unique_topic)
    assert [o for o, _, _ in got] == [3, 4, 6, 7, 8, 9, 10]
    assert dict((k, v) for _, k, v in got)[b"K1"] == b"v3"
    assert dict((k, v) for _, k, v in got)[b"K2"] == b"v9"
    # a start at a removed offset reads from the next surviving one
    assert [o for o, _, _ in read(stubs, unique_topic, offset=1, max_messages=2)] == [3, 4]
    assert (
        stubs.admin.GetTopic(pb.GetTopicRequest(name=unique_topic)).stats.entries == 7
    )  # 6 + tail


def test_delete_records_and_out_of_range(shared_server, connect, unique_topic) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    create(stubs, unique_topic, segment_bytes="14")
    for i in range(5):
        publish(stubs, unique_topic, (b"k", b"%d" % i))
    info = stubs.admin.DeleteRecords(pb.DeleteRecordsRequest(topic=unique_topic, before_offset=3))
    assert info.stats.log_start_offset == 3
    assert [o for o, _, _ in read(stubs, unique_topic)] == [3, 4]
    with pytest.raises(grpc.RpcError) as below:
        read(stubs, unique_topic, offset=1)
    assert below.value.code() == grpc.StatusCode.OUT_OF_RANGE
    with pytest.raises(grpc.RpcError) as beyond:
        stubs.admin.DeleteRecords(pb.DeleteRecordsRequest(topic=unique_topic, before_offset=99))
    assert beyond.value.code() == grpc.StatusCode.OUT_OF_RANGE


def test_empty_value_is_a_value_and_null_is_a_tombstone(
    shared_server, connect, unique_topic
) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    create(stubs, unique_topic, cleanup_policy="compact", segment_bytes="14")
    publish(stubs, unique_topic, (b"a", b""))
    publish(stubs, unique_topic, (b"b", b"1"))
    publish(stubs, unique_topic, (b"b", None))
    publish(stubs, unique_topic, (None, b"keyless"))
    publish(stubs, unique_topic, (b"tail", b"x"))
    stubs.admin.Compact(pb.CompactRequest(topic=unique_topic, wait=True))
    got = read(stubs, unique_topic)
    # the tombstone survives this pass (delete.retention.ms); the keyless record is dropped
    assert got == [(0, b"a", b""), (2, b"b", None), (4, b"tail", b"x")]


def test_follow_and_timestamp_reads(shared_server, connect, unique_topic) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    create(stubs, unique_topic)
    publish(stubs, unique_topic, (b"k", b"old"))
    assert read(stubs, unique_topic, timestamp_ms=int(time.time() * 1000) + 60_000) == []
    stream = stubs.log.Read(pb.ReadRequest(topic=unique_topic, position=pb.LATEST, follow=True))
    time.sleep(0.2)
    publish(stubs, unique_topic, (b"k", b"new"))
    assert [m.value for m in next(stream).messages] == [b"new"]
    stream.cancel()


def _segment_files(data_dir: Path, topic: str) -> list[Path]:
    return sorted((data_dir / "segments" / topic).glob("*.log"))


@pytest.mark.slow
def test_corrupted_tail_is_truncated_at_start(server, connect) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(server.address)
    create(stubs, "t")
    for i in range(3):
        publish(stubs, "t", (b"k", b"value-%d" % i))
    server.kill()
    active = _segment_files(server.data_dir, "t")[-1]
    data = bytearray(active.read_bytes())
    data[-3] ^= 0xFF  # flip a bit in the last record
    active.write_bytes(bytes(data) + b"\x00\x00\x00\x20torn")  # and a torn write after it
    server.start()
    stubs = connect(server.address)
    assert [v for _, _, v in read(stubs, "t")] == [b"value-0", b"value-1"]
    assert publish(stubs, "t", (b"k", b"again")) == [2]


@pytest.mark.slow
def test_leftover_cleaned_and_deleted_files_are_resolved_at_start(server, connect) -> None:  # type: ignore[no-untyped-def]
    """A crash before the swap: a stray .cleaned goes, the original data stays."""
    stubs = connect(server.address)
    create(stubs, "t", retention_ms="-1", segment_bytes="14")  # no background cleaning
    seed(stubs, "t")
    assert server.stop() == 0
    first = _segment_files(server.data_dir, "t")[0]
    first.with_suffix(".cleaned").write_bytes(b"partial rewrite")
    (first.parent / (first.name + ".deleted")).write_bytes(b"old")
    server.start()
    stubs = connect(server.address)
    assert [o for o, _, _ in read(stubs, "t")] == list(range(11))
    leftovers = [
        p.name for p in first.parent.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")
    ]
    assert leftovers == []


def test_cleaner_figures_on_the_metrics_endpoint(server_factory, connect) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = server_factory(extra_args=["--metrics-listen", f"127.0.0.1:{port}"])
    stubs = connect(srv.address)
    create(stubs, "t", cleanup_policy="compact", segment_bytes="14")
    seed(stubs, "t")
    stubs.admin.Compact(pb.CompactRequest(topic="t", wait=True))
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert "compactlog_log_cleaner_passes_total 1.0" in body
    for name in (
        "max_buffer_utilization_ratio",
        "recopy_ratio",
        "max_clean_time_seconds",
        "max_dirty_ratio",
        "time_since_last_run_seconds",
        "uncleanable_partitions",
    ):
        assert f"compactlog_log_cleaner_{name}" in body
    assert 'compactlog_compaction_succeeded_total{topic="t"} 1.0' in body


def consume(stubs, topic: str, sub: str, **kw: object) -> list[tuple[int, bytes | None]]:  # type: ignore[no-untyped-def]
    resp = stubs.log.Consume(pb.ConsumeRequest(topic=topic, subscription=sub, **kw), timeout=30)
    return [(m.id.entry_id, m.value) for m in resp.messages]


def ack(stubs, topic: str, sub: str, offset: int, cumulative: bool = False) -> None:  # type: ignore[no-untyped-def]
    stubs.log.Acknowledge(
        pb.AcknowledgeRequest(
            topic=topic,
            subscription=sub,
            id=pb.MessageId(ledger_id=0, entry_id=offset),
            cumulative=cumulative,
        )
    )


def test_consume_and_acknowledge_offsets(shared_server, connect, unique_topic) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    create(stubs, unique_topic)
    for i in range(5):
        publish(stubs, unique_topic, (b"k", b"%d" % i))
    assert consume(stubs, unique_topic, "g", max_messages=3) == [(0, b"0"), (1, b"1"), (2, b"2")]
    ack(stubs, unique_topic, "g", 1, cumulative=True)
    with pytest.raises(grpc.RpcError) as early:
        ack(stubs, unique_topic, "g", 3)  # not delivered yet: refused, nothing moves
    assert early.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert consume(stubs, unique_topic, "g") == [(3, b"3"), (4, b"4")]  # 2 was delivered
    ack(stubs, unique_topic, "g", 3)
    # a new consumer gets every unacknowledged offset again (2, 4), never an acked one
    again = consume(stubs, unique_topic, "g", redeliver_unacknowledged=True)
    assert again == [(2, b"2"), (4, b"4")]
    assert consume(stubs, unique_topic, "late", initial_position=pb.LATEST, wait_ms=100) == []
    publish(stubs, unique_topic, (b"k", b"5"))
    assert consume(stubs, unique_topic, "late") == [(5, b"5")]
    with pytest.raises(grpc.RpcError) as wrong:
        stubs.log.Acknowledge(
            pb.AcknowledgeRequest(
                topic=unique_topic, subscription="g", id=pb.MessageId(ledger_id=3, entry_id=1)
            )
        )
    assert wrong.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # never delivered


def test_acks_cross_offsets_removed_by_cleaning(shared_server, connect, unique_topic) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(shared_server.address)
    create(stubs, unique_topic, cleanup_policy="compact", segment_bytes="14")
    seed(stubs, unique_topic)  # cleaning removes offsets 0, 1, 2 and 5
    stubs.admin.Compact(pb.CompactRequest(topic=unique_topic, wait=True))
    got = consume(stubs, unique_topic, "g", max_messages=3)
    assert [o for o, _ in got] == [3, 4, 6]
    for offset in (6, 4, 3):  # individually, in any order: mark-delete steps over the gaps
        ack(stubs, unique_topic, "g", offset)
    assert [o for o, _ in consume(stubs, unique_topic, "g", redeliver_unacknowledged=True)] == [
        7,
        8,
        9,
        10,
    ]


@pytest.mark.slow
def test_consumer_offsets_survive_a_crash(server, connect) -> None:  # type: ignore[no-untyped-def]
    stubs = connect(server.address)
    create(stubs, "t")
    for i in range(4):
        publish(stubs, "t", (b"k", b"%d" % i))
    consume(stubs, "t", "g")
    ack(stubs, "t", "g", 1, cumulative=True)
    ack(stubs, "t", "g", 3)
    server.kill()
    server.start()
    stubs = connect(server.address)
    assert consume(stubs, "t", "g") == [(2, b"2")]
