"""The source's columns (CONTRACT section 14) and messages gathered into Arrow batches.

``event_time`` is the producer's time; a message published without one (0 on the wire,
"use publish time") shows its publish time, as Kafka's ``timestamp`` column shows the
broker's time when the producer set none. Null keys and values stay null.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from compactlog.spark.offsets import TopicPartition
from compactlog.v1 import compactlog_pb2 as pb

SCHEMA = (
    "key BINARY, value BINARY, topic STRING, partition INT, ledger_id BIGINT, "
    "entry_id BIGINT, publish_time TIMESTAMP, event_time TIMESTAMP, "
    "properties MAP<STRING, STRING>"
)
ROWS_PER_BATCH = 8192


class Columns:
    """One Arrow batch's worth of messages of one topic partition, column by column."""

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.count = 0
        self.key: list[bytes | None] = []
        self.value: list[bytes | None] = []
        self.ledger: list[int] = []
        self.entry: list[int] = []
        self.publish: list[int] = []
        self.event: list[int] = []
        self.props: list[list[tuple[str, str]]] = []

    def add(self, m: pb.Message) -> None:
        self.count += 1
        self.key.append(m.key if m.HasField("key") else None)
        self.value.append(m.value if m.HasField("value") else None)
        self.ledger.append(m.id.ledger_id)
        self.entry.append(m.id.entry_id)
        publish_us = m.publish_time_ms * 1000
        self.publish.append(publish_us)
        self.event.append(m.event_time_ms * 1000 if m.event_time_ms else publish_us)
        self.props.append(list(m.properties.items()))

    def batch(self, schema: pa.Schema) -> pa.RecordBatch:
        n = self.count
        columns = [
            self.key,
            self.value,
            [self.tp.topic] * n,
            [self.tp.partition] * n,
            self.ledger,
            self.entry,
            self.publish,
            self.event,
            self.props,
        ]
        arrays = [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def record_batches(
    tp: TopicPartition, messages: Iterable[pb.Message], schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """``messages`` as Arrow batches of at most ``ROWS_PER_BATCH`` rows."""
    rows = Columns(tp)
    for msg in messages:
        rows.add(msg)
        if rows.count >= ROWS_PER_BATCH:
            yield rows.batch(schema)
            rows = Columns(tp)
    if rows.count:
        yield rows.batch(schema)
