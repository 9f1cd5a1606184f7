"""Planning against a real server, without Spark: topic partitions and their bounds,
ranges cut at about ``entriesPerPartition`` entries or into one a core, that together
read exactly what one gRPC Read returns, on both kinds."""

from __future__ import annotations

import itertools
import os
from types import SimpleNamespace

import pytest

from compactlog.errors import TopicNotFound
from compactlog.records import MessageId
from compactlog.spark.columns import arrow_schema
from compactlog.spark.offsets import OffsetSpec, TopicPartition
from compactlog.spark.options import connection
from compactlog.spark.planning import cut_many, discover, partition_count, plan, resolve
from compactlog.spark.sizing import MAX_ENTRIES, MIN_ENTRIES, Sizing, known_cores
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


def test_a_range_a_core_within_bounds() -> None:
    """Without the option: the query's entries over the cores, 100k to 5M a partition."""
    assert Sizing(2).entries(1_000_000) == 500_000
    assert Sizing(8).entries(1_000_000) == 125_000
    assert Sizing(2).entries(30_000) == MIN_ENTRIES  # small reads stay whole
    assert Sizing(2).entries(0) == MIN_ENTRIES
    assert Sizing(4).entries(10**9) == MAX_ENTRIES
    assert Sizing(2, fixed=7).entries(1_000_000) == 7  # the option wins
    assert Sizing(4).entries(1_000_000, logs=4) == MAX_ENTRIES  # a range a partition
    assert Sizing(4).entries(1_000_000, logs=2) == 250_000
    # never a cut below the former fixed 100,000: no read or micro-batch gets more
    # Spark partitions than it did
    grid = [(c, t, n) for c in (1, 2, 8, 64) for t in (0, 10**5, 10**9) for n in (1, 4, 99)]
    assert all(Sizing(c).entries(t, n) >= MIN_ENTRIES for c, t, n in grid)
    assert known_cores(3) == 3
    assert known_cores(0) == (os.cpu_count() or 1)


def test_min_partitions_cuts_finer_until_there_are_that_many() -> None:
    """Kafka source's ``minPartitions``: below that many topic partitions, a cut fine
    enough for at least that many ranges, whatever the rule or the option said."""
    assert Sizing(2, min_partitions=5).entries(1000) == 200  # below MIN_ENTRIES
    assert Sizing(2, min_partitions=2).entries(10**6) == 500_000  # the rule suffices
    assert Sizing(2, fixed=100, min_partitions=5).entries(1000) == 100
    assert Sizing(2, fixed=500, min_partitions=5).entries(1000) == 200
    assert Sizing(2, min_partitions=5).entries(3) == 1  # no range is cut below an entry
    assert Sizing(2, min_partitions=4).entries(10**6, logs=4) == MAX_ENTRIES  # enough already
    # uneven topic partitions, each cut by the same size, still make enough ranges
    for wanted in (2, 3, 7, 64):
        for sizes in ([1000], [999, 1], [10, 10, 500], [7, 7], [1] * 3 + [100]):
            total = sum(sizes)
            size = Sizing(2, min_partitions=wanted).entries(total, len(sizes))
            made = sum(-(-n // size) for n in sizes)
            assert made >= min(wanted, total), (wanted, sizes, size)


# fixed: entriesPerPartition=25; cores: three cores, no lower bound
SIZINGS = {"fixed": Sizing(2, fixed=25), "cores": Sizing(3, least=1)}


@pytest.mark.parametrize("kind", [pb.LEDGER, pb.SEGMENTED])
@pytest.mark.parametrize("compacted", [False, True])
@pytest.mark.parametrize("sizing", SIZINGS)
def test_ranges_read_exactly_the_topic(
    wire: Wire, kind: pb.TopicKind.ValueType, compacted: bool, sizing: str
) -> None:
    topic = f"plan-{pb.TopicKind.Name(kind).lower()}-{compacted}-{sizing}"
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
        ranges = plan(calls, shapes, starts, ends, compacted, SIZINGS[sizing])
        total = 107 if compacted else 95
        assert len(ranges) == (-(-total // 25) if sizing == "fixed" else 3)
        assert all(a.end == b.start for a, b in itertools.pairwise(ranges))
        got = [
            arrow_row(row)
            for r in ranges
            for batch in read_range(calls, r, True, ARROW_SCHEMA)
            for row in batch.to_pylist()
        ]
    assert got == wire.read(topic, compacted)


def test_partitions_of_a_topic_split_only_below_the_cores(wire: Wire) -> None:
    """A partitioned topic is a range a partition while they are at least the cores;
    with more cores than partitions they are cut, all by one size."""
    topic = "plan-parts"
    wire.admin.CreateTopic(pb.CreateTopicRequest(name=topic, partitions=3))
    wire.publish(topic, [pb.Record(key=b"k%d" % i, value=b"v") for i in range(90)])
    with connection({"server": wire.address}).calls() as calls:
        shapes = discover(calls, [topic])
        starts = resolve(OffsetSpec("earliest"), shapes)
        ends = resolve(OffsetSpec("latest"), shapes)
        sizes = {tp: len(wire.read(tp.log)) for tp in shapes}
        assert sum(sizes.values()) == 90
        for cores in (2, 3):
            ranges = plan(calls, shapes, starts, ends, False, Sizing(cores, least=1))
            assert sorted(r.tp for r in ranges) == sorted(shapes)
        ranges = plan(calls, shapes, starts, ends, False, Sizing(9, least=1))
        assert len(ranges) == sum(-(-n // 10) for n in sizes.values())  # 90 / 9 a range


def test_unknown_topic_is_named(wire: Wire) -> None:
    calls = connection({"server": wire.address}).calls()
    with calls, pytest.raises(TopicNotFound) as info:
        discover(calls, ["plan-nope"])
    where = f"compactlog server {wire.address}"
    assert str(info.value) == f"topic 'plan-nope' does not exist on {where}"
