"""``spark.readStream.format("compactlog")``: micro-batches of new messages, positions in
Spark's checkpoint. ``trigger(availableNow=True)`` reads what exists and stops; a query
run again — also after being stopped mid-way, and after dying between running a batch
and committing it — delivers exactly the messages it had not, none twice."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from compactlog.spark.rows import SCHEMA
from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Wire, records

pytestmark = pytest.mark.spark

QUERY_TIMEOUT_S = 120


class Pipeline:
    """A streaming query from the source into a parquet sink, with one checkpoint."""

    def __init__(self, spark: Any, address: str, topic: str, where: Path, **options: str):
        self.spark = spark
        self.out = str(where / "out")
        self.checkpoint = where / "checkpoint"
        self.stream = (
            spark.readStream.format("compactlog")
            .option("server", address)
            .option("topic", topic)
            .options(**options)
        )

    def start(self, **trigger: Any) -> Any:
        return (
            self.stream.load()
            .writeStream.format("parquet")
            .option("path", self.out)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(**trigger)
            .start()
        )

    def available_now(self) -> None:
        query = self.start(availableNow=True)
        assert query.awaitTermination(QUERY_TIMEOUT_S)
        assert query.exception() is None

    def ids(self) -> list[tuple[str, int, int, bytes | None]]:
        """What the sink holds, one tuple per row (duplicates kept)."""
        df = self.spark.read.schema(SCHEMA).parquet(self.out)
        rows = df.select("topic", "ledger_id", "entry_id", "value").collect()
        return sorted((r[0], r[1], r[2], None if r[3] is None else bytes(r[3])) for r in rows)


def expected(wire: Wire, *topics: str) -> list[tuple[str, int, int, bytes | None]]:
    return sorted((t, r[4], r[5], r[1]) for t in topics for r in wire.read(t))


def test_available_now_reads_only_new_messages(spark: Any, wire: Wire, tmp_path: Path) -> None:
    topic = wire.create("st-ledger", ledger_max_entries="8")
    wire.publish(topic, records(20, 6), per_request=4)
    pipe = Pipeline(spark, wire.address, topic, tmp_path, startingOffsets="earliest")
    pipe.available_now()
    assert pipe.ids() == expected(wire, topic)
    wire.publish(topic, records(15, 6, start=20), per_request=5)  # new ledgers too
    pipe.available_now()
    assert pipe.ids() == expected(wire, topic)  # the 15 new ones added, nothing twice
    pipe.available_now()  # nothing new: nothing added
    assert len(pipe.ids()) == 35


@pytest.mark.parametrize("settled", [False, True], ids=["batch-in-flight", "all-committed"])
def test_restart_after_stop_mid_way_and_uncommitted_batch(
    spark: Any, wire: Wire, tmp_path: Path, settled: bool
) -> None:
    ledger = wire.create(f"st-a-{settled}", ledger_max_entries="16")
    segmented = wire.create(f"st-b-{settled}", kind=pb.SEGMENTED)
    topics = f"{ledger},{segmented}"
    pipe = Pipeline(spark, wire.address, topics, tmp_path, startingOffsets="earliest")
    query = pipe.start(processingTime="200 milliseconds")
    try:
        for round_ in range(4):
            wire.publish(ledger, records(10, 4, start=10 * round_))
            wire.publish(segmented, records(10, 4, start=10 * round_))
            time.sleep(0.3)
        if settled:  # the commit removed below is then one Spark had fully written
            query.processAllAvailable()
    finally:
        query.stop()  # mid-way: whatever batch was running is cut off
    assert query.exception() is None
    # As if the driver had died after a batch ran but before Spark recorded it as
    # committed: the restarted query runs that batch again from the logged offsets.
    commits = sorted((pipe.checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    if commits:
        # Its checksum goes too, as a crash before the commit would leave neither;
        # a stale .N.crc makes Spark's rename of the rewritten commit fail.
        commits[-1].unlink()
        (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    wire.publish(ledger, records(10, 4, start=40))
    wire.publish(segmented, records(10, 4, start=40))
    pipe.available_now()
    assert pipe.ids() == expected(wire, ledger, segmented)


def test_streaming_starts_at_latest_by_default(spark: Any, wire: Wire, tmp_path: Path) -> None:
    topic = wire.create("st-latest")
    wire.publish(topic, records(5, 5))
    pipe = Pipeline(spark, wire.address, topic, tmp_path)
    pipe.available_now()
    assert pipe.ids() == []
    wire.publish(topic, records(4, 5, start=5))
    pipe.available_now()
    assert pipe.ids() == expected(wire, topic)[5:]

    bad = Pipeline(spark, wire.address, topic, tmp_path / "bad", endingOffsets="latest")
    with pytest.raises(Exception, match="'endingOffsets' applies to batch queries only"):
        bad.available_now()
