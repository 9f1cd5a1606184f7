"""The Spark engine on a partitioned LEDGER topic: every partition compacted, in
parallel, each committed on its own; the aggregate status says SUCCESS, engine spark."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from compactlog.compactor.spark import run_spark_compaction
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

pytestmark = pytest.mark.spark


def test_spark_compacts_every_partition(spark: Any, shared_server: Any) -> None:
    topic = "eng-partitioned"
    with grpc.insecure_channel(shared_server.address) as channel:
        admin, log = pb_grpc.TopicAdminStub(channel), pb_grpc.LogStub(channel)
        admin.CreateTopic(pb.CreateTopicRequest(name=topic, partitions=3))
        for r in range(3):
            records = [pb.Record(key=b"k%d" % i, value=b"%d-%d" % (r, i)) for i in range(30)]
            log.Publish(pb.PublishRequest(topic=topic, records=records))
        result = run_spark_compaction(shared_server.address, topic, spark=spark)
        assert result.committed
        assert (result.run.read, result.run.kept) == (90, 30)
        status = admin.GetCompactionStatus(pb.GetCompactionStatusRequest(topic=topic))
        assert status.state == pb.CompactionStatus.SUCCESS
        assert [s.last_run.engine for s in status.partitions] == ["spark"] * 3
        read = pb.ReadRequest(topic=topic, read_compacted=True)
        values = sorted(m.value for r in log.Read(read) for m in r.messages)
        assert values == sorted(b"2-%d" % i for i in range(30))
        assert run_spark_compaction(shared_server.address, topic, spark=spark).committed is False
