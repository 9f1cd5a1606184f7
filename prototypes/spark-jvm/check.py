"""Prototype checks (issue 29), against a real server and Spark; prints what it finds.

1. ``CompactlogSource`` returns the Python source's rows exactly: a topic of null keys and
   values, properties and event times, read as 1, 2 and 7 Spark partitions.
2. ``DelegatingSource`` reads batches with the JVM scan and hands an availableNow stream
   and a write to the Python source registered as ``compactlog``.

    PYTHONPATH=. .venv/bin/python prototypes/spark-jvm/check.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

JAR = Path(__file__).resolve().parent / "build" / "compactlog-spark.jar"
JVM = "io.compactlog.spark.CompactlogSource"
DELEGATING = "io.compactlog.spark.DelegatingSource"
COLUMNS = ("key", "value", "topic", "ledger_id", "entry_id", "publish_time", "event_time")


def load(address: str) -> None:
    """Topics ``t`` (30 x 100 messages of every kind) and an empty ``out``."""
    import grpc

    from compactlog.v1 import compactlog_pb2 as pb
    from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

    with grpc.insecure_channel(address) as channel:
        admin, log = pb_grpc.TopicAdminStub(channel), pb_grpc.LogStub(channel)
        for name in ("t", "out"):
            admin.CreateTopic(pb.CreateTopicRequest(name=name))
        for batch in range(30):
            records = []
            for i in range(100):
                r = pb.Record(event_time_ms=1_700_000_000_000 + i if i % 3 else 0)
                if i % 7:
                    r.key = b"k%d" % (i % 13)
                if i % 11:
                    r.value = b"v%d-%d" % (batch, i)
                if i % 5 == 0:
                    r.properties["a"], r.properties["b"] = f"x{i}", ""
                records.append(r)
            log.Publish(pb.PublishRequest(topic="t", records=records))


def rows(spark: Any, fmt: str, address: str, **options: str) -> list[tuple[Any, ...]]:
    reader = spark.read.format(fmt).option("server", address).option("topic", "t")
    for name, value in options.items():
        reader = reader.option(name, value)
    df = reader.load().selectExpr(*COLUMNS, "to_json(properties)")
    return sorted((tuple(r) for r in df.collect()), key=lambda r: (r[3], r[4]))


def delegation(spark: Any, address: str, tmp: str) -> None:
    df = spark.read.format(DELEGATING).option("server", address).option("topic", "t").load()
    plan = df.select("value")._jdf.queryExecution().executedPlan().toString()
    print("batch through the JVM scan:", df.count(), "rows;", "ColumnarToRow" in plan)
    stream = (
        spark.readStream.format(DELEGATING)
        .option("server", address)
        .option("topic", "t")
        .option("startingOffsets", "earliest")
        .load()
        .select("value")
        .writeStream.format("memory")
        .queryName("streamed")
        .option("checkpointLocation", f"{tmp}/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination(300)
    print("stream through the Python source:", spark.sql("SELECT * FROM streamed").count())
    df.select("key", "value").write.format(DELEGATING).mode("append").option(
        "server", address
    ).option("topic", "out").save()
    out = spark.read.format("compactlog").option("server", address).option("topic", "out")
    print("write through the Python source:", out.load().count())


def main() -> int:
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--jars {JAR} pyspark-shell"
    from compactlog.bench.procstats import ServerProcess
    from compactlog.compactor.spark import spark_session

    spark = spark_session("local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with tempfile.TemporaryDirectory(prefix="compactlog-jvm-") as tmp:
            server = ServerProcess(Path(tmp) / "data")
            try:
                load(server.address)
                python = rows(spark, "compactlog", server.address)
                for n in ("1", "2", "7"):
                    same = rows(spark, JVM, server.address, partitions=n) == python
                    print(
                        f"{len(python)} rows, {n} partition(s): same as the Python source: {same}"
                    )
                delegation(spark, server.address, tmp)
            finally:
                server.stop()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
