"""Fixtures of the ports of Spark's Kafka connector suites (KafkaMicroBatchSourceSuite,
KafkaSinkSuite...): behaviour only, against a real server and a local Spark session. A
``wire`` to set topics up and read them over gRPC, and a streaming query into parquet
files with one checkpoint, run again and again as upstream's ``StopStream``/``StartStream``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compactlog.spark.rows import SCHEMA
from compactlog.v1 import compactlog_pb2 as pb
from tests.spark.conftest import Wire

QUERY_TIMEOUT_S = 120


@pytest.fixture
def wire(shared_server: Any) -> Iterator[Wire]:
    w = Wire(shared_server.address)
    yield w
    w.close()


def delete_before(wire: Wire, topic: str, offset: int) -> None:
    """Kafka's DeleteRecords: the SEGMENTED log then starts at ``offset``."""
    wire.admin.DeleteRecords(pb.DeleteRecordsRequest(topic=topic, before_offset=offset))


def values(wire: Wire, topic: str) -> list[bytes | None]:
    return [r[1] for r in wire.read(topic)]


class Stream:
    """``spark.readStream.format("compactlog")`` into parquet files, one checkpoint."""

    def __init__(self, spark: Any, wire: Wire, topic: str, where: Path, **options: str):
        self.spark = spark
        self.out = str(where / "out")
        self.checkpoint = str(where / "checkpoint")
        self.reader = (
            spark.readStream.format("compactlog")
            .option("server", wire.address)
            .option("topic", topic)
            .options(**options)
        )

    def run(self, **options: str) -> None:
        """One ``trigger(availableNow=True)`` run; ``options`` change the source's (as a
        restarted query may)."""
        query = (
            self.reader.options(**options)
            .load()
            .writeStream.format("parquet")
            .option("path", self.out)
            .option("checkpointLocation", self.checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        try:  # a failed query raises here
            assert query.awaitTermination(QUERY_TIMEOUT_S)
        finally:
            query.stop()

    def rows(self) -> list[tuple[int, bytes | None, bytes | None]]:
        """(offset or entry id, key, value) of every row the sink holds, duplicates kept."""
        if not Path(self.out).exists():
            return []
        df = self.spark.read.schema(SCHEMA).parquet(self.out)
        got = df.select("entry_id", "key", "value").collect()
        return sorted(
            (r[0], None if r[1] is None else bytes(r[1]), None if r[2] is None else bytes(r[2]))
            for r in got
        )
