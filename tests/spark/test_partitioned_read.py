"""The ``compactlog`` source on a partitioned topic (CONTRACT sections 9 and 14): every
partition read in parallel, one Spark partition (at least) per topic partition, with the
name given in the option as ``topic`` and the partition index as ``partition``."""

from __future__ import annotations

from typing import Any

import pytest

from compactlog.partitioner import partition_for_key
from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Wire, source

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("kind", [pb.LEDGER, pb.SEGMENTED])
def test_every_partition_in_parallel(spark: Any, wire: Wire, kind: int) -> None:
    topic = f"sp-parts-{kind}"
    cfg = {"min.cleanable.dirty.ratio": "1"} if kind == pb.SEGMENTED else {}
    wire.admin.CreateTopic(pb.CreateTopicRequest(name=topic, kind=kind, partitions=3, config=cfg))
    sent = [pb.Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(90)]
    wire.publish(topic, sent, per_request=30)
    df = source(spark, wire.address, topic)
    assert df.rdd.getNumPartitions() >= 3
    rows = df.select("key", "topic", "partition").collect()
    assert len(rows) == 90
    assert {r.topic for r in rows} == {topic}
    for r in rows:
        assert r.partition == partition_for_key(bytes(r.key), 3)
    for p in range(3):  # each partition's rows are the partition topic's messages
        own = wire.read(f"{topic}-partition-{p}")
        assert sorted(bytes(r.key) for r in rows if r.partition == p) == sorted(
            row[0] for row in own if row[0] is not None
        )
