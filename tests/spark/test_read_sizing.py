"""How many Spark partitions a batch read gets (``compactlog.spark.sizing``): one a core
of the session (``defaultParallelism``, 2 on the tests' ``local[2]``) for a big topic,
the ``entriesPerPartition`` option still winning, and at least ``minPartitions`` where
asked. Planned by Spark itself, so the session's cores must travel with the registered
source into Spark's planner worker."""

from __future__ import annotations

from typing import Any

import pytest

from compactlog.spark.sizing import MIN_ENTRIES
from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Wire, source

pytestmark = pytest.mark.spark

ENTRIES = 5 * MIN_ENTRIES // 2  # 250k: 3 partitions at the old fixed 100k, 2 now


def test_a_big_topic_is_a_partition_a_core(spark: Any, wire: Wire) -> None:
    assert spark.sparkContext.defaultParallelism == 2
    topic = wire.create("sz-cores", ledger_max_entries="40000")  # several ledgers
    batch = [pb.Record(key=b"k", value=b"v")] * 1000
    wire.publish(topic, batch * (ENTRIES // 1000), per_request=1000)
    df = source(spark, wire.address, topic)
    assert df.rdd.getNumPartitions() == 2
    assert (
        source(spark, wire.address, topic, entriesPerPartition="50000").rdd.getNumPartitions() == 5
    )


def test_min_partitions_splits_a_small_read(spark: Any, wire: Wire) -> None:
    """Kafka source's ``minPartitions``: a read too small to cut by the rule is cut into
    at least that many Spark partitions, which together read the topic exactly once."""
    topic = wire.create("sz-min", kind=pb.SEGMENTED)
    wire.publish(topic, [pb.Record(key=b"k%d" % i, value=b"v") for i in range(1000)])
    assert source(spark, wire.address, topic).rdd.getNumPartitions() == 1
    df = source(spark, wire.address, topic, minPartitions="4")
    assert df.rdd.getNumPartitions() == 4
    assert sorted(r.entry_id for r in df.select("entry_id").collect()) == list(range(1000))
    with pytest.raises(Exception, match="'minPartitions' is a whole number >= 1, not '0'"):
        source(spark, wire.address, topic, minPartitions="0").collect()
