"""The ``compactlog`` Python data source: batch reads, streaming reads and writes.

Planning runs on the driver (``partitions``, the streaming offsets); ``read`` runs in a
Python worker per Spark partition and opens its own channel there (readers are pickled).
Batch queries fix their ranges when planned: messages published later are not in them.
Streaming queries keep their positions in Spark's checkpoint (``offsets.to_offset``);
the server holds no state for them, so ``commit`` has nothing to do, and a restarted
query re-reads exactly the ranges of the batch it had not committed.

A start that retention removed meanwhile (SEGMENTED: OFFSET_OUT_OF_RANGE) is data loss,
found when a query is planned and again when a task reads: ``failOnDataLoss`` (default
true) fails the query naming the topic partition and offsets; false goes on from the log
start with a warning, as Kafka's source does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from compactlog.errors import InvalidArgument, OffsetOutOfRange, TopicNotFound
from compactlog.records import MessageId
from compactlog.spark.columns import response_columns
from compactlog.spark.connection import Connection, ServerCalls
from compactlog.spark.offsets import (
    Offsets,
    TopicPartition,
    from_checkpoint,
    snapshot_offset,
    to_offset,
)
from compactlog.spark.options import ReadOptions, WriteOptions
from compactlog.spark.planning import (
    LogShape,
    ReadRange,
    check_order,
    data_loss,
    discover,
    lost_data,
    plan,
    resolve,
)
from compactlog.spark.rows import SCHEMA
from compactlog.spark.writer import PublishStreamWriter, PublishWriter

SCHEMA_STRING = (
    "struct<key:binary,value:binary,topic:string,partition:int,ledger_id:bigint,"
    "entry_id:bigint,publish_time:timestamp,event_time:timestamp,"
    "properties:map<string,string>>"
)


class CompactlogDataSource(DataSource):  # type: ignore[misc]
    """``format("compactlog")`` for ``spark.read``, ``spark.readStream`` and ``df.write``.

    ``cores`` is the session's ``defaultParallelism`` (0: unknown), which sizes a read's
    Spark partitions. Spark plans a Python source's reads in a Python worker that cannot
    ask the session, so ``with_cores`` bakes the number into a subclass when the source
    is registered: Spark pickles the registered class by value, attributes included.
    ``short_name`` is the name it is registered under: ``compactlog``, or
    ``compactlog-python`` where the JVM reader answers to ``compactlog`` and hands it
    what its scan does not take (``compactlog.spark.register``)."""

    cores: ClassVar[int] = 0
    short_name: ClassVar[str] = "compactlog"

    @classmethod
    def name(cls) -> str:
        return cls.short_name

    @classmethod
    def with_cores(cls, cores: int, name: str = "compactlog") -> type[CompactlogDataSource]:
        """The source for a session of ``cores`` task slots, registered as ``name``."""

        class SessionSource(cls):  # type: ignore[valid-type,misc]
            pass

        SessionSource.cores = cores
        SessionSource.short_name = name
        return SessionSource

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        return TopicReader(ReadOptions.parse(self.options, False, self.cores), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        return TopicStreamReader(ReadOptions.parse(self.options, True, self.cores), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return PublishWriter.for_query(WriteOptions.parse(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return PublishStreamWriter.for_query(WriteOptions.parse(self.options), schema)


def _check_schema(schema: StructType) -> None:
    if schema.simpleString() != SCHEMA_STRING:
        raise InvalidArgument(
            f"the compactlog source has fixed columns ({SCHEMA}); leave out .schema(...)"
        )


@dataclass(frozen=True)
class RangePartition(InputPartition):  # type: ignore[misc]
    """One Spark partition: one range of one topic partition (None: nothing to read)."""

    range: ReadRange | None


def read_partition(
    conn: Connection, partition: InputPartition, schema: StructType, fail_on_data_loss: bool
) -> Iterator[pa.RecordBatch]:
    """The partition's messages as Arrow batches, over a channel of this worker's own."""
    assert isinstance(partition, RangePartition)
    rng = partition.range
    if rng is None:
        return
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    with conn.calls() as calls:
        yield from read_range(calls, rng, fail_on_data_loss, arrow_schema)


def read_range(
    calls: ServerCalls, rng: ReadRange, fail_on_data_loss: bool, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The range's messages, a batch per Read response; where retention removed its start
    since it was planned (OFFSET_OUT_OF_RANGE), ``failOnDataLoss`` decides: fail, or go
    on from the log start."""
    position, limit = rng.start, rng.limit
    while True:
        try:
            for data in calls.read(rng.tp.log, position, rng.compacted, limit):
                cols = response_columns(rng.tp, data, rng.end, schema)
                if cols.batch is not None:
                    yield cols.batch
                if cols.last is not None:
                    position = MessageId(cols.last.ledger_id, cols.last.entry_id + 1)
                if cols.stopped:
                    return
            return
        except OffsetOutOfRange:
            log_start = LogShape.of(calls.topic(rng.tp.log)).earliest.entry_id
            if log_start <= position.entry_id:
                raise
            offset = data_loss(rng.tp, position.entry_id, log_start, fail_on_data_loss)
            position = MessageId(0, offset)
            if position >= rng.end:
                return
            limit = rng.end.entry_id - offset


class TopicReader(DataSourceReader):  # type: ignore[misc]
    """A batch query: ``startingOffsets`` → ``endingOffsets`` fixed when it is planned."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        with opts.conn.calls() as calls:
            shapes = discover(calls, opts.topics)
            starts = resolve(opts.starting, shapes)
            ends = resolve(opts.ending, shapes)
            check_order(starts, ends)
            starts = lost_data(shapes, starts, opts.fail_on_data_loss)
            ranges = plan(calls, shapes, starts, ends, opts.compacted, opts.sizing)
        # Spark wants at least one partition; an empty one reads nothing.
        return [RangePartition(r) for r in ranges] or [RangePartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts.conn, partition, self.schema, self.opts.fail_on_data_loss)


class TopicStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """A streaming query. The offset of a micro-batch is, for every topic partition, the
    next id to read (``{"topic": {"partition": "ledger:entry"}}``); a topic partition
    that appears later (partitions added) is read from its earliest.

    With ``trigger(availableNow=True)`` Spark first calls
    ``prepareForTriggerAvailableNow``: the latest positions then are the target, and
    ``latestOffset`` never goes past them, so the query reads what existed and stops.
    """

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._target: Offsets | None = None

    def _shapes(self, calls: ServerCalls) -> dict[TopicPartition, LogShape]:
        return discover(calls, self.opts.topics)

    def _latest(self) -> Offsets:
        with self.opts.conn.calls() as calls:
            shapes = self._shapes(calls)
        return {tp: shape.latest for tp, shape in shapes.items()}

    def initialOffset(self) -> dict[str, Any]:
        with self.opts.conn.calls() as calls:
            shapes = self._shapes(calls)
        if self.opts.snapshot:
            return snapshot_offset(shapes)
        return to_offset(resolve(self.opts.starting, shapes))

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(
        self, start: Mapping[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        """Every topic partition's latest position, never behind ``start`` (Spark compares
        offsets as text: no new message, the same text), nor past the availableNow target."""
        latest = self._target if self._target is not None else self._latest()
        begin, _marked = from_checkpoint(start or {})
        out: dict[TopicPartition, MessageId] = dict(begin)
        for tp, position in latest.items():
            out[tp] = max(position, begin.get(tp, position))
        return to_offset(out)

    def partitions(
        self, start: Mapping[str, Any], end: Mapping[str, Any]
    ) -> Sequence[InputPartition]:
        (begin, marked), (stop, _) = from_checkpoint(start), from_checkpoint(end)
        if begin == stop and not marked:
            return []
        opts = self.opts
        size = opts.sizing
        with opts.conn.calls() as calls:
            shapes = self._shapes(calls)
            missing = sorted(tp.log for tp in stop if tp not in shapes)
            if missing:
                raise TopicNotFound(f"topic partition {missing[0]!r} of this query is gone")
            # the bootstrap: what came before the first batch's end, as the compacted view
            snap = {tp: stop[tp] for tp in marked if tp in stop}
            ranges = plan(calls, shapes, {}, snap, True, size)
            tail = {tp: end for tp, end in stop.items() if tp not in marked}
            begin = lost_data(shapes, begin, opts.fail_on_data_loss)
            ranges += plan(calls, shapes, begin, tail, opts.compacted, size)
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts.conn, partition, self.schema, self.opts.fail_on_data_loss)

    def commit(self, end: Mapping[str, Any]) -> None:
        """Nothing to do: the positions live in Spark's checkpoint, not on the server."""
