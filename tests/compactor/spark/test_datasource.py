"""The ``compactlog`` data source reads what the gRPC Read returns: raw and compacted
views of LEDGER topics (several ledgers, a compacted ledger plus a raw tail), SEGMENTED
topics (before and after a cleaner pass), empty topics, keyless records, tombstones,
properties and event times."""

from __future__ import annotations

from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Api, df_rows

pytestmark = pytest.mark.spark


def _records(n: int, keys: int, start: int = 0) -> list[pb.Record]:
    out = []
    for i in range(start, start + n):
        r = pb.Record(properties={"i": str(i)} if i % 3 == 0 else {}, event_time_ms=1_000 + i)
        if i % 11 != 5:
            r.key = b"k%d" % (i % keys)
        if i % 7 == 3:
            pass  # null value: a tombstone when keyed
        elif i % 13 == 4:
            r.value = b""  # LEDGER: tombstone; SEGMENTED: an ordinary empty value
        else:
            r.value = b"v%d" % i
        out.append(r)
    return out


def load(spark: Any, address: str, topic: str, compacted: bool, size: int = 100) -> Any:
    return (
        spark.read.format("compactlog")
        .option("server", address)
        .option("topic", topic)
        .option("readCompacted", str(compacted).lower())
        .option("entriesPerPartition", str(size))
        .load()
    )


def test_ledger_views_equal_grpc_read(spark: Any, shared_server: Any, api: Any) -> None:
    a: Api = api(shared_server.address)
    topic = "ds-ledger"
    a.create(topic, ledger_max_entries="64")
    a.publish(topic, _records(300, 40))
    a.admin.Compact(pb.CompactRequest(topic=topic, wait=True))
    a.publish(topic, _records(90, 40, start=300))  # raw tail after the horizon
    lay = a.layout(topic)
    assert lay.compacted_ledger_id and lay.compacted_view[0].compacted
    for compacted in (False, True):
        df = load(spark, a.address, topic, compacted)
        assert df.schema.simpleString() == (
            "struct<ledger_id:bigint,entry_id:bigint,key:binary,value:binary,"
            "properties:map<string,string>,publish_time:timestamp,event_time:timestamp>"
        )
        assert df_rows(df) == a.read(topic, compacted)


def test_empty_and_fully_deleted_topics(spark: Any, shared_server: Any, api: Any) -> None:
    a: Api = api(shared_server.address)
    a.create("ds-empty")
    a.create("ds-empty-seg", kind=pb.SEGMENTED)
    a.create("ds-deleted")
    a.publish("ds-deleted", [pb.Record(key=b"a", value=b"1"), pb.Record(key=b"a")])
    a.admin.Compact(pb.CompactRequest(topic="ds-deleted", wait=True))
    for topic in ("ds-empty", "ds-empty-seg", "ds-deleted"):
        for compacted in (False, True):
            assert df_rows(load(spark, a.address, topic, compacted)) == a.read(topic, compacted)
    assert a.read("ds-deleted", True) == []


def test_segmented_views_equal_grpc_read(spark: Any, shared_server: Any, api: Any) -> None:
    a: Api = api(shared_server.address)
    topic = "ds-seg"
    a.create(
        topic,
        kind=pb.SEGMENTED,
        cleanup_policy="compact",
        segment_bytes="2048",
        # 1: the background cleaner never picks it (it needs a ratio above this), so only
        # the explicit Compact below cleans, not a pass racing the reads.
        min_cleanable_dirty_ratio="1",
    )
    records = _records(250, 20)
    for i in range(0, 250, 10):  # several batches, so that segments roll
        a.publish(topic, records[i : i + 10])
    assert df_rows(load(spark, a.address, topic, False, size=37)) == a.read(topic, False)
    a.admin.Compact(pb.CompactRequest(topic=topic, wait=True))  # offsets now have gaps
    cleaned = a.read(topic, True)
    assert len(cleaned) < 250
    assert df_rows(load(spark, a.address, topic, True, size=37)) == cleaned


def test_snapshot_is_fixed_at_planning(spark: Any, shared_server: Any, api: Any) -> None:
    from compactlog.compactor.spark.datasource import CompactlogDataSource

    a: Api = api(shared_server.address)
    topic = "ds-snapshot"
    a.create(topic, ledger_max_entries="10")
    a.publish(topic, _records(25, 5))
    source = CompactlogDataSource({"server": a.address, "topic": topic})
    reader = source.reader(spark.createDataFrame([], source.schema()).schema)
    parts = reader.partitions()
    a.publish(topic, _records(25, 5, start=25))
    rows = [r for p in parts for batch in reader.read(p) for r in batch.to_pylist()]
    assert [(r["ledger_id"], r["entry_id"]) for r in rows] == [
        row[:2] for row in a.read(topic, False)[:25]
    ]
