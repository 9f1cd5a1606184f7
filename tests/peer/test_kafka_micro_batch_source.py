"""Ports of Spark's KafkaMicroBatchSourceSuite (and its data-loss siblings,
KafkaDontFailOnDataLossSuite and KafkaRelationSuite) against compactlog: each test
names the upstream test it follows. Behaviour only; SEGMENTED topics stand for Kafka
topics (offsets are ``entry_id``). Already ported elsewhere: "starting offset is latest
by default" and "Trigger.AvailableNow" (tests/spark/test_streaming.py), "bad batch query
options" and "get offsets from case insensitive parameters"
(tests/spark/test_kafka_checks.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compactlog.v1 import compactlog_pb2 as pb
from tests.spark.conftest import Wire, source

from .conftest import Stream, delete_before

pytestmark = pytest.mark.spark


def numbered(wire: Wire, topic: str, start: int, stop: int) -> None:
    """Messages ``start..stop-1`` whose key and value are their number (offset, too)."""
    wire.publish(topic, [pb.Record(key=b"%d" % i, value=b"%d" % i) for i in range(start, stop)])


def offsets(rows: list[tuple[int, Any, Any]]) -> list[int]:
    return [r[0] for r in rows]


@pytest.mark.slow
def test_specific_offsets_then_restart(spark: Any, wire: Wire, tmp_path: Path) -> None:
    """ "assign from specific offsets (failOnDataLoss: true)": a bare offset as the start,
    then StopStream/StartStream: the restarted query goes on from its checkpoint, nothing
    twice; its startingOffsets no longer apply."""
    topic = wire.create("pk-specific", kind=pb.SEGMENTED)
    numbered(wire, topic, 0, 10)
    stream = Stream(spark, wire, topic, tmp_path, startingOffsets='{"pk-specific": {"-1": 4}}')
    stream.run()
    assert offsets(stream.rows()) == list(range(4, 10))
    numbered(wire, topic, 10, 15)
    stream.run()
    assert offsets(stream.rows()) == list(range(4, 15))
    stream.run()
    assert offsets(stream.rows()) == list(range(4, 15))


def test_null_keys_and_values(spark: Any, wire: Wire, tmp_path: Path) -> None:
    """ "SPARK-27494: read kafka record containing null key/values." """
    topic = wire.create("pk-nulls", kind=pb.SEGMENTED)
    wire.publish(topic, [pb.Record(value=b"v"), pb.Record(key=b"k"), pb.Record()])
    stream = Stream(spark, wire, topic, tmp_path, startingOffsets="earliest")
    stream.run()
    assert stream.rows() == [(0, None, b"v"), (1, b"k", None), (2, None, None)]


@pytest.mark.slow
def test_stream_data_loss(spark: Any, wire: Wire, tmp_path: Path) -> None:
    """ "failOnDataLoss=false should not return duplicated records: microbatch v2" and the
    failing side of KafkaMicroBatchSourceSuite's data-loss handling: offsets removed by
    retention while the query was stopped fail it, naming the topic partition and the
    offsets; with failOnDataLoss=false it goes on from the log start, nothing twice."""
    topic = wire.create("pk-loss-stream", kind=pb.SEGMENTED)
    numbered(wire, topic, 0, 10)
    stream = Stream(spark, wire, topic, tmp_path, startingOffsets="earliest")
    stream.run()
    numbered(wire, topic, 10, 20)
    delete_before(wire, topic, 15)
    with pytest.raises(Exception, match="topic 'pk-loss-stream' partition -1: offsets 10 to 14"):
        stream.run()
    stream.run(failOnDataLoss="false")
    assert offsets(stream.rows()) == [*range(10), *range(15, 20)]


def test_batch_data_loss(spark: Any, wire: Wire) -> None:
    """ "failOnDataLoss=false should not return duplicated records: batch v2": a batch
    start below the log start fails by default, and reads from the log start with
    failOnDataLoss=false; ``earliest`` is the log start, never a loss."""
    topic = wire.create("pk-loss-batch", kind=pb.SEGMENTED)
    numbered(wire, topic, 0, 10)
    delete_before(wire, topic, 5)
    start = '{"pk-loss-batch": {"-1": 2}}'
    with pytest.raises(Exception, match=r"offsets 2 to 4 are gone .*failOnDataLoss to false"):
        source(spark, wire.address, topic, startingOffsets=start).collect()
    df = source(spark, wire.address, topic, startingOffsets=start, failOnDataLoss="false")
    assert sorted(r.entry_id for r in df.collect()) == list(range(5, 10))
    assert source(spark, wire.address, topic).count() == 5


@pytest.mark.parametrize("fail", [True, False])
def test_removed_while_the_query_runs(spark: Any, wire: Wire, fail: bool) -> None:
    """ "delete a topic when a Spark job is running" / the data-loss stress suites:
    retention passes a task's start after the query was planned, before it reads."""
    from compactlog.spark.source import CompactlogDataSource

    topic = wire.create(f"pk-loss-task-{fail}", kind=pb.SEGMENTED)
    numbered(wire, topic, 0, 10)
    options = {"server": wire.address, "topic": topic, "failOnDataLoss": str(fail).lower()}
    data_source = CompactlogDataSource(options)
    reader = data_source.reader(spark.createDataFrame([], data_source.schema()).schema)
    parts = reader.partitions()
    delete_before(wire, topic, 6)
    rows = lambda: [r for p in parts for b in reader.read(p) for r in b.to_pylist()]  # noqa: E731
    if fail:
        with pytest.raises(Exception, match=f"topic '{topic}' partition -1: offsets 0 to 5"):
            rows()
    else:
        assert [r["entry_id"] for r in rows()] == [6, 7, 8, 9]
