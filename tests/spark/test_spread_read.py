"""The ``compactlog`` source on a partitioned topic whose partitions are spread over the
shards (``serve --shards 2`` with ``shards.placement = "partition"``): one Spark
partition per topic partition, each read from its slot through the front, ``topic`` the
name given and ``partition`` the index, every message once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from compactlog.partitioner import partition_for_key, partition_name
from compactlog.storage.slots import SLOT_COUNT, Placement, slot_of
from compactlog.v1 import compactlog_pb2 as pb
from tests.conftest import ServerProcess

from .conftest import Wire, df_rows, source

pytestmark = pytest.mark.spark

PLACEMENT = '"shards.placement" = "partition"\n'
PARTITIONS = 4


def spark_partitions_of(df: Any) -> list[list[int]]:
    """The topic partitions each Spark partition's rows belong to."""
    found = df.select("partition").rdd.mapPartitions(lambda rows: [sorted({r[0] for r in rows})])
    return sorted(found.collect())


def name_read(wire: Wire, name: str) -> dict[tuple[int, int, int], tuple[bytes, bytes]]:
    """A gRPC Read of NAME (merged by the front): (partition, ledger, entry) -> (key, value)."""
    return {
        (m.id.partition, m.id.ledger_id, m.id.entry_id): (m.key, m.value)
        for r in wire.log.Read(pb.ReadRequest(topic=name), timeout=60)
        for m in r.messages
    }


@pytest.mark.parametrize("kind", [pb.LEDGER, pb.SEGMENTED])
def test_a_spread_partitioned_topic_reads_one_spark_partition_a_topic_partition(
    spark: Any, server_factory: Callable[..., ServerProcess], kind: int
) -> None:
    srv = server_factory(config=PLACEMENT, extra_args=["--shards", "2"])
    wire = Wire(srv.address)
    name = f"spread-{kind}"
    slots = {slot_of(partition_name(name, i), SLOT_COUNT, Placement.PARTITION) for i in range(4)}
    assert len({s % 2 for s in slots}) == 2  # the partitions are on both shards
    wire.admin.CreateTopic(pb.CreateTopicRequest(name=name, kind=kind, partitions=PARTITIONS))
    sent = [pb.Record(key=b"k%d" % i, value=b"v%d" % i) for i in range(120)]
    wire.publish(name, sent, per_request=40)  # across partitions: the front splits each
    df = source(spark, srv.address, name)
    assert df.rdd.getNumPartitions() == PARTITIONS
    assert spark_partitions_of(df) == [[i] for i in range(PARTITIONS)]
    rows = df_rows(df)
    assert len(rows) == len(sent)
    assert {r[2] for r in rows} == {name}
    for key, _value, _topic, partition, *_rest in rows:
        assert key is not None and partition == partition_for_key(key, PARTITIONS)
    by_id = {(r[3], r[4], r[5]): r[:2] for r in rows}
    assert len(by_id) == len(sent)  # every message once
    assert sorted(by_id.values()) == sorted((r.key, r.value) for r in sent)
    assert by_id == name_read(wire, name)
    wire.close()
