"""``spark.read.format("compactlog")`` returns what a gRPC Read returns: raw and compacted
views of LEDGER topics (several ledgers, a compacted ledger plus a raw tail), SEGMENTED
topics before and after a cleaner pass, empty topics, keyless records, null values,
properties and times; offset ranges; several topics in one query; readable failures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Wire, df_rows, records, source

pytestmark = pytest.mark.spark

COLUMNS = (
    "struct<key:binary,value:binary,topic:string,partition:int,ledger_id:bigint,"
    "entry_id:bigint,publish_time:timestamp,event_time:timestamp,"
    "properties:map<string,string>>"
)


def test_ledger_views_equal_grpc_read(spark: Any, wire: Wire) -> None:
    topic = wire.create("sr-ledger", ledger_max_entries="64")
    wire.publish(topic, records(300, 40), per_request=50)
    wire.compact(topic)
    wire.publish(topic, records(90, 40, start=300))  # raw tail after the horizon
    for compacted in (False, True):
        df = source(
            spark,
            wire.address,
            topic,
            readCompacted=str(compacted).lower(),
            entriesPerPartition="100",
        )
        assert df.schema.simpleString() == COLUMNS
        assert df_rows(df) == wire.read(topic, compacted)
    raw = source(spark, wire.address, topic, entriesPerPartition="100")
    assert raw.rdd.getNumPartitions() == 4  # 390 entries over 7 ledgers, 100 a partition


def test_segmented_views_equal_grpc_read(spark: Any, wire: Wire) -> None:
    topic = wire.create(
        "sr-seg",
        kind=pb.SEGMENTED,
        cleanup_policy="compact",
        segment_bytes="2048",
        # 1: the background cleaner never picks it, so only the Compact below cleans.
        min_cleanable_dirty_ratio="1",
    )
    wire.publish(topic, records(250, 20), per_request=10)  # segments roll
    assert df_rows(source(spark, wire.address, topic, entriesPerPartition="37")) == wire.read(topic)
    wire.compact(topic)  # offsets now have gaps
    cleaned = wire.read(topic, True)
    assert len(cleaned) < 250
    df = source(spark, wire.address, topic, readCompacted="true", entriesPerPartition="37")
    assert df_rows(df) == cleaned


def test_empty_and_fully_deleted_topics(spark: Any, wire: Wire) -> None:
    wire.create("sr-empty")
    wire.create("sr-empty-seg", kind=pb.SEGMENTED)
    wire.create("sr-deleted")
    wire.publish("sr-deleted", [pb.Record(key=b"a", value=b"1"), pb.Record(key=b"a")])
    wire.compact("sr-deleted")
    df = source(spark, wire.address, "sr-empty,sr-empty-seg,sr-deleted", readCompacted="true")
    assert df_rows(df) == []
    assert len(df_rows(source(spark, wire.address, "sr-deleted"))) == 2


def test_offset_ranges_and_several_topics(spark: Any, wire: Wire) -> None:
    ledger = wire.create("sr-range", ledger_max_entries="10")
    wire.publish(ledger, records(35, 9), per_request=5)
    segmented = wire.create("sr-range-seg", kind=pb.SEGMENTED)
    wire.publish(segmented, records(20, 5))
    rows = wire.read(ledger)
    seg_rows = wire.read(segmented)
    assert len({r[4] for r in rows}) == 4  # four ledgers

    def pos(row: Any) -> str:
        return f"{row[4]}:{row[5]}"

    start = {ledger: {"-1": pos(rows[7])}, segmented: {"-1": "0:5"}}
    end = {ledger: {"-1": pos(rows[23])}, segmented: {"-1": "0:12"}}
    df = source(
        spark,
        wire.address,
        f"{ledger}, {segmented}",
        startingOffsets=json.dumps(start),
        endingOffsets=json.dumps(end),
        entriesPerPartition="4",
    )
    assert df_rows(df) == sorted(rows[7:23] + seg_rows[5:12], key=lambda r: r[2])

    # A start between stored ids (past a ledger's last entry) reads from the next one;
    # topics the JSON leaves out take the default (earliest); "latest" ends now.
    after_first_ledger = f"{rows[0][4]}:10"
    df = source(
        spark,
        wire.address,
        f"{ledger},{segmented}",
        startingOffsets=json.dumps({ledger: {"-1": after_first_ledger}}),
        endingOffsets="latest",
    )
    assert df_rows(df) == sorted(rows[10:] + seg_rows, key=lambda r: r[2])
    # a start at the end reads nothing ("latest" as a batch start is refused, as by
    # Kafka's source: tests/spark/test_kafka_checks.py)
    at_end = json.dumps({ledger: {"-1": f"{rows[-1][4]}:{rows[-1][5] + 1}"}})
    assert df_rows(source(spark, wire.address, ledger, startingOffsets=at_end)) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "sr-no-such-topic"}, "topic 'sr-no-such-topic' does not exist"),
        ({}, "needs option 'topic'"),
    ],
)
def test_query_failures_name_the_cause(
    spark: Any, wire: Wire, options: dict[str, str], message: str
) -> None:
    """Every other mistake is checked the same way (tests/spark/test_options.py)."""
    reader = spark.read.format("compactlog").option("server", wire.address)
    with pytest.raises(Exception, match=message):
        reader.options(**options).load().collect()


def test_snapshot_is_fixed_at_planning(spark: Any, wire: Wire) -> None:
    from compactlog.spark.source import CompactlogDataSource

    topic = wire.create("sr-snapshot", ledger_max_entries="10")
    wire.publish(topic, records(25, 5))
    data_source = CompactlogDataSource({"server": wire.address, "topic": topic})
    reader = data_source.reader(spark.createDataFrame([], data_source.schema()).schema)
    parts = reader.partitions()
    wire.publish(topic, records(25, 5, start=25))
    rows = [r for p in parts for batch in reader.read(p) for r in batch.to_pylist()]
    assert [(r["ledger_id"], r["entry_id"]) for r in rows] == [
        row[4:6] for row in wire.read(topic)[:25]
    ]


def test_import_registers_with_the_active_session(spark: Any, wire: Wire) -> None:
    import importlib

    import compactlog.spark

    fresh = spark.newSession()  # registrations are per session: none here yet
    fresh.createDataFrame([(1,)], "a INT")  # makes it the active session
    try:
        importlib.reload(compactlog.spark)
        df = source(fresh, wire.address, "sr-snapshot")
        assert df.count() == 50
    finally:
        spark.createDataFrame([(1,)], "a INT")  # the shared session active again
