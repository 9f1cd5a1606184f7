"""``df.write.format("compactlog")``: rows published in batches, at least once.

Columns, as Kafka's sink takes them: ``value`` (binary or string; null: a null value,
a tombstone when keyed), ``key`` (optional; binary or string; null: keyless), ``topic``
(string; the ``topic`` option, when given, wins over it), ``properties``
(map<string,string>, optional) and ``event_time`` (timestamp, or a long of
milliseconds; optional, null: the publish time). Other columns are ignored, so a
DataFrame read from the source can be written back.

Each Spark task publishes its rows in order, up to ``RECORDS_PER_PUBLISH`` records or
``BYTES_PER_PUBLISH`` bytes a Publish, one topic per request. A Publish is all or
nothing, but a task that fails after some of its Publishes — and is retried by Spark —
publishes those rows again: delivery is at least once, as with Kafka's sink.

``df.writeStream.format("compactlog")`` publishes each micro-batch the same way
(``PublishStreamWriter`` hands its tasks to ``PublishWriter.write``). Spark commits the
batch in its checkpoint after the tasks publish; a query restarted before that runs the
batch again, so a streaming write is at least once too — and so is ``abort``: what a
failed batch's tasks published stays in the topic, as with Kafka's sink.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from compactlog.errors import InvalidArgument
from compactlog.spark.connection import ServerCalls
from compactlog.spark.options import WriteOptions
from compactlog.v1 import compactlog_pb2 as pb

log = logging.getLogger(__name__)

RECORDS_PER_PUBLISH = 1000
BYTES_PER_PUBLISH = 4 * 1024 * 1024
# Arrow timestamp unit -> (multiply, divide) to milliseconds
_TO_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


@dataclass(frozen=True)
class PublishCommit(WriterCommitMessage):  # type: ignore[misc]
    """What one task published."""

    records: int
    requests: int


@dataclass(frozen=True)
class RowLayout:
    """Which of the optional columns the DataFrame has (checked on the driver)."""

    has_key: bool
    has_topic: bool
    has_properties: bool
    has_event_time: bool


def _check_type(schema: StructType, name: str, allowed: tuple[type, ...], what: str) -> bool:
    if name not in schema.fieldNames():
        return False
    field = schema[name]
    data_type = field.dataType
    ok = isinstance(data_type, allowed)
    if isinstance(data_type, MapType):
        ok = isinstance(data_type.keyType, StringType) and isinstance(
            data_type.valueType, StringType
        )
    if not ok:
        raise InvalidArgument(f"column {name!r} must be {what}, not {data_type.simpleString()}")
    return True


def row_layout(schema: StructType, topic_option: str | None) -> RowLayout:
    if "value" not in schema.fieldNames():
        raise InvalidArgument("writing to compactlog needs a 'value' column (binary or string)")
    _check_type(schema, "value", (BinaryType, StringType), "binary or string")
    layout = RowLayout(
        has_key=_check_type(schema, "key", (BinaryType, StringType), "binary or string"),
        has_topic=_check_type(schema, "topic", (StringType,), "string"),
        has_properties=_check_type(schema, "properties", (MapType,), "map<string,string>"),
        has_event_time=_check_type(
            schema,
            "event_time",
            (TimestampType, TimestampNTZType, LongType, IntegerType),
            "a timestamp or a long of milliseconds",
        ),
    )
    if topic_option is None and not layout.has_topic:
        raise InvalidArgument("writing to compactlog needs a 'topic' option or a 'topic' column")
    return layout


class PublishWriter(DataSourceArrowWriter):  # type: ignore[misc]
    def __init__(self, opts: WriteOptions, layout: RowLayout) -> None:
        self.opts = opts
        self.layout = layout

    @classmethod
    def for_query(cls, opts: WriteOptions, schema: StructType, overwrite: bool) -> PublishWriter:
        """Checked on the driver: save mode, columns, and the ``topic`` option's topic."""
        if overwrite:
            raise InvalidArgument(
                "compactlog only appends to a topic (a log cannot be overwritten): "
                "use mode('append')"
            )
        layout = row_layout(schema, opts.topic)
        if opts.topic is not None:
            with opts.conn.calls() as calls:
                calls.topic(opts.topic)  # TopicNotFound naming it, before any task runs
        return cls(opts, layout)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishCommit:
        with self.opts.conn.calls() as calls:
            batcher = Batcher(calls)
            for batch in iterator:
                for topic, record in self._records(batch):
                    batcher.add(topic, record)
            batcher.flush_all()
        return PublishCommit(batcher.records, batcher.requests)

    def _records(self, batch: pa.RecordBatch) -> Iterator[tuple[str, pb.Record]]:
        n = batch.num_rows
        lay = self.layout

        def column(name: str) -> pa.Array:
            return batch.column(batch.schema.get_field_index(name))

        values = column("value").to_pylist()
        keys = column("key").to_pylist() if lay.has_key else [None] * n
        topics: Sequence[str | None] = (
            [self.opts.topic] * n if self.opts.topic is not None else column("topic").to_pylist()
        )
        props = column("properties").to_pylist() if lay.has_properties else None
        times = _event_times_ms(column("event_time")) if lay.has_event_time else None
        for i in range(n):
            topic = topics[i]
            if not topic:
                raise InvalidArgument("a row has no topic (its 'topic' column is null or empty)")
            record = pb.Record(event_time_ms=times[i] if times is not None else 0)
            key, value = keys[i], values[i]
            if key is not None:
                record.key = _as_bytes(key)
            if value is not None:
                record.value = _as_bytes(value)
            if props is not None and props[i]:
                record.properties.update({k: v for k, v in props[i] if v is not None})
            yield topic, record

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("published %s", _published(messages))


def _published(messages: list[WriterCommitMessage | None]) -> str:
    done = [m for m in messages if isinstance(m, PublishCommit)]
    records, requests = sum(m.records for m in done), sum(m.requests for m in done)
    return f"{records} records in {requests} requests"


class PublishStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc]
    """A streaming write: each micro-batch's tasks publish as a batch write's do."""

    def __init__(self, batch: PublishWriter) -> None:
        self.batch = batch

    @classmethod
    def for_query(cls, opts: WriteOptions, schema: StructType) -> PublishStreamWriter:
        """Checked on the driver as a batch write. Complete and update output modes
        publish each batch's rows too (Kafka's sink does not truncate a topic either)."""
        return cls(PublishWriter.for_query(opts, schema, overwrite=False))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishCommit:
        return self.batch.write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("micro-batch %d: published %s", batchId, _published(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning(
            "micro-batch %d failed; %s published before stay in the topic (at least once)",
            batchId,
            _published(messages),
        )


def _as_bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _event_times_ms(column: pa.Array) -> list[int]:
    """Event times in milliseconds (0 where null: the server uses the publish time)."""
    if pa.types.is_timestamp(column.type):
        mul, div = _TO_MS[column.type.unit]
        raw = column.cast(pa.int64()).to_pylist()
        return [0 if t is None else t * mul // div for t in raw]
    return [0 if t is None else int(t) for t in column.to_pylist()]


class Batcher:
    """Records gathered per topic and published in order, a request at a time."""

    def __init__(self, calls: ServerCalls) -> None:
        self.calls = calls
        self.pending: dict[str, list[pb.Record]] = {}
        self.sizes: dict[str, int] = {}
        self.records = 0
        self.requests = 0

    def add(self, topic: str, record: pb.Record) -> None:
        batch = self.pending.setdefault(topic, [])
        batch.append(record)
        self.sizes[topic] = self.sizes.get(topic, 0) + len(record.key) + len(record.value)
        if len(batch) >= RECORDS_PER_PUBLISH or self.sizes[topic] >= BYTES_PER_PUBLISH:
            self.flush(topic)

    def flush(self, topic: str) -> None:
        batch = self.pending.pop(topic, [])
        self.sizes.pop(topic, None)
        if batch:
            self.calls.publish(topic, batch)
            self.records += len(batch)
            self.requests += 1

    def flush_all(self) -> None:
        for topic in list(self.pending):
            self.flush(topic)
