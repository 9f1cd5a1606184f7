"""Pulsar-style compaction end to end through gRPC: what compacted readers see."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from compactlog.v1 import compactlog_pb2 as pb

Api = Any


def test_latest_value_per_key_in_id_order_ids_unchanged(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    ids = api.publish(unique_topic, (b"c", b"1"), (b"a", b"2"), (b"b", b"3"), (b"a", b"4"))
    assert api.keys(unique_topic) == [(b"c", b"1"), (b"a", b"2"), (b"b", b"3"), (b"a", b"4")]
    status = api.compact(unique_topic)
    assert status.state == pb.CompactionStatus.SUCCESS and status.compacted_ledger_id > 0
    assert (status.horizon.ledger_id, status.horizon.entry_id) == ids[-1]
    run = status.last_run
    assert (run.read, run.kept, run.removed, run.engine) == (4, 3, 1, "local")
    assert api.read(unique_topic) == [
        (ids[0], b"c", b"1"),
        (ids[2], b"b", b"3"),
        (ids[3], b"a", b"4"),
    ]
    assert len(api.read(unique_topic, compacted=False)) == 4  # raw history kept
    info = api.admin.GetTopic(pb.GetTopicRequest(name=unique_topic))
    assert info.stats.compacted_entries == 3 and info.stats.entries == 4


def test_incremental_compaction_and_raw_tail(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic, ledger_max_entries="3")
    api.publish(unique_topic, (b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"a", b"2"))
    first = api.compact(unique_topic)
    tail = api.publish(unique_topic, (b"b", b"2"), (b"d", b"1"))
    assert api.keys(unique_topic) == [
        (b"b", b"1"),
        (b"c", b"1"),
        (b"a", b"2"),
        (b"b", b"2"),
        (b"d", b"1"),
    ]  # compacted ledger, then raw tail
    assert api.last_id(unique_topic) == tail[-1]
    second = api.compact(unique_topic)
    assert second.compacted_ledger_id != first.compacted_ledger_id
    assert (second.last_run.read, second.last_run.kept) == (5, 4)
    assert api.keys(unique_topic) == [(b"c", b"1"), (b"a", b"2"), (b"b", b"2"), (b"d", b"1")]


def test_tombstones(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    api.publish(
        unique_topic,
        (b"a", b"1"),
        (b"b", b"1"),
        (b"a", None),
        (b"c", b"1"),
        (b"c", b""),
        (b"c", b"2"),
        (b"b", b""),
    )  # deleted; deleted then re-added; trailing tombstone
    status = api.compact(unique_topic)
    assert api.keys(unique_topic) == [(b"c", b"2")]
    assert (status.last_run.tombstones, status.last_run.kept) == (3, 1)


def test_everything_deleted_reads_empty_and_ends(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    api.publish(unique_topic, (b"a", b"1"), (b"b", b"1"), (b"a", None), (b"b", None))
    api.compact(unique_topic)
    assert api.read(unique_topic) == []
    assert api.last_id(unique_topic) is None
    resp = api.log.Consume(
        pb.ConsumeRequest(topic=unique_topic, subscription="s", read_compacted=True, wait_ms=100),
        timeout=10,
    )
    assert list(resp.messages) == []


def test_keyless_messages_both_settings(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    for retain in ("false", "true"):
        topic = f"{unique_topic}-{retain}"
        api.create(topic, compaction_retain_null_key=retain)
        api.publish(topic, (None, b"x"), (b"a", b"1"), (None, b"y"), (b"a", b"2"))
        run = api.compact(topic).last_run
        want = [(None, b"x"), (None, b"y"), (b"a", b"2")] if retain == "true" else [(b"a", b"2")]
        assert api.keys(topic) == want
        assert run.keyless_dropped == (0 if retain == "true" else 2)


def test_read_before_compaction_is_raw(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    api.publish(unique_topic, (b"a", b"1"), (b"a", b"2"), (None, b"z"))
    assert api.keys(unique_topic) == [(b"a", b"1"), (b"a", b"2"), (None, b"z")]
    assert api.status(unique_topic).state == pb.CompactionStatus.NOT_RUN


def test_start_ids_below_inside_between_and_above(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    ids = api.publish(
        unique_topic, (b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", b"2")
    )
    api.compact(unique_topic)
    tail = api.publish(unique_topic, (b"d", b"1"), (b"e", b"1"))
    survivors = [ids[2], ids[3], ids[4], *tail]
    lid = ids[0][0]

    def starting(at: tuple[int, int]) -> list[tuple[int, int]]:
        return [i for i, _k, _v in api.read(unique_topic, start=at)]

    assert starting((0, 0)) == survivors  # below everything
    assert starting(ids[0]) == survivors  # a removed id: resumes at the next survivor
    assert starting(ids[1]) == survivors
    assert starting(ids[3]) == survivors[1:]  # exactly on a compacted entry
    assert starting((lid, ids[4][1] + 1)) == tail  # between compacted and tail
    assert starting(tail[1]) == tail[1:]  # inside the raw tail
    assert starting((tail[1][0], tail[1][1] + 1)) == []  # above everything


def test_empty_topic_compaction(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    status = api.compact(unique_topic, wait=False)
    assert status.state == pb.CompactionStatus.SUCCESS and status.compacted_ledger_id == 0
    assert api.read(unique_topic) == [] and api.last_id(unique_topic) is None


def test_compact_wait_false_then_status(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    api.publish(unique_topic, *[(b"k%d" % (i % 10), b"v") for i in range(1000)])
    first = api.compact(unique_topic, wait=False)
    assert first.state in (pb.CompactionStatus.RUNNING, pb.CompactionStatus.SUCCESS)
    done = api.wait_status(unique_topic, lambda s: s.state == pb.CompactionStatus.SUCCESS)
    assert done.state == pb.CompactionStatus.SUCCESS and done.last_run.kept == 10


def test_consume_compacted(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    api.publish(unique_topic, (b"a", b"1"), (b"a", b"2"), (b"b", b"1"))
    api.compact(unique_topic)
    resp = api.log.Consume(
        pb.ConsumeRequest(
            topic=unique_topic, subscription="s", read_compacted=True, max_messages=10
        ),
        timeout=10,
    )
    assert [(m.key, m.value) for m in resp.messages] == [(b"a", b"2"), (b"b", b"1")]


def test_unknown_topic(
    shared_server: Any,
    ledger_api: Callable[[str], Api],
    expect_error: Callable[..., grpc.StatusCode],
) -> None:
    api = ledger_api(shared_server.address)
    assert expect_error(lambda: api.compact("no-such-topic")) == grpc.StatusCode.NOT_FOUND
    assert expect_error(lambda: api.status("no-such-topic")) == grpc.StatusCode.NOT_FOUND


def test_compact_with_nothing_to_do_keeps_the_last_runs_figures(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    api.publish(unique_topic, (b"a", b"1"), (b"b", b"2"), (b"a", b"3"))
    first = api.compact(unique_topic, wait=True)
    again = api.compact(unique_topic, wait=True)
    assert again.state == pb.CompactionStatus.SUCCESS
    assert again.last_run == first.last_run and again.last_run.kept == 2
    assert again.compacted_ledger_id == first.compacted_ledger_id
