"""PySpark Python Data Sources over a compactlog server.

``compactlog`` reads a topic as a DataFrame::

    spark.read.format("compactlog").option("server", "HOST:PORT").option("topic", T)
         .option("readCompacted", "true").load()

with ``SCHEMA``. Planning (``partitions``) asks the server for the topic's layout once, so
a query reads the snapshot of that moment: LEDGER topics are split into ledger entry
ranges (the compacted view: compacted ledger, then the raw tail after the horizon),
SEGMENTED topics into offset ranges. Executors read their range over gRPC — channels
are opened inside ``read``, since readers are pickled and partitions run in separate
Python workers that cannot open the store — and return Arrow batches.

``compactlog_keys`` is the Spark engine's phase-one input: the keys, flags and sizes of
the segments of one compaction plan (option ``segments``, JSON), never the payloads.
Column ``pos`` is the entry's offset in its segment, the bit phase two selects by.

A server with ``--auth-tokens`` and TLS takes options ``token`` (the range reads go through
the CompactionEngine service, so an admin token) and ``tlsCa`` (the CA file, read once
where the query is planned and shipped to the executors with the reader).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from compactlog.channels import ChannelSecurity
from compactlog.compactor.two_phase.grpc_adapter import open_channel
from compactlog.errors import InvalidArgument
from compactlog.storage.codec import HAS_KEY
from compactlog.v1 import compactlog_pb2 as pb
from compactlog.v1 import compactlog_pb2_grpc as pb_grpc

SCHEMA = (
    "ledger_id LONG, entry_id LONG, key BINARY, value BINARY, "
    "properties MAP<STRING, STRING>, publish_time TIMESTAMP, event_time TIMESTAMP"
)
KEYS_SCHEMA = "seg INT, pos LONG, flags INT, size LONG, key BINARY"
DEFAULT_ENTRIES_PER_PARTITION = 100_000
ROWS_PER_BATCH = 8192
TRUE = ("true", "1", "yes")


@dataclass(frozen=True)
class RangePartition(InputPartition):  # type: ignore[misc]
    """LEDGER: entries ``first..last`` of a ledger; SEGMENTED (ledger 0): offsets
    ``first..last``. ``seg``/``seg_first``: the plan segment (keys source only)."""

    ledger_id: int
    first: int
    last: int
    compacted: bool = False
    seg: int = 0
    seg_first: int = 0


def split(
    ledger_id: int, first: int, last: int, size: int, compacted: bool = False, seg: int = 0
) -> list[RangePartition]:
    """``first..last`` in ranges of at most ``size`` entries."""
    return [
        RangePartition(ledger_id, lo, min(lo + size - 1, last), compacted, seg, first)
        for lo in range(first, last + 1, size)
    ]


def _option(options: dict[str, str], name: str) -> str:
    value = options.get(name.lower()) or options.get(name)
    if not value:
        raise InvalidArgument(f"the compactlog data source needs option {name!r}")
    return value


def _security(options: dict[str, str]) -> ChannelSecurity:
    """Options ``token`` and ``tlsCa`` (Spark hands option names over lower-cased)."""
    token = options.get("token") or None
    ca = options.get("tlsca") or options.get("tlsCa") or None
    return ChannelSecurity.of(token, ca)


def _size_option(options: dict[str, str]) -> int:
    raw = options.get("entriesperpartition") or str(DEFAULT_ENTRIES_PER_PARTITION)
    size = int(raw)
    if size < 1:
        raise InvalidArgument(f"entriesPerPartition must be >= 1, got {size}")
    return size


class CompactlogDataSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("compactlog")``: a topic, raw or compacted."""

    @classmethod
    def name(cls) -> str:
        return "compactlog"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = dict(self.options)
        return TopicReader(
            _option(opts, "server"),
            _option(opts, "topic"),
            opts.get("readcompacted", "false").lower() in TRUE,
            _size_option(opts),
            schema,
            _security(opts),
        )


class TopicReader(DataSourceReader):  # type: ignore[misc]
    def __init__(
        self,
        server: str,
        topic: str,
        compacted: bool,
        size: int,
        schema: StructType,
        security: ChannelSecurity | None = None,
    ) -> None:
        self.server = server
        self.topic = topic
        self.compacted = compacted
        self.size = size
        self.schema = schema
        self.security = security

    def partitions(self) -> Sequence[InputPartition]:
        """The snapshot: the topic's layout now (later publishes are not read)."""
        channel = open_channel(self.server, self.security)
        try:
            lay = pb_grpc.CompactionEngineStub(channel).GetTopicLayout(
                pb.GetTopicLayoutRequest(topic=self.topic)
            )
        finally:
            channel.close()
        parts: list[RangePartition] = []
        if lay.kind == pb.SEGMENTED:
            if lay.log_end_offset > lay.log_start_offset:
                parts = split(0, lay.log_start_offset, lay.log_end_offset - 1, self.size)
        else:
            for r in lay.compacted_view if self.compacted else lay.raw_view:
                parts += split(r.ledger_id, r.first_entry, r.last_entry, self.size, r.compacted)
        # Spark needs at least one partition; an empty range reads nothing.
        return parts or [RangePartition(0, 1, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        if partition.first > partition.last:
            return
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        channel = open_channel(self.server, self.security)
        try:
            if partition.ledger_id == 0:
                messages = _read_offsets(channel, self.topic, partition)
            else:
                messages = _read_ledger(channel, self.topic, partition)
            rows = _Columns()
            for msg in messages:
                rows.add(msg)
                if rows.count >= ROWS_PER_BATCH:
                    yield rows.batch(arrow_schema)
                    rows = _Columns()
            if rows.count:
                yield rows.batch(arrow_schema)
        finally:
            channel.close()


def _read_ledger(channel: Any, topic: str, part: RangePartition) -> Iterator[pb.Message]:
    req = pb.ReadEntriesRequest(
        topic=topic,
        range=pb.LedgerRange(
            ledger_id=part.ledger_id,
            first_entry=part.first,
            last_entry=part.last,
            compacted=part.compacted,
        ),
    )
    for batch in pb_grpc.CompactionEngineStub(channel).ReadEntries(req):
        for eid, data in zip(batch.entry_ids, batch.entries, strict=True):
            msg = pb.Message.FromString(data)
            if not part.compacted:
                msg.id.ledger_id, msg.id.entry_id = part.ledger_id, eid
            yield msg


def _read_offsets(channel: Any, topic: str, part: RangePartition) -> Iterator[pb.Message]:
    req = pb.ReadRequest(topic=topic, max_messages=part.last - part.first + 1)
    req.message_id.entry_id = part.first
    call = pb_grpc.LogStub(channel).Read(req)
    try:
        for resp in call:
            for msg in resp.messages:
                if msg.id.entry_id > part.last:  # offsets the cleaner removed: past our end
                    return
                yield msg
    finally:
        call.cancel()


class _Columns:
    """Messages gathered column by column into one Arrow batch."""

    def __init__(self) -> None:
        self.count = 0
        self.ledger: list[int] = []
        self.entry: list[int] = []
        self.key: list[bytes | None] = []
        self.value: list[bytes | None] = []
        self.props: list[list[tuple[str, str]]] = []
        self.publish: list[int] = []
        self.event: list[int] = []

    def add(self, m: pb.Message) -> None:
        self.count += 1
        self.ledger.append(m.id.ledger_id)
        self.entry.append(m.id.entry_id)
        self.key.append(m.key if m.HasField("key") else None)
        self.value.append(m.value if m.HasField("value") else None)
        self.props.append(list(m.properties.items()))
        self.publish.append(m.publish_time_ms * 1000)
        self.event.append(m.event_time_ms * 1000)

    def batch(self, schema: pa.Schema) -> pa.RecordBatch:
        columns = [self.ledger, self.entry, self.key, self.value, self.props]
        columns += [self.publish, self.event]
        arrays = [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


class CompactionKeysDataSource(DataSource):  # type: ignore[misc]
    """``compactlog_keys``: phase one's input (options server, topic, segments, size)."""

    @classmethod
    def name(cls) -> str:
        return "compactlog_keys"

    def schema(self) -> str:
        return KEYS_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = dict(self.options)
        segments = [tuple(s) for s in json.loads(_option(opts, "segments"))]
        return KeysReader(
            _option(opts, "server"),
            _option(opts, "topic"),
            segments,
            _size_option(opts),
            schema,
            _security(opts),
        )


class KeysReader(DataSourceReader):  # type: ignore[misc]
    def __init__(
        self,
        server: str,
        topic: str,
        segments: list[tuple[Any, ...]],
        size: int,
        schema: StructType,
        security: ChannelSecurity | None = None,
    ) -> None:
        self.server = server
        self.topic = topic
        self.segments = segments
        self.size = size
        self.schema = schema
        self.security = security

    def partitions(self) -> Sequence[InputPartition]:
        parts: list[RangePartition] = []
        for index, (lid, first, last, compacted) in enumerate(self.segments):
            parts += split(lid, first, last, self.size, bool(compacted), index)
        return parts or [RangePartition(0, 1, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        if partition.first > partition.last:
            return
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        req = pb.ReadKeysRequest(
            topic=self.topic,
            range=pb.LedgerRange(
                ledger_id=partition.ledger_id,
                first_entry=partition.first,
                last_entry=partition.last,
                compacted=partition.compacted,
            ),
        )
        channel = open_channel(self.server, self.security)
        try:
            for b in pb_grpc.CompactionEngineStub(channel).ReadKeys(req):
                flags = np.array(b.flags, dtype=np.int32)
                arrays = [
                    pa.array(np.full(len(flags), partition.seg, dtype=np.int32)),
                    pa.array(np.array(b.entry_ids, dtype=np.int64) - partition.seg_first),
                    pa.array(flags),
                    pa.array(np.array(b.sizes, dtype=np.int64)),
                    pa.array(list(b.keys), type=pa.binary(), mask=(flags & HAS_KEY) == 0),
                ]
                yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
        finally:
            channel.close()
