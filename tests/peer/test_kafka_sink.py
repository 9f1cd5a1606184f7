"""Ports of Spark's KafkaSinkSuite against compactlog: batch and streaming writes, null
keys, the topic column against the option, refused columns. Each test names the
upstream test it follows; behaviour only. The streaming writes read a topic through the
source (upstream uses a MemoryStream) and publish each micro-batch, at least once.
Already ported: "batch - unsupported save modes" and "batch - write to kafka"
(tests/spark/test_write.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.spark.conftest import Wire

from .conftest import QUERY_TIMEOUT_S

pytestmark = pytest.mark.spark


def stream_of(spark: Any, wire: Wire, topic: str) -> Any:
    return (
        spark.readStream.format("compactlog")
        .option("server", wire.address)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def publish_stream(
    df: Any, wire: Wire, checkpoint: Path, mode: str = "append", **opts: str
) -> None:
    """One ``availableNow`` run of ``df.writeStream.format("compactlog")``."""
    query = (
        df.writeStream.format("compactlog")
        .outputMode(mode)
        .option("server", wire.address)
        .option("checkpointLocation", str(checkpoint))
        .options(**opts)
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        query.stop()


def pairs(wire: Wire, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    return [(r[0], r[1]) for r in wire.read(topic)]


def test_streaming_write_with_topic_field(spark: Any, wire: Wire, tmp_path: Path) -> None:
    """ "streaming - write to kafka with topic field": each micro-batch published, in
    order, null keys kept keyless; a restarted query publishes only the new rows."""
    origin = wire.create("pks-origin", kind=pb.SEGMENTED)
    copy = wire.create("pks-copy")
    wire.publish(origin, [pb.Record(key=b"a", value=b"1"), pb.Record(value=b"keyless")])
    df = stream_of(spark, wire, origin).selectExpr("key", "value", "'pks-copy' AS topic")
    publish_stream(df, wire, tmp_path / "cp")
    assert pairs(wire, copy) == [(b"a", b"1"), (None, b"keyless")]
    wire.publish(origin, [pb.Record(key=b"b", value=b"2"), pb.Record(key=b"a")])
    publish_stream(df, wire, tmp_path / "cp")
    assert pairs(wire, copy) == pairs(wire, origin)


def test_streaming_topic_option_wins(spark: Any, wire: Wire, tmp_path: Path) -> None:
    """ "streaming - write w/o topic field, with topic option" and "streaming - topic
    field and topic option": the option routes every row."""
    origin = wire.create("pks-origin-2", kind=pb.SEGMENTED)
    target = wire.create("pks-target-2", kind=pb.SEGMENTED)
    wire.publish(origin, [pb.Record(key=b"k%d" % i, value=b"%d" % i) for i in range(5)])
    stream = stream_of(spark, wire, origin)
    publish_stream(stream.select("value"), wire, tmp_path / "a", topic=target)
    with_column = stream.selectExpr("key", "value", "'pks-elsewhere' AS topic")
    publish_stream(with_column, wire, tmp_path / "b", topic=target)
    want = [(None, b"%d" % i) for i in range(5)] + [(b"k%d" % i, b"%d" % i) for i in range(5)]
    assert pairs(wire, target) == want


def test_streaming_write_aggregation(spark: Any, wire: Wire, tmp_path: Path) -> None:
    """ "streaming - write aggregation w/o topic field, with topic option": complete mode
    publishes every row of each batch's result, as Kafka's sink. Update mode, which
    Kafka's sink also takes, Spark refuses for every Python data source."""
    origin = wire.create("pks-agg", kind=pb.SEGMENTED)
    target = wire.create("pks-counts", kind=pb.SEGMENTED)
    wire.publish(origin, [pb.Record(key=k, value=b"x") for k in (b"a", b"b", b"a")])
    counts = (
        stream_of(spark, wire, origin)
        .groupBy("key")
        .count()
        .selectExpr("key", "CAST(count AS STRING) AS value")
    )
    publish_stream(counts, wire, tmp_path / "cp", mode="complete", topic=target)
    assert sorted(pairs(wire, target)) == [(b"a", b"2"), (b"b", b"1")]
    wire.publish(origin, [pb.Record(key=b"a", value=b"x")])
    publish_stream(counts, wire, tmp_path / "cp", mode="complete", topic=target)
    assert sorted(pairs(wire, target)[2:]) == [(b"a", b"3"), (b"b", b"1")]
    with pytest.raises(Exception, match="compactlog does not support Update mode"):
        publish_stream(counts, wire, tmp_path / "update", mode="update", topic=target)


@pytest.fixture(scope="module")
def refusal_topics(shared_server: Any) -> str:
    wire = Wire(shared_server.address)
    wire.create("pks-bad", kind=pb.SEGMENTED)
    origin = wire.create("pks-src", kind=pb.SEGMENTED)
    wire.close()
    return origin


@pytest.mark.parametrize(
    ("columns", "options", "message"),
    [
        ("key", {"topic": "pks-bad"}, "needs a 'value' column"),
        ("key, CAST(entry_id AS INT) AS value", {"topic": "pks-bad"}, "'value' must be binary"),
        ("key, value", {}, "needs a 'topic' option or a 'topic' column"),
        ("key, value", {"topic": "pks-nope"}, "topic 'pks-nope' does not exist"),
        ("key, value", {"topic": "pks-bad", "kafka.acks": "1"}, "unknown option 'kafka.acks'"),
    ],
)
def test_streaming_write_refusals(
    spark: Any,
    wire: Wire,
    tmp_path: Path,
    refusal_topics: str,
    columns: str,
    options: dict[str, str],
    message: str,
) -> None:
    """ "streaming - write data with bad schema", "streaming - write data with valid
    schema but wrong types" and "streaming - write to non-existing topic"; an unknown
    option is refused too (Kafka's sink passes ``kafka.*`` to its producer)."""
    df = stream_of(spark, wire, refusal_topics).selectExpr(*columns.split(", "))
    with pytest.raises(Exception, match=message):
        publish_stream(df, wire, tmp_path / "cp", **options)


def test_batch_null_topic_without_option(spark: Any, wire: Wire) -> None:
    """ "batch - null topic field value, and no topic option"."""
    df = spark.createDataFrame([("k", "v", None)], "key STRING, value STRING, topic STRING")
    writer = df.write.format("compactlog").mode("append").option("server", wire.address)
    with pytest.raises(Exception, match="a row has no topic"):
        writer.save()
