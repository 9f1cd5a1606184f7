"""Reading the past through a real server: ``ReadRequest.as_of`` and ``as_of_time_ms``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from compactlog.v1 import compactlog_pb2 as pb

Api = Any
Id = tuple[int, int]


def read_as_of(api: Api, topic: str, as_of: Id | None = None, **fields: Any) -> list[Any]:
    req = pb.ReadRequest(topic=topic, read_compacted=fields.pop("compacted", True), **fields)
    if as_of is not None:
        req.as_of.ledger_id, req.as_of.entry_id = as_of
    return [
        (
            (m.id.ledger_id, m.id.entry_id),
            m.key if m.HasField("key") else None,
            m.value if m.HasField("value") else None,
        )
        for resp in api.log.Read(req, timeout=30)
        for m in resp.messages
    ]


def reason_of(call: Callable[[], object]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    status = rpc_status.from_call(info.value)  # type: ignore[arg-type]
    assert status is not None
    detail = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(detail)
    return info.value.code(), detail.reason  # type: ignore[attr-defined]


def test_as_of_before_and_after_the_horizon(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic, ledger_max_entries="2")
    first = api.publish(unique_topic, (b"a", b"1"), (b"b", b"1"), (None, b"x"))
    second = api.publish(unique_topic, (b"a", b"2"), (b"b", None))
    status = api.compact(unique_topic)
    assert (status.horizon.ledger_id, status.horizon.entry_id) == second[-1]
    third = api.publish(unique_topic, (b"c", b"1"), (b"a", b""))
    # before the horizon: from the raw ledgers
    assert read_as_of(api, unique_topic, first[1]) == [
        (first[0], b"a", b"1"),
        (first[1], b"b", b"1"),
    ]
    assert read_as_of(api, unique_topic, second[0]) == [
        (first[1], b"b", b"1"),
        (second[0], b"a", b"2"),
    ]
    # at the horizon: exactly the compacted ledger
    assert read_as_of(api, unique_topic, second[-1]) == api.read(unique_topic)[:1]
    # past it: the compacted ledger merged with the raw tail up to as_of
    assert read_as_of(api, unique_topic, third[0]) == [
        (second[0], b"a", b"2"),
        (third[0], b"c", b"1"),
    ]
    assert read_as_of(api, unique_topic, third[1]) == [(third[0], b"c", b"1")]
    # an id past the end reads up to the last one; a start and a limit apply as usual
    assert read_as_of(api, unique_topic, (999, 0)) == [(third[0], b"c", b"1")]
    assert read_as_of(
        api,
        unique_topic,
        second[0],
        message_id=pb.MessageId(**dict(zip(("ledger_id", "entry_id"), second[0], strict=True))),
    ) == [(second[0], b"a", b"2")]
    assert read_as_of(api, unique_topic, third[0], max_messages=1) == [(second[0], b"a", b"2")]


def test_as_of_time_reads_the_last_id_published_at_or_before_it(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    (a1,) = api.publish(unique_topic, (b"a", b"1"))
    time.sleep(0.02)
    published = [m for r in api.log.Read(pb.ReadRequest(topic=unique_topic)) for m in r.messages]
    t1 = published[0].publish_time_ms
    time.sleep(0.02)
    api.publish(unique_topic, (b"a", b"2"))
    assert read_as_of(api, unique_topic, as_of_time_ms=t1) == [(a1, b"a", b"1")]
    assert read_as_of(api, unique_topic, as_of_time_ms=t1 - 1) == []
    assert [v for _i, _k, v in read_as_of(api, unique_topic, as_of_time_ms=t1 + 10_000)] == [b"2"]


def test_as_of_time_on_a_partitioned_topic_reads_every_partitions_past(
    shared_server: Any, ledger_api: Callable[[str], Api], unique_topic: str
) -> None:
    """Each partition's view as of the last id it had at that time, merged as a Read of
    the present is: the latest value of every key then, whichever partition it is in."""
    api = ledger_api(shared_server.address)
    api.admin.CreateTopic(pb.CreateTopicRequest(name=unique_topic, partitions=3))
    keys = [b"k%d" % i for i in range(12)]
    api.publish(unique_topic, *((k, b"old") for k in keys))
    api.publish(unique_topic, (keys[0], None), (keys[1], b"newer"))  # a delete, an update
    time.sleep(0.02)
    req = pb.ReadRequest(topic=unique_topic, read_compacted=True)
    then = max(m.publish_time_ms for r in api.log.Read(req) for m in r.messages)
    time.sleep(0.02)
    api.publish(unique_topic, *((k, b"later") for k in keys))
    api.admin.Compact(pb.CompactRequest(topic=unique_topic, wait=True))
    past = read_as_of(api, unique_topic, as_of_time_ms=then)
    assert sorted((k, v) for _i, k, v in past) == sorted(
        [(keys[1], b"newer")] + [(k, b"old") for k in keys[2:]]
    )
    per_partition = [
        row
        for i in range(3)
        for row in read_as_of(api, f"{unique_topic}-partition-{i}", as_of_time_ms=then)
    ]
    assert sorted(past) == sorted(per_partition)
    now = read_as_of(api, unique_topic, as_of_time_ms=then + 60_000)
    assert sorted(v for _i, _k, v in now) == [b"later"] * 12


def test_as_of_refusals(
    shared_server: Any, ledger_api: Callable[[str], Api], connect: Any, unique_topic: str
) -> None:
    api = ledger_api(shared_server.address)
    api.create(unique_topic)
    api.publish(unique_topic, (b"a", b"1"))
    without = pb.ReadRequest(topic=unique_topic, as_of=pb.MessageId(ledger_id=1))
    assert reason_of(lambda: list(api.log.Read(without))) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "MALFORMED_REQUEST",
    )
    follow = pb.ReadRequest(topic=unique_topic, read_compacted=True, follow=True, as_of_time_ms=1)
    assert reason_of(lambda: list(api.log.Read(follow))) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "MALFORMED_REQUEST",
    )
    seg = unique_topic + "-seg"
    api.admin.CreateTopic(pb.CreateTopicRequest(name=seg, kind=pb.SEGMENTED))
    on_seg = pb.ReadRequest(topic=seg, read_compacted=True, as_of=pb.MessageId(entry_id=0))
    assert reason_of(lambda: list(api.log.Read(on_seg))) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "WRONG_TOPIC_KIND",
    )
    parts = unique_topic + "-parts"
    api.admin.CreateTopic(pb.CreateTopicRequest(name=parts, partitions=2))
    api.publish(parts + "-partition-1", (b"a", b"1"))
    by_id = pb.ReadRequest(topic=parts, read_compacted=True, as_of=pb.MessageId(ledger_id=1))
    assert reason_of(lambda: list(api.log.Read(by_id))) == (  # an id is one partition's
        grpc.StatusCode.INVALID_ARGUMENT,
        "MALFORMED_REQUEST",
    )
    seg_parts = unique_topic + "-segparts"
    api.admin.CreateTopic(pb.CreateTopicRequest(name=seg_parts, partitions=2, kind=pb.SEGMENTED))
    on_seg_name = pb.ReadRequest(topic=seg_parts, read_compacted=True, as_of_time_ms=1)
    assert reason_of(lambda: list(api.log.Read(on_seg_name))) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "WRONG_TOPIC_KIND",
    )
    missing = pb.ReadRequest(topic=unique_topic + "-no", read_compacted=True, as_of_time_ms=1)
    assert reason_of(lambda: list(api.log.Read(missing))) == (
        grpc.StatusCode.NOT_FOUND,
        "TOPIC_NOT_FOUND",
    )
