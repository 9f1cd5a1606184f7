"""``compactlog_keys``, the Spark engine's phase-one input: the keys, flags and sizes of
the segments of one compaction plan (option ``segments``, JSON), never the payloads,
read through the ``CompactionEngine`` service. Column ``pos`` is the entry's offset in
its segment, the bit phase two selects by.

A server with ``--auth-tokens`` and TLS takes options ``token`` (an admin token: the
reads go through the CompactionEngine service) and ``tlsCa`` (the CA file, read once
where the query is planned and shipped to the executors with the reader).

The public ``compactlog`` source (topics as DataFrames, streaming, writes) is
``compactlog.spark``; the engine reads and writes ledgers through its own calls.
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

KEYS_SCHEMA = "seg INT, pos LONG, flags INT, size LONG, key BINARY"
DEFAULT_ENTRIES_PER_PARTITION = 100_000


@dataclass(frozen=True)
class RangePartition(InputPartition):  # type: ignore[misc]
    """Entries ``first..last`` of a ledger, part of plan segment ``seg`` (which begins
    at entry ``seg_first``)."""

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
        raise InvalidArgument(f"the compactlog_keys source needs option {name!r}")
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
