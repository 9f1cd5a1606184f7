"""``startingOffsets = "snapshot"``: a streaming query bootstraps from the compacted view
(issue 16 item 3), then reads the log after it — every message once, none missing, also
when compactions commit between its batches or while its first batch is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import StructType

from compactlog.records import MessageId
from compactlog.spark.offsets import SNAPSHOT, from_checkpoint
from compactlog.spark.options import ReadOptions
from compactlog.spark.rows import SCHEMA
from compactlog.spark.source import TopicStreamReader
from compactlog.v1 import compactlog_pb2 as pb

from .conftest import Wire, records
from .test_streaming import Pipeline

pytestmark = pytest.mark.spark

Row = tuple[str, int, int, bytes | None, bytes | None]  # topic, ledger, entry, key, value


def rows_of(wire: Wire, topic: str, compacted: bool, after: MessageId | None = None) -> list[Row]:
    """What a gRPC Read gives, as rows; ``after``: only ids at or past it."""
    out = [(topic, r[4], r[5], r[0], r[1]) for r in wire.read(topic, compacted)]
    return [r for r in out if after is None or MessageId(r[1], r[2]) >= after]


def latest_per_key(rows: list[Row], segmented: bool) -> dict[bytes, bytes]:
    """Rows applied in order as a table: a keyed null (LEDGER: or empty) value deletes."""
    table: dict[bytes, bytes] = {}
    for _t, _l, _e, key, value in rows:
        if key is None:
            continue
        if value is None or (not value and not segmented):
            table.pop(key, None)
        else:
            table[key] = value
    return table


def sink_rows(pipe: Pipeline) -> list[Row]:
    df = pipe.spark.read.schema(SCHEMA).parquet(pipe.out)
    got = df.select("topic", "ledger_id", "entry_id", "key", "value").collect()
    return sorted(
        (r[0], r[1], r[2], None if r[3] is None else bytes(r[3]), r[4] and bytes(r[4])) for r in got
    )


def end_of(rows: list[Row]) -> MessageId:
    last = max(MessageId(r[1], r[2]) for r in rows)
    return MessageId(last.ledger_id, last.entry_id + 1)


@pytest.mark.parametrize("kind", [pb.LEDGER, pb.SEGMENTED], ids=["ledger", "segmented"])
def test_snapshot_then_tail_through_restarts_and_compactions(
    spark: Any, wire: Wire, tmp_path: Path, kind: int
) -> None:
    segmented = kind == pb.SEGMENTED
    config = {"cleanup_policy": "compact"} if segmented else {"ledger_max_entries": "7"}
    topic = wire.create(f"snap-{kind}", kind=kind, **config)
    wire.publish(topic, records(40, 6), per_request=5)
    wire.compact(topic)
    wire.publish(topic, records(9, 6, start=40))  # a raw tail past the horizon
    view = rows_of(wire, topic, compacted=True)
    raw_end = end_of(rows_of(wire, topic, compacted=False))

    pipe = Pipeline(spark, wire.address, topic, tmp_path, startingOffsets=SNAPSHOT)
    pipe.available_now()
    assert sink_rows(pipe) == sorted(view)  # the compacted view, as a Read shows it now
    if not segmented:
        assert len(view) < 49  # superseded messages were left out

    wire.publish(topic, records(12, 6, start=49))
    wire.compact(topic)  # commits between two runs: the tail stays every message
    wire.publish(topic, records(5, 6, start=61))
    pipe.available_now()  # a restart: no second snapshot
    tail = rows_of(wire, topic, compacted=False, after=raw_end)
    assert len(tail) == 17
    assert sink_rows(pipe) == sorted(view + tail)
    everything = rows_of(wire, topic, compacted=False) if not segmented else None
    if everything is not None:  # applied in order, the sink is the topic's table
        assert latest_per_key(sorted(view) + tail, segmented) == latest_per_key(everything, False)


def test_a_compaction_while_the_snapshot_is_read_leaves_no_gap_and_no_duplicate(
    spark: Any, wire: Wire
) -> None:
    """The first micro-batch is planned, then a compaction past its end commits, then its
    ranges are read: the snapshot holds ids before the end only, the tail every raw id
    from the end, and the two applied in order are the latest value of every key."""
    topic = wire.create("snap-race", ledger_max_entries="5")
    wire.publish(topic, records(30, 5), per_request=3)
    wire.compact(topic)
    wire.publish(topic, records(10, 5, start=30))
    options = {"server": wire.address, "topic": topic, "startingOffsets": SNAPSHOT}
    reader = TopicStreamReader(ReadOptions.parse(options, streaming=True), _schema())
    first = reader.initialOffset()
    end = reader.latestOffset(first)
    ranges = reader.partitions(first, end)
    assert all(p.range.compacted for p in ranges)  # the bootstrap reads the compacted view

    wire.publish(topic, records(15, 5, start=40))  # keys of the snapshot change again...
    wire.compact(topic)  # ...and a compaction past the planned end commits
    snapshot = _read(reader, ranges)
    stop = from_checkpoint(end)[0]
    (tp_end,) = stop.values()
    assert all(MessageId(r[1], r[2]) < tp_end for r in snapshot)
    nxt = reader.latestOffset(end)
    tail_ranges = reader.partitions(end, nxt)
    assert not any(p.range.compacted for p in tail_ranges)
    tail = _read(reader, tail_ranges)
    assert tail == rows_of(wire, topic, compacted=False, after=tp_end)
    assert len(tail) == 15 and not set(snapshot) & set(tail)
    applied = latest_per_key(snapshot + tail, segmented=False)
    assert applied == latest_per_key(rows_of(wire, topic, compacted=False), segmented=False)


def test_snapshot_is_for_streaming_queries(spark: Any, wire: Wire) -> None:
    topic = wire.create("snap-batch")
    options = {"server": wire.address, "topic": topic, "startingOffsets": SNAPSHOT}
    with pytest.raises(Exception, match="applies to streaming queries"):
        ReadOptions.parse(options, streaming=False)
    assert ReadOptions.parse(options, streaming=True).snapshot


def _schema() -> StructType:
    return StructType.fromDDL(SCHEMA)


def _read(reader: TopicStreamReader, partitions: Any) -> list[Row]:
    rows: list[Row] = []
    for part in partitions:
        for batch in reader.read(part):
            for r in batch.to_pylist():
                rows.append((r["topic"], r["ledger_id"], r["entry_id"], r["key"], r["value"]))
    return sorted(rows, key=lambda r: (r[1], r[2]))
