"""``compactlog export``: a topic to files through Spark.

``compacted=True`` gives the table an analyst wants, the latest value of every key: the
compacted view (LEDGER: compacted ledger, then the raw tail since the last compaction;
SEGMENTED: the log as the cleaner left it) reduced once more to the latest message per
key, tombstones dropped (LEDGER: null or empty value; SEGMENTED: null value), keyless
messages kept only where ``compaction.retain.null.key`` keeps them. Otherwise the raw
log, every message.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from compactlog.channels import ChannelSecurity
from compactlog.compactor.two_phase.grpc_adapter import open_channel
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

FORMATS = ("parquet",)


def read_topic(
    spark: SparkSession,
    server: str,
    topic: str,
    compacted: bool,
    token: str | None = None,
    tls_ca: str | None = None,
) -> DataFrame:
    return (
        spark.read.format("compactlog")
        .option("server", server)
        .option("topic", topic)
        .option("readCompacted", "true" if compacted else "false")
        .option("token", token or "")
        .option("tlsCa", tls_ca or "")
        .load()
    )


def latest_per_key(df: DataFrame, segmented: bool, retain_null_key: bool) -> DataFrame:
    """The latest live message of every key (plus keyless ones if retained), id order."""
    order = F.struct("ledger_id", "entry_id")
    latest = (
        df.where(F.col("key").isNotNull())
        .groupBy("key")
        .agg(F.max_by(F.struct(*df.columns), order).alias("m"))
        .select("m.*")
    )
    live = F.col("value").isNotNull()
    if not segmented:
        live = live & (F.length("value") > 0)
    table = latest.where(live)
    if retain_null_key and not segmented:
        table = table.unionByName(df.where(F.col("key").isNull()))
    return table.orderBy("ledger_id", "entry_id")


def export_topic(
    spark: SparkSession,
    server: str,
    topic: str,
    path: str,
    compacted: bool,
    fmt: str = "parquet",
    overwrite: bool = False,
    token: str | None = None,
    tls_ca: str | None = None,
) -> int:
    """Write the topic to ``path``; return the number of rows written. ``token`` and
    ``tls_ca`` as for the data source (an admin token on a server with ``--auth-tokens``)."""
    if fmt not in FORMATS:
        raise ValueError(f"unsupported export format {fmt!r} ({', '.join(FORMATS)})")
    channel = open_channel(server, ChannelSecurity.of(token, tls_ca))
    try:
        layout = pb_grpc.CompactionEngineStub(channel).GetTopicLayout(
            pb.GetTopicLayoutRequest(topic=topic)
        )
    finally:
        channel.close()
    df = read_topic(spark, server, topic, compacted, token, tls_ca)
    if compacted:
        df = latest_per_key(df, layout.kind == pb.SEGMENTED, layout.retain_null_key)
    df.write.mode("overwrite" if overwrite else "errorifexists").format(fmt).save(path)
    return int(spark.read.format(fmt).load(path).count())
