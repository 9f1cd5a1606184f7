"""The ``compactlog`` Spark data source against its floor, on a real server.

For each size: a LEDGER topic loaded over gRPC, then

- ``grpc read``: one ``Log.Read`` stream from the earliest id, messages decoded (the
  floor: what one reader gets from the server);
- ``grpc columns``: the same stream turned into the source's Arrow batches in this one
  process (what an executor does per message, without Spark);
- ``spark read``: ``spark.read.format("compactlog")`` with every value's length summed
  (so every row reaches Spark);
- ``spark stream``: the same through ``readStream`` with ``trigger(availableNow=True)``
  into Spark's ``noop`` sink (one micro-batch of everything);
- ``spark write``: as many rows of the same size from ``spark.range`` published to a
  second topic with ``df.write.format("compactlog")``.

Spark's start-up and its first data-source query are timed apart (a warm-up read).

    .venv/bin/python benchmarks/bench_spark_source.py --messages 200000 1000000
    .venv/bin/python benchmarks/bench_spark_source.py --messages 500000 --master local[2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from compactlog.bench.bench_spark import Server
from compactlog.v1 import compactlog_pb2 as pb

VALUE_BYTES = 100


def grpc_read(server: Server, topic: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    count = 0
    for resp in server.log.Read(pb.ReadRequest(topic=topic), timeout=600):
        count += len(resp.messages)
    return count, time.perf_counter() - t0


def grpc_columns(server: Server, topic: str, schema: Any) -> tuple[int, float]:
    from pyspark.sql.pandas.types import to_arrow_schema

    from compactlog.records import MessageId
    from compactlog.spark.offsets import TopicPartition
    from compactlog.spark.options import connection
    from compactlog.spark.planning import ReadRange
    from compactlog.spark.source import read_range

    arrow_schema = to_arrow_schema(schema, timezone="UTC")

    t0 = time.perf_counter()
    count = 0
    rng = ReadRange(TopicPartition(topic, -1), MessageId(0, 0), MessageId(1 << 62, 0), False)
    with connection({"server": server.address}).calls() as calls:
        for batch in read_range(calls, rng, True, arrow_schema):
            count += batch.num_rows
    return count, time.perf_counter() - t0


def spark_read(spark: Any, address: str, topic: str) -> tuple[int, float]:
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    df = spark.read.format("compactlog").option("server", address).option("topic", topic).load()
    row = df.agg(F.count(F.lit(1)), F.sum(F.length("value"))).first()
    return int(row[0]), time.perf_counter() - t0


def spark_stream(spark: Any, address: str, topic: str, checkpoint: Path) -> float:
    t0 = time.perf_counter()
    query = (
        spark.readStream.format("compactlog")
        .option("server", address)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - t0


def spark_write(spark: Any, address: str, topic: str, messages: int) -> float:
    df = spark.range(messages).selectExpr(
        "cast(id % 10000 as string) as key", f"repeat('x', {VALUE_BYTES}) as value"
    )
    t0 = time.perf_counter()
    df.write.format("compactlog").mode("append").option("server", address).option(
        "topic", topic
    ).save()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[200_000])
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from compactlog.compactor.spark import spark_session

    work = Path(tempfile.mkdtemp(prefix="bench-spark-source-"))
    server = Server(work / "data")
    try:
        t0 = time.perf_counter()
        spark = spark_session(args.master)
        spark.sparkContext.setLogLevel("ERROR")
        start_s = time.perf_counter() - t0
        server.load("warm-up", 1000, 100, VALUE_BYTES)
        t0 = time.perf_counter()
        spark_read(spark, server.address, "warm-up")
        schema = (
            spark.read.format("compactlog")
            .option("server", server.address)
            .option("topic", "warm-up")
            .load()
            .schema
        )
        first_s = time.perf_counter() - t0
        print(f"Spark start-up {start_s:.1f} s, first data-source query {first_s:.1f} s")
        print(f"{'messages':>10} {'path':<14} {'seconds':>8} {'msgs/s':>10} {'of floor':>9}")
        for n in args.messages:
            topic = f"src-{n}"
            server.load(topic, n, 10_000, VALUE_BYTES)
            got, floor_s = grpc_read(server, topic)
            assert got == n, (got, n)
            got, columns_s = grpc_columns(server, topic, schema)
            assert got == n, (got, n)
            counted, read_s = spark_read(spark, server.address, topic)
            assert counted == n, (counted, n)
            stream_s = spark_stream(spark, server.address, topic, work / f"ck-{n}")
            server.admin.CreateTopic(pb.CreateTopicRequest(name=f"{topic}-out"))
            write_s = spark_write(spark, server.address, f"{topic}-out", n)
            for path, secs in (
                ("grpc read", floor_s),
                ("grpc columns", columns_s),
                ("spark read", read_s),
                ("spark stream", stream_s),
                ("spark write", write_s),
            ):
                print(f"{n:>10} {path:<14} {secs:>8.2f} {n / secs:>10,.0f} {floor_s / secs:>9.2f}")
        spark.stop()
    finally:
        server.proc.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
