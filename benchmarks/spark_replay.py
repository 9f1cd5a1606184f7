"""A Python data source that costs nothing: the floor of ``compactlog bench spark``'s source.

Spark takes a PySpark Python data source's rows as Arrow batches from a Python worker and
turns each batch back into rows (its reader factory reads no columns, prunes none), so
no such source can be faster than Spark's own side of that hand-over. ``record`` writes
the batches the ``compactlog`` source builds for a topic, partition by partition as it
plans them, to Arrow files; ``ReplaySource`` (``format("compactlog_replay")``, option
``path``) is a Python data source with the same columns whose reader hands Spark those
batches memory-mapped: no server, no gRPC, no column building. A query over it is what
any Python data source of these columns costs Spark on the box, measured in the same run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from compactlog.spark.rows import SCHEMA
from compactlog.spark.source import CompactlogDataSource

__all__ = ["ReplaySource", "record"]

NAME = "compactlog_replay"


def record(options: dict[str, str], cores: int, schema: StructType, into: Path) -> int:
    """Write the batches the source reads with ``options`` (planned for ``cores`` task
    slots, as the session's source plans them) to ``into/part-N.arrow``; the rows written."""
    reader = CompactlogDataSource.with_cores(cores)(options).reader(schema)
    into.mkdir(parents=True, exist_ok=True)
    rows = 0
    for n, partition in enumerate(reader.partitions()):
        batches = list(reader.read(partition))
        if not batches:
            continue
        path = str(into / f"part-{n:04d}.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, batches[0].schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
    return rows


class ReplayReader(DataSourceReader):  # type: ignore[misc]
    """One Spark partition a recorded file, its batches handed out as they lie."""

    def __init__(self, path: str) -> None:
        self.path = path

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(str(p)) for p in sorted(Path(self.path).glob("part-*.arrow"))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # The map stays open while Spark holds the batches; it closes with them.
        batches = pa.ipc.open_file(pa.memory_map(partition.value))
        for i in range(batches.num_record_batches):
            yield batches.get_batch(i)


class ReplaySource(DataSource):  # type: ignore[misc]
    """``format("compactlog_replay")``: the source's columns, from recorded files."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return ReplayReader(self.options["path"])


def register(spark: Any) -> None:
    """Make ``format("compactlog_replay")`` known to ``spark``."""
    spark.dataSource.register(ReplaySource)
