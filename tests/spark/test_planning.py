"""Planning against a real server, without Spark: topic partitions and their bounds,
ranges cut at about ``entriesPerPartition`` entries that together read exactly what one
gRPC Read returns, on both kinds."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from compactlog.errors import TopicNotFound
from compactlog.records import MessageId
from compactlog.spark.columns import arrow_schema
from compactlog.spark.offsets import OffsetSpec, TopicPartition
from compactlog.spark.options import connection
from compactlog.spark.planning import cut_many, discover, partition_count, plan, resolve
from compactlog.spark.source import read_range
from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Wire, arrow_row, records

ARROW_SCHEMA = arrow_schema()


def test_cut_points_follow_the_ledgers() -> None:
    spans = [(1, 0, 63), (3, 0, 63), (5, 0, 10)]
    assert cut_many(spans, MessageId(0, 0), MessageId(5, 11), 50) == [
        MessageId(1, 50),
        MessageId(3, 36),
    ]
    assert cut_many(spans, MessageId(1, 30), MessageId(5, 5), 50) == [
        MessageId(3, 16),
        MessageId(5, 2),
    ]
    assert cut_many([(0, 10, 99)], MessageId(0, 10), MessageId(0, 100), 30) == [
        MessageId(0, 40),
        MessageId(0, 70),
    ]


def test_partitioned_topics_are_read_per_partition() -> None:
    """``TopicInfo.partitions`` is looked up defensively: absent today, N tomorrow."""
    assert partition_count(pb.TopicInfo(name="t")) == 0
    assert partition_count(SimpleNamespace(partitions=3)) == 3  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", [pb.LEDGER, pb.SEGMENTED])
@pytest.mark.parametrize("compacted", [False, True])
def test_ranges_read_exactly_the_topic(
    wire: Wire, kind: pb.TopicKind.ValueType, compacted: bool
) -> None:
    topic = f"plan-{pb.TopicKind.Name(kind).lower()}-{compacted}"
    config = (
        {"ledger_max_entries": "10"}
        if kind == pb.LEDGER
        else {"segment_bytes": "1024", "cleanup_policy": "compact"}
    )
    wire.create(topic, kind=kind, **config)
    wire.publish(topic, records(95, 12), per_request=5)
    if compacted:
        wire.compact(topic)
        wire.publish(topic, records(12, 12, start=95))
    conn = connection({"server": wire.address})
    with conn.calls() as calls:
        shapes = discover(calls, [topic])
        tp = TopicPartition(topic, -1)
        assert list(shapes) == [tp]
        starts = resolve(OffsetSpec("earliest"), shapes)
        ends = resolve(OffsetSpec("latest"), shapes)
        ranges = plan(calls, shapes, starts, ends, compacted, 25)
        total = 107 if compacted else 95
        assert len(ranges) == -(-total // 25)  # cut every 25 entries
        assert all(a.end == b.start for a, b in itertools.pairwise(ranges))
        got = [
            arrow_row(row)
            for r in ranges
            for batch in read_range(calls, r, True, ARROW_SCHEMA)
            for row in batch.to_pylist()
        ]
    assert got == wire.read(topic, compacted)


def test_unknown_topic_is_named(wire: Wire) -> None:
    calls = connection({"server": wire.address}).calls()
    with calls, pytest.raises(TopicNotFound) as info:
        discover(calls, ["plan-nope"])
    where = f"compactlog server {wire.address}"
    assert str(info.value) == f"topic 'plan-nope' does not exist on {where}"
